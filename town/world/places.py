"""The world: the location tree of a town, its objects' states, opening hours and room sizes.

Places are paths: ``"Hobbs Cafe"`` (an area, which becomes a chat channel) or ``"Hobbs Cafe:
kitchen"`` (a sub-area, where a resident actually is). Objects live in sub-areas and have a state
in words (``stove: off``). The tree comes from the town's persona data; object states live in the
store, since residents and users change them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from town.store.models import WorldObject
from town.text import echoed
from town.world.persona import SEPARATOR, TownSpec, split_path


def _area_of(path: str) -> str:
    return split_path(path)[0]


class UnknownPlace(LookupError):
    """A place or object that is not in this town."""


@dataclass
class World:
    spec: TownSpec
    town_id: int
    states: dict[tuple[str, str], str] = field(default_factory=dict)  # (sub-area, object) -> state
    usual: dict[tuple[str, str], str] = field(default_factory=dict)  # the states a town starts with
    # area -> (sub-area, object, state), sorted; built on first use, kept by ``set_state``
    _by_area: dict[str, list[tuple[str, str, str]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.usual:
            self.usual = {(place, obj.name): obj.state for place, obj in self.spec.objects()}

    @classmethod
    def load(cls, session: Session, town_id: int, spec: TownSpec) -> World:
        rows = session.execute(
            sa_select(
                col(WorldObject.location), col(WorldObject.name), col(WorldObject.state)
            ).where(col(WorldObject.town_id) == town_id)
        ).all()
        return cls(spec, town_id, {(place, name): state for place, name, state in rows})

    @staticmethod
    def area_of(path: str) -> str:
        return _area_of(path)

    def areas(self) -> list[str]:
        return [a.name for a in self.spec.areas]

    def sub_areas(self, area: str) -> list[str]:
        found = self.spec.area(area)
        return [f"{found.name}{SEPARATOR}{sub.name}" for sub in found.sub_areas]

    def places(self, known_areas: Iterable[str]) -> list[str]:
        """Every sub-area of the areas a resident knows, as paths for its prompts."""
        out: list[str] = []
        for area in known_areas:
            try:
                out += self.sub_areas(area)
            except KeyError:
                continue
        return out

    def resolve(self, location: str, fallback: str) -> str:
        """The sub-area a free-text location names; an area alone gives its first sub-area."""
        parts = [p.casefold() for p in split_path(location)] if location.strip() else []
        if not parts:
            return fallback
        for area in self.spec.areas:
            if area.name.casefold() != parts[0]:
                continue
            if len(parts) > 1:
                for sub in area.sub_areas:
                    if sub.name.casefold() == parts[1]:
                        return f"{area.name}{SEPARATOR}{sub.name}"
            return (
                f"{area.name}{SEPARATOR}{area.sub_areas[0].name}" if area.sub_areas else area.name
            )
        return fallback

    def objects_in(self, area: str) -> list[tuple[str, str, str]]:
        """(sub-area path, object name, state) for every object in an area."""
        if self._by_area is None:
            found: dict[str, list[tuple[str, str, str]]] = {}
            for (place, name), state in sorted(self.states.items()):
                found.setdefault(place.split(SEPARATOR, 1)[0], []).append((place, name, state))
            self._by_area = found
        return list(self._by_area.get(area, ()))

    def find_object(self, path: str) -> tuple[str, str]:
        """``"Area: sub-area: object"`` -> (sub-area path, object name), matched without case."""
        parts = split_path(path)
        if len(parts) < 3:
            raise UnknownPlace(f"{echoed(path)!r}: name an object as 'Area: sub-area: object'")
        place, name = SEPARATOR.join(parts[:-1]).casefold(), parts[-1].casefold()
        for sub_path, obj in self.states:
            if sub_path.casefold() == place and obj.casefold() == name:
                return sub_path, obj
        near = [f"{p}{SEPARATOR}{o}" for p, o in self.states if p.casefold() == place]
        hint = f"; objects there: {', '.join(near)}" if near else ""
        raise UnknownPlace(f"no object {echoed(path)!r} in this town{hint}")

    def set_state(self, session: Session, sub_path: str, name: str, state: str) -> None:
        self.note_state(sub_path, name, state)
        self.write_state(session, sub_path, name, state)

    def note_state(self, sub_path: str, name: str, state: str) -> None:
        """The object's new state, in this world only (a tick writes it at its commit)."""
        self.states[(sub_path, name)] = state[:500]
        self._by_area = None

    def write_state(self, session: Session, sub_path: str, name: str, state: str) -> None:
        """The object's state, into the store (its row alone)."""
        row = session.exec(
            select(WorldObject).where(
                WorldObject.town_id == self.town_id,
                WorldObject.location == sub_path,
                WorldObject.name == name,
            )
        ).one()
        row.state = state[:500]
        session.add(row)

    def is_open(self, area: str, at: datetime) -> bool:
        try:
            return self.spec.area(area).is_open(at.time())
        except KeyError:
            return True

    def capacity(self, path: str) -> int | None:
        parts = split_path(path)
        if len(parts) < 2:
            return None
        try:
            return self.spec.area(parts[0]).sub_area(parts[1]).capacity
        except KeyError:
            return None

    def rules(self, area: str) -> list[str]:
        try:
            return list(self.spec.area(area).rules)
        except KeyError:
            return []
