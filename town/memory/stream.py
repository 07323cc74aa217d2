"""A resident's memory stream (Park et al., section 4.1): memories stored, embedded and
retrieved.

Rows live in the store; vectors live in the vector index under the memory's id, in one collection
per town (``<namespace>-t<town id>``, the resident's id in each record's metadata). For retrieval
each resident keeps its memories as arrays (``town/retrieval.py``: the paper's score over every
memory with no Python loop over rows). The top k are returned, best first, and their last access
is set to the query's game time (in the arrays at once, in the store when the caller's unit of
work commits).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Collection, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import numpy as np
from sqlalchemy import Table, bindparam, inspect, update
from sqlalchemy import select as sa_select
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from town.memory.embedders import Embedder
from town.memory.embedding_queue import EmbeddingQueue, shared_queue
from town.memory.retrieval import (
    MemoryMatrix,
    RetrievalWeights,
    game_hours,
    score_candidates,
    top_k,
)
from town.memory.vectors import VectorIndex, adopt_collections
from town.store.db import Store
from town.store.models import MEMORY_KINDS, Memory, Resident

log = logging.getLogger(__name__)

KIND_CODES = {kind: code for code, kind in enumerate(MEMORY_KINDS)}
MAX_TEXT = 4000
ROWS_KEPT = 1024  # memory rows a stream keeps for retrieval (the most recently used)


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


@dataclass(frozen=True)
class Retrieved:
    memory: Memory
    score: float
    recency: float
    importance: float
    relevance: float


Vectors = np.ndarray | Future[np.ndarray]
_Write = tuple["MemoryStream", np.ndarray, Vectors]  # a stream's new ids and their vectors


@dataclass
class _Pending:
    """New memories whose vectors are still being computed (see ``MemoryStream.record``)."""

    ids: np.ndarray
    importance: np.ndarray
    access_h: np.ndarray
    kinds: np.ndarray
    vectors: Future[np.ndarray]


def embedded_text(item: NewMemory) -> str:
    """What is embedded for a memory: its gist when it has one, else its text as stored."""
    gist = clean_text(item.gist) if item.gist else ""
    return gist or clean_text(item.text)


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
        self.namespace = namespace
        self.collection = ""  # the town's, once known (see ``town_collection``)
        self.weights = weights or RetrievalWeights()
        self.executor = executor
        self._matrix: MemoryMatrix | None = None
        self._pending: list[_Pending] = []
        self._rows: OrderedDict[int, Memory] = OrderedDict()  # id -> row, least recent first

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
    ) -> list[Retrieved]:
        """``retrieve``, with the query embedded on the stream's executor (see ``recall_each``)."""
        (found,) = await self.recall_each(session, [query], now, k, kinds)
        return found

    async def recall_each(
        self,
        session: Session,
        queries: Sequence[str],
        now: datetime,
        k: int | Sequence[int] = 10,
        kinds: Collection[str] | None = None,
    ) -> list[list[Retrieved]]:
        """``retrieve`` for each query in turn (each sees the last access the ones before it
        set), the queries embedded together on the stream's executor ahead of other streams'
        work; the stream's pending vectors are waited for without blocking the event loop."""
        ks = [k] * len(queries) if isinstance(k, int) else list(k)
        if len(ks) != len(queries):
            raise ValueError("give one k, or one k per query")
        if self.executor is None or not queries:
            return [
                self.retrieve(session, q, now, n, kinds) for q, n in zip(queries, ks, strict=True)
            ]
        # the stream's own vectors are hurried along only if this retrieval needs them
        owner = self if any(not f.done() for f in self._needed(kinds)) else None
        asked = self._queue().submit(list(queries), owner=owner, urgent=True)
        # (again after each wait: the stream may have recorded more meanwhile)
        while waits := [f for f in (asked, *self._needed(kinds)) if not f.done()]:
            await asyncio.wait([asyncio.wrap_future(f) for f in waits])  # failures: below
        vectors = asked.result()
        return [
            self.retrieve(session, q, now, n, kinds, query_vector=vectors[i])
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
        """The rows, added and flushed (for their ids); the cache is loaded first, so it does
        not load them twice."""
        if self._matrix is None:
            self._load(session)
        rows = [self._row(item, at) for item in items]
        session.add_all(rows)
        session.flush()
        self._keep(rows)
        return rows

    def _attach(
        self,
        session: Session,
        rows: list[Memory],
        at: datetime,
        vectors: np.ndarray | Future[np.ndarray],
    ) -> None:
        """The new rows' vectors (or the promise of them) into the cache, and into the index once
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
        columns = (
            ids,
            np.array([r.importance for r in rows], dtype=np.float32),
            np.full(len(rows), game_hours(at)),
            np.array([KIND_CODES[r.kind] for r in rows], dtype=np.int8),
        )
        if isinstance(vectors, Future):
            self._pending.append(_Pending(*columns, vectors))
        elif self._matrix is not None:  # (else the rows are read with the rest on next use)
            self._matrix.append(columns[0], vectors, *columns[1:])
        Store.after_rollback(session, self.forget_cache)

    def _row(self, item: NewMemory, at: datetime) -> Memory:
        if item.kind not in KIND_CODES:
            raise InvalidMemory(
                f"unknown memory kind {item.kind!r}; one of {', '.join(MEMORY_KINDS)}"
            )
        text = clean_text(item.text)
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
    ) -> list[Retrieved]:
        """The paper's top-k memories for ``query`` at game time ``now``; updates last access.

        ``query_vector`` may be given when it was computed already (see ``recall``)."""
        matrix = self._ready(session, kinds)
        n = matrix.size
        if n == 0 or k <= 0:
            return []
        q = query_vector if query_vector is not None else self.embedder.embed([query])[0]
        relevance = matrix.vectors[:n] @ q
        if kinds is not None:
            codes = [KIND_CODES[kind] for kind in kinds if kind in KIND_CODES]
            cand = np.flatnonzero(np.isin(matrix.kinds[:n], codes))
            if len(cand) == 0:
                return []
        else:
            cand = np.arange(n)
        now_h = game_hours(now)
        score, rec, imp, rel = score_candidates(
            relevance[cand], matrix.importance[cand], matrix.access_h[cand], now_h, self.weights
        )
        top = top_k(score, matrix.ids[cand], k)
        chosen_ids = [int(i) for i in matrix.ids[cand][top]]
        found = self._rows_of(session, chosen_ids)
        touched: dict[int, datetime] = session.info.setdefault(_TOUCH_KEY, {})
        touched.update(dict.fromkeys(chosen_ids, now))
        Store.before_commit(session, _write_last_access)
        matrix.touch(chosen_ids, now_h)
        Store.after_rollback(session, self.forget_cache)
        out = []
        for pos, mem_id in zip(top.tolist(), chosen_ids, strict=True):
            memory = found.get(mem_id)
            if memory is None:  # the row vanished under us: the cache is stale
                self.forget_cache()
                continue
            # the row is written by the deferred update; do not dirty the session meanwhile
            set_committed_value(memory, "last_access", now)
            out.append(
                Retrieved(
                    memory, float(score[pos]), float(rec[pos]), float(imp[pos]), float(rel[pos])
                )
            )
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
        """The texts of the ``n`` most recently created memories, oldest first. (Read on the
        unit of work's connection: memories are never pending in the session, so it need not
        flush what is.)"""
        found = session.connection().scalars(_RECENT, {"resident": self.resident_id, "n": n})
        return list(reversed(found.all()))

    def count(self, session: Session) -> int:
        return self._ready(session).size

    # -- the cache -----------------------------------------------------------------------------

    def forget_cache(self) -> None:
        self._pending = []  # first: a matrix read again from the store already has their rows
        self._matrix = None
        self._rows.clear()

    def _rows_of(self, session: Session, ids: Sequence[int]) -> dict[int, Memory]:
        """The memory rows of ``ids``: those kept from earlier, the others read (and kept). A
        memory never changes but for its last access, which ``retrieve`` sets on the row."""
        found: dict[int, Memory] = {}
        for mem_id in ids:
            row = self._rows.get(mem_id)
            if row is not None:
                found[mem_id] = row
                self._rows.move_to_end(mem_id)
        missing = [i for i in ids if i not in found]
        if missing:
            read = list(session.scalars(_BY_IDS, {"ids": missing}))
            self._keep(read)
            found.update((row.id, row) for row in read if row.id is not None)
        return found

    def _keep(self, rows: Sequence[Memory]) -> None:
        for row in rows:
            if row.id is not None:
                self._rows[row.id] = row
                self._rows.move_to_end(row.id)
        while len(self._rows) > ROWS_KEPT:
            self._rows.popitem(last=False)

    def _needed(self, kinds: Collection[str] | None) -> list[Future[np.ndarray]]:
        """The pending vectors a retrieval of ``kinds`` (None: every kind) must have: a talk's
        recall (no plans) need not wait for the plans just made."""
        if kinds is None:
            return [p.vectors for p in self._pending]
        codes = [KIND_CODES[kind] for kind in kinds if kind in KIND_CODES]
        return [p.vectors for p in self._pending if np.isin(p.kinds, codes).any()]

    def _ready(self, session: Session, kinds: Collection[str] | None = None) -> MemoryMatrix:
        """The cache with the pending vectors a retrieval of ``kinds`` needs (waiting for those
        still computed); other kinds' stay pending, done or not, so that what the cache holds
        at each retrieval never depends on how fast the embedding thread was (a matrix product
        over more rows may differ in the last bit)."""
        matrix = self._load(session)
        needed = {id(f) for f in self._needed(kinds)}
        pending, self._pending = self._pending, []
        for waiting in pending:
            if id(waiting.vectors) not in needed:
                self._pending.append(waiting)
                continue
            try:
                vectors = waiting.vectors.result()
            except Exception as error:
                log.warning(
                    "could not embed new memories of resident %d: %s", self.resident_id, error
                )
                self.forget_cache()
                return self._load(session)  # embeds what the index lacks, on this thread
            matrix.append(waiting.ids, vectors, waiting.importance, waiting.access_h, waiting.kinds)
        return matrix

    def town_collection(self, session: Session) -> str:
        """The town's collection, found on first use; per-resident collections left by earlier
        versions (``<namespace>-r<resident id>``) are moved into it then."""
        if not self.collection:
            town = session.execute(
                sa_select(col(Resident.town_id)).where(col(Resident.id) == self.resident_id)
            ).scalar()
            self.collection = f"{self.namespace}-t{town or 0}"
            old = f"{self.namespace}-r"
            if town is not None and any(n.startswith(old) for n in self.index.names()):
                ours = sa_select(col(Resident.id)).where(col(Resident.town_id) == town)
                residents = [r for r in session.scalars(ours) if r is not None]
                adopt_collections(self.index, old, self.collection, residents)
        return self.collection

    def _load(self, session: Session) -> MemoryMatrix:
        if self._matrix is not None:
            return self._matrix
        self.town_collection(session)
        rows = session.execute(
            sa_select(
                col(Memory.id),
                col(Memory.kind),
                col(Memory.importance),
                col(Memory.last_access),
                col(Memory.text),
            )
            .where(col(Memory.resident_id) == self.resident_id)
            .order_by(col(Memory.id))
        ).all()
        matrix = MemoryMatrix(dim=self.embedder.dim)
        matrix.vectors = np.empty((0, self.embedder.dim), dtype=np.float32)
        if rows:
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            vectors = self._vectors_for(ids, [r[4] for r in rows])
            matrix.append(
                ids,
                vectors,
                np.array([r[2] for r in rows], dtype=np.float32),
                np.array([game_hours(r[3]) for r in rows], dtype=np.float64),
                np.array([KIND_CODES.get(r[1], 0) for r in rows], dtype=np.int8),
            )
        self._matrix = matrix
        return matrix

    def repair(self, session: Session, upto: int) -> int:
        """Embed and index again those of the resident's memories, up to id ``upto``, that the
        index lacks (a process killed before its index writes went out); how many.
        The stream's own state is left alone, so this may run on a stream of its own on
        another thread while the town goes on."""
        rows = session.execute(
            sa_select(col(Memory.id), col(Memory.text))
            .where(col(Memory.resident_id) == self.resident_id, col(Memory.id) <= upto)
            .order_by(col(Memory.id))
        ).all()
        if not rows:
            return 0
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        lost = ~np.isin(ids, self.index.ids(self.town_collection(session), self.resident_id))
        if lost.any():
            self._reembed(ids[lost], [r[1] for r, gone in zip(rows, lost, strict=True) if gone])
        return int(lost.sum())

    def _vectors_for(self, ids: np.ndarray, texts: list[str]) -> np.ndarray:
        """Vectors for these ids from the index; any the index lacks are embedded again."""
        have_ids, have_vecs = self.index.fetch(self.collection, self.resident_id)
        out = np.zeros((len(ids), self.embedder.dim), dtype=np.float32)
        missing = np.ones(len(ids), dtype=bool)
        if len(have_ids):
            order = np.argsort(have_ids)
            sorted_ids = have_ids[order]
            pos = np.searchsorted(sorted_ids, ids)
            pos_ok = pos < len(sorted_ids)
            hit = np.zeros(len(ids), dtype=bool)
            hit[pos_ok] = sorted_ids[pos[pos_ok]] == ids[pos_ok]
            out[hit] = have_vecs[order[pos[hit]]]
            missing = ~hit
        if missing.any():
            lost = np.flatnonzero(missing)
            out[lost] = self._reembed(ids[lost], [texts[i] for i in lost])
        return out

    def _reembed(self, ids: np.ndarray, texts: list[str]) -> np.ndarray:
        """Vectors for memories the index lost, from their text as stored, indexed again."""
        vectors = self.embedder.embed(texts)
        self.index.upsert(self.collection, ids.tolist(), [self.resident_id] * len(ids), vectors)
        return vectors


# Unicode's control characters (category Cc) but tab and newline, which fold to spaces below.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_TOUCH_KEY = "bottown_touch"  # session.info: memory id -> last access, written before commit

# The statements of the hot paths, built once (their compiled forms are cached with them).
_TABLE = cast(Table, inspect(Memory).local_table)
_BY_IDS = select(Memory).where(col(Memory.id).in_(bindparam("ids", expanding=True)))
_RECENT = (
    sa_select(_TABLE.c.text)
    .where(_TABLE.c.resident_id == bindparam("resident"))
    .order_by(_TABLE.c.created.desc(), _TABLE.c.id.desc())
    .limit(bindparam("n"))
)
_TOUCH = (
    update(_TABLE)
    .where(_TABLE.c.id.in_(bindparam("ids", expanding=True)))
    .values(last_access=bindparam("at"))
)


def _write_last_access(session: Session) -> None:
    """The deferred last-access updates of a unit of work, every stream's together: one
    statement per game time."""
    touched: dict[int, datetime] = session.info.pop(_TOUCH_KEY, {})
    by_time: dict[datetime, list[int]] = {}
    for mem_id, at in touched.items():
        by_time.setdefault(at, []).append(mem_id)
    for at, ids in by_time.items():  # (loaded rows were set already)
        session.execute(_TOUCH, {"at": at, "ids": ids})


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
            stream.forget_cache()


def clean_text(text: str) -> str:
    """A memory's text: control characters dropped, white space folded, at most MAX_TEXT long."""
    flat = " ".join(_CONTROL.sub("", text).split())
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 1] + "…"
