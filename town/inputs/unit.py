"""One input, one unit of work: under the engine's lock (the writers of this process, held by a
tick only for its short write, never while it thinks), in one transaction, audited, and the
engine's ``after_commit`` run once it committed. Also the names an input resolves (a resident,
a place) and the one-line text it keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from town.outbox import audit
from town.store.models import Resident, Town
from town.tick.engine import Engine
from town.world.places import UnknownPlace, World


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
        """One row of the audit log, at the town's clock."""
        audit.record(
            self.session,
            self.engine.town_id,
            direction,
            kind,
            who,
            text,
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
            f"no resident named {name!r}; residents: {', '.join(sorted(residents))}"
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
        raise UnknownPlace(f"no place {location!r}; places: {', '.join(world.areas())}")
    return World.area_of(resolved)
