"""Digests: what a channel could not show in time, folded into one scene line.

A digest holds the town's narration (arrivals, actions, objects: events with no author) while
the channel catches up, and, once it is more than a tick of the clock behind, residents' speech
too; replies to people always keep messages of their own. Its first line is the scene: the
time it spans, who talked, the best of their words quoted, how much else happened; then one line
an event (the web page opens them on a click). A digest's key names every outbox event it
holds, by id ("digest:12-14,17,20": ``town.outbox.keys.digest_key``).
"""

from __future__ import annotations

import re
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


def scene(items: Sequence[Folded], lately: Sequence[str] = ()) -> str:
    """The scene line: when, who talked and the words that say most of what is going on (those
    sharing most words with the scene's narration and the place's narration ``lately``, then
    the longest, then the freshest), how much else happened; with no words said, the freshest
    thing that happened."""
    span = (
        items[0].clock
        if items[0].clock == items[-1].clock
        else f"{items[0].clock}-{items[-1].clock}"
    )
    said = [i for i in items if i.author]
    told = [i for i in items if not i.author]
    if not said:
        line = f"{span}: {told[-1].text[:QUOTE]}"
        if len(told) > 1:
            line += f"; {_things(len(told) - 1, 'other ')} happened here"
        return line + ":"
    names = list(dict.fromkeys(i.author for i in said))
    who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    going_on = set().union(*(_words(t) for t in [*lately, *(i.text for i in told)]))
    quotable = [i for i in said if len(i.text) <= QUOTE] or said
    best = max(
        quotable,
        key=lambda i: (len(_words(i.text) & going_on), len(i.text.split()), i.outbox_id),
    )
    line = f"{span}: {who} talked here: “{best.text[:QUOTE]}”"
    if told:
        line += f"; {_things(len(told), 'other ')} happened"
    return line + ":"


def _things(n: int, kind: str = "") -> str:
    return f"{n} {kind}thing{'' if n == 1 else 's'}"


def _words(text: str) -> set[str]:
    """The words of a line that can say what is going on: not the short ones, nor names (nor
    a sentence's first word)."""
    return {w for w in re.findall(r"\b[a-z][a-z']+", text) if len(w) > 3}


def digest_text(items: Sequence[Folded], lately: Sequence[str] = ()) -> str:
    lines = [scene(items, lately)]
    for item in items:
        who = f"{item.author}: " if item.author else ""
        lines.append(f"{item.clock} {who}{item.text}")
    return "\n".join(lines)
