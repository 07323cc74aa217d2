"""``bottown demo``: Smallville in the browser (``make demo``), or a morning headless.

By default the demo town lives headless from the scenario's start (Monday 07:00) to the
setting ``demo_start`` (Tuesday 09:00: the party's news has begun to spread) and is then served
by the local web adapter, a tick every ``demo_tick_seconds`` (4 s), until Ctrl-C: the
Valentine's Day party at Hobbs Cafe (17:00) comes about 3 minutes later. With ``--headless`` a whole
morning runs in the terminal, shown as the chat channels would show it.

The demo town lives in its own folder (``<data_dir>/demo``), started afresh on every run: 25
residents wake, plan, move, talk, react and reflect from 07:00 to ``--hours`` later; a visitor
asks Isabella about her cafe; then she is interviewed. With no LLM configured it runs on the
offline brain and says so; with one, every thought goes through the LLM gateway.
"""

from __future__ import annotations

import math
import shutil
import time
from datetime import datetime, timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from bot.runtime.live import serve
from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town, simulate
from town.inputs.query import interview
from town.inputs.visitor import Visit, say
from town.memory.vectors import ChromaIndex
from town.outbox.events import TownEvent
from town.tick.engine import TickReport
from town.world.gametime import parse_game_time

DEMO_TOWN = "Smallville"  # the demo's town, called by its name everywhere on the page
SHOWN = {"said", "reacted", "reflected", "object", "conversation"}
QUESTIONS = ("What are you planning for Valentine's Day?", "Are you an AI?")
TOLD_AFTER = 0.1  # the share of the run-up measured before it says how long the rest takes


def _fresh(settings: Settings, out: Console) -> Settings:
    """Settings for a demo town started afresh in ``<data_dir>/demo``, announced with its brain."""
    folder = settings.data_dir / "demo"
    ChromaIndex.release_all()  # a demo run earlier in this process may hold the old folder
    shutil.rmtree(folder, ignore_errors=True)
    label = (
        f"LLM {settings.llm_model} via the gateway"
        if settings.uses_llm
        else "OFFLINE BRAIN (deterministic, no LLM configured)"
    )
    out.rule(f"bottown demo — Smallville — brain: {label}")
    return settings.model_copy(update={"data_dir": folder, "database_url": None})


async def serve_demo(settings: Settings, out: Console, tick_seconds: float | None = None) -> None:
    """Run the demo town headless to ``demo_start``, then serve it in the browser until
    cancelled, a tick every ``tick_seconds`` (default: ``demo_tick_seconds``)."""
    pace = tick_seconds or settings.demo_tick_seconds
    demo_settings = await warm_demo(
        _fresh(settings, out).model_copy(update={"tick_seconds": pace}), out
    )

    def ready(runtime: TownRuntime) -> None:
        town = runtime.opened.town
        out.print(f"[bold green]The town is alive: open {_url(runtime)}[/bold green]")
        out.print(
            f"a tick ({town.minutes_per_tick} game minutes) every {pace:g} s; write in a "
            "place's channel as a visitor, or /help. Ctrl-C stops."
        )
        party = next(iter(runtime.opened.engine.spec.scenario.events), None)
        if party is not None:
            wait = minutes_to(party.starts_at, town.clock, town.minutes_per_tick, pace)
            out.print(
                f"{party.name} at {party.location}, {party.starts_at:%a %H:%M}: "
                f"in about {wait:.0f} minutes"
            )

    await serve(demo_settings, ["web"], town=DEMO_TOWN, persona="smallville", ready=ready)


async def warm_demo(demo_settings: Settings, out: Console) -> Settings:
    """Found the demo town and run it headless from the scenario's start to ``demo_start``
    (at least one hour, for the residents to wake); its replay goes to the demo folder. The
    run-up thinks on the offline brain unless ``demo_run_up`` is "model" (said on the console),
    so it never waits on a slow server; a progress bar shows its ticks and game time, and a
    run-up that would take over a minute says how long."""
    run_up = demo_settings
    if demo_settings.uses_llm and demo_settings.demo_run_up == "offline":
        run_up = demo_settings.model_copy(update={"brain": "offline"})
        out.print(
            "the run-up thinks on the offline brain, so it never waits on the server "
            f"(BOTTOWN_DEMO_RUN_UP=model: {demo_settings.llm_model} thinks it too); "
            f"{demo_settings.llm_model} thinks from the moment the page opens"
        )
    opened = await open_town(run_up, DEMO_TOWN, persona="smallville", create=True)
    start = opened.town.clock
    until = max(parse_game_time(demo_settings.demo_start), start + timedelta(hours=1))
    out.print(f"the town lives headless from {start:%a %H:%M} to {until:%a %H:%M}...")
    ticks = math.ceil((until - start).total_seconds() / 60 / opened.town.minutes_per_tick)
    with _run_up_bar(out) as bar:
        task = bar.add_task("run-up", total=ticks, clock=f"{start:%a %H:%M}")
        began, told = time.monotonic(), False

        def shown(report: TickReport) -> None:
            nonlocal told
            bar.update(task, advance=1, clock=f"{report.clock:%a %H:%M}")
            said = run_up_left(time.monotonic() - began, int(bar.tasks[0].completed), ticks)
            if not told and said:
                told = True
                bar.console.print(said)

        await simulate(opened, until, demo_settings.data_dir / "replay.jsonl", shown)
    opened.services.close()
    ChromaIndex.release_all()
    return demo_settings


def run_up_left(elapsed_s: float, done: int, ticks: int) -> str | None:
    """What to say of the run-up's rest once a tenth of it is done (the first ticks, the
    residents waking and planning, are its slowest: fewer would say too much), if over a
    minute."""
    if done < max(1, math.ceil(TOLD_AFTER * ticks)) or done >= ticks:
        return None
    left = elapsed_s / done * (ticks - done)
    if left <= 60:
        return None
    minutes = round(left / 60)
    return f"the run-up takes about {'a minute' if minutes <= 1 else f'{minutes} minutes'} more"


def _run_up_bar(out: Console) -> Progress:
    return Progress(
        TextColumn("[bold]run-up[/bold] {task.fields[clock]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ticks"),
        TimeRemainingColumn(),
        console=out,
        transient=False,
    )


def minutes_to(at: datetime, now: datetime, minutes_per_tick: int, tick_seconds: float) -> float:
    """Real minutes until game time ``at``, a tick of ``minutes_per_tick`` every
    ``tick_seconds``."""
    ticks = max(0.0, (at - now).total_seconds() / 60 / minutes_per_tick)
    return ticks * tick_seconds / 60


def _url(runtime: TownRuntime) -> str:
    return next((str(getattr(a, "url", "")) for a in runtime.adapters if a.name == "web"), "")


async def run_demo(settings: Settings, out: Console, hours: float = 5.0) -> None:
    demo_settings = _fresh(settings, out)
    folder = demo_settings.data_dir
    opened = await open_town(demo_settings, DEMO_TOWN, persona="smallville", create=True)
    start = opened.town.clock
    out.print(f"25 residents asleep at home, {start:%A %H:%M}. Running {hours:g} game hours.\n")

    def show(report: TickReport) -> None:
        for event in report.events:
            if event.kind in SHOWN or (event.kind == "woke" and report.clock.hour < 8):
                out.print(_line(event), highlight=False)

    replay = folder / "replay.jsonl"
    summary = await simulate(opened, start + timedelta(hours=hours), replay, show)
    out.print()
    hello = "Hi Isabella! What is new at the cafe?"
    visit = await say(
        opened.engine, Visit.of("Hobbs Cafe", "Alice", hello, role="a visiting reporter")
    )
    out.print(
        f"[bold]#hobbs-cafe[/bold] Alice (a visiting reporter): Hi Isabella! What is new "
        f"at the cafe?  [dim](heard by {', '.join(visit.heard_by) or 'nobody'})[/dim]"
    )
    for event in visit.replies:
        out.print(_line(event), highlight=False)
    for question in QUESTIONS:
        answer = await interview(opened.engine, "Isabella Rodriguez", question, "a visitor")
        out.print(
            f"\n[bold]interview — Q:[/bold] {question}\n[bold]Isabella Rodriguez:[/bold] {answer}"
        )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.events.items()))
    out.rule(f"{summary.ticks} ticks: {counts}")
    out.print(f"replay (one JSON event a line): {replay}")
    out.print("next: bottown simulate --days 1, bottown say, bottown interview (see the README)")


def _line(event: TownEvent) -> str:
    channel = "#" + event.channel.lower().replace("'", "").replace(" ", "-")
    emoji = str(event.data.get("emoji", "")) + " " if event.data.get("emoji") else ""
    if event.kind == "said":
        return f"{event.at:%H:%M} [bold]{channel}[/bold] {emoji}{event.resident}: {event.text}"
    if event.kind == "reflected":
        insights = "; ".join(str(i) for i in event.data.get("insights", []))[:160]
        return f"{event.at:%H:%M} [dim]{event.resident} reflects: {insights}[/dim]"
    return f"{event.at:%H:%M} [bold]{channel}[/bold] {emoji}{event.text}"
