"""What ``bottown eval society`` leaves behind: every answer (JSON lines and CSV), the summary,
and two plots (diffusion over game time; the relationship graph at the start and at the end)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from town.experiments.files import columns, write_csv, write_jsonl
from town.experiments.society.result import PAPER_DIFFUSION, SocietyResult

ANSWER_FIELDS = (
    "resident",
    "kind",
    "subject",
    "question",
    "answer",
    "verdict",
    "judge_reply",
    "reason",
    "parsed",
    "supported",
    "hallucinated",
    "error",
)


def write_answers(result: SocietyResult, folder: Path) -> list[Path]:
    """answers.jsonl, answers.csv and summary.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{k: getattr(a, k) for k in ANSWER_FIELDS} for a in result.answers]
    jsonl = write_jsonl(folder / "answers.jsonl", rows)
    table = write_csv(folder / "answers.csv", ANSWER_FIELDS, columns(rows, ANSWER_FIELDS))
    summary = folder / "summary.json"
    summary.write_text(json.dumps(result.summary(), indent=2, ensure_ascii=False), encoding="utf-8")
    return [jsonl, table, summary]


def plot_diffusion(result: SocietyResult, path: Path, brain: str = "") -> Path:
    """The share of residents with a memory of each fact, over game time (the run's ``brain``
    named in the title), each beside the paper's share at the end (a dotted line)."""
    from town.experiments.figures import new_figure, save_png  # matplotlib loads on demand

    fig = new_figure(8, 4.5, layout="tight")
    ax = fig.subplots()
    n = max(1, len(result.residents))
    origin = min((p[0][0] for p in result.curves.values() if p), default=None)
    for fact, points in result.curves.items():
        hours = [(at - points[0][0]).total_seconds() / 3600 for at, _ in points]
        line = ax.step(hours, [100 * k / n for _, k in points], where="post", label=fact)[0]
        if fact in PAPER_DIFFUSION:
            paper = 100 * PAPER_DIFFUSION[fact][1]
            ax.axhline(paper, linestyle=":", color=line.get_color(), label=f"{fact}: the paper")
    ax.set_xlabel(f"game hours since {origin:%Y-%m-%d %H:%M}" if origin else "game hours")
    ax.set_ylabel("% of residents with a memory of it")
    ax.set_ylim(0, 100)
    by = f" ({brain})" if brain else ""
    ax.set_title(f"Information diffusion in {result.town}{by}; dotted: the paper's end")
    if result.curves:
        ax.legend()
    return save_png(fig, path)


def plot_graphs(result: SocietyResult, path: Path) -> Path:
    """The relationship graph (mutual knowing) at the start and at the end, side by side;
    residents on a circle."""
    from town.experiments.figures import new_figure, save_png  # matplotlib loads on demand

    names = result.residents
    n = max(1, len(names))
    spot = {
        name: (math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n))
        for i, name in enumerate(names)
    }
    fig = new_figure(11, 5.5, layout="tight")
    axes = fig.subplots(1, 2)
    panels = (
        ("start", result.edges_start, result.density_start),
        ("end", result.edges_end, result.density_end),
    )
    for ax, (label, edges, eta) in zip(axes, panels, strict=True):
        for a, b in edges:
            (x1, y1), (x2, y2) = spot[a], spot[b]
            ax.plot([x1, x2], [y1, y2], color="#7a8ca5", linewidth=1, zorder=1)
        xs = [spot[name][0] for name in names]
        ys = [spot[name][1] for name in names]
        ax.scatter(xs, ys, s=120, color="#e07a5f", zorder=2)
        for name in names:
            x, y = spot[name]
            ax.annotate(name.split()[0], (x * 1.12, y * 1.12), ha="center", va="center", fontsize=8)
        ax.set_title(f"{label}: {len(edges)} mutual pairs, density {eta:.3f}")
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
        ax.axis("off")
    return save_png(fig, path)
