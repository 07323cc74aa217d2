"""An interview room's handler thinks as a tick does: from a snapshot, holding no lock, connection
or transaction while its LLM call runs, and writes once; a tick that commits meanwhile is kept,
the interviewer's turn goes on top of it, and nothing is thought twice."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from sqlalchemy.engine import make_url
from sqlmodel import select

from tests.factories import resident
from tests.town.features.coaching.test_session import ALICE, DANA, KEY, practice_town, speak
from town.features.coaching.feedback import feedback
from town.features.coaching.session import BUSY
from town.llm.port import ScriptedBrain
from town.llm.tasks import Task
from town.store.db import Store
from town.store.models import Town
from town.tick.engine import Engine, TickReport
from town.tick.state import ResidentState

COACHING = ("coach_turn", "coach_review", "coach_feedback")
TICK_GUARD_S = 120  # (a tick that waited for the handler's lock would wait for ever)


class WatchfulBrain(ScriptedBrain):
    """At each mock-interview call: what the process holds (the engine's lock, a connection,
    SQLite's write lock), and, once, a whole tick run and committed meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None
        self.held: list[tuple[str, bool, int, bool]] = []  # task, locked, connections, writable
        self.tick_meanwhile = False
        self.ticked: TickReport | None = None

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task.name in COACHING and self.engine is not None:
            engine = self.engine
            pool = engine.store.engine.pool
            checked_out = pool.checkedout() if hasattr(pool, "checkedout") else 0
            self.held.append((task.name, engine.lock.locked(), checked_out, _writable(engine)))
            if self.tick_meanwhile:
                self.tick_meanwhile = False
                self.ticked = await asyncio.wait_for(engine.tick(), TICK_GUARD_S)
        return await super().run(task, inputs, resident=resident)


def _writable(engine: Engine) -> bool:
    """Another connection takes SQLite's write lock at once: nobody holds it."""
    path = make_url(engine.store.url).database
    assert path
    other = sqlite3.connect(path, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.rollback()
        return True
    except sqlite3.OperationalError:  # database is locked
        return False
    finally:
        other.close()


def _revision(store: Store) -> int:
    with store.session() as s:
        return s.exec(select(Town)).one().revision


async def test_the_interviewer_thinks_and_gives_feedback_holding_nothing(store: Store) -> None:
    brain = WatchfulBrain()
    engine = await practice_town(store, brain)
    brain.engine = engine
    await speak(engine, "Hi Dana, I'm here for the mock interview.")
    await speak(engine, "We used a queue.")
    points = await feedback(engine, "web", "u1", ALICE, interviewer=DANA)
    assert "We used a queue" in points
    assert [task for task, *_ in brain.held] == ["coach_turn", "coach_turn", "coach_feedback"]
    assert all(
        (locked, connections, writable) == (False, 0, True)
        for _, locked, connections, writable in brain.held
    ), brain.held


async def test_a_tick_that_commits_while_the_interviewer_thinks_is_kept(store: Store) -> None:
    brain = WatchfulBrain()
    engine = await practice_town(store, brain)
    brain.engine = engine
    before = _revision(store)
    calls = len(brain.calls("coach_turn"))
    brain.tick_meanwhile = True
    opening = await speak(engine, "Hi Dana, I'm here for the mock interview.")
    assert opening and brain.ticked is not None and not brain.ticked.skipped
    with store.session() as s:
        assert s.exec(select(Town)).one().clock == brain.ticked.clock  # the tick committed
    assert _revision(store) == before + 2  # the tick's write, then the turn's on top of it
    dana = resident(store, DANA)
    record = ResidentState.of(dana).coaching[KEY]
    assert record.session is not None and record.session.turns  # the turn's state is kept
    assert dana.action.startswith(BUSY)  # and so is its action, over the tick's
    assert len(brain.calls("coach_turn")) == calls + 1  # thought once
