"""How urgent a call is: the order in which calls waiting for the server go to it.

A person waiting goes first (a visitor's reply, then interviews and commands), then the town's
talk (conversation turns, reactions), then planning, then what can wait longest (importance
ratings, reflection). The urgency flows from the task's name and from whom the call is for:
code answering a person runs inside :func:`person_waiting` (the visitor path, the commands), so
callers pass nothing, and every call made inside it, in the tasks it starts too, is urgent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from types import MappingProxyType

VISITOR, PERSON, TALK, PLANNING, BACKGROUND = range(5)
"""Urgencies, most urgent first."""
NAMES = ("a visitor's reply", "a person waiting", "talk", "planning", "background")

BY_TASK = MappingProxyType(
    {
        "interview": PERSON,
        "utter": TALK,
        "react": TALK,
        "object_state": TALK,
        "emoji": TALK,
        "choose_location": PLANNING,
        "plan_day": PLANNING,
        "decompose": PLANNING,
        "summarize": PLANNING,
        "rate_importance": BACKGROUND,
        "reflect_questions": BACKGROUND,
        "reflect_insights": BACKGROUND,
    }
)
"""The town's tasks by urgency; any other task (a feature's, an experiment's) is talk."""

_WAITING: ContextVar[int | None] = ContextVar("person_waiting", default=None)


@contextlib.contextmanager
def person_waiting(urgency: int = PERSON) -> Iterator[None]:
    """Calls made inside are for a person waiting: a visitor (``VISITOR``) or one who ran a
    command (``PERSON``)."""
    token = _WAITING.set(urgency)
    try:
        yield
    finally:
        _WAITING.reset(token)


def of(task: str) -> int:
    """The urgency of a call of ``task`` made here and now."""
    waiting = _WAITING.get()
    if waiting is not None:
        return waiting
    return BY_TASK.get(task, TALK)


def keep_pace(brain: object, tick_seconds: float | None) -> None:
    """Tell the LLM gateway behind ``brain`` (through any wrapper) the tick's interval it keeps
    (None: always wait for the model); an offline brain keeps any pace."""
    while brain is not None:
        if hasattr(brain, "pace_s"):
            brain.pace_s = tick_seconds
            return
        brain = getattr(brain, "inner", None)
