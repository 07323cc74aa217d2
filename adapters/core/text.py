"""Text every adapter shares: a location channel's description and an outbox event as the line a
channel shows (a long text in parts is ``town.text.in_parts``)."""

from __future__ import annotations

from typing import Any


def channel_about(town: str, area: str) -> str:
    """What a location channel is, for its topic or purpose where a platform has one."""
    return (
        f"{area}, a place in {town}. Its residents are AI personas who post under their own "
        "names; what you write here, they hear."
    )


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
