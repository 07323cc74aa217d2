"""Pacing under Discord's webhook limits: per channel below the cap, one bucket per server."""

from __future__ import annotations

import asyncio
from typing import Any

from adapters.core.delivery import OutboxPump
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.pacing import ServerBucket
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import add_event
from tests.fakes.platform import Clock, Sleeps
from town.store.models import Town


async def test_a_busy_channel_stays_under_its_webhook_cap(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    with runtime.store.session() as s:  # a slow town: forty lines fit in one of its ticks
        town = s.get(Town, runtime.town_id)
        assert town is not None
        town.tick_seconds = 3600
        s.add(town)
        s.commit()
    worker = OutboxPump(
        runtime.store,
        runtime.town_id,
        adapter,
        sleep=Sleeps(fake.clock),
        clock=fake.clock,
        digest_after=100,  # every line on its own, to press on the cap
    )
    await worker.deliver_pending()
    texts = [f"Remark {n}." for n in range(40)]
    for text in texts:
        add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", text)
    assert await worker.deliver_pending() == 40
    assert fake.throttled == 0 and worker.stats.retries == 0
    cafe = [m["content"] for m in fake.webhook_messages() if m["content"] in texts]
    assert cafe == texts


async def test_the_server_bucket_spaces_all_channels_and_a_429_holds_them_all() -> None:
    clock = Clock()
    sleeps = Sleeps(clock)
    bucket = ServerBucket(0.5, clock=clock, sleep=sleeps)
    times = []
    for _ in range(5):
        await bucket.turn()
        times.append(clock.now - 1000.0)
    assert times == [0.0, 0.5, 1.0, 1.5, 2.0]
    bucket.hold(3.0)  # Discord answered 429: retry after 3 s
    await bucket.turn()
    assert clock.now - 1000.0 == 5.0


async def test_a_reply_takes_the_next_turn_ahead_of_waiting_narration() -> None:
    clock, moves = Clock(), [asyncio.Event()]

    async def sleep(seconds: float) -> None:  # until the test moves the clock on far enough
        until = clock.now + seconds
        while clock.now < until:
            await moves[-1].wait()

    bucket = ServerBucket(0.5, clock=clock, sleep=sleep)
    order: list[str] = []

    async def post(name: str, urgent: bool = False) -> None:
        await bucket.turn(urgent=urgent)
        order.append(f"{name} at {clock.now - 1000.0:g}")

    async def settle() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(post(f"narration {n}")) for n in (1, 2, 3)]
    await settle()  # the first went at once; the others wait for their turns
    tasks.append(asyncio.create_task(post("reply", urgent=True)))
    await settle()
    while not all(task.done() for task in tasks):
        clock.now += 0.5
        moves.append(asyncio.Event())
        moves[-2].set()
        await settle()
    assert order == ["narration 1 at 0", "reply at 0.5", "narration 2 at 1", "narration 3 at 1.5"]
