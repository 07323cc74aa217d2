"""The Chroma vector index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from town.memory.vectors import ChromaIndex, VectorIndexError


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
