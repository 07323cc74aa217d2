"""Outbox keys, in one place: what every post a platform sees is keyed by.

Each key is unique in the outbox (the idempotency key of its row) or names the rows a post
holds, so a post is never made twice and a reader (the crash test, an audit, a platform's
message metadata) can tell what each post covers:

- an event's: ``<town id>:<unit>:<n>``, the ``n``-th event written by one unit of work (a tick's
  game time, ``say:<uuid>``, ``set:<uuid>``...): the same tick can never be written twice;
- a digest's: ``digest:12-14,17,20``, every outbox id it holds, runs of consecutive ids written
  ``first-last`` (never a range from its first event to its last: speech posted apart between
  two of them is not in it);
- a part of a long message: its message's key and the part's number, ``<key>#2`` (a message in
  one part keeps its key).
"""

from __future__ import annotations

from collections.abc import Iterable

DIGEST = "digest:"
_PART = "#"


def event_key(town_id: int, unit: str, n: int) -> str:
    """The key of the ``n``-th event (from 0) that the unit of work ``unit`` writes."""
    return f"{town_id}:{unit}:{n}"


def digest_key(ids: Iterable[int]) -> str:
    """The key of a digest holding the events ``ids``."""
    runs: list[list[int]] = []
    for n in sorted(set(ids)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    if not runs:
        raise ValueError("a digest holds at least one event")
    return DIGEST + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def part_key(key: str, n: int, parts: int) -> str:
    """The key of part ``n`` (from 1) of a message with ``key`` posted in ``parts`` parts."""
    return key if parts == 1 else f"{key}{_PART}{n}"


def whole_key(key: str) -> str:
    """The key of the message a part's key (or a whole message's) belongs to."""
    whole, mark, number = key.rpartition(_PART)
    return whole if mark and number.isdigit() else key


def digest_holds(key: str) -> list[int] | None:
    """The outbox ids a digest's key (or one of its parts' keys) holds; None when ``key`` is not
    a digest's."""
    if not key.startswith(DIGEST):
        return None
    held: list[int] = []
    for run in whole_key(key).removeprefix(DIGEST).split(","):
        first, _, last = run.partition("-")
        held.extend(range(int(first), int(last or first) + 1))
    return held
