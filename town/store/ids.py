"""Ids made in Python, for the tables a tick writes while it thinks (memories, plan items,
conversations), so that its new rows need no flush, and no transaction, to be told their ids;
and for visitors' chat lines, whose ids residents keep as how far they have heard, so an id is
never given twice even after the newest lines were forgotten (SQLite would reuse it).

Ids are reserved from the ``idcounter`` table (one row per table): a reservation moves the
table's counter past the block it takes, and past every id already in the table (rows written
before the counter existed). Every writer of those tables takes its ids here, so no two take the
same; a block a crash never used is a gap, which nothing minds.

- A session inside a transaction already (an input, the founding of a town) reserves in that
  transaction, exactly what it needs: with SQLite's one writer, a transaction of its own would
  wait on the caller's.
- A tick's session while it thinks (``Store.thinking``) takes them from a block this process keeps
  per store, reserved ahead in a short transaction of its own (``IdBlocks.top_up`` before the
  tick thinks; again, at once, should a tick ever use up the block).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, cast
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, Table, case, func, insert, select, update
from sqlalchemy import inspect as sa_inspect
from sqlmodel import Session

from town.store.db import Store
from town.store.models import ChatLine, Conversation, IdCounter, Memory, PlanItem

TABLES: dict[str, Any] = {
    "memory": Memory,
    "planitem": PlanItem,
    "conversation": Conversation,
    "chatline": ChatLine,
}
BLOCK = 512  # ids a process reserves at a time for a table

_COUNTER = cast(Table, sa_inspect(IdCounter).local_table)


def reserve(connection: Connection, table: str, n: int) -> int:
    """Move ``table``'s counter on by ``n`` (past every id in the table); the first id of the
    ``n`` reserved. Updated before it is read, so two processes never read the same value."""
    model = TABLES[table]
    ids = cast(Table, sa_inspect(model).local_table).c.id
    past = select(func.coalesce(func.max(ids), 0) + 1).scalar_subquery()
    counter = _COUNTER.c.next_id
    moved = update(_COUNTER).where(_COUNTER.c.name == table)
    done = connection.execute(moved.values(next_id=case((counter > past, counter), else_=past) + n))
    if done.rowcount != 1:  # (a store made without the migrations' first rows)
        first = connection.execute(select(past)).scalar_one()
        connection.execute(insert(_COUNTER).values(name=table, next_id=first + n))
        return int(first)
    end = connection.execute(select(counter).where(_COUNTER.c.name == table)).scalar_one()
    return int(end) - n


@dataclass
class IdBlocks:
    """The ids one process holds in reserve for one store, per table: [next, end)."""

    engine: Engine
    free: dict[str, tuple[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, table: str, n: int) -> list[int]:
        """``n`` ids from the block, a new block reserved first if it holds too few."""
        if n <= 0:
            return []
        with self.lock:
            start, end = self.free.get(table, (0, 0))
            if end - start < n:
                start, end = self._reserve(table, max(n, BLOCK))
            self.free[table] = (start + n, end)
            return list(range(start, start + n))

    def top_up(self, wanted: int = BLOCK // 2) -> None:
        """Reserve a new block of each table whose block holds fewer than ``wanted`` ids (before
        a tick thinks, so that it takes none while thinking)."""
        with self.lock:
            for table in TABLES:
                start, end = self.free.get(table, (0, 0))
                if end - start < wanted:
                    self.free[table] = self._reserve(table, max(wanted, BLOCK))

    def _reserve(self, table: str, n: int) -> tuple[int, int]:
        with self.engine.begin() as connection:
            first = reserve(connection, table, n)
        return first, first + n


_BLOCKS: WeakKeyDictionary[Engine, IdBlocks] = WeakKeyDictionary()
_BLOCKS_LOCK = threading.Lock()


def blocks(engine: Engine) -> IdBlocks:
    """This process's reserve of ids for the store behind ``engine``."""
    with _BLOCKS_LOCK:
        found = _BLOCKS.get(engine)
        if found is None:
            found = _BLOCKS[engine] = IdBlocks(engine)
        return found


def new_ids(session: Session, table: str, n: int) -> list[int]:
    """``n`` new ids for rows of ``table`` added to ``session``: from this process's block while
    a tick thinks, else reserved in the session's own transaction (see the module's notes)."""
    if n <= 0:
        return []
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    if Store.is_thinking(session):
        return blocks(engine).take(table, n)
    first = reserve(session.connection(), table, n)
    return list(range(first, first + n))
