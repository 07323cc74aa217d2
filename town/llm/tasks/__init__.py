"""The town's thinking tasks, each a :class:`~town.llm.task.Task` that owns its thought: prompt,
models, shaper, check, offline answer, urgency and pace share, defined in its family's module
(``day``, ``noticing``, ``reflection``, ``talk``). A feature's tasks are made the same way, in
its own package (:func:`~town.llm.task.make_task`, :func:`~town.llm.speech.speech_task`)."""

from __future__ import annotations

from typing import Any

from town.llm.task import INPUT_MARKER, TASK_LINE, Task
from town.llm.tasks.day import CHOOSE_LOCATION, DECOMPOSE, PLAN_DAY
from town.llm.tasks.noticing import EMOJI, OBJECT_STATE, RATE_IMPORTANCE, REACT
from town.llm.tasks.reflection import REFLECT_INSIGHTS, REFLECT_QUESTIONS, SUMMARIZE
from town.llm.tasks.talk import INTERVIEW, UTTER

__all__ = [
    "CHOOSE_LOCATION",
    "DECOMPOSE",
    "EMOJI",
    "INPUT_MARKER",
    "INTERVIEW",
    "OBJECT_STATE",
    "PLAN_DAY",
    "RATE_IMPORTANCE",
    "REACT",
    "REFLECT_INSIGHTS",
    "REFLECT_QUESTIONS",
    "SUMMARIZE",
    "TASKS",
    "TASK_LINE",
    "UTTER",
    "Task",
]

TASKS: tuple[Task[Any, Any], ...] = (
    RATE_IMPORTANCE,
    PLAN_DAY,
    DECOMPOSE,
    CHOOSE_LOCATION,
    REACT,
    UTTER,
    REFLECT_QUESTIONS,
    REFLECT_INSIGHTS,
    EMOJI,
    OBJECT_STATE,
    SUMMARIZE,
    INTERVIEW,
)
"""The town's own tasks, in the order of a tick."""
