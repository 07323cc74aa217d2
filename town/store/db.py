"""The store: one SQLAlchemy engine, migrated by Alembic, and all-or-nothing sessions.

``Store.session()`` is the unit of work: everything written inside it commits together or not at
all. Work that must follow a commit (updating in-memory caches, say) registers with
``Store.after_commit(session, fn)`` and runs only once the commit has succeeded; caches that were
changed ahead of the commit register ``Store.after_rollback`` to be dropped if it fails. Writes
that can wait (last-access times) register ``Store.before_commit``. A tick still holds SQLite's one
write lock from its first flush until it commits, LLM calls included, so other writers in the same
process (the outbox pump, the scheduler's job store) write from a worker thread, never on the
event loop, where waiting for the lock would stop the tick that holds it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Dialect, Engine, Insert, Table, create_engine, event, insert, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, SQLModel

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
_BEFORE_COMMIT = "bottown_before_commit"
_AFTER_COMMIT = "bottown_after_commit"
_AFTER_ROLLBACK = "bottown_after_rollback"


class StoreError(Exception):
    """The database cannot be used; the message says what is wrong and what to do."""


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
        self.engine: Engine = create_engine(url, **kwargs)
        self._checkpoints: _Checkpointer | None = None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
            if parsed.database and parsed.database != ":memory:":
                self._checkpoints = _Checkpointer(self.engine)
                event.listen(self.engine, "commit", self._checkpoints.committed)

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        store = cls(url)
        if migrate:
            store.migrate()
        return store

    def migrate(self) -> None:
        """Bring the schema to the newest revision, or say clearly why that is impossible."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        heads = set(ScriptDirectory.from_config(cfg).get_heads())
        try:
            with self.engine.begin() as conn:
                current = set(MigrationContext.configure(conn).get_current_heads())
                unknown = current - {r for r in _all_revisions(cfg)}
                if unknown:
                    raise StoreError(
                        f"the database {self.safe_url} was written by a newer bottown "
                        f"(schema revision {', '.join(sorted(unknown))}): upgrade bottown, "
                        "or point BOTTOWN_DATABASE_URL at another database"
                    )
                if current != heads:
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

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commit on success, roll back on any error, then run after-commit work."""
        with Session(self.engine, expire_on_commit=False) as session:
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

    def dispose(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.stop()
        self.engine.dispose()


class _Checkpointer:
    """Checkpoints an SQLite file's write-ahead log on a thread of its own, at most every
    ``EVERY_S`` seconds after commits, instead of in the commit that fills it past 1,000 pages
    (SQLite's default): a checkpoint copies the log into the file and waits for the disk, which
    here took 100-900 ms now and then, and a tick's commit on the event loop waited with it. A
    passive checkpoint takes no lock that writers or readers wait for; the commits themselves,
    in WAL mode with ``synchronous=NORMAL``, never wait for the disk."""

    EVERY_S = 1.0

    def __init__(self, engine: Engine) -> None:
        self._engine = weakref.ref(engine)  # (a store dropped undisposed lets its thread end)
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def committed(self, *_: Any) -> None:
        """A transaction commits (any, on the engine's connections): checkpoint soon."""
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stopped.is_set():
                    self._thread = threading.Thread(
                        target=self._run, name="bottown-wal-checkpoint", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while True:
            wanted = self._wanted.wait(60)
            if self._stopped.is_set() or self._engine() is None:
                return
            if wanted:
                self._wanted.clear()
                self._checkpoint()
                if self._stopped.wait(self.EVERY_S):
                    return

    def _checkpoint(self) -> None:
        engine = self._engine()
        if engine is None:
            return
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception as exc:  # the next commit asks again; SQLite checkpoints on close
            log.warning("checkpointing the SQLite log failed: %s", _first_line(exc))

    def stop(self) -> None:
        self._stopped.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(10)


_M = TypeVar("_M", bound=SQLModel)


def new_row(model: type[_M], **values: Any) -> _M:
    """A row of ``model`` built as the ORM builds the rows it loads: its values set directly,
    without the attribute events the constructor fires (a fifth of the constructor's cost).
    For rows stored with ``insert_rows`` and never changed through a session; fields left out
    take their defaults, and a missing required field or an unknown one is a ``TypeError``."""
    plan = _ROW_PLANS.get(model)
    if plan is None:
        plan = _ROW_PLANS[model] = _RowPlan(model)
    unknown = values.keys() - plan.fields
    missing = plan.required - values.keys()
    if unknown or missing:
        raise TypeError(f"{model.__name__}: unknown {sorted(unknown)}, missing {sorted(missing)}")
    row = cast(_M, plan.manager.new_instance())
    fields = row.__dict__
    for name, default in plan.defaults:
        if name not in values:
            fields[name] = default()
    fields.update(values)
    row.__pydantic_fields_set__ = set(values)
    return row


class _RowPlan:
    """What ``new_row`` needs to know of a model, worked out once."""

    def __init__(self, model: type[SQLModel]) -> None:
        self.manager = inspect(model).class_manager
        self.fields = set(model.model_fields)
        self.required = {n for n, f in model.model_fields.items() if f.is_required()}
        self.defaults: list[tuple[str, Callable[[], Any]]] = [
            (n, partial(f.get_default, call_default_factory=True))
            for n, f in model.model_fields.items()
            if not f.is_required()
        ]


_ROW_PLANS: dict[type[SQLModel], _RowPlan] = {}


def insert_rows(session: Session, rows: Sequence[SQLModel]) -> None:
    """New rows of one table inserted in a single statement that returns their ids, which are
    set on the rows. The rows stay out of the session (no unit of work to flush them, several
    times cheaper): for rows that are read afterwards, never changed through the session."""
    if rows:
        ids = insert_values(session, type(rows[0]), [row.__dict__ for row in rows])
        for row, new_id in zip(rows, ids, strict=True):
            row.id = new_id


def insert_values(
    session: Session, model: type[SQLModel], rows: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Rows of ``model``'s table given as plain values (every column but the id, by name),
    inserted in one statement; their new ids, in order. Cheaper still than ``insert_rows`` for
    rows never read back as objects (building a table model costs more than inserting it).

    On SQLite the statement goes straight to the driver (``_SqliteInsert``): SQLAlchemy's own
    path costs about 0.3 ms a call, and a town's tick makes a dozen such calls."""
    if not rows:
        return []
    table = cast(Table, inspect(model).local_table)
    dialect = session.get_bind().dialect
    if dialect.name == "sqlite" and dialect.insert_returning:
        if session.new:  # the new rows may refer to them (foreign keys)
            session.flush()
        fast = _SQLITE_INSERTS.get(table)
        if fast is None:
            fast = _SQLITE_INSERTS[table] = _SqliteInsert(table, dialect)
        return fast.run(session, rows)
    statement = _INSERTS.get(table)
    if statement is None:
        key = table.primary_key.columns.values()[0]
        statement = _INSERTS[table] = insert(table).returning(key, sort_by_parameter_order=True)
    names = [c.name for c in table.columns if not c.primary_key]
    params = [{name: row[name] for name in names} for row in rows]
    return list(session.execute(statement, params).scalars())


class _SqliteInsert:
    """``INSERT INTO t (...) VALUES (...), (...) RETURNING id`` on the session's own connection
    (so inside its transaction), each value converted by the column type's own bind processor,
    so what is stored is exactly what SQLAlchemy would store. SQLite gives the rows of one
    statement ascending ids in the order of their values (a new rowid is one more than the
    largest), which is how the ids are matched to the rows, as SQLAlchemy itself does."""

    MAX_VARIABLES = 999  # SQLite's limit before 3.32

    def __init__(self, table: Table, dialect: Dialect) -> None:
        key = table.primary_key.columns.values()[0]
        columns = [c for c in table.columns if c is not key]
        self.names = [c.name for c in columns]
        self.processors = [c.type.dialect_impl(dialect).bind_processor(dialect) for c in columns]
        self.per_statement = max(1, self.MAX_VARIABLES // len(columns))
        quoted = ", ".join(f'"{name}"' for name in self.names)
        self.head = f'INSERT INTO "{table.name}" ({quoted}) VALUES '
        self.one = "(" + ", ".join("?" * len(columns)) + ")"
        self.tail = f' RETURNING "{key.name}"'

    def run(self, session: Session, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        cursor = session.connection().connection.cursor()
        ids: list[int] = []
        try:
            for start in range(0, len(rows), self.per_statement):
                batch = rows[start : start + self.per_statement]
                values: list[Any] = []
                for row in batch:
                    for name, process in zip(self.names, self.processors, strict=True):
                        value = row[name]  # (a processor turns None into what the type stores)
                        values.append(value if process is None else process(value))
                sql = self.head + ", ".join([self.one] * len(batch)) + self.tail
                ids += sorted(found for (found,) in cursor.execute(sql, values).fetchall())
        finally:
            cursor.close()
        return ids


_INSERTS: dict[Table, Insert] = {}
_SQLITE_INSERTS: dict[Table, _SqliteInsert] = {}


def _all_revisions(cfg: Config) -> list[str]:
    return [rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()]


def _first_line(exc: Exception) -> str:
    orig = getattr(exc, "orig", None) or exc
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


def _sqlite_pragmas(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA wal_autocheckpoint=0")  # (see _Checkpointer)
    cur.close()
