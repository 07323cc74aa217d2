"""A gather run's tables: the summary (CSV and Markdown), the per-step series, first knowledge."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from town.experiments.files import columns, write_csv
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


SERIES_COLUMNS = (
    *("agents", "step", "clustered", "largest", "near_goal"),
    *("naming_goal", "have_known_goal", "diversity"),
)
FIRST_KNOWN_COLUMNS = ("agents", "agent", "step", "source", "distance_from_goal")


def write_tables(runs: Sequence[RunAnalysis], out: Path) -> list[Path]:
    """``summary.csv``, ``summary.md``, the per-step ``series.csv`` and ``first_known.csv``."""
    rows = [summary_row(a) for a in runs]
    summary = write_csv(out / "summary.csv", SUMMARY_COLUMNS, columns(rows, SUMMARY_COLUMNS))
    markdown = out / "summary.md"
    markdown.write_text(markdown_table(rows), encoding="utf-8")
    series = write_csv(out / "series.csv", SERIES_COLUMNS, (r for a in runs for r in _series(a)))
    known = [[a.agents, k.agent, k.step, k.source, k.distance] for a in runs for k in a.first_known]
    first = write_csv(out / "first_known.csv", FIRST_KNOWN_COLUMNS, known)
    return [summary, markdown, series, first]


def _series(a: RunAnalysis) -> list[list[object]]:
    """One row per step, and one for the positions after the last move."""
    rows: list[list[object]] = []
    for t in range(a.steps + 1):
        inside = t < a.steps
        diversity = a.diversity[t] if inside else math.nan
        rows.append(
            [
                *(a.agents, t, a.clustered[t], a.largest[t], a.near_goal[t]),
                a.mentioning[t] if inside else "",
                a.knowing[t] if inside else "",
                "" if math.isnan(diversity) else f"{diversity:.4f}",
            ]
        )
    return rows
