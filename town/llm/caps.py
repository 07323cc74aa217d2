"""Length caps on the text a model writes, and cutting text to its cap at a natural boundary."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]]*)(?=\s)")


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: whole sentences when the cut keeps more than half,
    else whole words, else a hard cut."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # one more: a sentence may end exactly at the limit
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= limit]
    if ends and ends[-1] > limit // 2:
        return head[: ends[-1]].rstrip()
    space = head.rfind(" ", 0, limit + 1)
    if space > limit // 2:
        return head[:space].rstrip(" ,;:-")
    return text[:limit]


def capped(value: object, limit: int) -> object:
    """A validator's view: text is cut to ``limit`` (stripped first); anything else is left for
    the type check to judge."""
    if isinstance(value, str):
        return cut(value.strip(), limit)
    return value
