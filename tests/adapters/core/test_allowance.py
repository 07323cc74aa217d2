"""A channel's allowance: a share of the minute kept for replies, and replies never held behind
narration, in the allowance alone and through the outbox pump (clocks injected)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest

from adapters.core.allowance import ChannelAllowance, reserved_for_replies
from adapters.core.delivery import OutboxPump
from tests.factories import T0, town_with_events
from tests.fakes.platform import Clock, FakePlatform, Sleeps
from town.outbox.events import TownEvent, write_outbox
from town.store.db import Store


def test_a_share_of_the_minute_is_kept_for_replies() -> None:
    assert [reserved_for_replies(n) for n in (0, 1, 2, 3, 4, 20, 30)] == [0, 0, 1, 1, 1, 5, 8]
    clock = Clock()
    allowance = ChannelAllowance(20, 0.0, clock=clock)
    for _ in range(15):
        assert allowance.room("Cafe", reply=False) != 0
        allowance.note("Cafe", reply=False)
    assert allowance.room("Cafe", reply=False) == 0  # narration has used its share
    assert allowance.wait("Cafe", reply=False) == pytest.approx(60)
    # replies count only replies against the minute: narration never holds one up
    assert allowance.room("Cafe", reply=True) == 20 and allowance.wait("Cafe", reply=True) == 0
    for _ in range(20):
        allowance.note("Cafe", reply=True)
    assert allowance.room("Cafe", reply=True) == 0
    assert allowance.wait("Cafe", reply=True) == pytest.approx(60)
    assert not allowance.held_by_narration("Cafe")  # replies alone made it wait
    assert ChannelAllowance(0, 0.0).room("Cafe", reply=False) is None
    with pytest.raises(ValueError):
        ChannelAllowance(-1, 0.0)


def test_a_reply_keeps_no_interval_within_the_platforms_pace() -> None:
    clock = Clock()
    allowance = ChannelAllowance(20, 2.5, clock=clock)  # Discord's pace
    allowance.note("Cafe", reply=False)
    assert allowance.wait("Cafe", reply=True) == 0  # not after narration
    assert allowance.narration_gap_s == pytest.approx(4.0)  # 15 a minute, spread evenly
    assert allowance.wait("Cafe", reply=False) == pytest.approx(4.0)
    allowance.note("Cafe", reply=True)
    clock.now += 1
    assert allowance.wait("Cafe", reply=True) == 0  # nor after another reply
    assert allowance.wait("Cafe", reply=False) == pytest.approx(3.0)
    assert not allowance.held_by_narration("Cafe")


def test_past_the_platforms_own_pace_a_reply_waits_as_narration_does_and_is_held() -> None:
    clock = Clock()
    allowance = ChannelAllowance(0, 2.5, clock=clock)  # no minute of ours: 24 a minute at most
    for _ in range(24):
        allowance.note("Cafe", reply=False)
        clock.now += 2.4
    clock.now -= 1.4  # the last narration post went 1 s ago, the first 56.2 s ago
    assert allowance.wait("Cafe", reply=True) == pytest.approx(3.8)  # till the first is gone
    assert allowance.held_by_narration("Cafe")


def test_narration_leaves_free_as_many_posts_as_replies_took() -> None:
    clock = Clock()
    allowance = ChannelAllowance(20, 0.0, clock=clock)
    for _ in range(8):  # a busy minute of answers to visitors
        allowance.note("Cafe", reply=True)
    assert allowance.kept("Cafe") == 8 and allowance.room("Cafe", reply=False) == 4
    clock.now += 61  # a quiet minute after
    assert allowance.kept("Cafe") == 5 and allowance.room("Cafe", reply=False) == 15


async def test_narration_waiting_for_its_turn_folds_what_piled_up(store: Store) -> None:
    town_id = town_with_events(store, [("action", "Cafe", "first")])
    clock, platform = Clock(), FakePlatform()
    pump = OutboxPump(
        store,
        town_id,
        platform,
        channel_per_minute=20,
        tick_s=4.0,
        sleep=Sleeps(clock),
        clock=clock,
    )
    assert await pump.deliver_pending() == 1  # narration's turn: every 4 s at 20 a minute
    with store.session() as s:
        more = [TownEvent("action", "Cafe", T0, "", f"then {n}") for n in range(3)]
        write_outbox(s, town_id, "t2", more)
    clock.now += 1
    assert await pump.deliver_pending() == 3  # at its next turn, in one digest
    assert len(platform.sent) == 2 and "2 other things happened" in platform.sent[-1].text


async def test_narration_flowing_never_holds_a_reply(store: Store) -> None:
    """The demo's pace: narration at the channel's rate, and a reply posted at once."""
    town_id = town_with_events(store, [])
    clock = Clock()
    sleeps = Sleeps(clock)
    platform = FakePlatform(min_interval_s=2.5)
    pump = OutboxPump(store, town_id, platform, channel_per_minute=20, sleep=sleeps, clock=clock)
    for n in range(16):  # a tick's narration at a time, until narration's share is spent
        with store.session() as s:
            line = TownEvent("action", "Cafe", T0, "", f"narration {n}")
            write_outbox(s, town_id, f"t{n}", [line])
        await pump.deliver_pending()
    assert len(platform.sent) == 15 and pump.stats.deferred == 1
    waited = len(sleeps.waits)
    reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
    with store.session() as s:  # an answer to a visitor: stored, then posted at once
        (row,) = write_outbox(s, town_id, "say:a", [reply])
    assert row.id is not None
    assert await pump.post_now([row.id]) == 1
    assert len(sleeps.waits) == waited and pump.stats.held == 0  # it went at once
    assert platform.sent[-1].reply and platform.sent[-1].text == "Hi Alice!"


async def test_a_reply_in_the_outbox_goes_while_narration_waits_for_the_minute(
    store: Store,
) -> None:
    town_id = town_with_events(store, [("action", "Cafe", f"narration {n}") for n in range(2)])
    clock, platform = Clock(), FakePlatform()
    pump = OutboxPump(
        store, town_id, platform, channel_per_minute=3, sleep=Sleeps(clock), clock=clock
    )
    assert await pump.deliver_pending() == 2  # narration's share: two of the minute's three
    with store.session() as s:
        later = TownEvent("action", "Cafe", T0, "", "more narration")
        reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
        write_outbox(s, town_id, "t2", [later, reply])
    assert await pump.deliver_pending() == 1  # the reply, at once; the narration waits
    assert platform.sent[-1].text == "Hi Alice!" and pump.stats.held == 0
    clock.now += 60
    assert await pump.deliver_pending() == 1 and platform.sent[-1].text == "more narration"


async def test_narration_folds_sooner_when_the_minute_cannot_take_it(store: Store) -> None:
    town_id = town_with_events(store, [])
    clock, platform = Clock(), FakePlatform()
    pump = OutboxPump(
        store, town_id, platform, channel_per_minute=20, sleep=Sleeps(clock), clock=clock
    )
    for n in range(10):  # a line a tick: each fits the minute, one by one
        with store.session() as s:
            write_outbox(s, town_id, f"t{n}", [TownEvent("action", "Cafe", T0, "", f"{n}")])
        assert await pump.deliver_pending() == 1
    with store.session() as s:  # fewer than digest_after, more than the 5 narration has left
        more = [TownEvent("action", "Cafe", T0, "", f"busy {n}") for n in range(6)]
        more.insert(3, TownEvent("said", "Cafe", T0, "Klaus", "Busy in here."))
        write_outbox(s, town_id, "busy", more)
    assert await pump.deliver_pending() == 7
    digest, speech = platform.sent[10:]
    assert "5 other things happened" in digest.text and (speech.author, speech.text) == (
        "Klaus",
        "Busy in here.",
    )
    assert pump.stats.digests == 1 and pump.stats.deferred == 0


async def test_a_reply_stored_while_narration_waits_its_turn_goes_first(store: Store) -> None:
    """Through ``run``: news (the reply stored, the wake set) ends narration's wait for the
    platform's interval, and the next round posts the reply before the rest."""
    town_id = town_with_events(store, [("action", "Cafe", f"narration {n}") for n in range(3)])
    clock, platform, wake = Clock(), FakePlatform(min_interval_s=2.5), asyncio.Event()
    naps: list[asyncio.Future[None]] = []

    async def sleep(seconds: float) -> None:  # the first nap lasts until news ends it
        if naps:  # the later ones pass at once, moving the clock on
            clock.now += seconds
            return
        naps.append(asyncio.get_running_loop().create_future())
        await naps[-1]

    async def until(condition: Callable[[], bool]) -> None:
        for _ in range(10_000):  # a guard, not a timing: the state comes, or the test fails
            if condition():
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"the state never came: {[m.text for m in platform.sent]}, {naps}")

    pump = OutboxPump(store, town_id, platform, sleep=sleep, clock=clock)
    delivery = asyncio.create_task(pump.run(wake, poll_s=0.05))
    try:
        await until(lambda: len(platform.sent) == 1 and bool(naps))  # narration 1 waits
        with store.session() as s:
            reply = TownEvent("said", "Cafe", T0, "Isabella", "Hi Alice!", {"reply_to": "Alice"})
            write_outbox(s, town_id, "say:1", [reply])
        wake.set()
        await until(lambda: len(platform.sent) == 4)
        assert naps[0].cancelled() and pump.stats.held == 0
        assert [m.text for m in platform.sent] == [
            "☕ narration 0",
            "Hi Alice!",
            "☕ narration 1",
            "☕ narration 2",
        ]
    finally:
        delivery.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await delivery
