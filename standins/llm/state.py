"""What the fake LLM server keeps between requests, and the small helpers its routes share."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from standins.llm import wire
from town.llm.port import OfflineBrain

MODEL = "bottown-fake"
LAST_REQUESTS = 50
CACHED_PROMPTS = 8  # the prompts whose prefixes the fake's cache holds


@dataclass
class FakeState:
    """What the fake server was asked, and the faults still to inject."""

    latency_s: float
    fault_rate: float
    rng: random.Random
    embedder_dim: int
    hang_s: float
    model: str
    slots: int = 0
    overrun_tokens: int = 0
    ignores_stream: bool = False  # a streamed request is answered with the whole body
    says: str = ""  # put before every text of every reply (a model that writes pings, say)
    brain: OfflineBrain = field(default_factory=OfflineBrain)
    queue: deque[str] = field(default_factory=deque)
    by_task: Counter[str] = field(default_factory=Counter)
    by_fault: Counter[str] = field(default_factory=Counter)
    last: deque[Any] = field(default_factory=lambda: deque(maxlen=LAST_REQUESTS))
    prompts: deque[str] = field(default_factory=lambda: deque(maxlen=CACHED_PROMPTS))
    requests: int = 0
    embeddings: int = 0
    tokens: int = 0  # prompt tokens read and completion tokens sent (a stream's: until it is cut)
    in_flight: int = 0  # requests received and not yet answered, waiting ones included
    max_in_flight: int = 0
    serving_now: int = 0  # requests holding a slot (all of them with no slots)
    max_serving: int = 0
    cut: int = 0  # streams whose client left before the end
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    serving: asyncio.Semaphore | None = None  # the slots (None: unlimited)

    def __post_init__(self) -> None:
        if self.slots > 0:
            self.serving = asyncio.Semaphore(self.slots)  # waiters go first come, first served

    def next_fault(self) -> str | None:
        if self.queue:
            return self.queue.popleft()
        if self.fault_rate > 0 and self.rng.random() < self.fault_rate:
            return self.rng.choice(wire.RANDOM_FAULTS)
        return None

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_task": dict(self.by_task),
            "by_fault": dict(self.by_fault),
            "embeddings": self.embeddings,
            "tokens": self.tokens,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "slots": self.slots,
            "max_serving": self.max_serving,
            "cut": self.cut,
            "queued": list(self.queue),
            "last_requests": list(self.last),
        }


STATE = web.AppKey("fake_llm_state", FakeState)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    body = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return web.Response(body=body, status=status, headers=headers, content_type="application/json")


def _error(
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    return _json(wire.error_body(message, kind, code, param), status, headers)


async def _body(request: web.Request) -> dict[str, Any] | None:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
