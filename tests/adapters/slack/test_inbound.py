"""Members in Slack: signed events and slash commands heard by the town, others refused."""

from __future__ import annotations

import json
import time

import aiohttp
from sqlmodel import col, select

from adapters.slack.adapter import SlackAdapter
from adapters.slack.text import channel_name
from bot.runtime.run import TownRuntime
from standins.slack.workspace import BOT_ID, BOT_USER_ID, FakeSlack
from tests.adapters.slack.support import (
    ADMIN,
    CAFE,
    MEMBER,
    event_callback,
    heard_by,
    heard_count,
    message,
    occupied,
    post,
    post_for_body,
    pump,
    say_in_outbox,
    signed,
    slash,
    visitors,
    whereabouts,
)
from town.store.models import ChatLine, Memory, OutboxEvent, Town


async def test_a_members_message_is_heard_by_the_residents_there(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    occupied = await whereabouts(runtime)
    assert len(occupied) >= 2  # so "not the others" means something
    for n, (area, here) in enumerate(occupied.items()):
        channel = slack.channel_id(channel_name("mini", area))
        status = await post(adapter, message(channel, f"Hello &lt;friends&gt; number {n}!"))
        assert status == 200
        assert heard_by(runtime, f'Alice (a visitor) said: "Hello <friends> number {n}!"') == set(
            here
        )
    [visitor] = visitors(runtime)
    assert (visitor.platform_user_id, visitor.display_name) == (MEMBER, "Alice")

    area, here = next(iter(occupied.items()))
    channel = slack.channel_id(channel_name("mini", area))
    await post(adapter, message(channel, "hello <@U0ADMIN>, see <https://x.example|this>"))
    assert heard_by(runtime, 'said: "hello Ada, see this"') == set(here)  # no @: no ping
    await post(adapter, message(channel, "<!channel> party at <#C0CAFE|cafe> <!here|@here>!"))
    assert heard_by(runtime, 'said: "party at #cafe !"') == set(here)  # markup read, pings gone
    assert len(slack.called("users.info")) == 2  # each member looked up once, then cached


async def test_admin_commands_are_for_admins_only(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    cafe = slack.channel_id(CAFE)

    def paused() -> bool:
        with runtime.store.session() as s:
            return s.exec(select(Town)).one().paused

    assert await post(adapter, slash("pause", MEMBER, cafe, slack, "m"), form=True) == 200
    [refused] = slack.responses
    assert refused["response_type"] == "ephemeral"
    assert refused["text"].startswith("Only admins") and not paused()

    assert await post(adapter, slash("pause", ADMIN, cafe, slack, "a"), form=True) == 200
    assert paused() and slack.responses[-1]["name"] == "a"

    # "@bot town look" from the cafe's channel: private, so ephemeral, about this place
    await post(
        adapter,
        event_callback(
            {"type": "app_mention", "channel": cafe, "user": MEMBER, "text": "<@U0BOT> town look"}
        ),
    )
    look = slack.ephemerals[0]
    assert look["user"] == MEMBER and look["text"].startswith("Hobbs Cafe: a small cafe")
    await post(
        adapter,
        event_callback(
            {"type": "app_mention", "channel": cafe, "user": ADMIN, "text": "<@U0BOT> resume"}
        ),
    )
    assert not paused()

    # the caller's answer is private (ephemeral); a role keeps no ping syntax
    join = "<@U0BOT> town join Alicia &lt;!channel&gt;-baker"
    await post(
        adapter,
        event_callback({"type": "app_mention", "channel": cafe, "user": MEMBER, "text": join}),
    )
    welcome = slack.ephemerals[-1]
    assert welcome["user"] == MEMBER
    assert welcome["text"] == "Welcome, Alicia, -baker. " + (
        "Residents here will notice what you write."
    )
    assert [(v.display_name, v.role) for v in visitors(runtime)] == [("Alicia", "-baker")]


async def test_forged_and_stale_requests_are_rejected(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, here = await occupied(runtime, slack)
    forged = await post(adapter, message(cafe, "forged words"), secret="not-the-secret")
    stale = await post(adapter, message(cafe, "stale words"), ts=int(time.time()) - 6 * 60)
    assert (forged, stale) == (401, 401)
    pause = slash("pause", ADMIN, cafe, slack, "forged")
    assert await post(adapter, pause, form=True, secret="guess") == 401
    assert heard_by(runtime, "words") == set() and visitors(runtime) == []
    assert slack.responses == [] and slack.called("users.info") == []

    assert await post(adapter, message(cafe, "true words")) == 200  # the same path, signed
    assert heard_by(runtime, "true words") == here


async def test_our_own_and_other_bots_messages_are_ignored(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, here = await occupied(runtime, slack)
    ignored = [
        message(cafe, "ours via username", subtype="bot_message", bot_id=BOT_ID, user=None),
        message(cafe, "ours as the bot user", user=BOT_USER_ID),
        message(cafe, "another bot", bot_id="B0OTHER", subtype="bot_message"),
        message(cafe, "an edit", subtype="message_changed"),
        message(cafe, "<@U0BOT> town look"),  # a command, answered by app_mention
    ]
    for payload in ignored:
        assert await post(adapter, payload) == 200
    assert visitors(runtime) == [] and heard_by(runtime, "ours") == set()
    again = message(cafe, "only once please")
    await post(adapter, again)
    await post(adapter, again)  # Slack retries a delivery: heard once
    assert heard_by(runtime, "only once") == here
    assert heard_count(runtime, "only once") == len(here)


async def test_url_verification_and_a_huge_message(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    challenge = {"token": "legacy", "challenge": "c-123", "type": "url_verification"}
    assert await post_for_body(adapter, challenge) == (200, '{"challenge": "c-123"}')
    assert (await post_for_body(adapter, challenge, secret="nope"))[0] == 401

    _, channel, here = await occupied(runtime, slack)
    assert await post(adapter, message(channel, "blah " * 20_000)) == 200  # 100k characters
    assert heard_by(runtime, "blah blah") == here  # heard, cut to the town's limit
    with runtime.store.session() as s:
        longest = max(len(m.text) for m in s.exec(select(Memory)).all())
    assert longest < 2200


async def test_a_message_with_a_file_and_a_thread_reply_sent_to_the_channel_are_heard(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, here = await occupied(runtime, slack)
    files = [{"id": "F1", "name": "menu.png"}]
    assert await post(adapter, message(cafe, "see the menu", subtype="file_share", files=files))
    reply = message(cafe, "and to all of you", subtype="thread_broadcast", thread_ts="1.000001")
    assert await post(adapter, reply) == 200
    assert heard_by(runtime, "see the menu") == here
    assert heard_by(runtime, "and to all of you") == here


async def test_a_malformed_timestamp_is_401_and_a_replayed_command_runs_once(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, _ = await occupied(runtime, slack)
    body = json.dumps(message(cafe, "odd stamp"))
    headers = {"Content-Type": "application/json", **signed(body)}
    headers["X-Slack-Request-Timestamp"] = "yesterday"
    async with (
        aiohttp.ClientSession() as session,
        session.post(adapter.events_url, data=body, headers=headers) as response,
    ):
        assert response.status == 401
    speed = slash("speed 7", ADMIN, cafe, slack, "replayed")
    assert await post(adapter, speed, form=True) == 200
    assert await post(adapter, speed, form=True) == 200  # the same signed request, again
    assert len(slack.responses) == 1


def _answered(runtime: TownRuntime, visitor: str) -> list[str]:
    """The residents who answered ``visitor``, in order."""
    with runtime.store.session() as s:
        rows = s.exec(select(OutboxEvent).order_by(col(OutboxEvent.id))).all()
        return [r.payload["resident"] for r in rows if r.payload.get("reply_to") == visitor]


async def test_a_reply_in_the_thread_of_a_residents_message_is_answered_by_that_resident(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    for _ in range(4):  # 07:30: Isabella and Klaus awake at the cafe
        await runtime.opened.engine.tick()
    assert {"Isabella Rodriguez", "Klaus Mueller"} <= set(
        (await whereabouts(runtime, awake=True))["Hobbs Cafe"]
    )
    cafe = slack.channel_id(CAFE)

    async def klaus_says(text: str) -> str:
        say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", text, f"k:{text}")
        await pump(runtime, adapter, []).deliver_pending()
        (posted,) = [m for m in slack.messages if m["text"] == text]
        return str(posted["ts"])

    async def reply(user: str, name: str, thread: str) -> list[str]:
        """A new member greets Isabella (her thread with them), then replies in ``thread``."""
        slack.add_user(user, name)
        await post(adapter, message(cafe, "Hi Isabella!", user=user))
        await post(adapter, message(cafe, "Is it warm?", user=user, thread_ts=thread))
        first = name.split()[0]
        assert _answered(runtime, first)[0] == "Isabella Rodriguez"
        return _answered(runtime, first)[1:]

    strudel = await klaus_says("The strudel is fresh today.")
    assert await reply("U0AL", "Al Baker", strudel) == ["Klaus Mueller"]
    assert len(slack.called("conversations.replies")) == 1
    assert await reply("U0BO", "Bo Stone", strudel) == ["Klaus Mueller"]
    assert len(slack.called("conversations.replies")) == 1  # the thread's author remembered
    # another app's post under Klaus's name, a member's own message: nobody's words
    other = slack.member_posted(cafe, "U0APP", "I am Klaus", bot_id="B0APP", username="Klaus")
    assert await reply("U0CY", "Cy Hart", other) == ["Isabella Rodriguez"]
    mine = slack.member_posted(cafe, MEMBER, "Klaus Mueller", username="Klaus Mueller")
    assert await reply("U0DI", "Di Moss", mine) == ["Isabella Rodriguez"]
    # the thread out of reach (a scope taken away): heard all the same
    coffee = await klaus_says("Coffee is on me.")
    slack.fail("conversations.replies", error="missing_scope")
    assert await reply("U0ED", "Ed Vale", coffee) == ["Isabella Rodriguez"]


async def test_a_message_empty_once_cleaned_is_refused_privately_and_not_kept(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, channel, _ = await occupied(runtime, slack)
    blanks = ("\u3164", "\ufe0f", "\u2800", "\u0301\u0308")  # blank by Unicode category
    for text in ("\u200b\u200b", "\u202e", "&lt;!here&gt;", *blanks):  # (Slack escapes "<")
        assert await post(adapter, message(channel, text)) == 200
    refusals = [e for e in slack.ephemerals if "empty once cleaned" in e["text"]]
    assert len(refusals) == 7 and all(e["user"] == MEMBER for e in refusals)
    assert visitors(runtime) == []
    with runtime.store.session() as s:
        assert s.exec(select(ChatLine)).all() == []
