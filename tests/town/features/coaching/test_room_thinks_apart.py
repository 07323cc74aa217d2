"""An interview room's handler thinks as a tick does: from a snapshot, holding no lock, connection
or transaction while its LLM call runs, and writes once, leaving the interviewer's row and the
town's revision alone (its change is a pending input): a tick thinking meanwhile commits, the
turn goes on top of it at the next tick, and nothing is thought twice."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from typing import Any

from sqlalchemy.engine import make_url
from sqlmodel import select

from tests.factories import memories, resident
from tests.fakes.brain import ScriptedBrain
from tests.town.features.coaching.test_session import ALICE, DANA, KEY, practice_town, speak
from tests.town.features.consent.support import traces
from town.features.coaching.feedback import feedback
from town.features.coaching.session import BUSY
from town.features.consent.forget import forget
from town.llm.task import Task
from town.store.db import Store
from town.store.models import PendingInput, Town
from town.tick.engine import Engine, TickReport
from town.tick.pending import CHANGED, changes_on_top
from town.tick.state import Candidate, ResidentState

COACHING = ("coach_turn", "coach_review", "coach_feedback")
TICK_GUARD_S = 120  # (a tick that waited for the handler's lock would wait for ever)
TICKS_TO_THINK = 20  # ticks tried for one that makes an LLM call


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


class GatedBrain(WatchfulBrain):
    """Its calls of a tick wait while ``gate`` is closed (a mock interview's never do), saying
    when one does: a tick stuck thinking for as long as the test likes."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_call = asyncio.Event()

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if not self.gate.is_set() and task.name not in COACHING:
            self.in_call.set()
            await self.gate.wait()
        return await super().run(task, inputs, resident=resident)


async def _stuck_tick(engine: Engine, brain: GatedBrain) -> asyncio.Task[TickReport]:
    """A tick started and held inside its first LLM call (ticks without one run through)."""
    for _ in range(TICKS_TO_THINK):
        brain.gate.clear()
        brain.in_call.clear()
        flying = asyncio.create_task(engine.tick())
        thinking = asyncio.create_task(brain.in_call.wait())
        await asyncio.wait({flying, thinking}, return_when=asyncio.FIRST_COMPLETED)
        if brain.in_call.is_set():
            return flying
        thinking.cancel()
        brain.gate.set()
        await flying
    raise AssertionError(f"no tick of {TICKS_TO_THINK} made an LLM call")


def _calls(brain: ScriptedBrain, since: int) -> Counter[tuple[str, str | None]]:
    return Counter((c.task, c.resident) for c in brain.history[since:])


def _pending_changes(store: Store) -> list[PendingInput]:
    with store.session() as s:
        return list(s.exec(select(PendingInput).where(PendingInput.kind == CHANGED)).all())


def _as_read(engine: Engine) -> tuple[Candidate | None, str]:
    """Dana's record of the candidate and her action as a reader sees them (the row with the
    changes pending on top)."""
    with engine.store.session() as s:
        tick = engine.new_tick(s, engine.town(s).clock)
        changes_on_top(tick, engine.town_id)
        dana = tick.residents[DANA]
        return tick.state(dana).coaching.get(KEY), dana.action


async def test_a_tick_thinking_while_the_room_answers_commits_and_thinks_once(
    store: Store,
) -> None:
    brain = GatedBrain()
    engine = await practice_town(store, brain)
    before = _revision(store)
    since = len(brain.history)
    flying = await _stuck_tick(engine, brain)
    revision = _revision(store)
    opening = await asyncio.wait_for(
        speak(engine, "Hi Dana, I'm here for the mock interview."), TICK_GUARD_S
    )
    assert opening and not flying.done()  # answered while the tick thought
    assert _revision(store) == revision  # the room's write raised nothing
    dana = resident(store, DANA)
    assert KEY not in ResidentState.of(dana).coaching  # her row is left alone
    assert not dana.action.startswith(BUSY)
    brain.gate.set()
    report = await flying  # it commits: no TownChanged, nothing thought again
    assert not report.skipped and _revision(store) > before
    assert all(n == 1 for n in _calls(brain, since).values()), _calls(brain, since)
    assert brain.calls("coach_turn")[-1].resident == DANA
    # the change came after the tick's snapshot: it waits for the next tick, readers see it
    assert len(_pending_changes(store)) == 1
    assert KEY not in ResidentState.of(resident(store, DANA)).coaching
    record, action = _as_read(engine)
    assert record is not None and record.session is not None and len(record.session.turns) == 1
    assert action.startswith(BUSY)
    await engine.tick()  # the next tick takes it in
    assert _pending_changes(store) == []
    dana = resident(store, DANA)
    kept = ResidentState.of(dana).coaching[KEY]
    assert kept.session is not None and kept.session.turns == record.session.turns
    assert dana.action.startswith(BUSY) and dana.emoji == "🎤"
    assert ResidentState.of(dana).reaction.startswith(BUSY)


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
    assert _revision(store) == before + 1  # the tick's write only
    assert len(brain.calls("coach_turn")) == calls + 1  # thought once
    record, action = _as_read(engine)  # the turn's change on top of the tick's row
    assert record is not None and record.session is not None and record.session.turns
    assert action.startswith(BUSY)
    await engine.tick()
    dana = resident(store, DANA)
    assert ResidentState.of(dana).coaching[KEY] == record  # the turn's state is kept
    assert dana.action.startswith(BUSY)  # and so is its action, over the tick's


async def test_two_messages_before_any_tick_meet_the_first_ones_record(store: Store) -> None:
    brain = ScriptedBrain()
    engine = await practice_town(store, brain)
    revision = _revision(store)
    await speak(engine, "Hi Dana, I'm here for the mock interview.")
    await speak(engine, "We used a queue.")
    assert _revision(store) == revision and len(_pending_changes(store)) == 2
    first, second = brain.calls("coach_turn")[-2:]
    assert second.inputs.session == 1 and second.inputs.current_question  # mid-session
    assert not first.inputs.current_question  # (the opening)
    opened = [m.text for m in memories(store, DANA) if "came to Interview Room A" in m.text]
    assert len(opened) == 1  # the second message did not open a new session
    await engine.tick()
    kept = ResidentState.of(resident(store, DANA)).coaching[KEY]
    assert kept.session is not None and len(kept.session.turns) == 2
    assert [t.answer for t in kept.session.turns] == ["We used a queue.", ""]
    assert len(kept.answers) == 1 and _pending_changes(store) == []


async def test_a_candidate_forgotten_before_the_next_tick_leaves_no_pending_trace(
    store: Store,
) -> None:
    engine = await practice_town(store)
    user, phrase = "u-prober-8841", "my walrus named Gustavo keeps the ledger"
    await speak(engine, "Hi Dana, I'm here for the mock interview.", who="Prober", user=user)
    await speak(engine, f"We used a queue, and {phrase}.", who="Prober", user=user)
    assert traces(store, [user, phrase]) and _pending_changes(store)
    await forget(engine, "web", user)
    assert traces(store, ["Prober", user, phrase]) == []
    await engine.tick()  # the redacted change is taken in
    assert traces(store, ["Prober", user, phrase]) == [] and _pending_changes(store) == []
