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
import json
import logging
import math
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from uuid import uuid4

import numpy as np
import typer
from sqlmodel import select

from bot.bench.town import bench_gateway, start_fake_llm
from bot.cli.common import JsonFlag, run_async
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services, build_embedder
from town.llm.client import open_client
from town.llm.depth import ChainCountingBrain
from town.llm.offline.brain import OfflineBrain
from town.llm.usage import UsageTally
from town.memory.embedders import Embedder
from town.memory.embedding_queue import embedding_executor, flush_queues
from town.memory.vectors import ChromaIndex
from town.store.db import Store
from town.store.models import Resident, Town
from town.tick.engine import Engine
from town.tick.seed import found_town
from town.world.gametime import sleep_until
from town.world.load import load_town
from town.world.persona import TownSpec

log = logging.getLogger(__name__)

TICK_S = 60.0  # real time: one game minute a minute
CACHE_VERSION = 3


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


def town_spec(residents: int) -> TownSpec:
    spec = load_town("smallville")
    if not 1 <= residents <= len(spec.residents):
        raise ValueError(f"--residents-per-town must be 1 to {len(spec.residents)} (Smallville)")
    return spec.model_copy(update={"residents": spec.residents[:residents]})


# -- founding, cached -----------------------------------------------------------------------------


def prepared(settings: Settings, towns: int, residents: int, embedder: Embedder) -> Path:
    """A folder with ``towns`` founded copies of the town (``town-<i>.db``) and their vectors
    (``chroma/``, namespace ``t<i>``, one collection per town); built once, then found in the
    cache."""
    key = f"scale-v{CACHE_VERSION}-{embedder.name}-{embedder.dim}-t{towns}-r{residents}"
    folder = settings.data_dir.resolve() / "bench-cache" / key
    if (folder / "ready").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    building = folder.with_name(folder.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    template = building / "template.db"
    spec = town_spec(residents)
    store = Store.open(f"sqlite:///{template}")
    index = ChromaIndex(path=building / "chroma", embedder_name=embedder.name, dim=embedder.dim)
    services = Services(
        settings.model_copy(update={"chroma_namespace": "tpl"}), store, embedder, index
    )
    start = spec.scenario.start.replace(hour=6, minute=58)

    async def found() -> tuple[int, list[int]]:
        with store.session() as s:
            town = await found_town(
                s,
                spec,
                "bench",
                OfflineBrain(),
                services.stream,
                persona="smallville",
                start=start,
                minutes_per_tick=1,
            )
            town_id = town.id
            assert town_id is not None
        with store.session() as s:
            return town_id, [r.id for r in s.exec(select(Resident)).all() if r.id is not None]

    town_id, resident_ids = run_async(found())
    services.close()  # the vectors are written before the copies are taken
    seeds = {rid: index.fetch(f"tpl-t{town_id}", rid) for rid in resident_ids}
    arrays: dict[str, np.ndarray] = {"town": np.array([town_id])}
    for rid, (ids, vectors) in seeds.items():
        arrays[f"ids{rid}"], arrays[f"vec{rid}"] = ids, vectors
    np.savez(building / "vectors.npz", allow_pickle=False, **arrays)
    for i in range(towns):
        shutil.copyfile(template, building / f"town-{i}.db")
        _seed(index, f"t{i}-t{town_id}", seeds)
    template.unlink()
    ChromaIndex.release_all()
    (building / "ready").write_text("ok\n")
    building.rename(folder)
    return folder


def copy_run(cache: Path, run: Path, *, with_chroma: bool) -> None:
    """The cached towns, copied for one run (their vectors too, unless a server holds them)."""
    ignore = None if with_chroma else shutil.ignore_patterns("chroma")
    shutil.copytree(cache, run, dirs_exist_ok=True, ignore=ignore)


Seeds = dict[int, tuple[np.ndarray, np.ndarray]]  # resident id -> memory ids, vectors


def _seed(index: ChromaIndex, collection: str, seeds: Seeds) -> None:
    """A town's seed vectors (each resident's ids and vectors) into its collection."""
    ids = np.concatenate([ids for ids, _ in seeds.values()])
    residents = [rid for rid, (ids, _) in seeds.items() for _ in range(len(ids))]
    index.upsert(
        collection, ids.tolist(), residents, np.concatenate([v for _, v in seeds.values()])
    )


def _seeds(cache: Path) -> tuple[int, Seeds]:
    with np.load(cache / "vectors.npz") as data:
        rids = sorted(int(k[3:]) for k in data.files if k.startswith("ids"))
        town = int(data["town"][0])
        return town, {rid: (data[f"ids{rid}"], data[f"vec{rid}"]) for rid in rids}


def seed_server(index: ChromaIndex, cache: Path, prefix: str, towns: int) -> None:
    """Every town's seed vectors into a Chroma server, under this run's namespaces."""
    town, seeds = _seeds(cache)
    for i in range(towns):
        _seed(index, f"{prefix}t{i}-t{town}", seeds)


def drop_server(index: ChromaIndex, cache: Path, prefix: str, towns: int) -> None:
    town, _ = _seeds(cache)
    for i in range(towns):
        index.drop(f"{prefix}t{i}-t{town}")


# -- the run --------------------------------------------------------------------------------------


@dataclass
class BenchTown:
    number: int
    engine: Engine
    tally: UsageTally
    offset: float


def _peak_rss_reset() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_rss_mb() -> float:
    """The peak resident memory of this process (since ``_peak_rss_reset``)."""
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
            _peak_rss_reset()
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
                brain = ChainCountingBrain(bench_gateway(client, tally, concurrency))
                engine = Engine(store, spec, brain, services.stream, town_id)
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
            bench.peak_rss_mb = _peak_rss_mb()
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


def bench_scale(
    towns: Annotated[int, typer.Option(min=1, help="Towns run at once.")] = 40,
    residents_per_town: Annotated[
        int, typer.Option(min=1, max=25, help="Smallville residents per town (up to 25).")
    ] = 25,
    latency_ms: Annotated[
        float, typer.Option(min=0, help="Fake LLM latency per completion.")
    ] = 1000.0,
    minutes: Annotated[
        int, typer.Option(min=1, help="Real minutes to run (a tick a minute per town).")
    ] = 5,
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight per town.")] = 64,
    aligned: Annotated[
        bool, typer.Option(help="Every town ticks at the same second (the worst case).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """How many residents one process keeps in real time, against the fake LLM server."""
    from bot.cli.common import (
        BENCH_REFRESH_PER_SECOND,
        guarded,
        out,
        progress_bar,
        settings_and_logging,
    )

    def run() -> None:
        settings = settings_and_logging()
        with progress_bar(refresh_per_second=BENCH_REFRESH_PER_SECOND) as bar:
            task = bar.add_task("founding and loading", total=1)

            def progress(done: int, total: int) -> None:
                bar.update(task, description="ticks", completed=done, total=total)

            result = run_async(
                run_scale_bench(
                    settings,
                    towns,
                    residents_per_town,
                    latency_ms,
                    minutes,
                    concurrency,
                    aligned,
                    progress,
                )
            ).as_json()
        if as_json:
            print(json.dumps(result))
            return
        out.print(
            f"{result['residents']} residents ({towns} towns of {residents_per_town}) at "
            f"{latency_ms:g} ms: {result['ticks_on_time_pct']}% of {result['ticks']} ticks on "
            f"time (p50 {result['tick_p50_s']} s, p95 {result['tick_p95_s']} s, max "
            f"{result['tick_max_s']} s); peak RSS {result['peak_rss_mb']} MB; CPU "
            f"{result['cpu_pct_of_one_core']}% of one core; {result['llm_calls']} LLM calls"
        )

    guarded(run)
