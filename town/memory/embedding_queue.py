"""Embedding requests from many memory streams, batched onto one worker thread, with the
vector index's writes in between."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from town.llm.embedders import F32, Embedder

log = logging.getLogger(__name__)


@dataclass
class _Job:
    texts: list[str]
    future: Future[F32]
    owner: object  # whose vectors: a request for an owner waits for that owner's earlier ones
    urgent: bool


class EmbeddingQueue:
    """Embedding requests from many callers, answered in batches on one executor thread, with
    index writes in between.

    ``submit`` returns at once with a future. What is asked for while the thread is busy is
    embedded together in the next ``embed`` call (a tick's new memories of every resident, say),
    about ``chunk_chars`` characters at a time (so that an urgent request never waits long behind
    the batch being embedded); but an urgent request (a query someone awaits) goes first, with
    the owner's own earlier requests and no one else's.

    ``write`` buffers index writes by key and hands each key's items to its writer in one call,
    on the same thread, once no embedding is waiting: after every embedding asked for before
    them (a writer may wait for their vectors), and what is buffered while the thread is busy is
    written together. ``flush`` returns a future done once what was buffered is written.
    """

    def __init__(self, embedder: Embedder, executor: Executor, *, chunk_chars: int = 500) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        self.embedder = embedder
        self.executor = executor
        self.chunk_chars = chunk_chars
        self.batches = 0  # embed calls made (for tests and benchmarks)
        self._waiting: list[_Job] = []
        self._writes: dict[object, tuple[Callable[[list[Any]], None], list[Any]]] = {}
        self._flushed: list[Future[None]] = []  # callers of flush() waiting for the writes
        self._running = False
        self._warming: set[str] = set()  # texts asked for by warm() and not embedded yet
        self._lock = threading.Lock()

    def submit(
        self, texts: Sequence[str], *, owner: object = None, urgent: bool = False
    ) -> Future[F32]:
        """The vectors of ``texts``, computed on the executor; at once when the embedder has
        them all cached, unless an urgent request must hurry the owner's earlier ones (an urgent
        request without an owner hurries no one's)."""
        if isinstance(texts, str):
            raise TypeError("submit() takes a sequence of strings, not a single string")
        future: Future[F32] = Future()
        cached = getattr(self.embedder, "cached", None)
        if cached is not None:
            with self._lock:
                behind = (
                    urgent and owner is not None and any(j.owner == owner for j in self._waiting)
                )
            found = None if behind else cached(texts)
            if found is not None:
                future.set_result(found)
                return future
        with self._lock:
            self._waiting.append(_Job(list(texts), future, owner, urgent))
        self._start()
        return future

    def write(self, key: object, items: Sequence[Any], writer: Callable[[list[Any]], None]) -> None:
        """Buffer ``items`` for ``key``; ``writer`` is called on the executor with every item
        buffered for the key since its last call."""
        with self._lock:
            _, buffered = self._writes.setdefault(key, (writer, []))
            buffered.extend(items)
        self._start()

    def flush(self) -> Future[None]:
        """The future is done once everything buffered now is written (after the embeddings
        asked for before)."""
        future: Future[None] = Future()
        with self._lock:
            self._flushed.append(future)
        self._start()
        return future

    def _start(self) -> None:
        with self._lock:
            if self._running:
                return
            self._running = True
        try:
            self.executor.submit(self._run)
        except RuntimeError:  # the executor was shut down: do it on this thread
            self._run()

    def _run(self) -> None:
        while True:
            with self._lock:
                jobs = self._next_batch()
                write: tuple[Callable[[list[Any]], None], list[Any]] | None = None
                flushed: list[Future[None]] = []
                if not jobs and self._writes:  # one key a time: embeddings asked for go first
                    write = self._writes.pop(next(iter(self._writes)))
                elif not jobs:  # every write asked for before a flush() is done
                    flushed, self._flushed = self._flushed, []
                    if not flushed:
                        self._running = False
                        return
            if jobs:
                self._embed(jobs)
            elif write is not None:
                writer, items = write
                try:
                    writer(items)
                except Exception:  # a writer reports its own failures; the queue goes on
                    log.exception("an index write failed")
            for future in flushed:
                if future.set_running_or_notify_cancel():
                    future.set_result(None)

    def _next_batch(self) -> list[_Job]:
        """Under the lock: the urgent requests with their owners' earlier ones, or else the
        oldest requests up to ``chunk_chars`` characters (at least one request)."""
        owners = {j.owner for j in self._waiting if j.urgent and j.owner is not None}
        if any(j.urgent for j in self._waiting):
            chosen = [j for j in self._waiting if j.urgent or j.owner in owners]
        else:
            chosen, size = [], 0
            for job in self._waiting:
                chars = sum(len(t) for t in job.texts)
                if chosen and size + chars > self.chunk_chars:
                    break
                chosen.append(job)
                size += chars
        taken = {id(j) for j in chosen}
        self._waiting = [j for j in self._waiting if id(j) not in taken]
        return chosen

    def warm(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` in the background, for the embedder's cache to hold before they are
        asked for. Texts the cache holds or that are being warmed already are skipped, so asking
        again, every tick say, costs next to nothing; an embedder without a cache is not warmed."""
        missing = getattr(self.embedder, "missing", None)
        if missing is None or not texts:
            return
        with self._lock:
            todo = [t for t in missing(texts) if t not in self._warming]
            self._warming.update(todo)
        if todo:
            self.submit(todo).add_done_callback(lambda _: self._warmed(todo))

    def _warmed(self, texts: list[str]) -> None:
        with self._lock:
            self._warming.difference_update(texts)

    def _embed(self, jobs: list[_Job]) -> None:
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        try:
            vectors = np.asarray(self.embedder.embed([t for j in jobs for t in j.texts]))
            self.batches += 1
        except BaseException as exc:  # every caller of the failed batch hears of it
            for job in jobs:
                job.future.set_exception(exc)
            return
        start = 0
        for job in jobs:
            job.future.set_result(vectors[start : start + len(job.texts)])
            start += len(job.texts)


def embedding_executor() -> ThreadPoolExecutor:
    """The one worker thread a deployment computes embeddings and writes the index on."""
    return ThreadPoolExecutor(1, thread_name_prefix="bottown-embed")


_QUEUES: weakref.WeakKeyDictionary[Executor, dict[int, EmbeddingQueue]] = (
    weakref.WeakKeyDictionary()
)
_QUEUES_LOCK = threading.Lock()


def shared_queue(embedder: Embedder, executor: Executor) -> EmbeddingQueue:
    """The one queue of this embedder on this executor, shared by every memory stream using
    both, so that their requests are batched together."""
    with _QUEUES_LOCK:
        by_embedder = _QUEUES.setdefault(executor, {})
        found = by_embedder.get(id(embedder))
        if found is None or found.embedder is not embedder:
            found = by_embedder[id(embedder)] = EmbeddingQueue(embedder, executor)
        return found


def flush_queues(executor: Executor, timeout: float | None = None) -> None:
    """Wait until the index writes of every queue on ``executor`` are written (before it shuts
    down, say)."""
    with _QUEUES_LOCK:
        queues = list(_QUEUES.get(executor, {}).values())
    for queue in queues:
        queue.flush().result(timeout)
