"""The gather setting: one run's configuration, the torus field and its distances."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MISSION = "gather at the goal with as many other agents as possible"
GOAL_SENDER = "GOAL"
MOVES = ("up", "down", "left", "right", "stay")
STEP_OF = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0), "stay": (0, 0)}

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
