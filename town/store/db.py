"""The store: one SQLAlchemy engine, migrated by Alembic, and all-or-nothing sessions.

``Store.session()`` is the unit of work: everything written inside it commits together or not at
all. Work that must follow a commit (updating in-memory caches, say) registers with
``Store.after_commit(session, fn)`` and runs only once the commit has succeeded; caches that were
changed ahead of the commit register ``Store.after_rollback`` to be dropped if it fails. Writes
that can wait (last-access times) register ``Store.before_commit``. A tick still holds SQLite's one
write lock from its first flush until it commits, LLM calls included, so other writers in the same
process (the outbox pump) write from a worker thread, never on the
event loop, where waiting for the lock would stop the tick that holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session

from town.store.snapshot import SnapshotError, copy_sqlite, dump_postgres, sqlite_file

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).with_name("migrations")
_BEFORE_COMMIT = "bottown_before_commit"
_AFTER_COMMIT = "bottown_after_commit"
_AFTER_ROLLBACK = "bottown_after_rollback"
_THINKING = "bottown_thinking"  # session.info: a tick thinks with this session (``Store.thinking``)


class StoreError(Exception):
    """The database cannot be used; the message says what is wrong and what to do."""


class QueryWhileThinking(RuntimeError):
    """A tick tried to use the database while it thinks: everything it needs is read before
    (its snapshot) and everything it writes waits for its commit. A bug, never a user's error."""


class Store:
    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.safe_url = parsed.render_as_string(hide_password=True)
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs["pool_pre_ping"] = True
            kwargs["max_overflow"] = -1  # a checkout never waits (and never blocks the loop)
        try:
            self.engine: Engine = create_engine(url, **kwargs)
        except ModuleNotFoundError as exc:  # the URL's driver is an optional extra
            extra = " (pip install 'bottown[postgres]')" if "psycopg" in str(exc.name) else ""
            raise StoreError(
                f"the database {self.safe_url} needs the Python package {exc.name!r}, which is "
                f"not installed{extra}"
            ) from None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)

    @classmethod
    def open(
        cls, url: str, *, migrate: bool = True, backups: Path | None = None, back_up: bool = True
    ) -> Store:
        """The store at ``url``, migrated (see ``migrate``; ``backups``: where the copy made
        before an upgrade goes, by default a ``backups`` folder beside a SQLite file)."""
        store = cls(url)
        if migrate:
            store.migrate(backups, back_up=back_up)
        return store

    def revision(self) -> set[str]:
        """The schema revisions the database is at (none: a new database)."""
        with self.engine.connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads())

    def migrate(self, backups: Path | None = None, *, back_up: bool = True) -> None:
        """Bring the schema to the newest revision, or say clearly why that is impossible. A
        database at an older revision is copied first (into ``backups``), and the log says
        where (unless ``back_up`` is off: the operator made their own); one at a revision this
        code does not know (a newer bottown's) is refused."""
        cfg = migrations_config()
        try:
            current = self.revision()
            unknown = current - known_revisions()
            if unknown:
                raise StoreError(
                    f"the database {self.safe_url} was written by a newer bottown "
                    f"(schema revision {', '.join(sorted(unknown))}): upgrade bottown, "
                    "or point BOTTOWN_DATABASE_URL at another database"
                )
            if current == code_heads():
                return
            if current and back_up:
                self._back_up_before_upgrade(current, backups)
            with self.engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except StoreError:
            raise
        except OperationalError as exc:
            raise StoreError(
                f"cannot open the database {self.safe_url}: {_first_line(exc)}. "
                "Check BOTTOWN_DATABASE_URL and that the server is running."
            ) from None
        except DatabaseError as exc:
            raise StoreError(
                f"the database {self.safe_url} is corrupt or not a bottown database "
                f"({_first_line(exc)}): move the file aside and start again, "
                "or point BOTTOWN_DATABASE_URL elsewhere"
            ) from None

    def _back_up_before_upgrade(self, current: set[str], backups: Path | None) -> None:
        was, now = "+".join(sorted(current)), "+".join(sorted(code_heads()))
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        file = sqlite_file(self.url)
        if self.is_sqlite and file is None:
            return  # a database in memory: nothing outlives the process
        folder = backups or (file.parent / "backups" if file else Path("backups"))
        if file is not None:
            target = folder / f"bottown-{was}-{stamp}.db"
            copy_sqlite(file, target)
        else:
            target = folder / f"bottown-{was}-{stamp}.pgdump"
            try:
                dump_postgres(self.url, target)
            except SnapshotError as exc:
                raise StoreError(
                    f"the database is at schema revision {was} and this bottown needs {now}; "
                    f"it backs up first, and {exc}: install it, or back up yourself and run "
                    "`bottown migrate --no-backup`"
                ) from None
        log.warning("upgrading the database from schema %s to %s; backup: %s", was, now, target)

    @contextmanager
    def session(self, *, autoflush: bool = True) -> Iterator[Session]:
        """A unit of work: commit on success, roll back on any error, then run after-commit work.
        (A tick's session has ``autoflush`` off: what it adds while thinking waits in the
        session until its one write.)"""
        with Session(self.engine, expire_on_commit=False, autoflush=autoflush) as session:
            try:
                yield session
                for before in session.info.pop(_BEFORE_COMMIT, []):
                    before(session)
                session.commit()
            except BaseException:
                session.rollback()
                session.info.pop(_BEFORE_COMMIT, None)
                session.info.pop(_AFTER_COMMIT, None)
                for fn in session.info.pop(_AFTER_ROLLBACK, []):
                    fn()
                raise
            session.info.pop(_AFTER_ROLLBACK, None)
            for fn in session.info.pop(_AFTER_COMMIT, []):
                fn()

    @staticmethod
    def commit(session: Session) -> Callable[[], None]:
        """Commit a session opened by ``session()`` before its end (a tick's one write), with
        its before-commit work; returns its after-commit work, for the caller to run once it
        has let go of what it holds. What follows in the session is a new transaction."""
        for before in session.info.pop(_BEFORE_COMMIT, []):
            before(session)
        session.commit()
        session.info.pop(_AFTER_ROLLBACK, None)
        after = session.info.pop(_AFTER_COMMIT, [])

        def committed() -> None:
            for fn in after:
                fn()

        return committed

    @staticmethod
    def end_read(session: Session) -> None:
        """End a session's read (a tick's snapshot), nothing written: it holds no connection,
        and its objects stay as read (``expire_on_commit`` is off)."""
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("a snapshot wrote to the store: " + repr(session.dirty))
        session.commit()

    @staticmethod
    @contextmanager
    def thinking(session: Session) -> Iterator[None]:
        """While the block runs, any use of the database by ``session`` raises
        :class:`QueryWhileThinking` (a tick's LLM calls: no transaction held across them)."""
        session.info[_THINKING] = True
        try:
            yield
        finally:
            session.info.pop(_THINKING, None)

    @staticmethod
    def is_thinking(session: Session) -> bool:
        return bool(session.info.get(_THINKING))

    @staticmethod
    def before_commit(session: Session, fn: Callable[[Session], None]) -> None:
        """Run ``fn(session)`` once, just before this unit of work commits (deferred writes)."""
        callbacks = session.info.setdefault(_BEFORE_COMMIT, [])
        if fn not in callbacks:
            callbacks.append(fn)

    @staticmethod
    def after_commit(session: Session, fn: Callable[[], None]) -> None:
        session.info.setdefault(_AFTER_COMMIT, []).append(fn)

    @staticmethod
    def after_rollback(session: Session, fn: Callable[[], None]) -> None:
        """Run ``fn`` if this unit of work is rolled back (to drop caches it touched)."""
        callbacks = session.info.setdefault(_AFTER_ROLLBACK, [])
        if fn not in callbacks:
            callbacks.append(fn)

    def unreachable(self) -> str:
        """Why the database does not answer a ``SELECT 1`` ("" when it does): ``/healthz``."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            return _first_line(exc)
        return ""

    def dispose(self) -> None:
        self.engine.dispose()


@event.listens_for(Session, "after_begin")
def _no_sql_while_thinking(session: Session, _transaction: Any, _connection: Any) -> None:
    if session.info.get(_THINKING):
        raise QueryWhileThinking(
            "a tick used the database while thinking (its snapshot or its write should have)"
        )


def migrations_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def code_heads() -> set[str]:
    """The schema revisions this code writes (Alembic's heads)."""
    return set(ScriptDirectory.from_config(migrations_config()).get_heads())


def known_revisions() -> set[str]:
    """Every schema revision this code knows, the old ones included."""
    return {r.revision for r in ScriptDirectory.from_config(migrations_config()).walk_revisions()}


def _first_line(exc: Exception) -> str:
    orig = getattr(exc, "orig", None) or exc
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


def _sqlite_pragmas(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
