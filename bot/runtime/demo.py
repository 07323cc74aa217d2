"""``bottown demo``: Smallville in the browser (``make demo``), or a morning headless.

By default the demo town wakes up (a short headless warm-up from 07:00) and is then served by
the local web adapter, a tick every few seconds, until Ctrl-C. With ``--headless`` a whole
morning runs in the terminal, shown as the chat channels would show it.

The demo town lives in its own folder (``<data_dir>/demo``), started afresh on every run: 25
residents wake, plan, move, talk, react and reflect from 07:00 to ``--hours`` later; a visitor
asks Isabella about her cafe; then she is interviewed. With no LLM configured it runs on the
offline brain and says so; with one, every thought goes through the LLM gateway.
"""

from __future__ import annotations

import shutil
from datetime import timedelta

from rich.console import Console

from bot.runtime.run import TownRuntime, serve
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town, simulate
from town.inputs.query import interview
from town.inputs.visitor import say
from town.memory.vectors import ChromaIndex
from town.outbox.events import TownEvent
from town.tick.engine import TickReport

SHOWN = {"said", "reacted", "reflected", "object", "conversation"}
QUESTIONS = ("What are you planning for Valentine's Day?", "Are you an AI?")


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


async def serve_demo(
    settings: Settings, out: Console, warmup_hours: float = 1.0, tick_seconds: float = 4.0
) -> None:
    """Wake the demo town headless, then serve it in the browser until cancelled."""
    demo_settings = _fresh(settings, out).model_copy(update={"tick_seconds": tick_seconds})
    opened = await open_town(demo_settings, "demo", persona="smallville", create=True)
    start = opened.town.clock
    out.print(
        f"waking 25 residents: {start:%H:%M} to {start + timedelta(hours=warmup_hours):%H:%M}"
    )
    replay = demo_settings.data_dir / "replay.jsonl"
    await simulate(opened, start + timedelta(hours=warmup_hours), replay)
    opened.services.close()
    ChromaIndex.release_all()

    def ready(runtime: TownRuntime) -> None:
        out.print(f"[bold green]The town is alive: open {_url(runtime)}[/bold green]")
        out.print(
            f"a tick ({runtime.opened.town.minutes_per_tick} game minutes) every "
            f"{tick_seconds:g} s; write in a place's channel as a visitor, or /help. Ctrl-C stops."
        )

    await serve(demo_settings, ["web"], town="demo", persona="smallville", ready=ready)


def _url(runtime: TownRuntime) -> str:
    return next((str(getattr(a, "url", "")) for a in runtime.adapters if a.name == "web"), "")


async def run_demo(settings: Settings, out: Console, hours: float = 5.0) -> None:
    demo_settings = _fresh(settings, out)
    folder = demo_settings.data_dir
    opened = await open_town(demo_settings, "demo", persona="smallville", create=True)
    start = opened.town.clock
    out.print(f"25 residents asleep at home, {start:%A %H:%M}. Running {hours:g} game hours.\n")

    def show(report: TickReport) -> None:
        for event in report.events:
            if event.kind in SHOWN or (event.kind == "woke" and report.clock.hour < 8):
                out.print(_line(event), highlight=False)

    replay = folder / "replay.jsonl"
    summary = await simulate(opened, start + timedelta(hours=hours), replay, show)
    out.print()
    visit = await say(
        opened.engine,
        "Hobbs Cafe",
        "Alice",
        "Hi Isabella! What is new at the cafe?",
        role="a visiting reporter",
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
