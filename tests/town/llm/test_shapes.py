"""Each task's schema for its inputs: what a grammar engine can enforce."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers import sample
from town.experiments.tasks import EXPERIMENT_TASKS
from town.llm.structured import MAX_TOKENS_CEILING, max_tokens_for
from town.llm.tasks import (
    CHOOSE_LOCATION,
    PLAN_DAY,
    RATE_IMPORTANCE,
    REACT,
    REFLECT_INSIGHTS,
    TASKS,
)

BY_NAME = {task.name: task for task in TASKS}
ALL_BY_NAME = {task.name: task for task in (*TASKS, *EXPERIMENT_TASKS)}


def walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk(value))
    return found


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_schema_is_flat_capped_and_simple(name: str) -> None:
    task = BY_NAME[name]
    schema = task.schema_for(sample(task))
    text = json.dumps(schema)
    assert "$ref" not in text and "\\\\d" not in text and "$defs" not in text
    for node in walk(schema):
        if node.get("type") == "string":
            assert "maxLength" in node or "enum" in node or "pattern" in node, (name, node)
        if node.get("type") == "object":
            assert node["required"] == list(node["properties"])


def test_one_score_per_observation_exactly() -> None:
    inputs = sample(RATE_IMPORTANCE, observations=["a", "b", "c", "d"])
    scores = RATE_IMPORTANCE.schema_for(inputs)["properties"]["scores"]
    assert (scores["minItems"], scores["maxItems"]) == (4, 4)
    assert (scores["items"]["minimum"], scores["items"]["maximum"]) == (1, 10)


def test_closed_sets_are_enums() -> None:
    plan = PLAN_DAY.schema_for(sample(PLAN_DAY, places=["Hobbs Cafe", "the park"]))
    location = plan["properties"]["chunks"]["items"]["properties"]["location"]
    assert location == {"enum": ["Hobbs Cafe", "the park"], "type": "string"}
    where = CHOOSE_LOCATION.schema_for(
        sample(CHOOSE_LOCATION, tree=["Hobbs Cafe: counter", "Hobbs Cafe: kitchen: stove"])
    )
    path = where["properties"]["path"]
    assert path["items"]["enum"] == ["Hobbs Cafe", "counter", "kitchen", "stove"]
    assert path["maxItems"] == 3
    inputs = sample(REFLECT_INSIGHTS)
    cites = REFLECT_INSIGHTS.schema_for(inputs)["properties"]["insights"]["items"]
    ids = sorted({s.id for q in inputs.questions for s in q.statements})
    assert cites["properties"]["cites"]["items"]["enum"] == ids


def test_talk_to_is_one_of_those_present_or_null() -> None:
    inputs = sample(REACT, present=["Klaus Mueller", "Maria Lopez"])
    talk_to = REACT.schema_for(inputs)["properties"]["talk_to"]
    assert talk_to == {
        "anyOf": [{"type": "string", "enum": ["Klaus Mueller", "Maria Lopez"]}, {"type": "null"}]
    }
    nobody = REACT.schema_for(sample(REACT, present=[]))["properties"]["talk_to"]
    assert nobody == {"type": "null"}


def test_an_empty_set_leaves_the_text_free() -> None:
    plan = PLAN_DAY.schema_for(sample(PLAN_DAY, places=[]))
    assert "enum" not in plan["properties"]["chunks"]["items"]["properties"]["location"]


@pytest.mark.parametrize("name", sorted(ALL_BY_NAME))
def test_max_tokens_cover_the_worst_reply_within_the_ceiling(name: str) -> None:
    task = ALL_BY_NAME[name]
    schema = task.schema_for(sample(task)) if name in BY_NAME else task.json_schema()
    assert 16 < max_tokens_for(schema) <= MAX_TOKENS_CEILING
