"""A community that removed the bot: its town waits, paused, for ``forget_removed_after`` days
(invited back, it resumes where it was), then is forgotten whole: every row of the town and of
what hangs from it (residents, memories, members, chats, the outbox, audit, ratings, usage, its
community row) in one transaction, then its collection in the vector index."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Table, delete
from sqlalchemy import select as select_rows
from sqlmodel import SQLModel, col, select

from bot.runtime.settings import Settings
from bot.runtime.wiring import Services
from town.store.models import Community

log = logging.getLogger(__name__)

CHECK_EVERY_S = 3600.0


def forget_removed(services: Services, settings: Settings, now: datetime) -> int:
    """Forget the towns whose community removed the bot ``forget_removed_after`` days or more
    before ``now``; how many."""
    before = now - timedelta(days=settings.forget_removed_after)
    with services.store.session() as s:
        rows = s.exec(
            select(Community).where(
                col(Community.removed_at).is_not(None), col(Community.removed_at) <= before
            )
        ).all()
        gone = [(row.town_id, row.key) for row in rows]
    for town_id, key in gone:
        forget_town(services, settings, town_id)
        log.info("forgot the town of the community %s (removed the bot long ago)", key)
    return len(gone)


def forget_town(services: Services, settings: Settings, town_id: int) -> None:
    """Every row of the town, and its vectors."""
    tables = list(reversed(SQLModel.metadata.sorted_tables))  # what refers to others first
    with services.store.session() as s:
        for table in tables:
            where = _of_town(table, town_id)
            if where is not None:
                s.execute(delete(table).where(where))
    services.index.drop(f"{settings.chroma_namespace}-t{town_id}")


def _of_town(table: Table, town_id: int) -> ColumnElement[bool] | None:
    """Which of ``table``'s rows belong to the town: its own, or those referring to a row of
    the town (a memory through its resident, a delivery through its outbox event)."""
    if table.name == "town":
        return table.c.id == town_id
    if "town_id" in table.c:
        return table.c.town_id == town_id
    for fk in table.foreign_keys:
        parent: Any = fk.column.table
        if parent is table:  # a plan item's parent item: the item itself belongs already
            continue
        through = _of_town(parent, town_id)
        if through is not None:
            return fk.parent.in_(select_rows(fk.column).where(through))
    return None


async def keep_forgetting(forget: Callable[[], int]) -> None:
    """Forget what is due now and every hour after, until cancelled."""
    while True:
        forget()
        await asyncio.sleep(CHECK_EVERY_S)
