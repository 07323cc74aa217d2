"""The embedding queue (batches, urgent first, index writes in between) and memory streams that
record without waiting for their vectors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
import pytest

from tests.factories import lone_resident
from town.llm.embedders import CachedEmbedder, HashEmbedder
from town.memory.embedding_queue import EmbeddingQueue, flush_queues, shared_queue
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import InMemoryIndex
from town.store.db import Store

T0 = datetime(2023, 2, 13, 9, 0, tzinfo=UTC)


class Recording:
    """A hash embedder that records each call's texts and can be held busy."""

    name, dim = "recording", 32

    def __init__(self) -> None:
        self.inner = HashEmbedder(self.dim)
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.started.set()
        assert self.release.wait(5)
        self.calls.append(list(texts))
        if "boom" in texts:
            raise RuntimeError("the embedder failed")
        return self.inner.embed(texts)


def hold(queue: EmbeddingQueue, embedder: Recording) -> None:
    """Keep the queue's thread busy embedding 'hold' until ``embedder.release`` is set."""
    embedder.release.clear()
    embedder.started.clear()
    queue.submit(["hold"])
    assert embedder.started.wait(5)


def test_what_queues_up_is_embedded_together_each_caller_getting_its_rows() -> None:
    embedder = Recording()
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(embedder, pool, chunk_chars=10_000)
        hold(queue, embedder)
        asked = [[f"resident {i} line {j}" for j in range(i % 3 + 1)] for i in range(6)]
        futures = [queue.submit(texts, owner=i) for i, texts in enumerate(asked)]
        embedder.release.set()
        for texts, future in zip(asked, futures, strict=True):
            assert np.allclose(future.result(5), embedder.inner.embed(texts))
    assert embedder.calls[1:] == [[t for texts in asked for t in texts]]  # one call for all six


def test_an_urgent_request_goes_first_with_its_owners_earlier_requests_only() -> None:
    embedder = Recording()
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(embedder, pool, chunk_chars=len("other 0") * 2)
        hold(queue, embedder)
        others = [queue.submit([f"other {i}"], owner="b") for i in range(4)]
        mine = queue.submit(["my memory"], owner="a")
        query = queue.submit(["my query"], owner="a", urgent=True)
        embedder.release.set()
        assert query.result(5).shape == (1, 32) and mine.result(5).shape == (1, 32)
        for future in others:
            future.result(5)
    assert embedder.calls[1] == ["my memory", "my query"]
    assert embedder.calls[2:] == [["other 0", "other 1"], ["other 2", "other 3"]]  # in chunks


def test_writes_wait_for_earlier_embeddings_and_for_an_idle_queue() -> None:
    embedder = Recording()
    order: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(embedder, pool)
        hold(queue, embedder)
        first = queue.submit(["before"])
        first.add_done_callback(lambda _: order.append("embedded before"))
        queue.write("c", [1], lambda items: order.append(f"written {items}, done={first.done()}"))
        second = queue.submit(["after"])
        second.add_done_callback(lambda _: order.append("embedded after"))
        embedder.release.set()
        queue.flush().result(5)
    # the write ran once nothing was waiting: after both embeddings, the first included
    assert order == ["embedded before", "embedded after", "written [1], done=True"]


def test_writes_asked_for_while_the_thread_is_busy_are_written_together_per_key() -> None:
    embedder = Recording()
    written: list[tuple[str, list[int]]] = []

    def writer(key: str) -> Callable[[list[int]], None]:
        return lambda items: written.append((key, items))

    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(embedder, pool)
        hold(queue, embedder)
        for i in range(3):
            queue.write("a", [i], writer("a"))
            queue.write("b", [10 + i], writer("b"))
        assert written == []
        embedder.release.set()
        queue.flush().result(5)
    assert written == [("a", [0, 1, 2]), ("b", [10, 11, 12])]  # one call per key


def test_a_query_asked_for_during_writes_goes_before_the_next_key_is_written() -> None:
    order: list[str] = []
    writing = threading.Event()
    go_on = threading.Event()

    def slow(items: list[int]) -> None:
        writing.set()
        assert go_on.wait(5)
        order.append(f"wrote {items}")

    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(HashEmbedder(8), pool)
        queue.write("a", [1], slow)
        queue.write("b", [2], lambda items: order.append(f"wrote {items}"))
        done = queue.flush()
        assert writing.wait(5)  # key "a" is being written
        query = queue.submit(["a query"], urgent=True)
        query.add_done_callback(lambda _: order.append("embedded the query"))
        go_on.set()
        done.result(5)
    assert order == ["wrote [1]", "embedded the query", "wrote [2]"]


def test_a_failing_writer_does_not_stop_the_others() -> None:
    written: list[list[int]] = []

    def broken(items: list[int]) -> None:
        raise OSError("disk full")

    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(HashEmbedder(8), pool)
        queue.write("bad", [1], broken)
        queue.write("good", [2], written.append)
        queue.flush().result(5)
        assert written == [[2]]
        queue.flush().result(5)  # nothing buffered: done at once
    assert written == [[2]]
    with ThreadPoolExecutor(1) as pool:  # on shutdown: every shared queue on the executor
        shared_queue(HashEmbedder(8), pool).write("good", [4], written.append)
        flush_queues(pool, timeout=5)
    assert written == [[2], [4]]


def test_a_failed_batch_fails_each_of_its_callers_and_the_queue_goes_on() -> None:
    embedder = Recording()
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(embedder, pool)
        hold(queue, embedder)
        failing = [queue.submit(["boom"]), queue.submit(["fine"])]
        embedder.release.set()
        for future in failing:
            with pytest.raises(RuntimeError, match="the embedder failed"):
                future.result(5)
        assert queue.submit(["still fine"]).result(5).shape == (1, 32)


def test_streams_on_one_executor_share_one_queue() -> None:
    embedder = HashEmbedder(8)
    with ThreadPoolExecutor(1) as pool, ThreadPoolExecutor(1) as other:
        assert shared_queue(embedder, pool) is shared_queue(embedder, pool)
        assert shared_queue(embedder, pool) is not shared_queue(embedder, other)
        assert shared_queue(embedder, pool) is not shared_queue(HashEmbedder(8), pool)


async def test_record_returns_before_the_vectors_and_recall_still_finds_the_memory(
    store: Store,
) -> None:
    embedder = Recording()
    index = InMemoryIndex()
    with ThreadPoolExecutor(1) as pool:
        stream = MemoryStream(
            resident_id=lone_resident(store), embedder=embedder, index=index, executor=pool
        )
        queue = shared_queue(embedder, pool)
        hold(queue, embedder)  # the thread is busy: record cannot have waited for its vectors
        with store.session() as s:
            (row,) = await stream.record(
                s,
                [NewMemory("plan", "at 09:00 baking bread for the cafe", 5, gist="baking bread")],
                T0,
            )
            assert row.id is not None and row.text == "at 09:00 baking bread for the cafe"
            embedder.release.set()
            found = await stream.recall(s, "bread", T0, k=3)
            assert [r.memory.id for r in found] == [row.id]
        queue.flush().result(5)  # the index write after the commit is done
    # the gist was embedded (with the query that needed it, ahead of anyone else), not the text
    assert embedder.calls[1:] == [["baking bread", "bread"]]
    ids, vectors = index.fetch(stream.collection)
    assert ids.tolist() == [row.id]
    assert np.allclose(vectors[0], embedder.inner.embed(["baking bread"])[0])


async def test_a_rolled_back_record_leaves_nothing_behind(store: Store) -> None:
    embedder = Recording()
    index = InMemoryIndex()
    with ThreadPoolExecutor(1) as pool:
        stream = MemoryStream(
            resident_id=lone_resident(store), embedder=embedder, index=index, executor=pool
        )
        with store.session() as s:
            await stream.record(s, [NewMemory("observation", "kept", 3)], T0)
        with pytest.raises(RuntimeError), store.session() as s:
            await stream.record(s, [NewMemory("observation", "lost", 9)], T0)
            raise RuntimeError("crash mid-tick")
        with store.session() as s:
            assert [r.memory.text for r in await stream.recall(s, "lost", T0, k=5)] == ["kept"]
            assert stream.count(s) == 1
        shared_queue(embedder, pool).flush().result(5)
    assert len(index.fetch(stream.collection)[0]) == 1


async def test_a_vector_that_failed_is_computed_again_when_needed(store: Store) -> None:
    embedder = Recording()
    with ThreadPoolExecutor(1) as pool:
        stream = MemoryStream(
            resident_id=lone_resident(store),
            embedder=embedder,
            index=InMemoryIndex(),
            executor=pool,
        )
        with store.session() as s:
            await stream.record(s, [NewMemory("observation", "boom", 3)], T0)
        embedder.embed = embedder.inner.embed  # type: ignore[method-assign]  # healthy again
        with store.session() as s:
            assert [r.memory.text for r in await stream.recall(s, "boom", T0)] == ["boom"]


def test_what_the_cache_holds_is_answered_at_once_and_warming_fills_it() -> None:
    embedder = Recording()
    cached = CachedEmbedder(embedder)
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(cached, pool)
        queue.warm(["the question", "the other question"])
        queue.flush().result(5)  # everything asked for before is embedded
        hold(queue, embedder)  # the thread is busy: only the cache can answer now
        found = queue.submit(["the other question", "the question"], urgent=True)
        assert found.done()
        assert np.allclose(
            found.result(), embedder.inner.embed(["the other question", "the question"])
        )
        mine = queue.submit(["my memory"], owner="a")
        anyones = queue.submit(["a memory of no one"])
        assert queue.submit(["the question"], urgent=True).done()  # hurries no one's
        hurried = queue.submit(["the question"], owner="a", urgent=True)
        assert not hurried.done()  # it goes through the queue, to hurry the owner's memory
        embedder.release.set()
        assert mine.result(5).shape == hurried.result(5).shape == anyones.result(5).shape
    assert embedder.calls[0] == ["the question", "the other question"]
    # the question itself was cached
    assert embedder.calls[2:] == [["my memory"], ["a memory of no one"]]


def test_warming_skips_what_is_cached_or_on_its_way_and_needs_a_cache() -> None:
    embedder = Recording()
    cached = CachedEmbedder(embedder)
    with ThreadPoolExecutor(1) as pool:
        queue = EmbeddingQueue(cached, pool)
        hold(queue, embedder)
        queue.warm(["soon", "later", "soon"])
        queue.warm(["later", "soon"])  # still on its way: not asked again
        embedder.release.set()
        queue.flush().result(5)
        assert cached.missing(["soon", "later", "new"]) == ["new"]
        queue.warm(["soon", "new"])  # "soon" is cached: only "new" is embedded
        queue.flush().result(5)
        bare = EmbeddingQueue(embedder, pool)
        bare.warm(["nothing would keep this"])  # no cache to fill: no work
        bare.flush().result(5)
    assert embedder.calls[1:] == [["soon", "later"], ["new"]]


async def test_memories_warmed_ahead_are_recorded_from_the_cache(store: Store) -> None:
    embedder = Recording()
    cached = CachedEmbedder(embedder)
    with ThreadPoolExecutor(1) as pool:
        stream = MemoryStream(
            resident_id=lone_resident(store), embedder=cached, index=InMemoryIndex(), executor=pool
        )
        stream.warm_memories(
            [
                NewMemory("observation", "the  stove\tis burning", 1),
                NewMemory("plan", "long text", 1, gist="the gist"),
            ]
        )
        shared_queue(cached, pool).flush().result(5)
        with store.session() as s:
            await stream.record(s, [NewMemory("observation", "the  stove\tis burning", 8)], T0)
            assert [r.memory.text for r in await stream.recall(s, "the stove is burning", T0)] == [
                "the stove is burning"
            ]
    assert embedder.calls == [["the stove is burning", "the gist"]]  # as stored: once
