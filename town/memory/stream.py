"""A resident's memory stream (Park et al., section 4.1): memories recorded, embedded and
retrieved.

Rows live in the store; vectors live in the vector index under the memory's id, in the town's
collection (``town/memory/resident_vectors.py``). For retrieval each resident keeps its memories
as arrays (``town/memory/matrix.py``). A unit of work that rolls back makes the stream forget its
arrays, to be loaded again from the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlmodel import Session

from town.llm.embedders import Embedder
from town.memory.embedding_queue import EmbeddingQueue, shared_queue
from town.memory.matrix import KIND_CODES, StreamMatrix
from town.memory.resident_vectors import ResidentVectors
from town.memory.retrieval import RetrievalWeights, game_hours, touch_later
from town.memory.vectors import VectorIndex
from town.store.db import Store
from town.store.ids import new_ids
from town.store.models import MEMORY_KINDS, Memory
from town.text import Plain, plain

log = logging.getLogger(__name__)

MAX_TEXT = 4000


class InvalidMemory(ValueError):
    """A memory that cannot be stored as given."""


@dataclass(frozen=True)
class NewMemory:
    kind: str
    text: str
    importance: int
    cites: Sequence[int] = ()
    # What is embedded instead of the text, when given: a plan's steps without their clock
    # times, say. A vector computed again after a lost index write is of the text.
    gist: str = ""
    # a feeling or a secret (a seed phrase marked private): never volunteered to others
    private: bool = False


@dataclass(frozen=True)
class Retrieved:
    memory: Memory
    score: float
    recency: float
    importance: float
    relevance: float


Vectors = np.ndarray | Future[np.ndarray]
_Write = tuple["MemoryStream", np.ndarray, Vectors]  # a stream's new ids and their vectors


def embedded_text(item: NewMemory) -> str:
    """What is embedded for a memory: its gist when it has one, else its text as stored."""
    gist = stored_text(item.gist) if item.gist else ""
    return gist or stored_text(item.text)


class MemoryStream:
    """One resident's memories: add, retrieve, and the most recent ones."""

    def __init__(
        self,
        *,
        resident_id: int,
        embedder: Embedder,
        index: VectorIndex,
        namespace: str = "bottown",
        weights: RetrievalWeights | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.resident_id = resident_id
        self.embedder = embedder
        self.index = index
        self.weights = weights or RetrievalWeights()
        self.executor = executor
        self.vectors = ResidentVectors(resident_id, embedder, index, namespace)
        self.arrays = StreamMatrix(self.vectors)

    @property
    def collection(self) -> str:
        """The town's collection of the vector index, once known (see ``town_collection``)."""
        return self.vectors.collection

    # -- writing -------------------------------------------------------------------------------

    def add(
        self,
        session: Session,
        items: Sequence[NewMemory],
        at: datetime,
        vectors: np.ndarray | None = None,
    ) -> list[Memory]:
        """Store memories in the caller's unit of work; vectors are indexed under their ids.

        ``vectors`` may be given when they were computed already; otherwise they are computed
        here, on the caller's thread (``record`` leaves that to the stream's executor)."""
        if not items:
            return []
        rows = self._insert(session, items, at)
        if vectors is None or len(vectors) != len(rows):
            vectors = self.embedder.embed([embedded_text(item) for item in items])
        self._attach(session, rows, at, vectors)
        return rows

    async def record(
        self, session: Session, items: Sequence[NewMemory], at: datetime
    ) -> list[Memory]:
        """``add``, without waiting for the vectors: they are computed on the stream's executor
        (a worker thread), batched with every other stream's that asked meanwhile, while the
        event loop goes on. The rows are stored at once; a retrieval from this stream waits for
        its pending vectors, so a memory is found from the moment it is recorded."""
        if self.executor is None or not items:
            return self.add(session, items, at)
        rows = self._insert(session, items, at)
        texts = [embedded_text(item) for item in items]
        self._attach(session, rows, at, self._queue().submit(texts, owner=self))
        return rows

    async def recall(
        self,
        session: Session,
        query: str,
        now: datetime,
        k: int = 10,
        kinds: Collection[str] | None = None,
        *,
        touch: bool = True,
    ) -> list[Retrieved]:
        """``retrieve``, with the query embedded on the stream's executor (see ``recall_each``)."""
        (found,) = await self.recall_each(session, [query], now, k, kinds, touch=touch)
        return found

    async def recall_each(
        self,
        session: Session,
        queries: Sequence[str],
        now: datetime,
        k: int | Sequence[int] = 10,
        kinds: Collection[str] | None = None,
        *,
        touch: bool = True,
    ) -> list[list[Retrieved]]:
        """``retrieve`` for each query in turn (each sees the last access the ones before it
        set), the queries embedded together on the stream's executor ahead of other streams'
        work; the stream's pending vectors are waited for without blocking the event loop."""
        ks = [k] * len(queries) if isinstance(k, int) else list(k)
        if len(ks) != len(queries):
            raise ValueError("give one k, or one k per query")
        if self.executor is None or not queries:
            return [
                self.retrieve(session, q, now, n, kinds, touch=touch)
                for q, n in zip(queries, ks, strict=True)
            ]
        # the stream's own vectors are hurried along only if this retrieval needs them
        owner = self if any(not f.done() for f in self.arrays.needed(kinds)) else None
        asked = self._queue().submit(list(queries), owner=owner, urgent=True)
        # (again after each wait: the stream may have recorded more meanwhile)
        while waits := [f for f in (asked, *self.arrays.needed(kinds)) if not f.done()]:
            await asyncio.wait([asyncio.wrap_future(f) for f in waits])  # failures: below
        vectors = asked.result()
        return [
            self.retrieve(session, q, now, n, kinds, query_vector=vectors[i], touch=touch)
            for i, (q, n) in enumerate(zip(queries, ks, strict=True))
        ]

    def warm(self, queries: Sequence[str]) -> None:
        """Embed queries this stream will be asked soon (the next tick), while the embedding
        thread is free, so that the retrieval finds them cached instead of waiting."""
        if self.executor is not None:
            self._queue().warm(queries)

    def warm_memories(self, items: Sequence[NewMemory]) -> None:
        """Embed memories this stream will record soon (once an LLM call about them returns),
        so that ``record`` finds their vectors cached and leaves the embedding thread free."""
        self.warm([embedded_text(item) for item in items])

    def _queue(self) -> EmbeddingQueue:
        assert self.executor is not None
        return shared_queue(self.embedder, self.executor)

    def _insert(self, session: Session, items: Sequence[NewMemory], at: datetime) -> list[Memory]:
        """The rows, added to the session with ids made in Python (``town/store/ids.py``): no
        flush, so a tick that records while it thinks sends nothing to the store until it
        commits. The arrays are loaded first, so that they do not load the rows twice."""
        self.arrays.load(session)
        rows = [self._row(item, at) for item in items]
        for row, mem_id in zip(rows, new_ids(session, "memory", len(rows)), strict=True):
            row.id = mem_id
        session.add_all(rows)
        return rows

    def _attach(
        self,
        session: Session,
        rows: list[Memory],
        at: datetime,
        vectors: np.ndarray | Future[np.ndarray],
    ) -> None:
        """The new rows' vectors (or the promise of them) into the arrays, and into the index once
        the unit of work has committed.

        The index is written after the commit (see ``_write_index``: the town's vectors of the
        unit of work in one upsert), when every vector is there. A vector lost on the way (a
        crash before the write) is embedded again when the stream is next loaded; a vector left
        over from a rolled-back id is overwritten when the id is reused."""
        ids = np.array([r.id for r in rows], dtype=np.int64)
        key = f"bottown_index_{id(self.index)}_{self.collection}"
        pending: list[_Write] | None = session.info.get(key)
        if pending is None:
            pending = session.info[key] = []
            batch = pending
            Store.after_commit(session, lambda: self._write_index(batch))
        pending.append((self, ids, vectors))
        self.arrays.add(rows, vectors)
        added = ids.tolist()
        self.arrays.stage(added, session.hash_key)  # (an interview meanwhile never sees them)
        Store.after_commit(session, lambda: self.arrays.settled(added))
        Store.after_rollback(session, self.arrays.forget)

    def _row(self, item: NewMemory, at: datetime) -> Memory:
        if item.kind not in KIND_CODES:
            raise InvalidMemory(
                f"unknown memory kind {item.kind!r}; one of {', '.join(MEMORY_KINDS)}"
            )
        text = stored_text(item.text)
        if not text:
            raise InvalidMemory("a memory needs some text")
        importance = min(10, max(1, int(item.importance)))
        return Memory(
            resident_id=self.resident_id,
            kind=item.kind,
            text=text,
            created=at,
            last_access=at,
            importance=importance,
            cites=[int(c) for c in item.cites],
            private=item.private,
        )

    # -- reading -------------------------------------------------------------------------------

    def retrieve(
        self,
        session: Session,
        query: str,
        now: datetime,
        k: int = 10,
        kinds: Collection[str] | None = None,
        query_vector: np.ndarray | None = None,
        *,
        touch: bool = True,
    ) -> list[Retrieved]:
        """The paper's top-k memories for ``query`` at game time ``now``; updates last access
        (unless not to ``touch`` them: an interview changes nothing).

        The memories come from the arrays, not the store (no query: a tick retrieves while it
        thinks), as rows in no session; their last access is written when the session
        commits (``touch_later``). ``query_vector`` may be given when it was computed already
        (see ``recall``)."""
        matrix = self.arrays.ready(session, kinds)
        if matrix.size == 0 or k <= 0:
            return []
        q = query_vector if query_vector is not None else self.embedder.embed([query])[0]
        now_h = game_hours(now)
        hidden = self.arrays.hidden_from(session.hash_key)  # another unit's, not committed
        ranked = matrix.best(q, now_h, k, kinds, self.weights, hidden)
        ids = [r[0] for r in ranked]
        if touch:
            touch_later(session, ids, now)
            matrix.touch(ids, now_h)
            Store.after_rollback(session, self.arrays.forget)
        out = []
        for mem_id, score, recency, importance, relevance in ranked:
            memory = matrix.memory(mem_id, self.resident_id, now)
            if memory is not None:
                out.append(Retrieved(memory, score, recency, importance, relevance))
        return out

    def _write_index(self, pending: list[_Write]) -> None:
        """After the commit: the unit of work's vectors of the town into the index. With an
        executor, there, with whatever else of the town's is buffered meanwhile, once every
        vector is there (see ``EmbeddingQueue.write``)."""
        if self.executor is None:
            _upsert(pending)
        else:
            self._queue().write((id(self.index), self.collection), pending, _upsert)

    def recent(self, session: Session, n: int = 100) -> list[str]:
        """The texts of the ``n`` most recently created memories, oldest first (from the
        arrays, loaded first if need be)."""
        self.arrays.load(session)
        return self.arrays.recent(n)

    def count(self, session: Session) -> int:
        return self.arrays.ready(session).size

    def town_collection(self, session: Session) -> str:
        return self.vectors.town_collection(session)

    def repair(self, session: Session, upto: int) -> int:
        """Embed and index again those of the resident's memories, up to id ``upto``, that the
        index lacks; how many (see ``ResidentVectors.repair``)."""
        return self.vectors.repair(session, upto)


# Unicode's control characters (category Cc) but tab and newline, which fold to spaces below.


def _upsert(pending: list[_Write]) -> None:
    """New vectors of one town's streams into its collection, in one upsert."""
    streams = {id(p[0]): p[0] for p in pending}.values()
    first = pending[0][0]
    try:
        ids = np.concatenate([p[1] for p in pending]).tolist()
        residents = [p[0].resident_id for p in pending for _ in range(len(p[1]))]
        vectors = np.concatenate(
            [v.result() if isinstance(v, Future) else v for _, _, v in pending]
        )
        first.index.upsert(first.collection, ids, residents, vectors)
    except Exception as error:  # the vectors are embedded again when each stream next loads
        log.warning("could not write vectors to %s: %s", first.collection, error)
        for stream in streams:
            stream.arrays.forget()


def stored_text(text: str) -> Plain:
    """A memory's text as the stream stores it: one plain line (``town.text.plain``: no ping or
    mention markup, whoever wrote it: a model, a persona, an admin's inner voice), its
    unprintable characters dropped, at most MAX_TEXT long."""
    return plain(text, MAX_TEXT, unprintable="")
