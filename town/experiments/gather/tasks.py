"""The gather experiment's tasks (Takata et al.): an agent's message and its move, each with and
without memories, their prompts in ``prompts/`` and the offline brain's answer (``offline.py``).
The town's own tasks (``town.llm.tasks``) do not include them."""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from town.experiments.gather import offline
from town.experiments.gather import schemas as s
from town.llm import structured
from town.llm.structured import Message
from town.llm.task import INPUT_MARKER, I, Offline, R, Task, _prompt_text

PROMPTS = resources.files(__package__).joinpath("prompts")
_INLINE_WHEN_EMPTY = MappingProxyType({"received": "No Messages", "memories": "nothing yet"})
_FREE_TEXT_LIMIT = 2000


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


def free_text(content: str) -> str:
    """The text of a reply that is not the requested JSON (see :class:`FreeTextTask`)."""
    text = content.strip()
    try:
        data = structured.load(text)
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
    answer: Offline[I, R],
) -> FreeTextTask[I, R]:
    system = string.Template(_prompt_text("gather_system", PROMPTS)).substitute(
        task=name, role=role
    )
    return FreeTextTask(
        name,
        input_model,
        result_model,
        system.strip(),
        string.Template(_prompt_text(name, PROMPTS)),
        offline=answer,
        text_field=text_field,
    )


_SPEAK = "You write what one agent says to the agents around it."
_MOVE = "You choose one agent's next move."
GATHER_MESSAGE = _free_text_task(
    "gather_message",
    s.GatherInput,
    s.GatherMessageResult,
    _SPEAK,
    "message",
    offline.gather_message,
)
GATHER_MOVE = _free_text_task(
    "gather_move", s.GatherInput, s.GatherMoveResult, _MOVE, "move", offline.gather_move
)
GATHER_MESSAGE_MEMORY = _free_text_task(
    "gather_message_memory",
    s.GatherMemoryInput,
    s.GatherMessageResult,
    _SPEAK,
    "message",
    offline.gather_message,
)
GATHER_MOVE_MEMORY = _free_text_task(
    "gather_move_memory",
    s.GatherMemoryInput,
    s.GatherMoveResult,
    _MOVE,
    "move",
    offline.gather_move,
)
GATHER_TASKS = (GATHER_MESSAGE, GATHER_MOVE, GATHER_MESSAGE_MEMORY, GATHER_MOVE_MEMORY)
