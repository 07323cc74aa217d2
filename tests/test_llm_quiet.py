"""Telling when the event loop only waits for LLM replies (town/llm/quiet.py), and the gateway
telling it against the fake server."""

from __future__ import annotations

import asyncio
import time

import pytest

from standins.llm.server import running
from town.llm.client import open_client
from town.llm.gateway import LLMGateway
from town.llm.quiet import QuietWatch
from town.llm.schemas import EmojiInput
from town.llm.tasks import EMOJI


async def test_after_a_burst_it_tells_how_long_until_the_first_reply() -> None:
    told: list[float] = []
    watch = QuietWatch(told.append, after=0.005)

    async def call(seconds: float) -> None:
        with watch.flying():
            await asyncio.sleep(seconds)

    await asyncio.gather(call(0.05), call(0.05))  # no round trip known yet: nothing to tell
    assert told == []
    await asyncio.gather(*(call(0.05) for _ in range(3)))
    assert len(told) == 1  # once a burst
    assert 0.01 <= told[0] <= 0.05  # the shortest trip, less the time since the burst went out


async def test_a_failed_call_is_no_round_trip() -> None:
    told: list[float] = []
    watch = QuietWatch(told.append, after=0.005)
    with watch.flying():
        await asyncio.sleep(0.05)
    with pytest.raises(OSError), watch.flying():
        raise OSError("connection refused")  # at once: counted, it would leave no wait
    with watch.flying():
        await asyncio.sleep(0.05)
    assert len(told) == 1 and told[0] >= 0.01


async def test_nothing_is_told_while_calls_still_go_out() -> None:
    told_at: list[float] = []
    watch = QuietWatch(lambda _: told_at.append(time.monotonic()), after=0.01)

    sent: list[float] = []

    async def call(delay: float) -> None:
        await asyncio.sleep(delay)
        sent.append(time.monotonic())
        with watch.flying():
            await asyncio.sleep(0.2)

    with watch.flying():
        await asyncio.sleep(0.2)  # a round trip known
    began = time.monotonic()
    await asyncio.gather(*(call(0.005 * n) for n in range(8)))  # one every 5 ms for 35 ms
    # (from the last call as it went out: a loop's timer may fire a little early)
    assert max(sent) - began >= 0.03 and len(told_at) == 1 and told_at[0] - max(sent) >= 0.01


async def test_the_gateway_tells_its_quiet_waits() -> None:
    told: list[float] = []
    async with running(latency_ms=80) as url:
        client = open_client(url, "key", 5.0)
        gateway = LLMGateway(client, model="m", on_quiet=told.append)
        inputs = EmojiInput(action="having coffee")
        began = time.monotonic()
        await gateway.run(EMOJI, inputs)  # the one round trip known when the burst goes out
        first = time.monotonic() - began
        await asyncio.gather(*(gateway.run(EMOJI, inputs) for _ in range(5)))
        await client.close()
    assert len(told) == 1 and 0.01 <= told[0] < first
