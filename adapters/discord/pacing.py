"""One bucket for every webhook post in the server.

Discord limits a webhook to about 30 posts a minute in a channel, and webhook posts are reported
to share one bucket across a whole server (discord-api-docs#6753: 5 requests a second or two).
The outbox pump keeps each channel below its cap (``MIN_INTERVAL_S``); this bucket spaces the
posts of all channels together, and a 429 holds it for every channel, so the pump's channels,
which post concurrently, never burst past the shared limit. A reply to a person takes the next
turn ahead of narration already waiting, so other channels' narration never holds it up.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable

SERVER_SPACING_S = 0.5  # at most 2 webhook posts a second in the whole server


class ServerBucket:
    """Posts take turns ``spacing_s`` apart; a reply to a person (``urgent``) goes ahead of every
    narration post still waiting for its turn, and waits at most for the one before it."""

    def __init__(
        self,
        spacing_s: float = SERVER_SPACING_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.spacing_s, self.clock, self.sleep = spacing_s, clock, sleep
        self._next = 0.0  # when the next post may go
        self._waiting: list[tuple[int, int]] = []  # (0 urgent / 1 not, arrival): a heap
        self._arrivals = itertools.count()
        self._changed = asyncio.Condition()

    async def turn(self, *, urgent: bool = False) -> None:
        """Wait for this post's turn: the first of the waiting (urgent ones first) whose time
        has come."""
        ticket = (0 if urgent else 1, next(self._arrivals))
        async with self._changed:
            heapq.heappush(self._waiting, ticket)
            try:
                while True:
                    if self._waiting[0] != ticket:
                        await self._changed.wait()
                        continue
                    wait = self._next - self.clock()
                    if wait <= 0:
                        break
                    self._changed.release()  # others may queue (and go ahead) meanwhile
                    try:
                        await self.sleep(wait)
                    finally:
                        await self._changed.acquire()
            finally:
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()
            self._next = max(self._next, self.clock()) + self.spacing_s

    def hold(self, seconds: float) -> None:
        """Discord said to wait (a 429): no post in the server before then."""
        self._next = max(self._next, self.clock() + seconds)
