"""The memory stream: the paper's retrieval score, the fast path against a full scan, restarts."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import numpy as np
import pytest
from sqlmodel import select

from town.memory.embedding_queue import shared_queue
from town.memory.retrieval import RetrievalWeights, game_hours
from town.memory.stream import InvalidMemory, MemoryStream, NewMemory
from town.memory.vectors import ChromaIndex, InMemoryIndex, VectorIndex, VectorIndexError
from town.store.db import Store
from town.store.models import Memory, Resident, Town

pytest_plugins = ["tests.servers"]  # (a Chroma server, for the migration's test)

T0 = datetime(2023, 2, 13, 0, 0, tzinfo=UTC)


class TableEmbedder:
    """Vectors looked up from a table, so a test controls every cosine exactly."""

    name = "table"

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.dim = len(next(iter(self.table.values())))
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = np.stack([self.table[t] for t in texts])
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def make_residents(store: Store, *names: str) -> list[int]:
    """Residents of one new town."""
    with store.session() as s:
        town = Town(name=f"t{len(s.exec(select(Town)).all())}", clock=T0)
        s.add(town)
        s.flush()
        assert town.id is not None
        found = [Resident(town_id=town.id, name=name) for name in names]
        s.add_all(found)
        s.flush()
        return [r.id for r in found if r.id is not None]


def make_resident(store: Store) -> int:
    (rid,) = make_residents(store, "Isabella Rodriguez")
    return rid


def hand_example(store: Store, weights: RetrievalWeights | None = None) -> MemoryStream:
    emb = TableEmbedder({"A": [1, 0, 0], "B": [0, 1, 0], "C": [0.6, 0.8, 0], "query": [1, 0, 0]})
    stream = MemoryStream(
        resident_id=make_resident(store), embedder=emb, index=InMemoryIndex(), weights=weights
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


def test_fast_path_equals_full_scan_on_10k(store: Store) -> None:
    rng = np.random.default_rng(7)
    n, dim = 10_000, 32
    texts = [f"memory {i}" for i in range(n)]
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    queries = {f"query {j}": rng.normal(size=dim) for j in range(5)}
    emb = TableEmbedder({**dict(zip(texts, vecs, strict=True)), **queries})
    weights = RetrievalWeights(recency=0.7, importance=1.3, relevance=2.0)
    stream = MemoryStream(
        resident_id=make_resident(store), embedder=emb, index=InMemoryIndex(), weights=weights
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


def test_rollback_drops_cached_memories(store: Store) -> None:
    emb = TableEmbedder({"kept": [1, 0], "lost": [0, 1], "q": [1, 1]})
    stream = MemoryStream(resident_id=make_resident(store), embedder=emb, index=InMemoryIndex())
    with store.session() as s:
        stream.add(s, [NewMemory("observation", "kept", 3)], T0)
    with pytest.raises(RuntimeError), store.session() as s:
        stream.add(s, [NewMemory("observation", "lost", 9)], T0)
        raise RuntimeError("crash mid-tick")
    with store.session() as s:
        assert [r.memory.text for r in stream.retrieve(s, "q", T0, k=5)] == ["kept"]
        assert stream.count(s) == 1
        (again,) = stream.add(s, [NewMemory("observation", "lost", 2)], T0)
    # the lost row's id is given again: what is found is the row of now, not the one kept before
    with store.session() as s:
        found = {r.memory.id: r.memory.importance for r in stream.retrieve(s, "q", T0, k=5)}
    assert found[again.id] == 2


def test_restart_reloads_and_reembeds_missing_vectors(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    emb = TableEmbedder({"a": [1, 0], "b": [0, 1], "q": [0, 1]})
    index = ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)
    rid = make_resident(store)
    stream = MemoryStream(resident_id=rid, embedder=emb, index=index)
    with store.session() as s:
        stream.add(s, [NewMemory("seed", "a", 5), NewMemory("seed", "b", 5)], T0)
    # simulate a crash after the commit but with the index missing the vectors
    index.drop(stream.collection)
    store2 = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    index2 = ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)
    again = MemoryStream(resident_id=rid, embedder=emb, index=index2)
    emb.calls.clear()
    with store2.session() as s:
        got = again.retrieve(s, "q", T0, k=1)
    assert got[0].memory.text == "b"
    assert sorted(emb.calls[0]) == ["a", "b"]  # re-embedded once, then the query
    ids, vecs = index2.fetch(again.collection)
    assert sorted(ids.tolist()) == [1, 2]
    assert vecs.shape == (2, 2)


def test_repair_embeds_only_what_the_index_lacks_up_to_an_id(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    emb = TableEmbedder({"a": [1, 0], "b": [0, 1], "c": [1, 1]})
    index = ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)
    stream = MemoryStream(resident_id=make_resident(store), embedder=emb, index=index)
    with store.session() as s:
        a, b, _ = stream.add(s, [NewMemory("seed", t, 5) for t in "abc"], T0)
    assert a.id is not None and b.id is not None
    # a process killed before its buffered writes went out: the index holds a's vector only
    index.drop(stream.collection)
    index.upsert(stream.collection, [a.id], [stream.resident_id], emb.embed(["a"]))
    emb.calls.clear()
    repairer = MemoryStream(resident_id=stream.resident_id, embedder=emb, index=index)
    with store.session() as s:
        assert repairer.repair(s, upto=b.id) == 1  # c came later: its own writer has it
        assert repairer.repair(s, upto=b.id) == 0
    assert emb.calls == [["b"]]
    assert sorted(index.ids(stream.collection).tolist()) == [a.id, b.id]
    ids, vectors = index.fetch(stream.collection)
    assert np.allclose(vectors[ids.tolist().index(b.id)], emb.embed(["b"])[0])


def test_bad_memories_are_refused_or_trimmed(store: Store) -> None:
    emb = TableEmbedder({"x": [1.0]})
    emb.table = {}
    emb.embed = lambda texts: np.ones((len(texts), 1), dtype=np.float32)  # type: ignore[method-assign]
    stream = MemoryStream(resident_id=make_resident(store), embedder=emb, index=InMemoryIndex())
    with pytest.raises(InvalidMemory, match="unknown memory kind"), store.session() as s:
        stream.add(s, [NewMemory("dream", "x", 3)], T0)
    with pytest.raises(InvalidMemory, match="needs some text"), store.session() as s:
        stream.add(s, [NewMemory("chat", " \n\t", 3)], T0)
    with store.session() as s:
        (row,) = stream.add(s, [NewMemory("chat", "y" * 100_000 + "\x00", 42)], T0)
    assert len(row.text) <= 4000 and row.importance == 10


def test_empty_stream_and_kind_filter(store: Store) -> None:
    emb = TableEmbedder({"plan": [1, 0], "q": [1, 0]})
    stream = MemoryStream(resident_id=make_resident(store), embedder=emb, index=InMemoryIndex())
    with store.session() as s:
        assert stream.retrieve(s, "q", T0) == []
        stream.add(s, [NewMemory("plan", "plan", 4)], T0)
        assert stream.retrieve(s, "q", T0, kinds=["reflection"]) == []
        one = stream.retrieve(s, "q", T0, kinds=["plan"])
    assert len(one) == 1
    # a single candidate: every component is the same for all candidates, so each gives 0.5
    assert one[0].score == pytest.approx(1.5)
    assert math.isclose(one[0].recency, 0.5)


async def test_record_embeds_off_the_event_loop(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    emb = TableEmbedder({"a  b": [1, 0], "a b": [1, 0], "q": [1, 0]})
    threads: list[str] = []
    inner = emb.embed

    def spy(texts: Sequence[str]) -> np.ndarray:
        import threading

        threads.append(threading.current_thread().name)
        return inner(texts)

    emb.embed = spy  # type: ignore[method-assign]
    with ThreadPoolExecutor(1, thread_name_prefix="embed-worker") as pool:
        stream = MemoryStream(
            resident_id=make_resident(store), embedder=emb, index=InMemoryIndex(), executor=pool
        )
        with store.session() as s:
            (row,) = await stream.record(s, [NewMemory("observation", "a  b", 4)], T0)
    assert row.text == "a b"  # the text was cleaned the same way before embedding
    assert threads == ["embed-worker_0"]
    with store.session() as s:
        assert [r.memory.id for r in stream.retrieve(s, "q", T0)] == [row.id]


async def test_a_recall_of_some_kinds_does_not_wait_for_other_kinds_being_embedded(
    store: Store,
) -> None:
    """A talk's recall (no plans) is answered while the plans just made are still embedded, and
    does not hurry them along; a recall of every kind waits for them."""
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from town.memory.embedders import CachedEmbedder

    table = TableEmbedder(
        {"q": [1, 0], "chat": [1, 0], "plan one": [0, 1], "plan two": [1, 1], "plan three": [1, 2]}
    )
    gate = threading.Event()
    inner = table.embed

    def gated(texts: Sequence[str]) -> np.ndarray:
        if any(t.startswith("plan") for t in texts):
            assert gate.wait(10)
        return inner(texts)

    table.embed = gated  # type: ignore[method-assign]
    emb = CachedEmbedder(table)
    emb.embed(["q"])  # the query's vector is known
    with ThreadPoolExecutor(1) as pool:
        stream = MemoryStream(
            resident_id=make_resident(store), embedder=emb, index=InMemoryIndex(), executor=pool
        )
        with store.session() as s:
            (chat,) = await stream.record(s, [NewMemory("chat", "chat", 3)], T0)
            await stream.recall(s, "q", T0)  # (its vector is in)
            await stream.record(s, [NewMemory("plan", "plan one", 5)], T0)  # being embedded
            await stream.record(s, [NewMemory("plan", "plan two", 5)], T0)  # waiting behind it
            found = await asyncio.wait_for(stream.recall(s, "q", T0, kinds=["chat"]), 5)
            assert [r.memory.id for r in found] == [chat.id]
            gate.set()
            await asyncio.sleep(0.05)  # the plans' vectors are done now, but not needed here:
            await stream.recall(s, "q", T0, kinds=["chat"])
            assert len(stream.arrays.pending) == 2  # they stay out of the matrix (see ready)
            gate.clear()
            await stream.record(s, [NewMemory("plan", "plan three", 5)], T0)
            every = asyncio.ensure_future(stream.recall(s, "q", T0))
            await asyncio.sleep(0.05)
            assert not every.done()  # the plans are needed here
            gate.set()
            assert len(await asyncio.wait_for(every, 5)) == 4


def test_chroma_refuses_another_embedder_s_collection(tmp_path: Path) -> None:
    index = ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)
    index.upsert("town-t1", [1, 2], [7, 8], np.array([[1, 0], [0, 1]], dtype=np.float32))
    ids, vectors = index.fetch("town-t1", 8)
    assert ids.tolist() == [2] and np.allclose(vectors, [[0, 1]])
    assert sorted(index.ids("town-t1").tolist()) == [1, 2]
    with pytest.raises(VectorIndexError, match="embedder 'table'"):
        ChromaIndex(path=tmp_path / "chroma", embedder_name="other", dim=2).ids("town-t1")
    with pytest.raises(ValueError, match="differ in length"):
        index.upsert("town-t1", [3], [7], np.zeros((2, 2), dtype=np.float32))


class CountingIndex(InMemoryIndex):
    def __init__(self) -> None:
        super().__init__()
        self.upserts: list[tuple[str, list[int]]] = []

    def upsert(
        self, collection: str, ids: Sequence[int], residents: Sequence[int], vectors: np.ndarray
    ) -> None:
        self.upserts.append((collection, list(residents)))
        super().upsert(collection, ids, residents, vectors)


@pytest.mark.parametrize("kind", ["memory", "chroma"])
async def test_a_town_s_residents_share_a_collection_and_keep_their_memories_apart(
    store: Store, tmp_path: Path, kind: str
) -> None:
    emb = TableEmbedder({"mine": [1, 0], "theirs": [0.9, 0.1], "q": [1, 0]})

    def open_index() -> VectorIndex:
        if kind == "memory":
            return index
        return ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)

    index: VectorIndex = CountingIndex() if kind == "memory" else open_index()
    a, b = make_residents(store, "Isabella Rodriguez", "Klaus Mueller")
    other = make_resident(store)  # of another town
    with ThreadPoolExecutor(1) as pool:
        streams = [
            MemoryStream(resident_id=r, embedder=emb, index=index, executor=pool)
            for r in (a, b, other)
        ]
        with store.session() as s:  # one unit of work: the town's vectors in one upsert
            for stream, text in zip(streams, ["mine", "theirs", "theirs"], strict=True):
                await stream.record(s, [NewMemory("observation", text, 5)], T0)
        shared_queue(emb, pool).flush().result(5)
    assert streams[0].collection == streams[1].collection != streams[2].collection
    if isinstance(index, CountingIndex):
        assert index.upserts == [(streams[0].collection, [a, b]), (streams[2].collection, [other])]
    emb.calls.clear()
    again = [MemoryStream(resident_id=r, embedder=emb, index=open_index()) for r in (a, b)]
    with store.session() as s:
        assert [r.memory.text for r in again[0].retrieve(s, "q", T0, k=5)] == ["mine"]
        assert [r.memory.text for r in again[1].retrieve(s, "q", T0, k=5)] == ["theirs"]
    assert emb.calls == [["q"], ["q"]]  # every vector came from the index
    assert len(index.ids(streams[0].collection, b)) == 1


@pytest.mark.parametrize("kind", ["memory", "embedded", "server"])
def test_per_resident_collections_move_into_the_town_s_once(
    store: Store,
    tmp_path: Path,
    kind: str,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    """Vectors an earlier version kept in a collection per resident (``<namespace>-r<id>``, no
    metadata) are moved into the town's collection on first load, and those collections
    dropped; another town's are left for its own first load."""
    emb = TableEmbedder({"a1": [1, 0], "a2": [0.8, 0.6], "b": [0, 1], "c": [1, 1], "q": [1, 0]})
    a, b = make_residents(store, "Isabella Rodriguez", "Klaus Mueller")
    c = make_resident(store)
    before = ((a, ["a1", "a2"]), (b, ["b"]), (c, ["c"]))
    with store.session() as s:  # the rows, as stored by the earlier version
        for rid, texts in before:
            MemoryStream(resident_id=rid, embedder=emb, index=InMemoryIndex()).add(
                s, [NewMemory("observation", t, 5) for t in texts], T0
            )
        rows = {m.text: m.id for m in s.exec(select(Memory)).all()}
    ns = f"m{uuid4().hex[:8]}"  # (a server is shared by the session's tests)
    index: VectorIndex
    if kind == "memory":
        index = InMemoryIndex()
        for rid, texts in before:
            index.upsert(
                f"{ns}-r{rid}", [rows[t] for t in texts], [0] * len(texts), emb.embed(texts)
            )
    else:
        url = request.getfixturevalue("chroma_url") if kind == "server" else None
        index = ChromaIndex(path=tmp_path / "chroma", url=url, embedder_name="table", dim=2)
        for rid, texts in before:  # as the earlier version wrote them: ids and vectors only
            index._client.create_collection(  # type: ignore[attr-defined]
                f"{ns}-r{rid}", metadata={"embedder": "table", "dim": 2}
            ).upsert(ids=[str(rows[t]) for t in texts], embeddings=emb.embed(texts))
    emb.calls.clear()
    streams = [MemoryStream(resident_id=r, embedder=emb, index=index, namespace=ns) for r in (a, b)]
    with caplog.at_level(logging.INFO, logger="town.memory.vectors"), store.session() as s:
        for stream in streams:
            stream.count(s)
    moved = [r.getMessage() for r in caplog.records if r.name == "town.memory.vectors"]
    town = streams[0].collection
    assert moved == [f"moved 3 vectors of 2 residents from per-resident collections into {town}"]
    assert emb.calls == []  # nothing embedded again
    if kind != "memory":  # (what Chroma holds, not what the index remembers of it)
        index = ChromaIndex(path=tmp_path / "chroma", url=url, embedder_name="table", dim=2)
    assert {n for n in index.names() if n.startswith(ns)} == {town, f"{ns}-r{c}"}
    assert sorted(index.ids(town, a).tolist()) == [rows["a1"], rows["a2"]]
    with store.session() as s:
        found = streams[0].retrieve(s, "q", T0, k=5)
    assert [r.memory.text for r in found] == ["a1", "a2"]
    if kind == "server":
        for name in (town, f"{ns}-r{c}"):
            index.drop(name)
