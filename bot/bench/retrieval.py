"""``bottown bench retrieval``: retrieval latency and insert rate of one resident's memory stream.

The resident gets N memories (texts drawn from a pool of distinct town sentences, created over 30
game days with random importance), stored through the real stack: SQLite, Chroma's persistent
client and the configured embedder. The pool is embedded once before timing (identical texts are
embedded once in production too), so ``inserts_per_s`` measures the store and the index, and
``embed_per_s`` the embedder on its own. Every query is a new sentence; embedding it is timed on
its own (``query_embed_ms``), then ``retrieve`` is timed: scoring every memory, the top k, their
rows, and the last-access write in its own unit of work. End to end is the sum of the two.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from town.llm.embedders import CachedEmbedder, Embedder
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import ChromaIndex
from town.store.db import Store
from town.store.models import Resident, Town

NAMES = ["Isabella", "Klaus", "Maria", "Sam", "Tom", "Mei", "John", "Eddy", "Ayesha", "Carlos"]
VERBS = [
    "talked with",
    "saw",
    "helped",
    "argued with",
    "had coffee with",
    "walked past",
    "planned a party with",
    "asked advice from",
    "laughed with",
    "worried about",
]
PLACES = [
    "Hobbs Cafe",
    "Johnson Park",
    "the pharmacy",
    "Oak Hill College",
    "The Rose and Crown",
    "the supply store",
    "the library",
    "the town square",
    "home",
    "the market",
]
TOPICS = [
    "the election",
    "the Valentine's party",
    "a research paper",
    "the weather",
    "a new song",
    "the bakery's bread",
    "a broken stove",
    "the garden",
    "an old friend",
    "the rent",
]


@dataclass(frozen=True)
class SizeResult:
    size: int
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True)
class RetrievalBench:
    sizes: list[SizeResult]
    inserts_per_s: float
    embed_per_s: float
    embedder: str
    query_embed_p50_ms: float
    query_embed_p95_ms: float

    def as_json(self) -> dict[str, object]:
        return {
            "sizes": {str(r.size): {"p50_ms": r.p50_ms, "p95_ms": r.p95_ms} for r in self.sizes},
            "inserts_per_s": self.inserts_per_s,
            "embed_per_s": self.embed_per_s,
            "embedder": self.embedder,
            "query_embed_ms": {
                "p50_ms": self.query_embed_p50_ms,
                "p95_ms": self.query_embed_p95_ms,
            },
        }


def sentences(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        text = (
            f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(NAMES)} at "
            f"{rng.choice(PLACES)} about {rng.choice(TOPICS)} on day {rng.randint(1, 400)}"
        )
        if text not in taken:
            taken.add(text)
            out.append(text)
    return out


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    pos = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[pos]


def run_retrieval_bench(
    embedder: Embedder,
    sizes: Sequence[int] = (1_000, 10_000, 100_000),
    queries: int = 200,
    k: int = 10,
    pool_size: int = 3_000,
    seed: int = 1,
    workdir: Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> RetrievalBench:
    rng = random.Random(seed)
    taken: set[str] = set()
    pool = sentences(rng, pool_size, taken)
    cached = CachedEmbedder(embedder, max_entries=pool_size + queries * len(sizes) + 10)
    t = time.perf_counter()
    for start in range(0, len(pool), 256):
        cached.embed(pool[start : start + 256])
        if progress:
            progress("embedding the pool", min(start + 256, len(pool)), len(pool))
    embed_per_s = len(pool) / (time.perf_counter() - t)

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        index = ChromaIndex(
            path=Path(tmp) / "chroma", embedder_name=embedder.name, dim=embedder.dim
        )
        start_time = datetime(2023, 2, 1, tzinfo=UTC)
        with store.session() as s:
            town = Town(name="bench", clock=start_time)
            s.add(town)
            s.flush()
            assert town.id is not None
            town_id = town.id
        inserted, insert_s, results = 0, 0.0, []
        embed_ms: list[float] = []
        for size in sizes:
            with store.session() as s:
                resident = Resident(town_id=town_id, name=f"resident-{size}")
                s.add(resident)
                s.flush()
                assert resident.id is not None
                stream = MemoryStream(resident_id=resident.id, embedder=cached, index=index)
            span = timedelta(days=30) / size
            for batch_start in range(0, size, 1_000):
                n = min(1_000, size - batch_start)
                batch = [
                    NewMemory(
                        rng.choice(("observation", "chat", "plan", "reflection")),
                        rng.choice(pool),
                        rng.randint(1, 10),
                    )
                    for _ in range(n)
                ]
                t = time.perf_counter()
                with store.session() as s:
                    stream.add(s, batch, start_time + span * batch_start)
                insert_s += time.perf_counter() - t
                inserted += n
                if progress:
                    progress(f"inserting {size:,} memories", batch_start + n, size)
            now = start_time + timedelta(days=31)
            timings = []
            texts = sentences(rng, queries, taken)
            for query in texts:  # embedding the query is timed apart from retrieval
                t = time.perf_counter()
                cached.embed([query])
                embed_ms.append((time.perf_counter() - t) * 1000)
            for i, query in enumerate(texts):
                t = time.perf_counter()
                with store.session() as s:
                    got = stream.retrieve(s, query, now, k=k)
                timings.append((time.perf_counter() - t) * 1000)
                assert len(got) == min(k, size)
                if progress:
                    progress(f"querying {size:,} memories", i + 1, queries)
            results.append(
                SizeResult(
                    size, round(statistics.median(timings), 3), round(percentile(timings, 95), 3)
                )
            )
        store.dispose()
    return RetrievalBench(
        sizes=results,
        inserts_per_s=round(inserted / insert_s, 1),
        embed_per_s=round(embed_per_s, 1),
        embedder=embedder.name,
        query_embed_p50_ms=round(statistics.median(embed_ms), 3),
        query_embed_p95_ms=round(percentile(embed_ms, 95), 3),
    )
