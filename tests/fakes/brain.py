"""The suite's scripted brain: answers queued per task, then the offline brain's (a test double
of :class:`town.llm.port.Brain`, as the platform fakes beside it are of a platform)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from town.llm.port import Brain, I, OfflineBrain, R
from town.llm.task import Task


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
