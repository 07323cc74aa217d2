"""Digests: a channel's narration folded into one message while the channel catches up.

A digest holds only the town's narration (arrivals, actions, objects: events with no author);
residents' speech and replies to people always keep messages of their own. A digest's key names
every outbox event it holds, by id ("digest:12-14,17,20": ``town.outbox.keys.digest_key``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

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
