"""Time for live towns: APScheduler's tick jobs, kept in the project's database.

One ``Timekeeper`` per process runs an ``AsyncIOScheduler`` whose job store is the project's
database (``SQLAlchemyJobStore`` on the same SQLite file or PostgreSQL, table
``apscheduler_jobs``): one interval job per town, ``town:<id>:tick``, every ``Town.tick_seconds``
real seconds (None: ``settings.tick_seconds``). The job is ``tick_town(town_id)``, a module-level
coroutine function, so it pickles by reference; it finds the live town in the keeper's registry.
Wake-up planning and the nightly summary need no jobs of their own: each tick carries them, at
every resident's game-time wake and sleep (``town/mind.py``).

- **No overlap, no pile-up.** ``max_instances=1``: while a tick still runs, the next is skipped
  (counted as late), never started beside it; ``coalesce=True``: a backlog is one run.
- **Pause, resume and speed** live on the Town row (``inputs.set_paused``/``set_speed``). The
  keeper follows a change at once when the command ran in this process, and within
  ``WATCH_SECONDS`` when it came from elsewhere (``bottown pause`` in a shell, another process):
  a paused town's job is paused (no next run time), a new interval reschedules it. A restart
  finds the job, its interval and its next run time in the database.
- **Several processes, one database** (workers holding leases): each keeper's job store sees only
  the jobs of the towns it runs, so a process never fires, delays or removes another's ticks.
- **Missed time.** When a town starts, the wall time since its last tick (``Town.last_tick_at``)
  is made up by ``settings.missed_time``: ``jump`` moves the clock on by whole ticks at the
  town's speed in one transaction, without running them; ``catch-up`` runs at most
  ``settings.catch_up_ticks`` ticks back to back and jumps the rest. A paused town misses nothing.
- **The loop never waits for the database.** The job store keeps this process's jobs in memory
  and writes their rows in a thread (on SQLite a tick holds the one write lock while it awaits
  the LLM; a write on the event loop would wait for a tick that cannot go on).
- **A wall clock that jumps.** Earlier than the last tick at start: logged, nothing is made up.
  While running, the wall clock is checked against the monotonic one: set back, the ticks are
  rescheduled from now (else they would wait for the old time to come round again); leaping
  ahead (a suspended machine), the leap is missed time, made up as on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlmodel import col, select

from bot.jobstore import TownJobStore
from bot.settings import Settings
from town.engine import Engine, TickReport
from town.store.db import Store
from town.store.models import Town

log = logging.getLogger(__name__)

TICK_FUNC = "bot.scheduler:tick_town"
WATCH_SECONDS = 1.0  # how often stored speed changes and the wall clock are checked
CLOCK_SLACK_S = 2.0  # wall and monotonic clocks may drift this far apart before it is a jump
GRACE_S = 30  # a tick this late (beyond its interval) still runs; later, it is missed
STOP_WAIT_S = 10.0  # how long leaving waits for a running tick to roll back
LATE_LOG_S = 60.0  # a town whose ticks outlast their interval is said so once a minute


def job_id(town_id: int) -> str:
    return f"town:{town_id}:tick"


class Ticking(Protocol):
    """A live town as the scheduler sees it (``bot.run.TownRuntime``)."""

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
    """How fast a town runs: stored on its row, the interval defaulting to the settings'."""

    paused: bool
    minutes_per_tick: int
    tick_seconds: float
    own_interval: bool  # the town's stored interval, not the settings' default

    @classmethod
    def of(cls, town: Town, settings: Settings) -> Pace:
        own = town.tick_seconds is not None
        seconds = town.tick_seconds if town.tick_seconds is not None else settings.tick_seconds
        return cls(town.paused, town.minutes_per_tick, seconds, own)

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


# -- the job ------------------------------------------------------------------------------------


async def tick_town(town_id: int) -> None:
    """The tick job, stored by reference: one tick of a town this process runs."""
    keeper = Timekeeper.current
    live = keeper.towns.get(town_id) if keeper is not None else None
    if keeper is None or live is None:
        log.info("the tick job of town #%d fired where the town is not running", town_id)
        return
    await keeper.run_tick(live)


# -- missed time --------------------------------------------------------------------------------


async def make_up_missed(ticking: Ticking, settings: Settings, now: datetime) -> MadeUp:
    """On start: the wall time since the town's last tick, made up by ``settings.missed_time``."""
    engine = ticking.engine
    with engine.store.session() as session:
        town = engine.town(session)
        pace, last = Pace.of(town, settings), town.last_tick_at
    if pace.paused or last is None:
        return MadeUp()  # a paused town misses nothing; a new one has not started yet
    if last.tzinfo is None:
        last = last.replace(tzinfo=UTC)  # SQLite hands datetimes back naive; they are UTC
    gap = now - last
    if gap < timedelta(0):
        log.warning(
            "%s: the wall clock (%s) is %s earlier than the town's last tick (%s): it was set "
            "back. Nothing was missed; the town goes on from its own clock.",
            ticking.town_name,
            f"{now:%Y-%m-%d %H:%M:%S}",
            _span(-gap),
            f"{last:%Y-%m-%d %H:%M:%S}",
        )
        return MadeUp(backwards=-gap)
    return await make_up(ticking, settings, gap, pace.tick_seconds)


async def make_up(ticking: Ticking, settings: Settings, gap: timedelta, interval: float) -> MadeUp:
    """Make up ``gap`` of wall time at ``interval`` real seconds a tick: catch up at most
    ``settings.catch_up_ticks`` ticks (policy ``catch-up``), jump the clock over the rest."""
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
    minutes, clock = await jump(ticking.engine, missed - caught)
    log.warning(
        "%s did not tick for %s (%d tick%s at %g s, missed_time = %s): %s%s; the clock is %s",
        ticking.town_name,
        _span(gap),
        missed,
        "" if missed == 1 else "s",
        interval,
        settings.missed_time,
        f"caught up {caught} tick{'' if caught == 1 else 's'} and " if caught else "",
        f"jumped {minutes} game minutes without ticking" if minutes else "jumped nothing",
        f"{clock:%a %Y-%m-%d %H:%M}",
    )
    return MadeUp(missed, caught, minutes)


async def jump(engine: Engine, ticks: int) -> tuple[int, datetime]:
    """Move the clock on by ``ticks`` ticks at the town's speed, in one transaction and without
    running them; returns the game minutes jumped and the new clock. The write runs in a
    thread: on SQLite it may wait for another town's tick to commit, and the loop must not."""

    def write() -> tuple[int, datetime]:
        with engine.store.session() as session:
            town = engine.town(session)
            minutes = max(0, ticks) * town.minutes_per_tick
            if minutes:
                town.clock = town.clock + timedelta(minutes=minutes)
                town.last_tick_at = datetime.now(UTC)
                session.add(town)
                if engine.guard is not None:
                    engine.guard(session)  # a worker that lost the town's lease may not jump it
            return minutes, town.clock

    async with engine.lock:
        return await asyncio.to_thread(write)


def _span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class _OncePerMinute(logging.Filter):
    """Lets APScheduler's "skipped: maximum number of running instances" through once a minute
    per job: ticks slower than their interval would otherwise log a line every interval."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if "maximum number of running instances" not in str(record.msg):
            return True
        job = str(record.args[0]) if isinstance(record.args, tuple) and record.args else ""
        job = job.split(" (trigger")[0]
        now = time.monotonic()
        if now - self._last.get(job, -LATE_LOG_S) < LATE_LOG_S:
            return False
        self._last[job] = now
        return True


def _quiet_repeats(logger: logging.Logger) -> None:
    """A fresh filter for each keeper that starts: an earlier keeper's memory of what it said
    (jobs of the same names, in another town database) must not silence this one."""
    for old in [f for f in logger.filters if isinstance(f, _OncePerMinute)]:
        logger.removeFilter(old)
    logger.addFilter(_OncePerMinute())


# -- the keeper ---------------------------------------------------------------------------------


@dataclass
class LiveTown:
    """A town this process runs, as its keeper tracks it."""

    ticking: Ticking
    stopped: asyncio.Future[None]  # fails with what a tick raised: the town's run must end
    following: tuple[bool, float] | None = None  # (paused, interval) its job was set to
    running: asyncio.Task[Any] | None = None
    ticks: int = 0  # tick jobs run
    late: int = 0  # runs skipped because the last tick still ran
    made_up: MadeUp = field(default_factory=MadeUp)


class Timekeeper:
    """The process's scheduler: one ``AsyncIOScheduler``, its tick jobs in the database."""

    current: ClassVar[Timekeeper | None] = None  # the live one; ``tick_town`` looks here

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.settings = store, settings
        # the executor logs two INFO lines a tick; its warnings and errors still show
        logging.getLogger("apscheduler.executors.default").setLevel(logging.WARNING)
        _quiet_repeats(logging.getLogger("apscheduler.scheduler"))
        self.jobs = TownJobStore(store.engine)
        self.scheduler = AsyncIOScheduler(jobstores={"default": self.jobs}, timezone=UTC)
        self.scheduler.add_listener(self._on_late, EVENT_JOB_MAX_INSTANCES)
        self.towns: dict[int, LiveTown] = {}
        self._wall, self._monotonic = wall, monotonic
        self._tasks: list[asyncio.Task[None]] = []  # the watch and the job writer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._to_write = asyncio.Event()
        self._writing = asyncio.Lock()

    @classmethod
    def shared(cls, store: Store, settings: Settings) -> Timekeeper:
        """The process's keeper for ``store``'s database, made on first use. Call it on the
        event loop, right before ``add`` (no await between), so concurrent starts share it."""
        loop = asyncio.get_running_loop()
        keeper = cls.current
        if keeper is not None and (not keeper.towns or keeper._loop_gone()):
            keeper = None  # idle, or left behind by a closed event loop: start afresh
        if keeper is None:
            keeper = cls.current = cls(store, settings)
        elif keeper.store.url != store.url:
            raise RuntimeError(
                "one process runs the towns of one database: "
                f"{keeper.store.safe_url} is in use, not {store.safe_url}"
            )
        elif keeper._loop is not loop:
            raise RuntimeError("the towns of one process run on one event loop")
        return keeper

    def _loop_gone(self) -> bool:
        return self._loop is not None and self._loop.is_closed()

    # -- towns in and out -----------------------------------------------------------------------

    async def add(self, ticking: Ticking) -> asyncio.Future[None]:
        """Start timing a town: make up the time it missed, then its job (found in the database
        or made). Returns a future that fails when a tick raises: the town must stop."""
        if ticking.town_id in self.towns:
            raise RuntimeError(f"{ticking.town_name} is already running in this process")
        loop = asyncio.get_running_loop()
        live = LiveTown(ticking, loop.create_future())
        self.towns[ticking.town_id] = live
        try:
            if not self.scheduler.running:
                self._start(loop)
            self.jobs.own(job_id(ticking.town_id))
            live.made_up = await make_up_missed(ticking, self.settings, self._now())
            self.follow(ticking.town_id, starting=True)
        except BaseException:
            await self.remove(ticking)
            raise
        return live.stopped

    async def remove(self, ticking: Ticking) -> None:
        """Stop timing a town (a running tick is stopped and rolls back). Its job stays in the
        database, so the next run, here or in another process, resumes its schedule."""
        live = self.towns.pop(ticking.town_id, None)
        self.jobs.disown(job_id(ticking.town_id))
        if live is not None and live.running is not None and not live.running.done():
            live.running.cancel()
            await asyncio.wait([live.running], timeout=STOP_WAIT_S)
        with contextlib.suppress(Exception):  # logged by flush; the next start reconciles
            await self.flush()
        if not self.towns:
            await self._stop()

    # -- following the stored pace --------------------------------------------------------------

    def follow(self, town_id: int, *, starting: bool = False) -> Pace | None:
        """Set the town's job to its stored pace: made if missing, rescheduled for a new
        interval, paused or resumed with the town. On ``starting``, a next run time that is past
        (downtime, made up already) or too far ahead (a clock set back) starts afresh."""
        live = self.towns.get(town_id)
        if live is None:
            return None
        with self.store.session() as session:
            pace = Pace.of(live.ticking.engine.town(session), self.settings)
        self._set_job(live, pace, starting=starting)
        return pace

    def follow_all(self) -> None:
        """Every town's job against its stored pace (changed elsewhere: a shell, another
        process), and its row in the table (deleted by hand: written again)."""
        if not self.towns:
            return
        with self.store.session() as session:
            rows = session.exec(select(Town).where(col(Town.id).in_(list(self.towns)))).all()
            paces = {town.id: Pace.of(town, self.settings) for town in rows}
        stored = self.jobs.stored()
        for town_id, live in list(self.towns.items()):
            pace = paces.get(town_id)
            if pace is None:
                continue
            if live.following != (pace.paused, pace.tick_seconds):
                self._set_job(live, pace, starting=False)
            jid = job_id(town_id)
            if jid not in stored and not self.jobs.pending:
                log.warning("%s: its job was gone from the database; written again", jid)
                self.jobs.rewrite(jid)

    def _set_job(self, live: LiveTown, pace: Pace, *, starting: bool) -> None:
        town_id = live.ticking.town_id
        jid = job_id(town_id)
        job = self.scheduler.get_job(jid)
        options = {
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": math.ceil(pace.tick_seconds) + GRACE_S,
        }
        same = (
            job is not None
            and job.func_ref == TICK_FUNC
            and tuple(job.args) == (town_id,)
            and job.trigger.interval == timedelta(seconds=pace.tick_seconds)
            and all(getattr(job, k) == v for k, v in options.items())
        )
        if not same:
            self.scheduler.add_job(
                tick_town,
                IntervalTrigger(seconds=pace.tick_seconds, timezone=UTC),
                args=[town_id],
                id=jid,
                name=f"tick {live.ticking.town_name}",
                replace_existing=True,
                **options,
                **({"next_run_time": None} if pace.paused else {}),
            )
            if job is not None:
                log.info("%s: %s", live.ticking.town_name, pace.describe())
        elif pace.paused:
            if job.next_run_time is not None:
                self.scheduler.pause_job(jid)
        elif job.next_run_time is None:
            self.scheduler.resume_job(jid)
        elif starting and not self._due_soon(job.next_run_time, pace.tick_seconds):
            self._restart(live, pace)
        live.following = (pace.paused, pace.tick_seconds)

    def _due_soon(self, when: datetime, interval: float) -> bool:
        """Within one interval from now: not past, nor pushed ahead by a clock set back."""
        now = self._now()
        return now <= when <= now + timedelta(seconds=interval)

    def _restart(self, live: LiveTown, pace: Pace) -> None:
        """The job's next run one interval from now."""
        self.scheduler.reschedule_job(
            job_id(live.ticking.town_id),
            trigger=IntervalTrigger(seconds=pace.tick_seconds, timezone=UTC),
        )
        live.following = (pace.paused, pace.tick_seconds)

    # -- running ticks --------------------------------------------------------------------------

    async def run_tick(self, live: LiveTown) -> None:
        live.running = asyncio.current_task()
        live.ticks += 1
        try:
            await live.ticking.tick()
        except asyncio.CancelledError:
            # the town is leaving this process: its transaction rolled back, nothing to report
            log.info("%s: a running tick was stopped and rolled back", live.ticking.town_name)
        except Exception as exc:  # the town's own verdict: its run must end (a lost lease)
            if not live.stopped.done():
                live.stopped.set_exception(exc)
        finally:
            live.running = None

    def _on_late(self, event: JobSubmissionEvent) -> None:
        for live in self.towns.values():
            if job_id(live.ticking.town_id) == event.job_id:
                live.late += 1

    # -- writing the jobs -----------------------------------------------------------------------

    async def flush(self) -> None:
        """Write the jobs' changes to the table, in a thread: it may wait for a tick's
        transaction to commit, and the event loop must not wait with it."""
        async with self._writing:  # one writer at a time, so rows land in order
            rows = self.jobs.take()
            if not rows:
                return
            try:
                await asyncio.to_thread(self.jobs.write, rows)
            except Exception as exc:
                self.jobs.retry(rows)
                log.warning("the scheduler could not save its jobs (%s); trying again", exc)
                raise

    async def _write_jobs(self) -> None:
        while True:
            await self._to_write.wait()
            self._to_write.clear()
            try:
                await self.flush()
            except Exception:
                await asyncio.sleep(WATCH_SECONDS)
                self._to_write.set()

    # -- the scheduler and the watch ------------------------------------------------------------

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.jobs.changed = self._to_write.set
        self.scheduler.start()
        clocks = self._wall(), self._monotonic()  # read now: the first drift counts from here
        self._tasks = [
            loop.create_task(self._watch(*clocks), name="scheduler-watch"),
            loop.create_task(self._write_jobs(), name="scheduler-jobs"),
        ]
        Timekeeper.current = self

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        with contextlib.suppress(Exception):  # logged by flush; the next start reconciles
            await self.flush()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the loop's next turn
        if Timekeeper.current is self:
            Timekeeper.current = None

    async def _watch(self, wall: float, mono: float) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            now_wall, now_mono = self._wall(), self._monotonic()
            drift = (now_wall - wall) - (now_mono - mono)
            wall, mono = now_wall, now_mono
            try:
                if drift < -CLOCK_SLACK_S:
                    self.clock_went_back(timedelta(seconds=-drift))
                elif drift > CLOCK_SLACK_S:
                    await self.clock_leapt(timedelta(seconds=drift))
                self.follow_all()
            except Exception:  # a database that is away, say: try again on the next round
                log.exception("following the towns' pace failed; trying again")

    def clock_went_back(self, by: timedelta) -> None:
        """The wall clock was set back while running: the jobs' next run times now lie ``by``
        too far ahead, so each starts afresh from now."""
        log.warning(
            "the wall clock went back by %s; the towns go on from their own clocks, their "
            "ticks rescheduled from now",
            _span(by),
        )
        for town_id, live in self.towns.items():
            pace = self.follow(town_id)
            if pace is not None and not pace.paused:
                self._restart(live, pace)

    async def clock_leapt(self, by: timedelta) -> None:
        """The wall clock leapt ahead of the monotonic one (a suspended machine, a clock set
        forward): that much time was missed, and is made up as on start."""
        log.warning("the wall clock leapt ahead by %s (a suspended machine?)", _span(by))
        for town_id, live in list(self.towns.items()):
            pace = self.follow(town_id)
            if pace is None or pace.paused:
                continue
            live.made_up = await make_up(live.ticking, self.settings, by, pace.tick_seconds)
            if town_id in self.towns:
                self._restart(live, pace)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._wall(), UTC)
