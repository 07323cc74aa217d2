"""Pacing under Discord's webhook limits: per channel below the cap, one bucket per server."""

from __future__ import annotations

from typing import Any

from adapters.core.delivery import OutboxPump
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.pacing import ServerBucket
from tests.adapters.discord.support import add_event
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.platform import Clock, Sleeps


async def test_a_busy_channel_stays_under_its_webhook_cap(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
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
