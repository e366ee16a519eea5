"""Parsing the pipeline's parquet objects, refusing malformed records, packed-sample isolation."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from conftest import BASE_IDS, FULL, PAD, demo_shard_rows, packed_row, write_distill, write_packed, write_rl
from hat_trainer.data import load_dataset
from hat_trainer.model import ModelShape, VocabularyMap, new_model
from hat_trainer.request import BadInput
from hat_trainer.train import sft_log_probs


def contents(*paths: Path) -> dict[str, bytes]:
    return {p.resolve().as_uri(): p.read_bytes() for p in paths}


def opd_record(**overrides: object) -> dict:
    record = {"prompt_ids": [1, 2, 3], "response_ids": [4, 5], "loss_mask": [1, 1],
              "rollout_log_probs": [-1.0, -2.0], "teacher_log_probs": [-1.5, -2.5]}
    return {**record, **overrides}


def test_packed_rows_split_into_samples_with_aligned_target_masks(tmp_path: Path, fingerprint: str) -> None:
    rows = demo_shard_rows(rows=3)
    train = write_packed(tmp_path / "train/packed-00000.parquet", rows, fingerprint)
    validation = write_packed(tmp_path / "validation/packed-00000.parquet", [packed_row([([150, 151, 152], [0, 1, 1])], 48)],
                              fingerprint, split="validation")
    dataset = load_dataset(contents(train, validation))
    assert dataset.objective == "sft"
    assert len(dataset.train) == 6  # two samples a row; the padding segment carries no loss and is left out
    assert dataset.trained_objects == [train.resolve().as_uri()] and dataset.ignored_objects == [validation.resolve().as_uri()]
    assert {150, 151, 152, PAD} <= dataset.all_ids  # the validation split still feeds the vocabulary map
    first = dataset.train[0]
    assert (first.row, first.start) == (0, 0)
    assert first.input_ids.tolist() == rows[0]["input_ids"][:20]
    assert first.loss_mask.tolist() == rows[0]["loss_mask"][:20]
    assert dataset.train[1].start == 20 and dataset.train[1].loss_mask.tolist() == rows[0]["loss_mask"][20:36]
    assert (fingerprint in dict(dataset.fingerprints).values())


def test_exports_other_than_the_trained_formats_are_ignored(tmp_path: Path, fingerprint: str) -> None:
    shard = write_packed(tmp_path / "packed.parquet", demo_shard_rows(rows=1), fingerprint)
    verl = tmp_path / "verl-00000.parquet"
    pq.write_table(pa.table({"messages": ["[]"], "tools": ["[]"]}), verl)
    dataset = load_dataset(contents(shard, verl))
    assert dataset.ignored_objects == [verl.resolve().as_uri()]


@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(loss_mask=r["loss_mask"][:-1]), "loss_mask"),
    (lambda r: r.update(labels=[5] * len(r["labels"])), "labels"),
    (lambda r: r.update(cu_seqlens=[0, 20, 40]), "cu_seqlens"),
    (lambda r: r.update(position_ids=list(range(len(r["input_ids"])))), "position_ids"),
    (lambda r: r.update(num_trained=1), "num_trained"),
    (lambda r: r.update(loss_mask=[1] + r["loss_mask"][1:], labels=[r["input_ids"][0]] + r["labels"][1:], num_trained=r["num_trained"] + 1), "loss_mask"),
])
def test_malformed_packed_rows_are_refused(tmp_path: Path, fingerprint: str, change, field: str) -> None:
    rows = demo_shard_rows(rows=2)
    change(rows[1])
    shard = write_packed(tmp_path / "packed.parquet", rows, fingerprint)
    with pytest.raises(BadInput) as refused:
        load_dataset(contents(shard))
    message = str(refused.value)
    assert message.startswith("[BAD_RECORD]") and f"{shard.resolve().as_uri()} row 1 field {field}" in message


@pytest.mark.parametrize("record, field", [
    (opd_record(loss_mask=[1, 1, 1]), "loss_mask"),
    (opd_record(teacher_log_probs=[-1.0]), "teacher_log_probs"),
    (opd_record(rollout_log_probs=[float("nan"), -1.0]), "rollout_log_probs"),
    (opd_record(prompt_ids=[]), "prompt_ids"),
])
def test_malformed_distill_records_are_refused(tmp_path: Path, fingerprint: str, record: dict, field: str) -> None:
    path = write_distill(tmp_path / "part-00000.parquet", [opd_record(), record], fingerprint)
    with pytest.raises(BadInput, match=rf"^\[BAD_RECORD\] .* row 1 field {field}"):
        load_dataset(contents(path))


def test_rl_records_split_tokens_into_prompt_and_response(tmp_path: Path, fingerprint: str) -> None:
    path = write_rl(tmp_path / "rl.parquet", [{**opd_record(loss_mask=[1, 0]), "advantage": 0.5}], fingerprint)
    dataset = load_dataset(contents(path))
    record = dataset.train[0]
    assert dataset.objective == "rl" and record.prompt_ids.tolist() == [1, 2, 3] and record.response_ids.tolist() == [4, 5]
    assert record.advantage == 0.5 and record.n_trained == 1 and record.policy_version == 1
    bad = write_rl(tmp_path / "bad.parquet", [{**opd_record(loss_mask=[1]), "advantage": 0.5}], fingerprint)
    with pytest.raises(BadInput, match=r"^\[BAD_RECORD\] .* row 0 field loss_mask"):
        load_dataset(contents(bad))


def test_one_request_trains_one_objective(tmp_path: Path, fingerprint: str) -> None:
    shard = write_packed(tmp_path / "packed.parquet", demo_shard_rows(rows=1), fingerprint)
    distill = write_distill(tmp_path / "distill.parquet", [opd_record()], fingerprint)
    with pytest.raises(BadInput, match=r"^\[MIXED_OBJECTIVES\]"):
        load_dataset(contents(shard, distill))


def test_no_attention_across_packed_samples(tmp_path: Path, fingerprint: str) -> None:
    """Per-sample log-probs do not see the other samples of the row, and equal the whole row computed with
    block-diagonal attention (transformers' packed-sequence masking from restarting position_ids)."""
    rows = demo_shard_rows(rows=1)
    changed = [dict(r) for r in rows]
    changed[0]["input_ids"] = [(t + 7) % 96 for t in rows[0]["input_ids"][:20]] + rows[0]["input_ids"][20:]
    changed[0]["labels"] = [t if m else -100 for t, m in zip(changed[0]["input_ids"], rows[0]["loss_mask"])]
    a = load_dataset(contents(write_packed(tmp_path / "a.parquet", rows, fingerprint)))
    b = load_dataset(contents(write_packed(tmp_path / "b.parquet", changed, fingerprint)))
    model = new_model(ModelShape(layers=1, hidden=32, heads=2, kv_heads=1, head_dim=16, intermediate=64),
                      VocabularyMap.build(BASE_IDS, [PAD], FULL), seed=0)
    with torch.no_grad():
        first_a, first_b = sft_log_probs(model, a.train[0], "cpu"), sft_log_probs(model, b.train[0], "cpu")
        second_a, second_b = sft_log_probs(model, a.train[1], "cpu"), sft_log_probs(model, b.train[1], "cpu")
        assert not torch.equal(first_a, first_b)          # sample 1 changed ...
        assert torch.equal(second_a, second_b)            # ... sample 2 did not notice
        row = torch.tensor(rows[0]["input_ids"])[None]
        block_diagonal = model.token_log_probs(row, position_ids=torch.tensor(rows[0]["position_ids"])[None])[0]
    targets = np.flatnonzero(rows[0]["loss_mask"][20:36]) + 20
    assert torch.allclose(block_diagonal[targets - 1], second_a, atol=1e-5)
