"""A model's answers as the town keeps them: every text in a result made plain
(``town.text.plain``: one line, no mass ping, no mention markup), once, where the answer comes
back to the tick, before any of it becomes a summary, a state, a plan, an action or a memory.

A model may write "@everyone" or "<!channel>" whatever its prompt says; the platforms' posters
escape what goes out, but what is stored is served too (``GET /api/resident``, the cards,
replays) and told again. So the tick's brain (``Engine.new_tick``) answers through
``PlainAnswers``; a visitor's answer is made plain where it is composed (``town.inputs.chat``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from town.llm import made
from town.llm.port import Brain
from town.llm.task import Task
from town.text import plain

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - as town.llm.port
R = TypeVar("R", bound=BaseModel)


class PlainAnswers:
    """A brain whose results hold only plain text (who made each is kept)."""

    def __init__(self, inner: Brain) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        return plain_result(await self.inner.run(task, inputs, resident=resident))


def plain_result(result: R) -> R:
    """``result`` with each text in its fields (in lists and nested results too) plain; the
    result itself when nothing changes."""
    update = {}
    for key, value in result:
        made_plain = _plain(value)
        if made_plain != value:
            update[key] = made_plain
    if not update:
        return result
    return made.stamp(result.model_copy(update=update), made.made_by(result))


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return plain(value, max(len(value), 1)) if value else value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return plain_result(value)
    return value
