"""forget-me, forget, mute, unmute and channel as chat commands, the same on every platform."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlmodel import select

from adapters.core.ports import Caller
from bot.runtime.commands import Commands
from bot.runtime.consent import moderated
from bot.runtime.settings import load_settings
from tests.factories import CAFE_PAIR, MINITOWN, at_cafe, memories, until
from tests.fakes.brain import ScriptedBrain
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.moderation import ModerationEndpoint
from town.llm.port import OfflineBrain
from town.outbox.moderation import Blocklist, ModeratedBrain
from town.store.db import Store
from town.store.models import MutedMember, Visitor
from town.tick.engine import Engine

MEMBER = Caller("slack", "U-ALICE", "Alice", is_admin=False, location="Hobbs Cafe")
ADMIN = Caller("slack", "U-ADA", "Ada", is_admin=True, location="Hobbs Cafe")


@pytest.fixture
async def commands(store: Store, engine: Engine) -> Commands:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    return Commands(engine)


async def test_forget_me_asks_first_then_forgets(commands: Commands, store: Store) -> None:
    engine = commands.engine
    await say(
        engine,
        Visit.of(
            "Hobbs Cafe",
            "Alice",
            "Isabella, I collect teapots shaped like owls",
            platform="slack",
            user_id="U-ALICE",
        ),
    )
    await engine.tick()
    asked = await commands.handle(MEMBER, "forget-me")
    assert asked.private and "forget-me confirm" in asked.text
    with store.session() as s:
        assert s.exec(select(Visitor)).first() is not None  # nothing yet
    done = await commands.handle(MEMBER, "forget-me confirm")
    assert done.ok and "forgotten you" in done.text
    with store.session() as s:
        assert s.exec(select(Visitor)).first() is None
    assert not any("teapots" in m.text for m in memories(store, "Isabella Rodriguez"))
    again = await commands.handle(MEMBER, "forget-me confirm")
    assert "holds nothing of you" in again.text


async def test_forget_is_for_admins_and_an_unknown_name_changes_nothing(
    commands: Commands,
) -> None:
    assert "Only admins" in (await commands.handle(MEMBER, "forget Bob")).text
    unknown = await commands.handle(ADMIN, "forget Bob")
    assert "Nobody called 'Bob'" in unknown.text and "nothing was changed" in unknown.text
    await say(
        commands.engine, Visit.of("Hobbs Cafe", "Bob", "hi all", platform="slack", user_id="U-BOB")
    )
    assert "forgotten bob" in (await commands.handle(ADMIN, "forget bob")).text


async def test_a_muted_members_commands_still_work(commands: Commands, store: Store) -> None:
    assert "Muted" in (await commands.handle(MEMBER, "mute")).text
    assert "Hobbs Cafe" in (await commands.handle(MEMBER, "look")).text
    result = await say(
        commands.engine,
        Visit.of("Hobbs Cafe", "Alice", "Isabella, hello?", platform="slack", user_id="U-ALICE"),
    )
    assert result.replies == []
    assert "Unmuted" in (await commands.handle(MEMBER, "unmute")).text
    with store.session() as s:
        assert s.exec(select(MutedMember)).first() is None


async def test_channel_switches_are_stored_and_shown_in_status(commands: Commands) -> None:
    assert "Only admins" in (await commands.handle(MEMBER, "channel quiet")).text
    assert "now quiet" in (await commands.handle(ADMIN, "channel quiet")).text
    assert "now closed" in (await commands.handle(ADMIN, "channel closed Mueller home")).text
    status = (await commands.handle(ADMIN, "status")).text
    assert "Channels: Hobbs Cafe quiet, Mueller home closed" in status
    bad = await commands.handle(ADMIN, "channel shut")
    assert not bad.ok and "open, quiet, closed" in bad.text
    await commands.handle(ADMIN, "channel open")
    assert "Hobbs Cafe" not in (await commands.handle(ADMIN, "status")).text.split("Channels:")[-1]


async def test_help_lists_the_consent_commands(commands: Commands) -> None:
    member = (await commands.handle(MEMBER, "help")).text
    for name in ("forget-me", "mute", "unmute"):
        assert name in member
    assert "forget <member>" not in member
    admin = (await commands.handle(ADMIN, "help")).text
    assert "forget <member>" in admin and "channel open|quiet|closed" in admin
    assert "confirm" in (await commands.handle(MEMBER, "help forget-me")).text


def test_the_brain_is_moderated_by_the_town_words_and_the_settings(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "town"
    shutil.copytree(MINITOWN, folder)
    (folder / "blocklist.txt").write_text("# ours\nfrobnicate\n", encoding="utf-8")
    settings = load_settings(blocklist="zonk, blarg")
    brain = moderated(ScriptedBrain(), settings, str(folder), store, 1)
    assert isinstance(brain, ModeratedBrain) and len(brain.checks) == 1
    checks = brain.checks[0]
    assert isinstance(checks, Blocklist) and checks.words == ["blarg", "frobnicate", "zonk"]
    with_url = moderated(
        ScriptedBrain(),
        load_settings(moderation_url="http://127.0.0.1:1/v1/moderations"),
        str(MINITOWN),
        store,
        1,
    )
    assert isinstance(with_url, ModeratedBrain)
    assert isinstance(with_url.checks[-1], ModerationEndpoint)
    offline = OfflineBrain()
    assert moderated(offline, settings, str(folder), store, 1) is offline
    plain = ScriptedBrain()
    assert moderated(plain, load_settings(), str(MINITOWN), store, 1) is plain


async def test_forget_me_takes_the_characters_a_member_wrote_as_through_a_proxy_bot(
    commands: Commands, store: Store
) -> None:
    engine = commands.engine
    await say(
        engine,
        Visit.of(
            "Hobbs Cafe",
            "Sparkle",
            "Isabella, glitter is my whole personality",
            platform="discord",
            user_id="4242:Sparkle",
        ),
    )
    await engine.tick()
    member = Caller("discord", "4242", "Alex", is_admin=False, location="Hobbs Cafe")
    done = await commands.handle(member, "forget-me confirm")
    assert "forgotten you" in done.text
    with store.session() as s:
        assert s.exec(select(Visitor)).first() is None
    assert not any("glitter" in m.text for m in memories(store, "Isabella Rodriguez"))
