"""Admins' switches on a place's channel: ``quiet`` (residents answer visitors there but post
no narration) and ``closed`` (no resident posts there at all). Stored per town and area, shown
in ``status``, and applied as the town's events enter the outbox (``let_through``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from sqlmodel import Session, select

from town.store.models import ChannelSwitch


class TownEvent(Protocol):
    """What a switch reads of an event (``town.outbox.events.TownEvent``)."""

    @property
    def kind(self) -> str: ...
    @property
    def channel(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...


E = TypeVar("E", bound=TownEvent)

QUIET, CLOSED, OPEN = "quiet", "closed", "open"
MODES = (OPEN, QUIET, CLOSED)
SPEECH = frozenset({"said", "notice"})


def switches(session: Session, town_id: int) -> dict[str, str]:
    """Each switched area's mode (areas left open are not listed)."""
    rows = session.exec(select(ChannelSwitch).where(ChannelSwitch.town_id == town_id))
    return {row.area: row.mode for row in rows}


def set_switch(session: Session, town_id: int, area: str, mode: str) -> None:
    """Switch ``area``'s channel to ``mode`` (``open`` removes the switch)."""
    if mode not in MODES:
        raise ValueError(f"a channel is {', '.join(MODES)}, not {mode!r}")
    row = session.exec(
        select(ChannelSwitch).where(ChannelSwitch.town_id == town_id, ChannelSwitch.area == area)
    ).first()
    if mode == OPEN:
        if row is not None:
            session.delete(row)
        return
    row = row or ChannelSwitch(town_id=town_id, area=area[:300], mode=mode)
    row.mode = mode
    session.add(row)


def lets_through(mode: str | None, event: TownEvent) -> bool:
    """Whether an event goes to a channel in ``mode``: a quiet one takes speech and the town's
    notices to visitors, a closed one only those notices."""
    if mode == QUIET:
        return event.kind in SPEECH
    if mode == CLOSED:
        return event.kind == "notice" or bool(event.data.get("reply_to"))
    return True


def let_through(session: Session, town_id: int, events: Sequence[E]) -> list[E]:
    """The events the channels' switches let through."""
    modes = switches(session, town_id) if events else {}
    if not modes:
        return list(events)
    return [e for e in events if lets_through(modes.get(e.channel), e)]
