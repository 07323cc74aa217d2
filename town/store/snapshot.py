"""A copy of the database while the town uses it: SQLite's through its online backup API, a
PostgreSQL database's through ``pg_dump`` (and back through ``pg_restore``).

SQLite's backup, made in one step, reads the database in one read transaction: the copy is the
database as of one commit, and since every writer of the town (a tick's one write, an input's
unit of work) commits whole, as of a tick boundary. In WAL mode the town's writers go on while
it reads.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy.engine import make_url

PG_DUMP = "pg_dump"
PG_RESTORE = "pg_restore"


class SnapshotError(Exception):
    """The copy cannot be made; the message says why and what to do."""


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL; None for another database or one in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite database ``source`` at ``target`` (a new file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source) as reading, sqlite3.connect(target) as writing:
        reading.backup(writing)  # every page in one step: one snapshot
    reading.close()
    writing.close()


def dump_postgres(url: str, target: Path) -> None:
    """``pg_dump`` of the PostgreSQL database ``url`` to ``target`` (its custom format, which
    ``pg_restore`` reads); a clear error when pg_dump is not on the PATH or fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _run(PG_DUMP, "--format=custom", "--file", str(target), _libpq_url(url))


def restore_postgres(url: str, dump: Path) -> None:
    """``pg_restore`` of a dump made by ``dump_postgres`` into the (empty) database ``url``."""
    _run(PG_RESTORE, "--no-owner", "--dbname", _libpq_url(url), str(dump))


def _libpq_url(url: str) -> str:
    """The URL as libpq reads it: ``postgresql://``, without SQLAlchemy's driver name."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _run(tool: str, *args: str) -> None:
    program = shutil.which(tool)
    if program is None:
        raise SnapshotError(
            f"{tool} is not on the PATH (PostgreSQL's client tools; Debian: apt install "
            "postgresql-client)"
        )
    done = subprocess.run([program, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"
        raise SnapshotError(f"{tool} failed ({why})")
