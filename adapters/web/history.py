"""The web channels' history from the store, so a restart shows what was there: what was
delivered to the web, and what visitors wrote there (from the audit log)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from adapters.core.text import render
from adapters.web.feed import KEEP, Feed
from town.outbox import audit
from town.store.db import Store
from town.store.models import AuditEntry, Delivery, OutboxEvent

PART = re.compile(r"#\d+$")  # a split message's part number after the outbox key
# a stored message: (when it was written, author, text, emoji, kind, game time "HH:MM")
_Stored = tuple[datetime, str, str, str, str, str]


@dataclass(frozen=True)
class History:
    store: Store
    town_id: int
    platform: str

    def load(self, feed: Feed, areas: list[str]) -> None:
        """Each channel's newest messages into ``feed``, oldest first."""
        for area in areas:
            for shown in oldest_first(self._delivered(area), self._visitors(area))[-KEEP:]:
                _, author, text, emoji, kind, clock = shown
                feed.add(area, author, text, emoji, kind, clock)

    def clock_of(self, key: str) -> str:
        """The game time of the outbox event behind a message's key ("" for a digest)."""
        with self.store.session() as s:
            when = s.exec(
                select(OutboxEvent.game_time).where(
                    OutboxEvent.idempotency_key == PART.sub("", key)
                )
            ).first()
        return f"{when:%H:%M}" if when is not None else ""

    def _delivered(self, area: str) -> list[_Stored]:
        with self.store.session() as s:
            rows = s.exec(
                select(OutboxEvent)
                .join(Delivery, col(Delivery.outbox_id) == col(OutboxEvent.id))
                .where(
                    OutboxEvent.town_id == self.town_id,
                    OutboxEvent.channel == area,
                    Delivery.platform == self.platform,
                    col(Delivery.status).in_(("sent", "digested")),
                )
                .order_by(col(OutboxEvent.id).desc())
                .limit(KEEP)
            ).all()
        found = []
        for row in reversed(rows):  # oldest first
            shown = render(row.kind, row.payload)
            if shown is not None:
                found.append((row.created_at, *shown, "", f"{row.game_time:%H:%M}"))
        return found

    def _visitors(self, area: str) -> list[_Stored]:
        with self.store.session() as s:
            rows = s.exec(
                select(AuditEntry)
                .where(
                    AuditEntry.town_id == self.town_id,
                    AuditEntry.channel == area,
                    AuditEntry.platform == self.platform,
                    AuditEntry.direction == audit.IN,
                    col(AuditEntry.kind).in_(("say", audit.LIMITED)),
                )
                .order_by(col(AuditEntry.id).desc())
                .limit(KEEP)
            ).all()
        return [
            (r.wall_time, audit.name_of(r.who), r.text, "", "visitor", f"{r.game_time:%H:%M}")
            for r in reversed(rows)  # oldest first
        ]


def oldest_first(*sources: list[_Stored]) -> list[_Stored]:
    """Messages from several stored sources, each already oldest first, merged by the time they
    were written; on a tie (a coarse clock, one tick's events) each source keeps its own order."""
    return sorted((shown for source in sources for shown in source), key=lambda shown: shown[0])
