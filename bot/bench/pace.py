"""Ticks paced as a live town's: a tick every so many seconds, and how far the clock fell
behind when a tick outlasted its interval (``bench town --tick-seconds``, ``bench chat``), as
``bot.runtime.scheduler`` runs them: a run that falls due while a tick runs starts as soon as
that tick ends (the ticks stretch), and the time lost is how late it started."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable


def behind_pct(ticks: int, lost: float) -> float:
    """How far the clock fell behind its pace: the intervals ``lost`` (runs that started late,
    by how much) against the ``ticks`` run and those lost."""
    return round(100 * lost / (ticks + lost), 1) if ticks + lost else 0.0


class Pace:
    """Ticks every ``seconds`` as the live town's scheduler runs them: a tick that outlasts its
    interval is followed at once by the next, which counts as late by as long as it started
    after the first run that fell due meanwhile; the runs after keep to the same grid."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.seconds = seconds
        self.lost = 0.0  # intervals: how late the late ticks started, all told
        self._clock, self._sleep = clock, sleep
        self._due = clock()

    async def next(self) -> None:
        """Wait for the next run due after the tick that just ended (none: it is late already)."""
        if self.seconds <= 0:
            return
        now, due = self._clock(), self._due + self.seconds
        if now <= due:
            self._due = due
            await self._sleep(due - now)
            return
        self.lost += (now - due) / self.seconds  # it starts now, this late
        self._due = due + math.floor((now - due) / self.seconds) * self.seconds
