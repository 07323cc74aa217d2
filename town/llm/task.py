"""A thinking task: everything about one kind of thought, in one value.

A task names its prompt template, its input and result models, the shaper that tightens its JSON
schema for the inputs at hand, the check of a result against its inputs, its offline answer, its
urgency and its pace share. The gateway, the offline brain, the pacer and the fake server read
them from the task; nothing is looked up by the task's name.

Each task's user prompt lives in ``prompts/<name>.txt`` as a :class:`string.Template` filled from
the inputs in prose; the rendered message always ends with an ``INPUT JSON:`` block holding the
inputs exactly, so any model (and the fake server) sees the same data.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from town.llm import schemas as s
from town.llm import structured
from town.llm.offline.hearing import Hearing
from town.llm.structured import Message
from town.llm.urgency import TALK
from town.text import clean_text

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

INPUT_MARKER = "INPUT JSON:\n"
TASK_LINE = "TASK: "
PROSE_LINE = 120  # a bare name or place in a prompt's prose: one clean line this long at most

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


def _keep(inputs: Any, result: R) -> R:
    return result


PROMPTS = resources.files(__package__).joinpath("prompts")


def _prompt_text(name: str, prompts: Traversable = PROMPTS) -> str:
    return prompts.joinpath(f"{name}.txt").read_text("utf-8")


@runtime_checkable
class InProse(Protocol):
    """An input field's model that says how the prose of a prompt shows it."""

    def prose(self) -> str: ...


Offline = Callable[[I, Hearing], R]
"""A task's offline answer: from the inputs alone, deterministic; ``Hearing`` tells what a
visitor's line is, for the answers that hear one."""
Shaper = Callable[[I, structured.Schema], None]
"""A task's tightening of its result model's schema for the inputs at hand."""


@dataclass(frozen=True)
class Task(Generic[I, R]):
    """One kind of thought: inputs in, a validated result out.

    ``urgency`` orders its calls in the queue (:mod:`town.llm.urgency`; a person waiting for one
    goes first whatever the task); with ``pace_share`` set, a call that would wait for the
    server past that share of the tick's interval is answered offline, so the town keeps its
    pace."""

    name: str
    input_model: type[I]
    result_model: type[R]
    system: str
    prompt: string.Template
    check: Callable[[I, R], R] = field(default=_keep)
    offline: Offline[I, R] | None = None
    shaper: Shaper[I] | None = None
    urgency: int = TALK
    pace_share: float | None = None
    words: str = ""  # the task as a member calls it, in ``status`` ("small talk", "ratings")

    @property
    def in_words(self) -> str:
        """The task as a member calls it (else its name, spaced)."""
        return self.words or self.name.replace("_", " ")

    def render(self, inputs: I) -> list[Message]:
        """System and user messages for these inputs."""
        prose = self.prompt.substitute(prose_values(inputs)).rstrip()
        user = f"{prose}\n\n{INPUT_MARKER}{inputs.model_dump_json()}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def json_schema(self) -> dict[str, Any]:
        """The result model's schema, for any inputs (see :meth:`schema_for`)."""
        return structured.base_schema(self.result_model)

    def schema_for(self, inputs: I) -> dict[str, Any]:
        """The schema a call for these inputs sends: exact counts, closed sets, every text capped
        (the task's ``shaper`` tightens the result model's)."""
        schema = structured.base_schema(self.result_model)
        if self.shaper is not None:
            self.shaper(inputs, schema)
        return schema

    def answer_offline(self, inputs: I, hearing: Hearing) -> R:
        """The offline answer, checked like the model's; ``LookupError`` for a task without
        one, ``TypeError`` for inputs or an answer of the wrong model."""
        if self.offline is None:
            raise LookupError(f"the offline brain has no answer for task {self.name!r}")
        if not isinstance(inputs, self.input_model):
            raise TypeError(f"{self.name} expects {self.input_model.__name__} inputs")
        result = self.offline(inputs, hearing)
        if not isinstance(result, self.result_model):
            raise TypeError(f"{self.name} answered with {type(result).__name__}")
        return self.check(inputs, result)

    def parse(self, inputs: I, content: str) -> R:
        """Read a reply leniently and validate it; raises ``ValueError`` (pydantic's
        ``ValidationError`` and :class:`~town.llm.structured.NoJSON` included)."""
        data = structured.mend(structured.load(content), self.schema_for(inputs))
        result = self.result_model.model_validate(data)
        return self.check(inputs, result)


def quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _item(value: Any) -> str:
    if isinstance(value, s.PlanItem):
        where = clean_text(value.location, PROSE_LINE)
        return f"{value.start} for {value.duration_min} min at {where}: {quoted(value.description)}"
    if isinstance(value, s.Utterance):
        return f"{clean_text(value.speaker, PROSE_LINE)}: {quoted(value.text)}"
    if isinstance(value, s.NumberedStatement):
        return f"[{value.id}] {quoted(value.text)}"
    if isinstance(value, InProse):
        return value.prose()
    return quoted(str(value))


_LONG_TEXT = 100  # longer free text is given once, in the INPUT JSON block only


def _prose(name: str, value: Any) -> str:
    """A field as the prose shows it. Lists and long texts are not repeated in the prose (they
    are in the INPUT JSON block, which every prompt ends with): that halves a prompt's tokens."""
    if value is None:
        return "an interviewer" if name == "asker" else "(none)"
    if isinstance(value, list):
        return f'(see "{name}" in the INPUT JSON)' if value else "(none)"
    if isinstance(value, str):
        if name in _BARE_FIELDS:
            return clean_text(value, PROSE_LINE)
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
    offline: Offline[I, R] | None = None,
    shaper: Shaper[I] | None = None,
    urgency: int = TALK,
    pace_share: float | None = None,
    prompts: Traversable = PROMPTS,
    words: str = "",
) -> Task[I, R]:
    """A task whose user prompt is ``<prompts>/<name>.txt`` (a feature passes its own folder)."""
    system = string.Template(_prompt_text("system")).substitute(task=name, role=role).strip()
    prompt = string.Template(_prompt_text(name, prompts))
    return Task(
        name,
        input_model,
        result_model,
        system,
        prompt,
        check,
        offline,
        shaper,
        urgency,
        pace_share,
        words,
    )
