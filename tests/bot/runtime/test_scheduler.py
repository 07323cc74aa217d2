"""APScheduler drives a live town's ticks: one interval job per town, built from its row; pause,
resume and speed across restarts; missed time (jump and catch-up); a clock that jumps; ticks
that never overlap; and a tick error that ends the run (a worker's lost lease). Times are
checked against injected clocks, never the machine's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from sqlmodel import Session, select
from typer.testing import CliRunner

from adapters.core.ports import Caller
from bot.cli.main import app
from bot.runtime.live import run_town
from bot.runtime.missed_time import make_up_missed
from bot.runtime.run import TownRuntime
from bot.runtime.scheduler import LATE_LOG_S, Timekeeper, job_id
from bot.runtime.settings import Settings, load_settings
from tests.factories import open_runtime
from town.store.db import Store
from town.store.models import OutboxEvent, Town
from town.tick.engine import TickReport
from town.tick.turn import Tick
from town.world import gametime

ADMIN = Caller("web", "root", "Root", True, "Hobbs Cafe")
WAIT_S = 60.0  # a generous deadline for a state to be reached, on the busiest machine


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    values: dict[str, Any] = {"tick_seconds": 0.1, **changes}
    return load_settings(data_dir=tmp_path / "data", embedder="hash", brain="offline", **values)


@dataclass
class FakeClocks:
    """A wall clock and a monotonic clock that move only when the test says so."""

    wall_s: float = 1_900_000_000.0  # 2030-03-17, long after any test's last tick
    mono_s: float = 1000.0

    def wall(self) -> float:
        return self.wall_s

    def monotonic(self) -> float:
        return self.mono_s

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.wall_s, UTC)


@dataclass
class Running:
    """A town under ``run_town`` (headless: no platform) in a task of its own."""

    runtime: TownRuntime
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.runtime.opened.services.close()

    def town(self) -> Town:
        with self.runtime.store.session() as session:
            return self.runtime.engine.town(session)

    def clock(self) -> datetime:
        return self.town().clock

    @property
    def keeper(self) -> Timekeeper:
        assert self.runtime.keeper is not None
        return self.runtime.keeper

    def job(self) -> Any:
        return self.keeper.scheduler.get_job(job_id(self.runtime.town_id))


async def start(runtime: TownRuntime, keeper: Timekeeper | None = None) -> Running:
    started = asyncio.Event()
    task = asyncio.create_task(run_town(runtime, [], ready=lambda _: started.set(), keeper=keeper))
    done, _ = await asyncio.wait(
        [task, asyncio.create_task(started.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    if task in done:
        task.result()  # it ended before it was ready: raise what it raised
    return Running(runtime, task)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start towns (stopping them all at the end): ``await running(settings)``, optionally on a
    keeper of the test's (``keeper=``) and with a runtime of another kind."""
    started: list[Running] = []
    keepers: list[Timekeeper] = []

    async def go(
        settings: Settings,
        kind: type[TownRuntime] = TownRuntime,
        keeper: Timekeeper | None = None,
    ) -> Running:
        one = await start(await open_runtime(settings, kind=kind), keeper)
        started.append(one)
        if keeper is not None:
            keepers.append(keeper)
        return one

    yield go
    for one in started:
        if not one.task.done():
            await one.stop()
    for keeper in keepers:
        await keeper.close()


async def until(condition: Callable[[], object], seconds: float = WAIT_S) -> None:
    """Wait for a state (polling); the deadline only ends a test that would hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def set_town(store: Store, town_id: int, **values: Any) -> None:
    with Session(store.engine) as session:
        town = session.get(Town, town_id)
        assert town is not None
        for key, value in values.items():
            setattr(town, key, value)
        session.add(town)
        session.commit()


async def test_a_live_town_has_one_interval_job_built_from_its_row(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    clocks = FakeClocks()
    settings = settings_for(tmp_path, tick_seconds=600.0)
    keeper = Timekeeper(Store.open(settings.resolved_database_url), settings, wall=clocks.wall)
    town = await running(settings, keeper=keeper)
    job = town.job()
    assert job.id == f"town:{town.runtime.town_id}:tick" and job.args[0].ticking is town.runtime
    assert job.trigger.interval == timedelta(seconds=600) and str(job.trigger.timezone) == "UTC"
    assert job.next_run_time == clocks.now() + timedelta(seconds=600)  # one interval from now
    assert job.coalesce is True and job.max_instances == 1  # no pile-up, no overlap
    assert job.misfire_grace_time >= 600  # a busy loop's late run still runs
    assert [j.id for j in keeper.scheduler.get_jobs()] == [job.id]
    await town.stop()
    assert keeper.scheduler.get_jobs() == [] and not keeper.towns  # the job went with the town

    last = clocks.now() - timedelta(seconds=200)  # a restart keeps to the ticks' rhythm
    set_town(keeper.store, town.runtime.town_id, last_tick_at=last)
    again = await running(settings, keeper=keeper)
    assert again.job().next_run_time == last + timedelta(seconds=600)
    keeper.store.dispose()


async def test_the_job_runs_ticks(tmp_path: Path, running: Callable[..., Any]) -> None:
    town = await running(settings_for(tmp_path))
    before = town.clock()
    await until(lambda: town.clock() >= before + timedelta(minutes=30))  # three ticks or more
    assert town.town().last_tick_at is not None and town.keeper.towns[town.runtime.town_id].ticks
    keeper = town.keeper
    await town.stop()
    assert not keeper.scheduler.running  # run_town's own keeper stopped with the town


async def test_towns_taken_and_handed_back_get_and_lose_their_jobs(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    """A worker's keeper, shared by its towns: each town it runs has its job, and only that."""
    settings = settings_for(tmp_path, tick_seconds=600.0)
    store = Store.open(settings.resolved_database_url)
    keeper = Timekeeper(store, settings)
    first = await running(settings, keeper=keeper)
    second = await start(await open_runtime(settings, "other"), keeper)
    ids = {job_id(first.runtime.town_id), job_id(second.runtime.town_id)}
    assert {j.id for j in keeper.scheduler.get_jobs()} == ids and len(ids) == 2
    await second.stop()  # handed back
    assert [j.id for j in keeper.scheduler.get_jobs()] == [job_id(first.runtime.town_id)]
    assert keeper.scheduler.running  # the first town still ticks
    store.dispose()


async def test_pause_resume_and_speed_survive_a_restart(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    settings = settings_for(tmp_path)
    town = await running(settings)
    runtime = town.runtime

    reply = await runtime.command(ADMIN, "speed 5 0.3")
    assert reply.ok and "5 game minutes" in reply.text and "every 0.3 real seconds" in reply.text
    assert town.job().trigger.interval == timedelta(seconds=0.3)  # followed at once
    assert (await runtime.command(ADMIN, "pause")).ok
    assert town.job().next_run_time is None  # the job is paused, too: no tick can run
    paused_at = town.clock()
    await town.stop()

    again = await running(settings)  # a new process, as far as the town can tell
    assert again.town().paused and again.clock() == paused_at  # paused: nothing missed
    assert again.job().next_run_time is None  # built paused from the row ...
    assert again.job().trigger.interval == timedelta(seconds=0.3)  # ... at the stored pace
    assert (await again.runtime.command(ADMIN, "resume")).ok
    assert again.job().next_run_time is not None
    await until(lambda: again.clock() >= paused_at + timedelta(minutes=10))
    assert (again.clock() - paused_at) % timedelta(minutes=5) == timedelta(0)  # 5 min a tick
    await again.stop()

    third = await running(settings)
    assert third.job().next_run_time is not None  # running again
    assert third.job().trigger.interval == timedelta(seconds=0.3)
    assert third.town().minutes_per_tick == 5 and third.town().tick_seconds == 0.3


async def test_a_change_made_elsewhere_is_followed(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    town = await running(settings_for(tmp_path))
    runtime, keeper = town.runtime, town.keeper
    # another process (a shell's `bottown pause`): its writes wait for the ticks' commits in a
    # thread, as they would in a process of their own, not on this event loop
    other = Store.open(runtime.store.url)
    await asyncio.to_thread(set_town, other, runtime.town_id, paused=True)
    keeper.follow_all()  # (what the watch does every second)
    assert town.job().next_run_time is None
    await asyncio.to_thread(set_town, other, runtime.town_id, paused=False, tick_seconds=0.7)
    keeper.follow_all()
    assert town.job().next_run_time is not None
    assert town.job().trigger.interval == timedelta(seconds=0.7)
    await asyncio.to_thread(set_town, other, runtime.town_id, tick_seconds=0.9)
    await until(lambda: town.job().trigger.interval == timedelta(seconds=0.9))  # by the watch
    other.dispose()


async def test_the_jump_policy_moves_the_clock_over_missed_time_without_ticking(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0)
    first = await running(settings)
    await first.stop()
    clock, town_id, store = first.clock(), first.runtime.town_id, first.runtime.store
    with store.session() as s:
        events = len(s.exec(select(OutboxEvent)).all())
    clocks = FakeClocks()
    down = clocks.now() - timedelta(seconds=95)  # 9 whole ticks of 10 s missed
    set_town(store, town_id, last_tick_at=down)

    caplog.set_level(logging.INFO, "bot")
    keeper = Timekeeper(Store.open(settings.resolved_database_url), settings, wall=clocks.wall)
    again = await running(settings, keeper=keeper)
    assert again.clock() == clock + timedelta(minutes=90)  # 9 ticks of 10 game minutes
    last = again.town().last_tick_at
    assert last is not None and last.replace(tzinfo=UTC) == down + timedelta(seconds=90)
    assert again.job().next_run_time == down + timedelta(seconds=100)  # the ticks' rhythm kept
    with again.runtime.store.session() as s:
        assert len(s.exec(select(OutboxEvent)).all()) == events  # no tick ran
    assert "jumped 90 game minutes without ticking" in caplog.text
    assert "missed_time = jump" in caplog.text
    keeper.store.dispose()


@dataclass
class CountingRuntime(TownRuntime):
    """A runtime that records every tick it runs."""

    reports: list[TickReport] = field(default_factory=list)

    async def tick(self) -> TickReport | None:
        report = await super().tick()
        if report is not None:
            self.reports.append(report)
        return report


async def test_the_catch_up_policy_runs_at_most_n_ticks_then_jumps(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0, missed_time="catch-up", catch_up_ticks=3)
    runtime = await open_runtime(settings, kind=CountingRuntime)
    assert isinstance(runtime, CountingRuntime)
    with runtime.store.session() as s:
        clock = runtime.engine.town(s).clock
    now = datetime(2030, 1, 1, tzinfo=UTC)
    set_town(runtime.store, runtime.town_id, last_tick_at=now - timedelta(seconds=95))
    try:
        made_up = await make_up_missed(runtime, settings, now)
        assert [r.clock for r in runtime.reports] == [
            clock + timedelta(minutes=10 * n) for n in (1, 2, 3)
        ]  # three ticks back to back ...
        with runtime.store.session() as s:
            assert runtime.engine.town(s).clock == clock + timedelta(minutes=90)  # ... 6 jumped
        assert (made_up.missed_ticks, made_up.caught_up, made_up.jumped_minutes) == (9, 3, 60)
    finally:
        runtime.opened.services.close()


async def test_a_paused_town_misses_nothing_and_a_pause_is_not_missed_time(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0)
    first = await running(settings)
    await first.runtime.command(ADMIN, "pause")
    await first.stop()
    clock, town_id, store = first.clock(), first.runtime.town_id, first.runtime.store
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    set_town(store, town_id, last_tick_at=an_hour_ago)
    again = await running(settings)
    assert again.clock() == clock  # paused: the hour was not missed
    await again.runtime.command(ADMIN, "resume")
    last = again.town().last_tick_at
    assert last is not None and last.replace(tzinfo=UTC) > an_hour_ago + timedelta(minutes=59)
    # the clock runs from the resume: the paused hour is no missed time
    made_up = await make_up_missed(again.runtime, settings, last.replace(tzinfo=UTC))
    assert made_up.missed_ticks == 0 and again.clock() == clock


async def test_a_wall_clock_set_back_before_start_breaks_nothing(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, tick_seconds=600.0)
    first = await running(settings)
    await first.stop()
    clock, town_id, store = first.clock(), first.runtime.town_id, first.runtime.store
    clocks = FakeClocks()
    set_town(store, town_id, last_tick_at=clocks.now() + timedelta(hours=1))  # "the future"
    caplog.set_level(logging.WARNING, "bot")
    keeper = Timekeeper(Store.open(settings.resolved_database_url), settings, wall=clocks.wall)
    again = await running(settings, keeper=keeper)
    assert "was set back" in caplog.text and again.clock() == clock  # logged, nothing jumped
    assert again.job().next_run_time == clocks.now() + timedelta(seconds=600)  # and it ticks on
    keeper.store.dispose()


async def test_a_wall_clock_that_jumps_while_running_is_followed(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0)
    clocks = FakeClocks(wall_s=datetime.now(UTC).timestamp())
    store = Store.open(settings.resolved_database_url)
    keeper = Timekeeper(store, settings, wall=clocks.wall, monotonic=clocks.monotonic)
    town = await running(settings, keeper=keeper)
    keeper.scheduler.pause()  # (no job runs on the machine's clock meanwhile)
    caplog.set_level(logging.WARNING, "bot")

    clocks.wall_s += 1.5  # a drift within the slack is no jump
    clocks.mono_s += 0.5
    await keeper.check_clocks()
    assert "wall clock" not in caplog.text

    clocks.wall_s -= 3600  # set back an hour: the job's next run would lie an hour ahead
    stuck = town.clock()
    await keeper.check_clocks()
    assert "went back by 60.0 min" in caplog.text and town.clock() == stuck
    assert town.job().next_run_time == clocks.now() + timedelta(seconds=10)  # from now

    clocks.wall_s += 95.0  # the machine slept 95 s: 9 ticks of 10 s were missed
    await keeper.check_clocks()
    assert "leapt ahead by 95.0 s" in caplog.text
    assert "(9 ticks at 10 s, missed_time = jump): jumped 90 game minutes" in caplog.text
    assert town.clock() == stuck + timedelta(minutes=90)
    made_up = keeper.towns[town.runtime.town_id].made_up
    assert (made_up.missed_ticks, made_up.jumped_minutes) == (9, 90)
    store.dispose()


@dataclass
class HeldRuntime(TownRuntime):
    """Each tick waits for the test to let it finish."""

    in_flight: int = 0
    most: int = 0
    started: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def tick(self) -> TickReport | None:
        self.in_flight += 1
        self.started += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
            return await super().tick()
        finally:
            self.in_flight -= 1


async def test_ticks_never_overlap_nor_pile_up(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    town = await running(settings_for(tmp_path, tick_seconds=0.05), HeldRuntime)
    runtime = town.runtime
    assert isinstance(runtime, HeldRuntime)
    live = town.keeper.towns[runtime.town_id]
    await until(lambda: live.late >= 5)  # runs fell due while the first tick was held ...
    assert runtime.started == 1 and runtime.most == 1  # ... and were skipped, not started
    runtime.release.set()
    await until(lambda: runtime.started >= 3)
    await town.stop()
    assert runtime.most == 1  # never two at once
    said = [r for r in caplog.records if "outlasts its interval" in r.message]
    assert len(said) == 1  # said once (a minute), not once a skip
    assert not [r for r in caplog.records if r.name.startswith("apscheduler")]


async def test_a_slow_town_is_said_once_a_minute(tmp_path: Path) -> None:
    clocks = FakeClocks()
    runtime = await open_runtime(settings_for(tmp_path, tick_seconds=600.0))
    keeper = Timekeeper(runtime.store, runtime.settings, monotonic=clocks.monotonic)
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("bot.runtime.scheduler").addHandler(handler)
    try:
        await keeper.add(runtime)
        skipped = JobSubmissionEvent(EVENT_JOB_MAX_INSTANCES, job_id(runtime.town_id), "", [])
        for _ in range(3):
            keeper._on_late(skipped)
        clocks.mono_s += LATE_LOG_S
        keeper._on_late(skipped)
        late = [line for line in said if "outlasts its interval" in line]
        assert len(late) == 2 and "(4 runs skipped so far)" in late[1]
        assert keeper.towns[runtime.town_id].late == 4
    finally:
        logging.getLogger("bot.runtime.scheduler").removeHandler(handler)
        await keeper.remove(runtime)
        await keeper.close()
        runtime.opened.services.close()


async def test_a_town_behind_its_pace_says_so_in_status_and_on_the_page(tmp_path: Path) -> None:
    runtime = await open_runtime(settings_for(tmp_path, tick_seconds=600.0))
    keeper = Timekeeper(runtime.store, runtime.settings)
    try:
        await keeper.add(runtime)
        runtime.keeper = keeper
        live = keeper.towns[runtime.town_id]
        assert keeper.clock_behind_pct(runtime.town_id) == 0 and runtime.thinking().behind == ""
        skipped = JobSubmissionEvent(EVENT_JOB_MAX_INSTANCES, job_id(runtime.town_id), "", [])
        for _ in range(2):
            await keeper._tick(live)
            keeper._on_late(skipped)  # the next run fell due while it ran: skipped
        assert keeper.clock_behind_pct(runtime.town_id) == 50
        assert runtime.thinking().behind == "clock 50% behind its pace"
        status = await runtime.command(ADMIN, "status")
        assert "Pace: clock 50% behind its pace" in status.text
    finally:
        runtime.keeper = None
        await keeper.remove(runtime)
        await keeper.close()
        runtime.opened.services.close()


class LeaseLost(RuntimeError):
    """What a worker's guard raises when its lease on the town is gone."""


async def test_an_error_the_runtime_stops_on_ends_run_town(tmp_path: Path) -> None:
    runtime = await open_runtime(settings_for(tmp_path))
    runtime.stop_on = (LeaseLost,)
    with runtime.store.session() as s:
        clock = runtime.engine.town(s).clock

    def guard(session: Session) -> None:
        raise LeaseLost("town #1 belongs to another worker now")

    runtime.engine.guard = guard
    try:
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(run_town(runtime, []), WAIT_S)
        with runtime.store.session() as s:
            assert runtime.engine.town(s).clock == clock  # the tick rolled back
        assert runtime.keeper is None
    finally:
        runtime.opened.services.close()


async def test_a_tick_another_process_overtook_is_said_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tick that another process's tick overtook rolls back with a warning, no traceback,
    and the next one goes ahead."""
    runtime = await open_runtime(settings_for(tmp_path))
    with runtime.store.session() as s:
        clock = runtime.engine.town(s).clock

    engine = runtime.engine
    run = engine._run

    async def meddled(tick: Tick) -> int:
        chain = await run(tick)
        with runtime.store.engine.begin() as other:  # (as another process would meanwhile)
            other.exec_driver_sql("UPDATE town SET revision = revision + 1")
        return chain

    engine._run = meddled  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.WARNING):
            assert await runtime.tick() is None
        said = [r for r in caplog.records if "another process changed the town" in r.message]
        assert len(said) == 1 and said[0].exc_info is None
        engine._run = run  # type: ignore[method-assign]
        assert await runtime.tick() is not None
        with runtime.store.session() as s:
            assert runtime.engine.town(s).clock > clock
    finally:
        runtime.opened.services.close()


async def test_the_speed_command_and_its_bad_input(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    town = await running(settings_for(tmp_path))
    runtime = town.runtime
    reply = await runtime.command(ADMIN, "speed realtime")
    assert reply.ok and "1 game minute." in reply.text and "every 60 real seconds" in reply.text
    assert (town.town().minutes_per_tick, town.town().tick_seconds) == (1, 60.0)
    reply = await runtime.command(ADMIN, "speed 15")
    assert reply.ok and "at the default interval" in reply.text
    assert (town.town().minutes_per_tick, town.town().tick_seconds) == (15, None)
    for line, words in [
        ("speed 5 fast", "not a number of seconds"),
        ("speed 5 0", "seconds between ticks must be 0.05 to 3600"),
        ("speed 5 nan", "seconds between ticks must be"),
        ("speed realtime 5", "realtime takes no seconds"),
        ("speed 0", "minutes per tick must be 1 to 1440"),
        ("speed", "give minutes per tick"),
        ("speed 1 2 3", "give minutes per tick"),
    ]:
        bad = await runtime.command(ADMIN, line)
        assert not bad.ok and words in bad.text and "Usage: speed" in bad.text, line
    assert (town.town().minutes_per_tick, town.town().tick_seconds) == (15, None)  # unchanged
    member = Caller("web", "u1", "Alice", False, "Hobbs Cafe")
    assert not (await runtime.command(member, "speed 1")).ok


@pytest.fixture
def founded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A town in a data folder, for the shell commands."""
    monkeypatch.setenv("BOTTOWN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    monkeypatch.setenv("BOTTOWN_BRAIN", "offline")
    settings = settings_for(tmp_path)

    async def found() -> None:
        (await open_runtime(settings)).opened.services.close()

    asyncio.run(found())
    yield tmp_path / "data" / "bottown.db"


def test_pause_resume_and_speed_from_the_shell(founded: Path) -> None:
    runner = CliRunner()
    store = Store.open(f"sqlite:///{founded}")

    def town() -> Town:
        with store.session() as s:
            return s.exec(select(Town)).one()

    result = runner.invoke(app, ["pause", "--town", "mini"])
    assert result.exit_code == 0, result.output
    assert "clock stops at Monday 06:50" in result.output and town().paused
    result = runner.invoke(app, ["speed", "3", "0.5", "--town", "mini"])
    assert result.exit_code == 0 and "every 0.5 real seconds" in result.output
    assert (town().minutes_per_tick, town().tick_seconds) == (3, 0.5)
    result = runner.invoke(app, ["resume", "--town", "mini"])
    assert result.exit_code == 0 and not town().paused and town().last_tick_at is not None
    result = runner.invoke(app, ["speed", "realtime", "--town", "mini"])
    assert result.exit_code == 0 and (town().minutes_per_tick, town().tick_seconds) == (1, 60)
    for args, words in [
        (["speed", "fast", "--town", "mini"], "neither a number of minutes nor realtime"),
        (["speed", "realtime", "5", "--town", "mini"], "realtime takes no seconds"),
        (["speed", "5", "9999", "--town", "mini"], "seconds between ticks must be"),
        (["pause", "--town", "nowhere"], "no town named 'nowhere'"),
    ]:
        bad = runner.invoke(app, args)
        assert bad.exit_code == 2 and words in bad.output, (args, bad.output)
    assert (town().minutes_per_tick, town().tick_seconds) == (1, 60)
    store.dispose()


async def test_waiting_for_a_moment_never_ends_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sleep_until``: an event loop's timer that fires early (asyncio's fires within its clock
    resolution) is waited out again, so the wait never ends before the moment asked for."""
    now = [0.0]
    slept: list[float] = []

    async def early(seconds: float) -> None:  # 10% early; below 2 ms, a whole 2 ms
        slept.append(seconds)
        now[0] += seconds * 0.9 if seconds > 0.002 else 0.002

    monkeypatch.setattr(gametime, "wall", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(gametime, "asyncio", SimpleNamespace(sleep=early))
    await gametime.sleep_until(0.0123)
    assert now[0] >= 0.0123 and len(slept) == 2
