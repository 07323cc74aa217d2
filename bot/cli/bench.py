"""``bottown bench``: benchmarks that print speed and cost figures."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.table import Table

from bot.cli.common import (
    BENCH_REFRESH_PER_SECOND,
    guarded,
    out,
    progress_bar,
    progress_counter,
    settings_and_logging,
)

bench_app = typer.Typer(
    rich_markup_mode=None,
    help="Benchmarks that print speed and cost figures.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
FakeLatencyMs = Annotated[float, typer.Option(min=0, help="Fake LLM latency per call.")]
Slots = Annotated[
    int,
    typer.Option(
        min=0,
        help="Calls the fake LLM server answers at once, the rest waiting first come first "
        "served (1: llama.cpp's or llama-cpp-python's default; 0: no limit, a hosted API).",
    ),
]
LlmChoice = Annotated[
    str, typer.Option(help="fake: the fake LLM server; configured: the LLM the settings name.")
]


@bench_app.command("town")
def bench_town(
    residents: Annotated[int, typer.Option(min=1, help="Smallville residents (up to 25).")] = 25,
    hours: Annotated[float, typer.Option(min=0.5, help="Game hours to run.")] = 24.0,
    latency_ms: FakeLatencyMs = 1000.0,
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight.")] = 64,
    llm: LlmChoice = "fake",
    admin_every_min: Annotated[
        int,
        typer.Option(
            min=0, help="An admin command (whisper or set) every N game minutes, mid-tick; 0: none."
        ),
    ] = 0,
    slots: Slots = 1,
    tick_seconds: Annotated[
        float,
        typer.Option(
            min=0,
            help="Pace the ticks as a live town's, one every this many seconds, and report how "
            "far the clock fell behind (0: one after another, as fast as the LLM allows).",
        ),
    ] = 0.0,
    as_json: JsonFlag = False,
) -> None:
    """LLM calls, tokens, activity and fallbacks per resident per game day, against the fake LLM
    server or the configured LLM; the longest write, and LLM calls made again after a conflict."""
    from bot.bench.town import report_lines, run_town_bench

    def run() -> None:
        settings = settings_and_logging()
        with progress_counter("ticks") as progress:
            result = asyncio.run(
                run_town_bench(
                    settings,
                    residents,
                    hours,
                    latency_ms,
                    concurrency,
                    progress,
                    llm=llm,
                    admin_every_min=admin_every_min,
                    slots=slots,
                    tick_seconds=tick_seconds,
                )
            ).as_json()
        if as_json:
            print(json.dumps(result))
            return
        table = Table(
            "task",
            "calls / resident / day",
            "tokens / resident / day",
            title=f"{residents} residents, {hours:g} game hours, {latency_ms:g} ms, "
            f"{slots or 'unlimited'} slot{'' if slots == 1 else 's'}",
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
        out.print(
            f"longest write {result['longest_write_ms']} ms, LLM calls made again "
            f"{result['rethought_calls']}, admin commands {result['admin_inputs']} "
            f"(longest {result['admin_longest_ms']} ms)"
        )
        if tick_seconds > 0:
            out.print(
                f"a tick every {tick_seconds:g} s: the clock {result['clock_behind_pct']}% "
                "behind its pace"
            )
        out.print("\n".join(report_lines(result)), highlight=False)

    guarded(run)


@bench_app.command("chat")
def bench_chat(
    latency_ms: FakeLatencyMs = 1000.0,
    visitors: Annotated[int, typer.Option(min=1, help="Simulated visitors writing.")] = 10,
    places: Annotated[int, typer.Option(min=1, help="Places they write in.")] = 5,
    minutes: Annotated[float, typer.Option(min=0.1, help="Real minutes to run.")] = 2.0,
    tick_seconds: Annotated[
        float, typer.Option(min=0.5, help="Real seconds between the town's ticks.")
    ] = 10.0,
    slots: Slots = 1,
    llm: LlmChoice = "fake",
    arrivals: Annotated[
        str,
        typer.Option(
            help="burst: every visitor starts within 4 s, then writes every 6-12 s; poisson: "
            "members who come and go, --rate messages a minute in all."
        ),
    ] = "burst",
    rate: Annotated[
        float, typer.Option(min=0.1, help="Messages a minute across all visitors (poisson).")
    ] = 12.0,
    cut: Annotated[
        bool,
        typer.Option(
            "--cut/--no-cut", help="A visitor's call may cut a town call short on a full server."
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """What a visitor feels: seconds to the first reply and how far that is from the best
    possible (ideal_p95_s, excess_p95_calls), LLM chains, unanswered greetings, replies in
    digests, replies held behind narration and ticks on time, with Smallville live against the
    fake LLM server or the configured LLM."""
    from bot.bench.chat import run_chat_bench

    def run() -> None:
        settings = settings_and_logging()
        result = asyncio.run(
            run_chat_bench(
                settings,
                latency_ms,
                visitors,
                places,
                minutes,
                tick_seconds,
                slots=slots,
                llm=llm,
                arrivals=arrivals,
                rate=rate,
                cut=cut,
            )
        ).as_json()
        if as_json:
            print(json.dumps(result))
            return
        table = Table(
            "figure",
            "value",
            title=f"{visitors} visitors, {places} places, {minutes:g} min, {latency_ms:g} ms, "
            f"{slots or 'unlimited'} slot{'' if slots == 1 else 's'}",
        )
        for key, value in result.items():
            table.add_row(key, "-" if value is None else str(value))
        out.print(table)

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


@bench_app.command("scale")
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
    from bot.bench.scale import run_scale_bench

    def run() -> None:
        settings = settings_and_logging()
        with progress_bar(refresh_per_second=BENCH_REFRESH_PER_SECOND) as bar:
            task = bar.add_task("founding and loading", total=1)

            def progress(done: int, total: int) -> None:
                bar.update(task, description="ticks", completed=done, total=total)

            result = asyncio.run(
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


@bench_app.command("communities")
def bench_communities(
    servers: Annotated[
        int, typer.Option(min=1, help="Discord servers, each founding a town.")
    ] = 20,
    residents: Annotated[
        int, typer.Option(min=2, max=25, help="Smallville residents per town (2 to 25).")
    ] = 5,
    latency_ms: FakeLatencyMs = 1000.0,
    slots: Slots = 0,
    minutes: Annotated[float, typer.Option(min=0.1, help="Real minutes of visitors.")] = 3.0,
    tick_seconds: Annotated[
        float, typer.Option(min=0.5, help="Real seconds between each town's ticks.")
    ] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """One bot process serving many Discord servers, each its own town, against the fake
    Discord and the fake LLM server: towns founded, towns on time, visitors' first reply
    p50/p95, peak RSS, LLM calls a resident-day."""
    from bot.bench.communities import run_communities_bench

    def run() -> None:
        settings = settings_and_logging()
        result = asyncio.run(
            run_communities_bench(
                settings, servers, residents, latency_ms, slots, minutes, tick_seconds
            )
        ).as_json()
        if as_json:
            print(json.dumps(result))
            return
        table = Table("figure", "value", title=f"{servers} servers of {residents} residents")
        for key, value in result.items():
            table.add_row(key, "-" if value is None else str(value))
        out.print(table)

    guarded(run)
