"""A call's urgency: from its task, and from the person waiting for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from town.llm import urgency
from town.llm.offline.brain import OfflineBrain
from town.llm.tasks import TASKS


def test_every_town_task_has_its_place_in_the_order() -> None:
    assert set(urgency.BY_TASK) == set(TASKS)
    order = [urgency.of(t) for t in ("interview", "utter", "plan_day", "rate_importance")]
    assert order == sorted(order) and len(set(order)) == 4
    assert urgency.of("reflect_insights") == urgency.of("rate_importance")
    assert urgency.of("a feature's task") == urgency.TALK


async def test_a_person_waiting_makes_every_call_made_for_them_urgent() -> None:
    async def asked() -> int:
        return urgency.of("utter")

    with urgency.person_waiting(urgency.VISITOR):
        assert urgency.of("utter") == urgency.VISITOR
        assert await asyncio.create_task(asked()) == urgency.VISITOR  # in tasks it starts too
        with urgency.person_waiting():
            assert urgency.of("rate_importance") == urgency.PERSON
    assert urgency.of("utter") == urgency.TALK


def test_the_pace_to_keep_reaches_the_gateway_through_any_wrapper() -> None:
    gateway = SimpleNamespace(pace_s=None)
    wrapped = SimpleNamespace(inner=SimpleNamespace(inner=gateway))
    urgency.keep_pace(wrapped, 10.0)
    assert gateway.pace_s == 10.0
    urgency.keep_pace(wrapped, None)
    assert gateway.pace_s is None
    urgency.keep_pace(OfflineBrain(), 10.0)  # an offline brain keeps any pace
