"""A member the town knows well, and a search of every place it could keep them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlmodel import SQLModel, select

from tests.factories import memories
from town.store.db import Store
from town.store.models import Memory, Resident
from town.tick.engine import Engine

PHRASE = "the purple walrus dances at midnight"


def add_reflection(store: Store, resident: str, text: str, cites: list[int]) -> int:
    with store.session() as s:
        rid = s.exec(select(Resident.id).where(Resident.name == resident)).one()
        clock = memories(store, resident)[-1].created
        row = Memory(
            resident_id=rid,
            kind="reflection",
            text=text,
            created=clock,
            last_access=clock,
            importance=5,
            cites=cites,
        )
        s.add(row)
        s.flush()
        assert row.id is not None
        return row.id


def traces(store: Store, needles: list[str]) -> list[str]:
    """Every row of every table, as text, that holds one of ``needles`` (any case)."""
    found: list[str] = []
    wanted = [n.casefold() for n in needles]
    with store.engine.connect() as connection:
        for table in SQLModel.metadata.sorted_tables:
            for row in connection.execute(table.select()):
                text = json.dumps([str(v) for v in row], ensure_ascii=False).casefold()
                found += [f"{table.name}: {text}" for n in wanted if n in text]
    return found


def vector_ids_without_memories(engine: Engine, store: Store) -> list[int]:
    with store.session() as s:
        first = s.exec(select(Resident.id)).first()
        assert first is not None
        stream = engine.streams(first)
        collection = stream.town_collection(s)
        alive = set(s.exec(select(Memory.id)))
    return [int(i) for i in stream.index.ids(collection) if int(i) not in alive]


def replay_holding(path: Path, needles: list[str]) -> list[str]:
    text = path.read_text(encoding="utf-8").casefold()
    return [n for n in needles if n.casefold() in text]


def any_of(values: list[Any]) -> bool:
    return any(values)
