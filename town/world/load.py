"""Reading a town folder (see ``town.world.persona``) and checking it.

`load_town` validates every entry on its own, then cross-checks the files against each other, and
reports every problem at once as `file: field path: reason`.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from town.world.persona import (
    RESIDENTS_FILE,
    SCENARIO_FILE,
    TOWN_FILE,
    Area,
    Event,
    Fact,
    MaybeText,
    PersonaError,
    ResidentSpec,
    ScenarioSpec,
    Spec,
    Text,
    TownSpec,
    _paths,
    _ScenarioHead,
    split_path,
)

_FILE_ORDER = {TOWN_FILE: 0, RESIDENTS_FILE: 1, SCENARIO_FILE: 2}


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
        file: read_toml(folder, file, problems)
        for file in (TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE)
    }

    town = validate(_TownFile, raw[TOWN_FILE], TOWN_FILE, "", problems)
    areas = validate_items(Area, raw[TOWN_FILE], "areas", TOWN_FILE, problems)
    validate(_ResidentsFile, raw[RESIDENTS_FILE], RESIDENTS_FILE, "", problems)
    residents = validate_items(
        ResidentSpec, raw[RESIDENTS_FILE], "residents", RESIDENTS_FILE, problems
    )
    scenario = validate(_ScenarioFile, raw[SCENARIO_FILE], SCENARIO_FILE, "", problems)
    facts = validate_items(Fact, raw[SCENARIO_FILE], "facts", SCENARIO_FILE, problems)
    events = validate_items(Event, raw[SCENARIO_FILE], "events", SCENARIO_FILE, problems)

    _check_unique_entries(raw, problems)
    area_names = entry_values(raw[TOWN_FILE], "areas", "name")
    resident_names = entry_values(raw[RESIDENTS_FILE], "residents", "name")
    places = None if area_names is None else Places.build(area_names, [a for _, a in areas])
    names = None if resident_names is None else {name for _, name in resident_names}
    _check_areas(areas, problems)
    _check_residents(residents, places, problems)
    _check_facts(facts, names, problems)
    fact_ids = {fact_id for _, fact_id in entry_values(raw[SCENARIO_FILE], "facts", "id") or []}
    _check_events(events, scenario, names, places, fact_ids, problems)

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
    )


class _TownFile(Spec):
    name: Text
    description: MaybeText = ""
    areas: list[dict[str, Any]] = Field(min_length=1)


class _ResidentsFile(Spec):
    residents: list[dict[str, Any]] = Field(min_length=1)


class _ScenarioFile(_ScenarioHead):
    facts: list[dict[str, Any]] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)


_Model = TypeVar("_Model", bound=BaseModel)
_Raw = dict[str, Any] | None


def read_toml(folder: Traversable, file: str, problems: list[str]) -> _Raw:
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


def validate(
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


def validate_items(
    model: type[_Model], data: _Raw, key: str, file: str, problems: list[str]
) -> list[tuple[int, _Model]]:
    """Each entry of `data[key]` on its own, so that one bad entry hides no problem in another."""
    items = data.get(key) if data else None
    if not isinstance(items, list):
        return []
    checked = [
        (i, validate(model, item, file, f"{key}[{i}]", problems))
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
class Places:
    """The places of town.toml, to check the paths other files name."""

    paths: list[str]
    areas: set[str]
    unsure: set[str]  # areas whose entry is invalid: paths under them are not judged

    @classmethod
    def build(cls, named: list[tuple[int, str]], areas: list[Area]) -> Places:
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


def entry_values(raw: _Raw, key: str, field: str) -> list[tuple[int, str]] | None:
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
    ]:
        for i, value, j in duplicates(entry_values(raw[file], key, field) or []):
            problems.append(f"{file}: {key}[{i}].{field}: {value!r} is already used by {key}[{j}]")


def duplicates(names: list[tuple[int, str]]) -> Iterator[tuple[int, str, int]]:
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
        for k, name, j in duplicates(list(enumerate(s.name for s in area.sub_areas))):
            problems.append(f"{where}.sub_areas[{k}].name: {name!r} is already sub_areas[{j}]")
        for k, sub in enumerate(area.sub_areas):
            for m, name, j in duplicates(list(enumerate(o.name for o in sub.objects))):
                problems.append(
                    f"{where}.sub_areas[{k}].objects[{m}].name: {name!r} is already objects[{j}]"
                )


def _check_residents(
    residents: list[tuple[int, ResidentSpec]], places: Places | None, problems: list[str]
) -> None:
    for i, resident in residents:
        where = f"{RESIDENTS_FILE}: residents[{i}]"
        if resident.wake_time == resident.sleep_time:
            problems.append(f"{where}.sleep_time: same as wake_time {resident.wake_time!r}")
        for k, place, j in duplicates(list(enumerate(resident.known_places))):
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
                f"{SCENARIO_FILE}: facts[{i}].resident: {not_resident(fact.resident, names)}"
            )


def _check_events(
    events: list[tuple[int, Event]],
    scenario: _ScenarioFile | None,
    names: set[str] | None,
    places: Places | None,
    fact_ids: set[str],
    problems: list[str],
) -> None:
    for i, event in events:
        where = f"{SCENARIO_FILE}: events[{i}]"
        if places is not None and (reason := places.problem(event.location)):
            problems.append(f"{where}.location: {reason}")
        if event.host and names is not None and event.host not in names:
            problems.append(f"{where}.host: {not_resident(event.host, names)}")
        if event.fact and event.fact not in fact_ids:
            problems.append(f"{where}.fact: {event.fact!r} is not the id of a fact in this file")
        if event.end == event.start:
            problems.append(f"{where}.end: the event ends when it starts ({event.start})")
        if scenario is not None and event.ends_at <= scenario.start:
            problems.append(f"{where}.date: the event is over before the scenario starts")


def not_resident(name: str, names: set[str]) -> str:
    hint = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.85)
    return f"{name!r} is not a resident in residents.toml" + (
        f" (did you mean {hint[0]!r}?)" if hint else ""
    )
