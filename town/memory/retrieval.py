"""The paper's retrieval score, over a resident's memories held as arrays (Park et al.,
section 4.1): a query is a handful of vectorised operations over every memory, with no Python
loop over rows:

    score = w_rec * minmax(decay ** hours_since_last_access)
          + w_imp * minmax(importance)
          + w_rel * minmax(cosine(query, memory))

Each component is min-max normalised over the candidates (all memories, or the kinds asked for);
when a component is the same for every candidate it contributes 0.5. The best k come first
(ties: the newer memory first). Their last access is set to the query's game time, in the
store when the caller's unit of work commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import numpy as np
from sqlalchemy import Table, inspect, update
from sqlmodel import Session

from town.store.db import Store
from town.store.models import Memory

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


def from_hours(hours: float) -> datetime:
    """The game time ``hours`` after the epoch (see ``game_hours``)."""
    return EPOCH + timedelta(hours=hours)


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


def top_k(score: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores, best first; equal scores put the newer (higher id) first."""
    if k < len(score):
        kth = np.partition(score, len(score) - k)[len(score) - k]
        pool = np.flatnonzero(score >= kth)
    else:
        pool = np.arange(len(score))
    order = np.lexsort((-ids[pool], -score[pool]))
    return pool[order[:k]]


_MEMORY = cast(Table, inspect(Memory).local_table)
_TOUCHED = "bottown_touch"  # session.info: memory id -> last access, written before commit


def touch_later(session: Session, ids: Sequence[int], at: datetime) -> None:
    """Set the last access of these memories when the unit of work commits."""
    touched: dict[int, datetime] = session.info.setdefault(_TOUCHED, {})
    touched.update(dict.fromkeys(ids, at))
    Store.before_commit(session, _write_last_access)


def _write_last_access(session: Session) -> None:
    """The last accesses set in a unit of work, every stream's together: one statement per game
    time."""
    touched: dict[int, datetime] = session.info.pop(_TOUCHED, {})
    by_time: dict[datetime, list[int]] = {}
    for mem_id, at in touched.items():
        by_time.setdefault(at, []).append(mem_id)
    for at, ids in by_time.items():
        # (on the table: the rows the session holds were set already)
        session.execute(update(_MEMORY).where(_MEMORY.c.id.in_(ids)).values(last_access=at))
