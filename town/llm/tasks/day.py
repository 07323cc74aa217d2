"""The tasks of a resident's day: the day plan, its decomposition, where to go."""

from __future__ import annotations

from town.llm import schemas as s
from town.llm.offline import day as offline
from town.llm.structured import Schema, one_of, prop
from town.llm.task import make_task
from town.llm.urgency import PLANNING


def _parts(entry: str) -> list[str]:
    return [part.strip() for part in entry.split(":") if part.strip()]


def _plan_day_shape(inputs: s.PlanDayInput, schema: Schema) -> None:
    one_of(prop(schema, "chunks")["items"]["properties"]["location"], inputs.places)


PLAN_DAY = make_task(
    "plan_day",
    s.PlanDayInput,
    s.PlanDayResult,
    "You plan one resident's day in broad strokes.",
    offline=offline.plan_day,
    shaper=_plan_day_shape,
    urgency=PLANNING,
    pace_share=1.0,  # a day plan not made within a tick is made offline: the resident wakes
    words="day plans",
)


def _decompose_shape(inputs: s.DecomposeInput, schema: Schema) -> None:
    items = prop(schema, "items")
    items["maxItems"] = max(1, min(12, inputs.chunk.duration_min // 5))
    one_of(items["items"]["properties"]["location"], inputs.places)


def _within_chunk(inputs: s.DecomposeInput, result: s.DecomposeResult) -> s.DecomposeResult:
    """Keep the items that start inside the chunk being decomposed."""
    start = s.minutes(inputs.chunk.start)
    kept = [
        item
        for item in result.items
        if (s.minutes(item.start) - start) % (24 * 60) < inputs.chunk.duration_min
    ]
    if not kept:
        raise ValueError(
            f"no item starts within the chunk ({inputs.chunk.start} for "
            f"{inputs.chunk.duration_min} min)"
        )
    return s.DecomposeResult(items=kept)


DECOMPOSE = make_task(
    "decompose",
    s.DecomposeInput,
    s.DecomposeResult,
    "You break one part of a resident's plan into smaller steps.",
    _within_chunk,
    offline=offline.decompose,
    shaper=_decompose_shape,
    urgency=PLANNING,
    pace_share=0.5,
    words="hourly plans",
)


def _choose_location_shape(inputs: s.ChooseLocationInput, schema: Schema) -> None:
    if not inputs.tree:
        return
    path = prop(schema, "path")
    paths = [_parts(entry) for entry in inputs.tree]
    one_of(path["items"], [part for parts in paths for part in parts])
    path["maxItems"] = max(1, max(len(parts) for parts in paths))


def _known_path(
    inputs: s.ChooseLocationInput, result: s.ChooseLocationResult
) -> s.ChooseLocationResult:
    """The path must lead along a known place; it is returned in the tree's own spelling."""
    asked = [part for element in result.path for part in _parts(element)]
    if not inputs.tree:
        if not asked:
            raise ValueError("the path is empty")
        return s.ChooseLocationResult(path=asked)
    wanted = [part.casefold() for part in asked]
    for entry in inputs.tree:
        known = _parts(entry)
        if wanted and [part.casefold() for part in known[: len(wanted)]] == wanted:
            return s.ChooseLocationResult(path=known[: len(wanted)])
    raise ValueError(
        "the path must follow one of the known places, e.g. " + repr(_parts(inputs.tree[0]))
    )


CHOOSE_LOCATION = make_task(
    "choose_location",
    s.ChooseLocationInput,
    s.ChooseLocationResult,
    "You choose where in town a resident goes to do something.",
    _known_path,
    offline=offline.choose_location,
    shaper=_choose_location_shape,
    urgency=PLANNING,
    pace_share=0.5,  # the resident moves on time
    words="choices of where to go",
)
