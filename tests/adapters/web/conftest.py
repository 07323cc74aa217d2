"""A web adapter started on loopback, and an HTTP client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime


@pytest.fixture
async def web(runtime: TownRuntime) -> AsyncIterator[WebAdapter]:
    adapter = WebAdapter(runtime, runtime.store, runtime.town_id, host="127.0.0.1", port=0)
    await adapter.start()
    runtime.adapters.append(adapter)
    yield adapter
    await adapter.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
