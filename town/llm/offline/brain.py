"""The offline brain: every task answered deterministically from its inputs alone.

It lets the town (and its tests) run with no language model, and it is the gateway's safe
fallback. Where a choice is made at random, the generator is seeded by a stable hash of the
inputs, so the same inputs always give the same answer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel

from town.llm import schemas as s
from town.llm.embedders import Embedder
from town.llm.offline import day as offline_day
from town.llm.offline import social as offline_social
from town.llm.offline import talk as offline_talk
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import STATE_CHANGES
from town.llm.offline.text import emoji_for, importance, words
from town.llm.offline.visit import answer_visitor
from town.llm.tasks import Task

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)


def rate_importance(inputs: s.RateImportanceInput) -> s.RateImportanceResult:
    return s.RateImportanceResult(scores=[importance(o) for o in inputs.observations])


def emoji(inputs: s.EmojiInput) -> s.EmojiResult:
    return s.EmojiResult(emoji=emoji_for(inputs.action))


def object_state(inputs: s.ObjectStateInput) -> s.ObjectStateResult:
    action = inputs.action.lower()
    for phrases, state in STATE_CHANGES:
        if any(re.search(rf"\b{re.escape(phrase)}", action) for phrase in phrases):
            return s.ObjectStateResult(state=state)
    if set(words(inputs.object)) & set(words(action)):
        return s.ObjectStateResult(state="in use")
    return s.ObjectStateResult(state=inputs.state or "idle")


class OfflineBrain:
    """A brain that needs no model: deterministic answers from the inputs (a feature's task
    brings its own, ``Task.offline``).

    ``embedder`` (the town's sentence embedder; the hash embedder when none is given) hears
    what a visitor's line is by meaning (``hearing.py``)."""

    _ANSWERS: Mapping[str, Callable[[Any], BaseModel]] = MappingProxyType(
        {
            "rate_importance": rate_importance,
            "plan_day": offline_day.plan_day,
            "decompose": offline_day.decompose,
            "choose_location": offline_day.choose_location,
            "react": offline_social.react,
            "utter": offline_talk.utter,
            "reflect_questions": offline_social.reflect_questions,
            "reflect_insights": offline_social.reflect_insights,
            "emoji": emoji,
            "object_state": object_state,
            "summarize": offline_social.summarize,
            "interview": offline_talk.interview,
        }
    )

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.name = "offline"
        self.hearing = Hearing(embedder)

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        if isinstance(inputs, s.UtterInput) and inputs.visitor:
            # (hearing embeds the line, and the lexicon's examples on the first one: off the loop)
            return await asyncio.to_thread(self.answer, task, inputs)
        return self.answer(task, inputs)

    def answer(self, task: Task[I, R], inputs: I) -> R:
        """The same as :meth:`run`, for callers outside an event loop."""
        answer = self._ANSWERS.get(task.name, task.offline)
        if task.name == "utter":
            answer = self._utter
        if answer is None:
            raise LookupError(f"the offline brain has no answer for task {task.name!r}")
        if not isinstance(inputs, task.input_model):
            raise TypeError(f"{task.name} expects {task.input_model.__name__} inputs")
        result = answer(inputs)
        if not isinstance(result, task.result_model):
            raise TypeError(f"{task.name} answered with {type(result).__name__}")
        return task.check(inputs, result)

    def _utter(self, inputs: s.UtterInput) -> s.UtterResult:
        """A visitor's thread is answered as a chat (``visit.py``), a resident's as a talk."""
        if inputs.visitor:
            return answer_visitor(inputs, self.hearing)
        return offline_talk.utter(inputs)
