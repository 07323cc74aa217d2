"""What the runtime's tests of many communities share: the fake LLM on loopback, recording
every prompt it was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from standins.llm.server import make_app


@dataclass
class Prompts:
    """Every prompt the fake LLM was sent, in order; while ``gate`` is clear, each is held
    before it is answered (the server busy with it)."""

    seen: list[str] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.gate.set()

    @web.middleware
    async def record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            self.seen.append(json.dumps(await request.json(), ensure_ascii=False))
            await self.gate.wait()
        response: web.StreamResponse = await handler(request)
        return response


@pytest.fixture
async def llm() -> AsyncIterator[tuple[str, Prompts]]:
    prompts = Prompts()
    app = make_app()
    app.middlewares.append(prompts.record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/v1", prompts
    await runner.cleanup()
