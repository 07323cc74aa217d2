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


async def test_only_the_first_call_for_a_visitor_s_words_goes_first() -> None:
    async def second_answer() -> int:
        return urgency.sending("utter")

    with urgency.person_waiting(urgency.VISITOR):
        assert urgency.sending("utter") == urgency.VISITOR  # the first reply
        assert await asyncio.create_task(second_answer()) == urgency.VISITOR_AGAIN
        assert urgency.of("utter") == urgency.VISITOR  # (what is asked, nothing sent)
    with urgency.person_waiting(urgency.VISITOR):  # the next words: first again
        assert urgency.sending("utter") == urgency.VISITOR
    assert urgency.VISITOR < urgency.VISITOR_AGAIN < urgency.PERSON
    with urgency.person_waiting():  # a command's calls are all alike
        assert [urgency.sending("interview") for _ in range(2)] == [urgency.PERSON] * 2
    assert urgency.sending("plan_day") == urgency.PLANNING


def test_a_reply_to_words_to_everyone_goes_behind_the_replies_to_those_who_addressed_one() -> None:
    with urgency.person_waiting(urgency.VISITOR), urgency.to_everyone():
        assert urgency.of("utter") == urgency.VISITOR_AGAIN
        assert [urgency.sending("utter") for _ in range(2)] == [urgency.VISITOR_AGAIN] * 2
    with urgency.person_waiting(), urgency.to_everyone():  # (a command's calls are alike)
        assert urgency.sending("utter") == urgency.PERSON


def test_the_pace_to_keep_reaches_the_gateway_through_any_wrapper() -> None:
    gateway = SimpleNamespace(pace_s=None)
    wrapped = SimpleNamespace(inner=SimpleNamespace(inner=gateway))
    urgency.keep_pace(wrapped, 10.0)
    assert gateway.pace_s == 10.0
    urgency.keep_pace(wrapped, None)
    assert gateway.pace_s is None
    urgency.keep_pace(OfflineBrain(), 10.0)  # an offline brain keeps any pace
