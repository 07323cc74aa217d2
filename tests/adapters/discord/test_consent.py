"""Members decide what the town keeps of them, on Discord: forget-me, mute, and a ban or a kick
in the server forgets the member."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from standins.discord.wire import EPHEMERAL, VIEW_AUDIT_LOG
from tests.adapters.consent_support import PHRASE, held_anywhere, knows, remembered, write_replay
from tests.adapters.discord.support import channel_of, make_adapter, morning, until
from tests.factories import memories
from town.store.models import Visitor


async def _heard(runtime: Any, fake: FakeDiscord, name: str, words: str) -> dict[str, Any]:
    """A member who spoke at the cafe, was heard at the next tick and answered."""
    member = fake.add_member(name)
    await fake.member_says(member, channel_of(runtime, "Hobbs Cafe"), words)
    await until(lambda: _visitor(runtime, member["id"]))
    await runtime.opened.engine.tick()
    assert remembered(runtime, words)
    return member


def _visitor(runtime: Any, user_id: str) -> bool:
    with runtime.store.session() as s:
        return (
            s.exec(select(Visitor).where(Visitor.platform_user_id == user_id)).first() is not None
        )


async def test_forget_me_on_discord_leaves_nothing_of_the_member(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    zeph = await _heard(runtime, fake, "Zephyrine Quill", f"Isabella, {PHRASE}!")
    write_replay(runtime)
    needles = [zeph["id"], "Zephyrine", PHRASE]
    assert held_anywhere(runtime, needles)
    cafe = channel_of(runtime, "Hobbs Cafe")
    await fake.member_says(zeph, cafe, "!town forget-me")
    asked = (await until(lambda: [d for d in fake.direct if d["to"] == zeph["id"]]))[-1]
    assert "forget-me confirm" in asked["content"]
    await fake.member_says(zeph, cafe, "!town forget-me confirm")
    await until(lambda: len([d for d in fake.direct if d["to"] == zeph["id"]]) == 2)
    assert held_anywhere(runtime, needles) == []
    assert not await knows(runtime, "Isabella", "Zephyrine")


async def test_a_muted_member_is_neither_heard_nor_answered_on_discord(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    quinn = fake.add_member("Quinn")
    cafe = channel_of(runtime, "Hobbs Cafe")
    await fake.member_says(quinn, cafe, "!town mute")
    await until(lambda: [d for d in fake.direct if d["to"] == quinn["id"]])
    before = len(fake.webhook_messages())
    await fake.member_says(quinn, cafe, "Isabella, zebra umbrellas for everyone!")
    await fake.member_says(quinn, cafe, "!town look")  # commands still work
    await until(lambda: len([d for d in fake.direct if d["to"] == quinn["id"]]) == 2)
    await runtime.opened.engine.tick()
    await runtime.opened.engine.tick()
    assert not remembered(runtime, "zebra umbrellas") and not remembered(runtime, "Quinn")
    assert not [m for m in fake.webhook_messages()[before:] if "Quinn" in m["content"]]


async def test_a_ban_forgets_the_member_and_a_kick_too_when_the_audit_log_is_visible(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    mod = fake.add_member("Mod", admin=True)
    troll = await _heard(runtime, fake, "Trollope Grim", f"Isabella, {PHRASE}!")
    await fake.ban(troll, mod, reason="spam")
    await until(lambda: not held_anywhere(runtime, [troll["id"], "Trollope", PHRASE]))

    fake.bot_permissions |= VIEW_AUDIT_LOG
    kicked = await _heard(runtime, fake, "Kestrel Marsh", "Isabella, kestrels hover over the marsh")
    await fake.kick(kicked, mod)
    await until(lambda: not held_anywhere(runtime, [kicked["id"], "Kestrel", "kestrels hover"]))

    stays = await _heard(runtime, fake, "Wanderer", "Isabella, wanderers never stay long")
    await fake.leaves(stays)  # a plain leave forgets nobody by default
    await runtime.opened.engine.tick()
    assert any("wanderers never" in m.text for m in memories(runtime.store, "Isabella Rodriguez"))


async def test_a_leave_forgets_when_the_deployment_asks_for_it(
    runtime: Any, fake: FakeDiscord
) -> None:
    runtime.commands.consent.forget_on = frozenset({"ban", "kick", "leave"})
    bot = make_adapter(runtime, fake, member_departures=True)
    await bot.start()
    try:
        await morning(runtime)
        gone = await _heard(runtime, fake, "Fernanda", f"Isabella, {PHRASE}")
        await fake.leaves(gone)
        await until(lambda: not held_anywhere(runtime, [gone["id"], "Fernanda", PHRASE]))
    finally:
        await bot.stop()


def _button(message: dict[str, Any]) -> str:
    (row,) = message["body"]["components"]
    (button,) = row["components"]
    assert button["label"] == "Forget me" and button["style"] == 4
    return str(button["custom_id"])


async def test_forget_me_has_a_private_confirmation_button_only_its_member_can_press(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    zeph = await _heard(runtime, fake, "Zephyrine Quill", f"Isabella, {PHRASE}!")
    other = fake.add_member("Mallory")
    cafe = channel_of(runtime, "Hobbs Cafe")
    token = await fake.slash(
        zeph, cafe, "town", [{"name": "line", "type": 3, "value": "forget-me"}]
    )
    asked = (await until(lambda: fake.interactions[token].followups))[-1]
    assert asked["flags"] & EPHEMERAL and "forget-me confirm" in asked["content"]
    custom_id = _button(asked)

    stranger = await fake.click(other, asked, custom_id)  # not theirs: nothing happens
    await runtime.opened.engine.tick()
    assert not fake.interactions[stranger].callbacks and remembered(runtime, PHRASE)

    pressed = await fake.click(zeph, asked, custom_id)
    done = (await until(lambda: fake.interactions[pressed].followups))[-1]
    assert done["flags"] & EPHEMERAL and "forgotten you" in done["content"]
    assert held_anywhere(runtime, [zeph["id"], "Zephyrine", PHRASE]) == []


async def test_the_button_comes_by_direct_message_to_a_typed_command(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    zeph = await _heard(runtime, fake, "Zephyrine Quill", f"Isabella, {PHRASE}!")
    await fake.member_says(zeph, channel_of(runtime, "Hobbs Cafe"), "!town forget-me")
    asked = (await until(lambda: [d for d in fake.direct if d["to"] == zeph["id"]]))[-1]
    pressed = await fake.click(zeph, asked, _button(asked))
    done = (await until(lambda: fake.interactions[pressed].followups))[-1]
    assert "forgotten you" in done["content"]
    assert not remembered(runtime, PHRASE)


async def test_an_admin_forgets_a_member_by_mention(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    mod = fake.add_member("Mod", admin=True)
    zeph = await _heard(runtime, fake, "Zephyrine Quill", f"Isabella, {PHRASE}!")
    cafe = channel_of(runtime, "Hobbs Cafe")
    await fake.member_says(zeph, cafe, "!town forget Mod")  # members may not
    refused = (await until(lambda: [d for d in fake.direct if d["to"] == zeph["id"]]))[-1]
    assert refused["content"] == "Only admins may use forget."
    await fake.member_says(mod, cafe, f"!town forget <@{zeph['id']}>")
    done = (await until(lambda: [d for d in fake.direct if d["to"] == mod["id"]]))[-1]
    assert "has forgotten" in done["content"]
    assert held_anywhere(runtime, [zeph["id"], "Zephyrine", PHRASE]) == []
