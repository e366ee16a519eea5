"""Tokenizer fingerprint, computed exactly as the Node side does (shared/text/chat-tokenizer.ts fingerprintOf).

Node hashes JSON.stringify({vocabulary, added}) where
  vocabulary = [[id, token], ...] from get_vocab(withAdded=true), sorted by id
  added      = [[id, content, special], ...] from get_added_tokens_decoder(), sorted by id
get_vocab walks model.vocab (an array indexed by id: the BPE vocab, then every added token written at its id)
into a Map keyed by token text, so a text that appears at two ids keeps only the last id.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TokenizerInfo:
    fingerprint: str
    vocab_size: int            # largest id + 1, as Node's vocabSize
    special_ids: list[int]     # ids of added tokens (specials and others): always kept in a vocabulary map
    pad_token_id: int | None


def tokenizer_info(tokenizer_dir: str | Path) -> TokenizerInfo:
    path = Path(tokenizer_dir) / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    model_vocab: dict[str, int] = data["model"]["vocab"]
    added_tokens: list[dict] = data.get("added_tokens", [])

    # model.vocab as an array indexed by id (holes stay None, as JS leaves them undefined).
    size = max([*model_vocab.values(), *(t["id"] for t in added_tokens), -1]) + 1
    by_id: list[str | None] = [None] * size
    for token, idx in model_vocab.items():
        by_id[idx] = token
    for token in added_tokens:
        by_id[token["id"]] = token["content"]
    text_to_id: dict[str | None, int] = {}
    for idx, token in enumerate(by_id):
        text_to_id[token] = idx          # later ids overwrite, like Map.set
    vocabulary = sorted(([idx, token] for token, idx in text_to_id.items()), key=lambda e: e[0])
    added_by_id = {t["id"]: t for t in added_tokens}  # Map keyed by id: last wins
    added = [[i, added_by_id[i]["content"], bool(added_by_id[i].get("special", False))] for i in sorted(added_by_id)]

    # JSON.stringify: compact, non-ASCII left as is; Python escapes the same characters (", \\, controls).
    text = json.dumps({"vocabulary": vocabulary, "added": added}, separators=(",", ":"), ensure_ascii=False)
    fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()

    pad_token_id = None
    config_path = Path(tokenizer_dir) / "tokenizer_config.json"
    if config_path.exists():
        pad = json.loads(config_path.read_text(encoding="utf-8")).get("pad_token")
        pad_text = pad.get("content") if isinstance(pad, dict) else pad
        if pad_text is not None and pad_text in text_to_id:
            pad_token_id = text_to_id[pad_text]
    return TokenizerInfo(fingerprint, size, sorted(added_by_id), pad_token_id)
