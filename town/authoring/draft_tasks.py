"""The draft tasks, one per piece of a town (outline, place, resident, scenario): a prompt beside
each result model (``draft_schemas``), its schema tightened for the inputs (exact counts, the
places, homes, residents drafted so far, hours and emoji as closed sets), its check, and its
offline answer (``draft_offline``). They are the authoring feature's own, apart from the town's
tasks in ``town.llm.tasks``, and go through the same brains (the gateway's structured output)."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

from town.authoring import draft_offline as offline
from town.authoring import draft_schemas as d
from town.llm.structured import Schema
from town.llm.task import I, Offline, R, Task, make_task

PROMPTS = resources.files(__package__).joinpath("prompts")
WAKE_TIMES = [f"{h:02d}:00" for h in range(5, 10)]
SLEEP_TIMES = [f"{h:02d}:00" for h in range(21, 24)]
OPENING = [f"{h:02d}:00" for h in range(6, 12)]
CLOSING = [f"{h:02d}:00" for h in range(15, 24)]
STARTS = [f"{h:02d}:00" for h in range(8, 20)]  # an event of up to four hours ends by 23:00


def _keep(inputs: Any, schema: Schema) -> None:
    return None


def _enum(node: Schema, values: Iterable[str]) -> None:
    found = list(dict.fromkeys(values))
    if found:
        for key in ("pattern", "minLength", "maxLength"):
            node.pop(key, None)
        node["enum"] = found


def _exactly(node: Schema, count: int) -> None:
    node["minItems"] = node["maxItems"] = count


def _shape_outline(inputs: d.DraftOutlineInput, schema: Schema) -> None:
    _exactly(schema["properties"]["places"], inputs.places)


def _shape_place(inputs: d.DraftPlaceInput, schema: Schema) -> None:
    props = schema["properties"]
    if inputs.homes:
        _exactly(props["sub_areas"], inputs.homes)
        _enum(props["opens"], [""])
        _enum(props["closes"], [""])
    else:
        props["sub_areas"]["maxItems"] = 3
        _enum(props["opens"], ["", *OPENING])
        _enum(props["closes"], ["", *CLOSING])


def _new_initials(drafted: list[str]) -> str:
    """The capitals no drafted resident's first name starts with (all, if none are left)."""
    taken = {name[:1] for name in drafted}
    free = "".join(c for c in string.ascii_uppercase if c not in taken)
    return free or string.ascii_uppercase


def _shape_resident(inputs: d.DraftResidentInput, schema: Schema) -> None:
    """A new resident's first name starts with a letter no drafted one's does: a grammar
    engine cannot let a tiny model write a drafted name again (it tends to)."""
    props = schema["properties"]
    props["name"]["pattern"] = d.PERSON_GRAMMAR.replace(
        "[A-Z]", f"[{_new_initials(inputs.drafted)}]", 1
    )
    _enum(props["home"], inputs.homes)
    _enum(props["workplace"], [*inputs.places, ""])  # "" last: a tiny model takes the first
    _enum(props["knows"], [*inputs.drafted, ""])
    if not inputs.drafted:
        _enum(props["knows_as"], [""])
    _enum(props["wake_time"], WAKE_TIMES)
    _enum(props["sleep_time"], SLEEP_TIMES)
    _enum(props["avatar_emoji"], offline.EMOJI)


def _shape_scenario(inputs: d.DraftScenarioInput, schema: Schema) -> None:
    props = schema["properties"]
    _enum(props["fact"]["properties"]["resident"], inputs.residents)
    event = props["event"]["properties"]
    _enum(event["location"], inputs.areas)
    _enum(event["start"], STARTS)


def _someone_new(
    inputs: d.DraftResidentInput, result: d.DraftResidentResult
) -> d.DraftResidentResult:
    if result.name.casefold() in {n.casefold() for n in inputs.drafted}:
        raise ValueError(f"{result.name} is drafted already: give this resident another name")
    return result


def _task(
    name: str,
    inputs: type[I],
    result: type[R],
    role: str,
    shaper: Callable[[I, Schema], None],
    check: Callable[[I, R], R] | None = None,
    answer: Offline[I, R] | None = None,
) -> Task[I, R]:
    task = make_task(name, inputs, result, role, offline=answer, shaper=shaper, prompts=PROMPTS)
    return task if check is None else dataclasses.replace(task, check=check)


DRAFT_OUTLINE = _task(
    "draft_outline",
    d.DraftOutlineInput,
    d.DraftOutlineResult,
    "You name a town and its places for an AI role-play, as data.",
    _shape_outline,
    None,
    offline.draft_outline,
)
DRAFT_PLACE = _task(
    "draft_place",
    d.DraftPlaceInput,
    d.DraftPlaceResult,
    "You draft one place of a town for an AI role-play, as data.",
    _shape_place,
    None,
    offline.draft_place,
)
DRAFT_RESIDENT = _task(
    "draft_resident",
    d.DraftResidentInput,
    d.DraftResidentResult,
    "You draft one resident of a town for an AI role-play, as data.",
    _shape_resident,
    _someone_new,
    offline.draft_resident,
)
DRAFT_SCENARIO = _task(
    "draft_scenario",
    d.DraftScenarioInput,
    d.DraftScenarioResult,
    "You draft the opening scenario of a town for an AI role-play, as data.",
    _shape_scenario,
    None,
    offline.draft_scenario,
)

DRAFT_TASKS: tuple[Task[Any, Any], ...] = (
    DRAFT_OUTLINE,
    DRAFT_PLACE,
    DRAFT_RESIDENT,
    DRAFT_SCENARIO,
)
