"""APScheduler drives a live town's ticks from the project's database: the job store, pause,
resume and speed across restarts, missed time (jump and catch-up), a clock that jumps, ticks that
never overlap, and a tick error that ends the run (a worker's lost lease)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session, select
from typer.testing import CliRunner

from adapters.base import Caller
from bot.cli import app
from bot.jobstore import JOBS_TABLE
from bot.run import TownRuntime, run_town
from bot.scheduler import TICK_FUNC, Timekeeper, job_id
from bot.settings import Settings, load_settings
from bot.town_cmds import open_town
from town.engine import TickReport
from town.gametime import sleep_until
from town.mind import Tick
from town.store.db import Store
from town.store.models import OutboxEvent, Town
from town.vectors import ChromaIndex

MINITOWN = Path(__file__).parent / "data" / "minitown"
ADMIN = Caller("web", "root", "Root", True, "Hobbs Cafe")


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    values: dict[str, Any] = {"tick_seconds": 0.1, **changes}
    return load_settings(data_dir=tmp_path / "data", embedder="hash", brain="offline", **values)


async def open_runtime(settings: Settings, kind: type[TownRuntime] = TownRuntime) -> TownRuntime:
    ChromaIndex.release_all()
    opened = await open_town(settings, "mini", persona=str(MINITOWN), create=True)
    return kind(opened, settings)


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


async def start(runtime: TownRuntime) -> Running:
    started = asyncio.Event()
    task = asyncio.create_task(run_town(runtime, [], ready=lambda _: started.set()))
    done, _ = await asyncio.wait(
        [task, asyncio.create_task(started.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    if task in done:
        task.result()  # it ended before it was ready: raise what it raised
    return Running(runtime, task)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start towns (stopping them all at the end): ``await running(settings)``."""
    started: list[Running] = []

    async def go(settings: Settings, kind: type[TownRuntime] = TownRuntime) -> Running:
        one = await start(await open_runtime(settings, kind))
        started.append(one)
        return one

    yield go
    for one in started:
        if not one.task.done():
            await one.stop()


async def until(condition: Callable[[], object], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def stored_job(store: Store, town_id: int) -> tuple[float | None, dict[str, Any]] | None:
    """The tick job's row as the database holds it: next run time and unpickled state."""
    with store.engine.connect() as conn:
        row = conn.execute(
            text(f"select next_run_time, job_state from {JOBS_TABLE} where id = :id"),
            {"id": job_id(town_id)},
        ).first()
    return None if row is None else (row[0], pickle.loads(row[1]))


def set_town(store: Store, town_id: int, **values: Any) -> None:
    with Session(store.engine) as session:
        town = session.get(Town, town_id)
        assert town is not None
        for key, value in values.items():
            setattr(town, key, value)
        session.add(town)
        session.commit()


async def test_the_tick_job_lands_in_the_database_job_store(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    town = await running(settings_for(tmp_path))
    before = town.clock()
    await until(lambda: town.clock() >= before + timedelta(minutes=30))  # three ticks or more
    found = stored_job(town.runtime.store, town.runtime.town_id)
    assert found is not None
    next_run, state = found
    assert state["func"] == TICK_FUNC and state["args"] == (town.runtime.town_id,)
    assert state["trigger"].interval == timedelta(seconds=0.1)
    assert state["coalesce"] is True and state["max_instances"] == 1
    assert state["misfire_grace_time"] >= 1
    assert next_run is not None and abs(next_run - time.time()) < 5
    assert town.town().last_tick_at is not None
    await town.stop()
    assert stored_job(town.runtime.store, town.runtime.town_id) is not None  # kept for next run
    assert Timekeeper.current is None  # the last town out stopped the scheduler


async def test_pause_resume_and_speed_survive_a_restart(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    settings = settings_for(tmp_path)
    town = await running(settings)
    runtime, jid = town.runtime, job_id(town.runtime.town_id)
    keeper = runtime.keeper
    assert keeper is not None

    reply = await runtime.command(ADMIN, "speed 5 0.3")
    assert reply.ok and "5 game minutes" in reply.text and "every 0.3 real seconds" in reply.text
    assert keeper.scheduler.get_job(jid).trigger.interval == timedelta(seconds=0.3)  # at once
    assert (await runtime.command(ADMIN, "pause")).ok
    assert keeper.scheduler.get_job(jid).next_run_time is None  # the job is paused, too
    paused_at = town.clock()
    await asyncio.sleep(0.5)
    assert town.clock() == paused_at
    await town.stop()

    again = await running(settings)  # a new process, as far as the town can tell
    assert again.town().paused and again.clock() == paused_at
    found = stored_job(again.runtime.store, again.runtime.town_id)
    assert found is not None
    assert found[0] is None and found[1]["trigger"].interval == timedelta(seconds=0.3)
    await asyncio.sleep(0.5)
    assert again.clock() == paused_at  # still paused: nothing missed, nothing ticked

    assert (await again.runtime.command(ADMIN, "resume")).ok
    await until(lambda: again.clock() >= paused_at + timedelta(minutes=10))
    assert (again.clock() - paused_at) % timedelta(minutes=5) == timedelta(0)  # 5 min a tick
    await again.stop()

    third = await running(settings)
    found = stored_job(third.runtime.store, third.runtime.town_id)
    assert found is not None and found[0] is not None  # running again
    assert found[1]["trigger"].interval == timedelta(seconds=0.3)
    assert third.town().minutes_per_tick == 5 and third.town().tick_seconds == 0.3


async def test_a_change_made_elsewhere_is_followed_within_a_second(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    town = await running(settings_for(tmp_path))
    runtime, jid = town.runtime, job_id(town.runtime.town_id)
    keeper = runtime.keeper
    assert keeper is not None
    # another process (a shell's `bottown pause`): its writes wait for the ticks' commits in a
    # thread, as they would in a process of their own, not on this event loop
    other = Store.open(runtime.store.url)
    await asyncio.to_thread(set_town, other, runtime.town_id, paused=True)
    await until(lambda: keeper.scheduler.get_job(jid).next_run_time is None, 3)
    await asyncio.to_thread(set_town, other, runtime.town_id, paused=False, tick_seconds=0.7)
    await until(lambda: keeper.scheduler.get_job(jid).next_run_time is not None, 3)
    assert keeper.scheduler.get_job(jid).trigger.interval == timedelta(seconds=0.7)

    def delete_jobs() -> None:
        with other.engine.begin() as conn:
            conn.execute(text(f"delete from {JOBS_TABLE}"))

    await asyncio.to_thread(delete_jobs)  # even a job row deleted by hand comes back
    await until(lambda: stored_job(other, runtime.town_id) is not None, 3)
    other.dispose()


async def test_the_jump_policy_moves_the_clock_over_missed_time_without_ticking(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0)
    first = await running(settings)
    await first.stop()
    clock, town_id = first.clock(), first.runtime.town_id
    with first.runtime.store.session() as s:
        events = len(s.exec(select(OutboxEvent)).all())
    down = datetime.now(UTC) - timedelta(seconds=95)  # 9 whole ticks of 10 s missed
    set_town(first.runtime.store, town_id, last_tick_at=down)

    caplog.set_level(logging.INFO, "bot.scheduler")
    again = await running(settings)
    assert again.clock() == clock + timedelta(minutes=90)  # 9 ticks of 10 game minutes
    last = again.town().last_tick_at
    assert last is not None and abs(last.replace(tzinfo=UTC) - datetime.now(UTC)).seconds < 5
    with again.runtime.store.session() as s:
        assert len(s.exec(select(OutboxEvent)).all()) == events  # no tick ran
    assert "jumped 90 game minutes without ticking" in caplog.text
    assert "missed_time = jump" in caplog.text


@dataclass
class CountingRuntime(TownRuntime):
    """A runtime that records every tick it runs."""

    reports: list[TickReport] = field(default_factory=list)

    async def tick(self) -> TickReport | None:
        report = await super().tick()
        if report is not None:
            self.reports.append(report)
        return report


async def test_the_catch_up_policy_runs_at_most_n_ticks_then_jumps(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0, missed_time="catch-up", catch_up_ticks=3)
    first = await running(settings)
    await first.stop()
    clock, town_id = first.clock(), first.runtime.town_id
    set_town(first.runtime.store, town_id, last_tick_at=datetime.now(UTC) - timedelta(seconds=95))
    again = await running(settings, CountingRuntime)
    runtime = again.runtime
    assert isinstance(runtime, CountingRuntime)
    assert [r.clock for r in runtime.reports] == [
        clock + timedelta(minutes=10 * n) for n in (1, 2, 3)
    ]  # three ticks back to back ...
    assert again.clock() == clock + timedelta(minutes=90)  # ... and the other six jumped
    keeper = runtime.keeper
    assert keeper is not None
    made_up = keeper.towns[town_id].made_up
    assert (made_up.missed_ticks, made_up.caught_up, made_up.jumped_minutes) == (9, 3, 60)


async def test_a_paused_town_misses_nothing_and_a_pause_is_not_missed_time(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    settings = settings_for(tmp_path, tick_seconds=10.0)
    first = await running(settings)
    await first.runtime.command(ADMIN, "pause")
    await first.stop()
    clock, town_id, store = first.clock(), first.runtime.town_id, first.runtime.store
    set_town(store, town_id, last_tick_at=datetime.now(UTC) - timedelta(hours=1))
    again = await running(settings)
    assert again.clock() == clock  # paused: the hour was not missed
    await again.runtime.command(ADMIN, "resume")
    last = again.town().last_tick_at
    assert last is not None and datetime.now(UTC) - last.replace(tzinfo=UTC) < timedelta(
        seconds=5
    )  # the clock runs from the resume, so a restart now misses (almost) nothing
    await again.stop()
    third = await running(settings)
    assert third.clock() == clock


async def test_a_wall_clock_set_back_before_start_breaks_nothing(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path)
    first = await running(settings)
    await first.stop()
    clock, town_id, store = first.clock(), first.runtime.town_id, first.runtime.store
    ahead = datetime.now(UTC) + timedelta(hours=1)  # the last tick happened "in the future"
    set_town(store, town_id, last_tick_at=ahead)
    with store.engine.begin() as conn:  # and the schedule was left an hour ahead, too
        state = pickle.loads(conn.execute(text(f"select job_state from {JOBS_TABLE}")).scalar())
        state["next_run_time"] = ahead
        conn.execute(
            text(f"update {JOBS_TABLE} set next_run_time = :t, job_state = :s"),
            {"t": ahead.timestamp(), "s": pickle.dumps(state)},
        )
    caplog.set_level(logging.WARNING, "bot.scheduler")
    again = await running(settings)
    assert "was set back" in caplog.text and again.clock() == clock  # logged, nothing jumped
    await until(lambda: again.clock() >= clock + timedelta(minutes=20))  # and it ticks on
    last = again.town().last_tick_at
    assert last is not None and last.replace(tzinfo=UTC) < ahead


@dataclass
class FakeClocks:
    """A wall clock the test can move, beside the real monotonic one."""

    offset: float = 0.0

    def wall(self) -> float:
        return time.time() + self.offset


async def test_a_wall_clock_that_jumps_while_running_is_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, tick_seconds=0.2)
    runtime = await open_runtime(settings)
    clocks = FakeClocks()
    keeper = Timekeeper(runtime.store, settings, wall=clocks.wall)
    caplog.set_level(logging.WARNING, "bot.scheduler")
    jid = job_id(runtime.town_id)

    def clock() -> datetime:
        with runtime.store.session() as s:
            return runtime.engine.town(s).clock

    try:
        await keeper.add(runtime)
        # the wall clock goes back an hour: the job's next run now lies an hour ahead
        keeper.scheduler.modify_job(jid, next_run_time=datetime.now(UTC) + timedelta(hours=1))
        stuck = clock()
        clocks.offset = -3600.0
        await until(lambda: "went back by 60.0 min" in caplog.text, 3)
        await until(lambda: clock() >= stuck + timedelta(minutes=20), 3)  # ticking again

        clocks.offset += 95.0  # the machine slept 95 s: 475 ticks of 0.2 s were missed
        before = clock()
        await until(lambda: "game minutes without ticking" in caplog.text, 3)
        assert re.search(r"leapt ahead by 9[45]\.\d s", caplog.text)
        found = re.search(
            r"\((47\d) ticks at 0.2 s, missed_time = jump\): jumped (\d+)", caplog.text
        )
        assert found is not None and int(found[2]) == 10 * int(found[1])  # 10 minutes a tick
        assert clock() >= before + timedelta(minutes=int(found[2]))
    finally:
        await keeper.remove(runtime)
        runtime.opened.services.close()


@dataclass
class SlowRuntime(TownRuntime):
    """Each tick takes 0.35 s, more than three intervals of 0.1 s."""

    in_flight: int = 0
    most: int = 0
    starts: list[float] = field(default_factory=list)

    async def tick(self) -> TickReport | None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.starts.append(time.monotonic())
        try:
            await asyncio.sleep(0.35)
            return await super().tick()
        finally:
            self.in_flight -= 1


async def test_ticks_never_overlap_nor_pile_up(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "apscheduler.scheduler")
    town = await running(settings_for(tmp_path, tick_seconds=0.1), SlowRuntime)
    runtime = town.runtime
    assert isinstance(runtime, SlowRuntime)
    await asyncio.sleep(2.0)
    keeper = runtime.keeper
    assert keeper is not None
    live = keeper.towns[runtime.town_id]
    await town.stop()
    assert runtime.most == 1  # never two at once
    assert 2 <= len(runtime.starts) <= 6  # one tick per ~0.4 s, not one per 0.1 s
    gaps = [b - a for a, b in itertools.pairwise(runtime.starts)]
    assert min(gaps) >= 0.34  # no burst of queued runs after a slow tick
    assert live.late >= 5  # the runs due meanwhile were skipped, not queued
    said = [r for r in caplog.records if "maximum number of running instances" in r.message]
    assert len(said) == 1  # and said so once, not once a skip


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
            await asyncio.wait_for(run_town(runtime, []), 5)
        with runtime.store.session() as s:
            assert runtime.engine.town(s).clock == clock  # the tick rolled back
        assert Timekeeper.current is None and runtime.keeper is None
    finally:
        runtime.opened.services.close()


async def test_a_tick_another_process_overtook_is_said_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tick that another process's input overtook rolls back with a warning, no traceback,
    and the next one goes ahead."""
    runtime = await open_runtime(settings_for(tmp_path))
    with runtime.store.session() as s:
        clock = runtime.engine.town(s).clock

    engine = runtime.engine
    run = engine._run

    async def meddled(tick: Tick) -> int:
        chain = await run(tick)
        tick.session.connection().exec_driver_sql(  # (as another process would meanwhile)
            "UPDATE town SET revision = revision + 1"
        )
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


async def test_other_processes_jobs_are_never_run_or_moved_here(
    tmp_path: Path, running: Callable[..., Any]
) -> None:
    town = await running(settings_for(tmp_path))
    store = town.runtime.store
    keeper = town.runtime.keeper
    assert keeper is not None
    past = time.time() - 60  # another worker's town, overdue: due at once if it were ours
    with store.engine.begin() as conn:
        conn.execute(
            text(f"insert into {JOBS_TABLE} (id, next_run_time, job_state) values (:i, :t, :s)"),
            {"i": job_id(999), "t": past, "s": pickle.dumps({"not": "ours"})},
        )
    await asyncio.sleep(0.6)
    with store.engine.connect() as conn:
        row = conn.execute(
            text(f"select next_run_time from {JOBS_TABLE} where id = :i"), {"i": job_id(999)}
        ).one()
    assert row[0] == past  # neither run nor rescheduled nor removed as unreadable
    assert [job.id for job in keeper.scheduler.get_jobs()] == [job_id(town.runtime.town_id)]


async def test_an_unreadable_stored_job_is_made_again(
    tmp_path: Path, running: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path)
    first = await running(settings)
    await first.stop()
    with first.runtime.store.engine.begin() as conn:  # another version's job, say
        conn.execute(text(f"update {JOBS_TABLE} set job_state = :s"), {"s": b"not a pickle"})
    caplog.set_level(logging.WARNING, "bot.scheduler")
    again = await running(settings)
    assert "cannot be read" in caplog.text
    clock = again.clock()
    await until(lambda: again.clock() >= clock + timedelta(minutes=20))
    found = stored_job(again.runtime.store, again.runtime.town_id)
    assert found is not None and found[1]["func"] == TICK_FUNC


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


async def test_waiting_for_a_moment_never_ends_before_it() -> None:
    """``sleep_until`` on the loop the commands run on (uvloop's timers count whole
    milliseconds, and may fire early): never a wake-up before the moment asked for."""
    for k in range(40):
        deadline = time.monotonic() + 0.001 + k * 0.00037
        await sleep_until(deadline)
        assert time.monotonic() >= deadline
