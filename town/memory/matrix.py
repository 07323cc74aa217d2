"""A resident's memories as arrays (ids, vectors, importance, last access, kind), scored for a
query with no Python loop over rows (``town/memory/retrieval.py``).

The arrays are loaded from the store and the vector index on first use. The new memories whose
vectors are still being computed wait beside them until a retrieval needs them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from town.memory.resident_vectors import ResidentVectors
from town.memory.retrieval import (
    RetrievalWeights,
    from_hours,
    game_hours,
    score_candidates,
    top_k,
)
from town.store.models import MEMORY_KINDS, Memory

log = logging.getLogger(__name__)

KIND_CODES = {kind: code for code, kind in enumerate(MEMORY_KINDS)}


def kind_codes(kinds: Collection[str]) -> list[int]:
    return [KIND_CODES[kind] for kind in kinds if kind in KIND_CODES]


# a memory ranked for a query: its id, score, recency, importance and relevance
Ranked = tuple[int, float, float, float, float]


@dataclass
class MemoryMatrix:
    """The resident's memories as arrays, grown by doubling."""

    dim: int
    size: int = 0
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.float32))
    importance: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float32))
    access_h: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float64))
    kinds: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    row_of: dict[int, int] = field(default_factory=dict)
    # what a retrieval returns besides the scores, so that it reads nothing from the store
    texts: list[str] = field(default_factory=list)
    private: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.bool_))
    created_h: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float64))

    def append(self, vectors: np.ndarray, rows: Rows) -> None:
        need = self.size + len(rows.ids)
        if need > len(self.ids):
            cap = max(need, 2 * len(self.ids), 256)
            self.ids = _grow(self.ids, cap)
            self.vectors = _grow(self.vectors.reshape(-1, self.dim), cap)
            self.importance = _grow(self.importance, cap)
            self.access_h = _grow(self.access_h, cap)
            self.kinds = _grow(self.kinds, cap)
            self.private = _grow(self.private, cap)
            self.created_h = _grow(self.created_h, cap)
        sl = slice(self.size, need)
        self.ids[sl], self.vectors[sl], self.importance[sl] = rows.ids, vectors, rows.importance
        self.access_h[sl], self.kinds[sl] = rows.access_h, rows.kinds
        self.private[sl], self.created_h[sl] = rows.private, rows.created_h
        self.texts.extend(rows.texts)
        for offset, mem_id in enumerate(rows.ids.tolist()):
            self.row_of[mem_id] = self.size + offset
        self.size = need

    def memory(self, mem_id: int, resident_id: int, last_access: datetime) -> Memory | None:
        """The memory ``mem_id`` as held here (a row not in any session), or None."""
        row = self.row_of.get(mem_id)
        if row is None:
            return None
        created = from_hours(float(self.created_h[row]))
        return Memory(
            id=mem_id,
            resident_id=resident_id,
            kind=MEMORY_KINDS[int(self.kinds[row])],
            text=self.texts[row],
            created=created,
            last_access=last_access,
            importance=int(self.importance[row]),
            private=bool(self.private[row]),
        )

    def touch(self, ids: Sequence[int], hours: float) -> None:
        rows = [self.row_of[i] for i in ids if i in self.row_of]
        self.access_h[rows] = hours

    def best(
        self,
        query: np.ndarray,
        now_h: float,
        k: int,
        kinds: Collection[str] | None,
        weights: RetrievalWeights,
        hidden: Collection[int] = (),
    ) -> list[Ranked]:
        """The paper's top k for the query vector at game hour ``now_h``, best first, among the
        memories of ``kinds`` (None: every kind) but those ``hidden`` (ids)."""
        n = self.size
        if n == 0 or k <= 0:
            return []
        relevance = self.vectors[:n] @ query
        if kinds is not None:
            cand = np.flatnonzero(np.isin(self.kinds[:n], kind_codes(kinds)))
            if len(cand) == 0:
                return []
        else:
            cand = np.arange(n)
        if hidden:
            cand = cand[~np.isin(self.ids[cand], np.fromiter(hidden, dtype=np.int64))]
            if len(cand) == 0:
                return []
        score, rec, imp, rel = score_candidates(
            relevance[cand], self.importance[cand], self.access_h[cand], now_h, weights
        )
        top = top_k(score, self.ids[cand], k)
        ids = self.ids[cand][top].tolist()
        parts = (score[top].tolist(), rec[top].tolist(), imp[top].tolist(), rel[top].tolist())
        return list(zip(ids, *parts, strict=True))


def _grow(arr: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


@dataclass
class Rows:
    """Memories as columns, but for their vectors."""

    ids: np.ndarray
    importance: np.ndarray
    access_h: np.ndarray
    kinds: np.ndarray
    private: np.ndarray
    created_h: np.ndarray
    texts: list[str]

    @classmethod
    def of(cls, rows: Sequence[Memory]) -> Rows:
        return cls(
            np.array([r.id for r in rows], dtype=np.int64),
            np.array([r.importance for r in rows], dtype=np.float32),
            np.array([game_hours(r.last_access) for r in rows], dtype=np.float64),
            np.array([KIND_CODES.get(r.kind, 0) for r in rows], dtype=np.int8),
            np.array([r.private for r in rows], dtype=np.bool_),
            np.array([game_hours(r.created) for r in rows], dtype=np.float64),
            [r.text for r in rows],
        )


@dataclass
class _Pending:
    """New memories whose vectors are still being computed."""

    rows: Rows
    vectors: Future[np.ndarray]


class StreamMatrix:
    """A stream's memory matrix: loaded on first use, grown as memories are added, forgotten
    (to be loaded again) when a unit of work that changed it rolls back."""

    def __init__(self, vectors: ResidentVectors) -> None:
        self.vectors = vectors
        self.matrix: MemoryMatrix | None = None
        self.pending: list[_Pending] = []
        # memories added by a unit of work not committed yet (a thinking tick's): id -> the
        # unit's session (its ``hash_key``); others' retrievals do not see them till it commits
        self.staged: dict[int, int] = {}

    def forget(self) -> None:
        self.pending = []  # first: a matrix read again from the store already has their rows
        self.staged = {}
        self.matrix = None

    def stage(self, ids: Iterable[int], unit: int) -> None:
        """Memories just added by the unit of work ``unit``, seen only by it till it commits."""
        self.staged.update(dict.fromkeys(ids, unit))

    def settled(self, ids: Iterable[int]) -> None:
        """The memories ``ids`` committed: seen by every reader from now on."""
        for mem_id in ids:
            self.staged.pop(mem_id, None)

    def hidden_from(self, unit: int) -> set[int]:
        """The memories a reader in the unit of work ``unit`` must not see: others' staged."""
        return {mem_id for mem_id, by in self.staged.items() if by != unit}

    def add(self, rows: Sequence[Memory], vectors: np.ndarray | Future[np.ndarray]) -> None:
        """New rows with their vectors, or the promise of them."""
        columns = Rows.of(rows)
        if isinstance(vectors, Future):
            self.pending.append(_Pending(columns, vectors))
        elif self.matrix is not None:  # (else the rows are read with the rest on next use)
            self.matrix.append(vectors, columns)

    def recent(self, n: int) -> list[str]:
        """The texts of the ``n`` most recently created memories, oldest first (those whose
        vectors are still pending included); the matrix must be loaded."""
        assert self.matrix is not None
        if n <= 0:
            return []
        m = self.matrix
        parts = [(m.created_h[: m.size], m.ids[: m.size], m.texts)]
        parts += [(p.rows.created_h, p.rows.ids, p.rows.texts) for p in self.pending]
        created = np.concatenate([p[0] for p in parts])
        ids = np.concatenate([p[1] for p in parts])
        texts = [t for p in parts for t in p[2]]
        order = np.lexsort((ids, created))[-n:]
        return [texts[i] for i in order]

    def texts_of(self, ids: Collection[int]) -> dict[int, str]:
        """The texts of the memories ``ids`` held here (pending ones included), by id: read
        with no query, while a tick or an input thinks; the matrix must be loaded."""
        assert self.matrix is not None
        m, wanted = self.matrix, set(ids)
        found = {i: m.texts[m.row_of[i]] for i in wanted if i in m.row_of}
        for waiting in self.pending:
            for i, text in zip(waiting.rows.ids.tolist(), waiting.rows.texts, strict=True):
                if i in wanted:
                    found[i] = text
        return found

    def needed(self, kinds: Collection[str] | None) -> list[Future[np.ndarray]]:
        """The pending vectors a retrieval of ``kinds`` (None: every kind) must have: a talk's
        recall (no plans) need not wait for the plans just made."""
        if kinds is None:
            return [p.vectors for p in self.pending]
        codes = kind_codes(kinds)
        return [p.vectors for p in self.pending if np.isin(p.rows.kinds, codes).any()]

    def ready(self, session: Session, kinds: Collection[str] | None = None) -> MemoryMatrix:
        """The matrix with the pending vectors a retrieval of ``kinds`` needs (waiting for those
        still computed); other kinds' stay pending, done or not, so that what the matrix holds
        at each retrieval never depends on how fast the embedding thread was (a matrix product
        over more rows may differ in the last bit)."""
        matrix = self.load(session)
        needed = {id(f) for f in self.needed(kinds)}
        pending, self.pending = self.pending, []
        for waiting in pending:
            if id(waiting.vectors) not in needed:
                self.pending.append(waiting)
                continue
            try:
                vectors = waiting.vectors.result()
            except Exception as error:
                resident = self.vectors.resident_id
                log.warning("could not embed new memories of resident %d: %s", resident, error)
                self.forget()
                return self.load(session)  # embeds what the index lacks, on this thread
            matrix.append(vectors, waiting.rows)
        return matrix

    def load(self, session: Session) -> MemoryMatrix:
        if self.matrix is not None:
            return self.matrix
        self.vectors.town_collection(session)
        rows = session.execute(
            select(
                col(Memory.id),
                col(Memory.kind),
                col(Memory.importance),
                col(Memory.last_access),
                col(Memory.text),
                col(Memory.private),
                col(Memory.created),
            )
            .where(col(Memory.resident_id) == self.vectors.resident_id)
            .order_by(col(Memory.id))
        ).all()
        dim = self.vectors.embedder.dim
        matrix = MemoryMatrix(dim=dim, vectors=np.empty((0, dim), dtype=np.float32))
        if rows:
            columns = Rows(
                np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[2] for r in rows], dtype=np.float32),
                np.array([game_hours(r[3]) for r in rows], dtype=np.float64),
                np.array([KIND_CODES.get(r[1], 0) for r in rows], dtype=np.int8),
                np.array([bool(r[5]) for r in rows], dtype=np.bool_),
                np.array([game_hours(r[6]) for r in rows], dtype=np.float64),
                [r[4] for r in rows],
            )
            matrix.append(self.vectors.read(session, columns.ids, columns.texts), columns)
        self.matrix = matrix
        return matrix
