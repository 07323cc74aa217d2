"""The delivery rows of one platform: a claim written before a post, its end after, and what a
crash left in between (``adapters.core.delivery`` says why this makes delivery at most once),
and what ``/metrics`` counts of them (the backlog, the rows by status)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import delete, exists, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from town.store.db import Store
from town.store.models import Delivery, OutboxEvent, utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claims:
    store: Store
    town_id: int
    platform: str  # the platform's name, the key of its delivery rows

    def recover(self) -> int:
        """Rows a crash left in "sending" become "unknown" and are never posted again."""
        with self.store.session() as s:
            result = s.execute(
                update(Delivery)
                .where(
                    col(Delivery.platform) == self.platform,
                    col(Delivery.status) == "sending",
                    col(Delivery.outbox_id).in_(
                        select(OutboxEvent.id).where(OutboxEvent.town_id == self.town_id)
                    ),
                )
                .values(status="unknown", updated_at=utcnow())
            )
            count = int(getattr(result, "rowcount", 0) or 0)
        if count:
            log.warning(
                "%d %s message(s) may or may not have been posted before a restart; "
                "they are not posted again",
                count,
                self.platform,
            )
        return count

    def claim(self, ids: list[int]) -> bool:
        """ "sending" rows for ``ids``, committed; False when another worker has them."""
        try:
            with self.store.session() as s:
                for outbox_id in ids:
                    s.add(
                        Delivery(
                            outbox_id=outbox_id,
                            platform=self.platform,
                            status="sending",
                            attempts=1,
                        )
                    )
        except IntegrityError:
            return False
        return True

    def finish(self, ids: list[int], status: str, message_id: str, error: str) -> None:
        with self.store.session() as s:
            s.execute(
                update(Delivery)
                .where(col(Delivery.outbox_id).in_(ids), col(Delivery.platform) == self.platform)
                .values(
                    status=status,
                    message_id=message_id[:200],
                    error=error[:500],
                    updated_at=utcnow(),
                )
            )
        if status == "failed":
            log.warning("%s: gave up on a message: %s", self.platform, error)

    def release(self, ids: list[int]) -> None:
        """The claims given back: the events are pending again."""
        with self.store.session() as s:
            s.execute(
                delete(Delivery).where(
                    col(Delivery.outbox_id).in_(ids), col(Delivery.platform) == self.platform
                )
            )

    def backlog(self) -> int:
        """The town's events this platform has not taken up yet (no delivery row)."""
        taken = exists().where(
            col(Delivery.outbox_id) == col(OutboxEvent.id), col(Delivery.platform) == self.platform
        )
        with self.store.session() as s:
            query = select(func.count()).where(OutboxEvent.town_id == self.town_id, ~taken)
            return int(s.exec(query).one())

    def by_status(self) -> dict[str, int]:
        """The town's delivery rows on this platform, counted by status (sent, failed, ...)."""
        with self.store.session() as s:
            rows = s.exec(
                select(Delivery.status, func.count())
                .join(OutboxEvent, col(OutboxEvent.id) == col(Delivery.outbox_id))
                .where(OutboxEvent.town_id == self.town_id, Delivery.platform == self.platform)
                .group_by(Delivery.status)
            ).all()
        return {status: int(n) for status, n in rows}
