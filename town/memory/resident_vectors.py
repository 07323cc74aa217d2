"""A resident's vectors in its town's collection of the vector index (``<namespace>-t<town id>``,
the resident's id in each record's metadata): the collection found, with the per-resident
collections of earlier versions moved into it; the vectors of the resident's memories read back;
and those the index lost (a process killed before its index writes went out) embedded again."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from town.llm.embedders import Embedder
from town.memory.vectors import VectorIndex, adopt_collections
from town.store.models import Memory, Resident


class ResidentVectors:
    def __init__(
        self, resident_id: int, embedder: Embedder, index: VectorIndex, namespace: str
    ) -> None:
        self.resident_id = resident_id
        self.embedder = embedder
        self.index = index
        self.namespace = namespace
        self.collection = ""  # the town's, once known (see ``town_collection``)

    def town_collection(self, session: Session) -> str:
        """The town's collection, found on first use; per-resident collections left by earlier
        versions (``<namespace>-r<resident id>``) are moved into it then."""
        if not self.collection:
            town = session.execute(
                select(col(Resident.town_id)).where(col(Resident.id) == self.resident_id)
            ).scalar()
            self.collection = f"{self.namespace}-t{town or 0}"
            old = f"{self.namespace}-r"
            if town is not None and any(n.startswith(old) for n in self.index.names()):
                ours = select(col(Resident.id)).where(col(Resident.town_id) == town)
                residents = [r for r in session.scalars(ours) if r is not None]
                adopt_collections(self.index, old, self.collection, residents)
        return self.collection

    def read(self, session: Session, ids: np.ndarray, texts: list[str]) -> np.ndarray:
        """Vectors for these ids from the index; any the index lacks are embedded again."""
        have_ids, have_vecs = self.index.fetch(self.town_collection(session), self.resident_id)
        out = np.zeros((len(ids), self.embedder.dim), dtype=np.float32)
        found = np.isin(ids, have_ids)
        if found.any():
            order = np.argsort(have_ids)
            out[found] = have_vecs[order[np.searchsorted(have_ids, ids[found], sorter=order)]]
        if not found.all():
            lost = np.flatnonzero(~found)
            out[lost] = self._reembed(ids[lost], [texts[i] for i in lost])
        return out

    def repair(self, session: Session, upto: int) -> int:
        """Embed and index again those of the resident's memories, up to id ``upto``, that the
        index lacks; how many. A stream's arrays are left alone, so this may run on an object of
        its own on another thread while the town goes on."""
        rows = session.execute(
            select(col(Memory.id), col(Memory.text))
            .where(col(Memory.resident_id) == self.resident_id, col(Memory.id) <= upto)
            .order_by(col(Memory.id))
        ).all()
        if not rows:
            return 0
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        lost = ~np.isin(ids, self.index.ids(self.town_collection(session), self.resident_id))
        if lost.any():
            self._reembed(ids[lost], [r[1] for r, gone in zip(rows, lost, strict=True) if gone])
        return int(lost.sum())

    def _reembed(self, ids: np.ndarray, texts: list[str]) -> np.ndarray:
        """Vectors for memories the index lost, from their text as stored, indexed again."""
        vectors = self.embedder.embed(texts)
        self.index.upsert(self.collection, ids.tolist(), [self.resident_id] * len(ids), vectors)
        return vectors
