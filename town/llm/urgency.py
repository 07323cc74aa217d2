"""How urgent a call is: the order in which calls waiting for the server go to it.

A person waiting goes first (a visitor's first reply, then a second resident's answer to the
same words, then interviews and commands), then the town's talk (conversation turns,
reactions), then planning, then what can wait longest (importance ratings, reflection). The
urgency flows from the task's name and from whom the call is for: code answering a person runs
inside :func:`person_waiting` (the visitor path, the commands), so callers pass nothing, and
every call made inside it, in the tasks it starts too, is urgent.

Words to everyone (no resident addressed) wait behind the replies to visitors who addressed a
resident, and may be answered without the model: such a reply waits for it at most about one
call's time (see :func:`to_everyone`), then the offline brain answers.

Why a second answer waits: on a one-slot server a visitor's reply waits for the calls ahead of
it, and when visitors keep the server busy those are mostly other visitors' replies; a second
resident's answer to words already answered goes behind every visitor's first reply.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType

VISITOR, VISITOR_AGAIN, PERSON, TALK, PLANNING, BACKGROUND = range(6)
"""Urgencies, most urgent first."""
NAMES = (
    "a visitor's reply",
    "a visitor's further answer, or a reply to words to everyone",
    "a person waiting",
    "talk",
    "planning",
    "background",
)

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
BEGUN_SHARE = 0.3
"""The share of a tick's calls that long thoughts begun in it may take: a resident waking (a
summary in the tick it wakes, a day plan in the next) or reflecting (questions, then insights
at the next tick), two calls each, so about 60% of the server's time in all at most."""


@dataclass
class _Waiting:
    """A person waiting: how urgent, and how many calls were sent for them so far (the tasks
    a visitor's words start share it)."""

    urgency: int
    sent: int = 0


_WAITING: ContextVar[_Waiting | None] = ContextVar("person_waiting", default=None)
_TO_EVERYONE: ContextVar[bool] = ContextVar("to_everyone", default=False)


@contextlib.contextmanager
def person_waiting(urgency: int = PERSON) -> Iterator[None]:
    """Calls made inside are for a person waiting: a visitor (``VISITOR``) or one who ran a
    command (``PERSON``)."""
    token = _WAITING.set(_Waiting(urgency))
    try:
        yield
    finally:
        _WAITING.reset(token)


@contextlib.contextmanager
def to_everyone() -> Iterator[None]:
    """Calls made inside answer a visitor's words to everyone, addressed to no resident: on a
    server with calls ahead of them that would take longer than about one call's time, the
    offline brain answers instead (a town that keeps its pace; ``LLMGateway.patience``)."""
    token = _TO_EVERYONE.set(True)
    try:
        yield
    finally:
        _TO_EVERYONE.reset(token)


def for_everyone() -> bool:
    """Whether a call made here and now answers words to everyone (:func:`to_everyone`)."""
    return _TO_EVERYONE.get()


def of(task: str) -> int:
    """The urgency of a call of ``task`` made here and now (a reply to a visitor's words to
    everyone: ``VISITOR_AGAIN``, behind every reply to a visitor who addressed a resident)."""
    waiting = _WAITING.get()
    if waiting is not None:
        return VISITOR_AGAIN if waiting.urgency == VISITOR and for_everyone() else waiting.urgency
    return BY_TASK.get(task, TALK)


def sending(task: str) -> int:
    """The urgency of a call of ``task`` going to the server now: :func:`of`, except that for a
    visitor only the first call made for their words is ``VISITOR``, any after it (a second
    resident's answer) ``VISITOR_AGAIN``."""
    waiting = _WAITING.get()
    if waiting is None or waiting.urgency != VISITOR:
        return of(task)
    waiting.sent += 1
    return VISITOR if waiting.sent == 1 and not for_everyone() else VISITOR_AGAIN


def keep_pace(brain: object, tick_seconds: float | None) -> None:
    """Tell the LLM gateway behind ``brain`` (through any wrapper) the tick's interval it keeps
    (None: always wait for the model); an offline brain keeps any pace."""
    gateway = _paced(brain)
    if gateway is not None:
        gateway.pace_s = tick_seconds  # type: ignore[attr-defined]


def _paced(brain: object) -> object | None:
    """The LLM gateway behind ``brain`` (through any wrapper), None for an offline brain."""
    while brain is not None:
        if hasattr(brain, "pace_s"):
            return brain
        brain = getattr(brain, "inner", None)
    return None


def server_busy(brain: object) -> bool:
    """Whether the LLM server behind ``brain`` (through any wrapper) has every slot taken or
    calls waiting for one on our side (False for an offline brain): a second resident's answer
    to words already answered would only add to the wait of the next visitor's."""
    pacer = getattr(_paced(brain), "pacer", None)
    if pacer is None:
        return False
    return bool(pacer.waiting > 0 or pacer.in_flight >= int(pacer.limit))


def begun_per_tick(brain: object) -> int | None:
    """How many long thoughts (a wake-up, a reflection) may begin in one tick so that the town
    keeps its pace (None: any number, for an offline brain or one set to always wait for the
    model): ``BEGUN_SHARE`` of the calls the server answers in a tick's interval, at the
    latency measured; one before anything is measured."""
    gateway = _paced(brain)
    pace_s = getattr(gateway, "pace_s", None)
    pacer = getattr(gateway, "pacer", None)
    if pace_s is None or pacer is None:
        return None
    calls = pacer.calls_in(pace_s)
    return 1 if calls is None else max(1, math.floor(BEGUN_SHARE * calls))
