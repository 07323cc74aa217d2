"""Members in Discord: their messages heard by the residents, their commands answered."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import col, select

from adapters.core.ports import Caller, Reply
from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from standins.discord.wire import (
    EPHEMERAL,
    INTENT_GUILD_MESSAGE_REACTIONS,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILD_MODERATION,
    INTENT_GUILDS,
    SEND_MESSAGES,
)
from tests.adapters.discord.support import (
    add_event,
    assert_no_mentions,
    bot_messages,
    channel_of,
    deliveries,
    inbox,
    links,
    make_adapter,
    morning,
    paused,
    pump,
    until,
    visitors,
)
from tests.factories import memories
from town.store.models import ChatLine, OutboxEvent


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

    quote = 'Alice (a visitor) said: "Isabella, what is on the menu today?"'

    def heard(name: str) -> bool:  # perceived at the next tick: in the inbox till then
        said = [m.text for m in memories(runtime.store, name)] + inbox(runtime, name)
        return any(quote in text for text in said)

    await until(lambda: heard("Isabella Rodriguez") and heard("Klaus Mueller"))
    maria = memories(runtime.store, "Maria Lopez")
    assert not any("Alice" in m.text for m in maria) and inbox(runtime, "Maria Lopez") == []
    assert visitors(runtime) == {"Alice"}

    def answered() -> bool:  # (the words are stored first, then the answer once composed)
        with runtime.store.session() as s:
            said = s.exec(select(OutboxEvent).where(OutboxEvent.kind == "said")).all()
        return any(e.payload.get("reply_to") == "Alice" for e in said)

    await until(answered)
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
        assert fake.identifies[0]["intents"] == (
            INTENT_GUILDS
            | INTENT_GUILD_MESSAGES
            | INTENT_GUILD_MODERATION
            | INTENT_GUILD_MESSAGE_REACTIONS
        )
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
        quote = 'Alice (a visitor) said: "hello Isabella, how are you?"'
        await until(lambda: any(quote in text for text in inbox(runtime, "Klaus Mueller")))
    finally:
        await bot.stop()


async def test_a_huge_visitor_message_is_cut_not_fatal(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    alice = fake.add_member("Alice")
    await fake.member_says(alice, channel_of(runtime, "Hobbs Cafe"), "<@&1> " + "bla " * 25_000)
    found = await until(
        lambda: [t for t in inbox(runtime, "Klaus Mueller") if "Alice (a visitor) said" in t]
    )
    assert len(found[0]) < 2200 and found[0].count("bla") < 600
    assert 'said: "role bla bla' in found[0]  # mention tags read as names, never as pings


async def test_discords_markup_is_read_as_people_see_it_before_the_town_hears_it(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    alice = fake.add_member("Alice")
    line = "<:party:1234> at <t:1676394000:R> for @everyone <a:wave:99>"
    await fake.member_says(alice, channel_of(runtime, "Hobbs Cafe"), line)
    found = await until(
        lambda: [t for t in inbox(runtime, "Klaus Mueller") if "Alice (a visitor) said" in t]
    )
    assert found[0].endswith('said: ":party: at 2023-02-14 17:00 UTC for :wave:"')


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

    await fake.member_says(mayor, cafe, "pause", mention_bot=True)
    done = (await until(lambda: fake.direct[1:]))[-1]  # the caller's answer: private
    assert (done["to"], done["content"][:19]) == (mayor["id"], "The clock stops at ")
    assert_no_mentions(done)
    assert paused(runtime)  # (the channel hears it once, from the town's outbox)
    await fake.member_says(mayor, cafe, "!town status")
    status = (await until(lambda: fake.direct[2:]))[-1]
    assert "Discord: guild Test Server, message_content intent on" in status["content"]


async def test_slash_command_defers_then_follows_up(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter, monkeypatch: pytest.MonkeyPatch
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
    assert paused(runtime)
    message = public.followups[0]  # the caller's answer is private; the outbox tells the channel
    assert message["content"].startswith("The clock stops") and message["flags"] & EPHEMERAL
    assert_no_mentions(message)

    async def everyone_sees(caller: Caller, text: str) -> Reply:  # a command everyone sees
        return Reply(f"You said {text} @everyone")

    monkeypatch.setattr(runtime, "command", everyone_sees)
    token = await fake.slash(mayor, cafe, "town", line("hello"))
    shown = fake.interactions[token]
    await until(lambda: shown.followups)
    assert not shown.original_deleted  # no delete-then-follow-up
    assert shown.followups[0]["content"] == "Answered in the channel."
    assert shown.followups[0]["flags"] & EPHEMERAL
    [message] = [m for m in bot_messages(fake) if "You said hello" in m["content"]]
    assert message["content"].startswith("/town hello (Mayor):")
    assert message["channel_id"] == cafe and not message["flags"] & EPHEMERAL
    assert_no_mentions(message)


async def test_a_slash_command_answered_late_is_refused_like_discord(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    cafe = channel_of(runtime, "Hobbs Cafe")
    alice = fake.add_member("Alice")
    fake.clock.now -= 5  # the interaction was created 5 s ago: too late to answer
    token = await fake.slash(alice, cafe, "town", [{"name": "line", "type": 3, "value": "time"}])
    fake.clock.now += 5
    await until(lambda: fake.calls_of("POST", rf"/interactions/\d+/{token}/callback"))
    assert fake.interactions[token].callbacks == []


async def test_a_proxied_message_is_heard_once_under_the_proxied_name(
    runtime: Any, fake: FakeDiscord
) -> None:
    proxy = fake.add_proxy_bot(466378653216014359, "PluralKit")
    bot = make_adapter(runtime, fake)
    await bot.start()
    try:
        assert bot.proxies.present == ["PluralKit"]

        async def until_deleted(seconds: float) -> None:  # the proxy's delay, as it happens
            await until(lambda: bot.proxies._deleted)

        bot.proxies.sleep = until_deleted
        await morning(runtime)
        alice = fake.add_member("Alice")
        cafe = channel_of(runtime, "Hobbs Cafe")
        await fake.proxy_says(proxy, alice, cafe, "Hello from Starling!", "Starling")

        def heard() -> list[str]:  # perceived at the next tick: in the inbox till then
            said = [m.text for m in memories(runtime.store, "Klaus Mueller")]
            return [t for t in said + inbox(runtime, "Klaus Mueller") if "Hello" in t]

        await until(heard)
        await until(lambda: bot.proxies._deleted)
        await fake.member_says(alice, cafe, "!town time")  # a later message: the first is done
        await until(lambda: fake.calls_of("POST", r"/channels/\d+/messages"))
        assert heard() == ['Starling (a visitor) said: "Hello from Starling!"']
        assert visitors(runtime) == {"Starling"}
    finally:
        await bot.stop()


async def test_a_resident_composing_shows_typing_in_its_channel(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await adapter.typing("Hobbs Cafe", "Isabella Rodriguez")
    assert fake.typing == [channel_of(runtime, "Hobbs Cafe")]
    await adapter.typing("Nowhere", "Isabella Rodriguez")  # no channel: nothing, no error
    fake.bot_permissions &= ~SEND_MESSAGES
    await adapter.typing("Hobbs Cafe", "Isabella Rodriguez")  # refused: best effort
    assert fake.typing == [channel_of(runtime, "Hobbs Cafe")]


def _answered(runtime: Any, visitor: str) -> list[str]:
    """The residents who answered ``visitor``, in order."""
    with runtime.store.session() as s:
        rows = s.exec(select(OutboxEvent).order_by(col(OutboxEvent.id))).all()
        return [r.payload["resident"] for r in rows if r.payload.get("reply_to") == visitor]


async def test_a_reply_to_a_residents_message_is_answered_by_that_resident(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    pump(runtime, adapter).recover()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "The strudel is fresh today.")
    await pump(runtime, adapter).deliver_pending()
    (klaus,) = [m for m in fake.webhook_messages() if "strudel" in m["content"]]
    cafe = channel_of(runtime, "Hobbs Cafe")
    hook = links(runtime)["Hobbs Cafe"].extra["webhook_id"]

    def unseen(author: dict[str, Any], text: str, webhook_id: str | None) -> dict[str, Any]:
        """A message the bot never saw (posted while it was away)."""
        message = fake._message(cafe, text, author, webhook_id=webhook_id)
        fake.messages.append(message)
        return message

    name = {"discriminator": "0000", "bot": True, "avatar": None}
    earlier = unseen({"id": hook, "username": "Klaus Mueller", **name}, "Good night!", hook)
    # a foreign webhook's message under Klaus's name (a proxy's character, another app)
    impostor = unseen({"id": "1234", "username": "Klaus Mueller", **name}, "I am Klaus", "1234")

    async def reply(name: str, to: dict[str, Any], *, resolved: bool = True) -> list[str]:
        member = fake.add_member(name)
        await fake.member_says(member, cafe, "Hi Isabella!")  # her thread with this visitor
        await until(lambda: _answered(runtime, name) == ["Isabella Rodriguez"])
        await fake.member_says(member, cafe, "Is it warm?", reply_to=to, resolved=resolved)
        return list(await until(lambda: (found := _answered(runtime, name)[1:]) and found))

    assert await reply("Alice", klaus) == ["Klaus Mueller"]  # the event carries the message
    assert await reply("Bob", klaus, resolved=False) == ["Klaus Mueller"]  # the bot saw it
    fetched = rf"/channels/{cafe}/messages/{earlier['id']}"
    assert await reply("Cy", earlier, resolved=False) == ["Klaus Mueller"]  # fetched
    assert len(fake.calls_of("GET", fetched)) == 1
    assert await reply("Di", impostor) == ["Isabella Rodriguez"]  # not ours: the thread goes on
    # posted by the bot itself (a channel without our webhook), the name in the text
    as_bot = unseen(fake.bot_user, "**Klaus Mueller:** Guten Morgen!", None)
    assert await reply("Fay", as_bot, resolved=False) == ["Klaus Mueller"]
    fake.messages.remove(earlier)  # deleted before the bot could fetch it: heard all the same
    assert await reply("Ed", earlier, resolved=False) == ["Isabella Rodriguez"]


async def test_a_message_empty_once_cleaned_is_refused_privately_and_not_kept(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    alice = fake.add_member("Alice")
    cafe = channel_of(runtime, "Hobbs Cafe")
    await fake.member_says(alice, cafe, "\u200b\u200b")
    refusal = (await until(lambda: fake.direct))[0]  # private: by direct message
    assert refusal["to"] == alice["id"] and "empty once cleaned" in refusal["content"]
    await fake.member_says(alice, cafe, "@everyone @here")
    await until(lambda: fake.direct[1:])
    for n, blank in enumerate(("\u3164", "\ufe0f", "\u2800", "\u0301\u0308"), start=2):
        await fake.member_says(alice, cafe, blank)  # blank by Unicode category
        await until(lambda n=n: fake.direct[n:])
    assert visitors(runtime) == set()
    with runtime.store.session() as s:
        assert s.exec(select(ChatLine)).all() == []
