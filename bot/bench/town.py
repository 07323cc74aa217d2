"""``bottown bench town``: what a game day of Smallville costs, and how fast it runs.

The town runs against the fake OpenAI-compatible server (``bottown fake-llm``, started as its own
process on a loopback port) with a fixed latency per completion, or against the configured LLM
(``--llm configured``), through the real gateway and ``openai`` client. Founding the town (rating
and embedding the seed memories) is not counted.

- ``calls_per_resident_day`` and ``tokens_per_resident_day``, in all and ``by_task``;
- ``activity``: actions, moves, conversations, utterances, reactions and reflections per resident
  per game day, so a budget met by doing nothing shows;
- ``wall_s``: the ticks' wall time; ``serial_s``: calls x latency, the time one call after another
  would take; ``critical_path_s``: for each tick, its longest chain of dependent calls (see
  ``town/llm/depth.py``) times the latency, summed over the ticks; ``loop_cpu_s``: the CPU time of
  the event loop's thread over the ticks (what the wall time adds to the critical path is mostly
  this: the loop thinks for every resident in turn, and one tick's calls go out one after another);
- ``fallback_share``: answers by the offline fallback over all answers, ``fallbacks_by_task`` (by
  reason) and ``answers_by_task``; ``response_format``: the mode the server settled on;
  ``cut_calls``: the town's calls cut short for a person's (an admin command's) and sent again;
- ``longest_write_ms``: the longest write transaction of a tick (its one write, after thinking);
  ``rethought_calls``: LLM calls made by ticks that another writer made roll back (and so made
  again); with ``--admin-every-min N``, an admin command (a whisper or a ``set``, in turn) every
  N game minutes, sent while a tick thinks, and ``admin_longest_ms``, the longest of them.
- ``slots``: the calls the fake server answers at once (``--slots``, 1 by default as a local
  server's; 0: no limit); with ``--tick-seconds`` the ticks are paced as a live town's (a tick
  every that many seconds, the gateway keeping the pace) and ``clock_behind_pct`` says what share
  of the runs due were skipped because a tick outlasted its interval;
- ``cached_prompt_share``: the share of prompt tokens the server's prefix cache held, where the
  server reports ``usage.prompt_tokens_details.cached_tokens`` (None where it does not).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
from sqlmodel import select

from bot.bench.pace import Pace, behind_pct
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services
from town.inputs import admin
from town.llm.chain import Handles, think_with
from town.llm.client import open_client
from town.llm.depth import ChainCountingBrain
from town.llm.pacing import default_slots
from town.llm.port import Brain, OfflineBrain
from town.llm.usage import UsageTally
from town.memory.embedding_queue import flush_queues
from town.memory.vectors import ChromaIndex
from town.store.models import Town, WorldObject
from town.tick.engine import Engine, TickReport, TownChanged
from town.tick.seed import found_town
from town.world.load import load_town
from town.world.persona import TownSpec

ACTIVITY = {
    "actions": "action",
    "moves": "moved",
    "conversations": "conversation",
    "utterances": "said",
    "reactions": "reacted",
    "reflections": "reflected",
}


@dataclass
class TownBench:
    residents: int
    days: float
    latency_ms: float
    tally: UsageTally
    activity: Counter[str]
    wall_s: float
    chain_calls: int
    ticks: int
    loop_cpu_s: float
    llm: str = "fake"
    answers: dict[str, Any] = field(default_factory=dict)
    response_format: str = "json_schema"
    writes: Writes = field(default_factory=lambda: Writes())
    slots: int = 1
    tick_seconds: float = 0.0
    skipped: int = 0  # runs due while a tick still ran (paced ticks only)

    def as_json(self) -> dict[str, Any]:
        per = self.residents * self.days
        total = self.tally.total
        return {
            "residents": self.residents,
            "game_hours": round(self.days * 24, 2),
            "ticks": self.ticks,
            "calls_per_resident_day": round(total.calls / per, 2),
            "tokens_per_resident_day": round(total.total_tokens / per, 1),
            "by_task": {
                task: {
                    "calls_per_resident_day": round(count.calls / per, 2),
                    "tokens_per_resident_day": round(count.total_tokens / per, 1),
                }
                for task, count in sorted(self.tally.by_task.items())
            },
            "fallbacks": total.fallbacks,
            "activity": {key: round(self.activity[key] / per, 2) for key in ACTIVITY},
            "wall_s": round(self.wall_s, 2),
            "serial_s": round(total.calls * self.latency_ms / 1000, 2),
            "critical_path_s": round(self.chain_calls * self.latency_ms / 1000, 2),
            "loop_cpu_s": round(self.loop_cpu_s, 2),
            "llm": self.llm,
            "response_format": self.response_format,
            **self.writes.as_json(),
            "slots": self.slots,
            "tick_seconds": self.tick_seconds,
            "clock_behind_pct": behind_pct(self.ticks, self.skipped),
            **self.answers,
        }


@dataclass
class Writes:
    """How long the bench's writes took, and what was thought again."""

    longest_write_ms: float = 0.0
    rethought_calls: int = 0
    admin_ms: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "longest_write_ms": round(self.longest_write_ms, 1),
            "rethought_calls": self.rethought_calls,
            "admin_inputs": len(self.admin_ms),
            "admin_longest_ms": round(max(self.admin_ms, default=0.0), 1),
        }


async def admin_while_thinking(
    engine: Engine, objects: list[str], n: int, wait_s: float, writes: Writes
) -> None:
    """The ``n``-th admin command of a bench (a whisper or a ``set``, in turn), sent ``wait_s``
    after the tick it meets began (inside its first LLM call), timed."""
    await asyncio.sleep(wait_s)
    began = time.perf_counter()
    if n % 2 == 0 or not objects:
        resident = engine.spec.residents[n % len(engine.spec.residents)].name
        await admin.whisper(engine, resident, "Think about the week ahead", by="bench")
    else:
        path = objects[n % len(objects)]
        await admin.set_object(engine, path, "being tidied up", by="bench")
    writes.admin_ms.append((time.perf_counter() - began) * 1000)


async def tick_counted(engine: Engine, tally: UsageTally, writes: Writes) -> TickReport:
    """One tick; one that another writer made roll back (``TownChanged``) runs again, and the
    LLM calls it made count as thought again."""
    while True:
        calls = tally.total.calls
        try:
            report = await engine.tick()
        except TownChanged:
            writes.rethought_calls += tally.total.calls - calls
            continue
        writes.longest_write_ms = max(writes.longest_write_ms, report.write_ms)
        return report


def object_paths(engine: Engine) -> list[str]:
    """Every object of the town, as ``set`` names it ("Area: sub-area: object")."""
    with engine.store.session() as s:
        rows = s.exec(select(WorldObject).where(WorldObject.town_id == engine.town_id)).all()
        return sorted(f"{row.location}: {row.name}" for row in rows)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_fake_llm(latency_ms: float, slots: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli.main",
            "fake-llm",
            "--port",
            str(port),
            "--latency-ms",
            str(latency_ms),
            "--slots",
            str(slots),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the fake LLM server did not start")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/v1"
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the fake LLM server did not open its port within 30 s")


def bench_brain(
    client: openai.AsyncOpenAI,
    tally: UsageTally,
    slots: int,
    model: str = "bottown-fake",
    *,
    cut: bool = True,
) -> tuple[Brain, Handles]:
    """The brain a town bench thinks through, composed as a deployment's: the gateway to the
    fake server's model (or the configured one) on a pacer of ``slots`` (until the server says
    its own), the fallback and the report, counting usage."""
    return think_with(client, model, slots=slots, usage=tally, cut=cut)


LLM_CHOICES = ("fake", "configured")


NO_LLM = (
    "--llm configured needs an LLM: set BOTTOWN_LLM_BASE_URL (and BOTTOWN_LLM_MODEL, "
    "BOTTOWN_LLM_API_KEY if the server wants one)"
)


def check_llm(settings: Settings, llm: str) -> None:
    """A bench's ``--llm`` choice, checked: ValueError saying what to set or choose."""
    if llm not in LLM_CHOICES:
        raise ValueError(f"--llm must be one of {', '.join(LLM_CHOICES)}")
    if llm == "configured" and not settings.uses_llm:
        raise ValueError(NO_LLM)


def bench_llm(
    settings: Settings,
    fake_url: str | None,
    tally: UsageTally,
    concurrency: int,
    latency_ms: float,
    *,
    cut: bool = True,
) -> tuple[openai.AsyncOpenAI, Brain, Handles]:
    """The client and brain a bench thinks through: the fake server at ``fake_url``, or the
    LLM the settings name (None), with its own slots and timeouts."""
    if fake_url is None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        client = open_client(
            settings.llm_base_url, key, settings.llm_timeout_s, settings.llm_max_attempts - 1
        )
        slots = settings.llm_slots or default_slots(settings.llm_base_url, settings.llm_concurrency)
        return client, *bench_brain(client, tally, slots, settings.llm_model, cut=cut)
    client = open_client(fake_url, "bench", max(30.0, latency_ms / 100))
    return client, *bench_brain(client, tally, concurrency, cut=cut)


@dataclass
class BenchTown:
    """A bench's own Smallville, founded on the offline brain with the embedded store and index."""

    settings: Settings  # what it runs on: the bench's folder, SQLite, embedded Chroma
    services: Services
    town: Town
    id: int


async def found_bench_town(settings: Settings, spec: TownSpec, folder: Path) -> BenchTown:
    """Found ``spec``'s residents as a bench town in ``folder``."""
    local = settings.model_copy(
        update={"data_dir": folder, "database_url": None, "chroma_url": None}
    )
    services = Services.open(local)
    town = await found_town(
        services.store, spec, "bench", OfflineBrain(), services.stream, persona="smallville"
    )
    assert town.id is not None
    return BenchTown(local, services, town, town.id)


def report_lines(result: dict[str, Any]) -> list[str]:
    """What a bench's JSON says about the fallback, for the table's reader."""
    lines = [
        f"LLM {result['llm']} ({result['response_format']} mode): "
        f"{result['fallback_share']:.1%} of answers by the offline fallback"
    ]
    for task, reasons in result["fallbacks_by_task"].items():
        words = result.get("tasks_in_words", {}).get(task, task)
        lines.append(f"  {words}: " + ", ".join(f"{r} {n}" for r, n in reasons.items()))
    if result.get("pace"):
        lines.append(result["pace"])
    cached = result.get("cached_prompt_share")
    lines.append(
        "prompt tokens held by the server's cache: "
        + ("not reported" if cached is None else f"{cached:.0%}")
    )
    return lines


def _count(activity: Counter[str], report: TickReport) -> None:
    for event in report.events:
        if event.kind == "moved" and event.data.get("direction") != "in":
            continue
        for key, kind in ACTIVITY.items():
            if event.kind == kind:
                weight = 2 if kind == "conversation" else 1  # two residents take part
                activity[key] += weight


async def run_town_bench(
    settings: Settings,
    residents: int = 25,
    hours: float = 24,
    latency_ms: float = 100,
    concurrency: int = 64,
    progress: Callable[[int, int], None] | None = None,
    llm: str = "fake",
    admin_every_min: int = 0,
    slots: int = 1,
    tick_seconds: float = 0.0,
) -> TownBench:
    spec = load_town("smallville")
    if not 1 <= residents <= len(spec.residents):
        raise ValueError(f"--residents must be 1 to {len(spec.residents)} for smallville")
    check_llm(settings, llm)
    spec = spec.model_copy(update={"residents": spec.residents[:residents]})
    proc, url = (None, "") if llm == "configured" else start_fake_llm(latency_ms, slots)
    try:
        with tempfile.TemporaryDirectory(prefix="bottown-bench-") as tmp:
            bench = await found_bench_town(settings, spec, Path(tmp))
            services = bench.services
            flush_queues(services.executor)  # founding's vectors too are not counted
            tally = UsageTally()
            fake_url = None if proc is None else url
            client, brain, handles = bench_llm(settings, fake_url, tally, concurrency, latency_ms)
            if tick_seconds > 0 and settings.llm_pace == "keep":
                handles.keep_pace(tick_seconds)
            engine = Engine(
                services.store,
                spec,
                ChainCountingBrain(brain),
                services.stream,
                bench.id,
                llm=handles,
            )
            step = bench.town.minutes_per_tick
            total = int(timedelta(hours=hours) / timedelta(minutes=step))
            activity: Counter[str] = Counter()
            chain, writes, objects = 0, Writes(), object_paths(engine)
            began, began_cpu = time.perf_counter(), time.thread_time()
            pace = Pace(tick_seconds)
            for done in range(total):
                if done:
                    await pace.next()
                ticking = asyncio.create_task(tick_counted(engine, tally, writes))
                if admin_every_min and done * step // admin_every_min < (done + 1) * step // (
                    admin_every_min
                ):
                    wait_s = latency_ms / 2000  # (mid-call, at the fake server's latency)
                    n = len(writes.admin_ms)
                    await admin_while_thinking(engine, objects, n, wait_s, writes)
                report = await ticking
                chain += report.chain
                _count(activity, report)
                if progress:
                    progress(done + 1, total)
            flush_queues(services.executor)  # the day's index writes are part of its cost
            wall, loop_cpu = time.perf_counter() - began, time.thread_time() - began_cpu
            await client.close()
            services.close()  # pending index writes finish before the folder goes
            ChromaIndex.release_all()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    return TownBench(
        residents,
        hours / 24,
        latency_ms,
        tally,
        activity,
        wall,
        chain,
        total,
        loop_cpu,
        settings.llm_model if proc is None else "fake",
        {
            **handles.report.as_json(),
            "cut_calls": handles.pacer.cuts if handles.pacer else 0,
            "pace": handles.pace_line(),
        },
        handles.models[0].response_format_kind,
        writes,
        slots if proc is not None else 0,
        tick_seconds,
        pace.skipped,
    )
