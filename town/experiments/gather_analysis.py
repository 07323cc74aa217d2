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

import csv
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from sklearn.cluster import DBSCAN  # type: ignore[import-untyped]
from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]

from town.experiments.gather import (
    GOAL_SENDER,
    MOVES,
    AgentStep,
    GatherConfig,
    Point,
    distance_matrix,
    mentions,
    torus_distance,
)

Vectorise = Callable[[list[str]], npt.NDArray[np.floating]]


def cluster_labels(points: Sequence[Point], eps: int, size: int) -> npt.NDArray[np.int64]:
    """DBSCAN labels over the torus (``-1``: in no cluster)."""
    if len(points) < 2:
        return np.full(len(points), -1, dtype=np.int64)
    found = DBSCAN(eps=eps, min_samples=2, metric="precomputed").fit(
        distance_matrix(points, size).astype(np.float64)
    )
    labels: npt.NDArray[np.int64] = found.labels_.astype(np.int64)
    return labels


def tfidf_vectors(texts: list[str]) -> npt.NDArray[np.floating]:
    """TF-IDF rows (L2-normalised) fitted on these texts: a lexical measure."""
    if not any(t.strip() for t in texts):
        return np.zeros((len(texts), 1))
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
        return sum(1 for k in self.first_known if k.source not in (GOAL_SENDER, "itself"))


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
        sum(1 for p in ps if torus_distance(p, config.goal, config.size) <= config.reception)
        for ps in positions
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


# -- the summary table ---------------------------------------------------------------------------

SUMMARY_COLUMNS = (
    "agents",
    "brain",
    "steps",
    "clustered at end",
    "largest cluster at end",
    "near goal at end",
    "mean clustered",
    "knew the goal",
    "first found (step)",
    "learned by relay",
    *(f"{m} %" for m in MOVES),
    "unparsed",
    "down by clustered %",
    "diversity first step",
    "diversity last step",
    "fallback answers",
)


def summary_row(a: RunAnalysis) -> dict[str, str]:
    total = sum(a.moves.values()) or 1
    down = a.moves["down"]
    first, last = a.diversity[0], a.diversity[-1]
    row = {
        "agents": str(a.agents),
        "brain": a.label,
        "steps": str(a.steps),
        "clustered at end": f"{a.clustered[-1]}/{a.agents}",
        "largest cluster at end": str(a.largest[-1]),
        "near goal at end": f"{a.near_goal[-1]}/{a.agents}",
        "mean clustered": f"{np.mean(a.clustered):.1f}",
        "knew the goal": f"{len(a.first_known)}/{a.agents}",
        "first found (step)": "-" if a.first_found is None else str(a.first_found),
        "learned by relay": str(a.relayed),
        **{f"{m} %": f"{100 * a.moves[m] / total:.1f}" for m in MOVES},
        "unparsed": str(a.unparsed),
        "down by clustered %": "-" if not down else f"{100 * a.moves_clustered['down'] / down:.0f}",
        "diversity first step": "-" if math.isnan(first) else f"{first:.3f}",
        "diversity last step": "-" if math.isnan(last) else f"{last:.3f}",
        "fallback answers": str(a.fallbacks),
    }
    return row


def markdown_table(rows: Sequence[dict[str, str]]) -> str:
    head = "| " + " | ".join(SUMMARY_COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in SUMMARY_COLUMNS) + "|"
    body = ["| " + " | ".join(row[c] for c in SUMMARY_COLUMNS) + " |" for row in rows]
    return "\n".join([head, rule, *body]) + "\n"


# -- the plots (PNG, matplotlib's Agg canvas; no pyplot, no global state) ------------------------

PLOTS = ("clusters", "moves", "goal_spread", "diversity", "positions")


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, format="png")
    return path


def plot_clusters(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = _figure(10, 4)
    left, right = figure.subplots(1, 2)
    for a in runs:
        left.plot(range(a.steps + 1), a.clustered, label=f"{a.agents} agents")
        right.plot(range(a.steps + 1), a.near_goal, label=f"{a.agents} agents")
    left.set(title="agents in a cluster (DBSCAN)", xlabel="step", ylabel="agents")
    right.set(title="agents within range of the goal", xlabel="step", ylabel="agents")
    left.legend()
    figure.suptitle(f"Gather: clustering ({runs[0].label})")
    return _save(figure, path)


def plot_moves(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = _figure(10, 4)
    left, right = figure.subplots(1, 2)
    width = 0.8 / len(runs)
    for k, a in enumerate(runs):
        total = sum(a.moves.values()) or 1
        xs = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(MOVES))]
        left.bar(xs, [100 * a.moves[m] / total for m in MOVES], width, label=f"{a.agents} agents")
    left.set_xticks(range(len(MOVES)), list(MOVES))
    left.set(title="move commands", ylabel="% of commands")
    left.legend()
    pooled = Counter[str]()
    pooled_clustered = Counter[str]()
    for a in runs:
        pooled.update(a.moves)
        pooled_clustered.update(a.moves_clustered)
    shares = [100 * pooled_clustered[m] / pooled[m] if pooled[m] else 0.0 for m in MOVES]
    right.bar(list(MOVES), shares, color="tab:gray")
    right.set(title="given by clustered agents", ylabel="% of each command", ylim=(0, 100))
    unparsed = sum(a.unparsed for a in runs)
    figure.suptitle(f"Gather: moves ({runs[0].label}; unparsed, counted as stay: {unparsed})")
    return _save(figure, path)


def plot_goal_spread(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = _figure(10, 4)
    left, right = figure.subplots(1, 2)
    for a in runs:
        (line,) = left.plot(range(a.steps), a.knowing, label=f"{a.agents} agents: have known")
        left.plot(range(a.steps), a.mentioning, linestyle=":", color=line.get_color())
        direct = [k for k in a.first_known if k.source in (GOAL_SENDER, "itself")]
        relayed = [k for k in a.first_known if k.source not in (GOAL_SENDER, "itself")]
        right.scatter(
            [k.step for k in direct],
            [k.distance for k in direct],
            marker="o",
            color=line.get_color(),
        )
        right.scatter(
            [k.step for k in relayed],
            [k.distance for k in relayed],
            marker="x",
            color=line.get_color(),
        )
    left.set(
        title="agents knowing the goal (dotted: naming it this step)",
        xlabel="step",
        ylabel="agents",
    )
    left.legend(fontsize="small")
    right.set(
        title="first knowledge: o from the goal, x by relay",
        xlabel="step",
        ylabel="distance from the goal",
    )
    figure.suptitle(f"Gather: how the goal's coordinates spread ({runs[0].label})")
    return _save(figure, path)


def plot_diversity(runs: Sequence[RunAnalysis], path: Path, measure: str) -> Path:
    figure = _figure(6, 4)
    axes = figure.subplots()
    for a in runs:
        axes.plot(range(a.steps), a.diversity, label=f"{a.agents} agents")
    axes.set(
        title=f"mean pairwise cosine distance of messages ({measure})",
        xlabel="step",
        ylabel="distance",
    )
    axes.legend()
    figure.suptitle(f"Gather: message diversity ({runs[0].label})")
    return _save(figure, path)


def plot_positions(runs: Sequence[RunAnalysis], config: GatherConfig, path: Path) -> Path:
    columns = max(len(a.snapshots) for a in runs)
    figure = _figure(2.4 * columns, 2.5 * len(runs))
    grid = np.atleast_2d(np.asarray(figure.subplots(len(runs), columns, squeeze=False)))
    half = config.reception
    for row, a in enumerate(runs):
        for col, (step, agents) in enumerate(sorted(a.snapshots.items())):
            axes = grid[row, col]
            for (x, y), label in agents:
                color = "lightgray" if label < 0 else f"C{label % 10}"
                axes.add_patch(
                    Rectangle(
                        (x - half, y - half),
                        2 * half,
                        2 * half,
                        color=color,
                        alpha=0.25,
                        linewidth=0,
                    )
                )
                axes.plot(x, y, "o", markersize=3, color="gray" if label < 0 else color)
            axes.plot(*config.goal, "k*", markersize=8)
            axes.set(
                xlim=(0, config.size), ylim=(0, config.size), xticks=[], yticks=[], aspect="equal"
            )
            axes.set_title(f"{a.agents} agents, step {step}", fontsize="small")
    figure.suptitle(f"Gather: positions, coloured by cluster ({runs[0].label})")
    return _save(figure, path)


def write_plots(
    runs: Sequence[RunAnalysis], config: GatherConfig, out: Path, measure: str
) -> list[Path]:
    """Every plot as ``<out>/<name>.png``."""
    return [
        plot_clusters(runs, out / "clusters.png"),
        plot_moves(runs, out / "moves.png"),
        plot_goal_spread(runs, out / "goal_spread.png"),
        plot_diversity(runs, out / "diversity.png", measure),
        plot_positions(runs, config, out / "positions.png"),
    ]


# -- the tables -----------------------------------------------------------------------------------


def write_tables(runs: Sequence[RunAnalysis], out: Path) -> list[Path]:
    """``summary.csv``, ``summary.md``, the per-step ``series.csv`` and ``first_known.csv``."""
    rows = [summary_row(a) for a in runs]
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        table = csv.DictWriter(f, fieldnames=list(SUMMARY_COLUMNS))
        table.writeheader()
        table.writerows(rows)
    (out / "summary.md").write_text(markdown_table(rows), encoding="utf-8")
    with (out / "series.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "agents",
                "step",
                "clustered",
                "largest",
                "near_goal",
                "naming_goal",
                "have_known_goal",
                "diversity",
            ]
        )
        for a in runs:
            for t in range(a.steps + 1):
                inside = t < a.steps
                writer.writerow(
                    [
                        a.agents,
                        t,
                        a.clustered[t],
                        a.largest[t],
                        a.near_goal[t],
                        a.mentioning[t] if inside else "",
                        a.knowing[t] if inside else "",
                        f"{a.diversity[t]:.4f}"
                        if inside and not math.isnan(a.diversity[t])
                        else "",
                    ]
                )
    with (out / "first_known.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["agents", "agent", "step", "source", "distance_from_goal"])
        for a in runs:
            for k in a.first_known:
                writer.writerow([a.agents, k.agent, k.step, k.source, k.distance])
    return [out / n for n in ("summary.csv", "summary.md", "series.csv", "first_known.csv")]
