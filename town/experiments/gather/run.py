"""One gather run: the agents speak, hear, choose and move, step by step."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from town.experiments.gather import schemas as s
from town.experiments.gather.field import GatherConfig, Point, in_range, moved, start_positions
from town.experiments.gather.log import AgentStep, CallLedger
from town.experiments.gather.memories import AgentMemories
from town.experiments.gather.messages import deliver, parse_move
from town.experiments.gather.tasks import (
    GATHER_MESSAGE,
    GATHER_MESSAGE_MEMORY,
    GATHER_MOVE,
    GATHER_MOVE_MEMORY,
    FreeTextTask,
)
from town.llm.port import Brain

OFFLINE_LABEL = "offline brain"


@dataclass
class GatherRun:
    """One run's state between steps."""

    config: GatherConfig
    brain: Brain
    label: str = OFFLINE_LABEL
    memories: AgentMemories | None = None
    ledger: CallLedger | None = None
    names: list[str] = field(init=False)
    positions: list[Point] = field(init=False)
    earlier: list[list[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [f"agent{i}" for i in range(self.config.agents)]
        self.positions = start_positions(self.config)
        self.earlier = [[] for _ in self.names]

    async def run(
        self, log: TextIO | None = None, on_step: Callable[[int], None] | None = None
    ) -> list[AgentStep]:
        """All steps; each step's lines are written (and flushed) as soon as it ends."""
        records: list[AgentStep] = []
        for step in range(self.config.steps):
            done = await self.step(step)
            records.extend(done)
            if log is not None:
                log.writelines(r.to_json() + "\n" for r in done)
                log.flush()
            if on_step is not None:
                on_step(step + 1)
        return records

    async def step(self, step: int) -> list[AgentStep]:
        config = self.config
        recalled = self._recall(step)
        speak, choose = (
            (GATHER_MESSAGE_MEMORY, GATHER_MOVE_MEMORY)
            if self.memories is not None
            else (GATHER_MESSAGE, GATHER_MOVE)
        )
        spoken = await self._think(speak, self.earlier, recalled)
        messages = [" ".join(r.message.split()) for r in spoken]
        said_fallback = self._fallbacks(speak)
        inboxes = deliver(self.names, self.positions, messages, config)
        heard = [[text for _, text in box] for box in inboxes]
        chosen = await self._think(choose, heard, recalled)
        move_fallback = self._fallbacks(choose)
        records = []
        for i, name in enumerate(self.names):
            reply = chosen[i].move.strip()
            move, parsed = parse_move(reply)
            here = self.positions[i]
            there = moved(here, move, config.size)
            records.append(
                AgentStep(
                    brain=self.label,
                    agents=config.agents,
                    step=step,
                    agent=name,
                    x=here[0],
                    y=here[1],
                    message=messages[i],
                    heard=heard[i],
                    heard_from=[sender for sender, _ in inboxes[i]],
                    near_goal=in_range(here, config.goal, config.reception, config.size),
                    reply=reply,
                    move=move,
                    parsed=parsed,
                    to_x=there[0],
                    to_y=there[1],
                    memories=recalled[i],
                    fallback=said_fallback[i] or move_fallback[i],
                )
            )
        if self.memories is not None:
            self.memories.remember(records, config)
        self.positions = [(r.to_x, r.to_y) for r in records]
        self.earlier = heard
        return records

    def _recall(self, step: int) -> list[list[str]]:
        if self.memories is None:
            return [[] for _ in self.names]
        queries = [
            " ".join([f"{name} at ({x}, {y}): {self.config.mission}.", *self.earlier[i]])
            for i, (name, (x, y)) in enumerate(zip(self.names, self.positions, strict=True))
        ]
        return self.memories.recall(queries, step)

    async def _think(
        self,
        task: FreeTextTask[Any, Any],
        received: list[list[str]],
        recalled: list[list[str]],
    ) -> list[Any]:
        calls = []
        for i, name in enumerate(self.names):
            x, y = self.positions[i]
            fields: dict[str, Any] = {
                "agent": name,
                "x": x,
                "y": y,
                "size": self.config.size,
                "mission": self.config.mission,
                "received": received[i],
            }
            inputs: s.GatherInput
            if self.memories is not None:
                inputs = s.GatherMemoryInput(**fields, memories=recalled[i])
            else:
                inputs = s.GatherInput(**fields)
            calls.append(self.brain.run(task, inputs, resident=name))
        return list(await asyncio.gather(*calls))

    def _fallbacks(self, task: FreeTextTask[Any, Any]) -> list[bool]:
        if self.ledger is None:
            return [False for _ in self.names]
        return [self.ledger.last_fallback.get((task.name, n), False) for n in self.names]
