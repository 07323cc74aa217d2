"""Wake-ups are not starved (issue 48, item 5): at a pace the server cannot keep, every call a
resident needs to wake, plan and move waits at most a tick before the offline brain makes it,
and what goes offline first is what a member would miss least."""

from __future__ import annotations

from town.llm.tasks import (
    CHOOSE_LOCATION,
    DECOMPOSE,
    PLAN_DAY,
    RATE_IMPORTANCE,
    REFLECT_INSIGHTS,
    REFLECT_QUESTIONS,
    SUMMARIZE,
)


def share(task: object) -> float:
    found = getattr(task, "pace_share", None)
    assert found is not None, f"{getattr(task, 'name', task)} would wait for the server forever"
    return float(found)


def test_waking_planning_and_moving_wait_at_most_a_tick() -> None:
    assert all(share(t) <= 1.0 for t in (SUMMARIZE, PLAN_DAY, DECOMPOSE, CHOOSE_LOCATION))


def test_what_a_member_misses_least_goes_offline_first() -> None:
    assert share(RATE_IMPORTANCE) < share(DECOMPOSE) <= share(PLAN_DAY)
    assert share(CHOOSE_LOCATION) <= share(PLAN_DAY)


def test_a_reflection_waits_for_the_model() -> None:
    """A reflection is the insight a resident keeps (and no wake-up waits on it): the model
    makes it however long the queue."""
    assert REFLECT_QUESTIONS.pace_share is None and REFLECT_INSIGHTS.pace_share is None
