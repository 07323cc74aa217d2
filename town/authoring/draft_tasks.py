"""The draft tasks: a prompt beside each result model (``draft_schemas``), its schema tightened
for the inputs (exact counts, the homes and places as closed sets), its check, and its offline
answer (``draft_offline``). They are the authoring feature's own, apart from the town's tasks in
``town.llm.tasks``, and go through the same brains (the gateway's structured output)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Generic

from town.authoring import draft_offline as offline
from town.authoring import draft_schemas as d
from town.llm.shapes import Schema, base_schema
from town.llm.task import I, R, Task
from town.llm.tasks import make_task

PROMPTS = resources.files(__package__).joinpath("prompts")
WAKE_TIMES = [f"{h:02d}:{m:02d}" for h in range(5, 10) for m in (0, 30)]
SLEEP_TIMES = [f"{h:02d}:{m:02d}" for h in range(21, 24) for m in (0, 30)]
HOURS = [f"{h:02d}:00" for h in range(8, 23)]


def _keep(inputs: Any, schema: Schema) -> None:
    return None


@dataclass(frozen=True)
class DraftTask(Task[I, R], Generic[I, R]):
    """A task whose schema is tightened by its own ``shaper``."""

    shaper: Callable[[I, Schema], None] = _keep

    def schema_for(self, inputs: I) -> dict[str, Any]:
        schema = base_schema(self.result_model)
        self.shaper(inputs, schema)
        return schema


def _enum(node: Schema, values: Iterable[str]) -> None:
    found = list(dict.fromkeys(values))
    if found:
        for key in ("pattern", "minLength", "maxLength"):
            node.pop(key, None)
        node["enum"] = found


def _exactly(node: Schema, count: int) -> None:
    node["minItems"] = node["maxItems"] = count


def _shape_places(inputs: d.DraftPlacesInput, schema: Schema) -> None:
    _exactly(schema["properties"]["areas"], inputs.places)


def _shape_residents(inputs: d.DraftResidentsInput, schema: Schema) -> None:
    residents = schema["properties"]["residents"]
    _exactly(residents, inputs.residents)
    person = residents["items"]["properties"]
    _enum(person["home"], inputs.homes)
    _enum(person["workplace"], ["", *inputs.places])
    _enum(person["wake_time"], WAKE_TIMES)
    _enum(person["sleep_time"], SLEEP_TIMES)


def _shape_scenario(inputs: d.DraftScenarioInput, schema: Schema) -> None:
    props = schema["properties"]
    _enum(props["fact"]["properties"]["resident"], inputs.residents)
    event = props["event"]["properties"]
    _enum(event["location"], inputs.areas)
    _enum(event["start"], HOURS[:-1])
    _enum(event["end"], HOURS[1:])


def _unique(names: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name.casefold() in seen:
            raise ValueError(f"{what} {name!r} is used twice; every {what} needs its own name")
        seen.add(name.casefold())


def _distinct_places(
    inputs: d.DraftPlacesInput, result: d.DraftPlacesResult
) -> d.DraftPlacesResult:
    _unique((a.name for a in result.areas), "area")
    for area in result.areas:
        _unique((s.name for s in area.sub_areas), f"sub-area of {area.name}:")
        for sub in area.sub_areas:
            _unique((o.name for o in sub.objects), f"object of {area.name}: {sub.name}:")
        if bool(area.opens) != bool(area.closes) or (area.opens and area.opens == area.closes):
            raise ValueError(f"{area.name}: give opens and closes at different times, or neither")
    if len(result.areas[-1].sub_areas) < min(inputs.homes, 4):
        raise ValueError(f"the last area must hold {inputs.homes} homes as sub-areas")
    return result


def _distinct_residents(
    inputs: d.DraftResidentsInput, result: d.DraftResidentsResult
) -> d.DraftResidentsResult:
    _unique((r.name for r in result.residents), "resident name")
    for person in result.residents:
        if person.wake_time == person.sleep_time:
            raise ValueError(f"{person.name} wakes and sleeps at {person.wake_time}")
    return result


def _event_after_start(
    inputs: d.DraftScenarioInput, result: d.DraftScenarioResult
) -> d.DraftScenarioResult:
    if result.event.end <= result.event.start:
        raise ValueError(f"the event ends at {result.event.end}, not after it starts")
    return result


def _task(
    name: str,
    inputs: type[I],
    result: type[R],
    role: str,
    shaper: Callable[[I, Schema], None],
    check: Callable[[I, R], R] | None = None,
    answer: Callable[[I], R] | None = None,
) -> DraftTask[I, R]:
    base = make_task(name, inputs, result, role, offline=answer, prompts=PROMPTS)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    if check is not None:
        fields["check"] = check
    return DraftTask(**fields, shaper=shaper)


DRAFT_PLACES = _task(
    "draft_places",
    d.DraftPlacesInput,
    d.DraftPlacesResult,
    "You draft the places of a town for an AI role-play, as data.",
    _shape_places,
    _distinct_places,
    offline.draft_places,
)
DRAFT_RESIDENTS = _task(
    "draft_residents",
    d.DraftResidentsInput,
    d.DraftResidentsResult,
    "You draft the residents of a town for an AI role-play, as data.",
    _shape_residents,
    _distinct_residents,
    offline.draft_residents,
)
DRAFT_SCENARIO = _task(
    "draft_scenario",
    d.DraftScenarioInput,
    d.DraftScenarioResult,
    "You draft the opening scenario of a town for an AI role-play, as data.",
    _shape_scenario,
    _event_after_start,
    offline.draft_scenario,
)

DRAFT_TASKS: Mapping[str, Task[Any, Any]] = MappingProxyType(
    {t.name: t for t in (DRAFT_PLACES, DRAFT_RESIDENTS, DRAFT_SCENARIO)}
)
"""The draft tasks by name (read-only)."""
