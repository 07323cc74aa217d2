"""The ports between a town and its adapters: who calls, what goes out, and what can go wrong.

An adapter is two halves. Inbound, it turns a platform's events into calls on a ``TownPort``
(a visitor's message at a place, a command line). Outbound, it implements ``Platform.send`` for
one ``Outgoing`` message; ``adapters.core.delivery.OutboxPump`` decides what to send, in which
order, how fast, and makes sure nothing is posted twice.

This module imports no platform library and nothing from ``bot``: ``bot`` wires adapters to a town.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from town.features.ratings.reactions import Reacted
from town.inputs.visit import Visit
from town.views.card import ResidentCard, TownMap


@dataclass(frozen=True)
class Caller:
    """Who typed a command, and where."""

    platform: str
    user_id: str
    display_name: str
    is_admin: bool = False
    location: str | None = None  # the area whose channel the command came from
    automatic: bool = False  # a program asking for itself (the web page's clock): not audited
    roles: tuple[str, ...] = ()  # the platform's role ids the caller holds (a town's admin roles)


@dataclass(frozen=True)
class Reply:
    text: str
    private: bool = False  # shown only to the caller where the platform can (ephemeral)
    ok: bool = True
    # a command line a button under the answer runs for the caller ("forget-me confirm"), on
    # platforms with buttons (Discord, Slack); the text says how to type it elsewhere
    confirm: str = ""
    confirm_label: str = ""


@dataclass(frozen=True)
class Thinking:
    """Who thinks for the residents, as visitors are told."""

    label: str  # "offline brain (deterministic, no LLM)", "llm:gpt-4o-mini"
    offline: bool  # the offline brain answers: no LLM configured, or it is out of use for now
    behind: str = ""  # "clock 12% behind its pace", when thinking cannot keep the ticks' pace


@dataclass(frozen=True)
class Outgoing:
    """One message for one location channel."""

    key: str  # idempotency key: the outbox row's key, plus a part number when split
    area: str  # the town location (top-level area) whose channel shows it
    author: str  # a resident's name, or "" for the town itself (narration, digests)
    text: str  # plain text; the adapter escapes it for its platform
    emoji: str = ""  # the author's current emoji, for avatars where the platform has none
    reply: bool = False  # a resident's answer to a person: ahead of narration where posts queue


class TownPort(Protocol):
    """What an adapter may do to a town. ``bot.runtime.run.TownRuntime`` implements it."""

    @property
    def town_name(self) -> str: ...

    def areas(self) -> list[str]:
        """The top-level locations, one chat channel each, in the town file's order."""
        ...

    async def visitor_says(self, visit: Visit) -> None:
        """A member wrote in a location channel: an observation for the residents there.
        Residents' answers are stored, then posted at once (``OutboxPump.post_now``).
        ``visit.connection`` (the web: the peer address) is rate-limited beside the user id;
        ``visit.replying_to`` (the name the message the member replied to was posted under:
        a Discord reply, a Slack thread) is answered first, as if named. Raises
        ``EmptyWords`` (a ``ValueError``) for a message with nothing left once cleaned: the
        adapter tells the member, and nothing is stored."""
        ...

    async def member_left(self, platform: str, user_id: str, how: str, name: str = "") -> bool:
        """A member was banned (``how`` "ban"), kicked ("kick") or left ("leave"): forgotten if
        the deployment's ``forget_on_leave`` says so; whether they were."""
        ...

    async def reacted(self, reaction: Reacted) -> bool:
        """A member reacted to a message (or took the reaction back): stored against the
        resident's message and heard by the resident. False when it was not a resident's
        message, the member is muted, or nothing changed. Never raises for bad input."""
        ...

    def forgets(self) -> int:
        """The town's forget generation (``town.features.consent.forget.forgets_done``): it
        grows when a forget commits, in any process. An adapter that shows members' words
        from memory (the web page's feed) reads them again from the store when it grew.
        Blocking (a short read): call it from a thread."""
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

    async def town_map(self) -> TownMap:
        """Every area (with its place on a map when the town file gives one) and every resident
        where the store says they are, doing what."""
        ...

    async def resident_card(self, name: str) -> ResidentCard:
        """Who a resident is, today's plan, recent memories and reflections (never the private
        ones) and the people they know. Raises ``LookupError`` for an unknown name."""
        ...


class DeliveryError(Exception):
    """A send that did not happen, or may not have. ``retry_after`` is set when the platform
    said when to retry (a 429); ``permanent`` when retrying this message cannot help (it is
    recorded as failed); ``credentials`` when no message can go out until an admin fixes a
    token, a scope or a permission (delivery to the platform pauses, the events wait). The
    message says what to fix."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        permanent: bool = False,
        credentials: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent
        self.credentials = credentials


class Platform(Protocol):
    """The outbound half of an adapter, as the outbox pump sees it."""

    name: str  # "discord", "slack", "web": also the key of its deliveries and channel links
    max_chars: int  # one message's limit; longer texts are split before ``send``
    min_interval_s: float  # at least this long between two messages in one channel

    async def send(self, message: Outgoing) -> str:
        """Post one message; returns the platform's id for it. Raises ``DeliveryError``.
        The pump may send a message again after a failure that left it unsure whether the post
        was stored (a 5xx, a dropped connection): the adapter looks for the earlier post first,
        and returns its id if it is there, so a retry never doubles a message."""
        ...


class Adapter(Platform, Protocol):
    """A whole adapter: the outbound ``Platform`` plus its connection's life."""

    async def start(self) -> None:
        """Connect, find or create the location channels, and start listening. Returns once
        the adapter can send (the listening goes on in the background)."""
        ...

    async def stop(self) -> None: ...

    async def typing(self, area: str, author: str) -> None:
        """A resident (``author``) is composing a reply in ``area``'s channel: show it where the
        platform can (Discord's typing indicator, a line on the web page; Slack has none). Best
        effort: never raises, and the reply itself ends the indicator."""
        ...

    def status_line(self) -> str:
        """One line for the ``status`` command (e.g. which Discord intents are on)."""
        ...
