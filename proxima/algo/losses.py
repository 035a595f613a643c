"""Loss terms as pure functions of tensors, each returning a scalar to *minimize*; the "detail N" below are
those of docs/SEEDS.md.

The PPO objective (paper eq. 9) is ``L = L_clip - c1 * L_vf + c2 * S``, written for gradient ascent; proxima
descends, so every sign here is flipped where needed and the total is ``policy + vf_coef * value - ent_coef * entropy``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def normalize(x: Tensor, eps: float = 1e-8) -> Tensor:
    """Zero mean, unit std (detail 7 applies it per minibatch to advantages)."""
    return (x - x.mean()) / (x.std() + eps)


def clipped_surrogate_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    clip_coef: float,
    normalize_advantages: bool = True,
) -> Tensor:
    """Negative clipped surrogate objective, PPO paper eq. 7 (detail 8).

    ``ratio = exp(logprobs - old_logprobs)``; the loss is ``-mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))``.
    With ``normalize_advantages`` the advantages of this minibatch are standardized first (detail 7).
    """
    if normalize_advantages:
        advantages = normalize(advantages)
    ratio = (logprobs - old_logprobs).exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantages
    return -torch.min(unclipped, clipped).mean()


def value_loss(values: Tensor, returns: Tensor) -> Tensor:
    """Half the mean squared error between predicted values and returns (detail 9, unclipped)."""
    return 0.5 * (values - returns).pow(2).mean()


def clipped_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip_coef: float) -> Tensor:
    """The reference implementation's clipped value loss (baselines' ppo2; the paper's is a plain squared
    error): ½·mean(max((V - R)², (V_clipped - R)²)).

    ``V_clipped`` keeps the new value within ``clip_coef`` of the value recorded in the rollout. Detail 9
    reports no benefit from it, so proxima leaves it off unless ``--clip-vloss`` is given.
    """
    clipped = old_values + (values - old_values).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max((values - returns).pow(2), (clipped - returns).pow(2)).mean()


def policy_gradient_loss(logprobs: Tensor, weights: Tensor) -> Tensor:
    """The vanilla policy-gradient loss ``-mean(log pi(a|s) * weight)``.

    REINFORCE weights by the return, VPG by the advantage; the weights are detached because they are
    targets, not functions of the policy parameters.
    """
    return -(logprobs * weights.detach()).mean()


def entropy_bonus(entropy: Tensor) -> Tensor:
    """Mean entropy of the action distributions (detail 10); the total loss subtracts ``ent_coef`` times
    it."""
    return entropy.mean()


@torch.no_grad()
def ratio_diagnostics(logprobs: Tensor, old_logprobs: Tensor, clip_coef: float) -> dict[str, Tensor]:
    """The debug variables for the probability ratio (detail 12), as 0-d tensors.

    ``old_approx_kl`` is the naive estimator ``mean(-log r)``; ``approx_kl`` is the lower-variance, always
    non-negative ``mean((r - 1) - log r)`` (Schulman, "Approximating KL divergence"); ``clipfrac`` is the share
    of samples whose ratio left ``[1 - eps, 1 + eps]``.
    """
    logratio = logprobs - old_logprobs
    ratio = logratio.exp()
    return {
        "old_approx_kl": (-logratio).mean(),
        "approx_kl": ((ratio - 1.0) - logratio).mean(),
        "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
    }


def explained_variance(predictions: Tensor, targets: Tensor) -> float:
    """``1 - Var(targets - predictions) / Var(targets)``; NaN when the targets are constant.

    1 is a perfect critic, 0 is no better than predicting the mean, and negative is worse than that.
    """
    var = targets.var()
    if var.item() == 0.0:
        return float("nan")
    return float(1.0 - (targets - predictions).var() / var)
