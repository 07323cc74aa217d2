"""Live believability figures: what members thought of the residents' messages where they
were shown (``bottown eval live``). Per group (a resident, a task, a model, a place): messages
shown (delivered to a platform), messages reacted to, the reactions by mood, and the share of
rated messages rated up with its Wilson 95% interval. A message is rated up when it has more up
than down reactions, down when more down than up; other reactions and ties do not rate it."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from town.features.ratings.moods import DOWN, OTHER, UP, Moods
from town.features.ratings.reactions import task_of
from town.store.models import Delivery, OutboxEvent, Reaction

GROUPINGS = ("resident", "task", "model", "place")
UNRECORDED = "(unrecorded)"  # a message from before models were recorded
Z95 = 1.959963984540054
_SINCE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str) -> timedelta:
    """ "7d", "12h", "30m", "2w" as a span of wall time."""
    found = _SINCE.match(text.lower())
    if found is None or int(found.group(1)) == 0:
        raise ValueError(f"since {text!r}? give a span like 30m, 12h, 7d or 2w")
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); (0, 1) with no trials."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


@dataclass
class Group:
    """The figures of one group of messages."""

    name: str
    shown: int = 0
    reacted: int = 0
    rated_up: int = 0
    rated_down: int = 0
    reactions: dict[str, int] = field(default_factory=lambda: {UP: 0, DOWN: 0, OTHER: 0})
    share_up: float | None = None
    low: float | None = None
    high: float | None = None
    strength: float | None = None  # Bradley-Terry, among the groups with rated messages

    def close(self) -> Group:
        rated = self.rated_up + self.rated_down
        if rated:
            self.share_up = self.rated_up / rated
            self.low, self.high = wilson(self.rated_up, rated)
        return self


@dataclass
class LiveFigures:
    by: str
    since: str  # ISO wall time, or "" for the town's whole life
    groups: list[Group]

    def as_json(self) -> dict[str, Any]:
        return {"by": self.by, "since": self.since, "groups": [asdict(g) for g in self.groups]}


def _key(event: OutboxEvent, by: str) -> str:
    if by == "resident":
        return str(event.payload.get("resident", ""))
    if by == "task":
        return task_of(event.kind, event.payload)
    if by == "model":
        return str(event.payload.get("model") or UNRECORDED)
    return event.channel


def live_figures(
    session: Session, town_id: int, moods: Moods, *, by: str = "resident", since: datetime | None
) -> LiveFigures:
    """The figures of the residents' messages shown since ``since`` (wall time), by ``by``."""
    if by not in GROUPINGS:
        raise ValueError(f"by {by!r}? one of {', '.join(GROUPINGS)}")
    query = (
        select(OutboxEvent)
        .join(Delivery, col(Delivery.outbox_id) == col(OutboxEvent.id))
        .where(OutboxEvent.town_id == town_id, Delivery.status == "sent")
        .distinct()
    )
    if since is not None:
        query = query.where(col(OutboxEvent.created_at) >= since)
    events = {e.id: e for e in session.exec(query) if e.payload.get("resident")}
    moods_of: dict[int, Counter[str]] = defaultdict(Counter)
    reactions = session.exec(
        select(Reaction.outbox_id, Reaction.emoji).where(
            Reaction.town_id == town_id, col(Reaction.outbox_id).in_(list(events))
        )
    )
    for outbox_id, emoji in reactions:
        moods_of[outbox_id][moods.of(emoji)] += 1
    groups: dict[str, Group] = {}
    for event_id, event in events.items():
        group = groups.setdefault(_key(event, by), Group(_key(event, by)))
        group.shown += 1
        mood = moods_of.get(event_id or 0)
        if not mood:
            continue
        group.reacted += 1
        for name, n in mood.items():
            group.reactions[name] += n
        if mood[UP] > mood[DOWN]:
            group.rated_up += 1
        elif mood[DOWN] > mood[UP]:
            group.rated_down += 1
    ordered = [g.close() for g in sorted(groups.values(), key=lambda g: (-g.shown, g.name))]
    bradley_terry([g for g in ordered if g.rated_up + g.rated_down])
    return LiveFigures(by, since.isoformat() if since else "", ordered)


def bradley_terry(groups: list[Group], rounds: int = 500) -> None:
    """Each group's Bradley-Terry strength (geometric mean 1), from every pair of rated messages
    of two groups: one rated up beats one rated down, two alike tie (half a win each), with one
    tie per pair of groups as a prior so a clean sweep stays finite. ``a`` is ahead of ``b`` with
    probability ``a.strength / (a.strength + b.strength)``. Fitted by Hunter's MM iterations."""
    if len(groups) < 2:
        return
    n = len(groups)
    wins = [[0.0] * n for _ in range(n)]
    games = [[0.0] * n for _ in range(n)]
    for i, a in enumerate(groups):
        for j, b in enumerate(groups):
            if i != j:
                alike = a.rated_up * b.rated_up + a.rated_down * b.rated_down
                wins[i][j] = a.rated_up * b.rated_down + 0.5 * alike + 0.5
                games[i][j] = (a.rated_up + a.rated_down) * (b.rated_up + b.rated_down) + 1
    strength = [1.0] * n
    for _ in range(rounds):
        for i in range(n):
            won = sum(wins[i])
            strength[i] = won / sum(
                games[i][j] / (strength[i] + strength[j]) for j in range(n) if j != i
            )
        scale = math.exp(sum(math.log(s) for s in strength) / n)
        strength = [s / scale for s in strength]
    for group, value in zip(groups, strength, strict=True):
        group.strength = value


def plot_shares(figures: LiveFigures, path: Path) -> Path:
    """Each group's share rated up with its 95% interval, as a dot and a bar."""
    from town.experiments.figures import new_figure, save_png  # matplotlib only when plotting

    rated = [g for g in figures.groups if g.share_up is not None]
    figure = new_figure(7, 1.2 + 0.4 * max(1, len(rated)))
    axes = figure.add_subplot()
    for row, group in enumerate(rated):
        assert group.share_up is not None and group.low is not None and group.high is not None
        axes.plot([group.low, group.high], [row, row], color="tab:blue", linewidth=3)
        axes.plot([group.share_up], [row], "o", color="black")
    axes.set_yticks(range(len(rated)), [f"{g.name} ({g.rated_up + g.rated_down})" for g in rated])
    axes.set_xlim(0, 1)
    axes.set_xlabel("share of rated messages rated up (Wilson 95% interval)")
    axes.set_title(f"Live ratings by {figures.by}")
    return save_png(figure, path)
