"""Sentence embedders for the town's memory stream, and the port they share.

* :class:`CachedEmbedder` adds an exact-text LRU cache in front of any embedder.
* :class:`OpenAIEmbedder` calls an OpenAI-compatible ``/embeddings`` endpoint.
* :class:`HashEmbedder` is a tiny deterministic bag-of-words embedder for tests and the
  fake LLM server; it carries no real semantics beyond word overlap.
* :class:`town.memory.minilm.MiniLMEmbedder` (its own module) runs the bundled all-MiniLM-L6-v2.

Every embedder returns float32 arrays of shape ``(len(texts), dim)`` with L2-normalised rows.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import openai

F32 = npt.NDArray[np.float32]


class EmbeddingError(RuntimeError):
    """An embedder produced (or was asked for) something unusable."""


class EmbeddingModelError(EmbeddingError):
    """The local embedding model files are missing, corrupted or inconsistent."""


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of a fixed width."""

    dim: int
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with unit-length rows."""
        ...


def normalise_rows(x: npt.NDArray[Any]) -> F32:
    out = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


class CachedEmbedder:
    """Wraps an :class:`Embedder` with an LRU cache keyed by the exact text.

    Misses from one call (deduplicated) are sent to the wrapped embedder in a single batch.
    """

    def __init__(self, inner: Embedder, max_entries: int = 50_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.inner = inner
        self.dim: int = inner.dim
        self.name: str = inner.name
        self.max_entries = max_entries
        self._cache: OrderedDict[str, F32] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                row = self._cache.get(text)
                if row is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = row
        if not missing:
            return out
        new_texts = list(missing)
        vectors = np.asarray(self.inner.embed(new_texts), dtype=np.float32)
        if vectors.shape != (len(new_texts), self.dim):
            raise EmbeddingError(
                f"{self.inner.name} returned shape {vectors.shape}, "
                f"expected {(len(new_texts), self.dim)}"
            )
        with self._lock:
            for text, vec in zip(new_texts, vectors, strict=True):
                out[missing[text]] = vec
                stored = vec.copy()
                stored.setflags(write=False)
                self._cache[text] = stored
                self._cache.move_to_end(text)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return out

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The texts of ``texts`` the cache does not hold, each once (the cache is left as is)."""
        with self._lock:
            return [t for t in dict.fromkeys(texts) if t not in self._cache]

    def cached(self, texts: Sequence[str]) -> np.ndarray | None:
        """The vectors of ``texts`` if every one is cached (no embedding), else None."""
        rows: list[F32] = []
        with self._lock:
            for text in texts:
                row = self._cache.get(text)
                if row is None:
                    return None
                rows.append(row)
            for text in texts:
                self._cache.move_to_end(text)
        return np.stack(rows) if rows else None


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server via a caller-supplied sync client."""

    def __init__(
        self, client: openai.OpenAI, model: str, dim: int, *, max_batch: int = 256
    ) -> None:
        if dim < 1 or max_batch < 1:
            raise ValueError("dim and max_batch must be >= 1")
        self.client = client
        self.model = model
        self.dim: int = dim
        self.name: str = f"openai:{model}"
        self.max_batch = max_batch

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.max_batch):
            chunk = list(texts[start : start + self.max_batch])
            # "float" explicitly: the client otherwise asks for base64, which many
            # OpenAI-compatible servers do not implement.
            response = self.client.embeddings.create(
                model=self.model, input=chunk, encoding_format="float"
            )
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise EmbeddingError(
                    f"embedding model {self.model!r} returned {len(data)} vectors "
                    f"for {len(chunk)} inputs"
                )
            for offset, item in enumerate(data):
                vec = np.asarray(item.embedding, dtype=np.float32)
                if vec.shape != (self.dim,):
                    raise EmbeddingError(
                        f"embedding model {self.model!r} returned vectors of dimension "
                        f"{vec.size}, but OpenAIEmbedder was configured with dim={self.dim}; "
                        "set BOTTOWN_EMBEDDING_DIM (or BOTTOWN_EMBEDDING_MODEL) to match"
                    )
                out[start + offset] = vec
        return normalise_rows(out)


_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic hashed bag of words + word bigrams, for tests and the fake LLM server.

    Texts sharing words get positive cosine similarity; there is no other semantics.
    Stable across processes and platforms (blake2b, not Python's salted ``hash``).
    """

    name = "hash"

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError("dim must be >= 2")
        self.dim: int = dim

    def _features(self, text: str) -> list[str]:
        words = _WORD_RE.findall(text.lower())
        if not words:
            return ["\x00empty"]
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = int.from_bytes(
                    hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
                )
                weight = 0.5 if " " in feature else 1.0  # bigrams count half
                out[row, (h >> 1) % self.dim] += weight if h & 1 else -weight
            if not out[row].any():  # features cancelled out exactly; keep the row unit-length
                out[row, 0] = 1.0
        return normalise_rows(out)
