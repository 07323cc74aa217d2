"""A gather run's plots, one PNG each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from town.experiments.extra import experiments_extra
from town.experiments.figures import new_figure, save_png
from town.experiments.gather.analysis import RunAnalysis
from town.experiments.gather.field import MOVES, GatherConfig


def plot_clusters(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = new_figure(10, 4)
    left, right = figure.subplots(1, 2)
    for a in runs:
        left.plot(range(a.steps + 1), a.clustered, label=f"{a.agents} agents")
        right.plot(range(a.steps + 1), a.near_goal, label=f"{a.agents} agents")
    left.set(title="agents in a cluster (DBSCAN)", xlabel="step", ylabel="agents")
    right.set(title="agents within range of the goal", xlabel="step", ylabel="agents")
    left.legend()
    figure.suptitle(f"Gather: clustering ({runs[0].label})")
    return save_png(figure, path)


def plot_moves(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = new_figure(10, 4)
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
    return save_png(figure, path)


def plot_goal_spread(runs: Sequence[RunAnalysis], path: Path) -> Path:
    figure = new_figure(10, 4)
    left, right = figure.subplots(1, 2)
    for a in runs:
        (line,) = left.plot(range(a.steps), a.knowing, label=f"{a.agents} agents: have known")
        left.plot(range(a.steps), a.mentioning, linestyle=":", color=line.get_color())
        for relayed, marker in ((False, "o"), (True, "x")):
            known = [k for k in a.first_known if k.relayed == relayed]
            steps, distances = [k.step for k in known], [k.distance for k in known]
            right.scatter(steps, distances, marker=marker, color=line.get_color())
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
    return save_png(figure, path)


def plot_diversity(runs: Sequence[RunAnalysis], path: Path, measure: str) -> Path:
    figure = new_figure(6, 4)
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
    return save_png(figure, path)


def plot_positions(runs: Sequence[RunAnalysis], config: GatherConfig, path: Path) -> Path:
    columns = max(len(a.snapshots) for a in runs)
    figure = new_figure(2.4 * columns, 2.5 * len(runs))
    grid = np.atleast_2d(np.asarray(figure.subplots(len(runs), columns, squeeze=False)))
    half = config.reception
    with experiments_extra():
        from matplotlib.patches import Rectangle
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
    return save_png(figure, path)


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
