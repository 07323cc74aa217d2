"""The embedders: the exact-text cache, the hash embedder, the OpenAI-compatible one over the
real client against the fake server on loopback."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai
import pytest

from town.llm.embedders import CachedEmbedder, EmbeddingError, HashEmbedder, OpenAIEmbedder


class _CountingStub:
    name = "stub"
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = [len(text), 1.0, 0.0]
        normalised: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
        return normalised


def test_cached_embedder_embeds_identical_text_once() -> None:
    stub = _CountingStub()
    cached = CachedEmbedder(stub, max_entries=10)
    first = cached.embed(["hello", "hi", "hello"])
    second = cached.embed(["hello", "new", "hi"])
    assert stub.calls == [["hello", "hi"], ["new"]]
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[2])
    assert cached.embed(["hello"]).shape == (1, 3)
    assert len(stub.calls) == 2
    assert cached.name == "stub" and cached.dim == 3


def test_cached_embedder_evicts_least_recently_used() -> None:
    stub = _CountingStub()
    cached = CachedEmbedder(stub, max_entries=2)
    cached.embed(["a", "bb"])
    cached.embed(["a"])  # "a" is now more recent than "bb"
    cached.embed(["ccc"])  # evicts "bb"
    cached.embed(["a", "bb"])
    assert stub.calls == [["a", "bb"], ["ccc"], ["bb"]]
    assert len(cached) == 2


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    emb = HashEmbedder(dim=256)
    texts = ["The baker sells fresh bread", "", "!!!"]
    first = emb.embed(texts)
    second = HashEmbedder(dim=256).embed(texts)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (3, 256) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert emb.name == "hash"


def test_hash_embedder_related_beats_unrelated() -> None:
    emb = HashEmbedder()
    base, related, unrelated = emb.embed(
        [
            "Isabella is planning a party at the cafe",
            "the party at the cafe is on Friday",
            "Klaus studies gentrification in cities",
        ]
    )
    assert float(base @ related) > float(base @ unrelated) + 0.2


def test_openai_embeddings_over_the_wire(fake_llm: str) -> None:
    client = openai.OpenAI(base_url=fake_llm, api_key="test", max_retries=0, timeout=10)
    embedder = OpenAIEmbedder(client, "text-embedding-3-small", 384, max_batch=2)
    vectors = embedder.embed(["the stove is burning", "a party at Hobbs Cafe", "the stove is on"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[1]  # shared words, closer vectors
    assert embedder.embed([]).shape == (0, 384)


def test_a_wrong_dimension_is_a_clear_error(fake_llm: str) -> None:
    client = openai.OpenAI(base_url=fake_llm, api_key="test", max_retries=0, timeout=10)
    with pytest.raises(EmbeddingError, match=r"returned vectors of dimension 384"):
        OpenAIEmbedder(client, "text-embedding-3-small", 512).embed(["hello"])
