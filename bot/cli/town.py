"""The commands that run a town from the shell: simulate, say, interview, whisper, set-state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.table import Table
from rich.text import Text

from adapters.core.ports import Caller, Reply
from bot.cli.common import (
    CLEAR_ERRORS,
    StartFailed,
    err,
    guarded,
    one_line,
    out,
    progress_bar,
    settings_and_logging,
    settings_with_brain,
)
from bot.runtime.commands import MINUTES_REALTIME, SECONDS_REALTIME, Commands
from bot.runtime.consent import replay_paths
from bot.runtime.settings import SettingsError
from bot.runtime.towns import RunSummary, founding_shown, open_town, target_time
from bot.runtime.towns import simulate as run_simulation
from town.inputs import admin, query, visitor
from town.inputs.unit import area_named
from town.outbox import audit
from town.store.usage import DailyTokenBudget
from town.text import clean_text, name_of
from town.tick.engine import Engine, TickReport, until_unchanged
from town.world.gametime import parse_game_time
from town.world.places import World

log = logging.getLogger(__name__)

T = TypeVar("T")


def simulate(
    town: Annotated[
        str, typer.Option(help="Persona folder (personas/<town>) or path.")
    ] = "smallville",
    name: Annotated[str | None, typer.Option(help="Name of the town in the store.")] = None,
    days: Annotated[float, typer.Option(min=0.01, help="Game days to simulate.")] = 1.0,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
    start: Annotated[str | None, typer.Option(help='Start, e.g. "2023-02-13 07:00".')] = None,
    replay: Annotated[Path | None, typer.Option(help="Replay file (JSON lines).")] = None,
) -> None:
    """Run a town headless for N game days, with a progress bar; a stopped run resumes."""

    def run() -> None:
        settings = settings_with_brain(brain)
        began = parse_game_time(start) if start else None
        town_name = name or Path(town).name
        with founding_shown(out) as founding:
            opened = asyncio.run(
                open_town(
                    settings, town_name, persona=town, create=True, start=began, founding=founding
                )
            )
        try:
            until = target_time(opened, days, began)
            path = replay or settings.data_dir / "replays" / f"{town_name}.jsonl"
            label = "LLM " + settings.llm_model if settings.uses_llm else "offline brain"
            clock = opened.town.clock
            verb = "founded" if opened.founded else "resuming"
            out.print(
                f"{verb} {town_name} at {clock:%Y-%m-%d %H:%M} ({label}); "
                f"running to {until:%Y-%m-%d %H:%M}"
            )
            minutes = (until - clock).total_seconds() // 60
            total = max(1, int(minutes // opened.town.minutes_per_tick))
            with progress_bar() as bar:
                task = bar.add_task("ticking", total=total)

                def progress(report: TickReport) -> None:
                    calls, tokens = opened.usage.totals_today()
                    bar.update(
                        task,
                        advance=1,
                        description=f"{report.clock:%a %H:%M}  calls {calls:,}  tokens {tokens:,}",
                    )

                try:
                    summary = asyncio.run(run_simulation(opened, until, path, progress))
                except KeyboardInterrupt:
                    err.print(
                        "stopped; the last finished tick is saved: run the same command to resume"
                    )
                    raise typer.Exit(130) from None
            _print_summary(summary, path)
            if answers := opened.engine.llm.status_lines():  # the server; who made the answers
                out.print("\n".join(answers), highlight=False)
        finally:
            opened.services.close()  # the last index writes too

    guarded(run)


def _print_summary(summary: RunSummary, replay: Path) -> None:
    table = Table(
        "resident",
        "actions",
        "moves",
        "said",
        "reactions",
        "reflections",
        title=f"{summary.start:%a %H:%M} to {summary.end:%a %H:%M}, {summary.ticks} ticks",
    )
    for resident, counts in sorted(summary.by_resident.items()):
        table.add_row(
            resident,
            str(counts["action"]),
            str(counts["moved"] // 2),
            str(counts["said"]),
            str(counts["reacted"]),
            str(counts["reflected"]),
        )
    out.print(table)
    out.print(", ".join(f"{k}: {v}" for k, v in sorted(summary.events.items())))
    out.print(f"replay: {replay}")


def _on_town(town: str, act: Callable[[Engine], Awaitable[T]]) -> T:
    """Open the town, act on it through its engine, and return what the action returns; an
    action another process overtook (a worker's tick, say) runs again (``until_unchanged``)."""

    async def go() -> T:
        opened = await open_town(settings_and_logging(), town)
        try:
            return await until_unchanged(lambda: act(opened.engine))
        finally:
            opened.services.close()

    return guarded(lambda: asyncio.run(go()))


def interview(
    resident: Annotated[str, typer.Argument(help="Resident's name (or first name).")],
    question: Annotated[str, typer.Argument(help="The question.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
    asker: Annotated[str, typer.Option(help="Who is asking, e.g. 'a news reporter'.")] = "",
) -> None:
    """Ask a resident a private question; the town does not change."""
    out.print(
        _on_town(
            town, lambda engine: query.interview(engine, resident, question, asker, platform="cli")
        )
    )


def whisper(
    resident: Annotated[str, typer.Argument(help="Resident's name (or first name).")],
    text: Annotated[str, typer.Argument(help="What the inner voice says.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
) -> None:
    """Speak as a resident's inner voice: a directive it acts on at its next tick."""
    name = _on_town(
        town, lambda engine: admin.whisper(engine, resident, text, by="shell", platform="cli")
    )
    out.print(f"{name} hears an inner voice.", markup=False)


def set_state(
    target: Annotated[str, typer.Argument(help="'Area: sub-area: object'.")],
    state: Annotated[str, typer.Argument(help="The new state in words, e.g. 'burning'.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
) -> None:
    """Rewrite an object's state; residents there notice it at their next tick."""
    path = _on_town(
        town, lambda engine: admin.set_object(engine, target, state, by="shell", platform="cli")
    )
    out.print(f"{path} is now {state}", markup=False)


def say(
    location: Annotated[str, typer.Argument(help="Where, e.g. 'Hobbs Cafe'.")],
    text: Annotated[str, typer.Argument(help="What the visitor says.")],
    as_name: Annotated[str, typer.Option("--as", help="The visitor's name.")] = "Visitor",
    role: Annotated[str, typer.Option(help="The visitor's role, e.g. 'a reporter'.")] = "",
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
) -> None:
    """Speak as a visitor at a location; residents there hear it and may answer."""
    result = _on_town(  # (words empty once cleaned: refused there, as a fixable error)
        town,
        lambda engine: visitor.say(
            engine, visitor.Visit.of(location, as_name, text, "cli", role=role)
        ),
    )
    heard = ", ".join(result.heard_by) or "nobody (the place is empty)"
    out.print(f"at {result.area}, heard by: {heard}", markup=False)
    for event in result.replies:  # people's words: never read as rich markup
        out.print(Text.assemble((f"{event.resident}:", "bold"), " ", event.text))


def command(
    line: Annotated[str, typer.Argument(help='A chat command, e.g. "look" or "speed 5".')],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
    at: Annotated[str | None, typer.Option(help="The place (channel) you type it in.")] = None,
    as_name: Annotated[str, typer.Option("--as", help="Your name.")] = "shell",
    admin: Annotated[bool, typer.Option(help="Run as an admin.")] = True,
) -> None:
    """Run a chat command (the same words as on Discord, Slack and the web) from the shell."""

    async def go() -> Reply:
        opened = await open_town(settings_and_logging(), town)
        try:
            settings = opened.services.settings
            commands = Commands(
                opened.engine,
                opened.usage,
                DailyTokenBudget(opened.usage, settings.daily_token_budget),
                replays=replay_paths(settings.data_dir),
            )
            place = place_of(opened.engine, at) if at else None  # a typo'd --at: one line
            caller = Caller("shell", as_name, as_name, is_admin=admin, location=place)
            await audit.record_command(
                opened.engine, "cli", as_name, name_of(as_name), at or "", clean_text(line)
            )
            return await commands.handle(caller, line)
        finally:
            opened.services.close()

    reply = guarded(lambda: asyncio.run(go()))
    if not reply.ok:  # refused, unknown or mistyped: something the caller can fix
        said = Text.assemble(("error:", "red"), " ", " ".join(reply.text.split("\n")))
        err.print(said, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    out.print(reply.text, highlight=False, markup=False)


def place_of(engine: Engine, location: str) -> str:
    """The area ``location`` names; ``UnknownPlace`` (a clear error) if none."""
    with engine.store.session() as session:
        return area_named(World.load(session, engine.town_id, engine.spec), location)


def forget(
    who: Annotated[str, typer.Option(help="The member: a name, a mention or platform:id.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
) -> None:
    """Make the town forget a member: their rows, words, the memories that hold or quote them,
    vectors and replay lines; the audit log keeps their rows with name and words taken out."""

    async def go() -> Reply:
        opened = await open_town(settings_and_logging(), town)
        try:
            commands = Commands(
                opened.engine, replays=replay_paths(opened.services.settings.data_dir)
            )
            return await commands.consent.forget_member(Caller("cli", "shell", "shell"), [who])
        finally:
            opened.services.close()

    reply = guarded(lambda: asyncio.run(go()))
    out.print(reply.text, highlight=False, markup=False)
    if reply.text.startswith("Nobody") or " could be any of " in reply.text:
        raise typer.Exit(2)


def run(
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform",
            "-p",
            help="web, discord or slack; repeat for several. Default: the platforms whose "
            "tokens are set, else web.",
        ),
    ] = None,
    town: Annotated[
        str | None, typer.Option(help="Town name (default: smallville, or BOTTOWN_TOWN).")
    ] = None,
    persona: Annotated[
        str | None, typer.Option(help="Persona folder or path, when the town is new.")
    ] = None,
    brain: Annotated[
        str | None,
        typer.Option(help="offline or llm (default: llm when an LLM is configured, else offline)."),
    ] = None,
    tick_seconds: Annotated[
        float | None,
        typer.Option(
            min=0.05,
            help="Real seconds between ticks, for a town with no stored interval "
            "(`bottown speed` stores one).",
        ),
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port of the web adapter.")] = None,
) -> None:
    """Run a town live on Discord, Slack or the local web page, until Ctrl-C."""
    from bot.runtime.communities import serve_communities, serves_communities
    from bot.runtime.live import default_platforms, serve
    from bot.runtime.run import PLATFORMS, TownRuntime
    from bot.runtime.slack_communities import serve_workspaces, serves_workspaces

    def go() -> None:
        settings = settings_with_brain(brain)
        changes: dict[str, object] = {}
        if tick_seconds is not None:
            changes["tick_seconds"] = tick_seconds
        if port is not None:
            changes["web_port"] = port
        settings = settings.model_copy(update=changes)
        chosen = platform or default_platforms(settings)
        for name in chosen:
            if name not in PLATFORMS:
                raise SettingsError(
                    f"unknown platform {name!r}; choose from {', '.join(PLATFORMS)}"
                )
        label = "LLM " + settings.llm_model if settings.uses_llm else "offline brain (no LLM)"

        started = False

        def ready(runtime: TownRuntime) -> None:
            nonlocal started
            started = True
            out.print(
                f"{runtime.town_name} is running ({label}): {runtime.pace().describe()}. "
                "Ctrl-C stops it; everything is saved."
            )
            for adapter in runtime.adapters:
                out.print("  " + adapter.status_line(), highlight=False, markup=False)

        try:
            if serves_communities(settings, chosen, town):
                out.print("Discord: one town per server; `/town` in a server says how to found one")
                asyncio.run(serve_communities(settings, ready=ready))
            elif serves_workspaces(settings, chosen, town):
                out.print(
                    "Slack: one town per workspace; install at /slack/install, then `/town` in "
                    "a workspace says how to found one"
                )
                asyncio.run(serve_workspaces(settings, ready=ready))
            else:
                asyncio.run(serve(settings, chosen, town=town, persona=persona, ready=ready))
        except KeyboardInterrupt:
            pass
        except CLEAR_ERRORS:
            raise
        except Exception as exc:  # a bad token, a refused connection: the town never ran
            if started:
                raise
            log.debug("the town could not start", exc_info=True)
            raise StartFailed(f"the town could not start: {one_line(exc)}") from None
        err.print("stopped; the town resumes from its clock on the next run")

    guarded(go)


FOLLOWS = "A running town follows within a second."


def pause(town: Annotated[str, typer.Option(help="Town name.")] = "smallville") -> None:
    """Stop a town's clock (stored: it stays paused across restarts until resumed)."""
    clock = _on_town(town, lambda engine: admin.set_paused(engine, True))
    out.print(f"{town}: the clock stops at {clock:%A %H:%M}. {FOLLOWS}", markup=False)


def resume(town: Annotated[str, typer.Option(help="Town name.")] = "smallville") -> None:
    """Start a paused town's clock again; the pause does not count as missed time."""
    clock = _on_town(town, lambda engine: admin.set_paused(engine, False))
    out.print(f"{town}: the clock runs again from {clock:%A %H:%M}. {FOLLOWS}", markup=False)


def speed(
    minutes: Annotated[
        str, typer.Argument(help="Game minutes a tick, or 'realtime' (1 a real minute).")
    ],
    seconds: Annotated[
        float | None,
        typer.Argument(help="Real seconds between ticks (default: 10, or BOTTOWN_TICK_SECONDS)."),
    ] = None,
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
) -> None:
    """Set how much game time a tick is and how often ticks come; stored on the town."""

    def parse() -> tuple[int, float | None]:
        word = minutes.strip().lower()
        if word == "realtime":
            if seconds is not None:
                raise ValueError("realtime takes no seconds: it is one tick a real minute")
            return MINUTES_REALTIME, SECONDS_REALTIME
        if word.isdigit():
            return int(word), seconds
        raise ValueError(f"{minutes!r} is neither a number of minutes nor realtime")

    chosen, every = guarded(parse)
    stored, interval = _on_town(town, lambda engine: admin.set_speed(engine, chosen, every))
    pace = "the default interval" if interval is None else f"every {interval:g} real seconds"
    out.print(f"{town}: a tick is {stored} game minute(s), {pace}. {FOLLOWS}", markup=False)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(pause)
    app.command()(resume)
    app.command()(speed)
    app.command("cmd")(command)
    app.command()(simulate)
    app.command()(interview)
    app.command()(whisper)
    app.command("set-state")(set_state)
    app.command()(say)
    app.command()(forget)
