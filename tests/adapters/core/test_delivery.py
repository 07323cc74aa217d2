"""Outbox delivery: order per channel, at most once, retries, digests, splitting, two workers."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlmodel import select

from adapters.core.delivery import OutboxPump
from adapters.core.ports import DeliveryError, Outgoing
from tests.factories import T0, town_with_events
from tests.fakes.platform import Clock, FakePlatform, Sleeps
from town.outbox.events import TownEvent, write_outbox
from town.outbox.keys import digest_holds
from town.store.db import Store
from town.store.models import Delivery, Town


def statuses(store: Store, platform: str = "fake") -> list[str]:
    with store.session() as s:
        rows = s.exec(select(Delivery).where(Delivery.platform == platform)).all()
        return sorted(r.status for r in rows)


async def test_each_event_goes_out_once_in_order_per_channel(store: Store) -> None:
    events = [("said", "Cafe", f"line {i}") for i in range(4)] + [
        ("action", "Park", "Isabella is jogging"),
        ("planned", "Cafe", "a plan nobody sees in a channel"),
    ]
    town_id = town_with_events(store, events)
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps())
    assert await pump.deliver_pending() == 5
    cafe = [m.text for m in platform.sent if m.area == "Cafe"]
    assert cafe == ["line 0", "line 1", "line 2", "line 3"]
    park = [m for m in platform.sent if m.area == "Park"]
    assert park[0].author == "" and park[0].text == "☕ Isabella is jogging"
    assert {m.author for m in platform.sent if m.area == "Cafe"} == {"Isabella"}
    assert await pump.deliver_pending() == 0 and len(platform.sent) == 5  # nothing twice
    assert statuses(store) == ["sent"] * 5 + ["skipped"]


async def test_a_429_waits_as_asked_and_the_message_arrives_once(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "hello")])
    platform = FakePlatform(failures=[DeliveryError("429", retry_after=2.5)])
    sleeps = Sleeps()
    pump = OutboxPump(store, town_id, platform, sleep=sleeps)
    assert await pump.deliver_pending() == 1
    assert [m.text for m in platform.sent] == ["hello"] and 2.5 in sleeps.waits
    assert pump.stats.retries == 1


async def test_a_platform_that_stays_down_loses_nothing(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "first"), ("said", "Cafe", "second")])
    platform = FakePlatform(failures=[DeliveryError("502 bad gateway")] * 3)
    pump = OutboxPump(store, town_id, platform, max_attempts=3, sleep=Sleeps())
    assert await pump.deliver_pending() == 0  # gave up this round, released the claim
    assert platform.sent == [] and statuses(store) == [] and pump.stats.released == 1
    assert await pump.deliver_pending() == 2  # the platform is back: both, in order
    assert [m.text for m in platform.sent] == ["first", "second"]


async def test_a_permanent_error_is_recorded_and_not_retried(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "x"), ("said", "Cafe", "y")])
    platform = FakePlatform(failures=[DeliveryError("403 missing access", permanent=True)])
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps())
    await pump.deliver_pending()
    await pump.deliver_pending()
    assert [m.text for m in platform.sent] == ["y"] and statuses(store) == ["failed", "sent"]


async def test_a_crash_mid_send_never_posts_twice(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "maybe posted"), ("said", "Cafe", "next")])

    class Crash(Exception):
        pass

    class CrashingPlatform(FakePlatform):
        async def send(self, message: Outgoing) -> str:
            raise Crash  # the process dies after the claim, before the platform answers

    with pytest.raises(Crash):
        await OutboxPump(store, town_id, CrashingPlatform(name="fake")).deliver_pending()
    assert statuses(store) == ["sending"]
    platform = FakePlatform()
    restarted = OutboxPump(store, town_id, platform, sleep=Sleeps())
    assert restarted.recover() == 1
    await restarted.deliver_pending()
    assert [m.text for m in platform.sent] == ["next"]
    assert statuses(store) == ["sent", "unknown"]


async def test_a_channel_far_behind_folds_its_narration_and_keeps_speech(store: Store) -> None:
    events = [("action", "Cafe", f"narration {i}") for i in range(12)]
    events[4:4] = [("said", "Cafe", f"remark {i}") for i in range(3)]  # ids 5, 6, 7
    town_id = town_with_events(store, events)
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, digest_after=8, sleep=Sleeps())
    assert await pump.deliver_pending() == 15
    digest, *speech = platform.sent
    assert pump.stats.digests == 1 and digest.author == ""
    assert "11 other things happened" in digest.text and "remark" not in digest.text
    assert "09:00 ☕ narration 0" in digest.text and "09:14 ☕ narration 11" in digest.text
    assert digest.key == "digest:1-4,8-15"  # the events it holds, not a range
    assert digest_holds(digest.key) == [1, 2, 3, 4, *range(8, 16)]
    assert [(m.author, m.text) for m in speech] == [("Isabella", f"remark {i}") for i in range(3)]
    assert statuses(store) == ["digested"] * 12 + ["sent"] * 3


async def test_speech_alone_is_never_folded_however_long(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", f"remark {i}") for i in range(12)])
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, digest_after=8, sleep=Sleeps())
    assert await pump.deliver_pending() == 12
    assert [m.text for m in platform.sent] == [f"remark {i}" for i in range(12)]
    assert pump.stats.digests == 0 and statuses(store) == ["sent"] * 12


async def test_a_reply_to_a_visitor_goes_first_and_never_into_a_digest(store: Store) -> None:
    events = [("action", "Cafe", f"narration {i}") for i in range(12)]
    town_id = town_with_events(store, events)
    with store.session() as s:  # a resident's answer to a visitor, written after the backlog
        reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
        write_outbox(s, town_id, "say:1", [reply])
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, digest_after=8, sleep=Sleeps())
    assert await pump.deliver_pending() == 13
    first, digest = platform.sent
    assert (first.author, first.text) == ("Isabella", "Hi Alice!")
    assert "11 other things happened" in digest.text and "Hi Alice" not in digest.text
    assert statuses(store) == ["digested"] * 12 + ["sent"]


async def test_an_answer_posted_at_once_is_tried_once_then_left_to_the_rounds(
    store: Store,
) -> None:
    """A resident's answer is stored first, then posted at once (``post_now``): claimed like
    any post and tried once; when that fails it stays pending and a round posts it, once."""
    town_id = town_with_events(store, [("action", "Cafe", "narration")])
    with store.session() as s:
        reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
        (row,) = write_outbox(s, town_id, "say:a", [reply])
    assert row.id is not None
    platform = FakePlatform(failures=[DeliveryError("down")])
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps())
    assert await pump.post_now([row.id]) == 0  # tried once, not retried here: still pending
    assert pump.stats.retries == 0 and platform.sent == []
    assert await pump.post_now([row.id]) == 1  # only that row, ahead of the narration
    assert [(m.key, m.text) for m in platform.sent] == [(f"{town_id}:say:a:0", "Hi Alice!")]
    assert await pump.deliver_pending() == 1  # the rounds: the narration, not the answer again
    assert [m.text for m in platform.sent] == ["Hi Alice!", "☕ narration"]
    assert await pump.post_now([row.id]) == 0


async def test_long_text_is_split_at_sentences_with_keys_of_their_own(store: Store) -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(30))
    town_id = town_with_events(store, [("said", "Cafe", text)])
    platform = FakePlatform(max_chars=100)
    await OutboxPump(store, town_id, platform, sleep=Sleeps()).deliver_pending()
    parts = [m.text for m in platform.sent]
    assert len(parts) > 1 and all(len(p) <= 100 for p in parts)
    assert " ".join(parts) == text and all(p.endswith(".") for p in parts)
    keys = [m.key for m in platform.sent]
    assert len(set(keys)) == len(keys) and keys[0].endswith("#1")


async def test_two_workers_deliver_each_event_once(store: Store) -> None:
    town_id = town_with_events(store, [("said", area, "hi") for area in "ABCDEFGH"])
    first, second = FakePlatform(), FakePlatform()
    await asyncio.gather(
        OutboxPump(store, town_id, first, sleep=Sleeps()).deliver_pending(),
        OutboxPump(store, town_id, second, sleep=Sleeps()).deliver_pending(),
    )
    areas = sorted(m.area for m in first.sent + second.sent)
    assert areas == list("ABCDEFGH")


async def test_pacing_keeps_a_channel_below_its_rate(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "one"), ("said", "Cafe", "two")])
    sleeps = Sleeps()
    platform = FakePlatform(min_interval_s=1.0)
    await OutboxPump(store, town_id, platform, sleep=sleeps).deliver_pending()
    assert len(platform.sent) == 2 and sleeps.waits and 0.9 < max(sleeps.waits) <= 1.0


async def test_a_revoked_token_pauses_delivery_and_loses_nothing(store: Store) -> None:
    events = [("said", area, f"{area} {i}") for area in ("Cafe", "Park") for i in range(3)]
    town_id = town_with_events(store, events)
    revoked = DeliveryError("token revoked: set a new token", credentials=True)
    platform, clock = FakePlatform(broken=revoked), Clock()
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps(), clock=clock)
    assert await pump.deliver_pending() == 0
    assert pump.paused == "token revoked: set a new token"
    assert platform.tries == 2  # each channel tried once, not retried; nothing marked failed
    assert statuses(store) == []
    clock.now += 30
    assert await pump.deliver_pending() == 0 and platform.tries == 2  # waits before a probe
    clock.now += 31
    assert await pump.deliver_pending() == 0 and platform.tries == 3  # one probe, still broken
    platform.broken = None  # the admin set a new token
    clock.now += 61
    assert await pump.deliver_pending() == 6 and pump.paused == ""
    assert sorted(m.text for m in platform.sent) == sorted(text for _, _, text in events)
    assert [m.text for m in platform.sent if m.area == "Cafe"] == ["Cafe 0", "Cafe 1", "Cafe 2"]
    assert statuses(store) == ["sent"] * 6


async def test_a_channel_shows_the_present_and_folds_what_is_a_tick_behind(store: Store) -> None:
    events = [("said", "Cafe", "Happy Valentine's Day, everyone, and welcome!")]
    events += [("action", "Cafe", f"narration {i}") for i in range(3)]
    events += [("said", "Cafe", "Cheers!"), ("said", "Cafe", "now")]
    town_id = town_with_events(store, events)  # game times 09:00 to 09:05
    with store.session() as s:  # the clock went on: 09:00-09:04 is more than a tick behind
        town = s.get(Town, town_id)
        assert town is not None
        town.clock, town.minutes_per_tick = T0 + timedelta(minutes=15), 10
        s.add(town)
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps())
    assert await pump.deliver_pending() == 6
    scene, present = platform.sent
    assert scene.key == "digest:1-5" and scene.author == ""
    first = scene.text.splitlines()[0]
    assert first.startswith("09:00-09:04: Isabella talked here: “Happy Valentine's Day")
    assert first.endswith("; 3 other things happened:")
    assert "09:04 Isabella: Cheers!" in scene.text  # each line, for the page to open
    assert (present.author, present.text) == ("Isabella", "now")  # 09:05: the present


async def test_no_line_older_than_a_reply_is_posted_alone_after_it(store: Store) -> None:
    town_id = town_with_events(store, [("said", "Cafe", "Pretty well, thanks!")])
    with store.session() as s:
        reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
        (row,) = write_outbox(s, town_id, "say:a", [reply])
        later = TownEvent("said", "Cafe", T0, "Isabella", "Anyone for cake?", {})
        write_outbox(s, town_id, "t2", [later])
    assert row.id is not None
    platform = FakePlatform()
    pump = OutboxPump(store, town_id, platform, sleep=Sleeps())
    assert await pump.post_now([row.id]) == 1
    assert await pump.deliver_pending() == 2
    reply_post, folded, after = platform.sent
    assert reply_post.text == "Hi Alice!"
    assert folded.key == "digest:1" and "Pretty well, thanks!" in folded.text  # never alone
    assert after.text == "Anyone for cake?"  # said after the reply: its own message
