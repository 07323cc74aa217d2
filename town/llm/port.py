"""The port the town thinks through, and the brain that needs no model: the offline brain (every
task's own offline answer). The suite's scripted brain is ``tests.fakes.brain.ScriptedBrain``."""

from __future__ import annotations

import asyncio
from typing import Protocol, TypeVar

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
