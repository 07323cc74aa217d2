"""Pacing: calls queue on our side, timeouts follow latency, concurrency adapts (AIMD)."""

from __future__ import annotations

import asyncio

import pytest

from town.llm.pacing import LATENCY_FACTOR, TIMEOUT_CEILING_S, Pacer


def test_a_time_out_halves_the_calls_in_flight_and_answers_grow_them_back() -> None:
    pacer = Pacer(8, 60)
    pacer.timed_out()
    assert pacer.limit == 4
    for _ in range(3):
        pacer.timed_out()
    assert pacer.limit == 1  # never below one
    pacer.answered(1.0)
    assert pacer.limit == 2
    pacer.answered(1.0)
    pacer.answered(1.0)
    assert pacer.limit == pytest.approx(2.9)  # about one more slot a round of answers
    for _ in range(200):
        pacer.answered(1.0)
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
