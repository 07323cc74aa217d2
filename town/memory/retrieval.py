"""The paper's retrieval score, over a resident's memories held as arrays (Park et al.,
section 4.1): a query is a handful of vectorised operations over every memory, with no Python
loop over rows:

    score = w_rec * minmax(decay ** hours_since_last_access)
          + w_imp * minmax(importance)
          + w_rel * minmax(cosine(query, memory))

Each component is min-max normalised over the candidates (all memories, or the kinds asked for);
when a component is the same for every candidate it contributes 0.5. The best k come first
(ties: the newer memory first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RetrievalWeights:
    recency: float = 1.0
    importance: float = 1.0
    relevance: float = 1.0
    decay: float = 0.99


def game_hours(at: datetime) -> float:
    """Hours since a fixed epoch: the unit of recency decay."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - EPOCH).total_seconds() / 3600.0


def minmax(values: np.ndarray) -> np.ndarray:
    lo = float(values.min())
    hi = float(values.max())
    if hi - lo <= 1e-12:
        return np.full(values.shape, 0.5, dtype=np.float64)
    return (values - lo) / (hi - lo)


def score_candidates(
    relevance: np.ndarray,
    importance: np.ndarray,
    last_access_h: np.ndarray,
    now_h: float,
    weights: RetrievalWeights,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(score, recency, importance, relevance), each component normalised over the candidates."""
    hours = np.maximum(now_h - last_access_h, 0.0)
    rec = minmax(np.power(weights.decay, hours))
    imp = minmax(importance.astype(np.float64))
    rel = minmax(relevance.astype(np.float64))
    score = weights.recency * rec + weights.importance * imp + weights.relevance * rel
    return score, rec, imp, rel


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

    def append(
        self,
        ids: np.ndarray,
        vectors: np.ndarray,
        imp: np.ndarray,
        acc: np.ndarray,
        kinds: np.ndarray,
    ) -> None:
        need = self.size + len(ids)
        if need > len(self.ids):
            cap = max(need, 2 * len(self.ids), 256)
            self.ids = _grow(self.ids, cap)
            self.vectors = _grow(self.vectors.reshape(-1, self.dim), cap)
            self.importance = _grow(self.importance, cap)
            self.access_h = _grow(self.access_h, cap)
            self.kinds = _grow(self.kinds, cap)
        sl = slice(self.size, need)
        self.ids[sl], self.vectors[sl], self.importance[sl] = ids, vectors, imp
        self.access_h[sl], self.kinds[sl] = acc, kinds
        for offset, mem_id in enumerate(ids.tolist()):
            self.row_of[mem_id] = self.size + offset
        self.size = need

    def touch(self, ids: Sequence[int], hours: float) -> None:
        rows = [self.row_of[i] for i in ids if i in self.row_of]
        self.access_h[rows] = hours


def _grow(arr: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def top_k(score: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores, best first; equal scores put the newer (higher id) first."""
    if k < len(score):
        kth = np.partition(score, len(score) - k)[len(score) - k]
        pool = np.flatnonzero(score >= kth)
    else:
        pool = np.arange(len(score))
    order = np.lexsort((-ids[pool], -score[pool]))
    return pool[order[:k]]
