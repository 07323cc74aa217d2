"""The registry of the thinking tasks: each a prompt template beside a result model
(:mod:`town.llm.task`; the speaking ones ask for plain text, :mod:`town.llm.speech`)."""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from town.llm import checks, lenient, speech
from town.llm import schemas as s
from town.llm.speech import SpeechTask, speech_task
from town.llm.task import (
    INPUT_MARKER,
    PROMPTS,
    PROSE_LINE,
    TASK_LINE,
    I,
    InProse,
    Message,
    R,
    Task,
    _prompt_text,
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


# -- the experiments' tasks --------------------------------------------------------------------
# They are kept apart from TASKS (the town's own thoughts): EXPERIMENT_TASKS, and ALL_TASKS for
# both (the fake server adds a feature's tasks, such as town.features.coaching.tasks).

_INLINE_WHEN_EMPTY = MappingProxyType({"received": "No Messages", "memories": "nothing yet"})


@dataclass(frozen=True)
class FreeTextTask(Task[I, R]):
    """A task whose reply is free text in one field, as the gather experiment's agents answer.

    Its prompt shows lists inline, as the paper's prompts do (an empty ``received`` list is
    ``No Messages``). A reply that is not the requested JSON is taken as it stands: plain text
    (or the string values of a JSON object of another shape) becomes ``text_field``, so a model
    that ignores the JSON instruction still answers, as a chat model did in the paper.
    """

    text_field: str = ""

    def render(self, inputs: I) -> list[Message]:
        values: dict[str, str] = {}
        for name, value in inputs:
            if isinstance(value, list):
                shown = json.dumps(value, ensure_ascii=False)
                values[name] = shown if value else _INLINE_WHEN_EMPTY.get(name, "(none)")
            else:
                values[name] = " ".join(str(value).split())
        prose = self.prompt.substitute(values).rstrip()
        user = f"{prose}\n\n{INPUT_MARKER}{inputs.model_dump_json()}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def parse(self, inputs: I, content: str) -> R:
        try:
            return super().parse(inputs, content)
        except ValueError:
            text = free_text(content)
            if not text:
                raise
        result = self.result_model.model_validate({self.text_field: text})
        return self.check(inputs, result)


_FREE_TEXT_LIMIT = 2000


def free_text(content: str) -> str:
    """The text of a reply that is not the requested JSON (see :class:`FreeTextTask`)."""
    text = content.strip()
    try:
        data = lenient.load(text)
    except ValueError:
        return text[:_FREE_TEXT_LIMIT]
    if isinstance(data, str):
        return data.strip()[:_FREE_TEXT_LIMIT]
    if isinstance(data, dict):
        found = [v.strip() for v in data.values() if isinstance(v, str) and v.strip()]
        return " ".join(found)[:_FREE_TEXT_LIMIT]
    return ""


def _free_text_task(
    name: str,
    input_model: type[I],
    result_model: type[R],
    role: str,
    text_field: str,
) -> FreeTextTask[I, R]:
    system = string.Template(_prompt_text("gather_system")).substitute(task=name, role=role)
    return FreeTextTask(
        name,
        input_model,
        result_model,
        system.strip(),
        string.Template(_prompt_text(name)),
        text_field=text_field,
    )


_SPEAK = "You write what one agent says to the agents around it."
_MOVE = "You choose one agent's next move."
GATHER_MESSAGE = _free_text_task(
    "gather_message", s.GatherInput, s.GatherMessageResult, _SPEAK, "message"
)
GATHER_MOVE = _free_text_task("gather_move", s.GatherInput, s.GatherMoveResult, _MOVE, "move")
GATHER_MESSAGE_MEMORY = _free_text_task(
    "gather_message_memory", s.GatherMemoryInput, s.GatherMessageResult, _SPEAK, "message"
)
GATHER_MOVE_MEMORY = _free_text_task(
    "gather_move_memory", s.GatherMemoryInput, s.GatherMoveResult, _MOVE, "move"
)

JUDGE_KNOWS = make_task(
    "judge_knows",
    s.JudgeKnowsInput,
    s.JudgeKnowsResult,
    "You judge whether an answer claims to know about something: yes or no.",
)

EXPERIMENT_TASKS: Mapping[str, Task[Any, Any]] = MappingProxyType(
    {
        t.name: t
        for t in (
            GATHER_MESSAGE,
            GATHER_MOVE,
            GATHER_MESSAGE_MEMORY,
            GATHER_MOVE_MEMORY,
            JUDGE_KNOWS,
        )
    }
)
"""The experiments' tasks by name (read-only)."""

ALL_TASKS: Mapping[str, Task[Any, Any]] = MappingProxyType({**TASKS, **EXPERIMENT_TASKS})
"""The town's and the experiments' tasks by name (read-only); a feature keeps its own."""
