"""``bottown bench scale``: how many residents one process keeps in real time.

T towns of R residents each (Smallville's first R residents, copied) run in this one process at
real time: a tick of one game minute every 60 real seconds per town, from 06:58 game time so the
run holds the 07:00 wake-up burst (everyone wakes, summarises the day before and plans the new
one). The LLM is the fake OpenAI-compatible server (``bottown fake-llm``) in a process of its
own, with a fixed latency per completion, reached through the real gateway and ``openai``
client, every town's calls in flight at once up to ``--concurrency`` each.

A tick is on time when it finishes before the town's next tick is due. The towns' phases are
spread over the minute (as towns started at different moments are), or ``--aligned`` (the worst
case: every town ticks at the same second).

Each town keeps its own SQLite file (SQLite has one writer at a time, and a tick holds it while
it awaits the LLM); the towns share one embedder, one embedding thread and one Chroma folder, as
a worker's towns do. Founding is cached under ``<data_dir>/bench-cache`` and copied for each
run, so reruns start at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from sqlmodel import select

from bot.bench.scale_towns import copy_run, drop_server, prepared, seed_server, town_spec
from bot.bench.town import bench_brain, start_fake_llm
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services, build_embedder
from town.llm.client import open_client
from town.llm.depth import ChainCountingBrain
from town.llm.usage import UsageTally
from town.memory.embedding_queue import embedding_executor, flush_queues
from town.memory.vectors import ChromaIndex
from town.store.db import Store
from town.store.models import Town
from town.tick.engine import Engine
from town.world.gametime import sleep_until

TICK_S = 60.0  # real time: one game minute a minute


@dataclass(frozen=True)
class TickTime:
    town: int
    due: float  # seconds from the start of the run
    began: float
    ended: float
    calls: int
    interval: float = TICK_S

    @property
    def on_time(self) -> bool:
        """Finished before the town's next tick was due."""
        return self.ended <= self.due + self.interval

    @property
    def took(self) -> float:
        return self.ended - self.began


@dataclass
class ScaleBench:
    towns: int
    residents_per_town: int
    latency_ms: float
    minutes: float
    aligned: bool
    embedder: str
    times: list[TickTime] = field(default_factory=list)
    calls: int = 0
    fallbacks: int = 0
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    fake_llm_cpu_s: float = 0.0
    setup_s: float = 0.0
    chroma: str = ""  # the Chroma server's URL; "" for the embedded client

    def as_json(self) -> dict[str, Any]:
        took = sorted(t.took for t in self.times) or [0.0]
        on_time = sum(t.on_time for t in self.times)
        return {
            "residents": self.towns * self.residents_per_town,
            "ticks_on_time_pct": round(100 * on_time / max(1, len(self.times)), 1),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "towns": self.towns,
            "residents_per_town": self.residents_per_town,
            "latency_ms": self.latency_ms,
            "minutes": self.minutes,
            "aligned": self.aligned,
            "embedder": self.embedder,
            "chroma": self.chroma or "embedded",
            "ticks": len(self.times),
            "late_ticks": len(self.times) - on_time,
            "tick_p50_s": round(statistics.median(took), 2),
            "tick_p95_s": round(took[min(len(took) - 1, int(0.95 * len(took)))], 2),
            "tick_max_s": round(took[-1], 2),
            "llm_calls": self.calls,
            "llm_calls_per_minute": round(self.calls / max(self.minutes, 1e-9), 1),
            "fallbacks": self.fallbacks,
            "cpu_s": round(self.cpu_s, 1),
            "cpu_pct_of_one_core": round(100 * self.cpu_s / max(self.wall_s, 1e-9), 1),
            "fake_llm_cpu_s": round(self.fake_llm_cpu_s, 1),
            "setup_s": round(self.setup_s, 1),
            "by_minute": [self._minute(k) for k in range(math.ceil(self.minutes))],
        }

    def _minute(self, k: int) -> dict[str, Any]:
        """The ticks due in minute ``k`` of the run."""
        ticks = [t for t in self.times if k <= t.due / t.interval < k + 1]
        took = sorted(t.took for t in ticks) or [0.0]
        return {
            "ticks": len(ticks),
            "on_time_pct": round(100 * sum(t.on_time for t in ticks) / max(1, len(ticks)), 1),
            "tick_p50_s": round(statistics.median(took), 2),
            "tick_max_s": round(took[-1], 2),
            "llm_calls": sum(t.calls for t in ticks),
        }


@dataclass
class BenchTown:
    number: int
    engine: Engine
    tally: UsageTally
    offset: float


def peak_rss_reset() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb() -> float:
    """The peak resident memory of this process (since ``peak_rss_reset``)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _process_cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


async def run_scale_bench(
    settings: Settings,
    towns: int,
    residents: int,
    latency_ms: float,
    minutes: int = 5,
    concurrency: int = 64,
    aligned: bool = False,
    progress: Callable[[int, int], None] | None = None,
    tick_s: float = TICK_S,
) -> ScaleBench:
    """Run the bench; ``tick_s`` other than 60 runs faster than real time (for tests: the
    minutes then count ticks, each standing for a minute)."""
    if towns < 1:
        raise ValueError("--towns must be at least 1")
    if minutes < 1:
        raise ValueError("--minutes must be at least 1")
    began = time.monotonic()
    embedder = build_embedder(settings)
    spec = town_spec(residents)
    cache = await asyncio.to_thread(prepared, settings, towns, residents, embedder)
    bench = ScaleBench(towns, residents, latency_ms, minutes, aligned, embedder.name)
    proc, url = start_fake_llm(latency_ms)
    remote = f"b{uuid4().hex[:8]}" if settings.chroma_url else ""  # namespace prefix on a server
    with tempfile.TemporaryDirectory(prefix="bottown-scale-") as tmp:
        run = Path(tmp)
        await asyncio.to_thread(copy_run, cache, run, with_chroma=not remote)
        ChromaIndex.release_all()
        index = ChromaIndex(
            path=run / "chroma",
            url=settings.chroma_url,
            embedder_name=embedder.name,
            dim=embedder.dim,
        )
        if remote:
            bench.chroma = settings.chroma_url or ""
            await asyncio.to_thread(seed_server, index, cache, remote, towns)
        executor = embedding_executor()
        client = open_client(url, "bench", max(60.0, latency_ms / 50))
        opened: list[BenchTown] = []
        stores: list[Store] = []
        try:
            peak_rss_reset()
            for i in range(towns):
                store = Store.open(f"sqlite:///{run / f'town-{i}.db'}")
                stores.append(store)
                with store.session() as s:
                    town_id = s.exec(select(Town.id)).one()
                assert town_id is not None
                services = Services(
                    settings.model_copy(update={"chroma_namespace": f"{remote}t{i}"}),
                    store,
                    embedder,
                    index,
                    executor=executor,
                )
                tally = UsageTally()
                brain, handles = bench_brain(client, tally, concurrency)
                engine = Engine(
                    store, spec, ChainCountingBrain(brain), services.stream, town_id, llm=handles
                )
                with store.session() as s:  # load every memory stream before the clock starts
                    for row in engine.residents(s).values():
                        assert row.id is not None
                        services.stream(row.id).count(s)
                offset = 0.0 if aligned else tick_s * i / towns
                opened.append(BenchTown(i, engine, tally, offset))
            bench.setup_s = time.monotonic() - began
            fake_cpu = _process_cpu_s(proc.pid)
            cpu = _cpu_s()
            ticks = minutes
            total = ticks * towns
            done = [0]
            start = time.monotonic() + 1.0

            async def one_town(town: BenchTown) -> None:
                for k in range(ticks):
                    due = town.offset + k * tick_s
                    await sleep_until(start + due)
                    before = town.tally.total.calls
                    t0 = time.monotonic() - start
                    await town.engine.tick(force=True)
                    t1 = time.monotonic() - start
                    calls = town.tally.total.calls - before
                    bench.times.append(TickTime(town.number, due, t0, t1, calls, tick_s))
                    done[0] += 1
                    if progress:
                        progress(done[0], total)

            await asyncio.gather(*(one_town(t) for t in opened))
            bench.wall_s = time.monotonic() - start
            bench.cpu_s = _cpu_s() - cpu
            bench.fake_llm_cpu_s = _process_cpu_s(proc.pid) - fake_cpu
            bench.peak_rss_mb = peak_rss_mb()
            bench.calls = sum(t.tally.total.calls for t in opened)
            bench.fallbacks = sum(t.tally.total.fallbacks for t in opened)
        finally:
            await client.close()
            flush_queues(executor)
            executor.shutdown(wait=True)
            for store in stores:
                store.dispose()
            if remote:
                await asyncio.to_thread(drop_server, index, cache, remote, towns)
            ChromaIndex.release_all()
            proc.terminate()
            proc.wait(10)
    return bench
