"""``bottown town new|draft|check|update``: a community's own town, from a scaffold or an LLM
draft, checked on one screen, and changed while it lives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli.common import err, guarded, out
from town.authoring.scaffold import new_town, next_steps
from town.authoring.summary import summary_lines
from town.world.load import load_town
from town.world.persona import PersonaError, TownSpec

town_app = typer.Typer(help="Your own town: new, draft, check, update.", no_args_is_help=True)


def report_problems(problems: list[str], then: str) -> None:
    """Every problem as ``file: field: reason``, then how many and what follows."""
    for problem in problems:
        err.print(problem, highlight=False, markup=False, soft_wrap=True)
    count = len(problems)
    err.print(f"{count} problem{'' if count == 1 else 's'}; {then}", style="red", markup=False)


def checked(folder: Path, then: str) -> TownSpec:
    """The town in ``folder``, or its problems printed (then ``then``) and exit code 2."""
    try:
        return load_town(folder)
    except PersonaError as error:
        report_problems(error.problems, then)
        raise typer.Exit(2) from None


@town_app.command("new")
def new(
    folder: Annotated[Path, typer.Argument(help="A folder that does not exist yet.")],
    from_town: Annotated[
        str | None,
        typer.Option("--from", help="Copy a shipped town (smallville, interview-practice)."),
    ] = None,
) -> None:
    """Write a small working town (three places, three residents, a scenario), every field
    commented; or, with --from, a copy of a shipped town to start from."""
    written = guarded(lambda: new_town(folder, copy_of=from_town))
    out.print(f"wrote {', '.join(p.name for p in written)} in {folder}", markup=False)
    out.print("next:", markup=False)
    for step in next_steps(folder):
        out.print(f"  {step}", markup=False, highlight=False)


@town_app.command("check")
def check(folder: Annotated[Path, typer.Argument(help="The town's folder.")]) -> None:
    """Check a town folder: every problem as `file: field: reason` (exit 2), else a one-screen
    summary (exit 0)."""
    spec = checked(folder, "fix them and check again")
    for line in summary_lines(spec):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    out.print("ok: the town can be founded", style="green")
