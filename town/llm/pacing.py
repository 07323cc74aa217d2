"""Pacing the server: calls queue on our side, timeouts follow the latency measured, and the
calls in flight adapt (additive increase, multiplicative decrease on time-outs).

A single-slot local server (llama.cpp, Ollama's default) answers one call at a time: sending it
eight at once makes the last wait eight replies and time out. So after a time-out the number of
calls in flight halves (down to one), and each answered call adds ``1/limit`` back (one more slot
for a whole round of answers), up to the configured concurrency; a waiting call waits here, not
on the server's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

TIMEOUT_CEILING_S = 600.0
LATENCY_FACTOR = 3.0
"""A call may take this many times the slowest recent answer before it counts as timed out."""


class Pacer:
    """The concurrency limit and the timeout of the calls to one server."""

    def __init__(
        self, ceiling: int, base_timeout_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.base_timeout_s = base_timeout_s
        self.in_flight = 0
        self.timeouts = 0
        self._clock = clock
        self._recent: deque[float] = deque(maxlen=20)
        self._backoff = 1.0  # doubled by each time-out in a row
        self._changed = asyncio.Condition()

    @property
    def timeout_s(self) -> float:
        """The timeout of the next call: the configured one, or more when answers are slow."""
        measured = LATENCY_FACTOR * max(self._recent, default=0.0)
        return min(TIMEOUT_CEILING_S, max(self.base_timeout_s, measured) * self._backoff)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` slots while a call is on the wire."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < int(self.limit))
            self.in_flight += 1
        try:
            yield
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()

    def answered(self, latency_s: float) -> None:
        """A call came back (any status but a time-out) after ``latency_s`` on the wire."""
        self._recent.append(latency_s)
        self._backoff = 1.0
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)

    def timed_out(self) -> None:
        """A call timed out: halve the calls in flight and give the next ones longer."""
        self.timeouts += 1
        self.limit = max(1.0, self.limit / 2)
        self._backoff = min(self._backoff * 2, TIMEOUT_CEILING_S)
