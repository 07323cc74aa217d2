"""One input, one unit of work: under the engine's lock (the writers of this process, held by a
tick only for its short write, never while it thinks), in one transaction, audited, and the
engine's ``after_commit`` run once it committed; an input that thinks (an LLM call) does it as a
tick does, ``think_apart``. Also the names an input resolves (a resident, a place)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlmodel import Session

from town.outbox import audit
from town.store.db import Store
from town.store.ids import blocks
from town.store.models import Resident, Town
from town.text import clean_text, echoed
from town.tick.engine import Engine
from town.world.places import UnknownPlace, World

R = TypeVar("R")
T = TypeVar("T")


class UnknownResident(LookupError):
    """No resident of that name in this town."""


@dataclass
class InputUnit:
    """The work of one input: its session, the town's row, and the audit log."""

    engine: Engine
    session: Session
    town: Town

    @property
    def clock(self) -> datetime:
        return self.town.clock

    def audit(
        self,
        direction: str,
        kind: str,
        who: str,
        text: str,
        *,
        platform: str,
        channel: str,
    ) -> None:
        """One row of the audit log, at the town's clock: ``text`` made one clean line here,
        where the input came in."""
        audit.record(
            self.session,
            self.engine.town_id,
            direction,
            kind,
            who,
            clean_text(text),
            game_time=self.town.clock,
            platform=platform,
            channel=channel,
        )

    def resident(self, name: str) -> Resident:
        """The resident ``name`` stands for (see :func:`resident_named`)."""
        return find_resident(self.engine.residents(self.session), name)


def find_resident(residents: dict[str, Resident], name: str) -> Resident:
    """The resident ``name`` stands for (see :func:`resident_named`); ``UnknownResident``."""
    full = resident_named(residents, name)
    if full is None:
        raise UnknownResident(
            f"no resident named {echoed(name)!r}; residents: {', '.join(sorted(residents))}"
        )
    return residents[full]


@asynccontextmanager
async def input_unit(engine: Engine, *, changes_town: bool = True) -> AsyncIterator[InputUnit]:
    """The unit of work of one input (see ``Engine.unit`` for ``changes_town``: only an input
    that writes what a tick writes too, a resident's state, raises the town's revision)."""
    async with engine.lock:
        with engine.unit(changes_town=changes_town) as session:
            yield InputUnit(engine, session, engine.town(session))
        if engine.after_commit:
            engine.after_commit()


async def think_apart(
    engine: Engine,
    read: Callable[[Session], R],
    think: Callable[[R], Awaitable[T]],
    write: Callable[[Session, R, T], None],
    *,
    changes_town: bool = True,
) -> T:
    """An input that thinks, as a tick does: ``read`` a snapshot in one short read, ``think``
    (its LLM calls) holding no lock, connection or transaction (``Store.thinking``: any SQL
    raises), then ``write`` in one short unit under the engine's lock (``Engine.as_input``:
    checked by the guard; if it ``changes_town``, the revision committed by then is raised, so
    the write goes on top of a tick that committed meanwhile). What ``think`` records (memories,
    with ids made in Python) waits in the session and commits with the write."""
    async with engine.lock:  # ids for what it records (a short write of its own)
        blocks(engine.store.engine).top_up()
    with engine.store.session(autoflush=False) as session:
        snapshot = read(session)
        Store.end_read(session)
        with Store.thinking(session):
            thought = await think(snapshot)
        async with engine.lock:
            engine.as_input(session, changes_town=changes_town)
            write(session, snapshot, thought)
            committed = Store.commit(session)
        committed()
    if engine.after_commit:
        engine.after_commit()
    return thought


def resident_named(names: Iterable[str], name: str) -> str | None:
    """The full name among ``names`` that ``name`` stands for: the same name in any case and
    spacing, else a first name ("isabella" for Isabella Rodriguez); None if none does."""
    wanted = " ".join(name.split()).casefold()
    if not wanted:
        return None
    known = list(names)
    for full in known:
        if full.casefold() == wanted:
            return full
    return next((full for full in known if full.partition(" ")[0].casefold() == wanted), None)


def area_named(world: World, location: str) -> str:
    """The area ``location`` is in; ``UnknownPlace`` if it is no place of the town."""
    resolved = world.resolve(location, "")
    if not resolved:
        raise UnknownPlace(f"no place {echoed(location)!r}; places: {', '.join(world.areas())}")
    return World.area_of(resolved)
