"""One bot, many communities: ``bot.runtime.communities`` on the fake Discord (two servers, a
member in both) and the fake LLM, each server founding its own town by slash command."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from adapters.discord.gateway import DiscordGateway
from bot.runtime.communities import Communities
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings, load_settings
from bot.runtime.watch import Watch
from bot.runtime.wiring import Services
from standins.discord.guild import Guild
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import fake_discord, until
from tests.bot.runtime.conftest import Prompts
from tests.factories import MINITOWN
from town.inputs.visit import Visit
from town.memory.vectors import ChromaIndex
from town.store.models import AuditEntry, ChatLine, Community, Memory, Resident, Town, Visitor

WORDS = "zanzibar marmalade"  # said in the first server only


@dataclass
class Host:
    fake: FakeDiscord
    communities: Communities
    now: list[datetime]

    def town_id(self, guild: Guild) -> int:
        row = self.communities.community(guild.id)
        assert row is not None
        return row.town_id

    async def found(self, guild: Guild, by: dict[str, Any], line: str = "found") -> str:
        """``/town line:<line>`` in the server's #general; the answer's text."""
        general = self.fake.channel_named("general", guild=guild)["id"]
        token = await self.fake.slash(by, general, "town", [_line(line)])
        done = await until(lambda: self.fake.interactions[token].followups, within=120)
        return str(done[-1]["content"])


def _line(value: str) -> dict[str, Any]:
    return {"name": "line", "type": 3, "value": value}


@pytest.fixture
async def host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llm: tuple[str, Prompts]
) -> AsyncIterator[Host]:
    ChromaIndex.release_all()
    settings = load_settings(
        data_dir=tmp_path / "data",
        embedder="hash",
        brain="llm",
        llm_base_url=llm[0],
        llm_model="fake",
        community_personas=[str(MINITOWN)],
        tick_seconds=3600,  # the test ticks
        visitor_messages_per_minute=0,
        daily_token_budget=500_000,
        llm_slots=1,  # one call at the server at a time, whichever town makes it
    )
    async with fake_discord(monkeypatch) as fake:
        now = [datetime(2026, 12, 1, tzinfo=UTC)]
        communities = _communities(settings, now)
        fake.add_text_channel("general")
        running = asyncio.create_task(communities.run())
        await until(lambda: fake.commands)  # /town offered in the home server
        yield Host(fake, communities, now)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        communities.services.close()


def _communities(settings: Settings, now: list[datetime]) -> Communities:
    services = Services.open(settings)
    return Communities(
        settings,
        services,
        DiscordGateway("test-token", guild_ready_timeout=0.05),
        Watch(services.store),
        Timekeeper(services.store, settings),
        now=lambda: now[0],
    )


async def _second_server(host: Host) -> Guild:
    second = host.fake.add_guild("Second Server")
    host.fake.add_text_channel("general", guild=second)
    await host.fake.invite(second)
    await until(lambda: second.commands)
    return second


async def _morning(host: Host, guild: Guild) -> None:
    engine = host.communities.running[guild.id].runtime.engine
    for _ in range(4):  # 07:30: Isabella at the cafe
        await engine.tick()


def _store_texts(host: Host, town_id: int) -> list[str]:
    with host.communities.services.store.session() as s:
        residents = s.exec(select(Resident.id).where(Resident.town_id == town_id)).all()
        memories = s.exec(select(Memory.text).where(col(Memory.resident_id).in_(residents)))
        chats = s.exec(select(ChatLine.text).where(ChatLine.town_id == town_id))
        audit = s.exec(select(AuditEntry.text).where(AuditEntry.town_id == town_id))
        return [*memories, *chats, *audit]


async def test_two_servers_found_two_towns_and_nothing_crosses(
    host: Host, llm: tuple[str, Prompts]
) -> None:
    fake, prompts = host.fake, llm[1]
    second = await _second_server(host)
    zeph = fake.add_member("Zeph")  # in both servers: two visitors
    fake.add_member("Zeph", guild=second, user=zeph)
    mayor = fake.add_member("Mayor", admin=True)
    keeper = fake.add_member("Keeper", admin=True, guild=second)

    general = fake.channel_named("general")["id"]
    token = await fake.slash(zeph, general, "town", [_line("help")])
    told = (await until(lambda: fake.interactions[token].followups))[-1]["content"]
    assert "no town yet" in told and "found" in told
    assert "Only a member with Manage Server" in await host.found(fake.home, zeph)
    assert "is founded" in await host.found(fake.home, mayor)
    assert "is founded" in await host.found(second, keeper)
    first_id, second_id = host.town_id(fake.home), host.town_id(second)
    assert first_id != second_id
    for guild in (fake.home, second):  # each its own category and channels
        fake.channel_named("hobbs-cafe", guild=guild)
        await _morning(host, guild)

    cafe = fake.channel_named("hobbs-cafe")["id"]
    await fake.member_says(zeph, cafe, f"Isabella, have you tried the {WORDS}?")
    await until(lambda: any(WORDS in p for p in prompts.seen))  # the first town thought of it
    await until(lambda: fake.webhook_messages(cafe))
    for _ in range(3):  # both live
        for guild in (fake.home, second):
            await host.communities.running[guild.id].runtime.engine.tick()
    assert any(WORDS in t for t in _store_texts(host, first_id))

    before = len(prompts.seen)
    other_cafe = fake.channel_named("hobbs-cafe", guild=second)["id"]
    await fake.member_says(zeph, other_cafe, "Isabella, what have you heard lately?")
    await until(lambda: fake.webhook_messages(other_cafe))
    for _ in range(3):
        await host.communities.running[second.id].runtime.engine.tick()
    assert len(prompts.seen) > before  # the second town thought too
    assert not [p for p in prompts.seen[before:] if WORDS in p]
    assert not [t for t in _store_texts(host, second_id) if WORDS in t]
    theirs = [m for m in fake.messages if m["guild_id"] == str(second.id)]
    assert theirs and not [m for m in theirs if WORDS in m["content"]]
    index = host.communities.services.index
    with host.communities.services.store.session() as s:
        mine = set(s.exec(select(Memory.id).join(Resident).where(Resident.town_id == second_id)))
        visitors = s.exec(select(Visitor.town_id).where(Visitor.platform_user_id == zeph["id"]))
        assert sorted(visitors.all()) == sorted([first_id, second_id])
    ns = host.communities.settings.chroma_namespace
    assert set(index.ids(f"{ns}-t{second_id}").tolist()) <= mine  # its vectors, its memories


async def test_removed_from_a_server_the_town_pauses_then_is_forgotten(host: Host) -> None:
    fake = host.fake
    second = await _second_server(host)
    keeper = fake.add_member("Keeper", admin=True, guild=second)
    mayor = fake.add_member("Mayor", admin=True)
    assert "is founded" in await host.found(fake.home, mayor)
    assert "is founded" in await host.found(second, keeper)
    gone = host.town_id(second)

    await fake.remove_bot(second)
    await until(lambda: second.id not in host.communities.running)
    row = host.communities.community(second.id)
    assert row is not None and row.removed_at == host.now[0]
    host.now[0] += timedelta(days=29)
    assert host.communities.forget_removed() == 0  # still waiting for the bot's return

    # removed again while the bot is down: seen as removed once it is back
    await fake.invite(second)
    await until(lambda: second.id in host.communities.running)
    await host.communities.stop_town(second.id)
    fake.guilds[str(second.id)].bot_in = False  # no GUILD_DELETE: nobody was connected
    await host.communities.removed_while_away({fake.guild_id})
    assert host.communities.community(second.id).removed_at == host.now[0]  # type: ignore[union-attr]

    await fake.invite(second)  # invited back: it resumes, its wait over
    await until(lambda: second.id in host.communities.running)
    assert host.communities.community(second.id).removed_at is None  # type: ignore[union-attr]
    await fake.remove_bot(second)
    await until(lambda: second.id not in host.communities.running)
    host.now[0] += timedelta(days=30)
    assert host.communities.forget_removed() == 1
    with host.communities.services.store.session() as s:
        assert s.get(Town, gone) is None
        assert not s.exec(select(Resident).where(Resident.town_id == gone)).all()
        assert s.exec(select(Community.key)).all() == [str(fake.guild_id)]
        assert s.get(Town, host.town_id(fake.home)) is not None  # the other town lives on
    ns = host.communities.settings.chroma_namespace
    assert f"{ns}-t{gone}" not in host.communities.services.index.names()


async def test_an_admin_changes_the_towns_settings_and_a_member_is_refused(host: Host) -> None:
    fake = host.fake
    keepers = await fake.make_role(fake.home, "Town Keepers")
    mayor = fake.add_member("Mayor", admin=True)
    zeph = fake.add_member("Zeph")
    assert "is founded" in await host.found(fake.home, mayor)
    cafe = fake.channel_named("hobbs-cafe")["id"]

    async def town(by: dict[str, Any], line: str) -> dict[str, Any]:
        token = await fake.slash(by, cafe, "town", [_line(line)])
        return dict((await until(lambda: fake.interactions[token].followups))[-1])

    refused = await town(zeph, "settings budget 10")
    assert refused["content"] == "Only admins may use settings." and refused["flags"] & 64
    shown = (await town(mayor, "settings"))["content"]
    assert "daily budget: 500000 tokens" in shown and "persona:" in shown

    first = host.communities.running[fake.guild_id].runtime
    changed = (await town(mayor, "settings budget 9000000"))["content"]
    assert "daily budget: 500000 tokens (the operator's ceiling: 500000)" in changed
    await town(mayor, "settings budget 20000")
    await town(mayor, f"settings admins <@&{keepers['id']}>")
    await until(
        lambda: (
            (live := host.communities.running.get(fake.guild_id)) is not None
            and live.runtime is not first
            and live.runtime.admin_roles == {keepers["id"]}
            and host.communities.gateway.towns.get(fake.guild_id) in live.runtime.adapters
        )
    )  # the town runs again, its /town its own
    live = host.communities.running[fake.guild_id].runtime
    assert live.settings.daily_token_budget == 20000
    assert getattr(live.engine.llm.budget, "limit_tokens", None) == 20000  # its brain's own
    assert "the roles @Town Keepers" in (await town(mayor, "settings"))["content"]

    fake.home.members[zeph["id"]]["roles"].append(keepers["id"])  # given the role
    assert "Only admins" not in (await town(zeph, "settings"))["content"]
    await town(zeph, "settings pace 5 30")  # the town's own speed command
    with host.communities.services.store.session() as s:
        stored = s.get(Town, host.town_id(fake.home))
        assert stored is not None and (stored.minutes_per_tick, stored.tick_seconds) == (5, 30)
    shown = (await town(zeph, "settings"))["content"]
    assert "5 game minutes" in shown or "5 minutes" in shown, shown


async def test_a_member_with_the_founder_role_founds_and_one_without_is_refused(
    host: Host,
) -> None:
    fake = host.fake
    founders = await fake.make_role(fake.home, "town founder")  # the name, in any case
    others = await fake.make_role(fake.home, "Town Keepers")
    zeph = fake.add_member("Zeph", roles=(others["id"],))
    bea = fake.add_member("Bea", roles=(founders["id"],))
    general = fake.channel_named("general")["id"]

    token = await fake.slash(zeph, general, "town", [_line("found")])
    refused = (await until(lambda: fake.interactions[token].followups))[-1]
    assert refused["flags"] & 64  # told privately
    assert "Manage Server or the role @Town Founder" in refused["content"]
    assert host.communities.community(fake.guild_id) is None

    assert "is founded" in await host.found(fake.home, bea)
    assert host.communities.community(fake.guild_id) is not None


async def test_a_busy_towns_rush_does_not_delay_a_quiet_towns_reply(
    host: Host, llm: tuple[str, Prompts]
) -> None:
    """One server slot for two towns: a rush of visitors in one, then one visitor in the other,
    whose reply goes to the model after the call in flight and at most one of the rush's."""
    fake, prompts = host.fake, llm[1]
    second = await _second_server(host)
    assert "is founded" in await host.found(fake.home, fake.add_member("Mayor", admin=True))
    keeper = fake.add_member("Keeper", admin=True, guild=second)
    assert "is founded" in await host.found(second, keeper)
    for guild in (fake.home, second):
        await _morning(host, guild)
    busy = host.communities.running[fake.guild_id].runtime
    quiet = host.communities.running[second.id].runtime
    pacer = busy.engine.llm.pacer
    assert pacer is not None and pacer is quiet.engine.llm.pacer and pacer.slots == 1

    rush = 8
    before = len(prompts.seen)
    prompts.gate.clear()  # the server holds the first call: the others queue in the pacer
    said = [
        asyncio.create_task(
            busy.visitor_says(
                Visit.of("Hobbs Cafe", f"Member {i}", f"Isabella, rushword{i}?", "discord", f"9{i}")
            )
        )
        for i in range(rush)
    ]
    await until(lambda: pacer.waiting == rush - 1)
    said.append(
        asyncio.create_task(
            quiet.visitor_says(
                Visit.of("Hobbs Cafe", "Quinn", "Isabella, quietword?", "discord", "77")
            )
        )
    )
    await until(lambda: pacer.waiting == rush)
    prompts.gate.set()
    await asyncio.gather(*said)

    order = [
        "quiet" if "quietword" in p else "busy"
        for p in prompts.seen[before:]
        if "quietword" in p or "rushword" in p
    ]
    assert order.count("busy") >= rush  # every visitor of the rush was answered by the model
    assert "quiet" in order[:3], order  # the one in flight, at most one of the rush, then it


async def test_foundings_at_once_wait_their_turn_and_all_are_founded(host: Host) -> None:
    """A rush of foundings (a bot invited to many servers) is founded a few at a time, so the
    event loop stays free to acknowledge each member's interaction in time."""
    fake, communities = host.fake, host.communities
    communities._founding = asyncio.Semaphore(1)  # (FOUNDINGS_AT_ONCE is 8)
    second = await _second_server(host)
    founding, most = 0, 0
    found = communities._found

    async def counted(guild: Any, persona: str) -> Any:
        nonlocal founding, most
        founding += 1
        most = max(most, founding)
        try:
            return await found(guild, persona)
        finally:
            founding -= 1

    communities._found = counted  # type: ignore[method-assign]
    mayor = fake.add_member("Mayor", admin=True)
    keeper = fake.add_member("Keeper", admin=True, guild=second)
    answers = await asyncio.gather(host.found(fake.home, mayor), host.found(second, keeper))
    assert all("is founded" in a for a in answers) and most == 1
