"""The audit log: every input to a town and every output from it, with game and wall time.

It records, and only records: nothing in the town reads it back to decide anything (what
visitors and residents say to each other is kept as chat lines, ``town.outbox.chatlog``).

Inputs (direction "in"): a visitor's words (``say``; ``say:limited`` when the visitor was over
the rate limit and residents did not hear it; ``say:place`` at a place with a handler of its
own), a command line (``command``), an inner voice (``whisper``), an object set (``set``), an
interview question (``interview``). Outputs ("out"): a resident's words (``said``), a
resident's answer to a visitor (``reply``, shown as ``reply_line``), a notice to a visitor
(``notice``), an interview answer (``answer``).

Each row is written in the same transaction as what it records (``town.inputs`` for inputs,
``town.outbox.events.write_outbox`` for the town's words), so a rolled-back tick leaves no row and a
committed one never lacks its rows. Text comes cleaned (``town.text.Line``: one line, no
control characters, cut like inputs are), made once where it came in; the log stores it as
given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy import delete, func
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select

from town.store.db import Store
from town.store.models import AuditEntry, Town
from town.text import Line, Name, clean_text

log = logging.getLogger(__name__)

IN, OUT = "in", "out"
DIRECTIONS = (IN, OUT)
LIMITED = "say:limited"
SAY, REPLY = "say", "reply"
OUTPUT_EVENTS = frozenset({"said", "notice"})  # town event kinds that are audited outputs
PRUNE_BATCH = 5000  # rows deleted per transaction, so a big prune never holds the writer long
DAY_S = 24 * 3600.0
WHO = 200  # characters of who did it: a name and where it came from
WHERE = 110  # of those, where: the platform and the person's id there


class RunningTown(Protocol):
    """What the log needs of a running town (its engine): the lock every change to the town
    takes, its store, and its row."""

    @property
    def lock(self) -> asyncio.Lock: ...
    @property
    def store(self) -> Store: ...
    @property
    def town_id(self) -> int: ...
    def town(self, session: Session) -> Town: ...


def identity(name: Name, platform: str = "", user_id: str = "") -> Line:
    """How the log names a person: ``Alice (discord:1234)``; ``someone`` when nothing is known."""
    shown = name or "someone"
    where = f"{platform}:{user_id}" if platform and user_id else platform or user_id
    # two clean lines joined by a space are one (the name was made plain where it came in)
    return Line(f"{shown} ({clean_text(where, WHERE)})" if where else shown)


def reply_line(to: str, text: str) -> Line:
    """How the log shows a resident's answer to a visitor: ``(to Alice) Hello!`` (for people
    reading the log: nothing reads it back; the chat lines are ``town.outbox.chatlog``)."""
    return clean_text(f"(to {to}) {text}")


def record(
    session: Session,
    town_id: int,
    direction: str,
    kind: str,
    who: str,
    text: Line,
    *,
    game_time: datetime,
    platform: str = "",
    channel: str = "",
) -> None:
    """Add one row in the unit of work ``session`` (it commits or rolls back with it), its
    values cut to the columns' sizes (``who``: a name from ``identity``, or the town's)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be in or out, not {direction!r}")
    session.add(
        AuditEntry(
            town_id=town_id,
            direction=direction,
            kind=kind[:20],
            platform=platform[:20],
            channel=channel[:300],
            who=who[:WHO],
            text=text,
            game_time=game_time,
        )
    )


async def record_command(
    engine: RunningTown, platform: str, user_id: str, name: Name, channel: str, line: Line
) -> None:
    """A command line as it entered the town, at the town's clock. Under the engine's lock, so
    it never waits on a tick's transaction (SQLite has one writer)."""
    async with engine.lock:
        with engine.store.session() as session:
            clock = engine.town(session).clock
            record(
                session,
                engine.town_id,
                IN,
                "command",
                identity(name, platform, user_id),
                line,
                game_time=clock,
                platform=platform,
                channel=channel,
            )


def prune(store: Store, town_id: int | None, days: int, *, now: datetime | None = None) -> int:
    """Delete rows older than ``days`` (of wall time) for one town, or every town when
    ``town_id`` is None. ``days`` 0 keeps everything. Returns how many rows went."""
    if days < 0:
        raise ValueError("retention days cannot be negative")
    if days == 0:
        return 0
    cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
    removed = 0
    while True:
        batch = _prune_batch(store, town_id, cutoff)
        removed += batch
        if batch < PRUNE_BATCH:
            return removed


def _prune_batch(store: Store, town_id: int | None, cutoff: datetime) -> int:
    """Delete up to ``PRUNE_BATCH`` rows older than ``cutoff`` in one transaction."""
    with store.session() as s:
        old = select(AuditEntry.id).where(col(AuditEntry.wall_time) < cutoff)
        if town_id is not None:
            old = old.where(AuditEntry.town_id == town_id)
        ids = list(s.exec(old.order_by(col(AuditEntry.id)).limit(PRUNE_BATCH)).all())
        if ids:
            s.execute(delete(AuditEntry).where(col(AuditEntry.id).in_(ids)))
    return len(ids)


async def keep_pruned(engine: RunningTown, days: int, *, every_s: float = DAY_S) -> None:
    """While a town runs: prune its audit log to ``days`` now, and again every ``every_s``
    seconds (``days`` 0: never). Each batch runs under the engine's lock, so it never waits on
    a tick's transaction nor holds one up for long. A failure is logged and tried again at the
    next round; only cancelling ends it."""
    if days <= 0:
        return
    while True:
        try:
            cutoff = datetime.now(UTC) - timedelta(days=days)
            removed, batch = 0, PRUNE_BATCH
            while batch == PRUNE_BATCH:
                async with engine.lock:
                    batch = _prune_batch(engine.store, engine.town_id, cutoff)
                removed += batch
            if removed:
                log.info("audit log: pruned %d entries older than %d days", removed, days)
        except Exception:
            log.exception("pruning the audit log failed; trying again in %.0f s", every_s)
        await asyncio.sleep(every_s)


@dataclass(frozen=True)
class AuditFilter:
    """Which rows to read. Text filters match case-insensitively, ``who`` and ``text_contains``
    anywhere in the field, ``channel`` and ``platform`` the whole field. ``kind`` matches the
    kind or its sub-kinds (``say`` also finds ``say:limited``)."""

    town_id: int | None = None
    since: datetime | None = None  # wall time, inclusive
    until: datetime | None = None  # wall time, exclusive
    direction: str | None = None
    who: str | None = None
    platform: str | None = None
    channel: str | None = None
    kind: str | None = None
    text_contains: str | None = None

    def __post_init__(self) -> None:
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be in or out, not {self.direction!r}")
        if self.since and self.until and self.since >= self.until:
            raise ValueError("the start of the time range must come before its end")


@dataclass(frozen=True)
class AuditRow:
    id: int
    town: str
    direction: str
    kind: str
    platform: str
    channel: str
    who: str
    text: str
    game_time: datetime
    wall_time: datetime


def _aware(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _query(where: AuditFilter) -> Select[AuditEntry, str]:
    query = select(AuditEntry, Town.name).join(Town, col(Town.id) == col(AuditEntry.town_id))
    if where.town_id is not None:
        query = query.where(AuditEntry.town_id == where.town_id)
    if where.since is not None:
        query = query.where(col(AuditEntry.wall_time) >= _aware(where.since))
    if where.until is not None:
        query = query.where(col(AuditEntry.wall_time) < _aware(where.until))
    if where.direction is not None:
        query = query.where(AuditEntry.direction == where.direction)
    if where.platform is not None:
        query = query.where(func.lower(AuditEntry.platform) == where.platform.casefold())
    if where.channel is not None:
        query = query.where(func.lower(AuditEntry.channel) == where.channel.casefold())
    if where.kind is not None:
        kind = where.kind.casefold()
        query = query.where(
            (func.lower(AuditEntry.kind) == kind)
            | func.lower(AuditEntry.kind).startswith(f"{kind}:", autoescape=True)
        )
    if where.who is not None:
        query = query.where(func.lower(AuditEntry.who).contains(where.who.lower(), autoescape=True))
    if where.text_contains is not None:
        needle = where.text_contains.lower()
        query = query.where(func.lower(AuditEntry.text).contains(needle, autoescape=True))
    return query


def count(store: Store, where: AuditFilter) -> int:
    with store.session() as s:
        inner = _query(where).subquery()
        return int(s.exec(select(func.count()).select_from(inner)).one())


def rows(
    store: Store, where: AuditFilter, *, newest: int | None = None, batch: int = 1000
) -> Iterator[AuditRow]:
    """The matching rows, oldest first. Streamed in batches of ``batch`` rows, so any number of
    them takes constant memory; ``newest`` keeps only that many of the most recent."""
    if newest is not None:
        if newest < 1:
            raise ValueError("the limit must be at least 1")
        with store.session() as s:
            last = s.exec(_query(where).order_by(col(AuditEntry.id).desc()).limit(newest)).all()
        yield from (_row(r) for r in reversed(last))
        return
    after = 0
    while True:  # keyset pages: each a short read, none holding a cursor open between them
        with store.session() as s:
            page = s.exec(
                _query(where)
                .where(col(AuditEntry.id) > after)
                .order_by(col(AuditEntry.id))
                .limit(batch)
            ).all()
        yield from (_row(r) for r in page)
        if len(page) < batch:
            return
        after = page[-1][0].id or 0


def _row(found: tuple[AuditEntry, str]) -> AuditRow:
    entry, town = found
    assert entry.id is not None
    return AuditRow(
        entry.id,
        town,
        entry.direction,
        entry.kind,
        entry.platform,
        entry.channel,
        entry.who,
        entry.text,
        _aware(entry.game_time),
        _aware(entry.wall_time),
    )
