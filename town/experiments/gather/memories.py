"""Memory for ``--memory``: a memory stream per agent; recalled memories join its prompts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from town.experiments.gather.field import GatherConfig
from town.experiments.gather.log import AgentStep
from town.experiments.gather.messages import mentions
from town.llm.embedders import Embedder
from town.memory.stream import MemoryStream, NewMemory, stored_text
from town.memory.vectors import InMemoryIndex, VectorIndex
from town.store.db import Store
from town.store.models import Resident, Town

MEMORY_T0 = datetime(2024, 1, 1, tzinfo=UTC)
RECALLED = 5


def step_time(step: int) -> datetime:
    """A step's game time: one step is one game hour, so recency decays over a run."""
    return MEMORY_T0 + timedelta(hours=step)


class AgentMemories:
    """One memory stream per agent, in a store of the run's own (one town row per run).

    After each step an agent remembers what it received (importance 9 for the goal's message,
    7 for a message naming the goal's coordinates, else 3), what it said and how it moved (2
    each); before each step it recalls the ``k`` best memories (the paper's score) for a query
    made of its position, the mission and what it received last.
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        run_name: str,
        names: Sequence[str],
        *,
        k: int = RECALLED,
        index: VectorIndex | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.k = k
        shared = index if index is not None else InMemoryIndex()
        with store.session() as session:
            town = Town(name=run_name, clock=MEMORY_T0)
            session.add(town)
            session.flush()
            assert town.id is not None
            rows = [Resident(town_id=town.id, name=name) for name in names]
            session.add_all(rows)
            session.flush()
            ids = [row.id for row in rows]
        self.streams: dict[str, MemoryStream] = {}
        for name, resident_id in zip(names, ids, strict=True):
            assert resident_id is not None
            self.streams[name] = MemoryStream(
                resident_id=resident_id, embedder=embedder, index=shared, namespace="gather"
            )

    def recall(self, queries: Sequence[str], step: int) -> list[list[str]]:
        vectors = self.embedder.embed(list(queries))
        with self.store.session() as session:
            return [
                [
                    found.memory.text
                    for found in stream.retrieve(
                        session, query, step_time(step), self.k, query_vector=vector
                    )
                ]
                for stream, query, vector in zip(
                    self.streams.values(), queries, vectors, strict=True
                )
            ]

    def remember(self, records: Sequence[AgentStep], config: GatherConfig) -> None:
        batches = [(r, _memories_of(r, config)) for r in records]
        texts = [stored_text(item.text) for _, items in batches for item in items]
        vectors = self.embedder.embed(texts)  # one batch for the whole step
        with self.store.session() as session:
            start = 0
            for r, items in batches:
                stop = start + len(items)
                self.streams[r.agent].add(session, items, step_time(r.step), vectors[start:stop])
                start = stop


def _memories_of(r: AgentStep, config: GatherConfig) -> list[NewMemory]:
    where = f"Step {r.step}, at ({r.x}, {r.y}),"
    items = [
        NewMemory("observation", f"{where} I received: {json.dumps(text)}", importance)
        for text, importance in _importance(r.heard, config)
    ]
    if r.message:
        items.append(NewMemory("chat", f"{where} I said: {json.dumps(r.message)}", 2))
    moved_to = f"Step {r.step}, I moved {r.move} from ({r.x}, {r.y}) to ({r.to_x}, {r.to_y})."
    items.append(NewMemory("plan", moved_to, 2))
    return items


def _importance(heard: Sequence[str], config: GatherConfig) -> list[tuple[str, int]]:
    scored: dict[str, int] = {}
    for text in heard:
        if text == config.goal_message:
            scored[text] = 9
        elif mentions(text, config.goal):
            scored[text] = 7
        else:
            scored.setdefault(text, 3)
    return list(scored.items())
