"""Digests: a channel's narration folded into one message while the channel catches up.

A digest holds only the town's narration (arrivals, actions, objects: events with no author);
residents' speech and replies to people always keep messages of their own. A digest's key names
every outbox event it holds, by id ("digest:12-14,17,20": 12, 13, 14, 17 and 20), never a range
from its first event to its last: speech posted apart between two of them is not in it, and a
reader (the crash test, an audit) can tell exactly what each post covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

PREFIX = "digest:"
MOST = 60  # events in one digest: its key stays short, its text a few messages at most


class Folded(Protocol):
    """What a digest needs of an event."""

    @property
    def outbox_id(self) -> int: ...
    @property
    def author(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def clock(self) -> str: ...


def digest_text(items: Sequence[Folded]) -> str:
    lines = [f"While the channel caught up, {len(items)} things happened here:"]
    for item in items:
        who = f"{item.author}: " if item.author else ""
        lines.append(f"{item.clock} {who}{item.text}")
    return "\n".join(lines)


def digest_key(ids: Iterable[int]) -> str:
    """The key of a digest holding the events ``ids``: every id, runs of consecutive ids
    written "first-last"."""
    runs: list[list[int]] = []
    for n in sorted(set(ids)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    if not runs:
        raise ValueError("a digest holds at least one event")
    return PREFIX + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def digest_holds(key: str) -> list[int] | None:
    """The outbox ids a digest's key (or one of its parts' keys, "...#2") holds; None when
    ``key`` is not a digest's."""
    if not key.startswith(PREFIX):
        return None
    held: list[int] = []
    for run in key.removeprefix(PREFIX).split("#")[0].split(","):
        first, _, last = run.partition("-")
        held.extend(range(int(first), int(last or first) + 1))
    return held
