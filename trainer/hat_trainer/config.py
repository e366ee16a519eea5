"""Trainer configuration: defaults < the request's trainer.config < --config file < request.hyperparameters < CLI flags.

Keys are camelCase, the spelling of the Node side's request.hyperparameters, so a request can override any
top-level key by naming it. The config hash covers the EFFECTIVE config (after every override): two runs
with the same hash and the same request train the same thing.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "maxSteps": 20,
    "maxSeconds": 3600.0,     # wall-clock budget of the update loop; hitting it stops early (and ends determinism)
    "learningRate": 1e-3,     # AdamW, the peak rate
    "warmupSteps": 0,         # linear warmup from 0 to learningRate over this many steps
    "lrSchedule": "constant", # constant | cosine (decays to 10% of learningRate at maxSteps)
    "weightDecay": 0.0,
    "adamBetas": [0.9, 0.95],
    "gradClip": 1.0,          # max global grad norm; 0 = off
    "batchTokens": 16384,     # a step takes samples (in order) until the next would pass this many tokens
    "clipEpsilon": 0.2,       # PPO ratio clip for OPD and RL: r in [1-eps, 1+eps]
    "aggregation": "token",   # RL: 'token' = mean over all trained tokens of a step; 'sequence' = mean of per-sequence means
    "klCoef": 0.0,            # RL: k3 KL to the frozen base (reference) per trained token; 0 = off
    "titoTolerance": 1e-3,
    # Attention kernel for training: eager | sdpa | auto. Measured on 2 CPU cores (4x128 model, fwd+bwd of one
    # sample): eager 0.04 s vs sdpa 0.12 s at 256 tokens, 0.47 vs 1.23 s at 1k, but 7.5 vs 1.5 s at 4.5k (eager
    # materialises T x T scores). auto: on CPU sdpa when the median sample has >= 2048 tokens, else eager;
    # on GPU the model's own choice.
    "attention": "auto",    # OPD/RL: max |recomputed - rollout_log_probs| accepted before training
    "vocabulary": {"includeIdsFrom": []},  # extra files of token ids (JSON list or one per line) kept in a new map
    "model": {                # shape of a NEW model (no --base); names are ModelShape's fields in camelCase
        "layers": 4, "hidden": 128, "heads": 4, "kvHeads": 2, "headDim": 32, "intermediate": 384,
        "ropeTheta": 1_000_000.0, "maxPosition": 32768, "rmsNormEps": 1e-6, "tieEmbeddings": True,
    },
}


class ConfigError(ValueError):
    pass


def load_config_file(path: str | Path) -> dict[str, Any]:
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith((".yaml", ".yml")):
        import yaml  # only needed for YAML configs

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of keys")
    return data


def _merge(base: dict[str, Any], over: dict[str, Any], where: str) -> None:
    for key, value in over.items():
        if key not in base:
            raise ConfigError(f"{where}: unknown key '{key}' (known: {', '.join(sorted(base))})")
        if isinstance(base[key], dict) and isinstance(value, dict):
            _merge(base[key], value, f"{where}.{key}")
        else:
            base[key] = value


def effective_config(
    file_config: dict[str, Any] | None,
    hyperparameters: dict[str, Any] | None,
    cli: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns (config, provenance): provenance says where each overridden key came from."""
    config = copy.deepcopy(DEFAULTS)
    _merge(config, file_config or {}, "config")
    provenance: dict[str, Any] = {"fromConfigFile": sorted((file_config or {}).keys())}
    # Request hyperparameters override the keys they name; keys the trainer does not know are reported, not fatal
    # (the Node side may send hyperparameters meant for other trainers).
    known = {k: v for k, v in (hyperparameters or {}).items() if k in config}
    provenance["fromRequest"] = sorted(known)
    provenance["ignoredFromRequest"] = sorted(set(hyperparameters or {}) - set(known))
    _merge(config, known, "request.hyperparameters")
    given = {k: v for k, v in (cli or {}).items() if v is not None}
    _merge(config, given, "command line")
    provenance["fromCommandLine"] = sorted(given)
    if config["attention"] not in ("auto", "eager", "sdpa"):
        raise ConfigError(f"attention must be 'auto', 'eager' or 'sdpa', not {config['attention']!r}")
    if config["lrSchedule"] not in ("constant", "cosine"):
        raise ConfigError(f"lrSchedule must be 'constant' or 'cosine', not {config['lrSchedule']!r}")
    if int(config["warmupSteps"]) < 0:
        raise ConfigError(f"warmupSteps must be 0 or more, not {config['warmupSteps']!r}")
    if config["aggregation"] not in ("token", "sequence"):
        raise ConfigError(f"aggregation must be 'token' or 'sequence', not {config['aggregation']!r}")
    return config, provenance


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def shape_kwargs(model_config: dict[str, Any]) -> dict[str, Any]:
    """camelCase model keys -> ModelShape's field names."""
    return {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): v for k, v in model_config.items()}
