"""The town as data: a location tree, its residents and a scenario, read from TOML.

A town is a folder, `personas/<name>/`, holding three files (and an optional fourth):

- `town.toml`: the areas (one chat channel each, later), their sub-areas and the objects in them,
  each object with a state in words; opening hours, capacities and free-text rules;
- `residents.toml`: who lives there, each seeded by one paragraph whose semicolon-separated phrases
  become the first memories;
- `scenario.toml`: the start time, the tick length, the facts that single residents know at the
  start (with the question that later checks how far each spread) and timed events;
- `interviews.toml` (optional): the residents who run mock interviews, each in an interview room
  (an area of its own), with the company and role they hire for and a bank of questions by topic.

`load_town` validates every entry on its own, then cross-checks the files against each other, and
reports every problem at once as `file: field path: reason`. Places are written as paths joined
by ": " (`"Hobbs Cafe: kitchen: stove"`), so names never contain a colon.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

SEPARATOR = ": "
TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE = "town.toml", "residents.toml", "scenario.toml"
INTERVIEWS_FILE = "interviews.toml"
MIN_SEED_PHRASES = 3
_FILE_ORDER = {TOWN_FILE: 0, RESIDENTS_FILE: 1, SCENARIO_FILE: 2, INTERVIEWS_FILE: 3}


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
            raise ValueError(f"{value!r} is not a date and time like '2023-02-13 07:00'") from None
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


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class WorldObjectSpec(_Spec):
    name: Name
    state: Text


def _objects_from_table(value: Any) -> Any:
    """`objects = { stove = "off" }` in TOML means `[{ name = "stove", state = "off" }]`."""
    if isinstance(value, dict):
        return [{"name": name, "state": state} for name, state in value.items()]
    return value


class SubArea(_Spec):
    name: Name
    capacity: int | None = Field(default=None, ge=1)
    objects: Annotated[list[WorldObjectSpec], BeforeValidator(_objects_from_table)] = []

    def object(self, name: str) -> WorldObjectSpec:
        return _find(self.objects, name, "object")


class Area(_Spec):
    name: Name
    description: MaybeText = ""
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


class ResidentSpec(_Spec):
    name: Name
    age: int = Field(ge=0, le=130)
    traits: list[Text] = Field(min_length=3, max_length=5)
    occupation: Text
    paragraph: Annotated[Text, AfterValidator(_enough_phrases)]
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


class Fact(_Spec):
    id: Slug
    resident: Name
    phrase: Annotated[Text, AfterValidator(_one_phrase)]
    question: Text
    keywords: list[Text] = Field(min_length=1)

    def mentioned_in(self, answer: str) -> bool:
        """Does `answer` name any keyword (case-insensitive)? A first filter, not a judge."""
        folded = answer.casefold()
        return any(keyword.casefold() in folded for keyword in self.keywords)


class Event(_Spec):
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


class _ScenarioHead(_Spec):
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


def _one_question(value: str) -> str:
    if value.count("?") > 1:
        raise ValueError(f"asks {value.count('?')} questions; one question at a time")
    return value


class InterviewQuestion(_Spec):
    """One question of an interviewer's bank; `follow_up` is asked when an answer is thin."""

    id: Slug
    topic: Name
    text: Annotated[Text, AfterValidator(_one_question)]
    follow_up: Annotated[MaybeText, AfterValidator(_one_question)] = ""


class InterviewerSpec(_Spec):
    """A resident who runs mock interviews in a room (an area), for a company and a role."""

    resident: Name
    room: Name
    company: Text
    role: Text
    about: MaybeText = ""  # what the interviewer knows of the company and the role
    next_steps: Text  # what comes after the practice, said when a session closes
    session_minutes: int = Field(default=40, ge=5, le=240)  # game minutes
    questions_per_session: int = Field(default=4, ge=1, le=20)
    questions: list[InterviewQuestion] = Field(min_length=3)

    def topics(self) -> list[str]:
        """The bank's topics, in the order they first appear."""
        return list(dict.fromkeys(q.topic for q in self.questions))

    def question(self, question_id: str) -> InterviewQuestion | None:
        return next((q for q in self.questions if q.id == question_id), None)


class TownSpec(_Spec):
    name: Text
    description: MaybeText = ""
    areas: list[Area]
    residents: list[ResidentSpec]
    scenario: ScenarioSpec
    interviewers: list[InterviewerSpec] = []

    def interviewer(self, name: str) -> InterviewerSpec:
        """The interviewer with this (full or first) name; ``KeyError`` if there is none."""
        wanted = " ".join(name.split()).casefold()
        for spec in self.interviewers:
            if wanted in (spec.resident.casefold(), spec.resident.split()[0].casefold()):
                return spec
        raise KeyError(f"no interviewer named {name!r}")

    def interviewer_in(self, location: str) -> InterviewerSpec | None:
        """The interviewer whose room holds ``location`` (an area or a path inside it)."""
        area = split_path(location)[0].casefold() if location.strip() else ""
        return next((i for i in self.interviewers if i.room.casefold() == area), None)

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

    def describe(self, path: str) -> str:
        """A place or object in plain language, for prompts and the `look` command."""
        parts = split_path(path)
        area = self.area(parts[0])
        if len(parts) == 1:
            return _describe_area(area)
        sub = area.sub_area(parts[1])
        if len(parts) == 2:
            return _describe_sub_area(area, sub)
        if len(parts) == 3:
            obj = sub.object(parts[2])
            return f"The {obj.name} in {_where(area, sub)} is {obj.state}."
        raise KeyError(f"{path!r} has more parts than area: sub-area: object")


_Named = TypeVar("_Named", Area, SubArea, WorldObjectSpec, ResidentSpec)


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


# -- Plain-language rendering --------------------------------------------------------------------


def _is_proper(name: str) -> bool:
    return name[:1].isupper() or "'s" in name


def _a(name: str) -> str:
    if _is_proper(name):
        return name
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _listing(items: list[str], sep: str = ", ") -> str:
    if len(items) <= 1:
        return "".join(items)
    last_sep = " and " if sep == ", " else f"{sep}and "
    return sep.join(items[:-1]) + last_sep + items[-1]


def _contents(sub: SubArea) -> str:
    objects = _listing([f"{_a(obj.name)} ({obj.state})" for obj in sub.objects])
    return f"{_a(sub.name)} with {objects}" if objects else _a(sub.name)


def _where(area: Area, sub: SubArea) -> str:
    return (
        f"{sub.name} in {area.name}" if _is_proper(sub.name) else f"the {sub.name} of {area.name}"
    )


def _spoken(clock: str) -> str:
    at = clock_time(clock)
    if at == time(0, 0):
        return "midnight"
    if at == time(12, 0):
        return "noon"
    hour = at.hour % 12 or 12
    minutes = f":{at.minute:02d}" if at.minute else ""
    return f"{hour}{minutes} {'am' if at.hour < 12 else 'pm'}"


def _capacity(sub: SubArea, subject: str) -> str:
    if sub.capacity is None:
        return ""
    people = "only one person" if sub.capacity == 1 else f"at most {sub.capacity} people"
    return f" {subject} holds {people} at a time."


def _describe_area(area: Area) -> str:
    text = (
        f"{area.name} is {area.description}. It has " if area.description else f"{area.name} has "
    )
    text += _listing([_contents(sub) for sub in area.sub_areas], sep="; ") + "."
    if area.opens and area.closes:
        text += f" It is open from {_spoken(area.opens)} to {_spoken(area.closes)}."
    for sub in area.sub_areas:
        text += _capacity(sub, f"The {sub.name}" if not _is_proper(sub.name) else sub.name)
    return text


def _describe_sub_area(area: Area, sub: SubArea) -> str:
    where = _where(area, sub)
    where = where[:1].upper() + where[1:]
    objects = _listing([f"{_a(obj.name)} ({obj.state})" for obj in sub.objects])
    text = f"{where} has {objects}." if objects else f"{where} is empty."
    return text + _capacity(sub, "It")


# -- Loading -------------------------------------------------------------------------------------


def available_towns() -> list[str]:
    """The towns shipped in the `personas` package."""
    root = resources.files("personas")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / TOWN_FILE).is_file())


def town_folder(name_or_path: str | Path) -> Traversable:
    """`"smallville"` -> the packaged `personas/smallville/`; a path (with a slash): that folder."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or "\\" in text or text.startswith("."):
        path = Path(name_or_path)
        if not path.is_dir():
            raise PersonaError(text, [f"{text}: no such folder"])
        return path
    folder = resources.files("personas") / text
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text) or not folder.is_dir():
        known = ", ".join(available_towns()) or "none"
        raise PersonaError(text, [f"no town named {text!r} in personas/ (known: {known})"])
    return folder


def load_town(name_or_path: str | Path) -> TownSpec:
    """Read and check a town folder; raise `PersonaError` listing every problem found."""
    folder = town_folder(name_or_path)
    problems: list[str] = []
    raw = {
        file: _read_toml(folder, file, problems)
        for file in (TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE)
    }
    optional = (folder / INTERVIEWS_FILE).is_file()
    raw[INTERVIEWS_FILE] = _read_toml(folder, INTERVIEWS_FILE, problems) if optional else None

    town = _validate(_TownFile, raw[TOWN_FILE], TOWN_FILE, "", problems)
    areas = _validate_items(Area, raw[TOWN_FILE], "areas", TOWN_FILE, problems)
    _validate(_ResidentsFile, raw[RESIDENTS_FILE], RESIDENTS_FILE, "", problems)
    residents = _validate_items(
        ResidentSpec, raw[RESIDENTS_FILE], "residents", RESIDENTS_FILE, problems
    )
    scenario = _validate(_ScenarioFile, raw[SCENARIO_FILE], SCENARIO_FILE, "", problems)
    facts = _validate_items(Fact, raw[SCENARIO_FILE], "facts", SCENARIO_FILE, problems)
    events = _validate_items(Event, raw[SCENARIO_FILE], "events", SCENARIO_FILE, problems)
    _validate(_InterviewsFile, raw[INTERVIEWS_FILE], INTERVIEWS_FILE, "", problems)
    interviewers = _validate_items(
        InterviewerSpec, raw[INTERVIEWS_FILE], "interviewers", INTERVIEWS_FILE, problems
    )

    _check_unique_entries(raw, problems)
    area_names = _entry_values(raw[TOWN_FILE], "areas", "name")
    resident_names = _entry_values(raw[RESIDENTS_FILE], "residents", "name")
    places = None if area_names is None else _Places.build(area_names, [a for _, a in areas])
    names = None if resident_names is None else {name for _, name in resident_names}
    _check_areas(areas, problems)
    _check_residents(residents, places, problems)
    _check_facts(facts, names, problems)
    fact_ids = {fact_id for _, fact_id in _entry_values(raw[SCENARIO_FILE], "facts", "id") or []}
    _check_events(events, scenario, names, places, fact_ids, problems)
    _check_interviewers(interviewers, dict(residents), resident_names, places, problems)

    if problems or town is None or scenario is None:
        problems.sort(key=lambda problem: _FILE_ORDER.get(problem.split(":")[0], 3))
        raise PersonaError(str(name_or_path), problems or ["the town could not be read"])
    return TownSpec(
        name=town.name,
        description=town.description,
        areas=[area for _, area in areas],
        residents=[resident for _, resident in residents],
        scenario=ScenarioSpec(
            **scenario.model_dump(exclude={"facts", "events"}),
            facts=[fact for _, fact in facts],
            events=[event for _, event in events],
        ),
        interviewers=[interviewer for _, interviewer in interviewers],
    )


class _TownFile(_Spec):
    name: Text
    description: MaybeText = ""
    areas: list[dict[str, Any]] = Field(min_length=1)


class _ResidentsFile(_Spec):
    residents: list[dict[str, Any]] = Field(min_length=1)


class _InterviewsFile(_Spec):
    interviewers: list[dict[str, Any]] = Field(min_length=1)


class _ScenarioFile(_ScenarioHead):
    facts: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []


_Model = TypeVar("_Model", bound=BaseModel)
_Raw = dict[str, Any] | None


def _read_toml(folder: Traversable, file: str, problems: list[str]) -> _Raw:
    item = folder / file
    if not item.is_file():
        problems.append(f"{file}: (file): not found in {folder}")
        return None
    try:
        return tomllib.loads(item.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        problems.append(f"{file}: (file): not UTF-8 text ({error.reason} at byte {error.start})")
    except tomllib.TOMLDecodeError as error:
        match = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", str(error))
        where, reason = (
            (f"line {match[2]}, column {match[3]}", match[1]) if match else ("(file)", str(error))
        )
        problems.append(f"{file}: {where}: TOML syntax error: {reason}")
    return None


def _validate(
    model: type[_Model], data: Any, file: str, prefix: str, problems: list[str]
) -> _Model | None:
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems.extend(
            f"{file}: {_field_path(prefix, e['loc'])}: {_reason(e)}" for e in error.errors()
        )
        return None


def _validate_items(
    model: type[_Model], data: _Raw, key: str, file: str, problems: list[str]
) -> list[tuple[int, _Model]]:
    """Each entry of `data[key]` on its own, so that one bad entry hides no problem in another."""
    items = data.get(key) if data else None
    if not isinstance(items, list):
        return []
    checked = [
        (i, _validate(model, item, file, f"{key}[{i}]", problems))
        for i, item in enumerate(items)
        if isinstance(item, dict)
    ]
    return [(i, spec) for i, spec in checked if spec is not None]


def _field_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _reason(error: Any) -> str:
    kind, message = error["type"], str(error["msg"])
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    given = error.get("input")
    shown = f" (got {given!r})" if isinstance(given, str | int | float | bool) else ""
    return message[:1].lower() + message[1:] + shown


# -- Cross-checks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Places:
    """The places of town.toml, to check the paths other files name."""

    paths: list[str]
    areas: set[str]
    unsure: set[str]  # areas whose entry is invalid: paths under them are not judged

    @classmethod
    def build(cls, named: list[tuple[int, str]], areas: list[Area]) -> _Places:
        valid = {area.name for area in areas}
        return cls(paths=_paths(areas), areas=valid, unsure={n for _, n in named} - valid)

    def problem(self, path: str, *, depth: int | None = None) -> str | None:
        """Why `path` is not a place (None if it is); `depth` 1 = an area, 2 = a sub-area."""
        parts = split_path(path)
        if parts[0] in self.unsure:
            return None
        if path not in self.paths:
            pool = sorted(self.areas) if depth == 1 else self.paths
            hint = difflib.get_close_matches(path, pool, n=1, cutoff=0.85)
            return f"{path!r} is not a place in town.toml" + (
                f" (did you mean {hint[0]!r}?)" if hint else ""
            )
        if depth == 1 and len(parts) > 1:
            return f"{path!r} is a sub-area; list the area {parts[0]!r}"
        if depth == 2 and len(parts) < 2:
            return f"{path!r} is a whole area; name a sub-area ('{path}: ...')"
        return None


def _entry_values(raw: _Raw, key: str, field: str) -> list[tuple[int, str]] | None:
    """`field` of every entry of `raw[key]`, valid or not (None when the file is unreadable)."""
    entries = raw.get(key, []) if raw is not None else None
    if not isinstance(entries, list):
        return None
    values = [(i, e.get(field)) for i, e in enumerate(entries) if isinstance(e, dict)]
    return [(i, " ".join(v.split())) for i, v in values if isinstance(v, str)]


def _check_unique_entries(raw: dict[str, _Raw], problems: list[str]) -> None:
    """Names and ids are unique, also among entries that are invalid in other ways."""
    for file, key, field in [
        (TOWN_FILE, "areas", "name"),
        (RESIDENTS_FILE, "residents", "name"),
        (SCENARIO_FILE, "facts", "id"),
        (SCENARIO_FILE, "events", "id"),
        (INTERVIEWS_FILE, "interviewers", "resident"),
        (INTERVIEWS_FILE, "interviewers", "room"),
    ]:
        for i, value, j in _duplicates(_entry_values(raw[file], key, field) or []):
            problems.append(f"{file}: {key}[{i}].{field}: {value!r} is already used by {key}[{j}]")


def _duplicates(names: list[tuple[int, str]]) -> Iterator[tuple[int, str, int]]:
    """(index, name, index of its first use) for every name used before (case-insensitive)."""
    first: dict[str, int] = {}
    for i, name in names:
        if name.casefold() in first:
            yield i, name, first[name.casefold()]
        else:
            first[name.casefold()] = i


def _check_areas(areas: list[tuple[int, Area]], problems: list[str]) -> None:
    for i, area in areas:
        where = f"{TOWN_FILE}: areas[{i}]"
        if (area.opens is None) != (area.closes is None):
            missing = "opens" if area.opens is None else "closes"
            problems.append(f"{where}.{missing}: give both opens and closes, or neither")
        elif area.opens is not None and area.opens == area.closes:
            problems.append(f"{where}.closes: same as opens; leave both out if it never closes")
        for k, name, j in _duplicates(list(enumerate(s.name for s in area.sub_areas))):
            problems.append(f"{where}.sub_areas[{k}].name: {name!r} is already sub_areas[{j}]")
        for k, sub in enumerate(area.sub_areas):
            for m, name, j in _duplicates(list(enumerate(o.name for o in sub.objects))):
                problems.append(
                    f"{where}.sub_areas[{k}].objects[{m}].name: {name!r} is already objects[{j}]"
                )


def _check_residents(
    residents: list[tuple[int, ResidentSpec]], places: _Places | None, problems: list[str]
) -> None:
    for i, resident in residents:
        where = f"{RESIDENTS_FILE}: residents[{i}]"
        if resident.wake_time == resident.sleep_time:
            problems.append(f"{where}.sleep_time: same as wake_time {resident.wake_time!r}")
        for k, place, j in _duplicates(list(enumerate(resident.known_places))):
            problems.append(f"{where}.known_places[{k}]: {place!r} is already known_places[{j}]")
        if places is None:
            continue
        checks = [("home", resident.home, 2), ("workplace", resident.workplace, None)]
        checks += [(f"known_places[{k}]", p, 1) for k, p in enumerate(resident.known_places)]
        for field, path, depth in checks:
            if path and (reason := places.problem(path, depth=depth)):
                problems.append(f"{where}.{field}: {reason}")
            elif path and field in ("home", "workplace"):
                area = split_path(path)[0]
                if area not in resident.known_places and area not in places.unsure:
                    problems.append(f"{where}.known_places: must include the {field} area {area!r}")


def _check_facts(
    facts: list[tuple[int, Fact]], names: set[str] | None, problems: list[str]
) -> None:
    for i, fact in facts:
        if names is not None and fact.resident not in names:
            problems.append(
                f"{SCENARIO_FILE}: facts[{i}].resident: {_not_resident(fact.resident, names)}"
            )


def _check_events(
    events: list[tuple[int, Event]],
    scenario: _ScenarioFile | None,
    names: set[str] | None,
    places: _Places | None,
    fact_ids: set[str],
    problems: list[str],
) -> None:
    for i, event in events:
        where = f"{SCENARIO_FILE}: events[{i}]"
        if places is not None and (reason := places.problem(event.location)):
            problems.append(f"{where}.location: {reason}")
        if event.host and names is not None and event.host not in names:
            problems.append(f"{where}.host: {_not_resident(event.host, names)}")
        if event.fact and event.fact not in fact_ids:
            problems.append(f"{where}.fact: {event.fact!r} is not the id of a fact in this file")
        if event.end == event.start:
            problems.append(f"{where}.end: the event ends when it starts ({event.start})")
        if scenario is not None and event.ends_at <= scenario.start:
            problems.append(f"{where}.date: the event is over before the scenario starts")


def _check_interviewers(
    interviewers: list[tuple[int, InterviewerSpec]],
    residents: dict[int, ResidentSpec],
    named: list[tuple[int, str]] | None,
    places: _Places | None,
    problems: list[str],
) -> None:
    """Each interviewer is a resident who works in its room, an area of town.toml; its bank has
    unique ids and enough questions for a session."""
    names = None if named is None else {name for _, name in named}
    by_name = {spec.name: spec for spec in residents.values()}
    for i, spec in interviewers:
        where = f"{INTERVIEWS_FILE}: interviewers[{i}]"
        if names is not None and spec.resident not in names:
            problems.append(f"{where}.resident: {_not_resident(spec.resident, names)}")
        if places is not None and (reason := places.problem(spec.room, depth=1)):
            problems.append(f"{where}.room: {reason}")
        person = by_name.get(spec.resident)
        work = split_path(person.workplace)[0] if person and person.workplace else ""
        if person is not None and work.casefold() != spec.room.casefold():
            problems.append(
                f"{where}.room: {spec.resident} works in {work or 'no workplace'!r} "
                f"({RESIDENTS_FILE}), not in {spec.room!r}; an interviewer's workplace is its room"
            )
        for k, question_id, j in _duplicates(list(enumerate(q.id for q in spec.questions))):
            problems.append(f"{where}.questions[{k}].id: {question_id!r} is already questions[{j}]")
        if spec.questions_per_session > len(spec.questions):
            problems.append(
                f"{where}.questions_per_session: {spec.questions_per_session} is more than the "
                f"{len(spec.questions)} questions in the bank"
            )


def _not_resident(name: str, names: set[str]) -> str:
    hint = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.85)
    return f"{name!r} is not a resident in residents.toml" + (
        f" (did you mean {hint[0]!r}?)" if hint else ""
    )
