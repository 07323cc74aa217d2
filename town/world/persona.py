"""The town as data: a location tree, its residents and a scenario (``town.world.load``
reads and checks them from TOML).

A town is a folder, `personas/<name>/`, holding three files:

- `town.toml`: the areas (one chat channel each, later), their sub-areas and the objects in them,
  each object with a state in words; opening hours, capacities and free-text rules;
- `residents.toml`: who lives there, each seeded by one paragraph whose semicolon-separated phrases
  become the first memories, and optionally a `private` paragraph of the same form: feelings and
  secrets, remembered as private memories (never volunteered to anyone but the person a phrase
  names or a close friend, see ``ResidentSpec.may_confide``);
- `scenario.toml`: the start time, the tick length, the facts that single residents know at the
  start (with the question that later checks how far each spread) and timed events.

A feature may read a file of its own from the folder (the mock interview's `interviews.toml`,
``town.features.coaching.interviews``).

Places are written as paths joined by ": " (`"Hobbs Cafe: kitchen: stove"`), so names never
contain a colon.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

SEPARATOR = ": "
MOVED_AWAY = "(moved away)"
"""The location of a resident who left the town (``bottown town update``): its row and memories
are kept, but it is no longer one of the town's residents."""
TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE = "town.toml", "residents.toml", "scenario.toml"
MIN_SEED_PHRASES = 3
# Words of a seed phrase that make the person it names a close friend (see ``close_friends``).
CLOSE_TIES = re.compile(
    r"\b(?:close friends?|best friends?|married|wife|husband|partner|son|daughter|mother|father"
    r"|sister|brother)\b",
    re.IGNORECASE,
)


class PersonaError(ValueError):
    """A town folder that cannot be used; `problems` lists every `file: field path: reason`."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        lines = [f"{source}: {count} problem{'' if count == 1 else 's'}"]
        super().__init__("\n".join([*lines, *(f"  {problem}" for problem in self.problems)]))


# -- Field types ---------------------------------------------------------------------------------


def _squash(value: str) -> str:
    return " ".join(value.split())


def _text(value: str) -> str:
    value = _squash(value)
    if not value:
        raise ValueError("must not be empty")
    return value


def _name(value: str) -> str:
    value = _text(value)
    if ":" in value:
        raise ValueError(f"{value!r} contains ':', which separates the parts of a place path")
    return value


def _clock(value: str) -> str:
    match = re.fullmatch(r"(\d\d):(\d\d)", value)
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f"{value!r} is not a valid time (HH:MM, from 00:00 to 23:59)")
    return value


def _game_time(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = datetime.strptime(value.strip(), "%Y-%m-%d %H:%M")
        except ValueError:
            try:  # as a stored spec has it (``TownSpec.model_dump(mode="json")``)
                value = datetime.fromisoformat(value.strip())
            except ValueError:
                message = f"{value!r} is not a date and time like '2023-02-13 07:00'"
                raise ValueError(message) from None
    if isinstance(value, datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def _one_phrase(value: str) -> str:
    if ";" in value:
        raise ValueError("must be one phrase (';' would split it into several memories)")
    return value


def _enough_phrases(value: str) -> str:
    count = len(split_phrases(value))
    if count < MIN_SEED_PHRASES:
        raise ValueError(
            f"has {count} seed phrase(s); at least {MIN_SEED_PHRASES} are needed, separated by ';'"
        )
    return value


Text = Annotated[str, AfterValidator(_text)]
MaybeText = Annotated[str, AfterValidator(_squash)]
Name = Annotated[str, AfterValidator(_name)]
ClockTime = Annotated[str, AfterValidator(_clock)]
Slug = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


def split_path(path: str) -> list[str]:
    """`"Hobbs Cafe: kitchen"` -> `["Hobbs Cafe", "kitchen"]`."""
    return [" ".join(part.split()) for part in path.split(":")]


def split_phrases(paragraph: str) -> list[str]:
    """A seed paragraph's phrases: split on semicolons, whitespace collapsed, empties dropped."""
    return [phrase for part in paragraph.split(";") if (phrase := " ".join(part.split()))]


def clock_time(value: str) -> time:
    """`"17:30"` -> `time(17, 30)`."""
    hours, minutes = _clock(value).split(":")
    return time(int(hours), int(minutes))


# -- The models ----------------------------------------------------------------------------------


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class WorldObjectSpec(Spec):
    name: Name
    state: Text


def _objects_from_table(value: Any) -> Any:
    """`objects = { stove = "off" }` in TOML means `[{ name = "stove", state = "off" }]`."""
    if isinstance(value, dict):
        return [{"name": name, "state": state} for name, state in value.items()]
    return value


class SubArea(Spec):
    name: Name
    capacity: int | None = Field(default=None, ge=1)
    objects: Annotated[list[WorldObjectSpec], BeforeValidator(_objects_from_table)] = []


class MapBox(Spec):
    """Where an area is drawn on the town's map, in grid cells: `map = { x = 0, y = 0, w = 3,
    h = 2 }`. Areas without one are laid out automatically."""

    x: int = Field(ge=0, le=200)
    y: int = Field(ge=0, le=200)
    w: int = Field(default=1, ge=1, le=50)
    h: int = Field(default=1, ge=1, le=50)


class Area(Spec):
    name: Name
    description: MaybeText = ""
    map: MapBox | None = None
    opens: ClockTime | None = None
    closes: ClockTime | None = None
    rules: list[Text] = []
    sub_areas: list[SubArea] = Field(min_length=1)

    def sub_area(self, name: str) -> SubArea:
        return _find(self.sub_areas, name, "sub-area")

    def is_open(self, at: time) -> bool:
        """Open at `at`? Areas without hours are always open; `closes` may be past midnight."""
        if self.opens is None or self.closes is None:
            return True
        opens, closes = clock_time(self.opens), clock_time(self.closes)
        if opens < closes:
            return opens <= at < closes
        return at >= opens or at < closes


class ResidentSpec(Spec):
    name: Name
    age: int = Field(ge=0, le=130)
    traits: list[Text] = Field(min_length=3, max_length=5)
    occupation: Text
    paragraph: Annotated[Text, AfterValidator(_enough_phrases)]
    private: MaybeText = ""
    home: Text
    workplace: MaybeText = ""
    known_places: list[Text] = Field(min_length=1)
    wake_time: ClockTime
    sleep_time: ClockTime
    routine: list[Text] = Field(min_length=5, max_length=8)
    avatar_emoji: Annotated[Text, Field(max_length=16)]

    @property
    def first_name(self) -> str:
        return self.name.split()[0]

    def seed_phrases(self, scenario: ScenarioSpec | None = None) -> list[str]:
        """One string per seed memory: the paragraph's phrases, then the scenario's facts."""
        facts = scenario.facts_for(self.name) if scenario else []
        return [*split_phrases(self.paragraph), *(fact.phrase for fact in facts)]

    def private_phrases(self) -> list[str]:
        """One string per private seed memory (a feeling, a secret): the `private` paragraph."""
        return split_phrases(self.private)

    def close_friends(self, residents: list[str]) -> list[str]:
        """Those of ``residents`` that a seed phrase names as family or a close friend."""
        ties = [p for p in split_phrases(self.paragraph) if CLOSE_TIES.search(p)]
        return [r for r in residents if r != self.name and any(r in p for p in ties)]

    def may_confide(self, phrase: str, listener: str, residents: list[str] | None = None) -> bool:
        """May this resident tell ``listener`` a private ``phrase``? Only its subject (named in
        it, full name) or a close friend may hear it."""
        if not listener or listener == self.name:
            return bool(listener)
        return listener in phrase or listener in self.close_friends(residents or [listener])


class Fact(Spec):
    id: Slug
    resident: Name
    phrase: Annotated[Text, AfterValidator(_one_phrase)]
    question: Text
    keywords: list[Text] = Field(min_length=1)

    def mentioned_in(self, answer: str) -> bool:
        """Does `answer` name any keyword (case-insensitive)? A first filter, not a judge."""
        folded = answer.casefold()
        return any(keyword.casefold() in folded for keyword in self.keywords)


class Event(Spec):
    id: Slug
    name: Text
    host: MaybeText = ""
    location: Text
    date: Annotated[date, Field(strict=False)]
    start: ClockTime
    end: ClockTime
    fact: MaybeText = ""

    @property
    def starts_at(self) -> datetime:
        return datetime.combine(self.date, clock_time(self.start), tzinfo=UTC)

    @property
    def ends_at(self) -> datetime:
        end = datetime.combine(self.date, clock_time(self.end), tzinfo=UTC)
        return end if end > self.starts_at else end + timedelta(days=1)


class _ScenarioHead(Spec):
    name: Text
    description: MaybeText = ""
    start: Annotated[datetime, BeforeValidator(_game_time)]
    minutes_per_tick: int = Field(default=10, ge=1, le=24 * 60)
    days: int = Field(default=2, ge=1)


class ScenarioSpec(_ScenarioHead):
    facts: list[Fact] = []
    events: list[Event] = []

    def fact(self, fact_id: str) -> Fact:
        for fact in self.facts:
            if fact.id == fact_id:
                return fact
        raise KeyError(f"no fact {fact_id!r} in scenario {self.name!r}")

    def facts_for(self, resident: str) -> list[Fact]:
        return [fact for fact in self.facts if fact.resident == resident]


class TownSpec(Spec):
    name: Text
    description: MaybeText = ""
    areas: list[Area]
    residents: list[ResidentSpec]
    scenario: ScenarioSpec

    def paths(self) -> list[str]:
        """Every place: `"Area"` and `"Area: sub-area"`, in file order."""
        return _paths(self.areas)

    def objects(self) -> Iterator[tuple[str, WorldObjectSpec]]:
        """Every object with the path of the sub-area holding it."""
        for area in self.areas:
            for sub in area.sub_areas:
                for obj in sub.objects:
                    yield _join(area.name, sub.name), obj

    def area(self, name: str) -> Area:
        return _find(self.areas, name, "area")

    def resident(self, name: str) -> ResidentSpec:
        return _find(self.residents, name, "resident")


_Named = TypeVar("_Named", Area, SubArea, ResidentSpec)


def _find(items: list[_Named], name: str, kind: str) -> _Named:
    wanted = " ".join(name.split()).casefold()
    for item in items:
        if item.name.casefold() == wanted:
            return item
    raise KeyError(f"no {kind} named {name!r}")


def _join(*parts: str) -> str:
    return SEPARATOR.join(parts)


def _paths(areas: list[Area]) -> list[str]:
    return [p for a in areas for p in (a.name, *(_join(a.name, s.name) for s in a.sub_areas))]
