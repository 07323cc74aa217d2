"""The store: migrations, clear errors for bad databases, usage and budget, and PostgreSQL."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import inspect, text
from sqlmodel import select

from tests.factories import TownFactory, add_resident, add_town
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import InMemoryIndex
from town.outbox.events import TownEvent, write_outbox
from town.store.db import Store, StoreError
from town.store.models import LlmUsage, Memory, OutboxEvent, Resident, Town
from town.store.usage import DailyTokenBudget, StoredUsage

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
    "chatline",
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
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0014"


def test_an_old_database_loses_the_scheduler_job_table(tmp_path: Path) -> None:
    """Jobs live in memory now: the table APScheduler's database job store made is dropped."""
    url = f"sqlite:///{tmp_path / 'town.db'}"
    store = Store.open(url)
    with store.engine.begin() as conn:
        conn.execute(text("update alembic_version set version_num = '0005'"))
        conn.execute(text("create table apscheduler_jobs (id varchar(191) primary key)"))
    store.engine.dispose()
    store = Store.open(url)
    assert "apscheduler_jobs" not in inspect(store.engine).get_table_names()


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


def test_a_postgresql_url_without_the_postgres_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(StoreError, match=r"'psycopg'.*pip install 'bottown\[postgres\]'") as info:
        Store.open("postgresql+psycopg://u:hunter22@127.0.0.1:9/none")
    assert "hunter22" not in str(info.value)


def test_session_is_all_or_nothing(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    with pytest.raises(RuntimeError), store.session() as s:
        add_town(s, "lost", T0)
        s.add(OutboxEvent(town_id=1, channel="x", kind="said", game_time=T0, idempotency_key="k"))
        raise RuntimeError("crash mid-tick")
    with store.session() as s:
        assert s.exec(select(Town)).all() == []
        assert s.exec(select(OutboxEvent)).all() == []


def test_usage_accumulates_and_budget_runs_out(store: Store, town_factory: TownFactory) -> None:
    town_id = town_factory("t", T0).id
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
        town = add_town(s, "pg", T0)
        rid = add_resident(s, town.id or 0, "Sam Moore", persona={"age": 65}).id
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


def test_new_rows_get_ids_in_order_are_seen_at_once_and_read_back_as_written(
    any_store: Store,
) -> None:
    """Memories recorded together get ascending ids in their order and are found in the same
    unit of work; the outbox rows of a tick keep the events' order; all read back as written."""
    with any_store.session() as s:
        town = add_town(s, "rows", T0)
        res = add_resident(s, town.id or 0, "Sam Moore")
        stream = MemoryStream(
            resident_id=res.id or 0, embedder=OnesEmbedder(), index=InMemoryIndex()
        )
        items = [
            NewMemory("observation", f"memory {i} ✓", 1 + i % 10, cites=[i]) for i in range(30)
        ]
        rows = stream.add(s, items, T0)
        ids = [r.id or 0 for r in rows]
        assert ids == sorted(ids) and len(set(ids)) == 30
        found = s.exec(select(Memory).where(Memory.resident_id == res.id)).all()
        assert {m.id for m in found} == set(ids)
        events = [
            TownEvent("said", "Hobbs Cafe", T0, "Sam Moore", f"hi {i}", {"n": None})
            for i in range(3)
        ]
        write_outbox(s, town.id or 0, "t", events)
    with any_store.session() as s:
        back = {m.id: m for m in s.exec(select(Memory)).all()}
        outbox = s.exec(select(OutboxEvent).order_by(OutboxEvent.id)).all()  # type: ignore[arg-type]
    for row, item in zip(rows, items, strict=True):
        got = back[row.id]
        assert (got.text, got.importance, got.cites) == (item.text, item.importance, [*item.cites])
        assert got.created == T0 and got.last_access == T0
    assert [e.payload["text"] for e in outbox] == ["hi 0", "hi 1", "hi 2"]
    assert all(e.payload["n"] is None and e.game_time == T0 for e in outbox)


# -- two processes on one town ----------------------------------------------------------------


class _HeldBrain:
    """A scripted brain whose first call waits until ``go`` is set: a tick in mid-flight."""

    def __init__(self) -> None:
        from tests.fakes.brain import ScriptedBrain

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
    """Another process (here another engine on its own connections) whispers while a tick is
    in flight: the input completes at once (the tick holds no lock and no transaction while it
    thinks), the tick commits without thinking again, and the next tick hears the input. A
    unit that writes what a tick writes (a resident's row) and that a tick overtakes rolls back
    with ``TownChanged`` instead of writing over it."""
    from tests.town.tick.test_engine import Streams, make_engine
    from town.inputs.admin import whisper
    from town.tick.engine import Engine, TownChanged

    brain = _HeldBrain()
    brain.go.set()
    engine = await make_engine(any_store, brain)
    await engine.tick()
    other_store = Store.open(any_store.url)
    elsewhere = Engine(other_store, engine.spec, brain.inner, Streams(), engine.town_id)

    def clock() -> datetime:
        with any_store.session() as s:
            return engine.town(s).clock

    # 1. an input elsewhere commits while a tick is in flight
    before = clock()
    brain.go.clear()
    flying = asyncio.create_task(engine.tick())
    await brain.waiting.wait()
    await asyncio.to_thread(asyncio.run, whisper(elsewhere, "Klaus", "Call your mother"))
    assert not flying.done()  # (the input did not wait for the tick)
    brain.go.set()
    await flying  # and the tick commits: an input never makes it think again
    assert clock() > before
    await engine.tick()
    with any_store.session() as s:
        texts = [m.text for m in s.exec(select(Memory).where(Memory.kind == "directive"))]
    assert any("Call your mother" in t for t in texts)  # heard at the next tick

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
