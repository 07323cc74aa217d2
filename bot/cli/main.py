"""The ``bottown`` command line."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress
from typing import Annotated

import typer
from rich.table import Table

from bot.bench.scale import bench_scale
from bot.cli import eval_interview
from bot.cli import town as cli_town
from bot.cli.audit import audit
from bot.cli.common import (
    FakeLatencyMs,
    JsonFlag,
    err,
    guarded,
    out,
    progress_bar,
    progress_counter,
    settings_and_logging,
)
from bot.cli.eval_society import society
from bot.cli.experiment import experiment_app
from bot.runtime.logs import setup_logging
from bot.runtime.settings import load_settings, masked_url
from bot.runtime.worker import worker

app = typer.Typer(
    name="bottown",
    help="A town of generative-agent residents for Discord, Slack and the browser.",
    no_args_is_help=True,
    add_completion=False,
)
bench_app = typer.Typer(help="Benchmarks that print speed and cost figures.", no_args_is_help=True)
llm_app = typer.Typer(help="The LLM connection.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(llm_app, name="llm")
app.add_typer(experiment_app, name="experiment")
eval_app = typer.Typer(help="The papers' evaluations of a simulated town.", no_args_is_help=True)
eval_app.command("society")(society)
eval_app.command("interview")(eval_interview.interview)
eval_app.command("rate")(eval_interview.rate)
app.add_typer(eval_app, name="eval")
cli_town.register(app)
app.command()(audit)
app.command()(worker)
bench_app.command("scale")(bench_scale)


@app.command()
def config() -> None:
    """Show the effective settings, secrets masked."""

    def show() -> None:
        settings = load_settings()
        table = Table("key", "value", title="bottown settings")
        for key, value in settings.model_dump().items():
            shown = "***" if "key" in key and value else value
            if key == "database_url" and value:
                shown = masked_url(str(value))
            table.add_row(key, str(shown))
        table.add_row("(database)", masked_url(settings.resolved_database_url))
        table.add_row("(brain)", "LLM " + settings.llm_model if settings.uses_llm else "offline")
        out.print(table)

    guarded(show)


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema (every command does this on start, too)."""

    def run() -> None:
        from town.store.db import Store

        settings = settings_and_logging()
        Store.open(settings.resolved_database_url)
        out.print(f"database {masked_url(settings.resolved_database_url)} is up to date")

    guarded(run)


@app.command("fake-llm")
def fake_llm(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8900,
    host: Annotated[str, typer.Option(help="Interface; keep it on loopback.")] = "127.0.0.1",
    latency_ms: Annotated[float, typer.Option(help="Delay added to every completion.")] = 0.0,
    fault_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of faulty replies.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the fault lottery.")] = 0,
) -> None:
    """Serve a fake OpenAI-compatible API answered by the offline brain (for tests and benches)."""
    from standins.llm.server import serve

    setup_logging("INFO")
    out.print(
        f"fake OpenAI-compatible server on http://{host}:{port}/v1 "
        f"(offline brain, latency {latency_ms:g} ms, fault rate {fault_rate:g}); Ctrl-C stops it"
    )
    with suppress(KeyboardInterrupt):  # (asyncio's loop: the bench's stand-in stays as measured)
        asyncio.run(serve(host, port, latency_ms=latency_ms, fault_rate=fault_rate, seed=seed))


@llm_app.command("check")
def llm_check() -> None:
    """Send one small request to the configured LLM and say plainly whether it works."""
    from bot.cli.llm_check import check_llm

    def run() -> None:
        settings = settings_and_logging()
        if not settings.uses_llm:
            out.print(
                "no LLM configured: the town runs on the offline brain "
                "(set BOTTOWN_LLM_BASE_URL and/or BOTTOWN_LLM_API_KEY)"
            )
            return
        ok, message = asyncio.run(check_llm(settings))
        (out if ok else err).print(message, highlight=False)
        if not ok:
            raise typer.Exit(1)

    guarded(run)


@app.command()
def remember(
    resident: Annotated[str, typer.Argument(help="Resident's name.")],
    text: Annotated[str, typer.Argument(help="What the resident remembers.")],
    town: Annotated[str, typer.Option(help="Town name; created if missing.")] = "demo",
    kind: Annotated[
        str, typer.Option(help="seed, observation, chat, plan, reflection, directive.")
    ] = "observation",
    importance: Annotated[
        int | None, typer.Option(min=1, max=10, help="1-10; default: ask the brain.")
    ] = None,
) -> None:
    """Add one memory to a resident's stream (the resident is created if missing)."""
    from bot.cli.memory import add_memory

    def run() -> None:
        settings = settings_and_logging()
        memory = asyncio.run(add_memory(settings, town, resident, text, kind, importance))
        out.print(f"remembered #{memory.id} (importance {memory.importance}): {memory.text}")

    guarded(run)


@app.command()
def recall(
    resident: Annotated[str, typer.Argument(help="Resident's name.")],
    query: Annotated[str, typer.Argument(help="What to retrieve memories about.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "demo",
    k: Annotated[int, typer.Option(min=1, max=200, help="How many memories.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Retrieve a resident's memories with the paper's score (recency, importance, relevance)."""
    from bot.cli.memory import recall_memories

    def run() -> None:
        settings = settings_and_logging()
        found = recall_memories(settings, town, resident, query, k)
        if as_json:
            for r in found:
                out.print_json(
                    json.dumps(
                        {
                            "id": r.memory.id,
                            "kind": r.memory.kind,
                            "text": r.memory.text,
                            "score": r.score,
                            "recency": r.recency,
                            "importance": r.importance,
                            "relevance": r.relevance,
                        }
                    )
                )
            return
        table = Table(
            "#", "kind", "score", "rec", "imp", "rel", "memory", title=f"{resident}: {query}"
        )
        for r in found:
            table.add_row(
                str(r.memory.id),
                r.memory.kind,
                f"{r.score:.3f}",
                f"{r.recency:.2f}",
                f"{r.importance:.2f}",
                f"{r.relevance:.2f}",
                r.memory.text,
            )
        out.print(table)

    guarded(run)


@app.command()
def demo(
    headless: Annotated[
        bool, typer.Option(help="Run a morning in the terminal instead of serving the page.")
    ] = False,
    hours: Annotated[
        float, typer.Option(min=0.5, max=48, help="With --headless: game hours to run.")
    ] = 5.0,
    tick_seconds: Annotated[
        float, typer.Option(min=0.1, help="Real seconds between ticks while served.")
    ] = 4.0,
    port: Annotated[int | None, typer.Option(help="Port of the page (default: settings).")] = None,
) -> None:
    """Smallville afresh: served in the browser (make demo), or a morning headless."""
    from bot.runtime.demo import run_demo, serve_demo

    def run() -> None:
        settings = settings_and_logging()
        if port is not None:
            settings = settings.model_copy(update={"web_port": port})
        try:
            if headless:
                asyncio.run(run_demo(settings, out, hours))
            else:
                asyncio.run(serve_demo(settings, out, tick_seconds=tick_seconds))
        except KeyboardInterrupt:
            err.print("stopped")

    guarded(run)


@bench_app.command("town")
def bench_town(
    residents: Annotated[int, typer.Option(min=1, help="Smallville residents (up to 25).")] = 25,
    hours: Annotated[float, typer.Option(min=0.5, help="Game hours to run.")] = 24.0,
    latency_ms: FakeLatencyMs = 100.0,
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight.")] = 64,
    as_json: JsonFlag = False,
) -> None:
    """LLM calls, tokens and activity per resident per game day, against the fake LLM server."""
    from bot.bench.town import run_town_bench

    def run() -> None:
        settings = settings_and_logging()
        with progress_counter("ticks") as progress:
            result = asyncio.run(
                run_town_bench(settings, residents, hours, latency_ms, concurrency, progress)
            ).as_json()
        if as_json:
            print(json.dumps(result))
            return
        table = Table(
            "task",
            "calls / resident / day",
            "tokens / resident / day",
            title=f"{residents} residents, {hours:g} game hours, {latency_ms:g} ms",
        )
        for name, row in result["by_task"].items():
            table.add_row(
                name,
                f"{row['calls_per_resident_day']:.1f}",
                f"{row['tokens_per_resident_day']:,.0f}",
            )
        table.add_row(
            "[bold]all[/bold]",
            f"{result['calls_per_resident_day']:.1f}",
            f"{result['tokens_per_resident_day']:,.0f}",
        )
        out.print(table)
        out.print(
            "activity per resident per day: "
            + ", ".join(f"{k} {v}" for k, v in result["activity"].items())
        )
        out.print(
            f"wall {result['wall_s']} s, serial {result['serial_s']} s, critical path "
            f"{result['critical_path_s']} s, event loop CPU {result['loop_cpu_s']} s"
        )

    guarded(run)


@bench_app.command("retrieval")
def bench_retrieval(
    as_json: JsonFlag = False,
    sizes: Annotated[
        str, typer.Option(help="Comma-separated memory counts.")
    ] = "1000,10000,100000",
    queries: Annotated[int, typer.Option(min=10, help="Timed queries per size.")] = 200,
) -> None:
    """p50/p95 retrieval latency at 1k, 10k and 100k memories, and the insert rate."""
    from bot.bench.retrieval import run_retrieval_bench
    from bot.runtime.wiring import build_embedder

    def run() -> None:
        settings = settings_and_logging()
        counts = [int(s.replace("_", "")) for s in sizes.split(",") if s.strip()]
        with progress_bar() as bar:
            task = bar.add_task("starting", total=1)

            def progress(what: str, done: int, total: int) -> None:
                bar.update(task, description=what, completed=done, total=total)

            result = run_retrieval_bench(
                build_embedder(settings), counts, queries, progress=progress
            )
        if as_json:
            print(json.dumps(result.as_json()))
            return
        table = Table("memories", "p50 ms", "p95 ms", title=f"retrieval ({result.embedder})")
        for r in result.sizes:
            table.add_row(f"{r.size:,}", f"{r.p50_ms:.2f}", f"{r.p95_ms:.2f}")
        out.print(table)
        out.print(
            f"embedding a query (not in the table): p50 {result.query_embed_p50_ms:.2f} ms, "
            f"p95 {result.query_embed_p95_ms:.2f} ms"
        )
        out.print(
            f"inserts: {result.inserts_per_s:,.0f} memories/s (pool pre-embedded); "
            f"embedder: {result.embed_per_s:,.0f} sentences/s"
        )

    guarded(run)


def main() -> None:  # pragma: no cover - the console script calls app()
    app()


if __name__ == "__main__":  # pragma: no cover
    logging.captureWarnings(True)
    app()
