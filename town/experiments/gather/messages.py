"""What the agents hear and how they move: delivery within range, moves from free text."""

from __future__ import annotations

import re
from collections.abc import Sequence

from town.experiments.gather.field import GOAL_SENDER, GatherConfig, Point, in_range


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
