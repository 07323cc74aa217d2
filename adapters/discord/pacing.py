"""One bucket for every webhook post in the server.

Discord limits a webhook to about 30 posts a minute in a channel, and webhook posts are reported
to share one bucket across a whole server (discord-api-docs#6753: 5 requests a second or two).
The outbox pump keeps each channel below its cap (``MIN_INTERVAL_S``); this bucket spaces the
posts of all channels together, and a 429 holds it for every channel, so the pump's channels,
which post concurrently, never burst past the shared limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

SERVER_SPACING_S = 0.5  # at most 2 webhook posts a second in the whole server


class ServerBucket:
    def __init__(
        self,
        spacing_s: float = SERVER_SPACING_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.spacing_s, self.clock, self.sleep = spacing_s, clock, sleep
        self._next = 0.0  # when the next post may go
        self._lock = asyncio.Lock()

    async def turn(self) -> None:
        """Wait for this post's turn."""
        async with self._lock:
            wait = self._next - self.clock()
            if wait > 0:
                await self.sleep(wait)
            self._next = max(self._next, self.clock()) + self.spacing_s

    def hold(self, seconds: float) -> None:
        """Discord said to wait (a 429): no post in the server before then."""
        self._next = max(self._next, self.clock() + seconds)
