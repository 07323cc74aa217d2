"""Text every adapter shares: a location channel's description, long texts in parts, and an
outbox event as the line a channel shows."""

from __future__ import annotations

import re
from typing import Any


def channel_about(town: str, area: str) -> str:
    """What a location channel is, for its topic or purpose where a platform has one."""
    return (
        f"{area}, a place in {town}. Its residents are AI personas who post under their own "
        "names; what you write here, they hear."
    )


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut at sentence ends where possible,
    then at spaces, then anywhere. Nothing is dropped."""
    if limit < 1:
        raise ValueError("limit must be positive")
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    parts: list[str] = []
    current = ""
    for piece in _pieces(text, limit):
        joined = f"{current} {piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            parts.append(current)
            current = piece
    if current:
        parts.append(current)
    return parts


def _pieces(text: str, limit: int) -> list[str]:
    """Sentences, each cut to ``limit`` at spaces (or hard) when it is longer."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit + 1)
            cut = cut if cut > 0 else limit
            out.append(sentence[:cut].rstrip())
            sentence = sentence[cut:].lstrip()
        if sentence:
            out.append(sentence)
    return out


SHOWN_KINDS = ("said", "action", "moved", "object", "reacted", "woke", "slept", "notice")


def render(kind: str, payload: dict[str, Any]) -> tuple[str, str, str] | None:
    """An outbox event as (author, text, emoji) for its channel, or None when it is not shown
    in channels (plans, reflections and conversation summaries stay in the replay and store).

    Residents speak in their own name; everything else is the town's narration (author ""),
    including a ``notice`` to one visitor (addressed by name in its text, never a mention:
    each platform's poster escapes mentions). A notice carries ``for_platform``: only that
    platform shows it (``OutboxPump`` skips it elsewhere)."""
    if kind not in SHOWN_KINDS:
        return None
    text = str(payload.get("text", "")).strip()
    emoji = str(payload.get("emoji", ""))
    if not text:
        return None
    if kind == "said":
        return str(payload.get("resident", "")), text, emoji
    return "", f"{emoji} {text}" if emoji else text, emoji
