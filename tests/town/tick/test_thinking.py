"""A tick thinks with nothing held: reads and inputs made meanwhile never wait for it, it never
thinks again because they met it, and it never touches the store while it thinks."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from sqlmodel import select

from tests.factories import add_town, make_engine, resident, ticks
from tests.fakes.brain import ScriptedBrain
from town.inputs.admin import set_object, set_paused, set_speed, whisper
from town.inputs.query import interview
from town.llm.task import Task
from town.store.db import QueryWhileThinking, Store
from town.store.ids import blocks, new_ids
from town.store.models import AuditEntry, Memory, PendingInput, Town, WorldObject
from town.tick.engine import COMMITTED, THINKING, WRITING, Engine
from town.views.card import resident_card, town_map
from town.views.places import look, whereabouts

DEADLOCK_GUARD_S = 120  # (a read that waited for the gated tick would wait for ever)


class GatedBrain(ScriptedBrain):
    """A scripted brain whose calls wait while ``gate`` is closed, saying when one does: a tick
    stuck inside an LLM call for as long as the test likes."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_call = asyncio.Event()

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if not self.gate.is_set() and task.name != "interview":  # (a person waits for that)
            self.in_call.set()
            await self.gate.wait()
        return await super().run(task, inputs, resident=resident)


async def _stuck_tick(engine: Engine, brain: GatedBrain) -> asyncio.Task[Any]:
    """A tick started and held inside its first LLM call."""
    brain.gate.clear()
    brain.in_call.clear()
    flying = asyncio.create_task(engine.tick())
    await brain.in_call.wait()
    return flying


def _calls(brain: ScriptedBrain, since: int) -> Counter[tuple[str, str | None]]:
    return Counter((c.task, c.resident) for c in brain.history[since:])


async def test_reads_and_inputs_never_wait_for_a_thinking_tick(store: Store) -> None:
    brain = GatedBrain()
    engine = await make_engine(store, brain)
    await ticks(engine, 3)  # (up and planning: a tick with LLM calls to make)
    since = len(brain.history)
    flying = await _stuck_tick(engine, brain)
    assert engine.store.engine.pool.checkedout() == 0  # no connection, so no transaction

    async def meanwhile() -> None:
        seen = await town_map(engine)
        assert {p.name for p in seen.residents} >= {"Klaus Mueller"}
        assert (await resident_card(engine, "Klaus")).who.name == "Klaus Mueller"
        assert (await whereabouts(engine)).by_area
        assert "Hobbs Cafe" in await look(engine, "Hobbs Cafe")
        await whisper(engine, "Klaus", "Remember to call your sister")
        await set_object(engine, "Hobbs Cafe: kitchen: stove", "gleaming")
        await set_speed(engine, 10)

    await asyncio.wait_for(meanwhile(), DEADLOCK_GUARD_S)
    assert not flying.done()  # every read and input above completed while the tick thought
    pausing = asyncio.create_task(set_paused(engine, True))
    await asyncio.sleep(0)  # (it runs up to its wait for the tick in flight)
    assert _paused(store) and not pausing.done()  # written at once, answered after the tick
    brain.gate.set()
    report = await flying  # and the tick commits: met by inputs, it never thinks again
    assert await pausing == report.clock  # the time the clock stopped
    assert (await engine.tick()).skipped
    await set_paused(engine, False)
    assert all(n == 1 for n in _calls(brain, since).values())
    with store.session() as s:
        pending = [p.text for p in s.exec(select(PendingInput)).all()]
        stove = s.exec(select(WorldObject).where(WorldObject.name == "stove")).one()
    assert pending == ["Remember to call your sister"]  # for the next tick to take in
    assert stove.state == "gleaming"  # the tick wrote nothing over it
    await engine.tick()
    with store.session() as s:
        assert s.exec(select(PendingInput)).all() == []
    directives = [m.text for m in _memories(store, "Klaus Mueller") if m.kind == "directive"]
    assert any("call your sister" in text for text in directives)


async def test_an_interview_answers_while_a_tick_thinks_and_writes_only_its_audit_rows(
    store: Store,
) -> None:
    brain = GatedBrain()
    engine = await make_engine(store, brain)
    await ticks(engine, 3)
    with store.session() as s:
        revision = engine.town(s).revision
        accessed = {m.id: m.last_access for m in s.exec(select(Memory)).all()}
    await interview(engine, "Klaus", "What are you working on?")  # (no tick in flight)
    flying = await _stuck_tick(engine, brain)
    answer = await asyncio.wait_for(interview(engine, "Klaus", "And today?"), DEADLOCK_GUARD_S)
    assert answer and not flying.done()
    with store.session() as s:
        kinds = [a.kind for a in s.exec(select(AuditEntry)).all()]
        assert {m.id: m.last_access for m in s.exec(select(Memory)).all()} == accessed
        assert engine.town(s).revision == revision
    assert kinds.count("interview") == 2 and kinds.count("answer") == 2
    brain.gate.set()
    await flying


async def test_a_tick_tells_its_phases_as_it_goes(store: Store) -> None:
    brain = GatedBrain()
    engine = await make_engine(store, brain)
    await ticks(engine, 3)
    told: list[tuple[str, object]] = []
    engine.watchers.append(lambda phase, clock: told.append((phase, clock)))
    flying = await _stuck_tick(engine, brain)
    assert engine.phase == THINKING and [phase for phase, _ in told] == [THINKING]
    brain.gate.set()
    report = await flying
    assert told == [(THINKING, report.clock), (WRITING, report.clock), (COMMITTED, report.clock)]
    assert engine.phase == ""  # between ticks


def _paused(store: Store) -> bool:
    with store.session() as s:
        return bool(s.exec(select(Town)).one().paused)


def _memories(store: Store, name: str) -> list[Memory]:
    rid = resident(store, name).id
    with store.session() as s:
        return list(s.exec(select(Memory).where(Memory.resident_id == rid)).all())


def test_a_session_that_thinks_refuses_to_touch_the_store(store: Store) -> None:
    with store.session() as session:
        session.get(Town, 1)
        Store.end_read(session)
        with Store.thinking(session), pytest.raises(QueryWhileThinking):
            session.exec(select(Town)).all()


def test_new_ids_are_never_taken_twice_across_processes(store: Store) -> None:
    """Two processes (two stores on one file) take memory ids from blocks: never the same id,
    and never one a row written without them already has."""
    other = Store.open(store.url)
    try:
        with store.session() as s:  # a row written before the counter knew of it
            add_town(s)
            s.connection().exec_driver_sql(
                "INSERT INTO conversation (id, town_id, location, participants, turns, started)"
                " VALUES (5000, 1, 'Hobbs Cafe', '[]', '[]', '2023-02-13 09:00:00')"
            )
        taken = blocks(store.engine).take("memory", 3) + blocks(other.engine).take("memory", 3)
        with other.session() as s:  # a unit of work takes its own, in its transaction
            taken += new_ids(s, "memory", 2)
        taken += blocks(store.engine).take("memory", 600)  # past its first block
        assert len(taken) == len(set(taken))
        assert min(blocks(other.engine).take("conversation", 1)) > 5000
    finally:
        other.dispose()
