"""The vector index port and its Chroma implementation.

One collection per resident, named ``<namespace>-r<resident id>``, holding one vector per memory
keyed by the memory's id. Vectors are always computed by our own ``Embedder`` and handed over;
Chroma's default embedding function (which downloads a model at run time) is never attached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlparse

import numpy as np

log = logging.getLogger(__name__)

_BATCH = 4096


class VectorIndexError(Exception):
    """The vector index cannot be used; the message says what to do."""


class VectorIndex(Protocol):
    def upsert(self, collection: str, ids: Sequence[int], vectors: np.ndarray) -> None: ...

    def fetch(self, collection: str) -> tuple[np.ndarray, np.ndarray]:
        """All (ids as int64, vectors as float32) of a collection, in no particular order."""
        ...

    def ids(self, collection: str) -> np.ndarray:
        """The ids (int64) a collection holds vectors for, in no particular order."""
        ...

    def drop(self, collection: str) -> None: ...


class ChromaIndex:
    """The vector index of a deployment: Chroma's embedded ``PersistentClient`` by default, in a
    helper process of its own (``town/chroma_host.py``: its writes hold the interpreter's lock
    of the process they run in), or its ``HttpClient`` in this process when given a URL."""

    def __init__(
        self, *, path: Path | None = None, url: str | None = None, embedder_name: str, dim: int
    ) -> None:
        self.embedder_name = embedder_name
        self.dim = dim
        # writes are batched into the event loop's idle waits (see EmbeddingQueue)
        self.embedded = not url
        self._client: ChromaClient | None = None
        if url:
            self._client = ChromaClient(url=url, embedder_name=embedder_name, dim=dim)
            self.where = url
        else:
            folder = (path or Path("data/chroma")).resolve()
            self.where = str(folder)
            self._call("open")  # a folder Chroma cannot use is reported now

    def _call(self, op: str, *args: Any) -> Any:
        if self._client is not None:
            return getattr(self._client, op)(*args)
        from town.chroma_host import host

        return host().call(op, self.where, self.embedder_name, self.dim, *args)

    @staticmethod
    def release_all() -> None:
        """Forget Chroma's clients of this process and of the helper (before a data folder is
        deleted)."""
        from town.chroma_host import release_all

        release_all()
        ChromaClient.release_all()

    def upsert(self, collection: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        if len(ids) != len(vectors):
            raise ValueError("ids and vectors differ in length")
        self._call("upsert", collection, [int(i) for i in ids], np.asarray(vectors, np.float32))

    def fetch(self, collection: str) -> tuple[np.ndarray, np.ndarray]:
        return cast(tuple[np.ndarray, np.ndarray], self._call("fetch", collection))

    def ids(self, collection: str) -> np.ndarray:
        return cast(np.ndarray, self._call("ids", collection))

    def drop(self, collection: str) -> None:
        self._call("drop", collection)


class ChromaClient:
    """Chroma's ``PersistentClient`` for a folder or ``HttpClient`` for a URL, in this process."""

    def __init__(
        self,
        *,
        path: Path | str | None = None,
        url: str | None = None,
        embedder_name: str,
        dim: int,
    ) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        self.embedder_name = embedder_name
        self.dim = dim
        try:
            if url:
                parts = urlparse(url)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise VectorIndexError(f"chroma_url must look like http://host:port, not {url}")
                self._client: Any = chromadb.HttpClient(
                    host=parts.hostname,
                    port=parts.port or (443 if parts.scheme == "https" else 8000),
                    ssl=parts.scheme == "https",
                    settings=chroma_settings,
                )
                self.where = url
            else:
                # absolute: Chroma caches clients by this string for the life of the process
                folder = Path(path or "data/chroma").resolve()
                folder.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(path=str(folder), settings=chroma_settings)
                self.where = str(folder)
        except VectorIndexError:
            raise
        except Exception as exc:
            raise VectorIndexError(
                f"cannot open the Chroma index at {url or path}: {exc}. "
                "Check BOTTOWN_CHROMA_URL (is the server running?) or the data folder."
            ) from None
        self._collections: dict[str, Any] = {}

    @staticmethod
    def release_all() -> None:
        """Forget Chroma's per-process client cache (before a data folder is deleted)."""
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()

    def _collection(self, name: str) -> Any:
        found = self._collections.get(name)
        if found is not None:
            return found
        try:
            coll = self._client.get_or_create_collection(
                name=name,
                embedding_function=None,
                metadata={"embedder": self.embedder_name, "dim": self.dim},
            )
        except Exception as exc:
            raise VectorIndexError(
                f"Chroma at {self.where} refused collection {name}: {exc}"
            ) from None
        meta = coll.metadata or {}
        if meta.get("embedder") != self.embedder_name or meta.get("dim") != self.dim:
            raise VectorIndexError(
                f"collection {name} at {self.where} holds vectors of embedder "
                f"{meta.get('embedder')!r} (dim {meta.get('dim')}), but this town is configured "
                f"for {self.embedder_name!r} (dim {self.dim}): set BOTTOWN_EMBEDDER back, "
                "or start a new data folder / chroma_namespace"
            )
        self._collections[name] = coll
        return coll

    def upsert(self, collection: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        if len(ids) != len(vectors):
            raise ValueError("ids and vectors differ in length")
        coll = self._collection(collection)
        for start in range(0, len(ids), _BATCH):
            chunk = ids[start : start + _BATCH]
            coll.upsert(
                ids=[str(i) for i in chunk],
                embeddings=np.asarray(vectors[start : start + _BATCH], dtype=np.float32),
            )

    def fetch(self, collection: str) -> tuple[np.ndarray, np.ndarray]:
        id_parts: list[np.ndarray] = []
        vec_parts: list[np.ndarray] = []
        for ids, got in self._pages(collection, ["embeddings"]):
            id_parts.append(ids)
            vec_parts.append(np.asarray(got["embeddings"], dtype=np.float32))
        if not id_parts:
            return np.empty(0, dtype=np.int64), np.empty((0, self.dim), dtype=np.float32)
        return np.concatenate(id_parts), np.concatenate(vec_parts)

    def ids(self, collection: str) -> np.ndarray:
        parts = [ids for ids, _ in self._pages(collection, [])]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def _pages(self, collection: str, include: list[Any]) -> Iterator[tuple[np.ndarray, Any]]:
        """The collection a page at a time: its ids (int64) and what Chroma returned."""
        coll = self._collection(collection)
        offset = 0
        while True:
            got = coll.get(include=include, limit=_BATCH, offset=offset)
            ids = got["ids"]
            if not ids:
                return
            yield np.fromiter((int(i) for i in ids), dtype=np.int64, count=len(ids)), got
            offset += len(ids)

    def drop(self, collection: str) -> None:
        self._collections.pop(collection, None)
        try:
            self._client.delete_collection(collection)
        except Exception as exc:  # absent already: nothing to drop
            log.debug("drop %s: %s", collection, exc)


class InMemoryIndex:
    """A vector index in a dict, for tests and throwaway towns."""

    def __init__(self) -> None:
        self._data: dict[str, dict[int, np.ndarray]] = {}

    def upsert(self, collection: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        coll = self._data.setdefault(collection, {})
        for i, vec in zip(ids, vectors, strict=True):
            coll[int(i)] = np.asarray(vec, dtype=np.float32)

    def fetch(self, collection: str) -> tuple[np.ndarray, np.ndarray]:
        coll = self._data.get(collection, {})
        if not coll:
            return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
        ids = np.fromiter(coll.keys(), dtype=np.int64, count=len(coll))
        return ids, np.stack(list(coll.values()))

    def ids(self, collection: str) -> np.ndarray:
        coll = self._data.get(collection, {})
        return np.fromiter(coll.keys(), dtype=np.int64, count=len(coll))

    def drop(self, collection: str) -> None:
        self._data.pop(collection, None)
