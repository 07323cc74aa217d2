"""``bottown eval society``: the society measures of Park et al. on a simulated town, beside the
paper's figures (see ``town.experiments.society``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

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
from bot.runtime.towns import open_town
from town.experiments.society.attendance import read_replay
from town.experiments.society.interviews import evaluate
from town.experiments.society.report import plot_diffusion, plot_graphs, write_answers
from town.experiments.society.result import (
    PAPER_ATTENDANCE,
    PAPER_DENSITY,
    PAPER_DIFFUSION,
    PAPER_HALLUCINATION_RATE,
    SocietyResult,
)


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def society(
    town: Annotated[str, typer.Option(help="Name of the town in the store.")],
    run: Annotated[
        Path | None,
        typer.Option(help="Replay file of the run (default: <data>/replays/<town>.jsonl)."),
    ] = None,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <data>/eval/society-<town>-<time>)."),
    ] = None,
) -> None:
    """Ask every resident about the seeded facts and about each other; measure information
    diffusion, relationship density, party attendance and hallucinations."""

    def go() -> None:
        settings = settings_with_brain(brain)
        replay_path = run or settings.data_dir / "replays" / f"{town}.jsonl"
        if run is not None and not run.is_file():
            raise LookupError(f"no run file {str(run)!r}: give the replay written by simulate")
        opened = asyncio.run(open_town(settings, town))
        label = "LLM " + settings.llm_model if settings.uses_llm else "offline brain"
        try:
            scenario = opened.engine.spec.scenario
            events = None
            if replay_path.is_file():
                events, bad = read_replay(replay_path)
                if bad:
                    err.print(
                        f"[yellow]warning:[/yellow] {bad} unreadable line(s) in {replay_path}"
                    )
            else:
                err.print(
                    f"[yellow]note:[/yellow] no replay at {replay_path}; attendance uses "
                    "conversations only"
                )
            n = len(opened.engine.spec.residents)
            total = n * len(scenario.facts) + n * (n - 1)
            target = stamped_folder(settings, "eval", f"society-{town}", out_dir)
            with progress_bar() as bar:
                task = bar.add_task("interviewing", total=max(1, total))
                result = asyncio.run(
                    evaluate(
                        opened.engine,
                        scenario,
                        town_name=town,
                        replay=events,
                        progress=lambda answer: bar.update(
                            task, advance=1, description=f"asking {answer.resident}"
                        ),
                    )
                )
            opened.usage.flush()
            files = write_answers(result, target)
            pictures: list[Path] = []
            try:
                pictures = [
                    plot_diffusion(result, target / "diffusion.png", label),
                    plot_graphs(result, target / "relationships.png"),
                ]
            except (OSError, ValueError) as error:  # the figures are kept even if a plot fails
                err.print(f"[yellow]warning:[/yellow] could not draw the plots: {error}")
            print_result(result, label)
            for path in [*files, *pictures]:
                out.print(f"wrote {path}", highlight=False)
        finally:
            opened.services.close()

    guarded(go)


def print_result(result: SocietyResult, brain: str = "") -> None:
    """The measures of the run (its ``brain`` named) beside the paper's (gpt-3.5-turbo)."""
    n = len(result.residents)
    title = f"Society measures: {result.town}" + (f" ({brain})" if brain else "")
    end = f"end: {brain}" if brain else "end"
    table = Table("measure", "start", end, "paper (gpt-3.5-turbo)", title=title)
    for d in result.diffusion:
        paper = PAPER_DIFFUSION.get(d.fact)
        table.add_row(
            f"knows {d.fact}",
            f"{len(d.start)}/{n} ({_pct(d.start_share)})",
            f"{len(d.end)}/{n} ({_pct(d.end_share)})",
            f"{_pct(paper[0])} -> {_pct(paper[1])}" if paper else "-",
        )
    start_eta, end_eta = PAPER_DENSITY
    table.add_row(
        "network density",
        f"{result.density_start:.3f} ({len(result.edges_start)} pairs)",
        f"{result.density_end:.3f} ({len(result.edges_end)} pairs)",
        f"{start_eta} -> {end_eta}",
    )
    came, asked = PAPER_ATTENDANCE
    for a in result.attendance:
        table.add_row(
            f"{a.name} at {a.location}",
            f"invited {len(a.invited)}",
            f"{len(a.attended)} of {len(a.invited)} invited came "
            f"({len(a.present)} residents there in all)",
            f"{came} of {asked} invited",
        )
    yes, fake = len(result.yeses), len(result.hallucinations)
    table.add_row(
        "hallucinated yes",
        "",
        f"{fake} of {yes} ({100 * result.hallucination_rate:.1f}%)",
        f"{100 * PAPER_HALLUCINATION_RATE:.1f}% (6 of 453)",
    )
    out.print(table)
    if result.unparseable:
        out.print(f"{len(result.unparseable)} judgment(s) unparseable, counted as no")
    for problem in result.problems:
        err.print(f"[yellow]problem:[/yellow] {problem}", highlight=False, soft_wrap=True)
