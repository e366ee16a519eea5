"""Reads the parquet objects of a request into training records, refusing malformed ones.

Formats (as the Node pipeline writes them; verified on the demo's files):
- packed SFT shard: input_ids, labels, loss_mask, position_ids (lists of the sequence length), cu_seqlens.
  loss_mask is aligned with input_ids as the TARGET mask: loss_mask[t] = 1 means token t is predicted from
  tokens < t of its sample (labels = input_ids there, -100 elsewhere, unshifted).
- distill (OPD): prompt_ids, response_ids; loss_mask, rollout_log_probs, teacher_log_probs over the response.
- rl: tokens = prompt + response, prompt_length, response_length; loss_mask, rollout_log_probs over the
  response (env/tool tokens inside it have loss_mask 0); advantage per sequence.
Other parquet objects (verl-sft exports) and non-parquet objects are not trained on.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .request import BadInput, where

PACKED_COLUMNS = ("input_ids", "loss_mask", "cu_seqlens")
OPD_COLUMNS = ("prompt_ids", "response_ids", "loss_mask", "rollout_log_probs", "teacher_log_probs")
RL_COLUMNS = ("tokens", "prompt_length", "response_length", "loss_mask", "rollout_log_probs", "advantage")


@dataclass
class SftSample:
    """One sample (cu_seqlens segment) of a packed row; trained on its own, positions from 0."""

    uri: str
    row: int
    start: int                 # offset of the sample in its packed row
    input_ids: np.ndarray      # int64 [L]
    loss_mask: np.ndarray      # int64 [L], 1 = this token is a target

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def n_trained(self) -> int:
        return int(self.loss_mask.sum())


@dataclass
class PolicyRecord:
    """One on-policy sequence (OPD or RL): response tokens sampled after prompt tokens."""

    uri: str
    row: int
    prompt_ids: np.ndarray
    response_ids: np.ndarray
    loss_mask: np.ndarray               # over the response
    rollout_log_probs: np.ndarray       # over the response: the sampling policy's raw log-probs
    teacher_log_probs: np.ndarray | None = None   # OPD
    advantage: float | None = None                # RL
    policy_version: int | None = None

    @property
    def input_ids(self) -> np.ndarray:
        return np.concatenate([self.prompt_ids, self.response_ids])

    @property
    def n_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def n_trained(self) -> int:
        return int(self.loss_mask.sum())


@dataclass
class Dataset:
    objective: str                                   # sft | opd | rl
    train: list                                      # SftSample or PolicyRecord
    all_ids: set[int] = field(default_factory=set)   # every token id of every trainable object (all splits)
    fingerprints: list[tuple[str, str]] = field(default_factory=list)  # (where, fingerprint) to check
    trained_objects: list[str] = field(default_factory=list)
    ignored_objects: list[str] = field(default_factory=list)


class _Columns:
    """List columns of a table as (offsets, values) numpy pairs: rows are slices, no Python lists."""

    def __init__(self, table: pa.Table, uri: str) -> None:
        self.table, self.uri, self._cache = table, uri, {}

    def lists(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._cache:
            column = self.table.column(name).combine_chunks()
            if isinstance(column, pa.ChunkedArray):  # an empty table
                column = pa.array([], type=column.type)
            values = column.values.to_numpy(zero_copy_only=False)
            self._cache[name] = (column.offsets.to_numpy(), values)
        return self._cache[name]

    def row(self, name: str, i: int) -> np.ndarray:
        offsets, values = self.lists(name)
        return values[offsets[i]:offsets[i + 1]]

    def scalars(self, name: str) -> list:
        return self.table.column(name).to_pylist() if name in self.table.column_names else []


def classify(schema: pa.Schema) -> str | None:
    names = set(schema.names)
    if set(PACKED_COLUMNS) <= names:
        return "sft"
    if "teacher_log_probs" in names:
        return "opd"
    if "advantage" in names:
        return "rl"
    return None


def _metadata(schema: pa.Schema) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}


def _bad(uri: str, row: int | None, fld: str, problem: str, todo: str = "rebuild the object with the stage that wrote it") -> BadInput:
    return BadInput("BAD_RECORD", f"{where(uri, row, fld)}: {problem}; {todo}")


def _check_mask(uri: str, row: int, mask: np.ndarray) -> None:
    if mask.size and not np.isin(mask, (0, 1)).all():
        raise _bad(uri, row, "loss_mask", "holds values other than 0 and 1")


def _same_length(uri: str, row: int, expected: tuple[str, int], **lengths: int) -> None:
    for name, length in lengths.items():
        if length != expected[1]:
            raise _bad(uri, row, name, f"has {length} entries, {expected[0]} has {expected[1]}")


def _sft_rows(uri: str, table: pa.Table) -> tuple[list[SftSample], set[int]]:
    cols, samples, ids_seen = _Columns(table, uri), [], set()
    names = set(table.column_names)
    num_trained = cols.scalars("num_trained")
    for r in range(table.num_rows):
        ids = cols.row("input_ids", r).astype(np.int64)
        mask = cols.row("loss_mask", r).astype(np.int64)
        cu = cols.row("cu_seqlens", r).astype(np.int64)
        _same_length(uri, r, ("input_ids", len(ids)), loss_mask=len(mask),
                     **{n: len(cols.row(n, r)) for n in ("labels", "position_ids") if n in names})
        _check_mask(uri, r, mask)
        if len(cu) < 2 or cu[0] != 0 or cu[-1] != len(ids) or (np.diff(cu) <= 0).any():
            raise _bad(uri, r, "cu_seqlens", f"{cu.tolist()[:8]}... must rise from 0 to the row length {len(ids)}")
        if "labels" in names:
            labels = cols.row("labels", r)
            if not (np.where(mask == 1, ids, -100) == labels).all():
                raise _bad(uri, r, "labels", "differs from input_ids where loss_mask is 1 or from -100 elsewhere")
        if num_trained and num_trained[r] != int(mask.sum()):
            raise _bad(uri, r, "num_trained", f"says {num_trained[r]}, loss_mask has {int(mask.sum())} ones")
        positions = cols.row("position_ids", r) if "position_ids" in names else None
        for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
            if positions is not None and not (positions[start:end] == np.arange(end - start)).all():
                raise _bad(uri, r, "position_ids", f"do not restart at 0 at the sample starting at {start} (cu_seqlens)")
            if mask[start] == 1:
                raise _bad(uri, r, "loss_mask", f"is 1 at position {start}, the first token of a sample: nothing precedes it to predict it from")
            # A segment with nothing to train (the padding tail, a prompt-only sample) changes no loss:
            # attention never crosses segments, so leaving it out is exact.
            if mask[start:end].any():
                samples.append(SftSample(uri, r, start, ids[start:end], mask[start:end]))
        ids_seen.update(np.unique(ids).tolist())
    return samples, ids_seen


def _finite(uri: str, row: int, name: str, values: np.ndarray, mask: np.ndarray) -> None:
    picked = values[mask == 1]
    if not np.isfinite(picked).all() or (picked > 1e-6).any():
        raise _bad(uri, row, name, "holds a value that is not a finite log-probability (<= 0) where loss_mask is 1")


def _temperature_one(uri: str, row: int | None, name: str, value: object) -> None:
    if value is not None and float(value) != 1.0:
        raise _bad(uri, row, name, f"is {value}: the trainer recomputes raw (temperature 1) log-probs",
                   "sample with raw log-probs (temperature 1) or drop these records")


def _policy_rows(uri: str, table: pa.Table, kind: str) -> tuple[list[PolicyRecord], set[int]]:
    cols, records, ids_seen = _Columns(table, uri), [], set()
    meta = _metadata(table.schema)
    if kind == "rl" and "policy" in meta:
        distribution = json.loads(meta["policy"]).get("logprobDistribution") or {}
        _temperature_one(uri, None, "metadata policy.logprobDistribution.temperature", distribution.get("temperature"))
    versions = cols.scalars("policy_version")
    temperatures = {n: cols.scalars(n) for n in ("student_logprob_temperature", "teacher_logprob_temperature")}
    prompt_lengths, response_lengths = cols.scalars("prompt_length"), cols.scalars("response_length")
    advantages = cols.scalars("advantage")
    for r in range(table.num_rows):
        mask = cols.row("loss_mask", r).astype(np.int64)
        rollout = cols.row("rollout_log_probs", r).astype(np.float64)
        if kind == "opd":
            prompt = cols.row("prompt_ids", r).astype(np.int64)
            response = cols.row("response_ids", r).astype(np.int64)
        else:
            tokens = cols.row("tokens", r).astype(np.int64)
            if prompt_lengths[r] + response_lengths[r] != len(tokens):
                raise _bad(uri, r, "tokens", f"has {len(tokens)} entries, prompt_length + response_length = {prompt_lengths[r] + response_lengths[r]}")
            prompt, response = tokens[:prompt_lengths[r]], tokens[prompt_lengths[r]:]
        _same_length(uri, r, ("response", len(response)), loss_mask=len(mask), rollout_log_probs=len(rollout))
        if kind == "opd":
            for n, lengths in (("prompt_length", prompt_lengths), ("response_length", response_lengths)):
                expected = len(prompt) if n == "prompt_length" else len(response)
                if lengths and lengths[r] != expected:
                    raise _bad(uri, r, n, f"says {lengths[r]}, the ids have {expected}")
        _check_mask(uri, r, mask)
        if len(prompt) == 0:
            raise _bad(uri, r, "prompt_ids" if kind == "opd" else "prompt_length", "is empty: the first response token has nothing to be predicted from")
        _finite(uri, r, "rollout_log_probs", rollout, mask)
        for n, values in temperatures.items():
            _temperature_one(uri, r, n, values[r] if values else None)
        record = PolicyRecord(uri, r, prompt, response, mask, rollout,
                              policy_version=versions[r] if versions else None)
        if kind == "opd":
            teacher = cols.row("teacher_log_probs", r).astype(np.float64)
            _same_length(uri, r, ("response", len(response)), teacher_log_probs=len(teacher))
            _finite(uri, r, "teacher_log_probs", teacher, mask)
            record.teacher_log_probs = teacher
        else:
            if advantages[r] is None or not math.isfinite(advantages[r]):
                raise _bad(uri, r, "advantage", f"is {advantages[r]}, not a finite number")
            record.advantage = float(advantages[r])
        records.append(record)
        ids_seen.update(np.unique(record.input_ids).tolist())
    return records, ids_seen


def load_dataset(contents: dict[str, bytes]) -> Dataset:
    """Parses the request's parquet objects (uri -> bytes, request order) into one objective's records."""
    by_kind: dict[str, list[str]] = {}
    dataset = Dataset(objective="", train=[])
    parsed: dict[str, tuple[str, pa.Table]] = {}
    for uri, content in contents.items():
        schema = pq.read_schema(pa.BufferReader(content))
        kind = classify(schema)
        if kind is None:
            dataset.ignored_objects.append(uri)
            continue
        required = {"sft": PACKED_COLUMNS, "opd": OPD_COLUMNS, "rl": RL_COLUMNS}[kind]
        missing = [name for name in required if name not in schema.names]
        if missing:
            raise _bad(uri, None, missing[0], f"is missing (a {kind} object needs {', '.join(required)})")
        by_kind.setdefault(kind, []).append(uri)
        parsed[uri] = (kind, pq.read_table(pa.BufferReader(content)))
    if not by_kind:
        raise BadInput("NO_TRAINING_DATA", "the request names no packed SFT shard, distill or rl parquet object; "
                       "pass the request of an sft, opd or rl handoff")
    if len(by_kind) > 1:
        listing = "; ".join(f"{k}: {', '.join(v)}" for k, v in by_kind.items())
        raise BadInput("MIXED_OBJECTIVES", f"the request mixes objectives ({listing}); one request trains one objective")
    dataset.objective = next(iter(by_kind))
    for uri, (kind, table) in parsed.items():
        meta = _metadata(table.schema)
        fingerprint = meta.get("hat.tokenizer_fingerprint") or meta.get("tokenizer_fingerprint")
        if fingerprint:
            dataset.fingerprints.append((where(uri, fld="metadata tokenizer_fingerprint"), fingerprint))
        if "tokenizer_fingerprint" in table.column_names:
            for r, value in enumerate(table.column("tokenizer_fingerprint").to_pylist()):
                dataset.fingerprints.append((where(uri, r, "tokenizer_fingerprint"), value))
        if kind == "sft":
            samples, ids = _sft_rows(uri, table)
            dataset.all_ids |= ids
            # Only the train split is trained on; validation/heldout shards only feed the vocabulary map.
            if meta.get("hat.split", "train") == "train":
                dataset.train.extend(samples)
                dataset.trained_objects.append(uri)
            else:
                dataset.ignored_objects.append(uri)
        else:
            records, ids = _policy_rows(uri, table, kind)
            dataset.all_ids |= ids
            dataset.train.extend(records)
            dataset.trained_objects.append(uri)
    if not any(item.n_trained for item in dataset.train):
        raise BadInput("NO_TRAINING_DATA", f"{', '.join(dataset.trained_objects)}: no record has a loss_mask 1; nothing to train on")
    return dataset
