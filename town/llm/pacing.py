"""Pacing the server: calls wait on our side in order of urgency, only as many go to the server
as it answers at once, and timeouts follow the latency measured.

Local servers (llama.cpp, llama-cpp-python, Ollama's default) answer one call or a few at a time,
first come, first served: a call sent behind eight others waits for eight replies, and nothing
can reorder the server's queue. So the calls wait here, in a queue ordered by urgency
(:mod:`town.llm.urgency`), and the pacer learns how many calls the server answers at once from
how latency grows with calls in flight: a call sent with ``n`` in flight (itself included) that
takes ``L`` seconds, against ``s`` for the quickest recent answer, shows about ``n * s / L``
calls served at once when it was slowed (a one-slot server: one service time more per call
ahead), and at least ``n`` when it was not. The limit follows the median of these figures,
starts at two, grows by one slot an answer until a call is slowed (then by about one slot a
round of answers) while the server keeps up, and halves on a time-out. A server that says how
many calls it answers at once (llama.cpp's, :mod:`town.llm.slots`) is taken at its word.

A call sent ``at_once`` (a visitor's first reply) never waits here behind the limit, only
behind the configured ceiling: on a server that answers one call at a time it
waits in the server's queue behind the calls already on the wire, as long as it would have
waited here (nothing of the town goes after the limit is reached, so nothing overtakes it); on a
server with more room than the limit has learnt yet, it is answered at once. While people are
about, the town's calls leave one slot of two or more free for theirs (``PEOPLE_ABOUT_S``).

A town's call may be ``cuttable`` (it streams, :mod:`town.llm.streamed`): a person's call
that finds every slot the server has taken cuts the least urgent such call on the wire, unless it
is near its end (past half a usual call's time, ``CUT_BEFORE``, and not past the whole of it), so
it waits at most half a call for a town call to end; the cut call is sent again.

A call may come with a patience: the longest it waits here for a slot. Past it the call leaves
the queue (:class:`WaitedTooLong`) and its caller answers without the server: an importance
rating that would wait behind visitors' replies for longer than the town's tick can spare.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

TIMEOUT_CEILING_S = 600.0
LATENCY_FACTOR = 3.0
"""A call may take this many times the slowest recent answer before it counts as timed out."""
SLOWED = 1.5
"""A call sent beside others that takes this many times the quickest recent answer was slowed
by them: the server did not answer them all at once."""
CAPACITY_SAMPLES = 12
PEOPLE_ABOUT_S = 120.0
"""For this long after a call for a person (a visitor's reply, an interview), the town's calls
leave a slot free for the next one, on a server with two or more: a person's call then waits
for no town call to end."""
CUT_BEFORE = 0.5
"""A town's call is left to end, not cut for a person's, once this share of a usual call's time
has passed since it went (until the whole of it): the person then waits less than the town would
lose."""
START = 2
"""Calls in flight before anything is measured: a one-slot server's queue, which nothing can
reorder, then holds one call at most ahead of a visitor's; a server that keeps up gets about one
more slot a round of answers."""


class WaitedTooLong(Exception):
    """A call waited for a slot longer than its patience, and left the queue unsent."""


@dataclass(eq=False)
class OnWire:
    """A call holding a slot: how many were in flight when it went, itself included (for
    :meth:`Pacer.answered`), and, for a cuttable call, the cut a person's call may ask for."""

    sent_with: int
    urgency: int
    cuttable: bool
    began: float  # on the pacer's clock
    cut: asyncio.Event = field(default_factory=asyncio.Event)


class Pacer:
    """The queue, the concurrency limit and the timeout of the calls to one server."""

    def __init__(
        self, ceiling: int, base_timeout_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(min(self.ceiling, START))
        self.base_timeout_s = base_timeout_s
        self.in_flight = 0
        self.timeouts = 0
        self.asked = False  # the server was asked its slots (town.llm.slots)
        self.known = False  # it said: the limit is its slots, not learnt
        self._clock = clock
        self._recent: deque[float] = deque(maxlen=20)
        self._capacity: deque[float] = deque(maxlen=CAPACITY_SAMPLES)
        self._backoff = 1.0  # doubled by each time-out in a row
        self._person_at: float | None = None  # when a call for a person was last made
        self._slowed = False  # a call was slowed by others (or timed out): the limit is near
        self._changed = asyncio.Condition()
        self._waiting: list[tuple[int, int]] = []  # (urgency, ticket), a heap
        self._tickets = itertools.count()
        self._on_wire: list[OnWire] = []  # in the order they went
        self.cuts = 0  # town calls cut for a person's call

    @property
    def timeout_s(self) -> float:
        """The timeout of the next call: the configured one, or more when answers are slow."""
        measured = LATENCY_FACTOR * max(self._recent, default=0.0)
        return min(TIMEOUT_CEILING_S, max(self.base_timeout_s, measured) * self._backoff)

    @property
    def waiting(self) -> int:
        """Calls waiting on our side for a slot."""
        return len(self._waiting)

    @property
    def typical_s(self) -> float | None:
        """A call's usual time on the wire: the median of recent answers (None: none yet)."""
        return statistics.median(self._recent) if self._recent else None

    def expected_wait_s(self, urgency: int) -> float:
        """About how long a call of ``urgency`` sent now would wait here for a slot: the calls
        ahead of it (as urgent or more) and those in flight, served ``limit`` at a time."""
        if (typical := self.typical_s) is None:
            return 0.0
        ahead = sum(1 for u, _ in self._waiting if u <= urgency) + self.in_flight
        return math.floor(ahead / max(1, int(self.limit))) * typical

    def calls_in(self, seconds: float) -> float | None:
        """About how many calls the server answers in ``seconds`` at the latency measured and
        the capacity shown so far: calls sent beside others (a call sent alone shows one slot,
        and the limit grows ahead of what was shown). None: nothing measured yet."""
        if (typical := self.typical_s) is None:
            return None
        if self.known:
            shown = self.limit
        else:
            shown = min(self.limit, statistics.median(self._capacity)) if self._capacity else 1.0
        return seconds * max(1.0, shown) / max(typical, 1e-3)

    @contextlib.asynccontextmanager
    async def slot(
        self,
        urgency: int = 0,
        patience: float | None = None,
        *,
        at_once: bool = False,
        person: bool = False,
        cuttable: bool = False,
    ) -> AsyncIterator[OnWire]:
        """Hold one of the ``limit`` slots while a call is on the wire; the more urgent calls
        (lower numbers) go first, calls alike in order of arrival. Yields the call on the wire
        (:class:`OnWire`). Raises :class:`WaitedTooLong` when the call
        waited ``patience`` seconds without a slot (None: as long as it takes). A call ``at_once``
        goes as soon as it is first in line, beside the limit, within the ceiling. While people are
        about (a ``person``'s call, one waiting for its answer, was made in the last
        ``PEOPLE_ABOUT_S``), the town's calls leave one slot of two or more free for them, and
        a person's call that finds every slot taken cuts the least urgent ``cuttable`` call."""
        ticket = (urgency, next(self._tickets))
        if person:
            self._person_at = self._clock()
            if self.in_flight >= int(self.limit):
                self._cut_one()
        async with self._changed:
            heapq.heappush(self._waiting, ticket)
            try:
                async with asyncio.timeout(patience):
                    await self._changed.wait_for(lambda: self._may_go(ticket, at_once, person))
            except BaseException as error:  # cancelled or out of patience: the queue goes on
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()
                if isinstance(error, TimeoutError):
                    raise WaitedTooLong(f"no slot in {patience:g} s") from None
                raise
            heapq.heappop(self._waiting)
            self.in_flight += 1
            call = OnWire(self.in_flight, urgency, cuttable, self._clock())
            self._on_wire.append(call)
            self._changed.notify_all()  # the next in line may go too
        try:
            yield call
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._on_wire.remove(call)
                self._changed.notify_all()

    def _cut_one(self) -> None:
        """Ask the least urgent cuttable call on the wire (the latest sent, of those alike) to
        end, if one is there not already asked and not near its end: between ``CUT_BEFORE`` of
        a usual call's time and the whole of it (past it, a long one, its end not in sight)."""
        now, typical = self._clock(), self.typical_s
        cuttable = [
            c
            for c in self._on_wire
            if c.cuttable
            and not c.cut.is_set()
            and (typical is None or not CUT_BEFORE * typical <= now - c.began <= typical)
        ]
        if cuttable:
            max(reversed(cuttable), key=lambda c: c.urgency).cut.set()
            self.cuts += 1

    def interrupted(self) -> None:
        """A stream ended with no finish reason: the server cut it for another call that came
        in (llama-cpp-python's does). It answers one call at a time: taken as its word, as if
        it had said so (:meth:`told`), for latencies would not show it (the call cut is quick
        to end, the other quick to begin)."""
        if not self.known:
            self.told(1)

    def _may_go(self, ticket: tuple[int, int], at_once: bool, person: bool) -> bool:
        """The call is first in line and there is room for it: under the limit, or (at once)
        under the ceiling; for the town's call, one slot fewer while people are about."""
        room = self.ceiling if at_once else int(self.limit)
        about = self._person_at is not None and self._clock() - self._person_at < PEOPLE_ABOUT_S
        if not person and about and room >= 2:
            room -= 1
        return self._waiting[0] == ticket and self.in_flight < room

    def told(self, slots: int) -> None:
        """The server said it answers ``slots`` calls at once: the limit is that (within the
        ceiling) from now on, not learnt."""
        self.ceiling = min(self.ceiling, max(1, slots))
        self.limit = float(self.ceiling)
        self.known = True

    def answered(self, latency_s: float, sent_with: int = 1) -> None:
        """A call came back (any status but a time-out) after ``latency_s`` on the wire, sent
        with ``sent_with`` calls in flight, itself included."""
        self._recent.append(latency_s)
        self._backoff = 1.0
        if self.known:  # back to the server's slots, a slot an answer, after a time-out
            self.limit = min(float(self.ceiling), self.limit + 1)
            return
        quickest = min(self._recent)
        if sent_with >= 2 and quickest > 0:
            if latency_s > SLOWED * quickest:
                self._capacity.append(sent_with * quickest / latency_s)
                self._slowed = True
            else:  # the server kept up with all of them: room for more, maybe
                self._capacity.append(max(float(sent_with), self.limit) + 1)
        capacity = statistics.median(self._capacity) if self._capacity else math.inf
        full = sent_with >= int(self.limit)  # (only a limit in use shows there is room past it)
        if capacity >= self.limit + 0.5 and full:  # a slot an answer until a call was slowed
            grow = 1.0 / self.limit if self._slowed else 1.0
            self.limit = min(float(self.ceiling), self.limit + grow)
        elif capacity < self.limit - 0.5:
            self.limit = max(1.0, min(float(self.ceiling), math.floor(capacity + 0.5)))

    def timed_out(self) -> None:
        """A call timed out: halve the calls in flight and give the next ones longer."""
        self.timeouts += 1
        self._slowed = True
        self.limit = max(1.0, self.limit / 2)
        self._backoff = min(self._backoff * 2, TIMEOUT_CEILING_S)
