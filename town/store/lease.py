"""Leases: which worker runs a town, kept in the database, so no town is ever ticked by two.

A worker process registers under its name (``WorkerRow``) and holds towns through leases
(``TownLease``: worker name, instance, epoch, expiry). Every statement is a conditional write
whose row count says who won, so the rules hold under concurrency on PostgreSQL (row locks;
a racing ``INSERT`` of the same primary key fails) and on SQLite (one writer at a time):

- ``acquire`` takes a town whose lease is missing, expired, or whose holder is not a live
  worker; a takeover raises the epoch (fencing).
- ``renew`` extends a lease only while it is unexpired and still names this instance and epoch.
- ``check`` (the engine's guard) runs inside a tick's transaction just before it commits: it
  re-writes the lease row on the same conditions, which locks it until the commit. A stale
  owner's tick (its lease expired, or taken over, or edited by hand) raises ``LeaseLost`` and
  rolls back; a takeover waits for a passing tick's commit. So ticks commit one at a time, each
  under the lease it names, whatever the lease row says.

Time is the database's clock on PostgreSQL (``clock_timestamp()``), so workers on several
machines agree on expiry whatever their own clocks say; SQLite lives on one machine, whose clock
it uses. A lease row edited by hand cannot yield two owners: the row names at most one
(worker, instance, epoch), and only that one passes ``check``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from sqlalchemy import delete, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from town.store.db import Store
from town.store.models import TownLease, WorkerRow

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """This worker no longer holds the town's lease: stop running it."""


class WorkerNameTaken(Exception):
    """Another live process runs under this worker name."""


@dataclass
class Lease:
    """A lease this process holds: the town, the epoch it was taken at, and its expiry (by the
    database's clock) as of the last renewal."""

    town_id: int
    epoch: int
    expires_at: datetime


def aware(value: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were written as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _update(table: type[TownLease] | type[WorkerRow]) -> Any:
    """A conditional UPDATE whose row count says who won; objects in the session are left as
    they were read (so what was seen can still be reported)."""
    return update(table).execution_options(synchronize_session=False)


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


@dataclass
class Leases:
    """The leases and the registration of one worker process (``worker`` name, ``instance``)."""

    store: Store
    worker: str
    lease_seconds: float = 30.0
    instance: str = field(default_factory=lambda: uuid4().hex)

    def __post_init__(self) -> None:
        self._host, self._pid = "", 0
        if not self.worker.strip() or len(self.worker) > 100:
            raise ValueError("a worker name needs 1 to 100 characters")
        if self.lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.ttl = timedelta(seconds=self.lease_seconds)

    def now(self, session: Session) -> datetime:
        """The database's clock (PostgreSQL), or this machine's (SQLite)."""
        if self.store.is_sqlite:
            return datetime.now(UTC)
        return aware(session.execute(text("select clock_timestamp()")).scalar_one())

    # -- the worker registry --------------------------------------------------------------------

    def register(self, host: str, pid: int) -> None:
        """Claim the worker name for this process. A row whose heartbeat is older than the lease
        time belonged to a dead process and is taken over; a fresher one is refused."""
        self._host, self._pid = host, pid
        try:
            with self.store.session() as s:
                now = self.now(s)
                row = s.get(WorkerRow, self.worker)
                if row is None:
                    s.add(self._worker_row(host, pid, now))
                    s.flush()
                    return
                seen = aware(row.heartbeat_at)
                if row.instance != self.instance and seen > now - self.ttl:
                    raise WorkerNameTaken(self._taken_message(row, now))
                taken = s.execute(
                    _update(WorkerRow)
                    .where(
                        col(WorkerRow.name) == self.worker,
                        col(WorkerRow.instance) == row.instance,
                        col(WorkerRow.heartbeat_at) == row.heartbeat_at,
                    )
                    .values(instance=self.instance, host=host[:200], pid=pid, heartbeat_at=now)
                )
                if _rowcount(taken) != 1:
                    raise WorkerNameTaken(self._refusal())
                if row.instance != self.instance:
                    log.info(
                        "worker name %r: took over the row of a dead process (pid %d on %s, "
                        "last heartbeat %.0f s ago)",
                        self.worker,
                        row.pid,
                        row.host or "?",
                        (now - seen).total_seconds(),
                    )
        except IntegrityError:  # another process inserted the same name at the same moment
            raise WorkerNameTaken(self._refusal()) from None

    def _refusal(self) -> str:
        """Why the name is refused, after losing a race for it to another process."""
        with self.store.session() as s:
            row = s.get(WorkerRow, self.worker)
            if row is None or row.instance == self.instance:
                return f"worker name {self.worker!r} was just claimed by another process"
            return self._taken_message(row, self.now(s))

    def heartbeat(self) -> None:
        """Say this process is alive; ``WorkerNameTaken`` if another process has its name now."""
        try:
            self._heartbeat()
        except IntegrityError:
            raise WorkerNameTaken(
                f"worker name {self.worker!r} was just claimed by another process"
            ) from None

    def _heartbeat(self) -> None:
        with self.store.session() as s:
            now = self.now(s)
            done = s.execute(
                _update(WorkerRow)
                .where(col(WorkerRow.name) == self.worker, col(WorkerRow.instance) == self.instance)
                .values(heartbeat_at=now)
            )
            if _rowcount(done) != 1:
                row = s.get(WorkerRow, self.worker)
                if row is None:  # deleted by hand: this process is alive, so register again
                    log.warning(
                        "the registration of worker %r was gone: registered again", self.worker
                    )
                    s.add(self._worker_row(self._host, self._pid, now))
                    return
                raise WorkerNameTaken(
                    f"worker name {self.worker!r} now belongs to another process "
                    f"(pid {row.pid} on {row.host or '?'}): this one was taken for dead"
                )

    def unregister(self) -> None:
        with self.store.session() as s:
            s.execute(
                delete(WorkerRow).where(
                    col(WorkerRow.name) == self.worker, col(WorkerRow.instance) == self.instance
                )
            )

    def live_workers(self) -> list[WorkerRow]:
        """Workers whose heartbeat is fresher than the lease time."""
        with self.store.session() as s:
            since = self.now(s) - self.ttl
            rows = s.exec(select(WorkerRow).order_by(col(WorkerRow.name))).all()
            return [r for r in rows if aware(r.heartbeat_at) > since]

    # -- leases ---------------------------------------------------------------------------------

    def acquire(self, town_id: int) -> Lease | None:
        """The town's lease for this process, or None when another live worker holds it (or won
        a race for it just now)."""
        try:
            with self.store.session() as s:
                now = self.now(s)
                expires = now + self.ttl
                row = s.get(TownLease, town_id)
                if row is None:
                    s.add(
                        TownLease(
                            town_id=town_id,
                            worker=self.worker,
                            instance=self.instance,
                            epoch=1,
                            expires_at=expires,
                            renewed_at=now,
                        )
                    )
                    s.flush()
                    return Lease(town_id, 1, expires)
                why = self._free(s, row, now)
                if why is None:
                    return None
                taken = s.execute(
                    _update(TownLease)
                    .where(
                        col(TownLease.town_id) == town_id,
                        col(TownLease.worker) == row.worker,
                        col(TownLease.instance) == row.instance,
                        col(TownLease.epoch) == row.epoch,
                        col(TownLease.expires_at) == row.expires_at,
                    )
                    .values(
                        worker=self.worker,
                        instance=self.instance,
                        epoch=row.epoch + 1,
                        expires_at=expires,
                        renewed_at=now,
                    )
                )
                if _rowcount(taken) != 1:
                    return None  # changed under us: another worker took it, or its owner renewed
                level = logging.INFO if why.startswith("expired") else logging.WARNING
                log.log(
                    level,
                    "took over town #%d from worker %r (epoch %d -> %d): %s",
                    town_id,
                    row.worker,
                    row.epoch,
                    row.epoch + 1,
                    why,
                )
                return Lease(town_id, row.epoch + 1, expires)
        except IntegrityError:  # another worker inserted the first lease at the same moment
            return None

    def renew(self, lease: Lease) -> Lease:
        """Extend the lease by the lease time; ``LeaseLost`` if it expired or changed hands."""
        with self.store.session() as s:
            now = self.now(s)
            expires = now + self.ttl
            done = s.execute(self._mine(lease, now).values(expires_at=expires, renewed_at=now))
            if _rowcount(done) != 1:
                raise LeaseLost(self._lost_message(s, lease, now))
        lease.expires_at = expires
        return lease

    def release(self, lease: Lease) -> bool:
        """Give the town up at once (its lease expires now). False if it was not ours anymore."""
        with self.store.session() as s:
            now = self.now(s)
            done = s.execute(
                _update(TownLease)
                .where(
                    col(TownLease.town_id) == lease.town_id,
                    col(TownLease.worker) == self.worker,
                    col(TownLease.instance) == self.instance,
                    col(TownLease.epoch) == lease.epoch,
                )
                .values(expires_at=now, renewed_at=now)
            )
            return _rowcount(done) == 1

    def check(self, session: Session, lease: Lease) -> None:
        """Inside a tick's transaction: this process still holds the lease, unexpired, at the
        same epoch; the lease row stays locked until the transaction ends. ``LeaseLost`` if not."""
        now = self.now(session)
        done = session.execute(self._mine(lease, now).values(renewed_at=col(TownLease.renewed_at)))
        if _rowcount(done) != 1:
            raise LeaseLost(self._lost_message(session, lease, now))

    def guard(
        self, lease: Lease, on_lost: Callable[[LeaseLost], None] | None = None
    ) -> Callable[[Session], None]:
        """``check`` as an ``Engine.guard``; ``on_lost`` is told why before ``LeaseLost``
        propagates."""

        def guard(session: Session) -> None:
            try:
                self.check(session, lease)
            except LeaseLost as exc:
                if on_lost is not None:
                    on_lost(exc)
                raise

        return guard

    def holders(self) -> list[TownLease]:
        """Every lease row, by town."""
        with self.store.session() as s:
            return list(s.exec(select(TownLease).order_by(col(TownLease.town_id))).all())

    def vacant(self, town_ids: list[int]) -> list[int]:
        """Those of ``town_ids`` that ``acquire`` would take now, in the order given."""
        with self.store.session() as s:
            now = self.now(s)
            rows = {
                r.town_id: r
                for r in s.exec(select(TownLease).where(col(TownLease.town_id).in_(town_ids)))
            }
            return [t for t in town_ids if t not in rows or self._free(s, rows[t], now)]

    def next_expiry(self, town_ids: list[int]) -> float | None:
        """Seconds until the soonest of these towns' leases held by others runs out (None if
        none is held), so a worker can try for a dead one's town the moment it is free."""
        with self.store.session() as s:
            now = self.now(s)
            rows = s.exec(select(TownLease).where(col(TownLease.town_id).in_(town_ids))).all()
            left = [
                (aware(r.expires_at) - now).total_seconds()
                for r in rows
                if r.instance != self.instance and aware(r.expires_at) > now
            ]
            return min(left, default=None)

    def held_by_live_workers(self) -> dict[str, int]:
        """Unexpired leases per live worker (a live worker holding none counts 0)."""
        with self.store.session() as s:
            now = self.now(s)
            workers = s.exec(select(WorkerRow)).all()
            counts = {w.name: 0 for w in workers if aware(w.heartbeat_at) > now - self.ttl}
            for row in s.exec(select(TownLease)).all():
                if row.worker in counts and aware(row.expires_at) > now:
                    counts[row.worker] += 1
            return counts

    # -- internals ------------------------------------------------------------------------------

    def _worker_row(self, host: str, pid: int, now: datetime) -> WorkerRow:
        return WorkerRow(
            name=self.worker, instance=self.instance, host=host[:200], pid=pid, heartbeat_at=now
        )

    def _taken_message(self, row: WorkerRow, now: datetime) -> str:
        age = (now - aware(row.heartbeat_at)).total_seconds()
        wait = max(0.0, self.lease_seconds - age)
        return (
            f"worker name {self.worker!r} is in use by a live process (pid {row.pid} on "
            f"{row.host or '?'}, heartbeat {age:.0f} s ago): give this one another --name, "
            f"or if that process is gone, start again in {wait:.0f} s"
        )

    def _mine(self, lease: Lease, now: datetime) -> Any:
        return _update(TownLease).where(
            col(TownLease.town_id) == lease.town_id,
            col(TownLease.worker) == self.worker,
            col(TownLease.instance) == self.instance,
            col(TownLease.epoch) == lease.epoch,
            col(TownLease.expires_at) > now,
        )

    def _lost_message(self, session: Session, lease: Lease, now: datetime) -> str:
        row = session.get(TownLease, lease.town_id, populate_existing=True)
        where = f"town #{lease.town_id}: lease (epoch {lease.epoch})"
        if row is None:
            return f"{where} is gone"
        if (row.worker, row.instance, row.epoch) != (self.worker, self.instance, lease.epoch):
            return f"{where} now belongs to worker {row.worker!r} at epoch {row.epoch}" + (
                "" if row.epoch > lease.epoch else " (the row was edited by hand?)"
            )
        late = (now - aware(row.expires_at)).total_seconds()
        return f"{where} expired {late:.1f} s ago"

    def _free(self, session: Session, row: TownLease, now: datetime) -> str | None:
        """Why a lease held by someone may be taken over, or None while its holder keeps it."""
        expires = aware(row.expires_at)
        if expires <= now:
            return f"expired {(now - expires).total_seconds():.1f} s ago"
        if row.worker == self.worker and row.instance == self.instance:
            return "the row names this process, which did not take it (edited by hand?)"
        if expires > now + 2 * self.ttl:
            return (
                f"it runs until {expires:%Y-%m-%d %H:%M:%S} UTC, further ahead than any worker "
                "renews (edited by hand?)"
            )
        holder = session.get(WorkerRow, row.worker)
        if holder is None or holder.instance != row.instance:
            return "no live worker holds it (its process is gone, or the row was edited by hand)"
        if aware(holder.heartbeat_at) <= now - self.ttl:
            return f"worker {row.worker!r} stopped its heartbeat"
        return None
