"""The OpenAI-compatible embedder, over the real client, against the fake server on loopback."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from town.memory.embedding import EmbeddingError, OpenAIEmbedder


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
