"""A call's urgency: from its task, and from the person waiting for it."""

from __future__ import annotations

import asyncio

from town.llm import urgency
from town.llm.chain import Handles, think_with
from town.llm.client import open_client
from town.llm.tasks import (
    INTERVIEW,
    PLAN_DAY,
    RATE_IMPORTANCE,
    REFLECT_INSIGHTS,
    TASKS,
    UTTER,
)


def test_every_town_task_has_its_place_in_the_order() -> None:
    order = [t.urgency for t in (INTERVIEW, UTTER, PLAN_DAY, RATE_IMPORTANCE)]
    assert order == sorted(order) and len(set(order)) == 4
    assert REFLECT_INSIGHTS.urgency == RATE_IMPORTANCE.urgency == urgency.BACKGROUND
    assert {t.urgency for t in TASKS} <= set(range(len(urgency.NAMES)))


async def test_a_person_waiting_makes_every_call_made_for_them_urgent() -> None:
    async def asked() -> int:
        return urgency.of(UTTER.urgency)

    with urgency.person_waiting(urgency.VISITOR):
        assert urgency.of(UTTER.urgency) == urgency.VISITOR
        assert await asyncio.create_task(asked()) == urgency.VISITOR  # in tasks it starts too
        with urgency.person_waiting():
            assert urgency.of(RATE_IMPORTANCE.urgency) == urgency.PERSON
    assert urgency.of(UTTER.urgency) == urgency.TALK


async def test_only_the_first_call_for_a_visitor_s_words_goes_first() -> None:
    async def second_answer() -> int:
        return urgency.sending(UTTER.urgency)

    with urgency.person_waiting(urgency.VISITOR):
        assert urgency.sending(UTTER.urgency) == urgency.VISITOR  # the first reply
        assert await asyncio.create_task(second_answer()) == urgency.VISITOR_AGAIN
        assert urgency.of(UTTER.urgency) == urgency.VISITOR  # (what is asked, nothing sent)
    with urgency.person_waiting(urgency.VISITOR):  # the next words: first again
        assert urgency.sending(UTTER.urgency) == urgency.VISITOR
    assert urgency.VISITOR < urgency.VISITOR_AGAIN < urgency.PERSON
    with urgency.person_waiting():  # a command's calls are all alike
        assert [urgency.sending(INTERVIEW.urgency) for _ in range(2)] == [urgency.PERSON] * 2
    assert urgency.sending(PLAN_DAY.urgency) == urgency.PLANNING


def test_a_reply_to_words_to_everyone_goes_behind_the_replies_to_those_who_addressed_one() -> None:
    with urgency.person_waiting(urgency.VISITOR), urgency.to_everyone():
        assert urgency.of(UTTER.urgency) == urgency.VISITOR_AGAIN
        assert [urgency.sending(UTTER.urgency) for _ in range(2)] == [urgency.VISITOR_AGAIN] * 2
    with urgency.person_waiting(), urgency.to_everyone():  # (a command's calls are alike)
        assert urgency.sending(UTTER.urgency) == urgency.PERSON


async def test_the_pace_to_keep_reaches_every_model_from_the_handles() -> None:
    client = open_client("http://127.0.0.1:9/v1", "k", 5.0, 0)
    _brain, handles = think_with(client, "m")
    handles.keep_pace(10.0)
    assert handles.pace_s == 10.0 and [m.pace_s for m in handles.models] == [10.0]
    handles.keep_pace(None)
    assert [m.pace_s for m in handles.models] == [None]
    Handles().keep_pace(10.0)  # an offline brain keeps any pace
    await client.close()
