"""Digests: what a channel could not show in time, folded into one scene line.

A digest holds the town's narration (arrivals, actions, objects: events with no author) while
the channel catches up, and, once it is more than a tick of the clock behind, residents' speech
too; replies to people always keep messages of their own. Its first line is the scene: the
time it spans, who talked, the best of their words quoted, how much else happened; then one line
an event (the web page opens them on a click). A digest's key names every outbox event it
holds, by id ("digest:12-14,17,20": ``town.outbox.keys.digest_key``).
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


QUOTE = 160  # the longest words a scene line quotes


def scene(items: Sequence[Folded]) -> str:
    """The scene line: when, who talked and their best words, how much else happened."""
    span = (
        items[0].clock
        if items[0].clock == items[-1].clock
        else (f"{items[0].clock}-{items[-1].clock}")
    )
    said = [i for i in items if i.author]
    told = len(items) - len(said)
    if not said:
        things = "1 thing" if told == 1 else f"{told} things"
        return f"While the channel caught up, {things} happened here ({span}):"
    names = list(dict.fromkeys(i.author for i in said))
    who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    quotable = [i for i in said if len(i.text) <= QUOTE] or said
    best = max(quotable, key=lambda i: (len(i.text.split()), i.outbox_id))
    line = f"{span}: {who} talked here: “{best.text[:QUOTE]}”"
    if told:
        line += f"; {told} other thing{'' if told == 1 else 's'} happened"
    return line + ":"


def digest_text(items: Sequence[Folded]) -> str:
    lines = [scene(items)]
    for item in items:
        who = f"{item.author}: " if item.author else ""
        lines.append(f"{item.clock} {who}{item.text}")
    return "\n".join(lines)
