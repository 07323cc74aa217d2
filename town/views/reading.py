"""One short read of the town, without the engine's lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlmodel import Session

from town.inputs.unit import find_resident
from town.store.models import Resident, Town
from town.tick.engine import Engine


@dataclass
class Reading:
    """A read of the town: its session, the town's row and its residents' rows."""

    engine: Engine
    session: Session
    town: Town

    def residents(self) -> dict[str, Resident]:
        return self.engine.residents(self.session)

    def resident(self, name: str) -> Resident:
        """The resident ``name`` stands for (a first name will do); ``UnknownResident``."""
        return find_resident(self.residents(), name)


@contextmanager
def reading(engine: Engine) -> Iterator[Reading]:
    """Committed state, read in one short transaction; nothing is written (and no lock is
    taken: reads never wait for a tick)."""
    with engine.store.session() as session:
        yield Reading(engine, session, engine.town(session))
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("a view wrote to the town")
