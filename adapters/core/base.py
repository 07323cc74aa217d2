"""What every platform adapter shares: who calls, what goes out, and what can go wrong.

An adapter is two halves. Inbound, it turns a platform's events into calls on a ``TownPort``
(a visitor's message at a place, a command line). Outbound, it implements ``Platform.send`` for
one ``Outgoing`` message; ``adapters.core.delivery.OutboxPump`` decides what to send, in which
order, how fast, and makes sure nothing is posted twice.

This module imports no platform library and nothing from ``bot``: ``bot`` wires adapters to a town.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Caller:
    """Who typed a command, and where."""

    platform: str
    user_id: str
    display_name: str
    is_admin: bool = False
    location: str | None = None  # the area whose channel the command came from
    automatic: bool = False  # a program asking for itself (the web page's clock): not audited


@dataclass(frozen=True)
class Reply:
    text: str
    private: bool = False  # shown only to the caller where the platform can (ephemeral)
    ok: bool = True


@dataclass(frozen=True)
class Thinking:
    """Who thinks for the residents, as visitors are told."""

    label: str  # "offline brain (deterministic, no LLM)", "llm:gpt-4o-mini"
    offline: bool  # the offline brain answers: no LLM configured, or it is out of use for now


@dataclass(frozen=True)
class Outgoing:
    """One message for one location channel."""

    key: str  # idempotency key: the outbox row's key, plus a part number when split
    area: str  # the town location (top-level area) whose channel shows it
    author: str  # a resident's name, or "" for the town itself (narration, digests)
    text: str  # plain text; the adapter escapes it for its platform
    emoji: str = ""  # the author's current emoji, for avatars where the platform has none


class TownPort(Protocol):
    """What an adapter may do to a town. ``bot.runtime.run.TownRuntime`` implements it."""

    @property
    def town_name(self) -> str: ...

    def areas(self) -> list[str]:
        """The top-level locations, one chat channel each, in the town file's order."""
        ...

    async def visitor_says(
        self, platform: str, user_id: str, display_name: str, area: str, text: str
    ) -> None:
        """A member wrote in a location channel: an observation for the residents there.
        Residents' answers reach the platform through the outbox, like every town event."""
        ...

    async def command(self, caller: Caller, line: str) -> Reply:
        """A chat command (``look``, ``interview Isabella "..."``, ...)."""
        ...

    def command_names(self) -> list[str]:
        """The chat commands' names (``help``, ``look``, ...)."""
        ...

    def thinking(self) -> Thinking:
        """Who thinks for the residents now (the offline brain, or which LLM)."""
        ...


class DeliveryError(Exception):
    """A send that did not happen. ``retry_after`` is set when the platform said when to retry
    (a 429); ``permanent`` when retrying cannot help (the message is recorded as failed)."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


class Platform(Protocol):
    """The outbound half of an adapter, as the outbox pump sees it."""

    name: str  # "discord", "slack", "web": also the key of its deliveries and channel links
    max_chars: int  # one message's limit; longer texts are split before ``send``
    min_interval_s: float  # at least this long between two messages in one channel

    async def send(self, message: Outgoing) -> str:
        """Post one message; returns the platform's id for it. Raises ``DeliveryError``."""
        ...


class Adapter(Platform, Protocol):
    """A whole adapter: the outbound ``Platform`` plus its connection's life."""

    async def start(self) -> None:
        """Connect, find or create the location channels, and start listening. Returns once
        the adapter can send (the listening goes on in the background)."""
        ...

    async def stop(self) -> None: ...

    def status_line(self) -> str:
        """One line for the ``status`` command (e.g. which Discord intents are on)."""
        ...


# -- text helpers every adapter uses ---------------------------------------------------------


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
