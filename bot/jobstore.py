"""The project's database as APScheduler's job store, for the towns this process runs (used
by ``bot.scheduler.Timekeeper``)."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.jobstores.base import ConflictingIdError, JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.util import datetime_to_utc_timestamp
from sqlalchemy import Engine as SqlEngine
from sqlalchemy import inspect
from sqlalchemy import select as select_columns
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)

JOBS_TABLE = "apscheduler_jobs"

Row = tuple[float | None, bytes]  # a job's row: next run time (UTC timestamp), pickled state


class TownJobStore(SQLAlchemyJobStore):  # type: ignore[misc]  # apscheduler is untyped
    """The project's database as APScheduler's job store, for the towns this process runs.

    Their jobs are loaded from the table when a town starts here (``own``), kept in memory while
    it runs, and every change is written back to the table *off the event loop* (``flush``, in a
    thread). On SQLite a tick holds the database's one write lock while it awaits the LLM; a
    write made on the loop meanwhile would block the loop, and with it the tick it waits for.
    Other processes' jobs share the table but are never loaded, run, moved or removed here. A
    crash may lose the last write; a start sets the job to the town's stored pace anyway."""

    def __init__(self, engine: SqlEngine) -> None:
        super().__init__(engine=engine, tablename=JOBS_TABLE)
        self._jobs: dict[str, Any] = {}  # owned job id -> apscheduler Job
        self._dirty: set[str] = set()  # ids whose row must be written, or deleted
        self._removed: set[str] = set()  # ids whose row must be deleted
        self._parting: dict[str, Row] = {}  # rows of jobs disowned before they were written
        self.changed: Callable[[], None] = lambda: None  # the keeper's "flush soon"

    def start(self, scheduler: Any, alias: str) -> None:
        try:
            super().start(scheduler, alias)
        except SQLAlchemyError:
            # two processes creating the table at once: one of them loses the race
            if not inspect(self.engine).has_table(JOBS_TABLE):
                raise

    # -- ownership ------------------------------------------------------------------------------

    def own(self, jid: str) -> None:
        """A town starts here: its job, if the table has one, is ours from now on."""
        if jid in self._jobs:
            return
        try:
            found = super().lookup_job(jid)
        except (pickle.UnpicklingError, AttributeError, ImportError, TypeError, EOFError) as exc:
            # written by another version, or edited by hand: the keeper makes it again
            log.warning("the stored job %s cannot be read (%s); it is made again", jid, exc)
            return
        if found is not None:
            self._jobs[jid] = found

    def disown(self, jid: str) -> None:
        """A town leaves: its job is no longer run here; its row stays (``flush`` writes it)."""
        job = self._jobs.pop(jid, None)
        if job is not None and jid in self._dirty:
            self._parting[jid] = self._row(job)
        self._dirty.discard(jid)

    # -- the job store API, in memory -----------------------------------------------------------

    def lookup_job(self, job_id: str) -> Any:
        return self._jobs.get(job_id)

    def get_due_jobs(self, now: datetime) -> list[Any]:
        due = [j for j in self._jobs.values() if j.next_run_time and j.next_run_time <= now]
        return sorted(due, key=lambda j: (j.next_run_time, j.id))

    def get_next_run_time(self) -> datetime | None:
        times = [j.next_run_time for j in self._jobs.values() if j.next_run_time is not None]
        return min(times, default=None)

    def get_all_jobs(self) -> list[Any]:
        jobs = sorted(
            self._jobs.values(), key=lambda j: (j.next_run_time is None, j.next_run_time, j.id)
        )
        return jobs

    def add_job(self, job: Any) -> None:
        if job.id in self._jobs:
            raise ConflictingIdError(job.id)
        self._put(job)

    def update_job(self, job: Any) -> None:
        if job.id not in self._jobs:
            raise JobLookupError(job.id)
        self._put(job)

    def remove_job(self, job_id: str) -> None:
        if self._jobs.pop(job_id, None) is None:
            raise JobLookupError(job_id)
        self._removed.add(job_id)
        self._mark(job_id)

    def remove_all_jobs(self) -> None:
        for jid in list(self._jobs):
            self.remove_job(jid)

    def shutdown(self) -> None:
        """The engine is the store's and outlives the scheduler: nothing to dispose."""

    def _put(self, job: Any) -> None:
        self._jobs[job.id] = job
        self._removed.discard(job.id)
        self._mark(job.id)

    def _mark(self, jid: str) -> None:
        self._dirty.add(jid)
        self.changed()

    def _row(self, job: Any) -> Row:
        state = pickle.dumps(job.__getstate__(), self.pickle_protocol)
        return datetime_to_utc_timestamp(job.next_run_time), state

    # -- the table ------------------------------------------------------------------------------

    def take(self) -> dict[str, Row | None]:
        """The rows to write as they stand now (None: delete), pickled on the loop."""
        rows: dict[str, Row | None] = dict(self._parting)
        for jid in self._dirty:
            job = self._jobs.get(jid)
            if job is not None:
                rows[jid] = self._row(job)
            elif jid in self._removed:
                rows[jid] = None
        self._dirty.clear()
        self._removed.clear()
        self._parting.clear()
        return rows

    def retry(self, rows: dict[str, Row | None]) -> None:
        """Rows whose write failed, written on the next flush unless newer ones are due."""
        for jid, row in rows.items():
            if jid not in self._dirty and jid not in self._parting:
                if row is None:
                    self._removed.add(jid)
                    self._dirty.add(jid)
                else:
                    self._parting[jid] = row

    def rewrite(self, jid: str) -> None:
        """Write an owned job's row again (it was deleted by hand)."""
        if jid in self._jobs:
            self._mark(jid)

    @property
    def pending(self) -> bool:
        return bool(self._dirty or self._parting)

    def write(self, rows: dict[str, Row | None]) -> None:
        """Write rows in one transaction (blocking: run it in a thread)."""
        table = self.jobs_t
        with self.engine.begin() as connection:
            for jid, row in sorted(rows.items()):
                if row is None:
                    connection.execute(table.delete().where(table.c.id == jid))
                    continue
                values = {"next_run_time": row[0], "job_state": row[1]}
                done = connection.execute(table.update().where(table.c.id == jid).values(values))
                if done.rowcount == 0:
                    connection.execute(table.insert().values(id=jid, **values))

    def stored(self) -> dict[str, float | None]:
        """Each owned job's row as the table holds it: id -> next run time (None: paused)."""
        if not self._jobs:
            return {}
        table = self.jobs_t
        query = select_columns(table.c.id, table.c.next_run_time).where(
            table.c.id.in_(sorted(self._jobs))
        )
        with self.engine.begin() as connection:
            return {row.id: row.next_run_time for row in connection.execute(query)}
