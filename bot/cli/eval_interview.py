"""``bottown eval interview`` and ``bottown eval rate``: the believability interviews of Park et
al. under the ablations, and a local page where people rank the answers (TrueSkill ratings
beside the paper's). See ``town.experiments.believability``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from bot.cli.common import (
    err,
    guarded,
    out,
    progress_bar,
    settings_and_logging,
    settings_with_brain,
    stamped_folder,
)
from bot.eval_ui.rating_page import RatingSession, start
from bot.runtime.towns import open_town
from town.experiments.believability import (
    CONDITIONS,
    PAPER_MU,
    Rating,
    load_questions,
    parse_conditions,
    read_answers,
    read_rankings,
    run_interviews,
    trueskill_table,
    write_answers,
)
from town.experiments.extra import require


def interview(
    town: Annotated[str, typer.Option(help="Name of the town in the store.")],
    conditions: Annotated[
        str, typer.Option(help=f"Comma-separated, of: {', '.join(CONDITIONS)}.")
    ] = ",".join(CONDITIONS),
    residents: Annotated[
        int | None, typer.Option(min=1, help="Only the first N residents (default: all).")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <data>/eval/interview-<town>-<time>)."),
    ] = None,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
) -> None:
    """Ask every resident the paper's five categories of questions under each condition; write
    the answers (JSONL and CSV) for `bottown eval rate`."""

    def go() -> None:
        settings = settings_with_brain(brain)
        chosen = parse_conditions(conditions)
        questions = load_questions()
        opened = asyncio.run(open_town(settings, town))
        names = [r.name for r in opened.engine.spec.residents][:residents]
        target = stamped_folder(settings, "eval", f"interview-{town}", out_dir)
        total = len(names) * len(questions) * len(chosen)
        with progress_bar() as bar:
            task = bar.add_task("interviewing", total=max(1, total))
            answers = asyncio.run(
                run_interviews(
                    opened.engine,
                    names,
                    chosen,
                    questions,
                    progress=lambda a: bar.update(
                        task, advance=1, description=f"asking {a.resident}"
                    ),
                )
            )
        opened.usage.flush()
        opened.services.close()
        files = write_answers(answers, target)
        out.print(
            f"{len(answers)} answers: {len(names)} resident(s) x {len(questions)} questions x "
            f"{len(chosen)} condition(s) ({', '.join(chosen)})",
            highlight=False,
        )
        for path in files:
            out.print(f"wrote {path}", highlight=False)
        out.print(f"rate them: bottown eval rate --run {target}", highlight=False)

    guarded(go)


def print_table(table: Sequence[Rating], rankings: int) -> None:
    shown = Table(
        "condition", "mu", "sigma", "rankings", "paper mu", title="TrueSkill believability"
    )
    for r in table:
        paper = f"{r.paper_mu:.2f}" if r.paper_mu is not None else "-"
        shown.add_row(r.condition, f"{r.mu:.2f}", f"{r.sigma:.2f}", str(r.rankings), paper)
    if "human" not in {r.condition for r in table}:
        shown.add_row("human (paper only)", "-", "-", "-", f"{PAPER_MU['human']:.2f}")
    out.print(shown)
    out.print(f"{rankings} ranking(s) stored", highlight=False)


def rate(
    run: Annotated[Path, typer.Option(help="The folder written by `bottown eval interview`.")],
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1.")] = 8765,
    table: Annotated[
        bool, typer.Option("--table", help="Print the TrueSkill table and exit.")
    ] = False,
) -> None:
    """Serve a local page where raters rank each question's anonymised answers; or, with
    --table, print the TrueSkill ratings from the rankings stored so far."""

    def go() -> None:
        settings_and_logging()
        answers = read_answers(run)
        rankings, bad = read_rankings(run)
        if bad:
            err.print(f"[yellow]warning:[/yellow] {bad} unreadable ranking line(s) skipped")
        conditions = list(dict.fromkeys(a.condition for a in answers))
        if table:
            print_table(trueskill_table(rankings, conditions), len(rankings))
            return
        require("trueskill")  # the page's table: say so now, not inside the page's handler
        asyncio.run(_serve(run, port))

    guarded(go)


async def _serve(run: Path, port: int) -> None:
    session = RatingSession.open(run)
    runner, url = await start(session, port)
    out.print(f"rating page: {url}  (Ctrl-C to stop; rankings are saved as they come)")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
