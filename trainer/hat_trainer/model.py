"""Qwen3 student models for the HAT trainer: shape, vocabulary remap, checkpoints.

A compact student cannot afford Qwen3's 151k-row embedding on a CPU, and the data of one run uses a
few thousand token ids. So a model may carry a `VocabularyMap`: its embedding and LM head have one
row per id in use (plus an UNK row), while everything outside the model (shards, rollouts, the ONNX
export, `hat serve`) keeps speaking full tokenizer ids. Without a map the model is a plain
full-vocabulary Qwen3 (e.g. a real base checkpoint on a GPU).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

VOCAB_MAP_FILE = "hat_vocab_map.json"
CHECKPOINT_FILE = "hat_checkpoint.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# Copied when the tokenizer directory has it: Node's chat renderer prefers it to tokenizer_config's template.
OPTIONAL_TOKENIZER_FILES = ("chat_template.jinja",)
# Ids the Qwen3 tokenizer can produce (highest id in vocab or added tokens + 1), as Node's
# tokenizerVocabularySize counts them; HF's Qwen3 configs pad the matrix to 151,936 rows.
QWEN3_TOKENIZER_VOCAB_SIZE = 151_669


@dataclass(frozen=True)
class ModelShape:
    """Qwen3 architecture fields; the defaults are the demo's CPU size."""

    layers: int = 4
    hidden: int = 128
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    intermediate: int = 384
    rope_theta: float = 1_000_000.0
    max_position: int = 32768
    rms_norm_eps: float = 1e-6
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary position embedding")

    def to_config(self, vocab_size: int, **extra: Any) -> Qwen3Config:
        """The Hugging Face config of this shape with `vocab_size` embedding rows."""
        return Qwen3Config(
            vocab_size=vocab_size,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_position,
            rms_norm_eps=self.rms_norm_eps,
            rope_parameters={"rope_type": "default", "rope_theta": float(self.rope_theta)},
            tie_word_embeddings=self.tie_embeddings,
            **extra,
        )

    @classmethod
    def from_config(cls, config: Qwen3Config) -> ModelShape:
        rope = config.rope_parameters or {}
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            heads=config.num_attention_heads,
            kv_heads=config.num_key_value_heads,
            head_dim=config.head_dim,
            intermediate=config.intermediate_size,
            rope_theta=float(rope.get("rope_theta", 1_000_000.0)),
            max_position=config.max_position_embeddings,
            rms_norm_eps=config.rms_norm_eps,
            tie_embeddings=bool(config.tie_word_embeddings),
        )


class VocabularyMap:
    """Compact index -> full tokenizer id; compact index 0 is UNK (full id -1).

    Every full id not in the map reads as UNK on input and is never produced on output, so a model
    with a map scores exactly the ids it has rows for, and an id it has never seen gets -inf.
    """

    UNK = 0

    def __init__(self, full_ids: list[int], full_vocab_size: int) -> None:
        if not full_ids or full_ids[0] != -1:
            raise ValueError("full_ids[0] must be -1 (the UNK row)")
        known = full_ids[1:]
        if len(set(known)) != len(known):
            raise ValueError("full_ids holds a token id twice")
        bad = [i for i in known if not 0 <= i < full_vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the tokenizer's [0, {full_vocab_size})")
        self.full_vocab_size = int(full_vocab_size)
        self.full_ids = [int(i) for i in full_ids]
        # Dense full -> compact table: lookups stay one gather however long the batch is.
        table = torch.zeros(self.full_vocab_size, dtype=torch.long)
        table[torch.tensor(known, dtype=torch.long)] = torch.arange(1, len(full_ids), dtype=torch.long)
        self._to_compact = table
        self._to_full = torch.tensor(self.full_ids, dtype=torch.long)

    @classmethod
    def build(cls, ids_in_use: Iterable[int], special_ids: Iterable[int], full_vocab_size: int) -> VocabularyMap:
        """The ids in use plus the tokenizer's special/added ids (so eos can always be produced), sorted."""
        ids = sorted({int(i) for i in ids_in_use} | {int(i) for i in special_ids})
        return cls([-1, *ids], full_vocab_size)

    def extend(self, new_ids: Iterable[int]) -> VocabularyMap:
        """A map with the ids not yet known appended (sorted): existing compact indices stay put."""
        added = sorted({int(i) for i in new_ids} - set(self.full_ids[1:]))
        return VocabularyMap([*self.full_ids, *added], self.full_vocab_size)

    def __len__(self) -> int:
        """Rows of the model's embedding and LM head (UNK included)."""
        return len(self.full_ids)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, VocabularyMap)
            and self.full_vocab_size == other.full_vocab_size
            and self.full_ids == other.full_ids
        )

    def to_compact(self, full_ids: torch.Tensor) -> torch.Tensor:
        """Full ids -> compact indices, unknown ids -> 0 (UNK). Ids outside the tokenizer are an error."""
        if full_ids.numel() and (full_ids.min() < 0 or full_ids.max() >= self.full_vocab_size):
            raise ValueError(f"token ids outside the tokenizer's [0, {self.full_vocab_size})")
        table = self._to_compact.to(full_ids.device)
        return table[full_ids]

    def to_full(self, compact: torch.Tensor) -> torch.Tensor:
        """Compact indices -> full ids; UNK -> -1."""
        return self._to_full.to(compact.device)[compact]

    def contains(self, full_id: int) -> bool:
        return 0 <= full_id < self.full_vocab_size and bool(self._to_compact[full_id] != 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "hat_vocab_map/1",
            "unk_index": VocabularyMap.UNK,
            "full_vocab_size": self.full_vocab_size,
            "full_ids": self.full_ids,
        }

    def sha256(self) -> str:
        """Identity of the map: two checkpoints share rows only when these match."""
        canonical = json.dumps(
            {"full_vocab_size": self.full_vocab_size, "full_ids": self.full_ids}, separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_json(), separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VocabularyMap:
        data = json.loads(Path(path).read_text())
        return cls(list(data["full_ids"]), int(data["full_vocab_size"]))


class HatModel:
    """A Qwen3 causal LM plus its vocabulary map and checkpoint metadata."""

    def __init__(self, module: Qwen3ForCausalLM, vocab: VocabularyMap | None, metadata: dict[str, Any] | None = None):
        if vocab is not None and module.config.vocab_size != len(vocab):
            raise ValueError(f"model has {module.config.vocab_size} vocabulary rows, the map {len(vocab)}")
        self.module = module
        self.vocab = vocab
        self.metadata: dict[str, Any] = dict(metadata or {})

    @property
    def shape(self) -> ModelShape:
        return ModelShape.from_config(self.module.config)

    @property
    def full_vocab_size(self) -> int:
        """Size of the id space the outside world uses (tokenizer ids)."""
        return self.vocab.full_vocab_size if self.vocab is not None else self.module.config.vocab_size

    def to_model_ids(self, input_ids_full: torch.Tensor) -> torch.Tensor:
        return self.vocab.to_compact(input_ids_full) if self.vocab is not None else input_ids_full

    def logits(
        self,
        input_ids_full: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits over the OUTPUT vocabulary (compact columns when remapped; UNK column = -inf), [B, T, V]."""
        output = self.module(
            input_ids=self.to_model_ids(input_ids_full),
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        )
        logits = output.logits.float()
        if self.vocab is not None:
            unk = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
            unk[VocabularyMap.UNK] = True
            logits = logits.masked_fill(unk, float("-inf"))
        return logits

    def token_log_probs(
        self,
        input_ids_full: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """log p(input_ids[:, t+1] | input_ids[:, :t+1]) for t = 0..T-2, raw (temperature 1), differentiable.

        Over the output vocabulary with UNK masked, so a target the model has no row for gets -inf.
        For packed rows pass `attention_mask=None` and per-sample `position_ids`: transformers then
        masks attention between the packed samples.
        """
        logits = self.logits(input_ids_full, attention_mask, position_ids)[:, :-1]
        targets = self.to_model_ids(input_ids_full[:, 1:]).unsqueeze(-1)
        # logit - logsumexp instead of a full log_softmax: one [B, T, V] tensor fewer.
        return logits.gather(-1, targets).squeeze(-1) - torch.logsumexp(logits, dim=-1)

    @torch.no_grad()
    def resize_vocabulary(self, new_map: VocabularyMap) -> None:
        """Moves to `new_map` (a superset of the current map, e.g. from `extend`).

        Known ids keep their embedding and LM-head rows, so their logits are unchanged; new ids
        start at the mean row of the known ids (deterministic, no RNG draw).
        """
        old = self.vocab
        if old is None:
            raise ValueError("a full-vocabulary model has no map to resize")
        if new_map.full_vocab_size != old.full_vocab_size:
            raise ValueError("the new map is for another tokenizer (full_vocab_size differs)")
        missing = set(old.full_ids) - set(new_map.full_ids)
        if missing:
            raise ValueError(f"the new map drops {len(missing)} known ids (e.g. {sorted(missing)[:5]})")
        # Row of each new compact index in the old matrices (UNK's for ids new to the model, replaced below).
        source = old.to_compact(new_map.to_full(torch.arange(1, len(new_map))))
        source = torch.cat([torch.zeros(1, dtype=torch.long), source])
        is_new = torch.tensor([False] + [not old.contains(i) for i in new_map.full_ids[1:]])

        def remapped(weight: torch.Tensor) -> torch.Tensor:
            rows = weight[source.to(weight.device)].clone()
            rows[is_new.to(weight.device)] = weight[1:].mean(dim=0) if weight.shape[0] > 1 else 0.0
            return rows

        embedding = remapped(self.module.get_input_embeddings().weight)
        head = None if self.module.config.tie_word_embeddings else remapped(self.module.get_output_embeddings().weight)
        # Its random init of the new rows is overwritten; the fork keeps the training RNG stream intact.
        device = self.module.device
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            self.module.resize_token_embeddings(len(new_map), mean_resizing=False)
        self.module.get_input_embeddings().weight.copy_(embedding)
        if head is not None:
            self.module.get_output_embeddings().weight.copy_(head)
        self.module.config.vocab_size = len(new_map)
        self.vocab = new_map


def _read_json(path: str | os.PathLike[str]) -> Any:
    """Parsed JSON, cached while the file is unchanged: Qwen3's tokenizer.json (11 MB) takes 0.6 s to parse."""
    stat = os.stat(path)
    return _parse_json(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _parse_json(path: str, mtime_ns: int, size: int) -> Any:
    return json.loads(Path(path).read_text())


def tokenizer_vocab_size(tokenizer_dir: str | os.PathLike[str]) -> int:
    """Ids a tokenizer can produce: highest id in tokenizer.json's vocab or added tokens, plus one (as Node counts)."""
    data = _read_json(Path(tokenizer_dir) / "tokenizer.json")
    vocab = (data.get("model") or {}).get("vocab")
    highest = -1
    if isinstance(vocab, list):
        highest = len(vocab) - 1
    elif isinstance(vocab, dict) and vocab:
        highest = max(vocab.values())
    for added in data.get("added_tokens") or []:
        highest = max(highest, int(added["id"]))
    if highest < 0:
        raise ValueError(f"{tokenizer_dir}/tokenizer.json defines no token ids")
    return highest + 1


def tokenizer_special_ids(tokenizer_dir: str | os.PathLike[str]) -> list[int]:
    """Ids of tokenizer.json's added tokens (special or not: <|im_end|>, <tool_call>, <think> ...)."""
    data = _read_json(Path(tokenizer_dir) / "tokenizer.json")
    return sorted(int(added["id"]) for added in data.get("added_tokens") or [])


def tokenizer_token_id(tokenizer_dir: str | os.PathLike[str], field: str) -> int | None:
    """Id of tokenizer_config.json's `field` token (eos_token, pad_token, bos_token), None when unset."""
    config = _read_json(Path(tokenizer_dir) / "tokenizer_config.json")
    value = config.get(field)
    content = value.get("content") if isinstance(value, dict) else value
    if not isinstance(content, str):
        return None
    data = _read_json(Path(tokenizer_dir) / "tokenizer.json")
    for added in data.get("added_tokens") or []:
        if added["content"] == content:
            return int(added["id"])
    vocab = (data.get("model") or {}).get("vocab")
    return int(vocab[content]) if isinstance(vocab, dict) and content in vocab else None


def _attn_implementation(device: str | torch.device) -> str:
    # SDPA was 24x slower per training step than eager on the CPU machines.
    return "eager" if torch.device(device).type == "cpu" else "sdpa"


def new_model(
    shape: ModelShape,
    vocab: VocabularyMap | None,
    seed: int,
    device: str | torch.device = "cpu",
    full_vocab_size: int = QWEN3_TOKENIZER_VOCAB_SIZE,
) -> HatModel:
    """A randomly initialised Qwen3 (no weights can be downloaded); the same seed gives the same weights.

    `full_vocab_size` sizes a model without a map (one row per tokenizer id).
    """
    rows = len(vocab) if vocab is not None else full_vocab_size
    config = shape.to_config(rows)
    config._attn_implementation = _attn_implementation(device)
    # A private RNG stream: the caller's global RNG state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = Qwen3ForCausalLM(config)
    module.to(device)
    return HatModel(module, vocab, {"seed": seed})


def load_checkpoint(hf_dir: str | os.PathLike[str], device: str | torch.device = "cpu") -> HatModel:
    """Loads a directory written by `save_checkpoint` (or any float32 Hugging Face Qwen3 directory)."""
    hf_dir = Path(hf_dir)
    module = Qwen3ForCausalLM.from_pretrained(
        hf_dir, attn_implementation=_attn_implementation(device), dtype=torch.float32
    ).to(device)
    map_file = hf_dir / VOCAB_MAP_FILE
    vocab = VocabularyMap.load(map_file) if map_file.exists() else None
    metadata_file = hf_dir / CHECKPOINT_FILE
    metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
    if vocab is not None and metadata.get("hat_vocab_map_sha256") not in (None, vocab.sha256()):
        raise ValueError(f"{map_file} does not match the map this checkpoint was saved with")
    return HatModel(module, vocab, metadata)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def replace_dir(temporary: Path, target: Path) -> None:
    """Puts a fully written `temporary` dir at `target`: readers see the old or the new one, never half."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(temporary, target)
        shutil.rmtree(old)
    else:
        os.replace(temporary, target)


def file_list(directory: Path) -> list[dict[str, Any]]:
    """Every file of a directory with its size and sha256, sorted by path."""
    return [
        {"path": str(path.relative_to(directory)), "bytes": path.stat().st_size, "sha256": _file_digest(path)}
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    ]


def copy_tokenizer_files(tokenizer_dir: str | os.PathLike[str], out_dir: Path) -> None:
    """Byte-identical copies: Node fingerprints tokenizer.json by its text."""
    for name in TOKENIZER_FILES:
        shutil.copyfile(Path(tokenizer_dir) / name, out_dir / name)
    for name in OPTIONAL_TOKENIZER_FILES:
        if (Path(tokenizer_dir) / name).exists():
            shutil.copyfile(Path(tokenizer_dir) / name, out_dir / name)


def save_checkpoint(
    model: HatModel,
    hf_dir: str | os.PathLike[str],
    tokenizer_dir: str | os.PathLike[str],
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """Writes a Hugging Face directory that `Qwen3ForCausalLM.from_pretrained` loads, atomically.

    config.json holds token ids in the model's own (compact, when remapped) id space and names the
    map file (`hat_vocab_map`); hat_checkpoint.json holds `metadata` plus the map's sha256.
    Returns {"dir", "files": [{"path", "bytes", "sha256"}], "vocab_map_sha256"}.
    """
    target = Path(hf_dir).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    vocab = model.vocab
    full_size = tokenizer_vocab_size(tokenizer_dir)
    if vocab is not None and vocab.full_vocab_size != full_size:
        raise ValueError(f"the vocabulary map is for {vocab.full_vocab_size} ids, the tokenizer has {full_size}")

    def model_id(field: str) -> int | None:
        full = tokenizer_token_id(tokenizer_dir, field)
        if full is None or vocab is None:
            return full
        return int(vocab.to_compact(torch.tensor(full))) if vocab.contains(full) else None

    config = model.module.config
    config.eos_token_id = model_id("eos_token")
    config.bos_token_id = model_id("bos_token")
    # No padding_idx: it would freeze the <|endoftext|> row, which packed SFT data also uses.
    config.pad_token_id = None
    if vocab is not None:
        config.hat_vocab_map = VOCAB_MAP_FILE
    elif hasattr(config, "hat_vocab_map"):
        del config.hat_vocab_map
    generation = model.module.generation_config
    generation.eos_token_id, generation.bos_token_id = config.eos_token_id, config.bos_token_id
    generation.pad_token_id = None

    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        os.chmod(temporary, 0o755)  # mkdtemp's 0700 would outlive the rename
        model.module.save_pretrained(temporary, safe_serialization=True)
        # safetensors writes through a private temporary file (0600): readable by the serving user too.
        for written in temporary.glob("*.safetensors"):
            os.chmod(written, 0o644)
        copy_tokenizer_files(tokenizer_dir, temporary)
        info = dict(metadata)
        if vocab is not None:
            vocab.save(temporary / VOCAB_MAP_FILE)
            info["hat_vocab_map_sha256"] = vocab.sha256()
        info["model_shape"] = asdict(model.shape)
        (temporary / CHECKPOINT_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        files = file_list(temporary)
        replace_dir(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return {"dir": str(target), "files": files, "vocab_map_sha256": vocab.sha256() if vocab is not None else None}
