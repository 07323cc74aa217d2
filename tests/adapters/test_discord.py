"""The Discord adapter: the real discord.py client against a fake Discord on loopback.

``tests.fakes.discord_server.FakeDiscord`` speaks Discord's REST API and gateway; discord.py is
pointed at it by its two base URLs and is otherwise exactly what runs against the real service.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import discord
import pytest
import yarl
from sqlmodel import select

from adapters.core.base import DeliveryError, Outgoing
from adapters.core.delivery import OutboxPump
from adapters.discord.adapter import (
    ZWSP,
    DiscordAdapter,
    _delivery_error,
    channel_name,
    escape_mentions,
    webhook_name,
)
from tests.factories import memories, resident
from tests.fakes.discord_server import (
    EPHEMERAL,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILDS,
    INTENT_MESSAGE_CONTENT,
    FakeDiscord,
    _pinged,
)
from tests.fakes.platform import Sleeps
from town.store.models import ChannelLink, Delivery, OutboxEvent, Resident, Town, Visitor
from town.tick.state import ResidentState

AREAS = {
    "Hobbs Cafe": "hobbs-cafe",
    "Rodriguez home": "rodriguez-home",
    "Mueller home": "mueller-home",
}


async def until(check: Callable[[], Any], within: float = 30.0) -> Any:
    """Wait for ``check()`` to be true (the gateway and the handlers are asynchronous)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not (result := check()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        await asyncio.sleep(0.01)
    return result


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    server = await FakeDiscord().start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url)
    )
    yield server
    await server.stop()


def make_adapter(runtime: Any, **options: Any) -> DiscordAdapter:
    return DiscordAdapter(
        runtime,
        runtime.store,
        runtime.town_id,
        token="test-token",
        guild_ready_timeout=0.05,
        **options,
    )


@pytest.fixture
async def adapter(runtime: Any, fake: FakeDiscord) -> AsyncIterator[DiscordAdapter]:
    bot = make_adapter(runtime)
    await bot.start()
    runtime.adapters.append(bot)
    yield bot
    await bot.stop()


def links(runtime: Any) -> dict[str, ChannelLink]:
    with runtime.store.session() as s:
        rows = s.exec(select(ChannelLink).where(ChannelLink.platform == "discord")).all()
        return {row.area: row for row in rows}


def channel_of(runtime: Any, area: str) -> str:
    return links(runtime)[area].channel_id


def pump(runtime: Any, bot: DiscordAdapter, sleep: Sleeps | None = None) -> OutboxPump:
    return OutboxPump(runtime.store, runtime.town_id, bot, sleep=sleep or Sleeps())


def add_event(runtime: Any, area: str, kind: str, resident: str, text: str) -> str:
    """An outbox row as a tick writes it; returns its key."""
    key = f"test:{len(text)}:{text[:20]}:{resident}"
    with runtime.store.session() as s:
        s.add(
            OutboxEvent(
                town_id=runtime.town_id,
                channel=area,
                kind=kind,
                payload={"resident": resident, "text": text},
                game_time=datetime(2023, 2, 13, 8, 0, tzinfo=UTC),
                idempotency_key=key,
            )
        )
    return key


def deliveries(runtime: Any) -> list[Delivery]:
    with runtime.store.session() as s:
        return list(s.exec(select(Delivery).where(Delivery.platform == "discord")).all())


def visitors(runtime: Any) -> set[str]:
    with runtime.store.session() as s:
        return {v.display_name for v in s.exec(select(Visitor)).all()}


def inbox(runtime: Any, name: str) -> list[str]:
    return ResidentState.of(resident(runtime.store, name)).inbox


def paused(runtime: Any) -> bool:
    with runtime.store.session() as s:
        return bool(s.exec(select(Town)).one().paused)


async def morning(runtime: Any) -> None:
    """Four ticks: 07:30, Isabella and Klaus at the cafe, Maria asleep at the Muellers'."""
    for _ in range(4):
        await runtime.opened.engine.tick()
    with runtime.store.session() as s:
        where = {r.name: r.location for r in s.exec(select(Resident)).all()}
    assert where["Isabella Rodriguez"].startswith("Hobbs Cafe"), where
    assert where["Klaus Mueller"].startswith("Hobbs Cafe"), where
    assert where["Maria Lopez"].startswith("Mueller home"), where


def assert_no_mentions(message: dict[str, Any]) -> None:
    """Sent with mentions off (AllowedMentions.none()), and nobody would have been pinged."""
    allowed = message["body"]["allowed_mentions"]
    assert allowed["parse"] == [] and not allowed.get("users") and not allowed.get("roles")
    assert not allowed.get("replied_user") and message["pinged"] == []


def bot_messages(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.messages if m["author"]["id"] == str(fake.app_id)]


# -- provisioning ------------------------------------------------------------------------------


async def test_provisioning_twice_creates_nothing_new(runtime: Any, fake: FakeDiscord) -> None:
    first = make_adapter(runtime)
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
        INTENT_GUILDS | INTENT_GUILD_MESSAGES | INTENT_MESSAGE_CONTENT
    )

    second = make_adapter(runtime)
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
    third = make_adapter(runtime)
    await third.start()
    assert "guild Test Server, message_content intent on" in third.status_line()
    await third.stop()
    assert [len(fake.calls_of(*c)) for c in created] == [4, 3]
    assert {a: (link.channel_id, link.extra) for a, link in links(runtime).items()} == before
    # with no stored hash the commands are uploaded again (once), which is harmless
    assert len(fake.calls_of("PUT", r"/applications/\d+/guilds/\d+/commands")) == 2


# -- visitors ------------------------------------------------------------------------------------


async def test_member_message_is_observed_there_and_the_reply_goes_out_by_webhook(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()  # the ticks' own events first
    posted_before = len(fake.webhook_messages())
    alice = fake.add_member("Alice")
    cafe = channel_of(runtime, "Hobbs Cafe")
    await fake.member_says(alice, cafe, "Isabella, what is on the menu today?")

    quote = 'Alice said: "Isabella, what is on the menu today?"'

    def heard(name: str) -> bool:
        return any(quote in m.text for m in memories(runtime.store, name))

    await until(lambda: heard("Isabella Rodriguez") and heard("Klaus Mueller"))
    maria = memories(runtime.store, "Maria Lopez")
    assert not any("Alice" in m.text for m in maria) and inbox(runtime, "Maria Lopez") == []
    assert visitors(runtime) == {"Alice"}

    sent = await pump(runtime, adapter).deliver_pending()
    assert sent >= 1
    new = fake.webhook_messages()[posted_before:]
    replies = [m for m in new if m["author"]["username"] == "Isabella Rodriguez"]
    assert replies, [m["author"]["username"] for m in new]
    reply = replies[0]
    hook = links(runtime)["Hobbs Cafe"].extra["webhook_id"]
    assert reply["channel_id"] == cafe and reply["webhook_id"] == hook
    assert reply["body"]["username"] == "Isabella Rodriguez"
    assert_no_mentions(reply)
    assert reply["body"]["avatar_url"].startswith("https://cdn.discordapp.com/embed/avatars/")
    assert fake.calls_of("POST", rf"/webhooks/{hook}/[^/]+")[-1].query["wait"] in ("1", "true")
    by_id = {d.message_id: d for d in deliveries(runtime)}
    assert by_id[reply["id"]].status == "sent"


async def test_own_webhook_and_bot_messages_are_ignored(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await runtime.opened.engine.tick()
    cafe = channel_of(runtime, "Hobbs Cafe")
    add_event(runtime, "Hobbs Cafe", "said", "Isabella Rodriguez", "Welcome, everyone!")
    await pump(runtime, adapter).deliver_pending()  # echoed back over the gateway
    await fake.other_bot_says(cafe, "beep boop")
    alice = fake.add_member("Alice")
    fake.closed_dms.add(alice["id"])  # so the private answer goes to the channel
    await fake.member_says(alice, cafe, "!town time")  # the bot's reply is echoed too
    await until(lambda: bot_messages(fake))
    assert not fake.direct
    await fake.member_says(alice, cafe, "Good morning")  # the sentinel: handled last
    await until(lambda: visitors(runtime))
    assert visitors(runtime) == {"Alice"}
    quotes = [
        m.text
        for name in ("Isabella Rodriguez", "Klaus Mueller", "Maria Lopez")
        for m in memories(runtime.store, name)
        if " said: " in m.text
    ]
    assert not any("beep" in q or "Welcome, everyone" in q or "It is" in q for q in quotes)


async def test_message_content_intent_off_mentions_still_work(
    runtime: Any, fake: FakeDiscord
) -> None:
    bot = make_adapter(runtime, message_content=False)
    await bot.start()
    try:
        assert fake.identifies[0]["intents"] == INTENT_GUILDS | INTENT_GUILD_MESSAGES
        assert "intent off (mentions and slash commands only)" in bot.status_line()
        await morning(runtime)
        cafe = channel_of(runtime, "Hobbs Cafe")
        alice = fake.add_member("Alice")
        await fake.member_says(alice, cafe, "I am invisible without the intent")
        asked = await fake.member_says(alice, cafe, "look", mention_bot=True)
        reply = (await until(lambda: fake.direct))[0]  # a private answer: a direct message
        assert reply["to"] == alice["id"] and not bot_messages(fake)
        assert reply["content"].startswith("Hobbs Cafe: a small cafe")
        assert_no_mentions(reply)
        await until(lambda: (cafe, asked["id"], "📬") in fake.reactions)  # marked after the DM
        assert visitors(runtime) == set()  # the blank message was nobody's words
        await fake.member_says(alice, cafe, "hello Isabella, how are you?", mention_bot=True)
        quote = 'Alice said: "hello Isabella, how are you?"'
        await until(lambda: any(quote in m.text for m in memories(runtime.store, "Klaus Mueller")))
    finally:
        await bot.stop()


async def test_a_huge_visitor_message_is_cut_not_fatal(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    alice = fake.add_member("Alice")
    await fake.member_says(alice, channel_of(runtime, "Hobbs Cafe"), "<@&1> " + "bla " * 25_000)
    found = await until(
        lambda: [m for m in memories(runtime.store, "Klaus Mueller") if "Alice said" in m.text]
    )
    assert len(found[0].text) < 2200 and found[0].text.count("bla") < 600
    assert 'said: "@role bla bla' in found[0].text  # mention tags read as names


# -- commands ------------------------------------------------------------------------------------


async def test_admin_command_is_refused_to_members_and_works_for_admins(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    adapter.client.allowed_mentions = None  # replies carry their own AllowedMentions.none()
    cafe = channel_of(runtime, "Hobbs Cafe")
    member, mayor = fake.add_member("Bob"), fake.add_member("Mayor", admin=True)
    await fake.member_says(member, cafe, "!town pause")
    refusal = (await until(lambda: fake.direct))[-1]  # private: by direct message
    assert (refusal["to"], refusal["content"]) == (member["id"], "Only admins may use pause.")
    assert_no_mentions(refusal)
    assert not paused(runtime)

    asked = await fake.member_says(mayor, cafe, "pause", mention_bot=True)
    done = (await until(lambda: bot_messages(fake)))[-1]  # public: in the channel
    assert done["content"].startswith("The clock stops at")
    assert_no_mentions(done)
    assert str(done["body"]["message_reference"]["message_id"]) == asked["id"]
    assert paused(runtime)
    await fake.member_says(mayor, cafe, "!town status")
    status = (await until(lambda: fake.direct[1:]))[-1]
    assert "Discord: guild Test Server, message_content intent on" in status["content"]


async def test_slash_command_defers_then_follows_up(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    cafe = channel_of(runtime, "Hobbs Cafe")
    alice, mayor = fake.add_member("Alice"), fake.add_member("Mayor", admin=True)
    adapter.client.allowed_mentions = None  # follow-ups carry their own AllowedMentions.none()

    def line(value: str) -> list[dict[str, Any]]:
        return [{"name": "line", "type": 3, "value": value}]

    token = await fake.slash(alice, cafe, "town", line('interview Isabella "what is new?"'))
    record = fake.interactions[token]
    await until(lambda: record.followups)
    assert record.callbacks == [{"type": 5, "data": {"flags": EPHEMERAL}}]  # deferred first
    answer = record.followups[0]
    assert answer is record.original and answer["flags"] & EPHEMERAL and answer["content"]
    assert_no_mentions(answer)

    token = await fake.slash(alice, cafe, "town", line("pause"))
    refused = fake.interactions[token]
    await until(lambda: refused.followups)
    assert refused.followups[0]["content"] == "Only admins may use pause."
    assert refused.followups[0]["flags"] & EPHEMERAL and not paused(runtime)

    token = await fake.slash(mayor, cafe, "town", line("pause"))
    public = fake.interactions[token]
    await until(lambda: public.followups)
    assert public.original_deleted and paused(runtime)
    message = public.followups[0]
    assert message["content"].startswith("The clock stops") and not message["flags"] & EPHEMERAL
    assert message in fake.messages  # everyone in the channel sees it
    assert_no_mentions(message)


# -- delivery ------------------------------------------------------------------------------------


async def test_webhook_429_is_retried_and_delivered_exactly_once(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    hook = links(runtime)["Hobbs Cafe"].extra["webhook_id"]
    before = len(fake.calls_of("POST", rf"/webhooks/{hook}/[^/]+"))
    add_event(runtime, "Hobbs Cafe", "said", "Isabella Rodriguez", "The coffee is ready.")
    limited = {"message": "You are being rate limited.", "retry_after": 0.25, "global": False}
    # surfaces from discord.py (no Via header): the pump waits as told and tries again
    fake.fail_next(
        "execute_webhook", 429, limited, {"Retry-After": "1", "X-RateLimit-Reset-After": "0.25"}
    )
    # retried inside discord.py itself (Discord's edge adds a Via header)
    fake.fail_next("execute_webhook", 429, {**limited, "retry_after": 0.05}, {"Via": "1.1 google"})
    sleeps = Sleeps()
    worker = pump(runtime, adapter, sleeps)
    assert await worker.deliver_pending() == 1
    assert 0.25 in sleeps.waits and worker.stats.retries == 1
    assert len(fake.calls_of("POST", rf"/webhooks/{hook}/[^/]+")) - before == 3
    posted = [m for m in fake.webhook_messages() if m["content"] == "The coffee is ready."]
    assert len(posted) == 1
    assert await pump(runtime, adapter, Sleeps()).deliver_pending() == 0  # nothing doubled
    assert len([m for m in fake.webhook_messages() if m["content"] == "The coffee is ready."]) == 1
    sent = [d for d in deliveries(runtime) if d.message_id == posted[0]["id"]]
    assert len(sent) == 1 and sent[0].status == "sent"


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


async def test_forbidden_is_permanent(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Nobody may read this.")
    fake.fail_next("execute_webhook", 403, {"message": "Missing Permissions", "code": 50013})
    worker = pump(runtime, adapter)
    assert await worker.deliver_pending() == 0 and worker.stats.retries == 0
    failed = [d for d in deliveries(runtime) if d.status == "failed"]
    assert len(failed) == 1 and "403" in failed[0].error


async def test_generated_mentions_are_escaped_and_names_sanitised(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    # each send must carry its own AllowedMentions.none(), not lean on the client's default
    # (a webhook built from a stored URL without the client has none)
    adapter.client.allowed_mentions = None
    role = fake.admin_role_id
    text = f"@everyone and @here: party! <@{fake.owner_id}> <@&{role}> <#{fake.guild_id}>"
    add_event(runtime, "Hobbs Cafe", "said", "Clyde of Discord", text)
    add_event(runtime, "Hobbs Cafe", "object", "", "@here the stove is on fire. " * 150)
    assert await pump(runtime, adapter).deliver_pending() == 2
    posted = [
        m for m in fake.webhook_messages() if "party" in m["content"] or "stove" in m["content"]
    ]
    assert len(posted) == 4  # the long narration in three parts
    for message in posted:
        assert_no_mentions(message)
        assert len(message["content"]) <= 2000
        assert _pinged(message["content"], None) == []  # inert even if mentions were allowed
        assert not re.search(r"@(everyone|here)|<@&?\d+>|<#\d+>", message["content"])
    party = posted[0]
    assert f"@{ZWSP}everyone" in party["content"] and "party!" in party["content"]
    assert party["author"]["username"] == "Cl-yde of Disc-ord"
    assert posted[1]["author"]["username"] == runtime.town_name  # the narrator


# -- the text rules ------------------------------------------------------------------------------


def test_text_rules() -> None:
    assert webhook_name("Clyde the DISCORD bot") == "Cl-yde the DISC-ORD bot"
    assert webhook_name("  ") == "Town" and webhook_name("", "Minitown") == "Minitown"
    assert webhook_name("a@b#c:d```e") == "a b c d e"
    assert len(webhook_name("x" * 200)) == 80
    assert escape_mentions("@everyone <@123> <@!4> <@&5> <#6>") == (
        f"@{ZWSP}everyone <@{ZWSP}123> <@!{ZWSP}4> <@&{ZWSP}5> <#{ZWSP}6>"
    )
    compact = escape_mentions("@here <@123> <#6>", compact=True)
    assert len(compact) == len("@here <@123> <#6>") and _pinged(compact, None) == []
    assert _pinged("@here <@123456789012345678>", None) == ["@here", "user:123456789012345678"]
    assert (
        channel_name("Hobbs Cafe") == "hobbs-cafe" and channel_name("Mrs. Moore's") == "mrs-moores"
    )


@pytest.mark.parametrize(
    ("status", "headers", "retry_after", "permanent"),
    [
        (429, {"Retry-After": "3"}, 3.0, False),
        (429, {}, 1.0, False),
        (500, {}, None, False),
        (503, {}, None, False),
        (403, {}, None, True),
        (400, {}, None, True),
    ],
)
def test_http_errors_map_to_delivery_errors(
    status: int, headers: dict[str, str], retry_after: float | None, permanent: bool
) -> None:
    response = SimpleNamespace(status=status, reason="x", headers=headers)
    error = _delivery_error(discord.HTTPException(response, {"message": "no", "code": 1}))  # type: ignore[arg-type]
    assert error.retry_after == retry_after and error.permanent is permanent


async def test_send_to_an_unknown_area_is_permanent(runtime: Any, fake: FakeDiscord) -> None:
    bot = make_adapter(runtime)
    with pytest.raises(DeliveryError) as raised:
        await bot.send(Outgoing("k", "Nowhere", "", "hi"))
    assert raised.value.permanent


async def test_lost_connection_is_a_transient_error(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{dead}/api/v10")
    with pytest.raises(DeliveryError) as raised:
        await adapter.send(Outgoing("k", "Hobbs Cafe", "Klaus Mueller", "Hello?"))
    assert not raised.value.permanent and raised.value.retry_after is None
    assert "unreachable" in str(raised.value)
