"""Posting to Slack: residents under their own names, nothing that pings, Slack's faults."""

from __future__ import annotations

from sqlmodel import select

from adapters.slack.adapter import SlackAdapter
from adapters.slack.text import channel_name, escape, unescape
from bot.runtime.run import TownRuntime
from tests.adapters.slack.support import (
    CAFE,
    delivery_of,
    message,
    post,
    pump,
    say_in_outbox,
    whereabouts,
)
from tests.fakes.slack_api import (
    FakeSlack,
)
from town.store.models import OutboxEvent


async def test_a_residents_reply_goes_out_under_its_name(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    for _ in range(3):  # 07:20: the early risers are up
        await runtime.opened.engine.tick()
    sleeps: list[float] = []
    await pump(runtime, adapter, sleeps).deliver_pending()  # the ticks' events first
    slack.messages.clear()
    area, resident = next(
        (area, name)
        for area, here in (await whereabouts(runtime, awake=True)).items()
        for name in here
    )
    channel = slack.channel_id(channel_name("mini", area))
    first_name = resident.split()[0]
    await post(adapter, message(channel, f"{first_name}, how is your morning going?"))
    await pump(runtime, adapter, sleeps).deliver_pending()
    with runtime.store.session() as s:
        said = [
            r.payload
            for r in s.exec(select(OutboxEvent).where(OutboxEvent.kind == "said")).all()
            if r.payload.get("to") == "Alice"
        ]
    assert said, "nobody answered the visitor"
    posted = slack.messages_in(channel_name("mini", area))
    narration = [m for m in posted if m["username"] == "mini"]  # the town's own voice
    assert all(m["icon_emoji"] == ":house_with_garden:" for m in narration)
    spoken = [m for m in posted if m not in narration]
    assert [(m["username"], m["text"]) for m in spoken] == [
        (p["resident"], escape(p["text"])) for p in said
    ]
    for reply in spoken:
        assert reply["icon_emoji"].startswith(":") and reply["icon_emoji"].endswith(":")
        assert reply["link_names"] is False and reply["unfurl_links"] is False


async def test_mentions_in_a_residents_text_never_ping(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    text = "Party! <!channel> @here <!everyone> <@U0ADMIN> <!subteam^S0TEAM|@staff> & friends"
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", text, "loud")
    await pump(runtime, adapter, []).deliver_pending()
    [posted] = [m for m in slack.messages if "Party!" in m["text"]]
    assert posted["text"] == escape(text)
    assert "<" not in posted["text"] and "@here" not in posted["text"]
    assert "&lt;!channel&gt;" in posted["text"] and "@\u200dhere" in posted["text"]
    assert posted["username"] == "Isabella Rodriguez"
    assert posted["icon_emoji"] == ":speech_balloon:"
    assert delivery_of(runtime, text).message_id == posted["ts"]


async def test_a_long_text_goes_out_in_readable_parts(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    sentences = [f"Sentence {n} is about <!here> and the cafe." for n in range(200)]
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", " ".join(sentences), "long")
    await pump(runtime, adapter, []).deliver_pending()
    parts = [m["text"] for m in slack.messages_in(CAFE) if "Sentence" in m["text"]]
    # split at 3000 characters before escaping; escaped, far below Slack's 40,000
    assert len(parts) == 3 and all(len(unescape(part)) <= 3000 for part in parts)
    assert " ".join(parts) == escape(" ".join(sentences))  # in order, cut between sentences
    assert all(part.endswith("cafe.") for part in parts)


async def test_a_429_is_retried_after_retry_after_and_posted_once(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    sleeps: list[float] = []
    outbox = pump(runtime, adapter, sleeps)
    await outbox.deliver_pending()
    slack.fail("chat.postMessage", status=429, retry_after=7)
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Slow down, please.", "limited")
    await outbox.deliver_pending()
    tries = [
        c for c in slack.called("chat.postMessage") if c.params["text"] == "Slow down, please."
    ]
    assert len(tries) == 2 and 7.0 in sleeps
    assert len([m for m in slack.messages if m["text"] == "Slow down, please."]) == 1
    assert delivery_of(runtime, "Slow down, please.").status == "sent"

    slack.fail("chat.postMessage", status=500)
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Still here.", "flaky")
    await outbox.deliver_pending()
    assert len([m for m in slack.messages if m["text"] == "Still here."]) == 1
    assert outbox.stats.retries == 2


async def test_an_unknown_error_is_permanent(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.fail("chat.postMessage", error="msg_too_long")
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", "Too long.", "refused")
    await pump(runtime, adapter, []).deliver_pending()
    row = delivery_of(runtime, "Too long.")
    assert row.status == "failed" and "msg_too_long" in row.error
