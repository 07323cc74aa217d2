"""``bottown experiment``: the papers' experiments as one command each (the gather experiment)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from bot.cli.common import (
    err,
    guarded,
    out,
    progress_bar,
    settings_with_brain,
    stamped_folder,
)
from bot.runtime.settings import Settings
from bot.runtime.wiring import build_embedder
from town.experiments.gather.field import MOVES, GatherConfig
from town.experiments.gather.log import CallLedger
from town.experiments.gather.memories import AgentMemories
from town.experiments.gather.run import OFFLINE_LABEL, GatherRun
from town.llm.chain import think_with
from town.llm.client import Client, open_client
from town.llm.embedders import CachedEmbedder, Embedder, HashEmbedder
from town.llm.pacing import default_slots
from town.llm.port import Brain, OfflineBrain
from town.llm.usage import TokenBudget
from town.memory.minilm import MiniLMEmbedder
from town.store.db import Store

if TYPE_CHECKING:  # scikit-learn and matplotlib load only when an experiment runs
    from town.experiments.gather.analysis import RunAnalysis, Vectorise

experiment_app = typer.Typer(
    rich_markup_mode=None, help="The papers' experiments, one command each.", no_args_is_help=True
)

# The paper's sampling (Takata et al., table 2). top-p 0.95 and top-k 40 are not sent: the
# gateway does not pass top_p, and top_k is not part of the OpenAI API.
TEMPERATURE = 0.1
MAX_TOKENS = 256
MAX_AGENTS = 1000
DIVERSITY = {"tfidf": "TF-IDF", "minilm": "all-MiniLM-L6-v2", "hash": "hashed words"}


def parse_agent_counts(text: str) -> list[int]:
    """``"5,10,15,20"`` -> ``[5, 10, 15, 20]`` (duplicates dropped), or a clear ``ValueError``."""
    counts: list[int] = []
    for part in text.split(","):
        item = part.strip().replace("_", "")
        if not item.isdigit() or not 1 <= int(item) <= MAX_AGENTS:
            raise ValueError(
                f"--agents must be whole numbers from 1 to {MAX_AGENTS} separated by commas, "
                f"e.g. 5,10,15,20; {part.strip()!r} is not"
            )
        if int(item) not in counts:
            counts.append(int(item))
    return counts


def prepare_out(path: Path) -> Path:
    """Create the output folder and make sure it can be written, or say why not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ValueError(f"cannot write to --out {path}: {reason}") from None
    return path


@dataclass
class Thinker:
    """The brain a run thinks with, its label for tables and plots, and its usage ledger."""

    brain: Brain
    label: str
    model: str | None = None
    ledger: CallLedger | None = None
    client: Client | None = None


def build_thinker(settings: Settings, uses_llm: bool) -> Thinker:
    """As ``bot.runtime.wiring.build_brain``, with the paper's temperature and token limit, and
    usage kept in memory (an experiment is no town)."""
    if not uses_llm:
        return Thinker(OfflineBrain(), OFFLINE_LABEL)
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
    retries = settings.llm_max_attempts - 1
    client = open_client(settings.llm_base_url, key, settings.llm_timeout_s, retries)
    ledger = CallLedger()
    budget = TokenBudget(settings.daily_token_budget or None, lambda: ledger.total_tokens)
    slots = settings.llm_slots or default_slots(settings.llm_base_url, settings.llm_concurrency)
    brain, _handles = think_with(
        client,
        settings.llm_model,
        slots=slots,
        usage=ledger,
        budget=budget,
        temperature=TEMPERATURE,
        max_tokens=MAX_TOKENS,
    )
    return Thinker(brain, f"LLM {settings.llm_model}", settings.llm_model, ledger, client)


def build_vectoriser(choice: str) -> Vectorise:
    from town.experiments.gather.analysis import tfidf_vectors

    if choice == "tfidf":
        return tfidf_vectors
    if choice not in DIVERSITY:
        raise ValueError(f"--diversity must be one of {', '.join(DIVERSITY)}")
    embedder: Embedder = MiniLMEmbedder() if choice == "minilm" else HashEmbedder()
    cached = CachedEmbedder(embedder)
    return lambda texts: cached.embed(texts)


@dataclass
class GatherReport:
    out: Path
    label: str
    runs: list[RunAnalysis]
    files: list[Path]
    wall_s: float
    usage: dict[str, int] = field(default_factory=dict)


async def run_gather_experiment(
    counts: Sequence[int],
    base: GatherConfig,
    thinker: Thinker,
    out_dir: Path,
    *,
    diversity: str = "tfidf",
    embedder: Embedder | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> GatherReport:
    """One run per agent count: logs as they go, then the analysis, the plots and the tables."""
    from town.experiments.gather.analysis import analyse
    from town.experiments.gather.plots import write_plots
    from town.experiments.gather.tables import write_tables

    began = time.perf_counter()
    label = f"{thinker.label}, memory" if base.memory else thinker.label
    vectorise = build_vectoriser(diversity)
    store = _memory_store(out_dir) if base.memory else None
    runs: list[RunAnalysis] = []
    files: list[Path] = []
    walls: dict[int, float] = {}
    try:
        for n in counts:
            config = GatherConfig(
                agents=n,
                steps=base.steps,
                seed=base.seed,
                size=base.size,
                goal=base.goal,
                reception=base.reception,
                mission=base.mission,
                memory=base.memory,
            )
            run = GatherRun(config, thinker.brain, label=label, ledger=thinker.ledger)
            if store is not None:
                memory_embedder = embedder if embedder is not None else HashEmbedder()
                run.memories = AgentMemories(store, memory_embedder, f"gather-{n}", run.names)
            log_path = out_dir / f"log-{n}agents.jsonl"
            started = time.perf_counter()
            with log_path.open("w", encoding="utf-8") as log:
                records = await run.run(log, None if on_step is None else _tell(on_step, n))
            walls[n] = round(time.perf_counter() - started, 2)
            files.append(log_path)
            runs.append(analyse(records, config, vectorise))
    finally:
        if store is not None:
            store.dispose()
        if thinker.client is not None:
            await thinker.client.close()
    files += write_plots(runs, base, out_dir, DIVERSITY[diversity])
    files += write_tables(runs, out_dir)
    wall = round(time.perf_counter() - began, 2)
    usage = _usage(thinker)
    meta = _meta(counts, base, thinker, label, diversity, walls, wall, usage)
    (out_dir / "run.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    files.append(out_dir / "run.json")
    return GatherReport(out_dir, label, runs, files, wall, usage)


def _tell(on_step: Callable[[int, int], None], n: int) -> Callable[[int], None]:
    return lambda done: on_step(n, done)


def _memory_store(out_dir: Path) -> Store:
    path = out_dir / "memory.db"
    for stale in (path, path.with_name("memory.db-wal"), path.with_name("memory.db-shm")):
        stale.unlink(missing_ok=True)  # each experiment starts with fresh memories
    return Store.open(f"sqlite:///{path}")


def _usage(thinker: Thinker) -> dict[str, int]:
    if thinker.ledger is None:
        return {}
    total = thinker.ledger.total
    return {
        "calls": total.calls,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "answers": total.answers,
        "fallbacks": total.fallbacks,
    }


def _meta(
    counts: Sequence[int],
    base: GatherConfig,
    thinker: Thinker,
    label: str,
    diversity: str,
    walls: dict[int, float],
    wall: float,
    usage: dict[str, int],
) -> dict[str, Any]:
    return {
        "experiment": "gather (Takata et al.)",
        "brain": label,
        "model": thinker.model,
        "temperature": TEMPERATURE if thinker.model else None,
        "max_tokens": MAX_TOKENS if thinker.model else None,
        "agents": list(counts),
        "steps": base.steps,
        "seed": base.seed,
        "field": [base.size, base.size],
        "goal": list(base.goal),
        "reception_range": base.reception,
        "mission": base.mission,
        "memory": base.memory,
        "diversity": DIVERSITY[diversity],
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": wall,
        "wall_s_by_agents": {str(n): s for n, s in walls.items()},
        "usage": usage,
    }


@experiment_app.command("gather")
def gather(
    agents: Annotated[
        str, typer.Option(help="Agent counts, one run each, comma-separated.")
    ] = "5,10,15,20",
    steps: Annotated[int, typer.Option(min=1, help="Steps per run.")] = 100,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random starts.")] = 0,
    memory: Annotated[
        bool, typer.Option("--memory", help="Give each agent a memory stream.")
    ] = False,
    diversity: Annotated[
        str, typer.Option(help="Message vectors for diversity: tfidf, minilm or hash.")
    ] = "tfidf",
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output folder (default: <data_dir>/experiments/gather-<time>)."
        ),
    ] = None,
) -> None:
    """Takata et al.'s gather experiment: identical agents on a torus look for a goal together."""

    def run() -> None:
        counts = parse_agent_counts(agents)
        if diversity not in DIVERSITY:
            raise ValueError(f"--diversity must be one of {', '.join(DIVERSITY)}")
        settings = settings_with_brain(brain)
        uses_llm = settings.uses_llm
        target = prepare_out(stamped_folder(settings, "experiments", "gather", out_dir))
        thinker = build_thinker(settings, uses_llm)
        base = GatherConfig(agents=max(counts), steps=steps, seed=seed, memory=memory)
        embedder = build_embedder(settings) if memory else None
        with progress_bar() as bar:
            task = bar.add_task("starting", total=len(counts) * steps)
            finished: dict[int, int] = {}

            def progress(n: int, done: int) -> None:
                finished[n] = done
                bar.update(task, description=f"{n} agents", completed=sum(finished.values()))

            report = asyncio.run(
                run_gather_experiment(
                    counts,
                    base,
                    thinker,
                    target,
                    diversity=diversity,
                    embedder=embedder,
                    on_step=progress,
                )
            )
        show_report(report)

    guarded(run)


def show_report(report: GatherReport) -> None:
    from town.experiments.gather.tables import summary_row

    table = Table(
        "agents",
        "clustered\nat end",
        "largest\ncluster",
        "near goal\nat end",
        "knew\nthe goal",
        "found at\nstep",
        "by\nrelay",
        "moves % up/down/\nleft/right/stay",
        "un-\nparsed",
        "diversity\nfirst -> last",
        title=f"Gather experiment ({report.label})",
    )
    for run in report.runs:
        row = summary_row(run)
        table.add_row(
            row["agents"],
            row["clustered at end"],
            row["largest cluster at end"],
            row["near goal at end"],
            row["knew the goal"],
            row["first found (step)"],
            row["learned by relay"],
            "/".join(f"{float(row[f'{m} %']):.0f}" for m in MOVES),
            row["unparsed"],
            f"{row['diversity first step']} -> {row['diversity last step']}",
        )
    out.print(table)
    fallbacks = report.usage.get("fallbacks", 0)
    if fallbacks:
        err.print(
            f"[yellow]warning:[/yellow] {fallbacks} of {report.usage['answers']} answers came "
            'from the offline brain because the LLM failed (marked "fallback" in the logs)'
        )
    if report.usage:
        out.print(
            f"LLM: {report.usage['calls']} calls, "
            f"{report.usage['prompt_tokens'] + report.usage['completion_tokens']:,} tokens"
        )
    out.print(f"wall {report.wall_s} s; written to {report.out}:")
    for path in report.files:
        out.print(f"  {path.name}")
