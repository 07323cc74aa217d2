"""Figures for the experiments' plots: matplotlib's Agg canvas, no pyplot, no global state
(matplotlib is of the ``experiments`` extra: loaded with the first figure)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from town.experiments.extra import experiments_extra

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(
    width: float, height: float, layout: Literal["constrained", "tight"] = "constrained"
) -> Figure:
    """A figure of ``width`` x ``height`` inches at 100 dpi, drawn on its own Agg canvas."""
    with experiments_extra():
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), dpi=100, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def save_png(figure: Figure, path: Path) -> Path:
    figure.savefig(path, format="png")
    return path
