"""``bottown bench chat``: what a visitor feels, with Smallville live against the fake LLM server.

Smallville is founded and brought to the morning on the offline brain (not measured); then it
runs live through the real gateway against ``bottown fake-llm`` (a fixed latency per call): a
tick every ``tick_seconds``, while simulated visitors write in several places at once, each
through the running town as an adapter's member would (the answer stored, then posted at once
by ``TownRuntime.post_now``; the narration through an outbox pump to a stand-in platform that
posts at Discord's pace, 2.5 s apart in a channel, within ``BOTTOWN_CHANNEL_MESSAGES_PER_MINUTE``).
Each visitor keeps to a place with residents awake and, in turn, addresses a resident there by
name, greets the room, and follows up.

Figures: p50/p95 seconds from a message to its first reply on the platform (addressed, and
not), the longest chain of LLM calls before a first reply, greetings left unanswered where a
resident was awake, replies that went out folded into a digest, replies held behind narration
(that waited for the channel longer than replies alone made them wait), and the share of ticks
that finished within their interval. Beside them a page reads the town as a browser would (the map,
a resident's card, a channel's history, ``look``) while ticks think: ``view_p95_ms``; and
``longest_write_ms`` (a tick's one write), ``rethought_calls`` (LLM calls of ticks that failed,
and so are made again); ``slots`` (the calls the fake server answers at once,
``--slots``, 1 by default as a local server's), ``clock_behind_pct`` (the share of the ticks due
that a late tick skipped), ``fallbacks_by_task`` (answers the offline brain gave, by task and
reason: ``pace`` for those given so the town keeps its pace) and ``cut_calls`` (the town's calls
cut short on the wire so that a visitor's went first, then sent again), ``call_p50_s`` (the
median time of the server's last twenty answers, to read the first replies against).

How far from the best possible: each message's arrival is kept, and the same arrivals served by
a server with only visitors' first calls, in order, at the server's measured call time
(``call_p50_s``) and ``slots``, give each message its ideal first reply. ``ideal_p95_s`` is that
ideal's p95, ``excess_p95_s`` the p95 of each addressed message's wait past its ideal, and
``excess_p95_calls`` the same in call times: how many town calls a person waited for beyond what
no schedule could avoid. Visitors write in a burst (each starts within 4 s, then every 6-12 s),
or with ``arrivals="poisson"`` as members who come and go: ``rate`` messages a minute across all
visitors, the gaps drawn from an exponential distribution.

``llm="configured"`` runs it against the LLM the settings name instead (a local llama.cpp or
llama-cpp-python server, say): ``slots`` is then 0 and the latency the server's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Outgoing
from adapters.web.feed import Feed
from adapters.web.history import History
from bot.bench.pace import Pace, behind_pct
from bot.bench.town import bench_llm, check_llm, found_bench_town, start_fake_llm
from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown
from bot.runtime.wiring import Services
from town.inputs import visitor
from town.llm import urgency
from town.llm.depth import ChainCountingBrain
from town.llm.port import OfflineBrain
from town.llm.usage import UsageTally
from town.memory.embedding_queue import flush_queues
from town.memory.vectors import ChromaIndex
from town.store.models import Delivery, OutboxEvent
from town.store.usage import StoredUsage
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.views import places
from town.world.load import load_town
from town.world.places import World

MORNING_TICKS = 12  # offline ticks before the measure: residents up and about
KINDS = ("addressed", "greeting", "follow-up")
GREETINGS = ("Hello everyone!", "Hi there!", "Good morning, all!")
FOLLOW_UPS = ("What are you up to today?", "How long have you lived here?", "Any plans later?")


@dataclass
class Message:
    kind: str
    sent: float
    first_reply: float | None = None
    chain: int = 0
    awake_there: bool = False


@dataclass
class ChatBench:
    messages: list[Message] = field(default_factory=list)
    ticks: list[float] = field(default_factory=list)  # seconds each tick took
    tick_seconds: float = 10.0
    replies_in_digests: int = 0
    replies_held: int = 0  # replies that waited for the channel behind narration
    views_ms: list[float] = field(default_factory=list)  # reads made while a tick thought
    longest_write_ms: float = 0.0
    rethought_calls: int = 0
    slots: int = 1
    skipped: int = 0  # ticks due while a tick still ran
    cut_calls: int = 0  # the town's calls cut short for a visitor's (and sent again)
    call_p50_s: float | None = None  # the median of the server's last answers
    llm: str = "fake"
    answers: dict[str, Any] = field(default_factory=dict)
    arrivals: str = "burst"
    rate: float = 0.0  # messages a minute across all visitors (arrivals "poisson")

    def gap_s(self, rng: random.Random, visitors: int, first: bool) -> float:
        """A visitor's wait before its next message."""
        if self.arrivals == "poisson":
            return rng.expovariate(self.rate / 60 / visitors)
        return rng.uniform(0, 4) if first else rng.uniform(6, 12)

    def _excess(self) -> tuple[float | None, float | None, float | None]:
        """(ideal p95, excess p95 in seconds, in call times) of the addressed messages."""
        call_s = self.call_p50_s
        if call_s is None or not self.messages:
            return None, None, None
        ordered = sorted(self.messages, key=lambda m: m.sent)
        ideal = ideal_waits([m.sent for m in ordered], call_s, self.slots)
        excess = [
            m.first_reply - m.sent - best
            for m, best in zip(ordered, ideal, strict=True)
            if m.kind == "addressed" and m.first_reply is not None
        ]
        found = _pct(excess, 95)
        calls = None if found is None else round(found / max(call_s, 1e-3), 2)
        return _pct(ideal, 95), found, calls

    def _waits(self, addressed: bool) -> list[float]:
        return [
            m.first_reply - m.sent
            for m in self.messages
            if m.first_reply is not None and (m.kind == "addressed") == addressed
        ]

    def as_json(self) -> dict[str, Any]:
        pct = _pct
        addressed, other = self._waits(True), self._waits(False)
        ideal, excess_s, excess_calls = self._excess()
        on_time = sum(1 for took in self.ticks if took <= self.tick_seconds)
        return {
            "first_reply_p50_s_addressed": pct(addressed, 50),
            "first_reply_p95_s_addressed": pct(addressed, 95),
            "first_reply_p50_s_other": pct(other, 50),
            "first_reply_p95_s_other": pct(other, 95),
            "ideal_p95_s": ideal,
            "excess_p95_s": excess_s,
            "excess_p95_calls": excess_calls,
            "arrivals": self.arrivals if self.arrivals == "burst" else f"poisson {self.rate:g}/min",
            "longest_chain_addressed": max(
                (m.chain for m in self.messages if m.kind == "addressed"), default=0
            ),
            "longest_chain_other": max(
                (m.chain for m in self.messages if m.kind != "addressed"), default=0
            ),
            "unanswered_greetings": sum(
                1
                for m in self.messages
                if m.kind == "greeting" and m.awake_there and m.first_reply is None
            ),
            "replies_in_digests": self.replies_in_digests,
            "replies_held_behind_narration": self.replies_held,
            "ticks_on_time_pct": round(100 * on_time / len(self.ticks), 1) if self.ticks else None,
            "messages": len(self.messages),
            "ticks": len(self.ticks),
            "view_p50_ms": pct(self.views_ms, 50),
            "view_p95_ms": pct(self.views_ms, 95),
            "views": len(self.views_ms),
            "longest_write_ms": round(self.longest_write_ms, 1),
            "rethought_calls": self.rethought_calls,
            "slots": self.slots,
            "clock_behind_pct": behind_pct(len(self.ticks), self.skipped),
            "fallbacks_by_task": self.answers.get("fallbacks_by_task", {}),
            "cut_calls": self.cut_calls,
            "call_p50_s": None if self.call_p50_s is None else round(self.call_p50_s, 2),
            "llm": self.llm,
        }


def _pct(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


@dataclass
class _Platform:
    """The stand-in platform: takes every post at once, asking Discord's interval between two
    posts in a channel, and noting when each arrived."""

    name: str = "bench"
    max_chars: int = 2000
    min_interval_s: float = 2.5
    sent: int = 0
    arrived: dict[str, float] = field(default_factory=dict)  # outbox key -> perf_counter

    async def send(self, message: Outgoing) -> str:
        self.sent += 1
        self.arrived.setdefault(message.key.split("#")[0], time.perf_counter())
        return f"b{self.sent}"


def ideal_waits(sent: list[float], call_s: float, slots: int) -> list[float]:
    """Each message's wait for its first reply on a server that answers only visitors' first
    calls, in order of arrival, ``slots`` at a time (0: no limit), ``call_s`` a call."""
    if slots <= 0:
        return [call_s for _ in sent]
    free = [float("-inf")] * slots  # when each slot is next free
    waits = []
    for at in sorted(sent):
        slot = min(range(slots), key=free.__getitem__)
        start = max(at, free[slot])
        free[slot] = start + call_s
        waits.append(free[slot] - at)
    return waits


def _awake_by_area(engine: Engine) -> dict[str, list[str]]:
    """Who is awake where, read without waiting for a tick."""
    with Session(engine.store.engine) as session:
        found: dict[str, list[str]] = {}
        for row in engine.residents(session).values():
            if ResidentState.of(row).awake:
                found.setdefault(World.area_of(row.location), []).append(row.name)
        return found


async def _visitor(
    runtime: TownRuntime, bench: ChatBench, n: int, places: int, until: float, visitors: int
) -> None:
    """One simulated visitor: a place of its own among the busiest, three kinds of message."""
    engine, rng = runtime.engine, random.Random(n)
    name = f"Visitor {n + 1}"
    await asyncio.sleep(bench.gap_s(rng, visitors, first=True))
    turn = 0
    while time.perf_counter() < until:
        awake = _awake_by_area(engine)
        areas = sorted(awake, key=lambda a: (-len(awake[a]), a))[:places]
        if not areas:
            await asyncio.sleep(1)
            continue
        area = areas[n % len(areas)]
        kind = KINDS[turn % len(KINDS)]
        if kind == "addressed":
            text = f"Hi {rng.choice(awake[area]).split()[0]}, how is your day going?"
        elif kind == "greeting":
            text = rng.choice(GREETINGS)
        else:
            text = rng.choice(FOLLOW_UPS)
        message = Message(kind, time.perf_counter(), awake_there=bool(awake.get(area)))

        words = visitor.Visit.of(area, name, text, "bench", f"v{n}")
        # each answer stored, then posted at once, as a running town does
        with urgency.person_waiting(urgency.VISITOR):  # as the runtime's visitor_says
            result = await visitor.say(engine, words, typing=runtime._typing, post=runtime.post_now)
        message.first_reply = _arrival(runtime, result.outbox_ids)
        message.chain = result.chain
        bench.messages.append(message)
        turn += 1
        await asyncio.sleep(bench.gap_s(rng, visitors, first=False))


def _arrival(runtime: TownRuntime, outbox_ids: list[int]) -> float | None:
    """When the first of these events reached the stand-in platform (None: none did)."""
    if not outbox_ids:
        return None
    with Session(runtime.store.engine) as session:
        keys = session.exec(
            select(OutboxEvent.idempotency_key).where(col(OutboxEvent.id).in_(outbox_ids))
        ).all()
    (pump,) = runtime.pumps
    platform = pump.platform
    assert isinstance(platform, _Platform)
    times = [platform.arrived[key] for key in keys if key in platform.arrived]
    return min(times, default=None)


async def _ticks(
    runtime: TownRuntime, bench: ChatBench, until: float, tally: UsageTally, ticking: asyncio.Event
) -> None:
    """The town's ticks, one every ``tick_seconds`` as the live town's scheduler runs them (a
    late tick skips the runs due meanwhile)."""
    pace = Pace(bench.tick_seconds)
    while time.perf_counter() < until:
        began, calls = time.perf_counter(), tally.total.calls
        ticking.set()
        report = await runtime.tick()
        ticking.clear()
        took = time.perf_counter() - began
        bench.ticks.append(took)
        if report is None:  # rolled back: its calls are made again by the next tick
            bench.rethought_calls += tally.total.calls - calls
        else:
            bench.longest_write_ms = max(bench.longest_write_ms, report.write_ms)
        runtime.wake.set()
        await pace.next()
        bench.skipped = pace.skipped


async def _history(history: History, area: str) -> None:
    history.load(Feed(), [area])


async def _page(
    runtime: TownRuntime, bench: ChatBench, until: float, ticking: asyncio.Event
) -> None:
    """A page reading the town while ticks think: the map, a card, a channel's history and
    ``look``, in turn; each read's time is kept if a tick was thinking when it was made."""
    engine, history = runtime.engine, History(runtime.store, runtime.town_id, "bench")
    names = [r.name for r in engine.spec.residents]
    areas = [a.name for a in engine.spec.areas]
    reads: list[Callable[[int], Awaitable[object]]] = [
        lambda n: runtime.town_map(),
        lambda n: runtime.resident_card(names[n % len(names)]),
        lambda n: _history(history, areas[n % len(areas)]),
        lambda n: places.look(engine, areas[n % len(areas)]),
    ]
    n = 0
    while time.perf_counter() < until:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ticking.wait(), 1.0)  # (the last tick may have been)
        if not ticking.is_set():
            continue
        began = time.perf_counter()
        await reads[n % len(reads)](n // len(reads))
        if ticking.is_set():
            bench.views_ms.append((time.perf_counter() - began) * 1000)
        n += 1
        await asyncio.sleep(0.25)


def _replies_in_digests(services: Services, town_id: int) -> int:
    with services.store.session() as s:
        rows = s.exec(
            select(OutboxEvent)
            .join(Delivery, Delivery.outbox_id == OutboxEvent.id)  # type: ignore[arg-type]
            .where(OutboxEvent.town_id == town_id, Delivery.status == "digested")
        ).all()
        return sum(1 for row in rows if row.payload.get("reply_to"))


async def run_chat_bench(
    settings: Settings,
    latency_ms: float = 1000,
    visitors: int = 10,
    places: int = 5,
    minutes: float = 2,
    tick_seconds: float = 10.0,
    concurrency: int = 64,
    *,
    slots: int = 1,
    llm: str = "fake",
    arrivals: str = "burst",
    rate: float = 12.0,
    cut: bool = True,
) -> ChatBench:
    check_llm(settings, llm)
    if arrivals not in ("burst", "poisson") or rate <= 0:
        raise ValueError("--arrivals is burst or poisson, with a --rate above 0 messages a minute")
    spec = load_town("smallville")
    bench = ChatBench(
        tick_seconds=tick_seconds,
        slots=slots if llm == "fake" else 0,
        llm=llm,
        arrivals=arrivals,
        rate=rate,
    )
    proc, url = (None, "") if llm == "configured" else start_fake_llm(latency_ms, slots)
    try:
        with tempfile.TemporaryDirectory(prefix="bottown-bench-") as tmp:
            founded = await found_bench_town(settings, spec, Path(tmp))
            local, services, town = founded.settings, founded.services, founded.town
            morning = Engine(services.store, spec, OfflineBrain(), services.stream, founded.id)
            for _ in range(MORNING_TICKS):
                await morning.tick()
            flush_queues(services.executor)
            tally, ticking = UsageTally(), asyncio.Event()
            fake_url = None if proc is None else url
            client, brain, handles = bench_llm(
                settings, fake_url, tally, concurrency, latency_ms, cut=cut
            )
            if local.llm_pace == "keep":
                handles.keep_pace(tick_seconds)
            engine = Engine(
                services.store,
                spec,
                ChainCountingBrain(brain),
                services.stream,
                founded.id,
                llm=handles,
            )
            opened = OpenTown(services, engine, StoredUsage(services.store, founded.id), town)
            runtime = TownRuntime(opened, local)
            pump = OutboxPump(
                services.store,
                founded.id,
                _Platform(),
                channel_per_minute=local.channel_messages_per_minute,
                tick_s=tick_seconds,
            )
            runtime.pumps.append(pump)
            delivery = asyncio.create_task(pump.run(runtime.wake, poll_s=1.0))
            until = time.perf_counter() + minutes * 60
            await asyncio.gather(
                _ticks(runtime, bench, until, tally, ticking),
                _page(runtime, bench, until, ticking),
                *(_visitor(runtime, bench, n, places, until, visitors) for n in range(visitors)),
            )
            await pump.deliver_pending()
            delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await delivery
            bench.replies_in_digests = _replies_in_digests(services, founded.id)
            bench.replies_held = pump.stats.held
            bench.answers = handles.report.as_json()
            assert handles.pacer is not None
            bench.cut_calls = handles.pacer.cuts
            bench.call_p50_s = handles.pacer.typical_s
            await client.close()
            services.close()
            ChromaIndex.release_all()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    return bench
