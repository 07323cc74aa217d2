"""The offline brain's answers to the gather experiment (Takata et al.): a plain, fixed policy.

The policy reads only what the prompt holds (the agent's id and position, the messages it
received and, with ``--memory``, what it remembers) and answers in words, as a model would, so
the experiment's move parser is exercised:

1. An agent that knows where the goal is (it received ``You found the GOAL (x, y)!``, or a
   message or memory names the goal's coordinates) says so, and heads there along the shorter
   way round the torus, the longer axis first; at the goal it stays.
2. Otherwise it says where it is and that it has not found the goal, and searches: it walks
   diagonally in a heading of its own (up-right, up-left, down-right or down-left, picked by a
   stable hash of its id, so identical agents still spread out), taking the vertical step when
   ``x + y`` is even and the horizontal one when it is odd; it never stands still, and in 100
   steps it crosses half the field each way.

It has no memory of its own: without ``--memory`` an agent forgets the goal as soon as no one
near it mentions the goal any more.
"""

from __future__ import annotations

import hashlib
import re

from town.experiments.gather import schemas as s
from town.llm.offline.hearing import Hearing

HEADINGS = (("up", "right"), ("up", "left"), ("down", "right"), ("down", "left"))
_GOAL_AT = re.compile(r"\bgoal\b[^()\d]{0,30}\(\s*(\d{1,4})\s*,\s*(\d{1,4})\s*\)", re.IGNORECASE)
_FOUND = re.compile(r"\byou found the goal\b", re.IGNORECASE)


def known_goal(texts: list[str]) -> tuple[int, int] | None:
    """The goal's coordinates if any text names them ("... goal ... (50, 50)")."""
    for text in texts:
        found = _GOAL_AT.search(text)
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


def search_move(agent: str, x: int, y: int) -> str:
    """The searcher's next step along its own diagonal heading (a stable hash of its id)."""
    digest = hashlib.sha256(agent.encode("utf-8")).digest()
    vertical, horizontal = HEADINGS[digest[0] % len(HEADINGS)]
    return vertical if (x + y) % 2 == 0 else horizontal


def toward(here: tuple[int, int], there: tuple[int, int], size: int) -> str:
    """The move that brings ``here`` closer to ``there`` on a size x size torus."""
    dx = _shortest(there[0] - here[0], size)
    dy = _shortest(there[1] - here[1], size)
    if dx == 0 and dy == 0:
        return "stay"
    if abs(dx) >= abs(dy):
        return "right" if dx > 0 else "left"
    return "up" if dy > 0 else "down"


def _shortest(delta: int, size: int) -> int:
    delta %= size
    return delta - size if delta > size // 2 else delta


def _texts(inputs: s.GatherInput) -> list[str]:
    memories = inputs.memories if isinstance(inputs, s.GatherMemoryInput) else []
    return [*inputs.received, *memories]


def gather_message(inputs: s.GatherInput, hearing: Hearing) -> s.GatherMessageResult:
    me = f"{inputs.agent} here, at ({inputs.x}, {inputs.y})."
    goal = known_goal(_texts(inputs))
    if goal is not None and any(_FOUND.search(t) for t in inputs.received):
        text = f"{me} I found the GOAL at {_pair(goal)}! Come to {_pair(goal)} and gather with me."
    elif goal is not None:
        text = f"{me} I heard the goal is at {_pair(goal)}. I am heading there; follow me."
    elif inputs.received:
        text = f"{me} I have not found the goal yet. I hear you; let's keep searching."
    else:
        text = f"{me} No sign of the goal yet. Is anyone near the goal?"
    return s.GatherMessageResult(message=text)


def gather_move(inputs: s.GatherInput, hearing: Hearing) -> s.GatherMoveResult:
    here = (inputs.x, inputs.y)
    goal = known_goal(_texts(inputs))
    if goal is None:
        text = (
            f"No news of the goal, so I keep exploring: I move {search_move(inputs.agent, *here)}."
        )
    else:
        move = toward(here, goal, inputs.size)
        if move == "stay":
            text = f"I am at the goal {_pair(goal)}, so I stay here and wait for the others."
        else:
            text = f"The goal is at {_pair(goal)} and I am at {_pair(here)}, so I move {move}."
    return s.GatherMoveResult(move=text)


def _pair(point: tuple[int, int]) -> str:
    return f"({point[0]}, {point[1]})"
