"""How urgent a call is: the order in which calls waiting for the server go to it, most urgent
first. The urgency flows from the task (its own ``urgency``) and from whom the call is for: code
answering a person runs inside :func:`person_waiting` (the visitor path, the commands), so every
call made inside it, in the tasks it starts too, is urgent; a second answer to a visitor's words,
and a reply to words to everyone (:func:`to_everyone`), go behind every visitor's first reply
(docs/llm.md, "A person goes first", "Words to everyone wait less").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

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


def of(own: int) -> int:
    """The urgency of a call made here and now of a task whose own urgency is ``own``: a
    person's waiting goes before it (a reply to a visitor's words to everyone: ``VISITOR_AGAIN``,
    behind every reply to a visitor who addressed a resident)."""
    waiting = _WAITING.get()
    if waiting is not None:
        return VISITOR_AGAIN if waiting.urgency == VISITOR and for_everyone() else waiting.urgency
    return own


def sending(own: int) -> int:
    """The urgency of a call going to the server now: :func:`of`, except that for a
    visitor only the first call made for their words is ``VISITOR``, any after it (a second
    resident's answer) ``VISITOR_AGAIN``."""
    waiting = _WAITING.get()
    if waiting is None or waiting.urgency != VISITOR:
        return of(own)
    waiting.sent += 1
    return VISITOR if waiting.sent == 1 and not for_everyone() else VISITOR_AGAIN
