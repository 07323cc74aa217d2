"""Town events: what the platforms show. The engine writes them to the outbox with its commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from town.store.models import OutboxEvent

KINDS = (
    "woke",
    "slept",
    "planned",
    "action",
    "moved",
    "reacted",
    "said",
    "object",
    "reflected",
    "conversation",
)


@dataclass(frozen=True)
class TownEvent:
    kind: str
    channel: str  # the area, which is a chat channel
    at: datetime
    resident: str = ""
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {"resident": self.resident, "text": self.text, **self.data}


def write_outbox(session: Session, town_id: int, tick_key: str, events: list[TownEvent]) -> None:
    """One outbox row per event, keyed so that the same tick can never be written twice."""
    for seq, event in enumerate(events):
        session.add(
            OutboxEvent(
                town_id=town_id,
                channel=event.channel,
                kind=event.kind,
                payload=event.payload(),
                game_time=event.at,
                idempotency_key=f"{town_id}:{tick_key}:{seq}",
            )
        )
