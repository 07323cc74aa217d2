"""Ticks paced as a live town's: a tick every so many seconds, and how far the clock fell
behind when a tick outlasted its interval (``bench town --tick-seconds``, ``bench chat``)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable


def behind_pct(ticks: int, skipped: int) -> float:
    """The share of the runs due that were skipped: how far the clock fell behind its pace."""
    return round(100 * skipped / (ticks + skipped), 1) if ticks + skipped else 0.0


class Pace:
    """Ticks every ``seconds`` as the live town's scheduler runs them: a tick that outlasts its
    interval skips the runs that fall due meanwhile, and the next starts at the next one due."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.seconds = seconds
        self.skipped = 0
        self._clock, self._sleep = clock, sleep
        self._due = clock()

    async def next(self) -> None:
        """Wait for the next run due after the tick that just ended."""
        if self.seconds <= 0:
            return
        late = self._clock() - self._due
        missed = max(0, math.ceil(late / self.seconds) - 1)
        self.skipped += missed
        self._due += (missed + 1) * self.seconds
        await self._sleep(max(0.0, self._due - self._clock()))
