"""Town events: what the platforms show. The engine writes them to the outbox with its commit,
and the town's words (``said``, ``notice``) to the audit log in the same transaction. A
resident's words carry who made them (``data["model"]``: the model's name, or the offline brain's
stamp with its reason, :mod:`town.llm.made`), as the thought that made them was stamped."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from town.outbox import audit, switches
from town.outbox.keys import event_key
from town.store.models import OutboxEvent
from town.text import clean_text


@dataclass(frozen=True)
class TownEvent:
    # woke, slept, planned, action, moved, reacted, said, object, reflected, conversation, or
    # notice: the town to one visitor (e.g. over the message rate), payload ``for_platform``;
    # a resident's answer to a visitor is "said" with ``reply_to`` (the visitor): delivered
    # ahead of narration, never in a digest, audited as a ``reply``
    kind: str
    channel: str  # the area, which is a chat channel
    at: datetime
    resident: str = ""
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {"resident": self.resident, "text": self.text, **self.data}


def write_outbox(
    session: Session, town_id: int, tick_key: str, events: list[TownEvent]
) -> list[OutboxEvent]:
    """One outbox row per event, keyed so that the same tick can never be written twice; the
    town's words also go to the audit log, in the same unit of work. Returns the rows."""
    events = switches.let_through(session, town_id, events)  # quiet and closed channels
    for event in events:
        if event.kind in audit.OUTPUT_EVENTS:
            to = str(event.data.get("reply_to", ""))  # a resident answering a visitor
            audit.record(
                session,
                town_id,
                audit.OUT,
                audit.REPLY if to else event.kind,
                event.resident or "town",
                audit.reply_line(to, event.text) if to else clean_text(event.text),
                game_time=event.at,
                platform=str(event.data.get("for_platform", "")),
                channel=event.channel,
            )
    rows = [
        OutboxEvent(
            town_id=town_id,
            channel=event.channel,
            kind=event.kind,
            payload=event.payload(),
            game_time=event.at,
            idempotency_key=event_key(town_id, tick_key, seq),
        )
        for seq, event in enumerate(events)
    ]
    session.add_all(rows)
    return rows
