"""The store: migrations, clear errors for bad databases, usage and budget, and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, inspect, text
from sqlmodel import Session, select

from town.memory import MemoryStream, NewMemory
from town.store.db import Store, StoreError, insert_rows, insert_values, new_row
from town.store.models import LlmUsage, Memory, OutboxEvent, Resident, Town
from town.store.usage import DailyTokenBudget, StoredUsage
from town.vectors import InMemoryIndex

pytest_plugins = ["tests.servers"]  # postgres_url: a fresh database on a real server

T0 = datetime(2023, 2, 13, 7, tzinfo=UTC)
TABLES = {
    "town",
    "resident",
    "memory",
    "planitem",
    "location",
    "worldobject",
    "auditentry",
    "townlease",
    "worker",
    "visitor",
    "conversation",
    "outboxevent",
    "llmusage",
    "channellink",
    "delivery",
    "alembic_version",
}


class OnesEmbedder:
    name, dim = "ones", 4

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % 4] = 1.0
        return out


def test_migrations_create_every_table_and_are_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'town.db'}"
    store = Store.open(url)
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    Store.open(url)  # a second start finds the schema current and changes nothing
    with store.engine.connect() as conn:
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0005"


def test_a_replanning_finds_stale_plan_items_by_index(tmp_path: Path) -> None:
    """Deleting plan items by parent (and SQLite's check for items under a deleted one) reads
    the index, not every plan item the town ever made."""
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    with store.engine.connect() as conn:
        plan = conn.execute(
            text("explain query plan delete from planitem where parent_id in (1, 2)")
        ).all()
    assert any("ix_planitem_parent_id" in str(row[-1]) for row in plan), plan


def test_corrupt_database_gets_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "town.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="corrupt or not a bottown database"):
        Store.open(f"sqlite:///{bad}")
    assert bad.read_bytes().startswith(b"this is not")  # nothing was overwritten


def test_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'town.db'}"
    store = Store.open(url)
    with store.engine.begin() as conn:
        conn.execute(text("update alembic_version set version_num = '9999'"))
    with pytest.raises(StoreError, match="newer bottown"):
        Store.open(url)


def test_unreachable_server_gets_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot open the database"):
        Store.open("postgresql+psycopg://u:secret@127.0.0.1:9/none?connect_timeout=2")


def test_password_is_never_in_the_error() -> None:
    with pytest.raises(StoreError) as info:
        Store.open("postgresql+psycopg://u:hunter22@127.0.0.1:9/none?connect_timeout=2")
    assert "hunter22" not in str(info.value)


def test_session_is_all_or_nothing(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    with pytest.raises(RuntimeError), store.session() as s:
        s.add(Town(name="lost", clock=T0))
        s.flush()
        s.add(OutboxEvent(town_id=1, channel="x", kind="said", game_time=T0, idempotency_key="k"))
        raise RuntimeError("crash mid-tick")
    with store.session() as s:
        assert s.exec(select(Town)).all() == []
        assert s.exec(select(OutboxEvent)).all() == []


def test_usage_accumulates_and_budget_runs_out(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    with store.session() as s:
        town = Town(name="t", clock=T0)
        s.add(town)
        s.flush()
        assert town.id is not None
        town_id = town.id
    day = date(2026, 11, 21)
    usage = StoredUsage(store, town_id, today=lambda: day)
    budget = DailyTokenBudget(usage, limit_tokens=1000)
    usage.record("react", "Isabella", 1, 300, 100, False)
    usage.record("react", "Isabella", 1, 300, 100, True)
    usage.record("plan_day", None, 1, 50, 50, False)
    assert usage.by_task_today() == {"react": (2, 800), "plan_day": (1, 100)}
    assert budget.left() == 100 and not budget.exhausted()
    usage.record("utter", "Klaus", 1, 60, 40, False)
    assert budget.exhausted() and budget.left() == 0
    assert not DailyTokenBudget(usage, 0).exhausted()
    usage.flush()  # written once, in one transaction, and still counted the same
    with store.session() as s:
        assert sum(r.calls for r in s.exec(select(LlmUsage)).all()) == 4
    assert usage.by_task_today() == {"react": (2, 800), "plan_day": (1, 100), "utter": (1, 100)}
    usage.flush()  # nothing pending: no change
    later = StoredUsage(store, town_id, today=lambda: date(2026, 11, 22))
    assert later.tokens_today() == 0  # a new day, a new budget


# -- PostgreSQL -------------------------------------------------------------------------------


def test_postgresql_migrates_and_keeps_memories(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    with store.session() as s:
        town = Town(name="pg", clock=T0)
        s.add(town)
        s.flush()
        assert town.id is not None
        res = Resident(town_id=town.id, name="Sam Moore", persona={"age": 65})
        s.add(res)
        s.flush()
        assert res.id is not None
        rid = res.id
    stream = MemoryStream(resident_id=rid, embedder=OnesEmbedder(), index=InMemoryIndex())
    with store.session() as s:
        stream.add(
            s,
            [
                NewMemory("observation", "running for mayor\x00!", 8),
                NewMemory("reflection", "Sam wants to lead", 6, cites=[1]),
            ],
            T0,
        )
    with store.session() as s:
        rows = s.exec(select(Memory).order_by(Memory.id)).all()  # type: ignore[arg-type]
        got = stream.retrieve(s, "mayor", T0, k=2)
    assert [m.text for m in rows] == ["running for mayor!", "Sam wants to lead"]
    assert rows[1].cites == [1] and rows[0].created == T0
    assert len(got) == 2
    Store.open(postgres_url)  # idempotent on PostgreSQL too


# -- inserting rows without the unit of work ---------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    return Store.open(request.getfixturevalue("postgres_url"))


def town_and_resident(s: Session, town_name: str, name: str) -> tuple[Town, Resident]:
    town = Town(name=town_name, clock=T0)
    s.add(town)
    s.flush()
    res = Resident(town_id=town.id or 0, name=name)
    s.add(res)
    s.flush()
    return town, res


def test_inserted_rows_are_stored_as_the_orm_stores_them(any_store: Store) -> None:
    """``insert_rows`` and ``insert_values`` (on SQLite straight to the driver) store exactly
    what adding the objects to the session would, and hand back the ids in the rows' order,
    over several statements too."""

    def memory(resident_id: int, i: int) -> Memory:
        return Memory(
            resident_id=resident_id,
            kind="observation",
            text=f"memory {i} ✓",
            created=T0,
            last_access=datetime(2023, 2, 13, 7, 30, 15, 250, tzinfo=UTC),
            importance=1 + i % 10,
            cites=[i, i + 1] if i % 2 else [],
        )

    with any_store.session() as s:
        town, res = town_and_resident(s, "rows", "Sam Moore")
        by_orm = memory(res.id or 0, 0)
        s.add(by_orm)  # pending: inserting rows flushes it first (they may refer to it)
        rows = [memory(res.id or 0, i) for i in range(300)]  # past 999 variables a statement
        insert_rows(s, rows)
        outbox_ids = insert_values(
            s,
            OutboxEvent,
            [
                {
                    "town_id": town.id,
                    "channel": "Hobbs Cafe",
                    "kind": "said",
                    "payload": {"text": f"hi {i}", "n": None},
                    "game_time": T0,
                    "idempotency_key": f"k{i}",
                    "created_at": T0,
                    "delivered_at": None,
                }
                for i in range(3)
            ],
        )
    assert by_orm.id is not None
    assert [r.id for r in rows] == list(range(by_orm.id + 1, by_orm.id + 301))
    with any_store.engine.connect() as conn:  # each column as the driver holds it
        raw = {
            r[0]: r[1:]
            for r in conn.exec_driver_sql(
                "SELECT id, resident_id, kind, text, created, last_access, importance, cites "
                "FROM memory"
            )
        }
    assert raw[rows[0].id] == raw[by_orm.id]
    with any_store.session() as s:
        back = {m.id: m for m in s.exec(select(Memory)).all()}
        events = s.exec(select(OutboxEvent).order_by(OutboxEvent.id)).all()  # type: ignore[arg-type]
    for row in rows:
        got = back[row.id]
        assert (got.text, got.importance, got.cites) == (row.text, row.importance, row.cites)
        assert got.created == T0 and got.last_access == row.last_access
    assert [e.id for e in events] == outbox_ids
    assert [e.payload for e in events] == [{"text": f"hi {i}", "n": None} for i in range(3)]
    assert all(e.delivered_at is None and e.game_time == T0 for e in events)


def test_a_row_built_without_attribute_events_is_stored_as_the_constructors(
    any_store: Store,
) -> None:
    with any_store.session() as s:
        _, res = town_and_resident(s, "built", "Tom Moreno")
        values = {
            "resident_id": res.id,
            "kind": "plan",
            "text": "Tom plans to open the store ✓",
            "created": T0,
            "last_access": T0,
            "importance": 5,
        }
        built, constructed = new_row(Memory, **values), Memory(**values)
        assert built.model_dump() == constructed.model_dump()  # defaults too (id, cites)
        assert built.cites is not new_row(Memory, **values).cites  # a new list each
        insert_rows(s, [built, constructed])
    with pytest.raises(TypeError, match=r"missing \['importance'\]"):
        new_row(Memory, **{k: v for k, v in values.items() if k != "importance"})
    with pytest.raises(TypeError, match=r"unknown \['colour'\]"):
        new_row(Memory, **values, colour="red")
    with any_store.engine.connect() as conn:
        first, second = conn.exec_driver_sql(
            "SELECT resident_id, kind, text, created, last_access, importance, cites "
            "FROM memory ORDER BY id"
        ).all()
    assert first == second


# -- two processes on one town ----------------------------------------------------------------


class _HeldBrain:
    """A scripted brain whose first call waits until ``go`` is set: a tick in mid-flight."""

    def __init__(self) -> None:
        from town.llm.port import ScriptedBrain

        self.inner = ScriptedBrain()
        self.name = self.inner.name
        self.waiting = asyncio.Event()
        self.go = asyncio.Event()

    async def run(self, task: Any, inputs: Any, *, resident: str | None = None) -> Any:
        if not self.go.is_set():
            self.waiting.set()
            await self.go.wait()
        return await self.inner.run(task, inputs, resident=resident)


async def test_an_input_from_another_process_is_never_written_over(any_store: Store) -> None:
    """Another process (here another engine on its own connections) changes the town while a
    tick is in flight, or ticks it while an input is under way: whichever commits second rolls
    back with ``TownChanged`` instead of writing over the first, and the next tick reads what
    the other wrote. On PostgreSQL nothing else would stop it; SQLite makes the second wait."""
    from tests.test_engine import Streams, make_engine
    from town.engine import Engine, TownChanged
    from town.inputs import whisper

    brain = _HeldBrain()
    brain.go.set()
    engine = await make_engine(any_store, brain)
    await engine.tick()
    other_store = Store.open(any_store.url)
    elsewhere = Engine(other_store, engine.spec, brain.inner, Streams(), engine.town_id)

    def clock() -> datetime:
        with any_store.session() as s:
            return engine.town(s).clock

    # 1. an input elsewhere commits while a tick is in flight (PostgreSQL: SQLite would make
    # the input wait for the tick's write lock)
    if not any_store.is_sqlite:
        before = clock()
        brain.go.clear()
        flying = asyncio.create_task(engine.tick())
        await brain.waiting.wait()
        await asyncio.to_thread(asyncio.run, whisper(elsewhere, "Klaus", "Call your mother"))
        brain.go.set()
        with pytest.raises(TownChanged):
            await flying
        assert clock() == before  # the tick rolled back whole
        await engine.tick()
        assert clock() > before  # the next tick went ahead
        with any_store.session() as s:
            texts = [m.text for m in s.exec(select(Memory).where(Memory.kind == "directive"))]
        assert any("Call your mother" in t for t in texts)

    # 2. a tick commits while an input elsewhere is under way: the input rolls back
    with pytest.raises(TownChanged, match="changed by another process"), elsewhere.unit() as s:
        klaus = s.exec(select(Resident).where(Resident.name == "Klaus Mueller")).one()
        klaus.action = "written over the tick"
        await engine.tick()
    with any_store.session() as s:
        klaus = s.exec(select(Resident).where(Resident.name == "Klaus Mueller")).one()
    assert klaus.action != "written over the tick"
    await engine.tick()  # and ticking goes on
    other_store.dispose()


def test_the_sqlite_log_is_checkpointed_beside_the_commits(tmp_path: Path) -> None:
    """A commit never checkpoints SQLite's write-ahead log (a checkpoint waits for the disk, on
    the event loop for a tick's commit); a thread of the store's does, soon after commits."""
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    seen: list[tuple[str, str]] = []

    def spy(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append((threading.current_thread().name, statement))

    event.listen(store.engine, "before_cursor_execute", spy)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    for i in range(30):
        with store.session() as s:
            s.add(Town(name=f"town {i}", clock=T0))
    deadline = time.monotonic() + 10
    while ("bottown-wal-checkpoint", "PRAGMA wal_checkpoint(PASSIVE)") not in seen:
        assert time.monotonic() < deadline, "no checkpoint within 10 s of the commits"
        time.sleep(0.05)
    checkpoints = [name for name, sql in seen if "wal_checkpoint" in sql]
    assert set(checkpoints) == {"bottown-wal-checkpoint"}
    assert len(checkpoints) < 30  # at most one a second, not one a commit
    thread = store._checkpoints._thread if store._checkpoints else None
    store.dispose()
    assert thread is not None and not thread.is_alive()
    with store.session() as s:  # the file holds it all
        assert len(s.exec(select(Town)).all()) == 30
