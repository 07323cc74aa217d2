"""The parts of a day and the words that name them. What a resident is shown doing names no part
of the day other than the one it is done in: "writing jokes in the afternoon" at 17:40 is
"writing jokes"; "the morning paper" stays, a paper and not a time."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType

# Each part of the day: (from, until) in minutes of the day; night runs past midnight.
PARTS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        "dawn": (4 * 60, 8 * 60),
        "sunrise": (4 * 60, 8 * 60),
        "morning": (4 * 60, 12 * 60),
        "noon": (11 * 60, 14 * 60),
        "midday": (11 * 60, 14 * 60),
        "afternoon": (12 * 60, 17 * 60),
        "dusk": (16 * 60, 20 * 60),
        "sunset": (16 * 60, 20 * 60),
        "evening": (17 * 60, 22 * 60),
        "tonight": (17 * 60, 4 * 60),
        "night": (21 * 60, 4 * 60),
    }
)
_TIMED = "in|into|through|throughout|during|until|till|all|every|each|this|at|around|by|before"
_NAMED = re.compile(
    rf"\s+(?:(?:{_TIMED})\s+(?:the\s+)?(?:(?:early|late|mid)[- ]?)?(?:at\s+)?"
    rf"(?P<part>{'|'.join(p for p in PARTS if p != 'tonight')})s?|(?P<tonight>tonight))\b"
    r"(?!'|\s+(?!(?:and|then|with|before|after|at|in|on|to|for|while|or|but|until)\b)[a-z])",
    re.IGNORECASE,
)


def within(part: str, minute: int) -> bool:
    """Is ``minute`` (of the day) in that part of the day?"""
    start, end = PARTS[part]
    minute %= 24 * 60
    return start <= minute < end if start < end else minute >= start or minute < end


def fitted(description: str, start: datetime, minutes: int = 1) -> str:
    """The description without the words for a part of the day that does not hold all of
    ``minutes`` from ``start`` ("in the afternoon" from 17:40, "around noon" at 14:00)."""
    first = start.hour * 60 + start.minute
    last = first + max(1, minutes) - 1

    def kept(found: re.Match[str]) -> str:
        part = (found["part"] or found["tonight"]).lower()
        return found[0] if within(part, first) and within(part, last) else ""

    shorter = _NAMED.sub(kept, description)
    shorter = re.sub(r"\s+([,;.])", r"\1", shorter).strip(" ,;")
    return shorter if shorter else description
