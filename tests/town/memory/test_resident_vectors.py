"""A town's collection: shared by its residents, moved from per-resident ones, lost vectors
embedded again on load or by a repair."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import uuid4

import numpy as np
import pytest
from sqlmodel import select

from tests.factories import lone_resident, town_with_residents
from tests.town.memory.test_stream import T0, TableEmbedder
from town.memory.embedding_queue import shared_queue
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import ChromaIndex, InMemoryIndex, VectorIndex
from town.store.db import Store
from town.store.models import Memory

pytest_plugins = ["tests.servers"]  # (a Chroma server, for the migration's test)


def test_restart_reloads_and_reembeds_missing_vectors(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    emb = TableEmbedder({"a": [1, 0], "b": [0, 1], "q": [0, 1]})
    index = ChromaIndex(path=tmp_path / "chroma", embedder_name="table", dim=2)
    rid = lone_resident(store)
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
    stream = MemoryStream(resident_id=lone_resident(store), embedder=emb, index=index)
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
    a, b = town_with_residents(store, "Isabella Rodriguez", "Klaus Mueller")
    other = lone_resident(store)  # of another town
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
    a, b = town_with_residents(store, "Isabella Rodriguez", "Klaus Mueller")
    c = lone_resident(store)
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
