"""Synthetic fixtures for the trainer-core tests: a tiny tokenizer, tiny parquet objects with the demo's
schemas (packed SFT shard, distill, rl), requests pinning them, and a tiny base checkpoint that samples
on-policy records. Nothing here reads the pipeline's real outputs."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hat_trainer.model import HatModel, ModelShape, VocabularyMap, new_model, save_checkpoint
from hat_trainer.tokenizer_check import tokenizer_info

FULL = 300                # ids of the test tokenizer: t0..t296 + 3 added tokens
PAD = FULL - 3            # <|endoftext|>
TINY_MODEL = {"layers": 1, "hidden": 32, "heads": 2, "kvHeads": 1, "headDim": 16, "intermediate": 64}
INT_LIST = pa.list_(pa.field("element", pa.int32(), nullable=False))
FLOAT_LIST = pa.list_(pa.field("element", pa.float32(), nullable=False))


def write_tokenizer(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {f"t{i}": i for i in range(FULL - 3)}
    added = [{"id": PAD, "content": "<|endoftext|>", "special": True},
             {"id": FULL - 2, "content": "<|im_start|>", "special": True},
             {"id": FULL - 1, "content": "<|im_end|>", "special": True}]
    (directory / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": []}, "added_tokens": added}))
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": "{{ messages }}"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="session")
def fingerprint(tokenizer_dir: Path) -> str:
    return tokenizer_info(tokenizer_dir).fingerprint


def tiny_config(path: Path, **overrides: Any) -> Path:
    config = {"model": TINY_MODEL, "maxSteps": 3, "learningRate": 1e-2, "batchTokens": 4096, "seed": 0, **overrides}
    path.write_text(json.dumps(config))
    return path


# ------------------------------------------------------------------ packed SFT shards

def packed_row(samples: list[tuple[list[int], list[int]]], length: int) -> dict[str, Any]:
    """samples: (ids, loss_mask) pairs packed into one row of `length`, padded with PAD (a last segment)."""
    ids, mask, positions, cu = [], [], [], [0]
    for sample_ids, sample_mask in samples:
        ids += sample_ids
        mask += sample_mask
        positions += list(range(len(sample_ids)))
        cu.append(len(ids))
    used = len(ids)
    if used < length:
        ids += [PAD] * (length - used)
        mask += [0] * (length - used)
        positions += list(range(length - used))
        cu.append(length)
    return {"input_ids": ids, "labels": [t if m else -100 for t, m in zip(ids, mask)], "loss_mask": mask,
            "position_ids": positions, "cu_seqlens": cu, "source_ids": [f"traj-{i}" for i in range(len(samples))],
            "num_samples": len(samples), "num_tokens": used, "num_trained": sum(mask)}


def sft_sample(rng: np.random.Generator, length: int, trained: int) -> tuple[list[int], list[int]]:
    """A prompt of random ids, then `trained` assistant tokens with loss (as the shard marks them)."""
    ids = rng.integers(0, 96, size=length).tolist()
    mask = [0] * (length - trained) + [1] * trained
    return ids, mask


def write_packed(path: Path, rows: list[dict[str, Any]], fingerprint: str, split: str = "train", length: int = 48) -> Path:
    schema = pa.schema([("input_ids", INT_LIST), ("labels", INT_LIST), ("loss_mask", INT_LIST), ("position_ids", INT_LIST),
                        ("cu_seqlens", INT_LIST), ("source_ids", pa.list_(pa.field("element", pa.string(), nullable=False))),
                        ("num_samples", pa.int32()), ("num_tokens", pa.int32()), ("num_trained", pa.int32())],
                       metadata={"hat.tokenizer_fingerprint": fingerprint, "hat.pad_token_id": str(PAD),
                                 "hat.sequence_length": str(length), "hat.split": split, "hat.schema_version": "1"})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def demo_shard_rows(seed: int = 0, rows: int = 3, length: int = 48) -> list[dict[str, Any]]:
    """Rows of two samples each (the second sample's trained span ends the sample) plus padding."""
    rng = np.random.default_rng(seed)
    return [packed_row([sft_sample(rng, 20, 6), sft_sample(rng, 16, 5)], length) for _ in range(rows)]


# ------------------------------------------------------------------ on-policy records

def write_distill(path: Path, records: list[dict[str, Any]], fingerprint: str) -> Path:
    rows = []
    for r in records:
        rows.append({"prompt_ids": r["prompt_ids"], "response_ids": r["response_ids"], "loss_mask": r["loss_mask"],
                     "rollout_log_probs": r["rollout_log_probs"], "teacher_log_probs": r["teacher_log_probs"],
                     "reverse_kl": [a - b for a, b in zip(r["rollout_log_probs"], r["teacher_log_probs"])],
                     "prompt_length": len(r["prompt_ids"]), "response_length": len(r["response_ids"]),
                     "student_logprob_temperature": 1.0, "teacher_logprob_temperature": 1.0,
                     "tokenizer_fingerprint": r.get("tokenizer_fingerprint", fingerprint),
                     "policy_version": r.get("policy_version", 1), "dummy_weights": False})
    schema = pa.schema([("prompt_ids", INT_LIST), ("response_ids", INT_LIST), ("loss_mask", INT_LIST),
                        ("rollout_log_probs", FLOAT_LIST), ("teacher_log_probs", FLOAT_LIST), ("reverse_kl", FLOAT_LIST),
                        ("prompt_length", pa.int32()), ("response_length", pa.int32()),
                        ("student_logprob_temperature", pa.float64()), ("teacher_logprob_temperature", pa.float64()),
                        ("tokenizer_fingerprint", pa.string()), ("policy_version", pa.int32()), ("dummy_weights", pa.bool_())],
                       metadata={"tokenizer_fingerprint": fingerprint, "schema_version": "1"})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_rl(path: Path, records: list[dict[str, Any]], fingerprint: str) -> Path:
    rows = [{"tokens": r["prompt_ids"] + r["response_ids"], "prompt_length": len(r["prompt_ids"]),
             "response_length": len(r["response_ids"]), "loss_mask": r["loss_mask"], "rollout_log_probs": r["rollout_log_probs"],
             "reward": r["advantage"], "advantage": r["advantage"], "policy_version": r.get("policy_version", 1),
             "token_exact": True} for r in records]
    policy = {"logprobDistribution": {"engine": "test", "kind": "raw", "temperature": 1}, "tokenExact": True}
    schema = pa.schema([("tokens", INT_LIST), ("prompt_length", pa.int32()), ("response_length", pa.int32()),
                        ("loss_mask", INT_LIST), ("rollout_log_probs", FLOAT_LIST), ("reward", pa.float64()),
                        ("advantage", pa.float64()), ("policy_version", pa.int32()), ("token_exact", pa.bool_())],
                       metadata={"tokenizer_fingerprint": fingerprint, "policy": json.dumps(policy), "schema_version": "1"})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_request(path: Path, objects: list[Path], fingerprint: str | None, extra_objects: list[Path] = (), **fields: Any) -> Path:
    """A request.json pinning every object's bytes and sha256, as a handoff writes it."""
    def entry(p: Path) -> dict[str, Any]:
        data = p.read_bytes()
        fmt = "parquet" if p.suffix == ".parquet" else "json"
        return {"uri": p.resolve().as_uri(), "format": fmt, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    request = {"schemaVersion": 1, "runId": "run-test", "handoff": fields.pop("handoff", "sft"), "codeVersion": "0.0.0+test",
               "datasets": [{"stage": "test", "objects": [entry(p) for p in [*objects, *extra_objects]],
                             **({"policyVersion": fields.pop("datasetPolicyVersion")} if "datasetPolicyVersion" in fields else {})}],
               "hyperparameters": fields.pop("hyperparameters", {}),
               "checkpoint": {"markerUri": (path.parent / "checkpoint.json").resolve().as_uri()}, **fields}
    if fingerprint is not None:
        request["tokenizer"] = {"name": "test", "fingerprint": fingerprint}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request, indent=2))
    return path


# ------------------------------------------------------------------ a base checkpoint that samples

BASE_IDS = list(range(0, 100))


@pytest.fixture(scope="session")
def base_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    """A tiny policy-version-1 checkpoint whose map holds ids 0..99 and the specials."""
    shape = ModelShape(layers=1, hidden=32, heads=2, kv_heads=1, head_dim=16, intermediate=64)
    vocab = VocabularyMap.build(BASE_IDS, [PAD, FULL - 2, FULL - 1], FULL)
    model = new_model(shape, vocab, seed=11)
    hf = tmp_path_factory.mktemp("base") / "hf"
    save_checkpoint(model, hf, tokenizer_dir, {"policy_version": 1})
    return hf


def sample(model: HatModel, prompts: list[list[int]], length: int, seed: int) -> list[dict[str, Any]]:
    """Samples responses at temperature 1 and keeps their raw log-probs, as an inference engine would."""
    generator = torch.Generator().manual_seed(seed)
    records = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor(prompt)
            for _ in range(length):
                probs = torch.softmax(model.logits(ids[None])[0, -1], dim=-1)
                compact = torch.multinomial(probs, 1, generator=generator)
                ids = torch.cat([ids, model.vocab.to_full(compact)])
            log_probs = model.token_log_probs(ids[None])[0, len(prompt) - 1:]
            records.append({"prompt_ids": prompt, "response_ids": ids[len(prompt):].tolist(),
                            "loss_mask": [1] * length, "rollout_log_probs": log_probs.tolist()})
    return records


def prompts(count: int, seed: int = 5) -> list[list[int]]:
    """Prompts of ids in the base map, one of them with an id the map lacks (read as UNK)."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, 100, size=8).tolist() for _ in range(count)]
    out[0][3] = 250
    return out
