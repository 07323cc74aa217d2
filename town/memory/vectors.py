"""The vector index port and its Chroma implementation.

One collection per town (see ``MemoryStream``), holding one vector per memory keyed by the
memory's id, with the resident's id in the record's metadata (``resident``). Vectors are always
computed by our own ``Embedder`` and handed over; Chroma's default embedding function (which
downloads a model at run time) is never attached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

log = logging.getLogger(__name__)

_BATCH = 4096


class VectorIndexError(Exception):
    """The vector index cannot be used; the message says what to do."""


class VectorIndex(Protocol):
    def upsert(
        self, collection: str, ids: Sequence[int], residents: Sequence[int], vectors: np.ndarray
    ) -> None:
        """Vectors under their memories' ids, each with its resident's id."""
        ...

    def fetch(self, collection: str, resident: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All (ids as int64, vectors as float32) of a collection, or of one resident's in it,
        in no particular order."""
        ...

    def ids(self, collection: str, resident: int | None = None) -> np.ndarray:
        """The ids (int64) a collection (one resident's in it) holds vectors for."""
        ...

    def names(self) -> set[str]:
        """The names of the collections the index holds."""
        ...

    def drop(self, collection: str) -> None: ...

    def delete(self, collection: str, ids: Sequence[int]) -> None:
        """The vectors of these memories, gone (a member forgotten)."""
        ...


def _where(resident: int | None) -> dict[str, Any] | None:
    return None if resident is None else {"resident": int(resident)}


def adopt_collections(
    index: VectorIndex, prefix: str, collection: str, residents: Iterable[int]
) -> None:
    """The per-resident collections (``<prefix><resident id>``: one per resident, before one per
    town) of ``residents`` moved into ``collection``, each dropped once copied (a crash in
    between copies it again)."""
    names, moved = index.names(), []
    for resident in residents:
        if (name := f"{prefix}{resident}") in names:
            ids, vectors = index.fetch(name)
            if len(ids):
                index.upsert(collection, ids.tolist(), [resident] * len(ids), vectors)
            index.drop(name)
            moved.append(len(ids))
    if moved:
        log.info(
            "moved %d vectors of %d residents from per-resident collections into %s",
            sum(moved),
            len(moved),
            collection,
        )


class ChromaIndex:
    """Chroma's embedded ``PersistentClient`` for a folder, or its ``HttpClient`` for a URL."""

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
        self._names: set[str] | None = None

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
        if self._names is not None:
            self._names.add(name)
        return coll

    def upsert(
        self, collection: str, ids: Sequence[int], residents: Sequence[int], vectors: np.ndarray
    ) -> None:
        if not len(ids) == len(residents) == len(vectors):
            raise ValueError("ids, residents and vectors differ in length")
        coll = self._collection(collection)
        for start in range(0, len(ids), _BATCH):
            stop = start + _BATCH
            coll.upsert(
                ids=[str(i) for i in ids[start:stop]],
                embeddings=np.asarray(vectors[start:stop], dtype=np.float32),
                metadatas=[{"resident": int(r)} for r in residents[start:stop]],
            )

    def fetch(self, collection: str, resident: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        id_parts: list[np.ndarray] = []
        vec_parts: list[np.ndarray] = []
        for ids, got in self._pages(collection, resident, ["embeddings"]):
            id_parts.append(ids)
            vec_parts.append(np.asarray(got["embeddings"], dtype=np.float32))
        if not id_parts:
            return np.empty(0, dtype=np.int64), np.empty((0, self.dim), dtype=np.float32)
        return np.concatenate(id_parts), np.concatenate(vec_parts)

    def ids(self, collection: str, resident: int | None = None) -> np.ndarray:
        parts = [ids for ids, _ in self._pages(collection, resident, [])]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def _pages(
        self, collection: str, resident: int | None, include: list[Any]
    ) -> Iterator[tuple[np.ndarray, Any]]:
        """The collection (one resident's records) a page at a time: the ids (int64) and what
        Chroma returned."""
        coll = self._collection(collection)
        offset = 0
        while True:
            got = coll.get(where=_where(resident), include=include, limit=_BATCH, offset=offset)
            ids = got["ids"]
            if not ids:
                return
            yield np.fromiter((int(i) for i in ids), dtype=np.int64, count=len(ids)), got
            offset += len(ids)

    def names(self) -> set[str]:
        if self._names is None:
            try:
                found = self._client.list_collections()
            except Exception as exc:
                raise VectorIndexError(f"Chroma at {self.where}: {exc}") from None
            self._names = {getattr(c, "name", c) for c in found}
        return set(self._names)

    def delete(self, collection: str, ids: Sequence[int]) -> None:
        coll = self._collection(collection)
        for start in range(0, len(ids), _BATCH):
            coll.delete(ids=[str(i) for i in ids[start : start + _BATCH]])

    def drop(self, collection: str) -> None:
        self._collections.pop(collection, None)
        if self._names is not None:
            self._names.discard(collection)
        try:
            self._client.delete_collection(collection)
        except Exception as exc:  # absent already: nothing to drop
            log.debug("drop %s: %s", collection, exc)


class InMemoryIndex:
    """A vector index in a dict, for tests and throwaway towns."""

    def __init__(self) -> None:
        self._data: dict[str, dict[int, tuple[int, np.ndarray]]] = {}

    def upsert(
        self, collection: str, ids: Sequence[int], residents: Sequence[int], vectors: np.ndarray
    ) -> None:
        coll = self._data.setdefault(collection, {})
        for i, r, vec in zip(ids, residents, vectors, strict=True):
            coll[int(i)] = (int(r), np.asarray(vec, dtype=np.float32))

    def _items(self, collection: str, resident: int | None) -> list[tuple[int, np.ndarray]]:
        coll = self._data.get(collection, {})
        return [(i, v) for i, (r, v) in coll.items() if resident is None or r == resident]

    def fetch(self, collection: str, resident: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        items = self._items(collection, resident)
        if not items:
            return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
        return np.array([i for i, _ in items], dtype=np.int64), np.stack([v for _, v in items])

    def ids(self, collection: str, resident: int | None = None) -> np.ndarray:
        return np.array([i for i, _ in self._items(collection, resident)], dtype=np.int64)

    def names(self) -> set[str]:
        return set(self._data)

    def delete(self, collection: str, ids: Sequence[int]) -> None:
        coll = self._data.get(collection, {})
        for i in ids:
            coll.pop(int(i), None)

    def drop(self, collection: str) -> None:
        self._data.pop(collection, None)
