"""ONNX export of a HAT checkpoint in Hugging Face Optimum's decoder layout, for Node's OnnxDecoder.

The graph is written by hand with onnx.helper (torch.onnx.export is slow and fragile with KV caches)
and computes transformers' Qwen3 forward: RMSNorm, per-head q/k RMSNorm before rotary embedding,
grouped-query attention, SwiGLU MLP, final norm, tied or untied LM head. Opset 17 standard ops only.

Interface (what shared/models/onnx/onnx-decoder.ts feeds and checks):
  inputs  input_ids [batch, seq] int64 (FULL tokenizer ids), attention_mask [batch, total] int64
          (left padding = 0), position_ids [batch, seq] int64, past_key_values.N.key|value
          [batch, kv_heads, past, head_dim] float32, logits_to_keep int64 scalar (0 = every position)
  outputs logits [batch, kept, full_vocab] float32, present.N.key|value [batch, kv_heads, total, head_dim]

A remapped model keeps the file small: input ids go through a full->compact table (unknown -> the
UNK row) and the compact logits, plus one constant -1e9 column, are gathered back to full ids. Every
id outside the map (and never the UNK row) reads that column, so log-softmax over the full
vocabulary equals the PyTorch model's over its output vocabulary.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

from .model import (
    HatModel,
    copy_tokenizer_files,
    file_list,
    load_checkpoint,
    replace_dir,
    tokenizer_token_id,
    tokenizer_vocab_size,
)

OPSET = 17
# IR version of opset 17: the oldest onnxruntime that runs opset 17 also reads the file.
IR_VERSION = 8
# Logit of every full id the model has no row for: exp(-1e9 - max) is 0 in float32, yet it stays
# finite, so temperatures, top-k and JSON logprobs on the Node side never meet -inf or NaN.
MASKED_LOGIT = -1e9
# Bias of masked attention scores; finite, so a fully padded query row cannot turn into NaN.
MASKED_SCORE = -1e9
# Bumped when the graph changes.
GRAPH_VERSION = 1
# Above this the weights go to model.onnx.data (protobuf's 2 GiB limit).
EXTERNAL_DATA_BYTES = 1_500_000_000


class _Graph:
    """Collects nodes and initializers; every op gets a fresh output name."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._constants: dict[tuple[Any, ...], str] = {}

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attributes: Any) -> str:
        name = output or f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], name=f"node_{len(self.nodes)}", **attributes))
        return name

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def ints(self, *values: int, scalar: bool = False) -> str:
        """An int64 constant ([len] or a scalar), shared by every use."""
        key = ("int64", scalar, values)
        if key not in self._constants:
            array = np.array(values[0] if scalar else list(values), dtype=np.int64)
            self._constants[key] = self.weight(f"const_i64_{len(self._constants)}", array)
        return self._constants[key]

    def float(self, value: float) -> str:
        key = ("float", value)
        if key not in self._constants:
            self._constants[key] = self.weight(f"const_f32_{len(self._constants)}", np.array(value, dtype=np.float32))
        return self._constants[key]


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to(torch.float32).cpu().numpy()


def build_graph(model: HatModel) -> onnx.ModelProto:
    """The ONNX decoder computing `model`'s logits over full tokenizer ids, with a KV cache."""
    config = model.module.config
    if config.attention_bias:
        raise ValueError("attention_bias=True is not supported (Qwen3 has none)")
    if (config.rope_parameters or {}).get("rope_type", "default") != "default":
        raise ValueError(f"rope_type {config.rope_parameters['rope_type']} is not supported (only default)")
    if getattr(config, "use_sliding_window", False):
        raise ValueError("sliding-window attention is not supported")
    layers, heads, kv_heads = config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads
    head_dim, hidden, eps = config.head_dim, config.hidden_size, float(config.rms_norm_eps)
    group = heads // kv_heads
    vocab = model.vocab
    out_vocab = model.full_vocab_size
    state = {name: tensor for name, tensor in model.module.state_dict().items()}
    g = _Graph()

    input_ids = "input_ids"
    attention_mask = "attention_mask"
    position_ids = "position_ids"
    inputs = [
        helper.make_tensor_value_info(input_ids, TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(attention_mask, TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info(position_ids, TensorProto.INT64, ["batch_size", "sequence_length"]),
    ]
    outputs = []
    past_shape = ["batch_size", kv_heads, "past_sequence_length", head_dim]
    present_shape = ["batch_size", kv_heads, "total_sequence_length", head_dim]
    for layer in range(layers):
        for part in ("key", "value"):
            name = f"past_key_values.{layer}.{part}"
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, past_shape))
    # A required input as in Optimum's exports (an initializer default would hide it from the input list).
    inputs.append(helper.make_tensor_value_info("logits_to_keep", TensorProto.INT64, []))

    # Embedding. Remapped: full id -> compact row (0 = UNK for ids the model has no row for).
    embedding = g.weight("model.embed_tokens.weight", _numpy(state["model.embed_tokens.weight"]))
    model_ids = input_ids
    if vocab is not None:
        to_compact = vocab._to_compact.numpy().astype(np.int32)
        model_ids = g.op("Gather", g.weight("hat.full_to_compact", to_compact), input_ids, axis=0)
    hidden_states = g.op("Gather", embedding, model_ids, axis=0)

    def rms_norm(x: str, weight_name: str) -> str:
        """transformers' RMSNorm: x / sqrt(mean(x^2) + eps) * weight, over the last axis."""
        weight = g.weight(weight_name, _numpy(state[weight_name]))
        variance = g.op("ReduceMean", g.op("Pow", x, g.float(2.0)), axes=[-1], keepdims=1)
        return g.op("Mul", g.op("Div", x, g.op("Sqrt", g.op("Add", variance, g.float(eps)))), weight)

    def linear(x: str, weight_name: str) -> str:
        # nn.Linear keeps [out, in]; MatMul wants [in, out].
        return g.op("MatMul", x, g.weight(weight_name + ".T", _numpy(state[weight_name]).T))

    # Rotary embedding from position_ids: cos/sin [batch, 1, seq, head_dim], both halves sharing
    # one frequency, as transformers' default rope.
    rotary = model.module.model.rotary_emb
    inv_freq = g.weight("rotary.inv_freq", _numpy(rotary.inv_freq))
    positions = g.op("Unsqueeze", g.op("Cast", position_ids, to=TensorProto.FLOAT), g.ints(-1))
    freqs = g.op("Mul", positions, inv_freq)
    angles = g.op("Concat", freqs, freqs, axis=-1)
    cos, sin = g.op("Cos", angles), g.op("Sin", angles)
    if rotary.attention_scaling != 1.0:
        cos = g.op("Mul", cos, g.float(float(rotary.attention_scaling)))
        sin = g.op("Mul", sin, g.float(float(rotary.attention_scaling)))
    cos, sin = g.op("Unsqueeze", cos, g.ints(1)), g.op("Unsqueeze", sin, g.ints(1))
    half = head_dim // 2

    def rope(x: str) -> str:
        """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1)."""
        first = g.op("Slice", x, g.ints(0), g.ints(half), g.ints(-1))
        second = g.op("Slice", x, g.ints(half), g.ints(head_dim), g.ints(-1))
        rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
        return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))

    # Attention bias [batch, 1, 1, seq, total]: query i of this call sits at index past + i and sees
    # keys at indices <= its own whose attention_mask is 1 (transformers' causal + padding mask).
    seq_len = g.op("Gather", g.op("Shape", input_ids), g.ints(1, scalar=True), axis=0)
    total_len = g.op("Gather", g.op("Shape", attention_mask), g.ints(1, scalar=True), axis=0)
    key_index = g.op("Range", g.ints(0, scalar=True), total_len, g.ints(1, scalar=True))
    query_index = g.op("Range", g.op("Sub", total_len, seq_len), total_len, g.ints(1, scalar=True))
    causal = g.op("LessOrEqual", key_index, g.op("Unsqueeze", query_index, g.ints(1)))
    key_allowed = g.op("Unsqueeze", g.op("Cast", attention_mask, to=TensorProto.BOOL), g.ints(1, 2))
    allowed = g.op("Unsqueeze", g.op("And", causal, key_allowed), g.ints(1))
    mask_bias = g.op("Where", allowed, g.float(0.0), g.float(MASKED_SCORE))
    scale = g.float(float(head_dim**-0.5))

    for layer in range(layers):
        prefix = f"model.layers.{layer}"
        normed = rms_norm(hidden_states, f"{prefix}.input_layernorm.weight")

        def heads_of(projection: str, count: int, norm: str | None) -> str:
            """[batch, seq, count*head_dim] -> [batch, count, seq, head_dim], RMS-normed per head first."""
            projected = linear(normed, f"{prefix}.self_attn.{projection}.weight")
            states = g.op("Reshape", projected, g.ints(0, 0, count, head_dim))
            if norm is not None:
                states = rms_norm(states, f"{prefix}.self_attn.{norm}.weight")
            return g.op("Transpose", states, perm=[0, 2, 1, 3])

        queries = rope(heads_of("q_proj", heads, "q_norm"))
        keys = rope(heads_of("k_proj", kv_heads, "k_norm"))
        values = heads_of("v_proj", kv_heads, None)
        present_key = g.op("Concat", f"past_key_values.{layer}.key", keys, axis=2, output=f"present.{layer}.key")
        present_value = g.op(
            "Concat", f"past_key_values.{layer}.value", values, axis=2, output=f"present.{layer}.value"
        )
        for name in (present_key, present_value):
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, present_shape))

        # Query head h uses kv head h // group (transformers' repeat_kv) without copying K/V:
        # queries as [batch, kv_heads, group, seq, head_dim] against keys [batch, kv_heads, 1, ...].
        grouped = g.op("Reshape", queries, g.ints(0, kv_heads, group, -1, head_dim))
        keys_t = g.op("Transpose", g.op("Unsqueeze", present_key, g.ints(2)), perm=[0, 1, 2, 4, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", grouped, keys_t), scale), mask_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), g.op("Unsqueeze", present_value, g.ints(2)))
        context = g.op("Transpose", g.op("Reshape", context, g.ints(0, heads, -1, head_dim)), perm=[0, 2, 1, 3])
        attended = linear(g.op("Reshape", context, g.ints(0, 0, heads * head_dim)), f"{prefix}.self_attn.o_proj.weight")
        hidden_states = g.op("Add", hidden_states, attended)

        mlp_in = rms_norm(hidden_states, f"{prefix}.post_attention_layernorm.weight")
        gate = linear(mlp_in, f"{prefix}.mlp.gate_proj.weight")
        up = linear(mlp_in, f"{prefix}.mlp.up_proj.weight")
        activated = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)
        hidden_states = g.op("Add", hidden_states, linear(activated, f"{prefix}.mlp.down_proj.weight"))

    # Only the last `logits_to_keep` positions reach the norm and LM head (0 keeps all, as in
    # transformers): a 5,000-token prefill must not build 5,000 x 151k logits.
    keep_start = g.op("Unsqueeze", g.op("Neg", "logits_to_keep"), g.ints(0))
    kept = g.op("Slice", hidden_states, keep_start, g.ints(np.iinfo(np.int64).max), g.ints(1))
    flat = g.op("Reshape", rms_norm(kept, "model.norm.weight"), g.ints(-1, hidden))
    if config.tie_word_embeddings:
        head = embedding
    else:
        head = g.weight("lm_head.weight", _numpy(state["lm_head.weight"]))
    logits = g.op("Gemm", flat, head, transB=1)  # [rows, model vocab]; reads the [vocab, hidden] matrix as is
    if vocab is not None:
        # Column len(vocab) is the constant one; the UNK column (0) is never gathered.
        with_masked = g.op("Pad", logits, g.ints(0, 0, 0, 1), g.float(MASKED_LOGIT))
        to_column = vocab._to_compact.numpy().astype(np.int32)
        to_column[to_column == 0] = len(vocab)
        logits = g.op("Gather", with_masked, g.weight("hat.full_to_logit_column", to_column), axis=1)
    logits_shape = g.op("Concat", g.op("Shape", kept, end=2), g.ints(out_vocab), axis=0)
    g.op("Reshape", logits, logits_shape, output="logits")
    logits_info = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "kept_length", out_vocab])
    outputs.insert(0, logits_info)

    graph = helper.make_graph(g.nodes, "hat_qwen3_decoder", inputs, outputs, g.initializers)
    onnx_model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hat-trainer", ir_version=IR_VERSION
    )
    helper.set_model_props(onnx_model, {"hat_trained": "true", "hat_graph_version": str(GRAPH_VERSION)})
    return onnx_model


def _onnx_config(model: HatModel, tokenizer_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """config.json of the ONNX dir: the fields onnx-decoder.ts reads, in Hugging Face naming, full-id space."""
    config = model.module.config
    rope = config.rope_parameters or {}
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "hidden_size": config.hidden_size,
        "head_dim": config.head_dim,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "vocab_size": model.full_vocab_size,
        "max_position_embeddings": config.max_position_embeddings,
        "rope_theta": float(rope.get("rope_theta", 1_000_000.0)),
        "rope_parameters": dict(rope),
        "rms_norm_eps": config.rms_norm_eps,
        "tie_word_embeddings": bool(config.tie_word_embeddings),
        "torch_dtype": "float32",
        "use_cache": True,
        "eos_token_id": tokenizer_token_id(tokenizer_dir, "eos_token"),
        "pad_token_id": tokenizer_token_id(tokenizer_dir, "pad_token"),
        "bos_token_id": tokenizer_token_id(tokenizer_dir, "bos_token"),
        "hat_trained": True,
        "hat_onnx": {
            "graph_version": GRAPH_VERSION,
            "opset": OPSET,
            "compact_vocab_size": len(model.vocab) if model.vocab is not None else None,
            "vocab_map_sha256": model.vocab.sha256() if model.vocab is not None else None,
            "masked_logit": MASKED_LOGIT,
        },
        "hat_checkpoint": model.metadata,
    }


def _check_batch(model: HatModel, pad_id: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fixed batch: one full row, one left-padded row, one row with an id outside the map."""
    rng = np.random.default_rng(seed)
    known = np.array(model.vocab.full_ids[1:] if model.vocab is not None else range(model.full_vocab_size))
    batch, length, padding = 3, 12, 4
    ids = rng.choice(known, size=(batch, length)).astype(np.int64)
    mask = np.ones((batch, length), dtype=np.int64)
    mask[1, :padding] = 0
    ids[1, :padding] = pad_id
    if model.vocab is not None:
        unknown = next((i for i in range(model.full_vocab_size) if not model.vocab.contains(i)), None)
        if unknown is not None:
            ids[2, length // 2] = unknown
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int64)
    return ids, mask, positions


def check_parity(model: HatModel, model_file: str | os.PathLike[str], pad_id: int = 0) -> dict[str, float]:
    """onnxruntime against PyTorch on a fixed batch: full prefill, a padded row, KV-cache continuation.

    Returns max_abs_logit_diff (over real positions and full ids the model can produce),
    masked_logit_error (ids outside the map must read exactly MASKED_LOGIT) and logits_to_keep_diff
    (keep=1 against the last row of keep=0).
    """
    ids, mask, positions = _check_batch(model, pad_id)
    model.module.eval()
    with torch.no_grad():
        reference = model.logits(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(positions)).numpy()
    if model.vocab is not None:
        known = np.array(model.vocab.full_ids[1:])
        reference = reference[..., 1:]
        unknown = np.ones(model.full_vocab_size, dtype=bool)
        unknown[known] = False
    else:
        known, unknown = np.arange(model.full_vocab_size), np.zeros(model.full_vocab_size, dtype=bool)

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # as Node loads it
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
    config = model.module.config
    batch = ids.shape[0]

    def run(columns: slice, past: dict[str, np.ndarray], keep: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        feeds = {
            "input_ids": ids[:, columns],
            "position_ids": positions[:, columns],
            "attention_mask": mask[:, : columns.stop],
            "logits_to_keep": np.array(keep, dtype=np.int64),
            **past,
        }
        names = [output.name for output in session.get_outputs()]
        values = dict(zip(names, session.run(names, feeds)))
        cache = {
            name.replace("present.", "past_key_values."): value for name, value in values.items() if name != "logits"
        }
        return values["logits"], cache

    empty = {
        f"past_key_values.{layer}.{part}": np.zeros((batch, config.num_key_value_heads, 0, config.head_dim), np.float32)
        for layer in range(config.num_hidden_layers)
        for part in ("key", "value")
    }
    length = ids.shape[1]
    errors = {"max_abs_logit_diff": 0.0, "masked_logit_error": 0.0}

    def compare(logits: np.ndarray, first_column: int) -> None:
        columns = range(first_column, first_column + logits.shape[1])
        for row in range(batch):
            for offset, column in enumerate(columns):
                if not mask[row, column]:
                    continue
                got = logits[row, offset]
                diff = float(np.max(np.abs(got[known] - reference[row, column])))
                errors["max_abs_logit_diff"] = max(errors["max_abs_logit_diff"], diff)
                if unknown.any():
                    masked = float(np.max(np.abs(got[unknown] - np.float32(MASKED_LOGIT))))
                    errors["masked_logit_error"] = max(errors["masked_logit_error"], masked)

    full, _ = run(slice(0, length), empty, keep=0)
    compare(full, 0)
    last, _ = run(slice(0, length), empty, keep=1)
    errors["logits_to_keep_diff"] = float(np.max(np.abs(last[:, 0] - full[:, -1])))
    # Prefill, then a 2-token chunk and a 1-token step through the cache, as Node feeds prompts.
    prefix = length - 3
    _, cache = run(slice(0, prefix), empty, keep=1)
    chunk, cache = run(slice(prefix, prefix + 2), cache, keep=0)
    compare(chunk, prefix)
    step, _ = run(slice(prefix + 2, length), cache, keep=1)
    compare(step, length - 1)
    errors["reference_max_abs_logit"] = float(np.max(np.abs(reference[np.isfinite(reference)])))
    return errors


def export_onnx(
    hf_dir: str | os.PathLike[str],
    onnx_dir: str | os.PathLike[str],
    tokenizer_dir: str | os.PathLike[str],
    tolerance: float = 1e-3,
) -> dict[str, Any]:
    """Exports a checkpoint to an ONNX dir that `hat serve` / the onnx adapter load unchanged.

    Writes model.onnx, config.json, generation_config.json and the tokenizer files to a temporary
    dir, checks onnxruntime against PyTorch there, and only then puts the dir in place. Raises when
    the logits differ by more than `tolerance` x max(1, largest reference logit).
    Returns {"dir", "files", "max_abs_logit_diff", "logits_to_keep_diff", "masked_logit_error",
    "model_bytes", "export_seconds", "check_seconds", "vocab_size", "compact_vocab_size"}.
    """
    started = time.perf_counter()
    model = load_checkpoint(hf_dir)
    full_size = tokenizer_vocab_size(tokenizer_dir)
    if model.vocab is not None and model.vocab.full_vocab_size != full_size:
        raise ValueError(
            f"the checkpoint's map is for {model.vocab.full_vocab_size} ids, the tokenizer has {full_size}"
        )
    if model.vocab is None and model.full_vocab_size < full_size:
        raise ValueError(f"the model has {model.full_vocab_size} rows, fewer than the tokenizer's {full_size} ids")
    onnx_model = build_graph(model)

    target = Path(onnx_dir).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        os.chmod(temporary, 0o755)
        model_file = temporary / "model.onnx"
        weight_bytes = sum(t.ByteSize() for t in onnx_model.graph.initializer)
        if weight_bytes > EXTERNAL_DATA_BYTES:
            onnx.save_model(
                onnx_model,
                model_file,
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location="model.onnx.data",
            )
        else:
            onnx.save_model(onnx_model, model_file)
        del onnx_model
        config = _onnx_config(model, tokenizer_dir)
        (temporary / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        # Token ids only: sampling defaults here would override requests' (serve reads temperature/top_p/top_k).
        token_fields = ("eos_token_id", "pad_token_id", "bos_token_id")
        generation = {key: config[key] for key in token_fields if config[key] is not None}
        (temporary / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
        copy_tokenizer_files(tokenizer_dir, temporary)
        exported = time.perf_counter()

        pad_id = config["pad_token_id"] if config["pad_token_id"] is not None else 0
        errors = check_parity(model, model_file, pad_id)
        limit = tolerance * max(1.0, errors["reference_max_abs_logit"])
        matches = errors["max_abs_logit_diff"] <= limit and errors["logits_to_keep_diff"] <= limit
        if not (matches and errors["masked_logit_error"] == 0.0):
            raise ValueError(f"ONNX export does not match PyTorch (limit {limit:.3g}): {errors}")
        files = file_list(temporary)
        replace_dir(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return {
        "dir": str(target),
        "files": files,
        **errors,
        "model_bytes": (target / "model.onnx").stat().st_size,
        "export_seconds": exported - started,
        "check_seconds": time.perf_counter() - exported,
        "vocab_size": model.full_vocab_size,
        "compact_vocab_size": len(model.vocab) if model.vocab is not None else None,
    }
