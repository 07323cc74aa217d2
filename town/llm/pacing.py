"""Pacing a server: the calls to it wait on our side in order of urgency (:mod:`town.llm.urgency`),
and only as many go to it as it answers at once: as the server says (llama.cpp's ``total_slots``
at ``GET /props``, else the list at ``GET /slots``), else as the operator set
(``BOTTOWN_LLM_SLOTS``, :func:`default_slots`). One pacer serves one server, shared by every
model and town that calls it (:mod:`town.llm.chain`). Within an urgency the towns take turns
(start-time fair queueing, :func:`turn_of`); a person's call may cut a ``cuttable`` town call
short (:mod:`town.llm.replies`); a call past its patience leaves the queue unsent. The why of
each: docs/llm.md, "The server's slots and the queue".
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import ipaddress
import itertools
import logging
import math
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai

log = logging.getLogger(__name__)

TIMEOUT_CEILING_S = 600.0
LATENCY_FACTOR = 3.0
"""A call may take this many times the slowest recent answer before it counts as timed out."""
NEAR_END = 0.25
"""A call on the wire within this share of a usual call's time of its end, divided by the slots,
frees its slot soon: a person's call waits for it rather than cut a town call (which would lose
more than the person waits). Divided, because the more calls on the wire, the likelier one is in
its last stretch: a person would wait on four slots about four times as often as on one."""
ASK_TIMEOUT_S = 5.0


_TOWN: ContextVar[Hashable | None] = ContextVar("pacing_town", default=None)


@contextlib.contextmanager
def turn_of(town: Hashable) -> Iterator[None]:
    """The calls made inside are ``town``'s, for the turns towns take within an urgency."""
    token = _TOWN.set(town)
    try:
        yield
    finally:
        _TOWN.reset(token)


class WaitedTooLong(Exception):
    """A call waited for a slot longer than its patience, and left the queue unsent."""


@dataclass(eq=False)
class OnWire:
    """A call holding a slot, and, for a cuttable call, the cut a person's call may ask for."""

    urgency: int
    cuttable: bool
    began: float  # on the pacer's clock
    cut: asyncio.Event = field(default_factory=asyncio.Event)


class Pacer:
    """The queue, the slots and the timeout of the calls to one server. ``slots`` is how many
    calls it answers at once as the operator set it (``said_by``: "setting"), until the server
    says otherwise (:meth:`told`); never more than ``ceiling``. With ``cut``, a person's call
    that finds every slot taken cuts the least urgent town call short."""

    def __init__(
        self,
        slots: int,
        base_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        ceiling: int = 256,
        cut: bool = True,
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.cut = cut  # a person's call may cut a town call short (``bench chat --no-cut``)
        self.slots = min(self.ceiling, max(1, slots))
        self.said_by = "setting"
        self.base_timeout_s = base_timeout_s
        self.in_flight = 0
        self.timeouts = 0
        self.cuts = 0  # town calls cut for a person's call
        self.asked = asyncio.Event()  # the server was asked its slots (:meth:`ask_once`)
        self._asking = False
        self.streams = True  # the server streams a reply asked for so (else: read whole)
        self._clock = clock
        self._recent: deque[float] = deque(maxlen=20)
        self._backoff = 1.0  # doubled by each time-out in a row
        self._changed = asyncio.Condition()
        self._waiting: list[tuple[int, int, int]] = []  # (urgency, round, ticket), a heap
        self._tickets = itertools.count()
        self._serving: dict[int, int] = {}  # urgency -> the round being served
        self._last: dict[tuple[int, Hashable | None], int] = {}  # a town's last round given
        self._on_wire: list[OnWire] = []  # in the order they went

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
    def busy(self) -> bool:
        """Every slot taken, or calls waiting for one."""
        return bool(self._waiting) or self.in_flight >= self.slots

    @property
    def typical_s(self) -> float | None:
        """A call's usual time on the wire: the median of recent answers (None: none yet)."""
        return statistics.median(self._recent) if self._recent else None

    def expected_wait_s(self, urgency: int) -> float:
        """About how long a call of ``urgency`` sent now would wait here for a slot: the calls
        ahead of it (as urgent or more) and those in flight, served ``slots`` at a time."""
        if (typical := self.typical_s) is None:
            return 0.0
        ahead = sum(1 for u, *_ in self._waiting if u <= urgency) + self.in_flight
        return math.floor(ahead / self.slots) * typical

    def calls_in(self, seconds: float) -> float | None:
        """About how many calls the server answers in ``seconds`` at the latency measured
        (None: nothing measured yet)."""
        if (typical := self.typical_s) is None:
            return None
        return seconds * self.slots / max(typical, 1e-3)

    def told(self, slots: int) -> None:
        """The server said it answers ``slots`` calls at once: the limit from now on (within the
        ceiling)."""
        self.slots = min(self.ceiling, max(1, slots))
        self.said_by = "server"

    async def ask_once(self, client: openai.AsyncOpenAI) -> None:
        """Before the first call: ask the server its slots, and take them if it says. Calls
        made while the answer comes wait for it, so none goes out past slots it has not got."""
        if self.asked.is_set():
            return
        if self._asking:
            await self.asked.wait()
            return
        self._asking = True
        try:
            slots = await told_slots(client)
            if slots is not None:
                self.told(slots)
                log.info(
                    "the LLM server answers %d call%s at once", slots, "" if slots == 1 else "s"
                )
        finally:
            self.asked.set()

    def interrupted(self) -> None:
        """A stream ended with no finish reason: the server cut it for another call that came
        in (llama-cpp-python's does). Unless it said its slots, it answers one call at a time:
        taken as its word."""
        if self.said_by != "server":
            self.told(1)

    def answered(self, latency_s: float) -> None:
        """A call came back (any status but a time-out) after ``latency_s`` on the wire."""
        self._recent.append(latency_s)
        self._backoff = 1.0

    def timed_out(self) -> None:
        """A call timed out: give the next ones longer."""
        self.timeouts += 1
        self._backoff = min(self._backoff * 2, TIMEOUT_CEILING_S)

    @contextlib.asynccontextmanager
    async def slot(
        self,
        urgency: int = 0,
        patience: float | None = None,
        *,
        person: bool = False,
        cuttable: bool = False,
    ) -> AsyncIterator[OnWire]:
        """Hold one of the server's slots while a call is on the wire; the more urgent calls
        (lower numbers) go first, calls alike by their town's turn, then in order of arrival.
        Raises
        :class:`WaitedTooLong` when the call waited ``patience`` seconds without a slot (None: as
        long as it takes). A ``person``'s call that finds every slot taken cuts the least urgent
        ``cuttable`` call on the wire."""
        ticket = (urgency, self._round(urgency), next(self._tickets))
        if person and self.cut and self.in_flight >= self.slots:
            self._cut_one(urgency)
        async with self._changed:
            heapq.heappush(self._waiting, ticket)
            try:
                async with asyncio.timeout(patience):
                    await self._changed.wait_for(
                        lambda: self._waiting[0] == ticket and self.in_flight < self.slots
                    )
            except BaseException as error:  # cancelled or out of patience: the queue goes on
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()
                if isinstance(error, TimeoutError):
                    raise WaitedTooLong(f"no slot in {patience:g} s") from None
                raise
            heapq.heappop(self._waiting)
            self._serving[urgency] = ticket[1]
            self.in_flight += 1
            call = OnWire(urgency, cuttable, self._clock())
            self._on_wire.append(call)
            self._changed.notify_all()  # the next in line may go too
        try:
            yield call
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._on_wire.remove(call)
                self._changed.notify_all()

    def _round(self, urgency: int) -> int:
        """The round of a call of ``urgency`` from the town whose turn it runs in."""
        key = (urgency, _TOWN.get())
        serving = self._serving.get(urgency, 0)
        given = self._last[key] = max(serving, self._last.get(key, 0)) + 1
        if len(self._last) > 4 * len(self._waiting) + 64:  # forget towns long served
            for old in [k for k, r in self._last.items() if r <= self._serving.get(k[0], 0)]:
                del self._last[old]
        return given

    def _cut_one(self, urgency: int) -> None:
        """Ask the least urgent cuttable call on the wire (the latest sent, of those alike) to
        end, if one is there not already asked, unless a call on the wire (a person's too) is
        near its end, within ``NEAR_END`` of a usual call's time divided by the slots (past the
        whole of it, a long one, its end not in sight), or asked to end already, and no call as
        urgent waits for that slot. A call near its end is never cut: it frees its slot soon."""
        now, typical = self._clock(), self.typical_s
        near = 0.0 if typical is None else typical * NEAR_END / self.slots
        ending = [
            c
            for c in self._on_wire
            if typical is not None and typical - near <= now - c.began <= typical
        ]
        freeing = len(ending) + sum(1 for c in self._on_wire if c.cut.is_set())
        if freeing > sum(1 for u, *_ in self._waiting if u <= urgency):
            return  # a slot frees soon that no one ahead waits for
        cuttable = [
            c for c in self._on_wire if c.cuttable and not c.cut.is_set() and c not in ending
        ]
        if cuttable:
            max(reversed(cuttable), key=lambda c: c.urgency).cut.set()
            self.cuts += 1


def default_slots(base_url: str | None, ceiling: int) -> int:
    """The slots of a server that does not say: one for a server on this machine or a private
    network (a local server answers one call at a time), the ``ceiling`` for a hosted API."""
    host = urlsplit(base_url).hostname if base_url else None
    if host is None:
        return ceiling  # the OpenAI API
    if host == "localhost" or host.endswith((".local", ".internal", ".lan")) or "." not in host:
        return 1
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ceiling
    return 1 if address.is_private or address.is_loopback or address.is_link_local else ceiling


def props_url(base_url: object, route: str = "props") -> str:
    """``GET /props`` (or another route) at the server's root: the base URL without ``/v1``."""
    root = str(base_url).rstrip("/").removesuffix("/v1")
    return f"{root}/{route}"


async def _asked(client: openai.AsyncOpenAI, route: str) -> Any:
    asking = client.with_options(max_retries=0, timeout=ASK_TIMEOUT_S)
    try:
        return await asking.get(props_url(client.base_url, route), cast_to=object)
    except (openai.APIError, ValueError):
        return None


async def told_slots(client: openai.AsyncOpenAI) -> int | None:
    """The slots the server says it has (None: it does not say, or could not be asked)."""
    props = await _asked(client, "props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
        return slots
    listed = await _asked(client, "slots")
    if isinstance(listed, list) and listed and all(isinstance(s, dict) for s in listed):
        return len(listed)
    return None
