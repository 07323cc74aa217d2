"""Posting to Slack: residents under their own names, nothing that pings, Slack's faults."""

from __future__ import annotations

from sqlmodel import select

from adapters.slack.adapter import SlackAdapter
from adapters.slack.text import channel_name, escape, unescape
from bot.runtime.run import TownRuntime
from standins.slack.workspace import FakeSlack
from tests.adapters.slack.support import (
    CAFE,
    delivery_of,
    message,
    post,
    pump,
    say_in_outbox,
    whereabouts,
)
from town.store.models import Delivery, OutboxEvent


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


def posts_of(slack: FakeSlack, key: str) -> int:
    """How many posts carry the outbox event written with the tick key ``key``."""
    return sum(1 for _, k, _ in slack.outbox_posts() if k.split(":")[1] == key)


async def test_a_rate_limited_answer_with_200_is_waited_out_not_given_up(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    sleeps: list[float] = []
    slack.fail("chat.postMessage", error="rate_limited", retry_after=4)
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Easy now.", "easy")
    await pump(runtime, adapter, sleeps).deliver_pending()
    assert 4.0 in sleeps and posts_of(slack, "easy") == 1
    assert delivery_of(runtime, "Easy now.").status == "sent"


async def test_a_post_stored_before_a_failure_is_found_and_never_posted_twice(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    outbox = pump(runtime, adapter, [])
    await outbox.deliver_pending()
    faults = [
        {"error": "fatal_error"},
        {"error": "internal_error"},
        {"status": 500},
        {"status": 503},
        {"drop": True},
    ]
    for n, fault in enumerate(faults):
        slack.fail("chat.postMessage", stored=True, **fault)  # type: ignore[arg-type]
        say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", f"Only once {n}.", f"once-{n}")
        await outbox.deliver_pending()
        assert posts_of(slack, f"once-{n}") == 1, fault
        row = delivery_of(runtime, f"Only once {n}.")
        assert row.status == "sent" and row.message_id == slack.outbox_posts()[-1][2]
    lookups = slack.called("conversations.history")
    assert len(lookups) == len(faults) and all(
        c.params["include_all_metadata"] in ("1", "true", True) for c in lookups
    )


async def test_a_failure_before_the_post_was_stored_posts_it_after_looking(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.fail("chat.postMessage", error="fatal_error")  # not stored
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Try again.", "again")
    await pump(runtime, adapter, []).deliver_pending()
    assert posts_of(slack, "again") == 1 and len(slack.called("conversations.history")) == 1


async def test_a_delivery_run_with_one_failure_in_five_posts_each_event_once(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    outbox = pump(runtime, adapter, [])
    await outbox.deliver_pending()
    kinds = [{"error": "fatal_error"}, {"status": 502}, {"drop": True}, {"error": "internal_error"}]
    keys = [f"run-{n}" for n in range(20)]
    for n, key in enumerate(keys):
        area = ("Hobbs Cafe", "Mueller home", "Rodriguez home")[n % 3]  # no digests
        say_in_outbox(runtime, area, "Klaus Mueller", f"Line {n}.", key)
    for kind in kinds:  # 4 of 20 first tries store the post, then fail
        slack.fail("chat.postMessage", stored=True, **kind)  # type: ignore[arg-type]
    while await outbox.deliver_pending():
        pass
    assert {key: posts_of(slack, key) for key in keys} == {key: 1 for key in keys}
    assert outbox.stats.retries == 4


async def test_a_token_revoked_mid_run_pauses_and_restored_loses_nothing(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    now = [1000.0]
    outbox = pump(runtime, adapter, [])
    outbox.clock = lambda: now[0]
    await outbox.deliver_pending()
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Before.", "before")
    await outbox.deliver_pending()
    slack.auth_error = "token_revoked"
    keys = [f"waiting-{n}" for n in range(5)]
    for n, key in enumerate(keys):
        say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", f"Waiting {n}.", key)
    assert await outbox.deliver_pending() == 0
    assert "token_revoked" in outbox.paused and "BOTTOWN_SLACK_BOT_TOKEN" in outbox.paused
    assert "PAUSED" in adapter.status_line() and "reinstall" in adapter.status_line()
    with runtime.store.session() as s:
        assert not s.exec(select(Delivery).where(Delivery.status == "failed")).all()
    slack.auth_error = ""  # a new token, as the admin fixed it
    now[0] += outbox.credentials_retry_s
    assert await outbox.deliver_pending() == 5
    assert [posts_of(slack, key) for key in ["before", *keys]] == [1] * 6
    assert outbox.paused == "" and "PAUSED" not in adapter.status_line()


async def test_a_missing_scope_says_which_one(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    outbox = pump(runtime, adapter, [])
    await outbox.deliver_pending()
    slack.auth_error, slack.needed_scope = "missing_scope", "chat:write.customize"
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Scoped.", "scoped")
    await outbox.deliver_pending()
    assert "chat:write.customize" in outbox.paused and "reinstall" in outbox.paused
    assert posts_of(slack, "scoped") == 0
