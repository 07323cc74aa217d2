"""Pacing: calls queue on our side by urgency, as many go as the server has slots (set, or as
it says), timeouts follow latency, and a person's call may cut a town call short."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.helpers import settled
from town.llm.pacing import (
    LATENCY_FACTOR,
    TIMEOUT_CEILING_S,
    OnWire,
    Pacer,
    WaitedTooLong,
    turn_of,
)


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


async def test_towns_take_turns_within_an_urgency() -> None:
    """A busy town's rush of calls cannot make a quiet town's call wait behind all of them; a
    more urgent call still goes first."""
    pacer = Pacer(1, 60)
    order: list[str] = []
    release = asyncio.Event()

    async def call(town: str, n: int, urgency: int = 2) -> None:
        with turn_of(town):
            async with pacer.slot(urgency):
                order.append(f"{town}{n}")
                await release.wait()

    rush = [asyncio.create_task(call("busy", n)) for n in range(6)]
    await settled(lambda: pacer.in_flight == 1 and pacer.waiting == 5)
    later = [
        asyncio.create_task(call("quiet", 0)),
        asyncio.create_task(call("other", 0)),
        asyncio.create_task(call("quiet", 1)),
        asyncio.create_task(call("visitor", 0, urgency=0)),
    ]
    await settled(lambda: pacer.waiting == 9)
    release.set()
    await asyncio.gather(*rush, *later)
    assert order == [
        "busy0",  # on the wire already
        "visitor0",  # more urgent
        "busy1",  # the round being served: one call of each town
        "quiet0",
        "other0",
        "busy2",
        "quiet1",
        "busy3",
        "busy4",
        "busy5",
    ]


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


def test_the_wait_expected_counts_the_calls_ahead() -> None:
    pacer = Pacer(1, 60)
    assert pacer.expected_wait_s(4) == 0  # nothing measured yet
    pacer.answered(2.0)
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
    assert pacer.cuts == 1
    second = asyncio.create_task(call("visitor again", 0, person=True))
    await settled(lambda: "visitor again" in wires)  # the plan, then; never a person's call
    assert wires["plan"].cut.is_set() and not wires["visitor"].cut.is_set()
    third = asyncio.create_task(call("a third", 0, person=True))
    await settled(lambda: pacer.waiting == 1)
    assert pacer.cuts == 2  # nothing of the town's left to cut: it waits its turn
    release.set()
    await asyncio.gather(*town, first, second, third)
    assert "a third" in wires


async def test_a_town_call_near_its_usual_end_is_left_to_end() -> None:
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(1)
    pacer.answered(2.0)  # a call takes 2 s

    async def person() -> None:
        async with pacer.slot(0, person=True):
            pass

    for elapsed, cut in ((1.6, False), (1.2, True), (2.5, True)):
        now[0] = 10.0
        async with pacer.slot(4, cuttable=True) as town:
            now[0] += elapsed
            waiting = asyncio.create_task(person())
            await settled(lambda: pacer.waiting == 1)
            assert town.cut.is_set() == cut  # (the last quarter of 2 s: the person waits the
        await waiting  # rest; past the whole of it, a long call: its end is not in sight)
    assert pacer.cuts == 2


def test_the_slots_are_as_set_until_the_server_says_within_the_ceiling() -> None:
    pacer = Pacer(1, 60, ceiling=8)
    assert (pacer.slots, pacer.said_by) == (1, "setting")
    pacer.answered(1.0)
    assert pacer.calls_in(10) == 10  # one slot, a call a second
    for _ in range(5):
        pacer.answered(0.2)  # quick answers tell nothing of its slots
    assert pacer.slots == 1
    pacer.told(4)
    assert (pacer.slots, pacer.said_by) == (4, "server")
    pacer.told(32)
    assert pacer.slots == 8  # never past the ceiling (BOTTOWN_LLM_CONCURRENCY)
    assert Pacer(12, 60, ceiling=3).slots == 3


def test_a_stream_the_server_ended_for_another_call_means_one_slot_unless_it_said() -> None:
    pacer = Pacer(4, 60)
    pacer.interrupted()
    assert (pacer.slots, pacer.said_by) == (1, "server")
    told = Pacer(8, 60)
    told.told(3)
    told.interrupted()  # (a server that said its slots is taken at its word)
    assert told.slots == 3


def test_every_slot_taken_or_calls_waiting_is_a_busy_server() -> None:
    pacer = Pacer(2, 60)
    assert not pacer.busy
    pacer.in_flight = 2
    assert pacer.busy
    pacer.in_flight, pacer._waiting = 1, [(3, 1)]
    assert pacer.busy


async def test_a_slot_that_frees_soon_spares_the_other_town_calls() -> None:
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(2)
    pacer.answered(2.0)  # a call takes 2 s

    async def person() -> None:
        async with pacer.slot(0, person=True):
            pass

    async with pacer.slot(4, cuttable=True) as ending:
        now[0] += 1.8  # this one ends in 0.2 s
        async with pacer.slot(5, cuttable=True) as fresh:
            waiting = asyncio.create_task(person())
            await settled(lambda: pacer.waiting == 1)
            assert not fresh.cut.is_set() and not ending.cut.is_set()
            now[0] += 0.5  # the first is past its usual time now: the freshest call is cut
            second = asyncio.create_task(person())
            await settled(lambda: pacer.waiting == 2)
            assert fresh.cut.is_set() and not ending.cut.is_set()
    await asyncio.gather(waiting, second)
    assert pacer.cuts == 1


async def test_on_more_slots_only_the_last_stretch_shared_among_them_is_near_the_end() -> None:
    """On four slots a call's last sixteenth is near its end (a quarter, shared), so a person is
    asked to wait about as often as on one slot, and never longer."""
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(4)
    pacer.answered(2.0)  # a call takes 2 s: its last 0.125 s is near its end
    wires = []
    async with contextlib.AsyncExitStack() as stack:
        for began in (0.0, 0.5, 1.0, 1.5):
            now[0] = began
            wires.append(await stack.enter_async_context(pacer.slot(4, cuttable=True)))
        now[0] = 1.6  # the first is 0.4 s from its end: in the last quarter, not the sixteenth

        async def person() -> None:
            async with pacer.slot(0, person=True):
                pass

        waiting = asyncio.create_task(person())
        await settled(lambda: pacer.waiting == 1)
        assert [w.cut.is_set() for w in wires] == [False, False, False, True]  # the latest
        now[0] = 1.9  # now the first ends within 0.1 s: the next person waits for it
        second = asyncio.create_task(person())
        await settled(lambda: pacer.waiting == 2)
        assert pacer.cuts == 1
    await asyncio.gather(waiting, second)


async def test_a_call_near_its_end_frees_a_slot_for_one_person_not_for_each() -> None:
    now = [0.0]
    pacer = Pacer(8, 60, clock=lambda: now[0])
    pacer.told(2)
    pacer.answered(2.0)  # the last 0.25 s of a call is near its end, on two slots

    async def person() -> None:
        async with pacer.slot(0, person=True):
            pass

    async with pacer.slot(4, cuttable=True) as ending:
        now[0] = 1.0
        async with pacer.slot(4, cuttable=True) as fresh:
            now[0] = 1.8  # the first ends in 0.2 s: the first person waits for it
            first = asyncio.create_task(person())
            await settled(lambda: pacer.waiting == 1)
            assert not ending.cut.is_set() and not fresh.cut.is_set()
            second = asyncio.create_task(person())  # that slot is the first person's
            await settled(lambda: pacer.waiting == 2)
            assert fresh.cut.is_set() and not ending.cut.is_set()  # never the one ending
            assert pacer.cuts == 1
    await asyncio.gather(first, second)
