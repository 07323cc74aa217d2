"""The port the town thinks through, and the two brains that need no model: the offline brain
(every task's own offline answer) and a scripted brain for scenario tests."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from town.llm import made
from town.llm.embedders import Embedder
from town.llm.offline.hearing import Hearing
from town.llm.task import Task

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)


class Brain(Protocol):
    """Anything that can think a task through: the LLM gateway, the offline brain, test doubles.

    ``resident`` names who is thinking, for usage accounting; it never changes the answer.
    """

    @property
    def name(self) -> str: ...

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R: ...


class OfflineBrain:
    """A brain that needs no model: each task's own offline answer, deterministic from the
    inputs (where a choice is made at random, the generator is seeded by a stable hash of them).
    It lets the town and its tests run with no language model, and it is the fallback of the
    model's answers.

    ``embedder`` (the town's sentence embedder; the hash embedder when none is given) hears
    what a visitor's line is by meaning (:class:`~town.llm.offline.hearing.Hearing`)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.name = "offline"
        self.hearing = Hearing(embedder)

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        if self.hearing.listens(inputs):  # (it embeds the line: off the event loop)
            return await asyncio.to_thread(self.answer, task, inputs)
        return self.answer(task, inputs)

    def answer(self, task: Task[I, R], inputs: I) -> R:
        """The same as :meth:`run`, for callers outside an event loop."""
        return made.stamp(task.answer_offline(inputs, self.hearing), made.OFFLINE)


@dataclass(frozen=True)
class ScriptedCall:
    """One thought a :class:`ScriptedBrain` was asked for, and what it answered."""

    task: str
    inputs: BaseModel
    resident: str | None
    result: BaseModel
    scripted: bool


class ScriptedBrain:
    """A test double: answers queued per task first, then the fallback brain (offline)."""

    def __init__(self, fallback: Brain | None = None) -> None:
        self.name = "scripted"
        self.history: list[ScriptedCall] = []
        self._fallback: Brain = fallback if fallback is not None else OfflineBrain()
        self._queues: dict[str, deque[BaseModel | Mapping[str, Any]]] = {}

    def enqueue(
        self, task_name: str, result: BaseModel | Mapping[str, Any], *, resident: str = ""
    ) -> None:
        """Queue the next answer to ``task_name`` (a result model or a dict of its fields),
        for any resident or only for ``resident``'s call."""
        key = f"{task_name}|{resident}" if resident else task_name
        self._queues.setdefault(key, deque()).append(result)

    def pending(self, task_name: str) -> int:
        return len(self._queues.get(task_name, ()))

    def calls(self, task_name: str) -> list[ScriptedCall]:
        return [call for call in self.history if call.task == task_name]

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        queue = self._queues.get(f"{task.name}|{resident}") or self._queues.get(task.name)
        if queue:
            result = self._as_result(task, queue.popleft())
            scripted = True
        else:
            result = await self._fallback.run(task, inputs, resident=resident)
            scripted = False
        self.history.append(ScriptedCall(task.name, inputs, resident, result, scripted))
        return result

    @staticmethod
    def _as_result(task: Task[I, R], queued: BaseModel | Mapping[str, Any]) -> R:
        if isinstance(queued, task.result_model):
            return queued
        if isinstance(queued, Mapping):
            return task.result_model.model_validate(dict(queued))
        raise TypeError(
            f"queued answer for {task.name} is {type(queued).__name__}, "
            f"not {task.result_model.__name__}"
        )
