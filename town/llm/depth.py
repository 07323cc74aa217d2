"""Counting the longest chain of dependent LLM calls: what a tick's wall time cannot beat.

Each concurrent unit of a tick (a resident's thinking, a conversation, a reflection) runs inside
``chained()``, which gives it a cell; ``ChainCountingBrain`` raises the cell to one more than the
chain length at which a call started. Calls made side by side (``asyncio.gather``) start at the
same length, so they count once; calls made one after another add up.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TypeVar

from pydantic import BaseModel

from town.llm.port import Brain
from town.llm.task import Task

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)
T = TypeVar("T")

_CHAIN: ContextVar[list[int] | None] = ContextVar("bottown_chain", default=None)


async def chained(work: Awaitable[T]) -> tuple[T, int]:
    """Run ``work`` and return its result with the longest chain of LLM calls inside it."""
    cell = [0]
    token = _CHAIN.set(cell)
    try:
        result = await work
    finally:
        _CHAIN.reset(token)
    return result, cell[0]


class ChainCountingBrain:
    """Wraps any brain; counts chain lengths for ``chained`` (and nothing else)."""

    def __init__(self, inner: Brain) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        cell = _CHAIN.get()
        start = cell[0] if cell is not None else 0
        result = await self.inner.run(task, inputs, resident=resident)
        if cell is not None:
            cell[0] = max(cell[0], start + 1)
        return result
