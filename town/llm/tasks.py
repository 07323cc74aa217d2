"""The registry of the thinking tasks: each a prompt template beside a result model
(:mod:`town.llm.task`; the speaking ones ask for plain text, :mod:`town.llm.speech`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from town.llm import checks, speech
from town.llm import schemas as s
from town.llm.speech import SpeechTask, speech_task
from town.llm.task import (
    INPUT_MARKER,
    PROMPTS,
    PROSE_LINE,
    TASK_LINE,
    InProse,
    Message,
    Task,
    make_task,
    prose_values,
    quoted,
)

__all__ = [
    "INPUT_MARKER",
    "PROMPTS",
    "PROSE_LINE",
    "TASK_LINE",
    "InProse",
    "Message",
    "SpeechTask",
    "Task",
    "make_task",
    "prose_values",
    "quoted",
]

RATE_IMPORTANCE = make_task(
    "rate_importance",
    s.RateImportanceInput,
    s.RateImportanceResult,
    "You judge how memorable events are to one resident.",
    checks.importance_count,
)
PLAN_DAY = make_task(
    "plan_day",
    s.PlanDayInput,
    s.PlanDayResult,
    "You plan one resident's day in broad strokes.",
)
DECOMPOSE = make_task(
    "decompose",
    s.DecomposeInput,
    s.DecomposeResult,
    "You break one part of a resident's plan into smaller steps.",
    checks.within_chunk,
)
CHOOSE_LOCATION = make_task(
    "choose_location",
    s.ChooseLocationInput,
    s.ChooseLocationResult,
    "You choose where in town a resident goes to do something.",
    checks.known_path,
)
REACT = make_task(
    "react",
    s.ReactInput,
    s.ReactResult,
    "You decide whether a resident carries on with the plan or reacts to what it noticed.",
    checks.react_talk_to,
)
UTTER = speech_task(
    "utter",
    s.UtterInput,
    s.UtterResult,
    lambda inputs, said: s.UtterResult(text=said, end=speech.ends_talk(said)),
    speaker_field="speaker",
    max_tokens=64,
)
REFLECT_QUESTIONS = make_task(
    "reflect_questions",
    s.ReflectQuestionsInput,
    s.ReflectQuestionsResult,
    "You help a resident reflect on recent experience.",
    checks.three_questions,
)
REFLECT_INSIGHTS = make_task(
    "reflect_insights",
    s.ReflectInsightsInput,
    s.ReflectInsightsResult,
    "You draw high-level insights from a resident's memories, citing them.",
    checks.known_cites,
)
EMOJI = make_task(
    "emoji",
    s.EmojiInput,
    s.EmojiResult,
    "You turn an action into a few emoji shown beside a resident's name.",
)
OBJECT_STATE = make_task(
    "object_state",
    s.ObjectStateInput,
    s.ObjectStateResult,
    "You say how an object's state changes when someone acts on it.",
)
SUMMARIZE = make_task(
    "summarize",
    s.SummarizeInput,
    s.SummarizeResult,
    "You write a resident's short summary description from its memories.",
)
INTERVIEW = speech_task(
    "interview",
    s.InterviewInput,
    s.InterviewResult,
    lambda inputs, said: s.InterviewResult(answer=said),
    speaker_field="resident",
    max_tokens=160,
    limit=s.PASSAGE_CAP,
)

TASKS: Mapping[str, Task[Any, Any]] = MappingProxyType(
    {
        t.name: t
        for t in (
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
    }
)
"""Every task by name (read-only)."""
