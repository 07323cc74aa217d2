"""Discord provisioning: the town's category, channels and webhooks, found again or made again."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from standins.discord.wire import (
    INTENT_GUILD_MESSAGE_REACTIONS,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILD_MODERATION,
    INTENT_GUILDS,
    INTENT_MESSAGE_CONTENT,
    MANAGE_CHANNELS,
    MANAGE_WEBHOOKS,
)
from tests.adapters.discord.support import AREAS, add_event, links, make_adapter, pump
from town.store.models import ChannelLink


async def test_provisioning_twice_creates_nothing_new(runtime: Any, fake: FakeDiscord) -> None:
    # each a new session of the bot, 5 s (of the fake's clock) after the last, as Discord wants
    first = make_adapter(runtime, fake)
    await first.start()
    await first.stop()
    town = runtime.town_name
    category = fake.channel_named(town, type_=4)
    for area, name in AREAS.items():
        channel = fake.channel_named(name)
        assert channel["parent_id"] == category["id"] and area in channel["topic"]
        assert "AI personas" in channel["topic"]
        link = links(runtime)[area]
        hook = fake.webhooks[link.extra["webhook_id"]]
        assert link.channel_id == channel["id"] and hook["channel_id"] == channel["id"]
        assert link.extra["webhook_token"] == hook["token"]
    created = ("POST", r"/guilds/\d+/channels"), ("POST", r"/channels/\d+/webhooks")
    assert [len(fake.calls_of(*c)) for c in created] == [4, 3]
    assert len(fake.calls_of("PUT", r"/applications/\d+/guilds/\d+/commands")) == 1
    assert [c["name"] for c in fake.commands] == ["town"]
    assert fake.identifies[0]["intents"] == (
        INTENT_GUILDS
        | INTENT_GUILD_MESSAGES
        | INTENT_GUILD_MESSAGE_REACTIONS
        | INTENT_MESSAGE_CONTENT
        | INTENT_GUILD_MODERATION
    )

    second = make_adapter(runtime, fake)
    await second.start()
    await second.stop()
    assert [len(fake.calls_of(*c)) for c in created] == [4, 3]  # nothing new
    assert len(fake.calls_of("PUT", r"/applications/\d+/guilds/\d+/commands")) == 1
    assert len(fake.channels) == 4 and len(fake.webhooks) == 3

    # a store that lost its links finds the channels by name and the bot's webhooks by listing
    before = {area: (link.channel_id, link.extra) for area, link in links(runtime).items()}
    with runtime.store.session() as s:
        for row in s.exec(select(ChannelLink)).all():
            s.delete(row)
    third = make_adapter(runtime, fake)
    await third.start()
    assert "guild Test Server, message_content intent on" in third.status_line()
    await third.stop()
    assert [len(fake.calls_of(*c)) for c in created] == [4, 3]
    assert {a: (link.channel_id, link.extra) for a, link in links(runtime).items()} == before
    # with no stored hash the commands are uploaded again (once), which is harmless
    assert len(fake.calls_of("PUT", r"/applications/\d+/guilds/\d+/commands")) == 2


async def test_unknown_webhook_and_deleted_channel_are_made_again(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    old = links(runtime)
    fake.delete_webhook(old["Hobbs Cafe"].extra["webhook_id"])
    await fake.delete_channel(old["Mueller home"].channel_id)
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Still here.")
    add_event(runtime, "Mueller home", "said", "Maria Lopez", "Who took my desk?")
    assert await pump(runtime, adapter).deliver_pending() == 2
    new = links(runtime)
    cafe_hook = new["Hobbs Cafe"].extra["webhook_id"]
    assert cafe_hook != old["Hobbs Cafe"].extra["webhook_id"] and cafe_hook in fake.webhooks
    assert new["Hobbs Cafe"].channel_id == old["Hobbs Cafe"].channel_id
    assert new["Mueller home"].channel_id != old["Mueller home"].channel_id
    remade = fake.channel_named("mueller-home")
    assert remade["parent_id"] == fake.channel_named(runtime.town_name, type_=4)["id"]
    texts = {m["content"]: m["channel_id"] for m in fake.webhook_messages()}
    assert texts["Still here."] == new["Hobbs Cafe"].channel_id
    assert texts["Who took my desk?"] == remade["id"]
    for area in ("Hobbs Cafe", "Mueller home"):  # one failed send each, one through the new
        for link in (old[area], new[area]):
            assert len(fake.calls_of("POST", rf"/webhooks/{link.extra['webhook_id']}/.+")) == 1
    assert len(fake.calls_of("POST", r"/channels/\d+/webhooks")) == 3 + 2
    assert len(fake.calls_of("POST", r"/guilds/\d+/channels")) == 4 + 1


async def started(runtime: Any, fake: FakeDiscord) -> DiscordAdapter:
    bot = make_adapter(runtime, fake)
    await bot.start()  # never raises for a missing permission or a full server
    runtime.adapters.append(bot)
    return bot


async def test_without_manage_channels_the_town_starts_and_says_what_to_grant(
    runtime: Any, fake: FakeDiscord
) -> None:
    fake.bot_permissions &= ~(MANAGE_CHANNELS | MANAGE_WEBHOOKS)
    bot = await started(runtime, fake)
    try:
        status = bot.status_line()
        assert "the bot lacks Manage Channels" in status and "Manage Webhooks" in status
        assert "Hobbs Cafe has no channel" in status
        assert not fake.calls_of("POST", r"/guilds/\d+/channels")
        add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Nobody hears me.")
        await pump(runtime, bot).deliver_pending()  # no channel: recorded, nothing raised
    finally:
        await bot.stop()


async def test_without_manage_webhooks_residents_post_as_the_bot_with_their_names(
    runtime: Any, fake: FakeDiscord
) -> None:
    category = fake.add_text_channel(runtime.town_name, type_=4)
    for name in AREAS.values():
        fake.add_text_channel(name, category["id"])
    fake.bot_permissions &= ~MANAGE_WEBHOOKS
    bot = await started(runtime, fake)
    try:
        assert "Manage Webhooks (meanwhile residents post as the bot" in bot.status_line()
        add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "I speak through the bot.")
        worker = pump(runtime, bot)
        assert await worker.deliver_pending() >= 1
        [line] = [m for m in fake.messages if "through the bot" in m["content"]]
        assert line["author"]["id"] == str(fake.app_id) and line["nonce"]
        assert line["content"] == "**Klaus Mueller:** I speak through the bot."
        assert line["channel_id"] == fake.channel_named("hobbs-cafe")["id"]
    finally:
        await bot.stop()


async def test_a_channel_at_fifteen_webhooks_and_a_full_category_and_server(
    runtime: Any, fake: FakeDiscord
) -> None:
    category = fake.add_text_channel(runtime.town_name, type_=4)
    cafe = fake.add_text_channel("hobbs-cafe", category["id"])
    fake.add_foreign_webhooks(cafe["id"], 15)
    for n in range(49):  # the category holds 50 with the cafe
        fake.add_text_channel(f"filler-{n}", category["id"])
    bot = await started(runtime, fake)
    try:
        assert "Hobbs Cafe: residents post as the bot" in bot.status_line()
        assert "15 webhooks" in bot.status_line()
        second = fake.channel_named(f"{runtime.town_name} 2", type_=4)
        assert fake.channel_named("mueller-home")["parent_id"] == second["id"]
        add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Busy channel, still here.")
        add_event(runtime, "Mueller home", "said", "Maria Lopez", "New room, same me.")
        assert await pump(runtime, bot).deliver_pending() == 2
        assert "**Klaus Mueller:** Busy channel, still here." in [
            m["content"] for m in fake.messages
        ]
    finally:
        await bot.stop()


async def test_a_server_at_500_channels_still_starts(runtime: Any, fake: FakeDiscord) -> None:
    for n in range(500):
        fake.add_text_channel(f"other-{n}")
    bot = await started(runtime, fake)
    try:
        assert "500 channels" in bot.status_line()
    finally:
        await bot.stop()
