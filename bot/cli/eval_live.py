"""``bottown eval live``: what members thought of the residents where they talk, from their
reactions (``town.experiments.live``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from sqlmodel import select

from bot.cli.common import guarded, out, settings_and_logging
from bot.runtime.wiring import open_store
from town.experiments.live import GROUPINGS, Group, live_figures, parse_since, plot_shares
from town.store.models import Town


def _share(group: Group) -> str:
    if group.share_up is None or group.low is None or group.high is None:
        return "-"
    return f"{100 * group.share_up:.0f}% [{100 * group.low:.0f}-{100 * group.high:.0f}%]"


def live(
    town: Annotated[str, typer.Option(help="Name of the town in the store.")],
    since: Annotated[
        str | None, typer.Option(help="Only messages shown in this span: 30m, 12h, 7d, 2w.")
    ] = None,
    by: Annotated[str, typer.Option(help=f"Group by {', '.join(GROUPINGS)}.")] = "resident",
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Also plot the shares into this folder.")
    ] = None,
) -> None:
    """Per group of residents' messages: shown, reacted to, and the share rated up (by
    BOTTOWN_REACTIONS_UP and _DOWN) with its Wilson 95% interval."""

    def go() -> None:
        settings = settings_and_logging()
        start = datetime.now(UTC) - parse_since(since) if since else None
        if by not in GROUPINGS:
            raise ValueError(f"--by {by!r}? one of {', '.join(GROUPINGS)}")
        store = open_store(settings)
        try:
            with store.session() as session:
                row = session.exec(select(Town).where(Town.name == town)).first()
                if row is None or row.id is None:
                    raise LookupError(f"no town named {town!r} in the store")
                figures = live_figures(session, row.id, settings.moods, by=by, since=start)
        finally:
            store.dispose()
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            plot_shares(figures, out_dir / f"live-by-{by}.png")
        if as_json:
            print(json.dumps(figures.as_json(), ensure_ascii=False, indent=2))
            return
        table = Table(title=f"{town}: live ratings by {by}")
        columns = (by, "shown", "reacted", "up", "down", "other", "rated up [95%]", "BT")
        for column in columns:
            table.add_column(column)
        for g in figures.groups:
            r = g.reactions
            counts = (g.shown, g.reacted, r["up"], r["down"], r["other"])
            strength = "-" if g.strength is None else f"{g.strength:.2f}"
            table.add_row(g.name, *map(str, counts), _share(g), strength)
        out.print(table)
        rated = sorted(
            (g for g in figures.groups if g.strength is not None),
            key=lambda g: -(g.strength or 0),
        )
        if len(rated) >= 2:
            a, b = rated[0], rated[1]
            assert a.strength is not None and b.strength is not None
            ahead = a.strength / (a.strength + b.strength)
            out.print(f"Bradley-Terry: {a.name} ahead of {b.name} with probability {ahead:.2f}")

    guarded(go)
