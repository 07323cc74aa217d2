"""Helpers shared by test modules: the LLM tasks' sample inputs, and another process that
overtakes the engine's units of work."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlmodel import Session

from town.llm.task import Task
from town.store.db import Store
from town.tick.engine import Engine

SAMPLES: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "llm_samples.json").read_text("utf-8")
)


def sample(task: Task[Any, Any], **changes: Any) -> Any:
    """The task's sample inputs (tests/data/llm_samples.json), with ``changes``."""
    return task.input_model.model_validate({**SAMPLES[task.name], **changes})


def overtaking(times: list[int]) -> Callable[..., Any]:
    """``Engine.unit`` whose next ``times[0]`` units that change the town another process
    overtakes: it raises the town's revision on connections of its own (a worker's tick
    committing, say) meanwhile."""
    unit = Engine.unit

    @contextmanager
    def overtaken(self: Engine, **kw: Any) -> Iterator[Session]:
        with unit(self, **kw) as session:
            if times[0] > 0 and kw.get("changes_town", True):
                times[0] -= 1
                other = Store.open(self.store.url)
                try:
                    with other.session() as s:
                        s.connection().exec_driver_sql(
                            "UPDATE town SET revision = revision + 1 WHERE id = ?",
                            (self.town_id,),
                        )
                        s.commit()
                finally:
                    other.dispose()
            yield session

    return overtaken


async def settled(condition: Callable[[], bool], *, turns: int = 100_000) -> None:
    """Let the event loop run until ``condition`` holds (a bounded number of turns, not a
    time: a busy machine only makes it slower)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never came about")


class Composed:
    """One model's brain as the town composes it (``town.llm.chain.think_with``), for the
    gateway's tests: ``run`` goes through the whole chain (report, fallback, gateway); the
    gateway's own attributes (``mode``, ``pacer``, ``response_format_kind``, ...) read
    through; ``report`` is the chain's."""

    def __init__(self, client: Any, model: str, **options: Any) -> None:
        from town.llm.chain import think_with

        self.brain, self.handles = think_with(client, model, **options)
        self.gateway = self.handles.models[0]
        self.report = self.handles.report
        self.name = self.brain.name

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        return await self.brain.run(task, inputs, resident=resident)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "pace_s":  # the gateway's own (as Handles.keep_pace sets it)
            setattr(self.gateway, name, value)
        else:
            super().__setattr__(name, value)
