import math

import pytest
import torch

from proxima.algo.losses import (
    clipped_surrogate_loss,
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    normalize,
    policy_gradient_loss,
    ratio_diagnostics,
    value_loss,
)


def test_clipped_surrogate_hand_computed():
    # ratios e^0 = 1, e^ln1.5 = 1.5, e^ln0.5 = 0.5; advantages 1, 1, -1; clip 0.2.
    logprobs = torch.tensor([0.0, math.log(1.5), math.log(0.5)])
    old = torch.zeros(3)
    adv = torch.tensor([1.0, 1.0, -1.0])
    # min(r*A, clip(r)*A): 1, min(1.5, 1.2) = 1.2, min(-0.5, -0.8) = -0.8 -> mean 1.4/3
    loss = clipped_surrogate_loss(logprobs, old, adv, clip_coef=0.2, normalize_advantages=False)
    assert loss.item() == pytest.approx(-1.4 / 3, abs=1e-6)


def test_clipped_surrogate_normalizes_per_minibatch():
    logprobs, old = torch.tensor([0.1, -0.2, 0.05, 0.0]), torch.zeros(4)
    adv = torch.tensor([3.0, 5.0, 7.0, 9.0])
    a = clipped_surrogate_loss(logprobs, old, adv, 0.2, normalize_advantages=True)
    b = clipped_surrogate_loss(logprobs, old, normalize(adv), 0.2, normalize_advantages=False)
    assert a.item() == pytest.approx(b.item())
    n = normalize(adv)
    assert n.mean().item() == pytest.approx(0.0, abs=1e-6) and n.std().item() == pytest.approx(1.0, abs=1e-6)


def test_clipped_ratio_has_no_gradient():
    logprobs = torch.tensor([math.log(1.5)], requires_grad=True)
    clipped_surrogate_loss(
        logprobs, torch.zeros(1), torch.ones(1), 0.2, normalize_advantages=False
    ).backward()
    assert logprobs.grad.item() == 0.0


def test_value_loss_is_half_mse():
    assert value_loss(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 2.0])).item() == pytest.approx(1.0)


def test_clipped_value_loss_hand_computed():
    values, old, returns = torch.tensor([2.0]), torch.tensor([1.0]), torch.tensor([3.0])
    # clipped value = 1 + clamp(1, -.5, .5) = 1.5; max((2-3)^2, (1.5-3)^2) = 2.25; half -> 1.125
    assert clipped_value_loss(values, old, returns, 0.5).item() == pytest.approx(1.125)


def test_policy_gradient_loss_and_detached_weights():
    logprobs = torch.tensor([-1.0, -2.0], requires_grad=True)
    weights = torch.tensor([2.0, -1.0], requires_grad=True)
    loss = policy_gradient_loss(logprobs, weights)
    assert loss.item() == pytest.approx(-(-2.0 + 2.0) / 2)
    loss.backward()
    assert weights.grad is None
    torch.testing.assert_close(logprobs.grad, torch.tensor([-1.0, 0.5]))


def test_entropy_bonus_is_mean():
    assert entropy_bonus(torch.tensor([0.2, 0.4])).item() == pytest.approx(0.3)


def test_ratio_diagnostics_hand_computed():
    logprobs, old = torch.tensor([math.log(2.0), 0.0]), torch.zeros(2)
    d = ratio_diagnostics(logprobs, old, clip_coef=0.2)
    assert d["old_approx_kl"].item() == pytest.approx(-math.log(2.0) / 2)
    assert d["approx_kl"].item() == pytest.approx((1.0 - math.log(2.0)) / 2)
    assert d["clipfrac"].item() == pytest.approx(0.5)


def test_explained_variance():
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), y) == pytest.approx(0.0)
    assert math.isnan(explained_variance(y, torch.ones(4)))
