"""When the event loop has nothing to do but wait for LLM replies, and for how long at least.

A tick sends its calls in a burst and then waits about a round trip for the replies. Work that
stops the event loop (an embedded Chroma index holds the interpreter's lock while it writes)
costs the town nothing if it is done in that wait. ``QuietWatch`` sees each call go out and
come back. Once calls are in flight and none went out for ``after`` seconds, it tells
``on_quiet`` how long until the first reply is likely: when the oldest call in flight went
out, plus the shortest of the last round trips, minus now. It says nothing before a round trip
was measured, nor when less than ``min_window`` seconds are left.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

QUIET_AFTER_S = 0.004  # no call sent for this long: the burst is out
MIN_WINDOW_S = 0.010  # a shorter wait is not worth telling
TRIPS_KEPT = 32  # round trips the estimate of the next one looks at


class QuietWatch:
    def __init__(
        self,
        on_quiet: Callable[[float], None] | None,
        *,
        after: float = QUIET_AFTER_S,
        min_window: float = MIN_WINDOW_S,
    ) -> None:
        self.on_quiet = on_quiet
        self.after = after
        self.min_window = min_window
        self._flying: dict[int, float] = {}  # call -> when it went out
        self._trips: deque[float] = deque(maxlen=TRIPS_KEPT)
        self._last_sent = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._ids = itertools.count()

    @contextmanager
    def flying(self) -> Iterator[None]:
        """Around one call, from sending it to its reply (a failed call's time is not a trip)."""
        if self.on_quiet is None:
            yield
            return
        call, sent = next(self._ids), time.monotonic()
        self._flying[call] = self._last_sent = sent
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.after, self._check)
        try:
            yield
        except BaseException:
            del self._flying[call]
            raise
        del self._flying[call]
        self._trips.append(time.monotonic() - sent)

    def _check(self) -> None:
        self._timer = None
        if not self._flying or not self._trips or self.on_quiet is None:
            return
        now = time.monotonic()
        if now - self._last_sent < self.after:  # still sending: look again later
            wait = self.after - (now - self._last_sent)
            self._timer = asyncio.get_running_loop().call_later(wait, self._check)
            return
        window = min(self._flying.values()) + min(self._trips) - now
        if window >= self.min_window:
            self.on_quiet(window)
