"""``bottown town new|draft|check|update``: a community's own town, from a scaffold or an LLM
draft, checked on one screen, and changed while it lives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from bot.cli.common import err, guarded, out, settings_and_logging, settings_with_brain
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town
from town.authoring.changes import Changes
from town.authoring.drafting import Draft, OfflineStandIn, draft_town
from town.authoring.living import UpdateRefused, apply_update
from town.authoring.scaffold import new_town, next_steps, refuse_existing, write_files
from town.authoring.summary import summary_lines
from town.llm.chain import think_with
from town.llm.client import open_client
from town.llm.port import Brain, OfflineBrain
from town.llm.usage import TokenBudget, UsageTally
from town.tick.engine import until_unchanged
from town.world.load import load_town
from town.world.persona import PersonaError, TownSpec

T = TypeVar("T")
town_app = typer.Typer(
    rich_markup_mode=None, help="Your own town: new, draft, check, update.", no_args_is_help=True
)


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


def _draft_brain(
    settings: Settings, fallback: OfflineStandIn, tally: UsageTally | None = None
) -> tuple[Brain, str]:
    """The configured LLM behind the gateway (its fallback noted, its calls tallied), or the
    offline brain."""
    if not settings.uses_llm:
        return OfflineBrain(), "offline brain"
    client = open_client(
        settings.llm_base_url,
        settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed",
        settings.llm_timeout_s,
        max_retries=settings.llm_max_attempts - 1,
    )
    spent = tally if tally is not None else UsageTally()
    budget = TokenBudget(settings.daily_token_budget or None, lambda: spent.total_tokens)
    # one piece at a time: each builds on the last
    brain, _handles = think_with(
        client, settings.llm_model, usage=spent, budget=budget, offline=fallback
    )
    return brain, f"LLM {settings.llm_model}"


@town_app.command("draft")
def draft(
    folder: Annotated[Path, typer.Argument(help="A folder that does not exist yet.")],
    describe: Annotated[
        str, typer.Option("--describe", help='The town in a line: "a harbour town ...".')
    ],
    residents: Annotated[int, typer.Option(min=1, max=25, help="How many residents.")] = 3,
    places: Annotated[
        int, typer.Option(min=2, max=12, help="How many places (the last: the homes).")
    ] = 3,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
) -> None:
    """Ask the configured LLM for a town in small pieces (the town's outline, each place, each
    resident, the scenario); the loader's problems go back to their pieces for at most two
    repair rounds. Written only if `town check` would pass."""

    tally = UsageTally()

    def go() -> tuple[Draft, bool]:
        refuse_existing(folder)
        settings = settings_with_brain(brain)
        stand_in = OfflineStandIn()
        thinker, label = _draft_brain(settings, stand_in, tally)
        out.print(f"drafting with the {label} ...", markup=False)
        made = asyncio.run(
            draft_town(thinker, describe, residents=residents, places=places, fallback=stand_in)
        )
        if not settings.uses_llm:
            out.print(
                "the offline brain filled the scaffold from your description's nouns; an LLM "
                "drafts a far better town (see `bottown llm check`)",
                markup=False,
            )
        elif made.offline:
            out.print(
                f"the LLM gave no usable answer for {', '.join(dict.fromkeys(made.offline))}: "
                "the offline brain drafted those parts",
                markup=False,
            )
        return made, settings.uses_llm

    made, by_llm = guarded(go)
    rounds = f"{made.rounds} repair round{'' if made.rounds == 1 else 's'}"
    if made.spec is None:
        report_problems(made.problems, f"still there after {rounds}: nothing was written")
        raise typer.Exit(2)
    guarded(lambda: write_files(folder, made.files))
    asked = (
        f"; {tally.total.calls} LLM calls, {tally.total.prompt_tokens:,} prompt and "
        f"{tally.total.completion_tokens:,} completion tokens"
        if tally.total.calls
        else ""
    )
    out.print(f"wrote {folder} ({made.calls} pieces, {rounds}{asked})", markup=False)
    if made.filled and by_llm:
        out.print(
            "filled from the offline scaffold where the draft was thin: " + ", ".join(made.filled),
            markup=False,
            soft_wrap=True,
        )
    for line in summary_lines(made.spec):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    out.print("next:", markup=False)
    for step in next_steps(folder)[1:]:
        out.print(f"  {step}", markup=False, highlight=False)


@town_app.command("update")
def update(
    folder: Annotated[Path, typer.Argument(help="The town's edited folder.")],
    town: Annotated[str, typer.Option(help="Town name in the store.")] = "smallville",
) -> None:
    """Apply an edited folder to a town, running or not: new residents move in, new places
    open (a running town's channels follow), those left out move away with their memories
    kept. A broken folder, or a change that cannot be made live, changes nothing."""

    async def go() -> Changes:
        opened = await open_town(settings_and_logging(), town)
        try:
            return await until_unchanged(
                lambda: apply_update(opened.engine, folder, by="shell", platform="cli")
            )
        finally:
            opened.services.close()

    changes = guarded(lambda: _refusing(lambda: asyncio.run(go())))
    lines = changes.lines() or ["nothing to change: the town is as its folder says"]
    out.print(f"{town} follows {folder}:", markup=False)
    for line in lines:
        out.print(f"  {line}", markup=False, highlight=False)


def _refusing(act: Callable[[], T]) -> T:
    """``act()``; a folder's problems listed one a line, or a change that cannot be made live
    said with its reasons (exit 2)."""
    try:
        return act()
    except PersonaError as error:
        report_problems(error.problems, "nothing was changed")
        raise typer.Exit(2) from None
    except UpdateRefused as refused:
        for reason in refused.reasons:
            err.print(reason, highlight=False, markup=False, soft_wrap=True)
        err.print("nothing was changed", style="red")
        raise typer.Exit(2) from None
