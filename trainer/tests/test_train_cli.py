"""End-to-end runs of the trainer on tiny synthetic data: SFT, OPD, RL, refusals, reruns, determinism."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from conftest import (FULL, demo_shard_rows, packed_row, prompts, sample, tiny_config, write_distill, write_packed,
                      write_request, write_rl)
from hat_trainer.__main__ import main
from hat_trainer.model import load_checkpoint
from hat_trainer.train import RunArgs, response_log_probs, run
from hat_trainer.data import PolicyRecord

TRAINER_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sft_request(tmp_path: Path, fingerprint: str) -> Path:
    shard = write_packed(tmp_path / "shard/train/packed-00000.parquet", demo_shard_rows(rows=3), fingerprint)
    return write_request(tmp_path / "request.json", [shard], fingerprint)


def train_args(request: Path, out: Path, tokenizer_dir: Path, config: Path, *extra: str) -> list[str]:
    return ["train", "--request", str(request), "--out", str(out), "--config", str(config), "--tokenizer-dir", str(tokenizer_dir), *extra]


def on_policy(tmp_path: Path, base_dir: Path, fingerprint: str, kind: str, count: int = 4, **change: Any) -> Path:
    """A request over records the base checkpoint sampled itself (exact rollout log-probs)."""
    records = sample(load_checkpoint(base_dir), prompts(count), length=6, seed=1)
    for r in records:
        r["teacher_log_probs"] = [lp - 0.5 for lp in r["rollout_log_probs"]]   # a teacher the student can reach
    for i, r in enumerate(records):
        r["advantage"] = 1.0 if i % 2 == 0 else -1.0
    if change:
        change.pop("edit")(records)
    writer = write_distill if kind == "opd" else write_rl
    path = writer(tmp_path / f"{kind}/part-00000.parquet", records, fingerprint)
    return write_request(tmp_path / "request.json", [path], fingerprint, handoff=kind, policyVersion=2, datasetPolicyVersion=1)


# ------------------------------------------------------------------ SFT

def test_sft_puts_loss_on_exactly_the_shard_mask(tmp_path: Path, sft_request: Path, tokenizer_dir: Path) -> None:
    # One step over every sample (batchTokens above the shard's size): the recorded loss positions must be the mask.
    config = tiny_config(tmp_path / "c.json", maxSteps=1, batchTokens=100_000)
    outcome = run(RunArgs(str(sft_request), tmp_path / "out", str(config), tokenizer_dir=str(tokenizer_dir)), record_positions=True)
    uri = (tmp_path / "shard/train/packed-00000.parquet").resolve().as_uri()
    table = pq.read_table(tmp_path / "shard/train/packed-00000.parquet")
    expected = {(uri, row, pos) for row, mask in enumerate(table.column("loss_mask").to_pylist()) for pos, m in enumerate(mask) if m}
    assert len(outcome.loss_positions) == len(set(outcome.loss_positions))
    assert set(outcome.loss_positions) == expected
    result = json.loads((tmp_path / "out/result.json").read_text())
    assert result["tokensTrained"] == len(expected) == sum(table.column("num_trained").to_pylist())
    assert result["objective"] == "sft" and result["policyVersion"] == 1 and result["onnx"]["maxAbsLogitDiff"] < 1e-3
    metadata = json.loads((tmp_path / "out/hf/hat_checkpoint.json").read_text())
    assert metadata["policy_version"] == 1 and metadata["request"]["sha256"] == result["requestSha256"]
    assert metadata["trainer"]["config_hash"] == result["configHash"] and metadata["objective"] == "sft"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["hf", "onnx", "result.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp")]


def test_sft_loss_decreases_on_repeated_data(tmp_path: Path, fingerprint: str, tokenizer_dir: Path) -> None:
    rows = demo_shard_rows(rows=1) * 2
    shard = write_packed(tmp_path / "packed.parquet", rows, fingerprint)
    request = write_request(tmp_path / "request.json", [shard], fingerprint)
    config = tiny_config(tmp_path / "c.json", maxSteps=8, learningRate=2e-2)
    result = run(RunArgs(str(request), tmp_path / "out", str(config), tokenizer_dir=str(tokenizer_dir))).result
    losses = [p["loss"] for p in result["lossCurve"]]
    assert losses[-1] < 0.7 * losses[0]


def test_same_seed_same_weights_and_idempotent_rerun(tmp_path: Path, sft_request: Path, tokenizer_dir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config = tiny_config(tmp_path / "c.json")
    assert main(train_args(sft_request, tmp_path / "a", tokenizer_dir, config)) == 0
    assert main(train_args(sft_request, tmp_path / "b", tokenizer_dir, config)) == 0
    a, b = load_file(tmp_path / "a/hf/model.safetensors"), load_file(tmp_path / "b/hf/model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert main(train_args(sft_request, tmp_path / "c", tokenizer_dir, config, "--seed", "1")) == 0
    c = load_file(tmp_path / "c/hf/model.safetensors")
    assert not all(torch.equal(a[k], c[k]) for k in a)

    before = (tmp_path / "a/result.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(train_args(sft_request, tmp_path / "a", tokenizer_dir, config)) == 0
    captured = capsys.readouterr()
    assert "already holds" in captured.err and '"step"' not in captured.err
    assert json.loads(captured.out) == json.loads((tmp_path / "a/result.json").read_text())
    assert (tmp_path / "a/result.json").stat().st_mtime_ns == before
    # Another config into the same --out: refused, the earlier result kept.
    assert main(train_args(sft_request, tmp_path / "a", tokenizer_dir, config, "--max-steps", "2")) == 2
    assert "[OUT_NOT_EMPTY]" in capsys.readouterr().err


def test_cli_process_progress_lines_and_marker(tmp_path: Path, sft_request: Path, tokenizer_dir: Path) -> None:
    config = tiny_config(tmp_path / "c.json", maxSteps=2)
    env = {**os.environ, "PYTHONPATH": str(TRAINER_ROOT)}
    done = subprocess.run([sys.executable, "-m", "hat_trainer", *train_args(sft_request, tmp_path / "out", tokenizer_dir, config,
                           "--register-marker")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    steps = [json.loads(line) for line in lines if line.startswith("{")]
    assert [s["step"] for s in steps] == [1, 2] and {"loss", "tokens", "tokensPerSecond", "elapsed"} <= steps[0].keys()
    assert lines[-1].startswith("hat-trainer: sft 2 steps")
    result = json.loads(done.stdout)
    marker = json.loads((tmp_path / "checkpoint.json").read_text())
    assert marker["modelDir"] == result["onnxDir"] == str(tmp_path / "out/onnx")
    assert marker["checkpointUri"] == (tmp_path / "out/hf").as_uri() and marker["policyVersion"] == 1
    assert marker["simulated"] is False and marker["registeredBy"] == "hat-trainer" and marker["runId"] == "run-test"


def test_a_crash_is_exit_1_with_the_traceback_and_no_output(tmp_path: Path, sft_request: Path, tokenizer_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setattr("hat_trainer.export_onnx.export_onnx", explode)
    assert main(train_args(sft_request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json", maxSteps=1))) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: out of memory (simulated)" in err and "Traceback" in err
    assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


# ------------------------------------------------------------------ OPD and RL

def test_opd_proves_tito_and_lowers_reverse_kl(tmp_path: Path, base_dir: Path, fingerprint: str, tokenizer_dir: Path) -> None:
    request = on_policy(tmp_path, base_dir, fingerprint, "opd")
    config = tiny_config(tmp_path / "c.json", maxSteps=5, learningRate=1e-2)
    result = run(RunArgs(str(request), tmp_path / "out", str(config), base=str(base_dir), tokenizer_dir=str(tokenizer_dir))).result
    assert result["objective"] == "opd" and result["policyVersion"] == 2 and result["basePolicyVersion"] == 1
    assert result["titoProof"]["maxAbsDiff"] <= 1e-5 and result["titoProof"]["tokens"] == 4 * 6
    assert result["reverseKl"]["before"] == pytest.approx(0.5, abs=1e-5)
    assert result["reverseKl"]["after"] < result["reverseKl"]["before"]
    assert result["vocabMapSha256"] == load_checkpoint(base_dir).vocab.sha256()   # on-policy data never extends the map
    assert json.loads((tmp_path / "out/hf/hat_checkpoint.json").read_text())["policy_version"] == 2


def test_drifted_rollout_log_probs_are_refused(tmp_path: Path, base_dir: Path, fingerprint: str, tokenizer_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def drift(records: list[dict]) -> None:
        records[2]["rollout_log_probs"] = [lp + 0.01 for lp in records[2]["rollout_log_probs"]]

    request = on_policy(tmp_path, base_dir, fingerprint, "rl", edit=drift)
    code = main(train_args(request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json"), "--base", str(base_dir)))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("[TOKEN_DRIFT]") and "row 2 field rollout_log_probs" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("aggregation, kl", [("token", 0.0), ("sequence", 0.05)])
def test_rl_raises_positive_advantage_sequences(tmp_path: Path, base_dir: Path, fingerprint: str, tokenizer_dir: Path,
                                               aggregation: str, kl: float) -> None:
    request = on_policy(tmp_path, base_dir, fingerprint, "rl")
    config = tiny_config(tmp_path / "c.json", maxSteps=4, learningRate=1e-2, aggregation=aggregation, klCoef=kl)
    outcome = run(RunArgs(str(request), tmp_path / "out", str(config), base=str(base_dir), tokenizer_dir=str(tokenizer_dir)))
    assert outcome.result["titoProof"]["maxAbsDiff"] <= 1e-5 and outcome.result["config"]["aggregation"] == aggregation
    base = load_checkpoint(base_dir)
    table = pq.read_table(tmp_path / "rl/part-00000.parquet").to_pylist()
    with torch.no_grad():
        for row, r in enumerate(table):
            record = PolicyRecord("x", row, np.array(r["tokens"][:r["prompt_length"]]), np.array(r["tokens"][r["prompt_length"]:]),
                                  np.array(r["loss_mask"]), np.array(r["rollout_log_probs"]))
            gain = float(response_log_probs(outcome.model, record, "cpu").sum() - response_log_probs(base, record, "cpu").sum())
            assert gain > 0 if r["advantage"] > 0 else gain < 0, (row, gain)


# ------------------------------------------------------------------ refusals

def _opd_other_fingerprint(records: list[dict]) -> None:
    records[1]["tokenizer_fingerprint"] = "0" * 64


def _opd_newer_policy(records: list[dict]) -> None:
    records[3]["policy_version"] = 2


def _opd_unknown_target(records: list[dict]) -> None:
    records[1]["response_ids"][2] = 150     # an id outside the base's map: the base cannot have sampled it


def _opd_short_mask(records: list[dict]) -> None:
    records[0]["loss_mask"] = records[0]["loss_mask"][:-1]


@pytest.mark.parametrize("edit, code, place", [
    (_opd_other_fingerprint, "TOKENIZER_MISMATCH", "row 1 field tokenizer_fingerprint"),
    (_opd_newer_policy, "POLICY_VERSION_MISMATCH", "row 3 field policy_version"),
    (_opd_unknown_target, "VOCABULARY_TOO_SMALL", "row 1 field response_ids"),
    (_opd_short_mask, "BAD_RECORD", "row 0 field loss_mask"),
])
def test_bad_on_policy_records_are_refused(tmp_path: Path, base_dir: Path, fingerprint: str, tokenizer_dir: Path,
                                          capsys: pytest.CaptureFixture[str], edit, code: str, place: str) -> None:
    request = on_policy(tmp_path, base_dir, fingerprint, "opd", edit=edit)
    uri = (tmp_path / "opd/part-00000.parquet").resolve().as_uri()
    rc = main(train_args(request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json"), "--base", str(base_dir)))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"[{code}] {uri} {place}") and "\n" not in err, err
    assert not (tmp_path / "out").exists()


def _sft_changed(tmp: Path, request: Path) -> None:
    shard = tmp / "shard/train/packed-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:-1] + b"\0")


def _sft_other_tokenizer(tmp: Path, request: Path) -> None:
    data = json.loads(request.read_text())
    data["tokenizer"]["fingerprint"] = "f" * 64
    request.write_text(json.dumps(data))


def _sft_id_outside_vocabulary(tmp: Path, request: Path) -> None:
    rows = demo_shard_rows(rows=2)
    rows[1] = packed_row([([1, 2, FULL, 4], [0, 0, 1, 1])], 48)
    _rewrite_shard(tmp, request, rows)


def _sft_mask_length(tmp: Path, request: Path) -> None:
    rows = demo_shard_rows(rows=2)
    rows[0]["loss_mask"] = rows[0]["loss_mask"][:-2]
    _rewrite_shard(tmp, request, rows)


def _rewrite_shard(tmp: Path, request: Path, rows: list[dict]) -> None:
    fingerprint = json.loads(request.read_text())["tokenizer"]["fingerprint"]
    write_request(request, [write_packed(tmp / "shard/train/packed-00000.parquet", rows, fingerprint)], fingerprint)


@pytest.mark.parametrize("edit, code, place", [
    (_sft_changed, "OBJECT_CHANGED", "{shard} field sha256"),
    (_sft_other_tokenizer, "TOKENIZER_MISMATCH", "{request} field tokenizer.fingerprint"),
    (_sft_id_outside_vocabulary, "VOCABULARY_TOO_SMALL", "{shard} row 1 field input_ids"),
    (_sft_mask_length, "BAD_RECORD", "{shard} row 0 field loss_mask"),
])
def test_bad_sft_input_is_refused(tmp_path: Path, sft_request: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture[str],
                                  edit, code: str, place: str) -> None:
    edit(tmp_path, sft_request)
    rc = main(train_args(sft_request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json")))
    err = capsys.readouterr().err.strip()
    names = {"shard": (tmp_path / "shard/train/packed-00000.parquet").resolve().as_uri(), "request": sft_request.resolve().as_uri()}
    assert rc == 2 and err.startswith(f"[{code}] {place.format(**names)}") and "\n" not in err, err
    assert not (tmp_path / "out").exists()


def test_on_policy_data_needs_its_base(tmp_path: Path, base_dir: Path, fingerprint: str, tokenizer_dir: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    request = on_policy(tmp_path, base_dir, fingerprint, "rl", count=2)
    assert main(train_args(request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json"))) == 2
    assert capsys.readouterr().err.startswith("[BASE_REQUIRED]")
    # A base of another policy version than the request's datasets were sampled by.
    data = json.loads(request.read_text())
    data["datasets"][0]["policyVersion"] = 5
    request.write_text(json.dumps(data))
    assert main(train_args(request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json"), "--base", str(base_dir))) == 2
    assert "[POLICY_VERSION_MISMATCH]" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_sft_on_a_base_extends_its_vocabulary_and_bumps_the_version(tmp_path: Path, base_dir: Path, fingerprint: str,
                                                                   tokenizer_dir: Path) -> None:
    rows = [packed_row([([5, 6, 150, 151, 7], [0, 0, 1, 1, 1])], 16)]   # 150, 151: ids the base has no row for
    request = write_request(tmp_path / "request.json", [write_packed(tmp_path / "p.parquet", rows, fingerprint)], fingerprint)
    config = tiny_config(tmp_path / "c.json", maxSteps=1)
    outcome = run(RunArgs(str(request), tmp_path / "out", str(config), base=str(base_dir), tokenizer_dir=str(tokenizer_dir)))
    assert outcome.model.vocab.contains(150) and outcome.model.vocab.contains(151)
    assert outcome.model.vocab.full_ids[:len(load_checkpoint(base_dir).vocab)] == load_checkpoint(base_dir).vocab.full_ids
    assert outcome.result["policyVersion"] == 2 and outcome.result["baseCheckpoint"] == str(base_dir.resolve())


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_device_is_a_clear_refusal(tmp_path: Path, sft_request: Path, tokenizer_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(train_args(sft_request, tmp_path / "out", tokenizer_dir, tiny_config(tmp_path / "c.json"), "--device", "cuda")) == 2
    assert capsys.readouterr().err.startswith("[DEVICE_UNAVAILABLE]")
