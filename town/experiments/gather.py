"""The gather experiment of Takata et al.: identical LLM agents on a torus, a goal, messages.

A ``size`` x ``size`` field with periodic borders, the goal at ``goal``. Each step:

1. every agent writes a message from its id, its position, the mission and everything it
   received in the step before (``No Messages`` when nothing);
2. messages reach the agents within reception range (a square: ``|dx| <= r`` and ``|dy| <= r``
   in torus distance, i.e. Chebyshev distance ``<= r``), and an agent within range of the goal
   receives ``You found the GOAL (50, 50)!``;
3. every agent chooses a move (``up``, ``down``, ``left``, ``right``, ``stay``), parsed from its
   free text: the first direction word; none -> ``stay``, counted as unparsed;
4. all agents move at once (``up`` is y + 1, ``right`` is x + 1, wrapping around).

The agents' thoughts within a step run concurrently through the :class:`~town.llm.port.Brain`
port. Every agent's step is logged as one JSON line (:class:`AgentStep`). With memory
(``GatherConfig.memory``) each agent keeps a memory stream (:class:`AgentMemories`) and its
retrieved memories join its prompts: the next step the authors proposed.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TextIO

import numpy as np
import numpy.typing as npt

from town.llm import schemas as s
from town.llm.port import Brain
from town.llm.tasks import (
    GATHER_MESSAGE,
    GATHER_MESSAGE_MEMORY,
    GATHER_MOVE,
    GATHER_MOVE_MEMORY,
    FreeTextTask,
)
from town.llm.usage import UsageTally
from town.memory.embedders import Embedder
from town.memory.stream import MemoryStream, NewMemory, clean_text
from town.memory.vectors import InMemoryIndex, VectorIndex
from town.store.db import Store
from town.store.models import Resident, Town

MISSION = "gather at the goal with as many other agents as possible"
NO_MESSAGES = "No Messages"
GOAL_SENDER = "GOAL"
MOVES = ("up", "down", "left", "right", "stay")
STEP_OF = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0), "stay": (0, 0)}
OFFLINE_LABEL = "offline brain"

Point = tuple[int, int]


@dataclass(frozen=True)
class GatherConfig:
    """One run: ``agents`` agents for ``steps`` steps; the rest is the paper's setting."""

    agents: int
    steps: int = 100
    seed: int = 0
    size: int = 100
    goal: Point = (50, 50)
    reception: int = 5
    mission: str = MISSION
    memory: bool = False

    def __post_init__(self) -> None:
        if self.agents < 1:
            raise ValueError(f"a run needs at least one agent, not {self.agents}")
        if self.steps < 1:
            raise ValueError(f"a run needs at least one step, not {self.steps}")
        if self.size < 2 or not 0 <= self.reception < self.size:
            raise ValueError(f"reception range {self.reception} does not fit a {self.size} field")

    @property
    def goal_message(self) -> str:
        return f"You found the GOAL ({self.goal[0]}, {self.goal[1]})!"


# -- the torus ---------------------------------------------------------------------------------


def torus_delta(a: int, b: int, size: int) -> int:
    """How far apart two coordinates are along one axis, the shorter way round."""
    d = abs(a - b) % size
    return min(d, size - d)


def torus_distance(p: Point, q: Point, size: int) -> int:
    """Chebyshev distance on the torus: the square reception range is ``distance <= r``."""
    return max(torus_delta(p[0], q[0], size), torus_delta(p[1], q[1], size))


def in_range(p: Point, q: Point, reach: int, size: int) -> bool:
    return torus_distance(p, q, size) <= reach


def distance_matrix(points: Sequence[Point], size: int) -> npt.NDArray[np.int64]:
    """Every pair's torus (Chebyshev) distance, for DBSCAN's precomputed metric."""
    xy = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    d = np.abs(xy[:, None, :] - xy[None, :, :]) % size
    result: npt.NDArray[np.int64] = np.minimum(d, size - d).max(axis=2)
    return result


def moved(p: Point, move: str, size: int) -> Point:
    dx, dy = STEP_OF[move]
    return (p[0] + dx) % size, (p[1] + dy) % size


def start_positions(config: GatherConfig) -> list[Point]:
    """Random starts from the seed; a run with fewer agents gets the first of the same starts."""
    rng = random.Random(config.seed)
    return [(rng.randrange(config.size), rng.randrange(config.size)) for _ in range(config.agents)]


# -- messages and moves ------------------------------------------------------------------------


def deliver(
    names: Sequence[str], positions: Sequence[Point], messages: Sequence[str], config: GatherConfig
) -> list[list[tuple[str, str]]]:
    """Each agent's inbox as (sender, text): the others in range, then the goal if near it."""
    boxes: list[list[tuple[str, str]]] = []
    for i, here in enumerate(positions):
        box = [
            (names[j], messages[j])
            for j, there in enumerate(positions)
            if j != i and messages[j] and in_range(here, there, config.reception, config.size)
        ]
        if in_range(here, config.goal, config.reception, config.size):
            box.append((GOAL_SENDER, config.goal_message))
        boxes.append(box)
    return boxes


_MOVE_WORDS = {
    **dict.fromkeys(("up", "upward", "upwards", "north"), "up"),
    **dict.fromkeys(("down", "downward", "downwards", "south"), "down"),
    **dict.fromkeys(("left", "leftward", "leftwards", "west"), "left"),
    **dict.fromkeys(("right", "rightward", "rightwards", "east"), "right"),
    **dict.fromkeys(("stay", "stays", "staying", "remain", "remains", "remaining"), "stay"),
}
_JOINERS = frozenset({"or", "and"})
_WORD = re.compile(r"[a-z]+")


def parse_move(text: str) -> tuple[str, bool]:
    """The first direction word of a free-text reply, and whether there was one.

    "I think I'll head up." -> ("up", True); nothing recognisable -> ("stay", False). Synonyms
    count (north, upwards, remain...). Skipped: "right" in "all right", "right now", "right
    away"; and an echo of the options (three or more different directions in a row, joined only
    by punctuation, "or" or "and", as in ``"up", "down", "left", "right" or "stay"``).
    """
    words = _WORD.findall(text.lower())
    runs: list[list[int]] = []  # indexes of direction words, grouped into runs
    joined = False
    for i, word in enumerate(words):
        if word in _MOVE_WORDS and not _idiom(words, i):
            if joined and runs:
                runs[-1].append(i)
            else:
                runs.append([i])
            joined = True
        elif word not in _JOINERS:
            joined = False
    for run in runs:
        if len({_MOVE_WORDS[words[i]] for i in run}) >= 3:
            continue  # the options, echoed
        return _MOVE_WORDS[words[run[0]]], True
    return "stay", False


def _idiom(words: list[str], i: int) -> bool:
    if words[i] != "right":
        return False
    before = words[i - 1] if i > 0 else ""
    after = words[i + 1] if i + 1 < len(words) else ""
    return before == "all" or after in ("now", "away")


def mentions(text: str, point: Point) -> bool:
    """Whether a text names these coordinates ("50, 50", "(50,50)", "50 , 50")."""
    return re.search(rf"(?<!\d){point[0]}\s*,\s*{point[1]}(?!\d)", text) is not None


# -- the log -----------------------------------------------------------------------------------


@dataclass
class AgentStep:
    """One agent in one step: one line of the JSONL log."""

    brain: str
    agents: int
    step: int
    agent: str
    x: int
    y: int
    message: str
    heard: list[str]
    heard_from: list[str]
    near_goal: bool
    reply: str
    move: str
    parsed: bool
    to_x: int
    to_y: int
    memories: list[str] = field(default_factory=list)
    fallback: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> AgentStep:
        data: dict[str, Any] = json.loads(line)
        return cls(**data)


def read_log(path: Any) -> list[AgentStep]:
    with open(path, encoding="utf-8") as f:
        return [AgentStep.from_json(line) for line in f if line.strip()]


class CallLedger(UsageTally):
    """A usage tally that also keeps, per task and agent, whether its latest answer came from
    the gateway's offline fallback (an LLM failure), so the log can say so step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.last_fallback: dict[tuple[str, str], bool] = {}

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        super().record(task, resident, calls, prompt_tokens, completion_tokens, fallback)
        if resident is not None:
            self.last_fallback[(task, resident)] = fallback


# -- one run -----------------------------------------------------------------------------------


class Memories(Protocol):
    """What a run needs of a memory store (:class:`AgentMemories`)."""

    def recall(self, queries: Sequence[str], step: int) -> list[list[str]]: ...

    def remember(self, records: Sequence[AgentStep], config: GatherConfig) -> None: ...


@dataclass
class GatherRun:
    """One run's state between steps."""

    config: GatherConfig
    brain: Brain
    label: str = OFFLINE_LABEL
    memories: Memories | None = None
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


# -- memory (--memory) -------------------------------------------------------------------------

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
        texts = [clean_text(item.text) for _, items in batches for item in items]
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
