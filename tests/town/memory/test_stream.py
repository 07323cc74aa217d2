"""The memory stream: recording, rollback, and vectors computed off the event loop."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlmodel import Session

from tests.factories import lone_resident
from town.memory.stream import InvalidMemory, MemoryStream, NewMemory
from town.memory.vectors import InMemoryIndex
from town.store.db import Store

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


def test_rollback_drops_cached_memories(store: Store) -> None:
    emb = TableEmbedder({"kept": [1, 0], "lost": [0, 1], "q": [1, 1]})
    stream = MemoryStream(resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex())
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


def test_a_memory_not_committed_yet_is_found_only_by_its_own_unit_of_work(store: Store) -> None:
    """A thinking tick's new memories sit in the shared arrays before its commit: an interview
    meanwhile (another unit of work) never finds them, the tick itself does."""
    emb = TableEmbedder({"kept": [1, 0], "staged": [1, 0.1], "q": [1, 0]})
    stream = MemoryStream(resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex())
    with store.session() as s:
        stream.add(s, [NewMemory("observation", "kept", 3)], T0)

    def texts(session: Session) -> list[str]:
        return [r.memory.text for r in stream.retrieve(session, "q", T0, k=5, touch=False)]

    with store.session(autoflush=False) as thinking:
        stream.add(thinking, [NewMemory("observation", "staged", 9)], T0)
        with store.session() as interview:
            assert texts(interview) == ["kept"]
        assert sorted(texts(thinking)) == ["kept", "staged"]
    with store.session() as after:
        assert sorted(texts(after)) == ["kept", "staged"]  # committed: seen by every reader


def test_bad_memories_are_refused_or_trimmed(store: Store) -> None:
    emb = TableEmbedder({"x": [1.0]})
    emb.table = {}
    emb.embed = lambda texts: np.ones((len(texts), 1), dtype=np.float32)  # type: ignore[method-assign]
    stream = MemoryStream(resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex())
    with pytest.raises(InvalidMemory, match="unknown memory kind"), store.session() as s:
        stream.add(s, [NewMemory("dream", "x", 3)], T0)
    with pytest.raises(InvalidMemory, match="needs some text"), store.session() as s:
        stream.add(s, [NewMemory("chat", " \n\t", 3)], T0)
    with store.session() as s:
        (row,) = stream.add(s, [NewMemory("chat", "y" * 100_000 + "\x00", 42)], T0)
    assert len(row.text) <= 4000 and row.importance == 10


async def test_record_embeds_off_the_event_loop(store: Store) -> None:

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
            resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex(), executor=pool
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

    from town.llm.embedders import CachedEmbedder

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
            resident_id=lone_resident(store), embedder=emb, index=InMemoryIndex(), executor=pool
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
