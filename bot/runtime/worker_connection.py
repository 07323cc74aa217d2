"""How a worker reaches the shared database: its name, its connections' settings, and the
errors that mean the database is out of reach (retried, never fatal)."""

from __future__ import annotations

import os
import socket

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from town.memory.vectors import VectorIndexError
from town.store.db import StoreError

OUTAGE_ERRORS = (SQLAlchemyError, StoreError, VectorIndexError, OSError)
LOCK_TIMEOUT_MS = 2000  # a tick never waits longer than this for a row a stalled process holds
CONNECT_TIMEOUT_S = 10


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[:100]


def application_name(name: str, instance: str) -> str:
    """How a worker's connections introduce themselves to PostgreSQL (``pg_stat_activity``)."""
    return f"bottown-worker {instance[:12]} {name}"[:63]


def worker_url(url: str, name: str, instance: str) -> str:
    """The database URL as this worker uses it: on PostgreSQL, its connections carry the worker's
    name and instance, give up connecting after a while, and wait at most ``LOCK_TIMEOUT_MS``
    for a row lock; settings the URL has already are kept."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    query = dict(parsed.query)
    query.setdefault("application_name", application_name(name, instance))
    query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    if "lock_timeout" not in str(query.get("options", "")):
        query["options"] = f"{query.get('options', '')} -c lock_timeout={LOCK_TIMEOUT_MS}".strip()
    return parsed.update_query_dict(query).render_as_string(hide_password=False)


def outage_reason(exc: BaseException) -> str:
    """The first line of what the database driver said."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__
