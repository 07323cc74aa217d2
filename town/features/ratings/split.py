"""A live A/B of two models: part of the town thinks with a second model. By resident (the
default), each resident always thinks with the same one, chosen by a stable hash of its name;
by message, each call picks one at random. Each answer is stamped by the model that made it
(:mod:`town.llm.made`), and the town keeps the stamp with the resident's words. Residents are
never told which model they are."""

from __future__ import annotations

import hashlib
import random
from typing import Literal

from town.llm.port import Brain, I, R
from town.llm.task import Task

Split = Literal["resident", "message"]


class SplitBrain:
    """Two brains behind one: ``first`` for half the town, ``second`` for the other half."""

    def __init__(
        self,
        first: tuple[str, Brain],
        second: tuple[str, Brain],
        *,
        by: Split = "resident",
        rng: random.Random | None = None,
    ) -> None:
        if first[0] == second[0]:
            raise ValueError(f"an A/B test needs two different models, not {first[0]!r} twice")
        self.models, self._brains = (first[0], second[0]), (first[1], second[1])
        self.by = by
        self.name = f"split:{first[0]}|{second[0]}"
        self._rng = rng or random.Random()

    def side_of(self, resident: str) -> int:
        """A resident's side when split by resident: stable across runs and processes."""
        return hashlib.sha256(resident.encode()).digest()[0] % 2

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        if resident is None:
            side = 0  # the town's own thinking (no resident): the first model
        elif self.by == "resident":
            side = self.side_of(resident)
        else:
            side = self._rng.randrange(2)
        return await self._brains[side].run(task, inputs, resident=resident)
