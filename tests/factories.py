"""Test towns and residents: the three-resident town of tests/data/minitown founded with a
scripted brain, bare town and resident rows, and the engine helpers the scenarios tick with."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town
from tests.fakes.brain import ScriptedBrain
from town.llm.embedders import HashEmbedder
from town.memory.stream import MemoryStream
from town.memory.vectors import ChromaIndex, InMemoryIndex
from town.outbox.events import TownEvent, write_outbox
from town.store.db import Store
from town.store.models import Memory, Resident, Town
from town.tick.engine import Engine, TickReport
from town.tick.seed import found_town
from town.world.load import load_town

MINITOWN = Path(__file__).parent / "data" / "minitown"
CAFE_PAIR = ("Isabella Rodriguez", "Klaus Mueller")  # up and at Hobbs Cafe by 07:30
T0 = datetime(2023, 2, 13, 9, tzinfo=UTC)

TownFactory = Callable[..., Town]  # the town_factory fixture
ResidentFactory = Callable[..., Resident]  # the resident_factory fixture


class Streams:
    """Memory streams on one in-memory index with a hash embedder, one per resident."""

    def __init__(self, executor: Executor | None = None) -> None:
        self.index = InMemoryIndex()
        self.embedder = HashEmbedder(64)
        self.cache: dict[int, MemoryStream] = {}
        self.executor = executor

    def __call__(self, resident_id: int) -> MemoryStream:
        if resident_id not in self.cache:
            self.cache[resident_id] = MemoryStream(
                resident_id=resident_id,
                embedder=self.embedder,
                index=self.index,
                executor=self.executor,
            )
        return self.cache[resident_id]


# -- towns founded from a persona folder ---------------------------------------------------------


async def make_engine(
    store: Store,
    brain: Any = None,
    streams: Streams | None = None,
    *,
    persona: str | Path = MINITOWN,
    name: str = "mini",
) -> Engine:
    """A town founded from ``persona`` (the three-resident town unless told) and its engine; a
    ScriptedBrain unless given one."""
    spec = load_town(persona)
    brain = brain or ScriptedBrain()
    streams = streams or Streams()
    town = await found_town(store, spec, name, brain, streams, persona=str(persona))
    assert town.id is not None
    return Engine(store, spec, brain, streams, town.id)


async def open_runtime(
    settings: Settings, name: str = "mini", kind: type[TownRuntime] = TownRuntime
) -> TownRuntime:
    """The three-resident town as the adapters see it; nothing ticks unless the test ticks
    ``runtime.opened.engine``. Close it with ``runtime.opened.services.close()``."""
    ChromaIndex.release_all()
    opened = await open_town(settings, name, persona=str(MINITOWN), create=True)
    return kind(opened, settings)


def resident(store: Store, name: str) -> Resident:
    with store.session() as s:
        return s.exec(select(Resident).where(Resident.name == name)).one()


def memories(store: Store, name: str) -> list[Memory]:
    rid = resident(store, name).id
    with store.session() as s:
        return list(s.exec(select(Memory).where(Memory.resident_id == rid)).all())


async def ticks(engine: Engine, n: int) -> list[TickReport]:
    return [await engine.tick() for _ in range(n)]


async def until(engine: Engine, done: Callable[[], bool], limit: int = 30) -> list[TickReport]:
    """Tick until ``done()`` holds (at most ``limit`` ticks); the reports of those ticks."""
    reports = []
    while not done():
        assert len(reports) < limit, "the town never got there"
        reports.append(await engine.tick())
    return reports


def at_cafe(store: Store, *names: str) -> Callable[[], bool]:
    return lambda: all(resident(store, n).location.startswith("Hobbs Cafe") for n in names)


# -- bare rows ----------------------------------------------------------------------------------


def add_town(s: Session, name: str = "t", clock: datetime = T0) -> Town:
    """A town row without places or residents, flushed: it has its id."""
    town = Town(name=name, clock=clock)
    s.add(town)
    s.flush()
    assert town.id is not None
    return town


def resident_row(name: str, town_id: int = 1, **fields: Any) -> Resident:
    """A resident row, not stored."""
    return Resident(town_id=town_id, name=name, **fields)


def add_resident(s: Session, town_id: int, name: str, **fields: Any) -> Resident:
    """A resident row, flushed: it has its id."""
    row = resident_row(name, town_id, **fields)
    s.add(row)
    s.flush()
    assert row.id is not None
    return row


def town_with_residents(store: Store, *names: str) -> list[int]:
    """The ids of ``names``, residents of one new town."""
    with store.session() as s:
        town = add_town(s, f"t{len(s.exec(select(Town)).all())}")
        return [add_resident(s, town.id or 0, name).id or 0 for name in names]


def lone_resident(store: Store, name: str = "Isabella Rodriguez") -> int:
    """The id of a resident of a new town of its own."""
    (rid,) = town_with_residents(store, name)
    return rid


def town_with_events(store: Store, events: list[tuple[str, str, str]], tick: str = "t1") -> int:
    """A town whose outbox holds ``(kind, channel, text)`` events said by Isabella."""
    with store.session() as s:
        town = add_town(s, f"t-{tick}", T0)
        assert town.id is not None
        rows = [
            TownEvent(kind, channel, T0 + timedelta(minutes=i), "Isabella", text, {"emoji": "☕"})
            for i, (kind, channel, text) in enumerate(events)
        ]
        write_outbox(s, town.id, tick, rows)
        return town.id
