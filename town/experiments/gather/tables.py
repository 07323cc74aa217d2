"""A gather run's tables: the summary (CSV and Markdown), the per-step series, first knowledge."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from town.experiments.gather.analysis import RunAnalysis
from town.experiments.gather.field import MOVES

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
