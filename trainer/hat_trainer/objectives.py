"""Loss functions on per-token log-probs. Pure tensor code: the training loop feeds them one sequence at a time.

Conventions: every tensor here holds only trained tokens (loss_mask = 1); `logp_new` is differentiable,
everything else is a constant (detached). Losses are SUMS over the given tokens; the caller scales them by
its aggregation weights (see `aggregation_weights`), so accumulating sequences one by one gives exactly
the batch mean.
"""
from __future__ import annotations

import torch


def sft_loss_sum(logp_targets: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood summed over trained targets."""
    return -logp_targets.sum()


def opd_advantages(teacher_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor) -> torch.Tensor:
    """On-policy distillation advantage per token: teacher_lp - sampler_lp = -(reverse-KL estimate).

    The sampler's log-prob (rollout_log_probs) is used, as in the tinker cookbook / slime OPD recipes: it is
    fixed for the whole update (a constant advantage, like PPO's), and before the first step it equals the
    base model's recompute (the token-in/token-out proof checks that); the importance ratio corrects for the
    policy moving during the update.
    """
    return teacher_log_probs - rollout_log_probs


def importance_ratio(logp_new: torch.Tensor, logp_old: torch.Tensor) -> torch.Tensor:
    return torch.exp(logp_new - logp_old)


def clipped_surrogate_sum(
    logp_new: torch.Tensor, logp_old: torch.Tensor, advantages: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO/GRPO clipped policy-gradient loss summed over tokens: -sum(min(r A, clip(r, 1-eps, 1+eps) A)).

    Returns (loss_sum, clipped) where `clipped` marks the tokens whose clipped term was the smaller one
    (no gradient flows through them).
    """
    ratio = importance_ratio(logp_new, logp_old)
    unclipped = ratio * advantages
    clipped_term = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages
    surrogate = torch.minimum(unclipped, clipped_term)
    return -surrogate.sum(), (clipped_term < unclipped).detach()


def k3_kl(logp_new: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(new || ref) on tokens sampled from the old policy: e^(ref-new) - (ref-new) - 1 >= 0."""
    delta = logp_ref - logp_new
    return torch.exp(delta) - delta - 1.0


def aggregation_weights(trained_per_sequence: list[int], mode: str) -> list[float]:
    """Weight of each token's loss so that the weighted sum is the step's mean.

    token:    every trained token of the step counts once (mean over all tokens; long sequences weigh more).
    sequence: mean over each sequence's tokens, then mean over sequences (every sequence weighs the same).
    """
    if mode == "token":
        total = sum(trained_per_sequence)
        return [1.0 / total if total else 0.0 for _ in trained_per_sequence]
    if mode == "sequence":
        counted = [n for n in trained_per_sequence if n > 0]
        return [1.0 / (n * len(counted)) if n else 0.0 for n in trained_per_sequence]
    raise ValueError(f"aggregation must be 'token' or 'sequence', not {mode!r}")


def aggregate(per_token_losses: list[torch.Tensor], mode: str) -> torch.Tensor:
    """Batch form of the same mean (used by tests and for reporting)."""
    weights = aggregation_weights([t.numel() for t in per_token_losses], mode)
    return sum((t.sum() * w for t, w in zip(per_token_losses, weights)), torch.zeros(()))
