"""Nothing is held while the LLM thinks: no database connection (and so no transaction, no
SQLite lock) is checked out on the event loop while a visitor's answer or a founding's ratings
are thought. (A visitor's words are written on a worker thread meanwhile, by design: those
connections are not the thinking's.)"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import event

from tests.factories import CAFE_PAIR, at_cafe, make_engine, until
from tests.fakes.brain import ScriptedBrain
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.task import Task
from town.store.db import Store


class HoldWatchingBrain(ScriptedBrain):
    """A scripted brain that notes, for each call, how many connections the event loop's
    thread had checked out of the store's pool."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.out: dict[int, int] = {}  # id of a connection record -> the thread holding it
        self.held: list[tuple[str, int]] = []
        event.listen(store.engine, "checkout", self._checkout)
        event.listen(store.engine, "checkin", self._checkin)

    def _checkout(self, _dbapi: Any, record: Any, _proxy: Any) -> None:
        self.out[id(record)] = threading.get_ident()

    def _checkin(self, _dbapi: Any, record: Any) -> None:
        self.out.pop(id(record), None)

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        here = threading.get_ident()
        self.held.append((task.name, sum(1 for t in self.out.values() if t == here)))
        return await super().run(task, inputs, resident=resident)


async def test_founding_rates_the_seeds_holding_no_connection(store: Store) -> None:
    brain = HoldWatchingBrain(store)
    await make_engine(store, brain)
    ratings = [held for task, held in brain.held if task == "rate_importance"]
    assert ratings and set(ratings) == {0}


async def test_a_visitors_answer_is_thought_holding_no_connection(store: Store) -> None:
    brain = HoldWatchingBrain(store)
    engine = await make_engine(store, brain)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    brain.held.clear()
    result = await say(engine, Visit.of("Hobbs Cafe", "Alice", "Hi Klaus, what are you reading?"))
    assert result.replies
    assert [held for task, held in brain.held if task == "utter"] == [0]
