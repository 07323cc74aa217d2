"""Pacing: calls queue on our side, timeouts follow latency, concurrency adapts (AIMD)."""

from __future__ import annotations

import asyncio
import math

import pytest

from tests.helpers import settled
from town.llm.pacing import (
    LATENCY_FACTOR,
    PEOPLE_ABOUT_S,
    TIMEOUT_CEILING_S,
    OnWire,
    Pacer,
    WaitedTooLong,
)


def test_a_time_out_halves_the_calls_in_flight_and_answers_grow_them_back() -> None:
    pacer = Pacer(8, 60)
    assert pacer.limit == 2  # before anything is measured
    pacer.limit = 8.0  # grown to its ceiling
    pacer.timed_out()
    assert pacer.limit == 4
    for _ in range(3):
        pacer.timed_out()
    assert pacer.limit == 1  # never below one
    pacer.answered(1.0)
    assert pacer.limit == 2
    pacer.answered(1.0)  # sent alone: the limit was not in use, nothing shows room past it
    assert pacer.limit == 2
    for _ in range(2):
        pacer.answered(1.0, int(pacer.limit))  # sent with the limit full, none slowed
    assert pacer.limit == pytest.approx(2.9)  # about one more slot a round of answers
    for _ in range(200):
        pacer.answered(1.0, int(pacer.limit))
    assert pacer.limit == 8  # never above the configured concurrency


def test_the_timeout_follows_the_slowest_recent_answer_and_backs_off() -> None:
    pacer = Pacer(4, 10)
    assert pacer.timeout_s == 10
    pacer.answered(20)
    assert pacer.timeout_s == 20 * LATENCY_FACTOR
    pacer.timed_out()
    assert pacer.timeout_s == 2 * 20 * LATENCY_FACTOR
    for _ in range(20):
        pacer.timed_out()
    assert pacer.timeout_s == TIMEOUT_CEILING_S
    pacer.answered(1)
    assert pacer.timeout_s == 20 * LATENCY_FACTOR  # still among the recent answers


async def test_calls_past_the_limit_wait_their_turn() -> None:
    pacer = Pacer(2, 60)
    inside, most = 0, 0
    release, full = asyncio.Event(), asyncio.Event()

    async def call() -> None:
        nonlocal inside, most
        async with pacer.slot():
            inside += 1
            most = max(most, inside)
            if inside == 2:
                full.set()
            await release.wait()
            inside -= 1

    calls = [asyncio.create_task(call()) for _ in range(5)]
    await full.wait()
    pacer.timed_out()  # now one at a time
    release.set()
    await asyncio.gather(*calls)
    assert most == 2 and pacer.in_flight == 0


async def test_the_most_urgent_call_waiting_goes_first() -> None:
    pacer = Pacer(1, 60)
    order: list[str] = []
    release = asyncio.Event()

    async def call(name: str, urgency: int) -> None:
        async with pacer.slot(urgency):
            order.append(name)
            await release.wait()

    first = asyncio.create_task(call("planning", 3))
    await settled(lambda: pacer.in_flight == 1)
    waiting = [
        asyncio.create_task(call(name, urgency))
        for name, urgency in (("rating", 4), ("talk", 2), ("visitor", 0), ("plan", 3))
    ]
    await settled(lambda: pacer.waiting == 4)
    release.set()
    await asyncio.gather(first, *waiting)
    assert order == ["planning", "visitor", "talk", "plan", "rating"]


async def test_a_call_cancelled_while_waiting_leaves_the_queue() -> None:
    pacer = Pacer(1, 60)
    release = asyncio.Event()

    async def call(urgency: int) -> None:
        async with pacer.slot(urgency):
            await release.wait()

    first = asyncio.create_task(call(3))
    await settled(lambda: pacer.in_flight == 1)
    gone = asyncio.create_task(call(0))
    later = asyncio.create_task(call(4))
    await settled(lambda: pacer.waiting == 2)
    gone.cancel()
    release.set()
    await asyncio.gather(first, later)
    assert pacer.waiting == 0 and pacer.in_flight == 0


def test_a_one_slot_server_is_learned_from_latency_growing_with_calls_in_flight() -> None:
    pacer = Pacer(8, 60)
    for sent_with in range(1, 9):  # a burst of eight, each waiting for those ahead
        pacer.answered(1.0 * sent_with, sent_with)
    assert pacer.limit == 1
    for _ in range(10):
        pacer.answered(1.0, 1)
    assert pacer.limit == 1  # alone, it answers in one service time: still one slot


def test_a_four_slot_server_is_learned_near_four() -> None:
    pacer = Pacer(16, 60)
    for _ in range(3):
        for sent_with in range(1, 13):  # four answered at once, then four more a round
            pacer.answered(1.0 * math.ceil(sent_with / 4), sent_with)
    assert 3 <= pacer.limit <= 5


def test_a_server_that_keeps_up_is_given_every_slot() -> None:
    pacer = Pacer(8, 60)
    for _ in range(6):
        for sent_with in range(1, 9):
            pacer.answered(1.0, sent_with)
    assert pacer.limit == 8


def test_the_wait_expected_counts_the_calls_ahead() -> None:
    pacer = Pacer(1, 60)
    assert pacer.expected_wait_s(4) == 0  # nothing measured yet
    pacer.answered(2.0)
    pacer.limit = 1.0
    pacer.in_flight = 1
    pacer._waiting = [(0, 1), (3, 2), (4, 3)]
    assert pacer.expected_wait_s(0) == 4.0  # the one in flight and the visitor's
    assert pacer.expected_wait_s(4) == 8.0


async def test_a_call_out_of_patience_leaves_the_queue_unsent() -> None:
    pacer = Pacer(1, 60)
    release = asyncio.Event()

    async def call(urgency: int, patience: float | None = None) -> None:
        async with pacer.slot(urgency, patience):
            await release.wait()

    first = asyncio.create_task(call(0))
    await settled(lambda: pacer.in_flight == 1)
    later = asyncio.create_task(call(4))  # waits as long as it takes
    with pytest.raises(WaitedTooLong):
        await call(4, patience=0.01)  # the slot is held until released: it never gets one
    assert pacer.waiting == 1
    release.set()
    await asyncio.gather(first, later)
    assert pacer.waiting == 0 and pacer.in_flight == 0


def test_the_calls_a_server_answers_in_a_while_count_only_the_slots_it_has_shown() -> None:
    pacer = Pacer(8, 60)
    assert pacer.calls_in(10) is None  # nothing measured
    pacer.answered(1.0)  # sent alone: one slot shown, and the limit, not in use, stays
    pacer.answered(1.0)
    assert pacer.limit == 2 and pacer.calls_in(10) == 10
    for _ in range(4):
        pacer.answered(1.0, 4)  # four at once, none slowed
    assert (pacer.calls_in(10) or 0) >= 40  # four or more at once
    one = Pacer(8, 60)
    for sent_with in (1, 2, 3):
        one.answered(1.0 * sent_with, sent_with)  # a one-slot server
    assert one.limit == 1
    for _ in range(5):
        one.answered(1.0)  # one at a time from now on
    assert one.calls_in(10) == 10


async def test_a_call_at_once_goes_beside_the_limit_but_never_past_the_ceiling() -> None:
    pacer = Pacer(3, 60)
    pacer.limit = 1.0  # (learnt: one call at a time)
    release = asyncio.Event()
    sent: list[str] = []

    async def call(name: str, urgency: int, at_once: bool = False) -> None:
        async with pacer.slot(urgency, at_once=at_once):
            sent.append(name)
            await release.wait()

    town = asyncio.create_task(call("planning", 4))
    await settled(lambda: sent == ["planning"])
    later = asyncio.create_task(call("rating", 5))
    visitors = [asyncio.create_task(call(f"visitor {n}", 0, at_once=True)) for n in range(3)]
    await settled(lambda: len(sent) == 3)
    # two visitors went beside the limit, up to the ceiling; the town's next call and the
    # third visitor wait (the visitor first, when a slot frees)
    assert sent == ["planning", "visitor 0", "visitor 1"] and pacer.in_flight == 3
    release.set()
    await asyncio.gather(town, later, *visitors)
    assert sent[3:] == ["visitor 2", "rating"] and pacer.in_flight == 0


def test_a_server_that_says_its_slots_is_taken_at_its_word() -> None:
    pacer = Pacer(8, 60)
    pacer.told(3)
    assert pacer.known and pacer.limit == 3
    pacer.answered(1.0, sent_with=3)
    pacer.answered(3.0, sent_with=3)  # slowed (a long reply): nothing is learnt from it
    assert pacer.limit == 3
    assert pacer.calls_in(10) == pytest.approx(10 * 3 / 2.0)  # 3 slots, 2 s at the median
    pacer.timed_out()
    assert pacer.limit == 1.5
    pacer.answered(1.0)
    pacer.answered(1.0)
    assert pacer.limit == 3  # back to its slots, never past them
    small = Pacer(2, 60)
    small.told(4)
    assert small.limit == 2  # nor past the configured concurrency


async def test_while_people_are_about_the_town_leaves_them_a_slot() -> None:
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(3)
    release = asyncio.Event()
    sent: list[str] = []

    async def call(name: str, urgency: int, person: bool = False) -> None:
        async with pacer.slot(urgency, person=person):
            sent.append(name)
            await release.wait()

    first = [asyncio.create_task(call(f"plan {n}", 4)) for n in range(3)]
    await settled(lambda: len(sent) == 3)  # nobody about: the town takes every slot
    release.set()
    await asyncio.gather(*first)
    release.clear()
    sent.clear()
    visitor = asyncio.create_task(call("visitor", 0, person=True))
    await settled(lambda: sent == ["visitor"])
    town = [asyncio.create_task(call(f"rating {n}", 5)) for n in range(3)]
    await settled(lambda: len(sent) == 2)  # one rating; one slot stays free
    assert pacer.in_flight == 2 and pacer.waiting == 2
    again = asyncio.create_task(call("visitor again", 0, person=True))
    await settled(lambda: "visitor again" in sent)  # went at once, in the slot left free
    release.set()
    await asyncio.gather(visitor, again, *town)
    release.clear()
    sent.clear()
    now[0] = PEOPLE_ABOUT_S + 1  # nobody about for a while: every slot again
    later = [asyncio.create_task(call(f"plan {n}", 4)) for n in range(3)]
    await settled(lambda: len(sent) == 3)
    release.set()
    await asyncio.gather(*later)


async def test_a_persons_call_that_finds_every_slot_taken_cuts_the_least_urgent_town_call() -> None:
    pacer = Pacer(8, 60)
    pacer.told(2)
    release = asyncio.Event()
    wires: dict[str, OnWire] = {}

    async def call(name: str, urgency: int, *, person: bool = False) -> None:
        async with pacer.slot(urgency, person=person, cuttable=not person) as wire:
            wires[name] = wire
            await asyncio.wait(
                [asyncio.ensure_future(release.wait()), asyncio.ensure_future(wire.cut.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )

    town = [asyncio.create_task(call(n, u)) for n, u in (("rating", 5), ("plan", 4))]
    await settled(lambda: len(wires) == 2)
    first = asyncio.create_task(call("visitor", 0, person=True))
    await settled(lambda: "visitor" in wires)  # the rating was cut, the plan goes on
    assert wires["rating"].cut.is_set() and not wires["plan"].cut.is_set()
    assert pacer.cuts == 1 and wires["visitor"].sent_with == 2
    second = asyncio.create_task(call("visitor again", 0, person=True))
    await settled(lambda: "visitor again" in wires)  # the plan, then; never a person's call
    assert wires["plan"].cut.is_set() and not wires["visitor"].cut.is_set()
    third = asyncio.create_task(call("a third", 0, person=True))
    await settled(lambda: pacer.waiting == 1)
    assert pacer.cuts == 2  # nothing of the town's left to cut: it waits its turn
    release.set()
    await asyncio.gather(*town, first, second, third)
    assert "a third" in wires


def test_a_stream_the_server_ended_for_another_call_shows_it_answers_one_at_a_time() -> None:
    pacer = Pacer(8, 60)
    pacer.interrupted()
    assert pacer.limit == 1
    for _ in range(5):
        pacer.answered(1.0, 2)  # (a call sent beside a cut one is quick: it shows nothing)
    assert pacer.limit == 1 and pacer.known
    told = Pacer(8, 60)
    told.told(3)
    told.interrupted()  # (a server that said its slots is taken at its word)
    assert told.limit == 3


async def test_a_town_call_past_half_its_usual_time_is_left_to_end() -> None:
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(1)
    pacer.answered(2.0)  # a call takes 2 s

    async def person() -> None:
        async with pacer.slot(0, person=True):
            pass

    for elapsed, cut in ((1.2, False), (0.8, True), (2.5, True)):
        now[0] = 10.0
        async with pacer.slot(4, cuttable=True) as town:
            now[0] += elapsed
            waiting = asyncio.create_task(person())
            await settled(lambda: pacer.waiting == 1)
            assert town.cut.is_set() == cut  # (past half of 2 s: the person waits the rest;
        await waiting  # past the whole of it, a long call: its end is not in sight)
    assert pacer.cuts == 2
