"""The daily budget in the store, held by the gateway's reservations: calls made together never
pass it (town/store/usage.py with town/llm/gateway.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from standins.llm.server import running
from tests.helpers import Composed, sample
from town.llm.client import open_client
from town.llm.tasks import EMOJI
from town.llm.usage import RoomyBudget
from town.store.usage import DailyTokenBudget, StoredUsage


async def test_a_daily_call_limit_holds_for_calls_made_together(
    store: Any, town_factory: Any
) -> None:
    usage = StoredUsage(store, town_factory().id)
    budget = DailyTokenBudget(usage, 0, limit_calls=6)
    assert isinstance(budget, RoomyBudget)
    async with running(latency_ms=20) as url:
        client = open_client(url, "key", 5.0, max_retries=1)
        gateway = Composed(client, "m", usage=usage, budget=budget, slots=8)
        await asyncio.gather(*(gateway.run(EMOJI, sample(EMOJI)) for _ in range(12)))
        await client.close()
    usage.flush()
    calls, _ = usage.spent_today()
    assert calls <= 6  # each call held its place before it was sent
    assert gateway.report.as_json()["answers_by_task"]["emoji"]["fallback"] >= 6
