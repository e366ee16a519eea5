"""ONNX export: onnxruntime against PyTorch, Optimum naming, logits_to_keep, config (tiny shapes, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from hat_trainer.export_onnx import MASKED_LOGIT, export_onnx
from hat_trainer.model import HatModel, ModelShape, VocabularyMap, new_model, save_checkpoint, tokenizer_special_ids

TINY = ModelShape(layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, intermediate=64)
FULL = 300  # ids of the test tokenizer


def write_tokenizer(directory: Path, size: int = FULL) -> Path:
    """A minimal tokenizer dir: size-3 plain ids, then <|endoftext|>, <|im_start|>, <|im_end|>."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {f"t{i}": i for i in range(size - 3)}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = [{"id": size - 3 + i, "content": content, "special": True} for i, content in enumerate(specials)]
    tokenizer = {"model": {"type": "BPE", "vocab": vocab}, "added_tokens": added}
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": "{{ x }}"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def spread_weights(model: HatModel, seed: int = 0) -> None:
    """Trained-looking weights: every tensor distinct (norm weights too), logits of several units,
    so a swapped weight or a missing norm shows up in the comparison."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.5 * noise)
            elif "embed_tokens" in name or "lm_head" in name:
                parameter.copy_(noise)
            else:
                parameter.copy_(noise / parameter.shape[-1] ** 0.5)


def exported(
    tmp_path: Path, vocab: VocabularyMap | None, tie: bool = True, seed: int = 0
) -> tuple[HatModel, Path, dict]:
    tokenizer = write_tokenizer(tmp_path / "tok")
    shape = ModelShape(**{**TINY.__dict__, "tie_embeddings": tie, "rope_theta": 10_000.0})
    model = new_model(shape, vocab, seed=seed, full_vocab_size=FULL)
    spread_weights(model, seed)
    save_checkpoint(model, tmp_path / "ckpt", tokenizer, {"policy_version": "pv-1"})
    result = export_onnx(tmp_path / "ckpt", tmp_path / "onnx", tokenizer)
    model.module.eval()
    return model, tmp_path / "onnx", result


def remap() -> VocabularyMap:
    ids = np.random.default_rng(0).choice(FULL - 3, size=60, replace=False)
    return VocabularyMap.build(ids.tolist(), [FULL - 3, FULL - 2, FULL - 1], FULL)


class Session:
    """Feeds the exported decoder as Node's OnnxDecoder does."""

    def __init__(self, directory: Path) -> None:
        self.session = ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
        self.config = json.loads((directory / "config.json").read_text())

    def empty(self, batch: int) -> dict[str, np.ndarray]:
        c = self.config
        shape = (batch, c["num_key_value_heads"], 0, c["head_dim"])
        names = [f"past_key_values.{i}.{p}" for i in range(c["num_hidden_layers"]) for p in ("key", "value")]
        return {name: np.zeros(shape, np.float32) for name in names}

    def run(self, ids, mask, positions, past, keep=0):
        names = [o.name for o in self.session.get_outputs()]
        feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, **past}
        feeds["logits_to_keep"] = np.array(keep, np.int64)
        out = dict(zip(names, self.session.run(names, feeds)))
        return out["logits"], {k.replace("present.", "past_key_values."): v for k, v in out.items() if k != "logits"}


def padded_batch(vocab: VocabularyMap | None, lengths: list[int], seed: int = 1):
    rng = np.random.default_rng(seed)
    known = np.array(vocab.full_ids[1:]) if vocab is not None else np.arange(FULL)
    width = max(lengths)
    ids = np.full((len(lengths), width), FULL - 3, np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, width - length:] = rng.choice(known, size=length)
        mask[row, width - length:] = 1
    positions = np.clip(np.cumsum(mask, 1) - 1, 0, None)
    return ids, mask, positions


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@pytest.mark.parametrize("tie", [True, False])
def test_remapped_export_matches_pytorch(tmp_path: Path, tie: bool) -> None:
    vocab = remap()
    model, directory, result = exported(tmp_path, vocab, tie)
    assert result["max_abs_logit_diff"] < 1e-4, result
    assert result["reference_max_abs_logit"] > 2  # the check ran on non-trivial logits
    assert result["masked_logit_error"] == 0.0
    assert result["logits_to_keep_diff"] < 1e-5
    assert result["vocab_size"] == FULL and result["compact_vocab_size"] == len(vocab)

    # Padded batch, an unknown input id: full-vocabulary log-softmax equals token_log_probs.
    ids, mask, positions = padded_batch(vocab, [10, 6, 8])
    ids[2, 5] = next(i for i in range(FULL) if not vocab.contains(i))
    session = Session(directory)
    logits, _ = session.run(ids, mask, positions, session.empty(3))
    assert logits.shape == (3, 10, FULL)
    onnx_lp = np.take_along_axis(log_softmax(logits[:, :-1]), ids[:, 1:, None], -1)[..., 0]
    with torch.no_grad():
        torch_lp = model.token_log_probs(*map(torch.from_numpy, (ids, mask, positions))).numpy()
    scored = (mask[:, :-1] == 1) & np.isfinite(torch_lp)
    assert scored.sum() > 15
    assert np.max(np.abs(onnx_lp[scored] - torch_lp[scored])) < 1e-4
    # The unknown target: -inf in PyTorch, about -1e9 in ONNX (finite for Node).
    assert np.isneginf(torch_lp[2, 4]) and onnx_lp[2, 4] < -1e8
    # Ids outside the map read exactly the masked logit.
    unknown = np.array([not vocab.contains(i) for i in range(FULL)])
    assert np.all(logits[..., unknown] == np.float32(MASKED_LOGIT))


def test_identity_export_matches_pytorch(tmp_path: Path) -> None:
    model, directory, result = exported(tmp_path, None, tie=False)
    assert result["max_abs_logit_diff"] < 1e-4 and result["compact_vocab_size"] is None
    ids, mask, positions = padded_batch(None, [7, 4])
    logits, _ = Session(directory).run(ids, mask, positions, Session(directory).empty(2))
    with torch.no_grad():
        reference = model.logits(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(positions)).numpy()
    real = mask == 1
    assert np.max(np.abs(logits[real] - reference[real])) < 1e-4


def test_cache_steps_and_logits_to_keep(tmp_path: Path) -> None:
    vocab = remap()
    model, directory, _ = exported(tmp_path, vocab)
    session = Session(directory)
    ids, mask, positions = padded_batch(vocab, [9, 5])
    full, _ = session.run(ids, mask, positions, session.empty(2), keep=0)
    # logits_to_keep=1 is the last position of the full output; 3 keeps the last three.
    last, _ = session.run(ids, mask, positions, session.empty(2), keep=1)
    assert last.shape == (2, 1, FULL)
    np.testing.assert_allclose(last[:, 0], full[:, -1], atol=1e-5)
    three, _ = session.run(ids, mask, positions, session.empty(2), keep=3)
    np.testing.assert_allclose(three, full[:, -3:], atol=1e-5)
    # Prefill 4 columns, then one token per step through the cache, as generation feeds it.
    _, cache = session.run(ids[:, :4], mask[:, :4], positions[:, :4], session.empty(2), keep=1)
    for column in range(4, 9):
        columns = slice(column, column + 1)
        step, cache = session.run(ids[:, columns], mask[:, : column + 1], positions[:, columns], cache, keep=1)
        assert cache["past_key_values.0.key"].shape == (2, TINY.kv_heads, column + 1, TINY.head_dim)
        np.testing.assert_allclose(step[:, 0], full[:, column], atol=1e-4)
    with torch.no_grad():
        reference = model.logits(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(positions)).numpy()
    known = np.array(vocab.full_ids[1:])
    real = mask == 1
    assert np.max(np.abs(full[real][:, known] - reference[real][:, 1:])) < 1e-4


def test_interface_and_config(tmp_path: Path) -> None:
    vocab = remap()
    model, directory, result = exported(tmp_path, vocab)
    session = ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
    inputs = {i.name: (i.type, i.shape) for i in session.get_inputs()}
    outputs = {o.name: (o.type, o.shape) for o in session.get_outputs()}
    for name in ("input_ids", "attention_mask", "position_ids"):
        assert inputs.pop(name)[0] == "tensor(int64)"
    assert inputs.pop("logits_to_keep") == ("tensor(int64)", [])
    assert set(inputs) == {f"past_key_values.{i}.{p}" for i in range(TINY.layers) for p in ("key", "value")}
    assert all(t == "tensor(float)" and s[1] == TINY.kv_heads and s[3] == TINY.head_dim for t, s in inputs.values())
    assert outputs.pop("logits")[1][2] == FULL
    assert set(outputs) == {f"present.{i}.{p}" for i in range(TINY.layers) for p in ("key", "value")}

    config = json.loads((directory / "config.json").read_text())
    assert config["vocab_size"] == FULL
    assert (config["eos_token_id"], config["pad_token_id"], config["bos_token_id"]) == (FULL - 1, FULL - 3, None)
    assert config["num_hidden_layers"] == TINY.layers and config["num_key_value_heads"] == TINY.kv_heads
    assert config["head_dim"] == TINY.head_dim and config["num_attention_heads"] == TINY.heads
    assert config["hat_trained"] is True and "hat_dummy_weights" not in config
    assert config["hat_onnx"]["vocab_map_sha256"] == vocab.sha256()
    assert config["hat_checkpoint"]["policy_version"] == "pv-1"
    generation = json.loads((directory / "generation_config.json").read_text())
    assert generation["eos_token_id"] == FULL - 1 and "temperature" not in generation
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (directory / name).read_bytes() == (tmp_path / "tok" / name).read_bytes()
    names = {entry["path"] for entry in result["files"]}
    assert names == {"model.onnx", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}
    assert result["model_bytes"] == (directory / "model.onnx").stat().st_size
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left


def test_export_refuses_another_tokenizer(tmp_path: Path) -> None:
    tokenizer = write_tokenizer(tmp_path / "tok")
    other = write_tokenizer(tmp_path / "other", size=FULL + 10)
    vocab = VocabularyMap.build([1, 2, 3], tokenizer_special_ids(tokenizer), FULL)
    save_checkpoint(new_model(TINY, vocab, seed=0), tmp_path / "ckpt", tokenizer, {})
    with pytest.raises(ValueError):
        export_onnx(tmp_path / "ckpt", tmp_path / "onnx", other)
    assert not (tmp_path / "onnx").exists()
