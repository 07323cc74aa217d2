"""What a gather run shows: clusters, moves, how the goal's coordinates spread, message diversity.

- **Clusters**: DBSCAN (scikit-learn) over the agents' positions with ``eps`` = the reception
  range, ``min_samples`` 2 and the torus Chebyshev distance as a precomputed matrix, so agents
  that hear each other (across the wrap-around too) share a cluster; per step, how many agents
  are in a cluster of two or more. Step ``t`` is the positions before the ``t``-th move; the
  last point is the positions after the last move.
- **Moves**: the distribution of the parsed move commands, the unparsed ones (counted as stay),
  and the share of each command given by clustered agents.
- **Goal knowledge**: an agent knows the goal at a step when it receives a text naming the goal's
  coordinates (the goal's own message or another agent's) or names them in its message; per
  step, how many agents' messages name them and how many agents have known them so far; for
  each agent, the first step, from whom (``GOAL``, an agent, or ``itself`` when it named them
  unprompted) and how far from the goal it was.
- **Message diversity**: per step, the mean pairwise cosine distance between the agents'
  messages, from vectors made once per run (TF-IDF over the run's messages, or an embedder).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from town.experiments.extra import experiments_extra
from town.experiments.gather.field import (
    GOAL_SENDER,
    MOVES,
    GatherConfig,
    Point,
    distance_matrix,
    in_range,
    torus_distance,
)
from town.experiments.gather.log import AgentStep
from town.experiments.gather.messages import mentions

Vectorise = Callable[[list[str]], npt.NDArray[np.floating]]


def cluster_labels(points: Sequence[Point], eps: int, size: int) -> npt.NDArray[np.int64]:
    """DBSCAN labels over the torus (``-1``: in no cluster)."""
    if len(points) < 2:
        return np.full(len(points), -1, dtype=np.int64)
    with experiments_extra():
        from sklearn.cluster import DBSCAN  # type: ignore[import-untyped]
    found = DBSCAN(eps=eps, min_samples=2, metric="precomputed").fit(
        distance_matrix(points, size).astype(np.float64)
    )
    labels: npt.NDArray[np.int64] = found.labels_.astype(np.int64)
    return labels


def tfidf_vectors(texts: list[str]) -> npt.NDArray[np.floating]:
    """TF-IDF rows (L2-normalised) fitted on these texts: a lexical measure."""
    if not any(t.strip() for t in texts):
        return np.zeros((len(texts), 1))
    with experiments_extra():
        from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]
    matrix = TfidfVectorizer().fit_transform(texts)
    return np.asarray(matrix.toarray(), dtype=np.float64)


def mean_pairwise_distance(vectors: npt.NDArray[np.floating]) -> float:
    """Mean cosine distance over all pairs of rows (NaN for fewer than two rows)."""
    n = len(vectors)
    if n < 2:
        return math.nan
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors, dtype=np.float64), where=norms > 0)
    similarity = unit @ unit.T
    upper = np.triu_indices(n, k=1)
    return float(np.mean(1.0 - similarity[upper]))


@dataclass(frozen=True)
class FirstKnown:
    agent: str
    step: int
    source: str  # GOAL, an agent's id, or "itself"
    distance: int  # from the goal, when it learned

    @property
    def relayed(self) -> bool:
        """Learned from another agent (not from the goal, nor by naming it unprompted)."""
        return self.source not in (GOAL_SENDER, "itself")


@dataclass
class RunAnalysis:
    """Everything the plots and the table show about one run (one agent count)."""

    agents: int
    label: str
    steps: int
    clustered: list[int]
    largest: list[int]
    near_goal: list[int]
    moves: Counter[str]
    moves_clustered: Counter[str]
    unparsed: int
    mentioning: list[int]
    knowing: list[int]
    first_known: list[FirstKnown]
    diversity: list[float]
    fallbacks: int
    snapshots: dict[int, list[tuple[Point, int]]] = field(default_factory=dict)

    @property
    def first_found(self) -> int | None:
        """The first step an agent heard the goal's own message."""
        steps = [k.step for k in self.first_known if k.source == GOAL_SENDER]
        return min(steps) if steps else None

    @property
    def relayed(self) -> int:
        """Agents that first learned the goal's coordinates from another agent."""
        return sum(1 for k in self.first_known if k.relayed)


def positions_by_step(records: Sequence[AgentStep]) -> list[list[Point]]:
    """Positions before each step, then after the last one (``steps + 1`` lists)."""
    steps = max(r.step for r in records) + 1
    by_step: list[list[Point]] = [[] for _ in range(steps + 1)]
    for r in sorted(records, key=lambda r: (r.step, _index(r.agent))):
        by_step[r.step].append((r.x, r.y))
        if r.step == steps - 1:
            by_step[steps].append((r.to_x, r.to_y))
    return by_step


def _index(agent: str) -> int:
    digits = "".join(c for c in agent if c.isdigit())
    return int(digits) if digits else 0


def analyse(
    records: Sequence[AgentStep], config: GatherConfig, vectorise: Vectorise = tfidf_vectors
) -> RunAnalysis:
    if not records:
        raise ValueError("the run logged no steps")
    steps = max(r.step for r in records) + 1
    positions = positions_by_step(records)
    labels = [cluster_labels(p, config.reception, config.size) for p in positions]
    clustered = [int(np.sum(lab >= 0)) for lab in labels]
    largest = [int(np.bincount(lab[lab >= 0]).max()) if np.any(lab >= 0) else 0 for lab in labels]
    near = [
        sum(in_range(p, config.goal, config.reception, config.size) for p in ps) for ps in positions
    ]
    ordered = sorted(records, key=lambda r: (r.step, _index(r.agent)))
    moves: Counter[str] = Counter({m: 0 for m in MOVES})
    by_clustered: Counter[str] = Counter({m: 0 for m in MOVES})
    for r in ordered:
        moves[r.move] += 1
        if labels[r.step][_index(r.agent)] >= 0:
            by_clustered[r.move] += 1
    first_known = _first_known(ordered, config)
    marks = [0, steps // 4, steps // 2, (3 * steps) // 4, steps]
    snapshots = {
        t: list(zip(positions[t], (int(v) for v in labels[t]), strict=True))
        for t in sorted(set(marks))
    }
    return RunAnalysis(
        agents=config.agents,
        label=ordered[0].brain,
        steps=steps,
        clustered=clustered,
        largest=largest,
        near_goal=near,
        moves=moves,
        moves_clustered=by_clustered,
        unparsed=sum(1 for r in ordered if not r.parsed),
        mentioning=_mentioning(ordered, config, steps),
        knowing=_knowing(first_known, steps),
        first_known=first_known,
        diversity=_diversity(ordered, steps, vectorise),
        fallbacks=sum(1 for r in ordered if r.fallback),
        snapshots=snapshots,
    )


def _mentioning(records: Sequence[AgentStep], config: GatherConfig, steps: int) -> list[int]:
    counts = [0] * steps
    for r in records:
        if mentions(r.message, config.goal):
            counts[r.step] += 1
    return counts


def _first_known(records: Sequence[AgentStep], config: GatherConfig) -> list[FirstKnown]:
    known: dict[str, FirstKnown] = {}
    for r in records:
        if r.agent in known:
            continue
        source = None
        if mentions(r.message, config.goal):
            source = "itself"  # it named them before hearing them this step
        elif GOAL_SENDER in r.heard_from:
            source = GOAL_SENDER  # found it, even if a neighbour said so in the same step
        else:
            for sender, text in zip(r.heard_from, r.heard, strict=True):
                if mentions(text, config.goal):
                    source = sender
                    break
        if source is not None:
            distance = torus_distance((r.x, r.y), config.goal, config.size)
            known[r.agent] = FirstKnown(r.agent, r.step, source, distance)
    return sorted(known.values(), key=lambda k: (k.step, _index(k.agent)))


def _knowing(first: Sequence[FirstKnown], steps: int) -> list[int]:
    new = [0] * steps
    for k in first:
        new[k.step] += 1
    return [int(v) for v in np.cumsum(new)]


def _diversity(records: Sequence[AgentStep], steps: int, vectorise: Vectorise) -> list[float]:
    vectors = vectorise([r.message for r in records])
    by_step: list[list[int]] = [[] for _ in range(steps)]
    for row, r in enumerate(records):
        by_step[r.step].append(row)
    return [mean_pairwise_distance(vectors[rows]) for rows in by_step]
