"""Running a town from the shell: found it, simulate it headless, and act on it as a user would."""

from __future__ import annotations

import contextlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from sqlmodel import func, select

from bot.runtime.consent import moderated, replay_paths
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services, build_brain
from town.authoring.living import town_spec
from town.features.coaching.room import plug_in
from town.features.consent.forget import finish_pending
from town.outbox.events import TownEvent
from town.outbox.replays import ReplayWriter
from town.store.models import Town
from town.store.usage import StoredUsage
from town.tick.engine import Engine, TickReport
from town.tick.seed import found_town
from town.world.load import load_town

log = logging.getLogger(__name__)


@contextlib.contextmanager
def founding_shown(out: Console | None = None) -> Iterator[Callable[[int, int], None]]:
    """A progress bar for a town's founding, shown from its first resident rated (a town that
    exists opens with none): the residents' memories rated by the brain, and the time left,
    since on a slow server the founding's one call per resident takes minutes."""
    bar = Progress(
        TextColumn("[bold]founding[/bold]: rating the residents' memories"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=out or Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("founding", total=None)

    def rated(done: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    try:
        yield rated
    finally:
        bar.stop()


@dataclass
class OpenTown:
    services: Services
    engine: Engine
    usage: StoredUsage
    town: Town
    founded: bool = False


async def open_town(
    settings: Settings,
    name: str,
    *,
    persona: str | None = None,
    create: bool = False,
    start: datetime | None = None,
    services: Services | None = None,
    founding: Callable[[int, int], None] | None = None,
) -> OpenTown:
    """The town called ``name``; with ``create``, founded from ``persona`` (default: ``name``)
    when it is not in the store yet. ``services``: the ports it shares with other towns of this
    process (one store, index and LLM pacer; the caller closes them), else its own.
    ``founding`` is told each resident rated while a new town is founded (done, of how many)."""
    shared = services is not None
    services = services or Services.open(settings)
    with services.store.session() as s:
        town = s.exec(select(Town).where(func.lower(Town.name) == name.lower())).first()
    founded = False
    if town is None and not create and not shared and (demo := _demo_of(settings)) is not None:
        services.close()  # the town is the demo's (``make demo``): the shell reaches it there
        log.info("the town %r is the demo's: using %s", name, demo.data_dir)
        return await open_town(demo, name, persona=persona, start=start)
    if town is None:
        if not create:
            raise LookupError(f"no town named {name!r}: run `bottown simulate --town {name}` first")
        folder = persona or name
        spec = load_town(folder)
    else:
        folder = town.scenario or name
        spec = town_spec(town)  # as the last live update applied it, else the folder
    # one brain from the founding on: the founding's calls count against the town's budget
    brain, handles, usage = build_brain(
        settings, services.store, town.id if town else None, services.embedder, services.servers
    )
    if town is None:
        town = await found_town(
            services.store,
            spec,
            name,
            brain,
            services.stream,
            persona=folder,
            start=start,
            rated=founding,
        )
        founded = True
    assert town.id is not None
    usage.founded(town.id)
    usage.flush()
    brain = moderated(brain, settings, folder, services.store, town.id)
    engine = Engine(
        services.store,
        spec,
        brain,
        services.stream,
        town.id,
        after_commit=usage.flush,
        llm=handles,
    )
    plug_in(engine, folder)  # the mock interview, in a town with interview rooms
    await finish_pending(engine, replay_paths(settings.data_dir))  # forgets a crash cut short
    return OpenTown(services, engine, usage, town, founded)


def _demo_of(settings: Settings) -> Settings | None:
    """The settings of ``make demo``'s own folder (``<data_dir>/demo``), when the configured
    store is the default one in the data folder and the demo has a store there."""
    folder = settings.data_dir / "demo"
    if settings.database_url is not None or not (folder / "bottown.db").exists():
        return None
    return settings.model_copy(update={"data_dir": folder})


@dataclass
class RunSummary:
    start: datetime
    end: datetime
    ticks: int = 0
    events: Counter[str] = field(default_factory=Counter)
    by_resident: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, report: TickReport) -> None:
        self.ticks += 1
        self.end = report.clock
        for event in report.events:
            self.events[event.kind] += 1
            if event.resident:
                self.by_resident.setdefault(event.resident, Counter())[event.kind] += 1


def replay_line(event: TownEvent) -> str:
    return json.dumps(
        {
            "at": event.at.isoformat(),
            "kind": event.kind,
            "channel": event.channel,
            **event.payload(),
        },
        ensure_ascii=False,
    )


async def simulate(
    opened: OpenTown,
    until: datetime,
    replay: Path,
    progress: Callable[[TickReport], None] | None = None,
) -> RunSummary:
    """Tick until the clock reaches ``until``, appending every event to the ``replay`` file (a
    file a game day, ``replay_retention_days`` of them kept: ``town.outbox.replays``).

    The clock and everything else are in the store after each tick, so a run that is stopped
    (Ctrl-C, a crash) resumes from its last committed tick when started again.
    """
    engine = opened.engine
    with opened.services.store.session() as s:
        clock = engine.town(s).clock
    summary = RunSummary(start=clock, end=clock)
    keep_days = opened.services.settings.replay_retention_days
    with ReplayWriter(replay, keep_days) as out:
        while clock < until:
            report = await engine.tick(force=True)
            for event in report.events:
                out.write(replay_line(event), event.at)
            out.flush()
            summary.add(report)
            clock = report.clock
            if progress:
                progress(report)
    return summary


def target_time(opened: OpenTown, days: float, start: datetime | None) -> datetime:
    """Where a run of ``days`` ends: counted from the scenario's start (or ``start``), so a run
    that is started again resumes towards the same end."""
    origin = start or opened.engine.spec.scenario.start
    return origin + timedelta(days=days)
