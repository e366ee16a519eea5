"""Objective math on hand-made tensors."""
from __future__ import annotations

import math

import pytest
import torch

from hat_trainer import objectives as obj


def test_clipped_surrogate_matches_hand_computed_values() -> None:
    logp_old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5]))
    # ratios 1.5, 0.5, 1.1, 0.7 against the old policy
    logp_new = torch.log(torch.tensor([0.75, 0.25, 0.55, 0.35]))
    advantages = torch.tensor([1.0, 1.0, -2.0, -2.0])
    loss, clipped = obj.clipped_surrogate_sum(logp_new, logp_old, advantages, epsilon=0.2)
    # min(r A, clip(r) A): 1.5 -> min(1.5, 1.2)=1.2; 0.5 -> min(0.5, 0.8)=0.5; 1.1 -> min(-2.2,-2.2)=-2.2; 0.7 -> min(-1.4,-1.6)=-1.6
    assert loss.item() == pytest.approx(-(1.2 + 0.5 - 2.2 - 1.6), abs=1e-6)
    assert clipped.tolist() == [True, False, False, True]


def test_clipped_tokens_get_no_gradient() -> None:
    logp_old = torch.zeros(3)
    logp_new = torch.tensor([math.log(1.5), math.log(1.1), math.log(0.5)], requires_grad=True)
    loss, _ = obj.clipped_surrogate_sum(logp_new, logp_old, torch.ones(3), epsilon=0.2)
    loss.backward()
    # d(-r)/d logp = -r where unclipped; 0 where the ratio passed 1 + eps with a positive advantage
    assert logp_new.grad.tolist() == pytest.approx([0.0, -1.1, -0.5], abs=1e-6)


def test_opd_advantage_is_minus_the_reverse_kl_estimate() -> None:
    teacher, rollout = torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -1.0])
    assert obj.opd_advantages(teacher, rollout).tolist() == [1.0, -2.0]


def test_k3_is_zero_at_the_reference_and_positive_elsewhere() -> None:
    ref = torch.tensor([-1.0, -1.0, -1.0])
    new = torch.tensor([-1.0, -0.5, -2.0])
    kl = obj.k3_kl(new, ref)
    assert kl[0].item() == 0.0
    assert kl[1].item() == pytest.approx(math.exp(-0.5) + 0.5 - 1)
    assert kl[2].item() == pytest.approx(math.exp(1.0) - 1.0 - 1)


def test_token_and_sequence_aggregation() -> None:
    losses = [torch.tensor([1.0, 1.0, 1.0]), torch.tensor([4.0])]
    assert obj.aggregate(losses, "token").item() == pytest.approx(7.0 / 4)        # every token once
    assert obj.aggregate(losses, "sequence").item() == pytest.approx((1.0 + 4.0) / 2)  # every sequence once
    assert obj.aggregation_weights([3, 0, 1], "sequence") == [pytest.approx(1 / 6), 0.0, 0.5]
    with pytest.raises(ValueError):
        obj.aggregation_weights([1], "row")


def test_sft_loss_is_the_negative_log_likelihood_sum() -> None:
    assert obj.sft_loss_sum(torch.tensor([-0.5, -1.5])).item() == 2.0
