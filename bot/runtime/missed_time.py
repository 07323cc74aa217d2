"""A town's pace, and the wall time it missed made up (``scheduler.py`` times its ticks).

When a town starts, the wall time since its last tick (``Town.last_tick_at``) is made up by
``settings.missed_time``: ``jump`` moves the clock on by whole ticks at the town's speed in one
transaction, without running them; ``catch-up`` runs at most ``settings.catch_up_ticks`` ticks
back to back and jumps the rest. A paused town misses nothing (resuming marks the wall time the
clock runs again from). A wall clock that stands before the last tick is logged; nothing is made
up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from bot.runtime.settings import Settings
from town.store.models import Town
from town.tick.engine import Engine, TickReport

log = logging.getLogger(__name__)


class Ticking(Protocol):
    """A live town as the scheduler sees it (``bot.runtime.run.TownRuntime``)."""

    @property
    def town_id(self) -> int: ...

    @property
    def town_name(self) -> str: ...

    @property
    def engine(self) -> Engine: ...

    async def tick(self) -> TickReport | None:
        """One tick; None when it failed and rolled back. What it raises ends the town's run."""
        ...


@dataclass(frozen=True)
class Pace:
    """How fast a town runs, and when it last ticked: stored on its row, the interval defaulting
    to the settings'."""

    paused: bool
    minutes_per_tick: int
    tick_seconds: float
    own_interval: bool  # the town's stored interval, not the settings' default
    last_tick_at: datetime | None = None  # (aware UTC)

    @classmethod
    def of(cls, town: Town, settings: Settings) -> Pace:
        own = town.tick_seconds is not None
        seconds = town.tick_seconds if town.tick_seconds is not None else settings.tick_seconds
        last = town.last_tick_at
        if last is not None and last.tzinfo is None:
            last = last.replace(tzinfo=UTC)  # SQLite hands datetimes back naive; they are UTC
        return cls(town.paused, town.minutes_per_tick, seconds, own, last)

    def next_tick(self, now: datetime) -> datetime:
        """When the next tick is due: one interval after the last, unless that is past or more
        than an interval ahead (a clock set back); then one interval from ``now``."""
        step = timedelta(seconds=self.tick_seconds)
        due = self.last_tick_at + step if self.last_tick_at is not None else now + step
        return due if now <= due <= now + step else now + step

    def describe(self) -> str:
        minutes = f"{self.minutes_per_tick} game minute{'s' if self.minutes_per_tick != 1 else ''}"
        every = f"every {self.tick_seconds:g} s" + ("" if self.own_interval else " (the default)")
        return f"{'paused; ' if self.paused else ''}a tick of {minutes} {every}"


@dataclass(frozen=True)
class MadeUp:
    """What was done about wall time that passed while a town did not tick."""

    missed_ticks: int = 0
    caught_up: int = 0
    jumped_minutes: int = 0
    backwards: timedelta | None = None  # the wall clock stood this far before the last tick


async def make_up_missed(ticking: Ticking, settings: Settings, now: datetime) -> MadeUp:
    """On start: the wall time since the town's last tick, made up by ``settings.missed_time``."""
    engine = ticking.engine
    with engine.store.session() as session:
        pace = Pace.of(engine.town(session), settings)
    last = pace.last_tick_at
    if pace.paused or last is None:
        return MadeUp()  # a paused town misses nothing; a new one has not started yet
    gap = now - last
    if gap < timedelta(0):
        log.warning(
            "%s: the wall clock (%s) is %s earlier than the town's last tick (%s): it was set "
            "back. Nothing was missed; the town goes on from its own clock.",
            ticking.town_name,
            f"{now:%Y-%m-%d %H:%M:%S}",
            span(-gap),
            f"{last:%Y-%m-%d %H:%M:%S}",
        )
        return MadeUp(backwards=-gap)
    return await make_up(ticking, settings, gap, pace.tick_seconds, now)


async def make_up(
    ticking: Ticking, settings: Settings, gap: timedelta, interval: float, now: datetime
) -> MadeUp:
    """Make up ``gap`` of wall time up to ``now`` at ``interval`` real seconds a tick: catch up
    at most ``settings.catch_up_ticks`` ticks (policy ``catch-up``), jump the clock over the
    rest."""
    missed = int(gap.total_seconds() // interval)
    if missed <= 0:
        return MadeUp()
    caught = 0
    if settings.missed_time == "catch-up":
        for _ in range(min(missed, settings.catch_up_ticks)):
            report = await ticking.tick()
            if report is None:
                break  # the tick failed and rolled back: the rest is jumped
            if report.skipped:
                return MadeUp(missed, caught)  # paused meanwhile: nothing more is made up
            caught += 1
    # the jumped ticks' last one is the town's last tick: the next keeps to their rhythm
    last = now - (gap - missed * timedelta(seconds=interval))
    minutes, clock = await jump(ticking.engine, missed - caught, last)
    log.warning(
        "%s did not tick for %s (%d tick%s at %g s, missed_time = %s): %s%s; the clock is %s",
        ticking.town_name,
        span(gap),
        missed,
        "" if missed == 1 else "s",
        interval,
        settings.missed_time,
        f"caught up {caught} tick{'' if caught == 1 else 's'} and " if caught else "",
        f"jumped {minutes} game minutes without ticking" if minutes else "jumped nothing",
        f"{clock:%a %Y-%m-%d %H:%M}",
    )
    return MadeUp(missed, caught, minutes)


async def jump(engine: Engine, ticks: int, last: datetime) -> tuple[int, datetime]:
    """Move the clock on by ``ticks`` ticks at the town's speed, in one transaction and without
    running them (checked by the engine's guard, as an input is), the last of them marked as
    run at ``last``; returns the game minutes jumped and the new clock."""
    async with engine.lock:
        with engine.unit(changes_town=ticks > 0) as session:
            town = engine.town(session)
            minutes = max(0, ticks) * town.minutes_per_tick
            if minutes:
                town.clock = town.clock + timedelta(minutes=minutes)
                town.last_tick_at = last
                session.add(town)
            return minutes, town.clock


def span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
