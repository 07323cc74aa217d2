"""Inputs across processes: what one process heard (a gateway: a visitor's words, a reaction)
kept as a ``WaitingInput`` row of its town, and the process that runs the town woken to take it
in.

On PostgreSQL the row's write carries ``NOTIFY bottown_waiting, '<town id>'`` (delivered at its
commit, so never before the row is there) and ``listen`` hears them on a connection of its own;
on SQLite (one machine) ``towns_waiting`` is what a poll asks. ``take`` claims a town's rows in
order, deleting them in the same transaction: each is taken in at most once, by one process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, text
from sqlmodel import col, select

from town.store.db import Store
from town.store.models import WaitingInput

log = logging.getLogger(__name__)

CHANNEL = "bottown_waiting"  # PostgreSQL's notification channel of waiting inputs


def keep(store: Store, town_id: int, kind: str, body: dict[str, Any]) -> None:
    """One waiting input of the town, and (PostgreSQL) its notification, in one transaction."""
    with store.session() as s:
        s.add(WaitingInput(town_id=town_id, kind=kind, body=body))
        if not store.is_sqlite:
            s.execute(
                text("select pg_notify(:channel, :town)"),
                {"channel": CHANNEL, "town": str(town_id)},
            )


def take(store: Store, town_id: int, limit: int = 100) -> list[WaitingInput]:
    """The town's oldest waiting inputs (up to ``limit``), claimed: deleted as they are read."""
    with store.session() as s:
        query = select(WaitingInput).where(WaitingInput.town_id == town_id)
        rows = list(s.exec(query.order_by(col(WaitingInput.id)).limit(limit)).all())
        if rows:
            ids = [r.id for r in rows]
            s.execute(delete(WaitingInput).where(col(WaitingInput.id).in_(ids)))
        for row in rows:
            s.expunge(row)
        return rows


def towns_waiting(store: Store, town_ids: list[int]) -> set[int]:
    """Which of these towns have inputs waiting."""
    if not town_ids:
        return set()
    with store.session() as s:
        query = select(WaitingInput.town_id).where(col(WaitingInput.town_id).in_(town_ids))
        return set(s.exec(query.distinct()).all())


def listen(store: Store, heard: Callable[[int], None], stop: threading.Event) -> None:
    """PostgreSQL: call ``heard(town_id)`` for every waiting input committed, until ``stop``
    (blocking: run it on a thread of its own). Checks ``stop`` twice a second."""
    raw = store.engine.raw_connection()
    try:
        driver: Any = raw.driver_connection  # psycopg's connection, through SQLAlchemy's pool
        driver.autocommit = True
        driver.execute(f"LISTEN {CHANNEL}")
        while not stop.is_set():
            for note in driver.notifies(timeout=0.5):
                if note.payload.isdigit():
                    heard(int(note.payload))
    finally:
        raw.invalidate()  # a listening connection goes back to no pool
