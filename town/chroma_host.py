"""Chroma's embedded client in a helper process of its own.

Chroma's embedded ``PersistentClient`` runs its writes in Rust code that holds the interpreter's
lock from start to end, disk waits included: 5-12 ms an upsert, and now and then, when the disk
stalls, 100-400 ms, during which every other thread of the process stands still, the event loop
with its LLM replies and its platform connections among them. Here the client lives in a child
process (``python -m town.chroma_host``, started on first use and shared by every embedded index
of the parent process, one client per folder); the parent's caller waits for each answer on a
socket, without the lock. What crosses is small: ids and float32 vectors.

If the helper dies, the call that finds out raises :class:`town.vectors.VectorIndexError` and the
next call starts a new one.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from town.embedding import lower_priority
from town.vectors import ChromaClient, VectorIndexError

_NICE = 10  # as the embedding thread: the event loop should win a contended core


class ChromaHost:
    """The parent's end: one helper process, one call at a time (a lock orders the threads)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "town.chroma_host", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(self, op: str, *args: Any) -> Any:
        with self._lock:
            try:
                self._conn.send((op, *args))
                status, value = self._conn.recv()
            except (EOFError, OSError) as exc:
                raise VectorIndexError(
                    f"the Chroma helper process stopped ({exc or type(exc).__name__}); "
                    "the next index call starts it again"
                ) from None
        if status != "ok":
            raise VectorIndexError(value)
        return value

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


_host: ChromaHost | None = None
_host_lock = threading.Lock()


def host() -> ChromaHost:
    """This process's helper, started (again) if it is not running."""
    global _host
    with _host_lock:
        if _host is None or not _host.alive:
            _host = ChromaHost()
        return _host


def helper_pid() -> int | None:
    """The helper's process id, if one is running (benchmarks count its memory and CPU)."""
    with _host_lock:
        return _host._proc.pid if _host is not None and _host.alive else None


def release_all() -> None:
    """Let the helper forget its clients (before a data folder is deleted)."""
    with _host_lock:
        running = _host if _host is not None and _host.alive else None
    if running is not None:
        running.call("release_all")


def serve(conn: Connection) -> None:
    """The helper's loop: ``(op, folder, embedder, dim, *args)`` in, ``(status, value)`` out,
    until the parent closes its end."""
    clients: dict[tuple[str, str, int], ChromaClient] = {}
    while True:
        try:
            op, *args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if op == "release_all":
                clients.clear()
                ChromaClient.release_all()
                value: Any = None
            else:
                folder, embedder, dim, *rest = args
                key = (folder, embedder, dim)
                client = clients.get(key)
                if client is None:
                    client = clients[key] = ChromaClient(
                        path=folder, embedder_name=embedder, dim=dim
                    )
                value = None if op == "open" else getattr(client, op)(*rest)
            reply: tuple[str, Any] = ("ok", value)
        except VectorIndexError as exc:
            reply = ("error", str(exc))
        except Exception as exc:  # the parent hears of it, and the helper goes on
            reply = ("error", f"Chroma at {args[0] if args else '?'}: {type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:  # the parent is gone (killed mid-call, say): nothing left to do
            return


if __name__ == "__main__":  # pragma: no cover - the helper process itself
    # Ctrl-C in a terminal reaches the whole process group: the parent decides, and the helper
    # ends when the parent closes its end (or exits)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lower_priority(_NICE)  # (before Chroma starts its threads: they inherit it)
    serve(Connection(int(sys.argv[1])))
