"""Sentence embedders for the town's memory stream.

* :class:`town.minilm.MiniLMEmbedder` (its own module) runs the bundled all-MiniLM-L6-v2.
* :class:`CachedEmbedder` adds an exact-text LRU cache in front of any embedder.
* :class:`OpenAIEmbedder` calls an OpenAI-compatible ``/embeddings`` endpoint.
* :class:`EmbeddingQueue` batches the requests of many callers onto one worker thread.
* :class:`HashEmbedder` is a tiny deterministic bag-of-words embedder for tests and the
  fake LLM server; it carries no real semantics beyond word overlap.

Every embedder returns float32 arrays of shape ``(len(texts), dim)`` with L2-normalised rows.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import openai

F32 = npt.NDArray[np.float32]

log = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """An embedder produced (or was asked for) something unusable."""


class EmbeddingModelError(EmbeddingError):
    """The local embedding model files are missing, corrupted or inconsistent."""


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of a fixed width."""

    dim: int
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with unit-length rows."""
        ...


def normalise_rows(x: npt.NDArray[Any]) -> F32:
    out = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


# --------------------------------------------------------------------------- caching wrapper


class CachedEmbedder:
    """Wraps an :class:`Embedder` with an LRU cache keyed by the exact text.

    Misses from one call (deduplicated) are sent to the wrapped embedder in a single batch.
    """

    def __init__(self, inner: Embedder, max_entries: int = 50_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.inner = inner
        self.dim: int = inner.dim
        self.name: str = inner.name
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, F32] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                row = self._cache.get(text)
                if row is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = row
                    self.hits += 1
            self.misses += sum(len(v) for v in missing.values())
        if not missing:
            return out
        new_texts = list(missing)
        vectors = np.asarray(self.inner.embed(new_texts), dtype=np.float32)
        if vectors.shape != (len(new_texts), self.dim):
            raise EmbeddingError(
                f"{self.inner.name} returned shape {vectors.shape}, "
                f"expected {(len(new_texts), self.dim)}"
            )
        with self._lock:
            for text, vec in zip(new_texts, vectors, strict=True):
                out[missing[text]] = vec
                stored = vec.copy()
                stored.setflags(write=False)
                self._cache[text] = stored
                self._cache.move_to_end(text)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return out

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The texts of ``texts`` the cache does not hold, each once (the cache is left as is)."""
        with self._lock:
            return [t for t in dict.fromkeys(texts) if t not in self._cache]

    def cached(self, texts: Sequence[str]) -> np.ndarray | None:
        """The vectors of ``texts`` if every one is cached (no embedding), else None."""
        rows: list[F32] = []
        with self._lock:
            for text in texts:
                row = self._cache.get(text)
                if row is None:
                    return None
                rows.append(row)
            for text in texts:
                self._cache.move_to_end(text)
            self.hits += len(rows)
        return np.stack(rows) if rows else None

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


# --------------------------------------------------------------------------- batching queue


WRITE_GUESS_S = 0.015  # how long an index write takes, until one was timed
# A quiet wait is used for a write that would end in it, a write taken to last as long as the
# 80th percentile of the last WRITES_TIMED took: a slow one now and then (a new collection's
# files, a busy disk) neither decides alone nor sticks.
WRITES_TIMED = 16


@dataclass
class _Job:
    texts: list[str]
    future: Future[F32]
    owner: object  # whose vectors: a request for an owner waits for that owner's earlier ones
    urgent: bool


class EmbeddingQueue:
    """Embedding requests from many callers, answered in batches on one executor thread, with
    index writes held back and written together in between.

    ``submit`` returns at once with a future. What is asked for while the thread is busy is
    embedded together in the next ``embed`` call (a tick's new memories of every resident, say),
    about ``chunk_chars`` characters at a time (so that an urgent request never waits long behind
    the batch being embedded); but an urgent request (a query someone awaits) goes first, with
    the owner's own earlier requests and no one else's.

    ``write`` buffers index writes by key for up to ``write_delay`` seconds, then hands each
    key's items to its writer in one call: a vector index pays mostly per call, not per item. A
    Chroma upsert into an embedded index takes 5-12 ms, mostly waiting for its disk writes,
    whether it writes one vector or 30 (in a helper process, ``town/chroma_host.py``, since it
    holds the interpreter's lock all along); so writes are held back a minute, and a vector a
    crash kept from the index is computed again when its stream next loads. Writes run after
    every embedding asked for before them and only while no embedding is waiting: a query never
    waits behind a queue of writes, only behind the one being written. ``flush`` writes what is
    buffered without waiting for the delay. ``quiet`` says the event loop will only wait for a
    while (for LLM replies): the keys with the most items buffered are written then, as long as
    a write (as long as the last ones took, ``WRITES_TIMED``) ends before the wait does, so that
    the index's disk and CPU work falls while the loop has nothing else to do.
    """

    def __init__(
        self,
        embedder: Embedder,
        executor: Executor,
        *,
        chunk_chars: int = 500,
        write_delay: float = 60.0,
    ) -> None:
        if chunk_chars < 1 or write_delay < 0:
            raise ValueError("chunk_chars must be >= 1 and write_delay >= 0")
        self.embedder = embedder
        self.executor = executor
        self.chunk_chars = chunk_chars
        self.write_delay = write_delay
        self.batches = 0  # embed calls made (for tests and benchmarks)
        self._waiting: list[_Job] = []
        self._writes: dict[object, tuple[Callable[[list[Any]], None], list[Any]]] = {}
        self._due: float | None = None  # when the oldest buffered write is due
        self._flushed: list[Future[None]] = []  # callers of flush() waiting for the writes
        self._timer: threading.Timer | None = None
        self._running = False
        self._warming: set[str] = set()  # texts asked for by warm() and not embedded yet
        self._quiet_until = 0.0  # (monotonic) the event loop waits with nothing to do until then
        self._write_times: deque[float] = deque([WRITE_GUESS_S], maxlen=WRITES_TIMED)
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
        """Buffer ``items`` for ``key``; within ``write_delay`` seconds ``writer`` is called on
        the executor with every item buffered for the key since its last call."""
        with self._lock:
            _, buffered = self._writes.setdefault(key, (writer, []))
            buffered.extend(items)
            if self._due is None:
                self._due = time.monotonic() + self.write_delay
            if self._timer is None:
                self._timer = threading.Timer(self.write_delay, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> Future[None]:
        """Write everything buffered now; the future is done once it is written (after the
        embeddings asked for before)."""
        future: Future[None] = Future()
        with self._lock:
            self._flushed.append(future)
        self._start()
        return future

    def quiet(self, seconds: float) -> None:
        """The event loop expects to wait ``seconds`` with nothing to do: buffered writes that
        fit in that time are written now rather than when due."""
        with self._lock:
            self._quiet_until = time.monotonic() + seconds
            if not self._writes:
                return
        self._start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
        self._start()

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
                if not jobs:
                    key = self._write_key()
                    if key is not None:
                        # one key's items a time: what was asked for meanwhile goes first
                        write = self._writes.pop(key)
                        if not self._writes:
                            self._due = None
                    else:  # every write asked for before a flush() is done
                        flushed, self._flushed = self._flushed, []
                    if write is None and not flushed:
                        self._running = False
                        if self._writes and self._timer is None:  # due later: call back then
                            delay = max(0.0, (self._due or 0) - time.monotonic())
                            self._timer = threading.Timer(delay, self._on_timer)
                            self._timer.daemon = True
                            self._timer.start()
                        return
            if jobs:
                self._embed(jobs)
                continue
            if write is not None:
                writer, items = write
                began = time.monotonic()
                try:
                    writer(items)
                except Exception:  # a writer reports its own failures; the queue goes on
                    log.exception("an index write failed")
                with self._lock:
                    self._write_times.append(time.monotonic() - began)
            for future in flushed:
                if future.set_running_or_notify_cancel():
                    future.set_result(None)

    def _write_key(self) -> object | None:
        """Under the lock: whose buffered writes to write now, if any: the oldest key's when
        due or flushed, else in a quiet wait the fullest key's, if its write ends in time."""
        if not self._writes:
            return None
        now, keys = time.monotonic(), list[object](self._writes)
        if self._flushed or now >= (self._due or 0):
            return keys[0]
        if now + self._write_estimate() < self._quiet_until:
            return max(keys, key=lambda key: len(self._writes[key][1]))
        return None

    def _write_estimate(self) -> float:
        """Under the lock: how long the next index write will take, in seconds, as the last
        ones took (see ``WRITES_TIMED``)."""
        times = sorted(self._write_times)
        return times[(len(times) - 1) * 4 // 5]

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


BACKGROUND_NICE = 10  # added to the embedding thread's nice value (Linux)


def embedding_executor() -> ThreadPoolExecutor:
    """The one worker thread a deployment computes embeddings and writes the index on, at a
    lower CPU priority than the event loop (see ``lower_priority``)."""
    return ThreadPoolExecutor(1, thread_name_prefix="bottown-embed", initializer=lower_priority)


def lower_priority(nice: int = BACKGROUND_NICE) -> None:
    """Lower the calling thread's CPU priority: ``nice`` added to its nice value, and Linux's
    batch policy (``SCHED_BATCH``), under which it keeps the CPU share its nice value gives it
    but never preempts another thread when it wakes. The event loop sends a tick's LLM calls
    one after another, and a tick lasts until the last one is answered; on a machine with few
    cores the embedding thread (and, for ``bench town``, the LLM server) compete with it, and
    the loop should win. In a bench day the batch policy cut the loop's wait for a CPU from
    about 170 ms to 70. Threads this thread starts inherit both. Linux only (a nice value is
    per thread there); elsewhere, or where it is not allowed, nothing changes."""
    if sys.platform != "linux":
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # (0: this thread)
    except OSError:
        log.debug("could not lower the thread's CPU priority", exc_info=True)


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
    """Write out the buffered index writes of every queue on ``executor`` (before it shuts
    down, say), waiting until they are written."""
    with _QUEUES_LOCK:
        queues = list(_QUEUES.get(executor, {}).values())
    for queue in queues:
        queue.flush().result(timeout)


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server via a caller-supplied sync client."""

    def __init__(
        self, client: openai.OpenAI, model: str, dim: int, *, max_batch: int = 256
    ) -> None:
        if dim < 1 or max_batch < 1:
            raise ValueError("dim and max_batch must be >= 1")
        self.client = client
        self.model = model
        self.dim: int = dim
        self.name: str = f"openai:{model}"
        self.max_batch = max_batch

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.max_batch):
            chunk = list(texts[start : start + self.max_batch])
            # "float" explicitly: the client otherwise asks for base64, which many
            # OpenAI-compatible servers do not implement.
            response = self.client.embeddings.create(
                model=self.model, input=chunk, encoding_format="float"
            )
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise EmbeddingError(
                    f"embedding model {self.model!r} returned {len(data)} vectors "
                    f"for {len(chunk)} inputs"
                )
            for offset, item in enumerate(data):
                vec = np.asarray(item.embedding, dtype=np.float32)
                if vec.shape != (self.dim,):
                    raise EmbeddingError(
                        f"embedding model {self.model!r} returned vectors of dimension "
                        f"{vec.size}, but OpenAIEmbedder was configured with dim={self.dim}; "
                        "set BOTTOWN_EMBEDDING_DIM (or BOTTOWN_EMBEDDING_MODEL) to match"
                    )
                out[start + offset] = vec
        return normalise_rows(out)


# --------------------------------------------------------------------------- hashing (tests)

_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic hashed bag of words + word bigrams, for tests and the fake LLM server.

    Texts sharing words get positive cosine similarity; there is no other semantics.
    Stable across processes and platforms (blake2b, not Python's salted ``hash``).
    """

    name = "hash"

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError("dim must be >= 2")
        self.dim: int = dim

    def _features(self, text: str) -> list[str]:
        words = _WORD_RE.findall(text.lower())
        if not words:
            return ["\x00empty"]
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = int.from_bytes(
                    hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
                )
                weight = 0.5 if " " in feature else 1.0  # bigrams count half
                out[row, (h >> 1) % self.dim] += weight if h & 1 else -weight
            if not out[row].any():  # features cancelled out exactly; keep the row unit-length
                out[row, 0] = 1.0
        return normalise_rows(out)
