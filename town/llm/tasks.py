"""The thinking tasks: a prompt template beside a result model, and the registry of them all.

Each task's user prompt lives in ``prompts/<name>.txt`` as a :class:`string.Template` filled from
the inputs in prose; the rendered message always ends with an ``INPUT JSON:`` block holding the
inputs exactly, so any model (and the fake server) sees the same data.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar, runtime_checkable

from pydantic import BaseModel

from town.llm import checks, lenient, shapes
from town.llm import schemas as s

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

INPUT_MARKER = "INPUT JSON:\n"
TASK_LINE = "TASK: "

# Fields holding names of residents, places or clock values: written bare (on one line).
# Every other text is free text (observations, memories, speech) and is written quoted.
_BARE_FIELDS = frozenset(
    {
        "resident",
        "speaker",
        "listener",
        "asker",
        "date",
        "wake_time",
        "granularity",
        "current",
        "location",
        "object",
        "interviewer",
        "candidate",
    }
)


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


def _keep(inputs: Any, result: R) -> R:
    return result


PROMPTS = resources.files(__package__).joinpath("prompts")


def _prompt_text(name: str, prompts: Traversable = PROMPTS) -> str:
    return prompts.joinpath(f"{name}.txt").read_text("utf-8")


@runtime_checkable
class InProse(Protocol):
    """An input field's model that says how the prose of a prompt shows it."""

    def prose(self) -> str: ...


@dataclass(frozen=True)
class Task(Generic[I, R]):
    """One kind of thought: inputs in, a validated result out."""

    name: str
    input_model: type[I]
    result_model: type[R]
    system: str
    prompt: string.Template
    check: Callable[[I, R], R] = field(default=_keep)
    offline: Callable[[I], R] | None = None  # a feature's own offline answer (OfflineBrain)

    def render(self, inputs: I) -> list[Message]:
        """System and user messages for these inputs."""
        prose = self.prompt.substitute(prose_values(inputs)).rstrip()
        user = f"{prose}\n\n{INPUT_MARKER}{inputs.model_dump_json()}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def json_schema(self) -> dict[str, Any]:
        """The result model's schema, for any inputs (see :meth:`schema_for`)."""
        return shapes.base_schema(self.result_model)

    def schema_for(self, inputs: I) -> dict[str, Any]:
        """The schema a call for these inputs sends: exact counts, closed sets, every text capped
        (:mod:`town.llm.shapes`)."""
        return shapes.schema_for(self.name, self.result_model, inputs)

    def parse(self, inputs: I, content: str) -> R:
        """Read a reply leniently and validate it; raises ``ValueError`` (pydantic's
        ``ValidationError`` and :class:`~town.llm.lenient.NoJSON` included)."""
        data = lenient.mend(lenient.load(content), self.schema_for(inputs))
        result = self.result_model.model_validate(data)
        return self.check(inputs, result)


def one_line(text: str) -> str:
    return " ".join(text.split())[:120]


def quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _item(value: Any) -> str:
    if isinstance(value, s.PlanItem):
        return (
            f"{value.start} for {value.duration_min} min at {one_line(value.location)}: "
            f"{quoted(value.description)}"
        )
    if isinstance(value, s.Utterance):
        return f"{one_line(value.speaker)}: {quoted(value.text)}"
    if isinstance(value, s.NumberedStatement):
        return f"[{value.id}] {quoted(value.text)}"
    if isinstance(value, InProse):
        return value.prose()
    return quoted(str(value))


_WHEN_NONE = MappingProxyType({"asker": "an interviewer"})


_LONG_TEXT = 100  # longer free text is given once, in the INPUT JSON block only


def _prose(name: str, value: Any) -> str:
    """A field as the prose shows it. Lists and long texts are not repeated in the prose (they
    are in the INPUT JSON block, which every prompt ends with): that halves a prompt's tokens."""
    if value is None:
        return _WHEN_NONE.get(name, "(none)")
    if isinstance(value, list):
        return f'(see "{name}" in the INPUT JSON)' if value else "(none)"
    if isinstance(value, str):
        if name in _BARE_FIELDS:
            return one_line(value)
        if len(value) > _LONG_TEXT:
            return f'(see "{name}" in the INPUT JSON)'
        return quoted(value)
    if isinstance(value, BaseModel):
        return _item(value)
    return str(value)


def prose_values(inputs: BaseModel) -> dict[str, str]:
    """The inputs as prose fragments, one per field, for the template."""
    return {name: _prose(name, value) for name, value in inputs}


def make_task(
    name: str,
    input_model: type[I],
    result_model: type[R],
    role: str,
    check: Callable[[I, R], R] = _keep,
    *,
    offline: Callable[[I], R] | None = None,
    prompts: Traversable = PROMPTS,
) -> Task[I, R]:
    """A task whose user prompt is ``<prompts>/<name>.txt`` (a feature passes its own folder)."""
    system = string.Template(_prompt_text("system")).substitute(task=name, role=role).strip()
    prompt = string.Template(_prompt_text(name, prompts))
    return Task(name, input_model, result_model, system, prompt, check, offline)


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
UTTER = make_task(
    "utter",
    s.UtterInput,
    s.UtterResult,
    "You write the next thing a resident says in a conversation.",
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
INTERVIEW = make_task(
    "interview",
    s.InterviewInput,
    s.InterviewResult,
    "You answer an interview question as a resident, from its memories only.",
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
