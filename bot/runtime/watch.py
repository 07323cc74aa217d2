"""What a supervisor and Prometheus see of this process: ``/healthz`` and ``/metrics``.

One ``Watch`` per process (``bottown run``, a worker) holds the towns the process runs, and a
``CollectorRegistry`` of its own (never prometheus-client's global one, so two in one process
stay apart). What the town already keeps is read when Prometheus asks, by ``TownsRead``, a
custom collector: the clock's lag behind its pace, LLM calls and tokens (the ``llmusage``
table), answers by the offline fallback by task and reason (the gateway's ``AnswerReport``, when
the runtime is handed one), the outbox's backlog and its delivery rows by status, and the towns
held. Only what nothing keeps is counted here as it happens: ticks and their time, and a
visitor's wait for the first reply (the runtime tells ``ticked`` and ``replied``).

``/healthz`` asks every database the process uses for a ``SELECT 1``: 200 with a short JSON
while each answers, 503 while one does not (or before the process has one).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import Counter as CounterMetric
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapters.core.claims import Claims
from town.llm.report import AnswerReport
from town.store.db import Store
from town.store.models import Town
from town.store.usage import StoredUsage

TICK_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
REPLY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)
HEALTH_WAIT_S = 5.0  # a database that has not answered by then is down, for /healthz
COMMITTED, PAUSED, ROLLED_BACK = "committed", "paused", "rolled_back"  # a tick's outcomes


class Watched(Protocol):
    """A town as the watch reads it (``bot.runtime.run.TownRuntime``)."""

    @property
    def town_name(self) -> str: ...
    @property
    def town_id(self) -> int: ...
    @property
    def store(self) -> Store: ...
    @property
    def usage(self) -> StoredUsage: ...
    @property
    def report(self) -> AnswerReport | None: ...
    def platforms(self) -> list[str]: ...
    def clock_behind_pct(self) -> float | None: ...


@dataclass
class TownReading:
    """One town's figures at one scrape."""

    name: str
    behind_pct: float | None = None  # None: no tick job here
    last_tick: float | None = None  # wall time (epoch seconds) of the last committed tick
    usage: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # calls, in, out
    fallbacks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (task, reason)
    backlog: dict[str, int] = field(default_factory=dict)  # by platform
    deliveries: dict[tuple[str, str], int] = field(default_factory=dict)  # (platform, status)


def read_stored(town: Watched, reading: TownReading) -> None:
    """What the store keeps of the town (a thread's work: it waits on the database)."""
    with town.store.session() as s:
        row = s.get(Town, town.town_id)
        last = row.last_tick_at if row is not None else None
    reading.last_tick = last.timestamp() if last is not None else None
    reading.usage = town.usage.spent_by_task()
    for platform in town.platforms():
        claims = Claims(town.store, town.town_id, platform)
        reading.backlog[platform] = claims.backlog()
        for status, n in claims.by_status().items():
            reading.deliveries[(platform, status)] = n


def read_in_memory(town: Watched) -> TownReading:
    """What the running process holds of the town (on the event loop, beside what changes it)."""
    reading = TownReading(town.town_name, behind_pct=town.clock_behind_pct())
    if (report := town.report) is not None:
        for (_day, task, reason), n in report.fallback.items():
            reading.fallbacks[(task, reason)] += n
    return reading


class TownsRead(Collector):
    """The families read at scrape time, from the readings ``Watch.metrics`` has just made."""

    def __init__(self) -> None:
        self.readings: list[TownReading] = []

    def collect(self) -> Iterator[Metric]:
        towns = self.readings
        held = GaugeMetricFamily("bottown_towns_held", "Towns this process runs.")
        held.add_metric([], len(towns))
        yield held
        behind = _gauge(
            "bottown_clock_behind_ratio",
            "Share of a town's recent tick runs "
            "skipped because a tick outlasted its interval: its lag behind its pace.",
        )
        last = _gauge(
            "bottown_last_tick_timestamp_seconds",
            "When the town's last tick committed (Unix time).",
        )
        for town in towns:
            if town.behind_pct is not None:
                behind.add_metric([town.name], town.behind_pct / 100)
            if town.last_tick is not None:
                last.add_metric([town.name], town.last_tick)
        yield from (behind, last)
        yield from _llm_families(towns)
        yield from _outbox_families(towns)


def _gauge(name: str, text: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, labels=["town", *labels])


def _llm_families(towns: list[TownReading]) -> Iterator[Metric]:
    calls = CounterMetricFamily(
        "bottown_llm_calls", "LLM calls (retries included), by task.", labels=["town", "task"]
    )
    tokens = CounterMetricFamily(
        "bottown_llm_tokens",
        "LLM tokens, by task and kind (prompt, completion).",
        labels=["town", "task", "kind"],
    )
    fallbacks = CounterMetricFamily(
        "bottown_llm_fallbacks",
        "Answers by the offline fallback instead of the model, by task "
        "and reason, since this process started.",
        labels=["town", "task", "reason"],
    )
    for town in towns:
        for task, (n, prompt, completion) in sorted(town.usage.items()):
            calls.add_metric([town.name, task], n)
            tokens.add_metric([town.name, task, "prompt"], prompt)
            tokens.add_metric([town.name, task, "completion"], completion)
        for (task, reason), n in sorted(town.fallbacks.items()):
            fallbacks.add_metric([town.name, task, reason], n)
    yield from (calls, tokens, fallbacks)


def _outbox_families(towns: list[TownReading]) -> Iterator[Metric]:
    backlog = _gauge(
        "bottown_outbox_backlog", "Town events a platform has not taken up yet.", "platform"
    )
    deliveries = _gauge(
        "bottown_deliveries",
        "Delivery rows by platform and status (sent, digested, failed, unknown, skipped, sending).",
        "platform",
        "status",
    )
    for town in towns:
        for platform, n in sorted(town.backlog.items()):
            backlog.add_metric([town.name, platform], n)
        for (platform, status), n in sorted(town.deliveries.items()):
            deliveries.add_metric([town.name, platform, status], n)
    yield from (backlog, deliveries)


class Watch:
    """This process seen from outside: its towns, its metrics, its health."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, store: Store | None = None, *, clock: Callable[[], float] = time.monotonic):
        self.store = store  # the process's own database (a worker's, before it holds a town)
        self.clock = clock  # times ticks and replies
        self.towns: dict[int, Watched] = {}
        self.registry = CollectorRegistry()
        self.ticks = CounterMetric(
            "bottown_ticks",
            "Ticks, by outcome (committed, paused, rolled_back).",
            ["town", "outcome"],
            registry=self.registry,
        )
        self.tick_seconds = Histogram(
            "bottown_tick_seconds",
            "How long a committed tick took, from its snapshot to its write.",
            ["town"],
            buckets=TICK_BUCKETS,
            registry=self.registry,
        )
        self.first_reply_seconds = Histogram(
            "bottown_first_reply_seconds",
            "From a visitor's words to the first resident's answer handed to the platforms.",
            ["town", "platform"],
            buckets=REPLY_BUCKETS,
            registry=self.registry,
        )
        # a gateway process's (``bottown gateway``): its shards, and what it stored for towns
        self.shards = Gauge(
            "bottown_gateway_shards",
            "Discord gateway shards this process holds.",
            registry=self.registry,
        )
        self.servers_heard = Gauge(
            "bottown_gateway_servers_heard",
            "Discord servers with a town whose members this process hears.",
            registry=self.registry,
        )
        self.inputs_stored = CounterMetric(
            "bottown_inputs_stored",
            "Members' doings a gateway process stored for a town, by kind (words, reaction).",
            ["town", "kind"],
            registry=self.registry,
        )
        self._read = TownsRead()
        self.registry.register(self._read)
        self._scraping = asyncio.Lock()

    def hold(self, town: Watched) -> None:
        self.towns[town.town_id] = town

    def drop(self, town: Watched) -> None:
        self.towns.pop(town.town_id, None)

    def ticked(self, town: str, outcome: str, seconds: float) -> None:
        self.ticks.labels(town, outcome).inc()
        if outcome == COMMITTED:
            self.tick_seconds.labels(town).observe(seconds)

    def replied(self, town: str, platform: str, seconds: float) -> None:
        self.first_reply_seconds.labels(town, platform).observe(seconds)

    async def metrics(self) -> bytes:
        """The Prometheus text of every family, read now."""
        async with self._scraping:  # one scrape at a time: the collector holds its readings
            readings = []
            for town in list(self.towns.values()):
                reading = read_in_memory(town)
                await asyncio.to_thread(read_stored, town, reading)
                readings.append(reading)
            self._read.readings = readings
            try:
                return generate_latest(self.registry)
            finally:
                self._read.readings = []

    async def health(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, a short JSON): 200 while every database answers, else 503."""
        stores = {id(s): s for s in [self.store, *(t.store for t in self.towns.values())] if s}
        towns = sorted(t.town_name for t in self.towns.values())
        if not stores:
            return 503, {"status": "starting", "towns": towns}
        for store in stores.values():
            try:
                why = await asyncio.wait_for(asyncio.to_thread(store.unreachable), HEALTH_WAIT_S)
            except TimeoutError:
                why = f"no answer in {HEALTH_WAIT_S:g} s"
            if why:
                return 503, {"status": "database unreachable", "database": why, "towns": towns}
        return 200, {"status": "ok", "towns": towns}
