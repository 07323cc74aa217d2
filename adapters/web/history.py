"""The web channels' history from the store, so a restart shows what was there: what was
delivered to the web, and what visitors said at each place, on every platform (their chat
lines, ``town.outbox.chatlog``), with the platform they said it on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from adapters.core.text import render
from adapters.web.feed import KEEP, Feed
from town.outbox import chatlog
from town.outbox.keys import whole_key
from town.store.db import Store
from town.store.models import ChatLine, Delivery, OutboxEvent

# a stored message: (when it was written, author, text, emoji, kind, game time "HH:MM",
# platform: a visitor's, the outbox event's id or 0 for a visitor's words)
_Stored = tuple[datetime, str, str, str, str, str, str, int]


@dataclass(frozen=True)
class History:
    store: Store
    town_id: int
    platform: str

    def load(self, feed: Feed, areas: list[str]) -> int:
        """Each channel's newest messages into ``feed``, oldest first. Returns the newest chat
        line's id (see ``visitors_after``). A delivered message's id on the web is its number
        in this run of the page, so its delivery is told the new one (a reaction on the page
        finds the message by it)."""
        renumbered: dict[int, str] = {}
        for area in areas:
            for shown in oldest_first(self._delivered(area), self._visitors(area))[-KEEP:]:
                _, author, text, emoji, kind, clock, platform, outbox_id = shown
                added = feed.add(area, author, text, emoji, kind, clock, platform)
                if outbox_id:
                    renumbered[outbox_id] = f"{self.platform}:{feed.epoch}.{added.id}"
        with self.store.session() as s:
            rows = s.exec(
                select(Delivery).where(
                    col(Delivery.outbox_id).in_(list(renumbered)),
                    Delivery.platform == self.platform,
                    Delivery.status == "sent",
                )
            ).all()
            for row in rows:
                row.message_id = renumbered[row.outbox_id]
                s.add(row)
            return chatlog.newest(s, self.town_id)

    def visitors_after(self, after: int) -> list[ChatLine]:
        """Visitors' words after chat line ``after``, oldest first: the web page shows every
        visitor's words, wherever they were said."""
        with self.store.session() as s:
            rows = s.exec(
                select(ChatLine)
                .where(
                    ChatLine.town_id == self.town_id,
                    col(ChatLine.id) > after,
                    ChatLine.kind == chatlog.VISITOR,
                )
                .order_by(col(ChatLine.id))
                .limit(KEEP)
            ).all()
        return list(rows)

    def clock_of(self, key: str) -> str:
        """The game time of the outbox event behind a message's key ("" for a digest)."""
        with self.store.session() as s:
            when = s.exec(
                select(OutboxEvent.game_time).where(OutboxEvent.idempotency_key == whole_key(key))
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
                clock = f"{row.game_time:%H:%M}"
                found.append((row.created_at, *shown, "", clock, "", row.id or 0))
        return found

    def _visitors(self, area: str) -> list[_Stored]:
        with self.store.session() as s:
            rows = s.exec(
                select(ChatLine)
                .where(
                    ChatLine.town_id == self.town_id,
                    ChatLine.area == area,
                    ChatLine.kind == chatlog.VISITOR,
                )
                .order_by(col(ChatLine.id).desc())
                .limit(KEEP)
            ).all()
        return [as_shown(r) for r in reversed(rows)]  # oldest first


def as_shown(line: ChatLine) -> _Stored:
    """A visitor's chat line as the page shows it."""
    clock = f"{line.game_time:%H:%M}"
    return (line.wall_time, line.speaker, line.text, "", "visitor", clock, line.platform, 0)


def oldest_first(*sources: list[_Stored]) -> list[_Stored]:
    """Messages from several stored sources, each already oldest first, merged by the time they
    were written; on a tie (a coarse clock, one tick's events) each source keeps its own order."""
    return sorted((shown for source in sources for shown in source), key=lambda shown: shown[0])
