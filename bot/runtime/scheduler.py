"""Time for live towns: one APScheduler interval job per town this process runs.

A ``Timekeeper`` runs an ``AsyncIOScheduler`` with APScheduler's in-memory job store: a town that
starts here gets the job ``town:<id>:tick``, every ``Town.tick_seconds`` real seconds (None:
``settings.tick_seconds``); a town that leaves (stopped, or handed to another worker) loses it.
Everything a schedule needs is on the town's row (paused, pace, last tick), so each start builds
the job afresh from there, its next tick one interval after the last. Wake-up planning and the
nightly summary ride the ticks (``town/tick/mind.py``). The jobs run on UTC, so a daylight-saving
change moves no tick.

- **No overlap, no pile-up.** ``max_instances=1``: while a tick runs, a run that falls due is
  skipped (and said once a minute), never started beside it; ``coalesce=True``: a backlog is
  one run.
- **Pause, resume and speed** are stored on the row (``admin.set_paused``, ``set_speed``). A
  command run in this process is followed at once (``follow``); one from elsewhere (a shell,
  another process) within ``WATCH_SECONDS``: a paused town's job has no next run time, a new
  interval reschedules it.
- **The clock's pace, kept honestly.** A run skipped because the last tick still ran is game
  time the clock falls behind its pace: ``clock_behind_pct`` says what share of the recent runs
  were skipped (``status``, the web page's header). With ``llm_pace = "keep"`` (the default) the
  town's LLM gateway is told the tick's interval, so the least valuable calls (importance
  ratings, then decomposition) go to the offline brain before ticks stretch; ``"wait"`` always
  waits for the model.
- **Missed time** (``missed_time.py``): the wall time since the town's last tick is made up
  when it starts, as ``settings.missed_time`` says.
- **A wall clock that jumps.** APScheduler times its jobs by the wall clock, so the watch, an
  asyncio task timed by the monotonic clock, compares the two: set back, the jobs start afresh
  from now (else they would wait for the old time to come round again); leaping ahead (a
  suspended machine), the leap is missed time, made up as on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlmodel import col, select

from bot.runtime.missed_time import MadeUp, Pace, Ticking, make_up, make_up_missed, span
from bot.runtime.settings import Settings
from town.store.db import Store
from town.store.models import Town

__all__ = ["LiveTown", "MadeUp", "Pace", "Ticking", "Timekeeper", "job_id"]

log = logging.getLogger(__name__)

WATCH_SECONDS = 1.0  # how often stored pace changes and the wall clock are checked
CLOCK_SLACK_S = 2.0  # wall and monotonic clocks may drift this far apart before it is a jump
GRACE_S = 30  # a tick this late (beyond its interval: a busy loop) still runs; later, missed
STOP_WAIT_S = 10.0  # how long leaving waits for a running tick to roll back
LATE_LOG_S = 60.0  # a town whose ticks outlast their interval is said so once a minute
PACE_WINDOW = 60  # the recent runs (done or skipped) that say how far the clock is behind


def job_id(town_id: int) -> str:
    return f"town:{town_id}:tick"


@dataclass
class LiveTown:
    """A town this process runs, as its keeper tracks it."""

    ticking: Ticking
    stopped: asyncio.Future[None]  # fails with what a tick raised: the town's run must end
    running: asyncio.Task[Any] | None = None
    ticks: int = 0  # tick jobs run
    late: int = 0  # runs skipped because the last tick still ran
    late_said: float | None = None  # (monotonic) when that was last logged
    made_up: MadeUp = field(default_factory=MadeUp)
    runs: deque[bool] = field(default_factory=lambda: deque(maxlen=PACE_WINDOW))  # False: skipped

    @property
    def clock_behind_pct(self) -> float:
        """The share of the recent runs skipped because a tick outlasted its interval: how far
        the town's clock is behind its pace (0 when it keeps it)."""
        return 100 * self.runs.count(False) / len(self.runs) if self.runs else 0.0


class Timekeeper:
    """The towns' ticks on one ``AsyncIOScheduler``: a worker's towns share one keeper."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.settings = store, settings
        # APScheduler logs two INFO lines a tick (its executor), and a warning for every run
        # skipped while a slow tick runs (its scheduler): ``_on_late`` says that once a minute
        # instead, naming the town. Their errors still show.
        logging.getLogger("apscheduler.executors.default").setLevel(logging.WARNING)
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        self.scheduler = AsyncIOScheduler(timezone=UTC)  # its in-memory job store
        self.scheduler.add_listener(self._on_late, EVENT_JOB_MAX_INSTANCES)
        self.towns: dict[int, LiveTown] = {}
        self._wall, self._monotonic = wall, monotonic
        self._clocks = (wall(), monotonic())  # as the watch last read them
        self._watch: asyncio.Task[None] | None = None

    # -- towns in and out -----------------------------------------------------------------------

    async def add(self, ticking: Ticking) -> asyncio.Future[None]:
        """Start timing a town: make up the time it missed, then give it its job. Returns a
        future that fails when a tick raises: the town must stop."""
        if ticking.town_id in self.towns:
            raise RuntimeError(f"{ticking.town_name} is already running in this process")
        live = LiveTown(ticking, asyncio.get_running_loop().create_future())
        self.towns[ticking.town_id] = live
        try:
            self.start()
            live.made_up = await make_up_missed(ticking, self.settings, self._now())
            self.follow(ticking.town_id)
        except BaseException:
            await self.remove(ticking)
            raise
        return live.stopped

    async def remove(self, ticking: Ticking) -> None:
        """Stop timing a town: its job goes, and a running tick is stopped (it rolls back)."""
        live = self.towns.pop(ticking.town_id, None)
        with contextlib.suppress(JobLookupError):  # (it never got one)
            self.scheduler.remove_job(job_id(ticking.town_id))
        if live is not None and live.running is not None and not live.running.done():
            live.running.cancel()
            await asyncio.wait([live.running], timeout=STOP_WAIT_S)

    def start(self) -> None:
        """Start the scheduler and the watch (on the running event loop), unless running."""
        if self.scheduler.running:
            return
        self.scheduler.start()
        self._clocks = (self._wall(), self._monotonic())  # the first drift counts from here
        self._watch = asyncio.get_running_loop().create_task(self._watching(), name="watch")

    async def close(self) -> None:
        """Stop the watch and the scheduler (a running tick is cancelled and rolls back)."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the loop's next turn

    # -- following the stored pace --------------------------------------------------------------

    def follow(self, town_id: int) -> Pace | None:
        """Set the town's job to its stored pace (at once: a command just changed it)."""
        live = self.towns.get(town_id)
        if live is None:
            return None
        with self.store.session() as session:
            pace = Pace.of(live.ticking.engine.town(session), self.settings)
        self._set_job(live, pace)
        return pace

    def follow_all(self) -> None:
        """Every town's job against its stored pace (changed elsewhere: a shell, a process)."""
        if not self.towns:
            return
        with self.store.session() as session:
            rows = session.exec(select(Town).where(col(Town.id).in_(list(self.towns)))).all()
            paces = {town.id: Pace.of(town, self.settings) for town in rows}
        for town_id, live in list(self.towns.items()):
            if (pace := paces.get(town_id)) is not None:
                self._set_job(live, pace)

    def clock_behind_pct(self, town_id: int) -> float | None:
        """How far the town's clock is behind its pace lately (None: not timed here)."""
        live = self.towns.get(town_id)
        return None if live is None else live.clock_behind_pct

    def _set_job(self, live: LiveTown, pace: Pace) -> None:
        """Made if missing, made again for a new interval, paused or resumed with the town."""
        keeping = self.settings.llm_pace == "keep" and not pace.paused
        live.ticking.engine.llm.keep_pace(pace.tick_seconds if keeping else None)
        jid = job_id(live.ticking.town_id)
        job = self.scheduler.get_job(jid)
        if job is None or job.trigger.interval != timedelta(seconds=pace.tick_seconds):
            self.scheduler.add_job(
                self._tick,
                self._trigger(pace.tick_seconds, pace.next_tick(self._now())),
                args=[live],
                id=jid,
                name=f"tick {live.ticking.town_name}",
                replace_existing=True,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=math.ceil(pace.tick_seconds) + GRACE_S,
                **({"next_run_time": None} if pace.paused else {}),
            )
            log.info("%s: %s", live.ticking.town_name, pace.describe())
        elif pace.paused and job.next_run_time is not None:
            self.scheduler.pause_job(jid)
        elif not pace.paused and job.next_run_time is None:
            self.scheduler.resume_job(jid)

    def _trigger(self, seconds: float, first: datetime) -> IntervalTrigger:
        return IntervalTrigger(seconds=seconds, start_date=first, timezone=UTC)

    # -- running ticks --------------------------------------------------------------------------

    async def _tick(self, live: LiveTown) -> None:
        """The tick job."""
        live.running = asyncio.current_task()
        live.ticks += 1
        live.runs.append(True)
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
        """A run fell due while the town's last tick still ran: skipped, said once a minute."""
        live = next(
            (t for t in self.towns.values() if job_id(t.ticking.town_id) == event.job_id), None
        )
        if live is None:
            return
        live.late += 1
        live.runs.append(False)
        now = self._monotonic()
        if live.late_said is None or now - live.late_said >= LATE_LOG_S:
            live.late_said = now
            log.warning(
                "%s: a tick outlasts its interval; the next waits for it (%d run%s skipped so far)",
                live.ticking.town_name,
                live.late,
                "" if live.late == 1 else "s",
            )

    # -- the watch ------------------------------------------------------------------------------

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                await self.check_clocks()
                self.follow_all()
            except Exception:  # a database that is away, say: try again on the next round
                log.exception("following the towns' pace failed; trying again")

    async def check_clocks(self) -> None:
        """Compare the wall clock's progress with the monotonic one's since the last check."""
        wall, mono = self._wall(), self._monotonic()
        drift = (wall - self._clocks[0]) - (mono - self._clocks[1])
        self._clocks = (wall, mono)
        if drift < -CLOCK_SLACK_S:
            self.clock_went_back(timedelta(seconds=-drift))
        elif drift > CLOCK_SLACK_S:
            await self.clock_leapt(timedelta(seconds=drift))

    def clock_went_back(self, by: timedelta) -> None:
        """The wall clock was set back while running: the jobs' next run times now lie ``by``
        too far ahead, so each starts afresh from now."""
        log.warning(
            "the wall clock went back by %s; the towns go on from their own clocks, their "
            "ticks rescheduled from now",
            span(by),
        )
        for town_id in list(self.towns):
            pace = self.follow(town_id)
            if pace is not None and not pace.paused:
                trigger = self._trigger(pace.tick_seconds, pace.next_tick(self._now()))
                self.scheduler.modify_job(
                    job_id(town_id), trigger=trigger, next_run_time=trigger.start_date
                )

    async def clock_leapt(self, by: timedelta) -> None:
        """The wall clock leapt ahead of the monotonic one (a suspended machine, a clock set
        forward): that much time was missed, and is made up as on start. (APScheduler itself
        skips the runs that are now past, and goes on from now.)"""
        log.warning("the wall clock leapt ahead by %s (a suspended machine?)", span(by))
        for town_id, live in list(self.towns.items()):
            pace = self.follow(town_id)
            if pace is not None and not pace.paused:
                live.made_up = await make_up(
                    live.ticking, self.settings, by, pace.tick_seconds, self._now()
                )

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._wall(), UTC)
