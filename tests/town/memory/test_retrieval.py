"""Retrieval: the paper's score by hand, and the numpy arrays against a row-by-row scan."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest
from sqlmodel import select

from tests.factories import lone_resident
from tests.town.memory.test_stream import T0, TableEmbedder
from town.memory.retrieval import RetrievalWeights, game_hours
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import InMemoryIndex
from town.store.db import Store
from town.store.models import Memory


def hand_example(store: Store, weights: RetrievalWeights | None = None) -> MemoryStream:
    emb = TableEmbedder({"A": [1, 0, 0], "B": [0, 1, 0], "C": [0.6, 0.8, 0], "query": [1, 0, 0]})
    stream = MemoryStream(
        resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex(), weights=weights
    )
    with store.session() as s:
        # last access: A at 10:00, B at 12:00, C at 02:00; the query comes at 12:00.
        stream.add(s, [NewMemory("observation", "C", 5)], T0 + timedelta(hours=2))
        stream.add(s, [NewMemory("observation", "A", 2)], T0 + timedelta(hours=10))
        stream.add(s, [NewMemory("observation", "B", 8)], T0 + timedelta(hours=12))
    return stream


def test_hand_computed_score(store: Store) -> None:
    stream = hand_example(store)
    now = T0 + timedelta(hours=12)
    with store.session() as s:
        got = stream.retrieve(s, "query", now, k=3)
    # recency raw: A 0.99**2 = 0.9801, B 1, C 0.99**10 = 0.904382; min-max -> A 0.791880, B 1, C 0
    # importance raw 2, 8, 5 -> A 0, B 1, C 0.5; relevance raw 1, 0, 0.6 -> A 1, B 0, C 0.6
    assert [r.memory.text for r in got] == ["B", "A", "C"]
    by_text = {r.memory.text: r for r in got}
    assert by_text["A"].recency == pytest.approx(0.7918800266599343)
    assert by_text["C"].recency == pytest.approx(0.0)
    assert by_text["B"].recency == pytest.approx(1.0)
    assert (by_text["A"].importance, by_text["B"].importance, by_text["C"].importance) == (
        pytest.approx(0.0),
        pytest.approx(1.0),
        pytest.approx(0.5),
    )
    assert by_text["C"].relevance == pytest.approx(0.6, abs=1e-6)
    assert by_text["A"].score == pytest.approx(1.7918800266599343, abs=1e-6)
    assert by_text["B"].score == pytest.approx(2.0, abs=1e-6)
    assert by_text["C"].score == pytest.approx(1.1, abs=1e-6)


def test_weights_change_the_ranking(store: Store) -> None:
    stream = hand_example(store, RetrievalWeights(relevance=3.0))
    with store.session() as s:
        got = stream.retrieve(s, "query", T0 + timedelta(hours=12), k=3)
    # A = 0.79188 + 0 + 3 * 1 = 3.79188; C = 0 + 0.5 + 3 * 0.6 = 2.3; B = 1 + 1 + 0 = 2
    assert [r.memory.text for r in got] == ["A", "C", "B"]
    assert got[0].score == pytest.approx(3.791880026659934, abs=1e-6)


def test_retrieval_updates_last_access(store: Store) -> None:
    stream = hand_example(store)
    later = T0 + timedelta(hours=20)
    with store.session() as s:
        got = stream.retrieve(s, "query", later, k=1)
    assert got[0].memory.text == "B"
    with store.session() as s:
        rows = {m.text: m.last_access for m in s.exec(select(Memory)).all()}
    assert rows["B"] == later
    assert rows["A"] == T0 + timedelta(hours=10)
    # and the in-memory arrays agree with the store: B is now the most recently accessed
    fresh = MemoryStream(
        resident_id=stream.resident_id, embedder=stream.embedder, index=stream.index
    )
    with store.session() as s:
        a, b = fresh.retrieve(s, "query", later, k=3)[:2], stream.retrieve(s, "query", later, k=3)
    assert [r.memory.text for r in a] == [r.memory.text for r in b[:2]]


def full_scan(
    rows: list[tuple[int, list[float], int, float, int]],
    q: list[float],
    now_h: float,
    w: RetrievalWeights,
    k: int,
    kinds: set[int] | None,
) -> list[int]:
    """The paper's scoring written out row by row in plain Python: the reference."""
    cand = [r for r in rows if kinds is None or r[4] in kinds]
    rec = [w.decay ** max(now_h - r[3], 0.0) for r in cand]
    imp = [float(r[2]) for r in cand]
    rel = [sum(a * b for a, b in zip(r[1], q, strict=True)) for r in cand]

    def norm(xs: list[float]) -> list[float]:
        lo, hi = min(xs), max(xs)
        return [0.5] * len(xs) if hi - lo <= 1e-12 else [(x - lo) / (hi - lo) for x in xs]

    nrec, nimp, nrel = norm(rec), norm(imp), norm(rel)
    scored = [
        (w.recency * a + w.importance * b + w.relevance * c, r[0])
        for a, b, c, r in zip(nrec, nimp, nrel, cand, strict=True)
    ]
    scored.sort(key=lambda t: (-t[0], -t[1]))
    return [mem_id for _, mem_id in scored[:k]]


def test_retrieval_equals_a_row_by_row_scan_on_10k(store: Store) -> None:
    rng = np.random.default_rng(7)
    n, dim = 10_000, 32
    texts = [f"memory {i}" for i in range(n)]
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    queries = {f"query {j}": rng.normal(size=dim) for j in range(5)}
    emb = TableEmbedder({**dict(zip(texts, vecs, strict=True)), **queries})
    weights = RetrievalWeights(recency=0.7, importance=1.3, relevance=2.0)
    stream = MemoryStream(
        resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex(), weights=weights
    )
    kinds = ["observation", "chat", "reflection", "plan"]
    with store.session() as s:
        for start in range(0, n, 1000):
            at = T0 + timedelta(minutes=7 * start)
            batch = [
                NewMemory(kinds[i % 4], texts[i], int(rng.integers(1, 11)))
                for i in range(start, start + 1000)
            ]
            stream.add(s, batch, at)
    with store.session() as s:
        ref_rows = [
            (
                m.id,
                emb.embed([m.text])[0].tolist(),
                m.importance,
                game_hours(m.last_access),
                kinds.index(m.kind),
            )
            for m in s.exec(select(Memory).order_by(Memory.id)).all()  # type: ignore[arg-type]
        ]
    now = T0 + timedelta(days=60)
    for j, qtext in enumerate(queries):
        q = emb.embed([qtext])[0].tolist()
        want_kinds = {0, 2} if j % 2 else None
        expected = full_scan(ref_rows, q, game_hours(now), weights, 10, want_kinds)
        with store.session() as s:
            got = stream.retrieve(
                s,
                qtext,
                now,
                k=10,
                kinds=[kinds[c] for c in sorted(want_kinds)] if want_kinds else None,
            )
        assert [r.memory.id for r in got] == expected
        # the reference scan must see the same last-access update the stream made
        touched = {r.memory.id for r in got}
        ref_rows = [
            (r[0], r[1], r[2], game_hours(now) if r[0] in touched else r[3], r[4]) for r in ref_rows
        ]


def test_empty_stream_and_kind_filter(store: Store) -> None:
    emb = TableEmbedder({"plan": [1, 0], "q": [1, 0]})
    stream = MemoryStream(resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex())
    with store.session() as s:
        assert stream.retrieve(s, "q", T0) == []
        stream.add(s, [NewMemory("plan", "plan", 4)], T0)
        assert stream.retrieve(s, "q", T0, kinds=["reflection"]) == []
        one = stream.retrieve(s, "q", T0, kinds=["plan"])
    assert len(one) == 1
    # a single candidate: every component is the same for all candidates, so each gives 0.5
    assert one[0].score == pytest.approx(1.5)
    assert math.isclose(one[0].recency, 0.5)
