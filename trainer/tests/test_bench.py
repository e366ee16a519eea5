"""hat_trainer.bench on its smallest case, in-process: every figure present, ratios positive and finite.

A tiny shape, a 300-id tokenizer and one step a case (seconds_per_case 0): seconds. No timing thresholds
(benchmarks print ratios; tests never assert on time).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from hat_trainer.bench import Settings, format_table, main, parser, run_bench
from hat_trainer.model import ModelShape

TINY = Settings(
    shape=ModelShape(layers=1, hidden=32, heads=2, kv_heads=1, head_dim=16, intermediate=64),
    vocab_rows=60, seconds_per_case=0.0, sft_tokens=64, sft_samples=2,
    opd_prompt=6, opd_response=4, opd_batch=2, rl_prompt=40, rl_response=4, rl_batch=2,
)


def positive(value: float) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_smallest_case_reports_every_figure(tokenizer_dir: Path) -> None:
    deterministic = torch.are_deterministic_algorithms_enabled()
    result = run_bench(TINY, tokenizer_dir)
    assert torch.are_deterministic_algorithms_enabled() == deterministic   # the trainer's settings are restored

    assert result["vocabulary"] == {"remappedRows": 60, "fullRows": 300}
    assert set(result["objectives"]) == {"sft", "opd", "rl"}
    for objective, figures in result["objectives"].items():
        for name in ("remapped", "full"):
            case = figures[name]
            assert positive(case["tokensPerSecond"]), (objective, name, case)
            assert case["steps"] >= 1 and case["measuredSteps"] >= 1 and case["tokens"] > 0
            assert math.isfinite(case["finalLoss"])
        assert positive(figures["ratio"])
        assert figures["ratio"] == figures["remapped"]["tokensPerSecond"] / figures["full"]["tokensPerSecond"]
    # Tokens of one step: 1 SFT sample, 2 OPD records, 2 RL records.
    assert result["objectives"]["sft"]["full"]["tokens"] == 64
    assert result["objectives"]["opd"]["remapped"]["tokens"] == 2 * (6 + 4)
    assert result["objectives"]["rl"]["full"]["tokens"] == 2 * (40 + 4)

    attention = result["attention"]
    assert attention["auto"] == "eager" and attention["sequenceTokens"] == 64   # short samples: the trainer picks eager
    assert positive(attention["eager"]["tokensPerSecond"]) and positive(attention["sdpa"]["tokensPerSecond"])
    assert attention["sdpa"]["attention"] == "sdpa" and positive(attention["ratioSdpaOverEager"])

    onnx, tito = result["onnx"], result["tito"]
    assert positive(onnx["exportSeconds"]) and onnx["modelBytes"] > 0
    assert 0.0 <= onnx["maxAbsLogitDiff"] < 1e-3                      # export_onnx's own check passed
    assert tito["tokens"] == 4 and tito["promptTokens"] == 40
    assert 0.0 <= tito["maxAbsDiff"] < 1e-4 and tito["meanAbsDiff"] <= tito["maxAbsDiff"]

    table = format_table(result)
    for text in ("remapped/full", "sft ", "opd ", "rl ", "sdpa/eager", "onnx export", "max |logit diff|",
                 "token-in-token-out", "60 rows vs full 300 rows"):
        assert text in table
    assert json.loads(json.dumps(result)) == result   # --json prints it as one object


def test_command_line(tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The CLI's own settings: defaults are the demo shapes, --quick shortens, --seq-len scales SFT and RL.
    assert Settings.for_args(None, None, False) == Settings()
    quick = Settings.for_args(None, None, True)
    assert quick.sft_tokens == 256 and quick.rl_prompt == 273 and quick.seconds_per_case == 0.5
    assert Settings.for_args(3.0, 4500, False) == Settings(seconds_per_case=3.0)
    args = parser().parse_args(["--seconds-per-case", "2", "--seq-len", "128", "--json"])
    assert args.seconds_per_case == 2.0 and args.seq_len == 128 and args.json
    assert main(["--seq-len", "4", "--tokenizer-dir", str(tokenizer_dir)]) == 2
    assert "at least 16 tokens" in capsys.readouterr().err
