"""The update phase: epochs of minibatch gradient steps on one rollout (seed 000, details #6-#11).

PPO, VPG and REINFORCE share all of it and differ only in the policy term (``policy_loss``): PPO's clipped
surrogate, or the plain policy gradient of seed 001, whose weights are R - V(s) for VPG and R for REINFORCE
(a model without a critic predicts V = 0).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from proxima.config import PPOArgs
from proxima.losses import (
    clipped_surrogate_loss,
    clipped_value_loss,
    entropy_bonus,
    normalize,
    policy_gradient_loss,
    ratio_diagnostics,
    value_loss,
)
from proxima.networks import ActorCritic
from proxima.optim import Adam, clip_grad_norm
from proxima.storage import Batch, minibatch_indices


def policy_loss(args: PPOArgs, logprobs: Tensor, mb: Batch) -> Tensor:
    if args.algo == "ppo":
        return clipped_surrogate_loss(logprobs, mb.logprobs, mb.advantages, args.clip_coef, args.norm_adv)
    return policy_gradient_loss(logprobs, normalize(mb.advantages) if args.norm_adv else mb.advantages)


def update(model: ActorCritic, optimizer: Adam, batch: Batch, args: PPOArgs) -> dict:
    """Train on ``batch`` for ``update_epochs`` epochs; return the update's debug variables (detail #12).

    Like the seed, the losses and KL estimates reported are those of the last minibatch; clipfrac is the
    mean over all minibatches.
    """
    clipfracs, losses, grad_norms = [], [], []
    model.update_value_normalization(batch.returns)
    # With --norm-value the critic's errors are measured in standard deviations of its targets, the scale its
    # network predicts in; dividing values, old values and returns alike keeps the clipped loss consistent.
    # The batch's share is divided once here; each minibatch divides only its new values.
    scale = model.normalization.value_scale()
    if scale is not None:
        batch = dataclasses.replace(batch, values=batch.values / scale, returns=batch.returns / scale)
    for _ in range(args.update_epochs):
        for index in minibatch_indices(len(batch), args.minibatch_size, batch.obs.device):  # detail #6
            mb = batch[index]
            logprobs, entropy, values = model.evaluate(mb.obs, mb.actions)
            pg_loss = policy_loss(args, logprobs, mb)
            if scale is not None:
                values = values / scale
            if model.critic is None:
                v_loss = values.new_zeros(())  # REINFORCE: nothing to fit
            elif args.clip_vloss:
                v_loss = clipped_value_loss(values, mb.values, mb.returns, args.clip_coef)
            else:
                v_loss = value_loss(values, mb.returns)
            ent = entropy_bonus(entropy)
            loss = (
                pg_loss + args.vf_coef * v_loss - args.ent_coef * ent
            )  # detail #10: the bonus is subtracted

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if args.max_grad_norm > 0:
                grad_norms.append(clip_grad_norm(model, args.max_grad_norm))  # detail #11
            optimizer.step()
            losses.append(loss.detach())

            diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, args.clip_coef)
            clipfracs.append(diagnostics["clipfrac"])
        if args.target_kl is not None and diagnostics["approx_kl"].item() > args.target_kl:
            break  # early stopping on KL: the policy has already moved as far as we allow
    return {
        **_grad_stats(losses, grad_norms),
        "value_loss": v_loss.item(),
        "policy_loss": pg_loss.item(),
        "entropy": ent.item(),
        "old_approx_kl": diagnostics["old_approx_kl"].item(),
        "approx_kl": diagnostics["approx_kl"].item(),
        "clipfrac": torch.stack(clipfracs).mean().item(),
    }


def _grad_stats(losses: list[Tensor], grad_norms: list[Tensor]) -> dict:
    """The largest gradient norm before clipping, and where a NaN or infinity first appeared, if one did:
    in a minibatch's loss, or in its gradients while the loss was still finite (checked once per update)."""
    loss_ok = torch.isfinite(torch.stack(losses))
    grad_ok = torch.isfinite(torch.stack(grad_norms)) if grad_norms else torch.ones_like(loss_ok)
    stats = {"grad_norm": torch.stack(grad_norms).max().item() if grad_norms else None}
    if not bool(loss_ok.all() & grad_ok.all()):
        first = int((~(loss_ok & grad_ok)).nonzero()[0])
        stats["non_finite"] = "loss" if not loss_ok[first] else "gradients"
    return stats
