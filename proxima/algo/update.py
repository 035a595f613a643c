"""The update phase: epochs of minibatch gradient steps on one rollout (details 6-11 in docs/SEEDS.md).

PPO, VPG and REINFORCE share all of it and differ only in the policy term (``UpdateSettings.policy_loss``,
from ``proxima.algo.algorithms``): PPO's clipped surrogate, or the policy-gradient homework's plain policy gradient,
whose weights are R - V(s) for VPG and R for REINFORCE (a model without a critic predicts V = 0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from proxima.algo.algorithms import PolicyLoss, get_algorithm
from proxima.algo.losses import (
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    ratio_diagnostics,
    value_loss,
)
from proxima.algo.optim import Adam, clip_grad_norm
from proxima.algo.storage import Batch, SequenceBatch, game_minibatches, minibatches
from proxima.policy.networks import ActorCritic


@dataclass(frozen=True)
class UpdateSettings:
    """What one update needs to know, and nothing else of a run's settings."""

    policy_loss: PolicyLoss  # the algorithm's policy term (proxima.algo.algorithms)
    update_epochs: int = 4
    num_minibatches: int = 4  # a minibatch is len(batch) // num_minibatches rows: samples, or env sequences
    clip_coef: float = 0.2
    norm_adv: bool = True
    clip_vloss: bool = False
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    value_norm_horizon: int = 10

    @classmethod
    def from_args(cls, args) -> UpdateSettings:
        """From a ``PPOArgs``: its algorithm's settings, and the value normalization's horizon."""
        names = [
            f.name for f in dataclasses.fields(cls) if f.name not in ("policy_loss", "value_norm_horizon")
        ]
        settings = {name: getattr(args.algorithm, name) for name in names}
        return cls(
            get_algorithm(args.algorithm.algo).policy_loss,
            **settings,
            value_norm_horizon=args.network.value_norm_horizon,
        )


def update(
    model: ActorCritic, optimizer: Adam, batch: Batch, settings: UpdateSettings, generator: torch.Generator
) -> dict:
    """Train on ``batch`` for ``update_epochs`` epochs, in minibatches of ``generator``'s order (the run's
    ``RunStreams.minibatches``, on the batch's device); return the update's debug variables (detail 12).

    As in CleanRL's ppo.py, the losses and KL estimates reported are those of the last minibatch; clipfrac is the
    mean over all minibatches.
    """
    clipfracs, losses, grad_norms = [], [], []
    params: list[Tensor] = list(model.parameters())
    # A value that a game's agents share (--no-critic-agent-index) is computed once per game: minibatches of
    # whole games then. Otherwise (and where an agent had left, so rows are not whole games) of samples.
    games = batch.games if model.agents_per_game is not None else None
    model.update_value_normalization(batch.present(batch.returns), settings.value_norm_horizon)
    # With --norm-value the critic's errors are measured in standard deviations of its targets, the scale its
    # network predicts in; dividing values, old values and returns alike keeps the clipped loss consistent.
    # The batch's share is divided once here; each minibatch divides only its new values.
    scale = model.normalization.value_scale()
    if scale is not None:
        batch = dataclasses.replace(batch, values=batch.values / scale, returns=batch.returns / scale)
    for _ in range(settings.update_epochs):
        for index in (
            minibatches(len(batch), settings.num_minibatches, generator)  # detail 6
            if games is None
            else game_minibatches(len(batch), games, settings.num_minibatches, generator)
        ):
            mb = batch[index]
            logprobs, entropy, values = model.evaluate(mb.obs, mb.actions, mb.sequences, games is not None)
            # sequences with steps of agents that had left: the samples alone
            if isinstance(mb, SequenceBatch) and mb.valid is not None:
                logprobs, entropy, values, mb = (
                    logprobs[mb.valid],
                    entropy[mb.valid],
                    values[mb.valid],
                    mb.samples(),
                )
            loss, pg_loss, v_loss, ent = minibatch_loss(
                logprobs, entropy, values, mb, settings, scale, model.critic is not None
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if settings.max_grad_norm > 0:
                grad_norms.append(clip_grad_norm(params, settings.max_grad_norm))  # detail 11
            optimizer.step()
            losses.append(loss.detach())

            diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, settings.clip_coef)
            clipfracs.append(diagnostics["clipfrac"])
        if settings.target_kl is not None and diagnostics["approx_kl"].item() > settings.target_kl:
            break  # early stopping on KL: the policy has already moved as far as we allow
    return {
        **grad_stats(losses, grad_norms),
        "value_loss": v_loss.item(),
        "policy_loss": pg_loss.item(),
        "entropy": ent.item(),
        "old_approx_kl": diagnostics["old_approx_kl"].item(),
        "approx_kl": diagnostics["approx_kl"].item(),
        "clipfrac": torch.stack(clipfracs).mean().item(),
    }


def minibatch_loss(
    logprobs: Tensor,
    entropy: Tensor,
    values: Tensor,
    mb: Batch,
    settings: UpdateSettings,
    scale: Tensor | None,
    has_critic: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One minibatch's loss from the policy's log-probs, entropies and values on it: ``(loss, policy loss,
    value loss, entropy)``. ``scale``: the value targets' std (``--norm-value``), which ``mb``'s values and
    returns are already divided by."""
    pg_loss = settings.policy_loss(logprobs, mb, settings.clip_coef, settings.norm_adv)
    if scale is not None:
        values = values / scale
    if not has_critic:
        v_loss = values.new_zeros(())  # REINFORCE: nothing to fit
    elif settings.clip_vloss:
        v_loss = clipped_value_loss(values, mb.values, mb.returns, settings.clip_coef)
    else:
        v_loss = value_loss(values, mb.returns)
    ent = entropy_bonus(entropy)
    loss = pg_loss + settings.vf_coef * v_loss - settings.ent_coef * ent  # detail 10: the bonus is subtracted
    return loss, pg_loss, v_loss, ent


@torch.no_grad()
def group_diagnostics(model: ActorCritic, batch: Batch, kinds: list[int], names: list[str]) -> dict:
    """The debug variables of each kind of agent (``kinds``: the kind of each agent index), after the update,
    over the whole batch: ``NAME/entropy``, ``NAME/approx_kl`` (from the rollout's policy), and the critic's
    ``NAME/value_loss`` (in the update's units) and ``NAME/explained_variance``. One forward pass."""
    logprobs, entropy, values = model.evaluate(batch.obs, batch.actions, batch.sequences)
    if isinstance(batch, SequenceBatch) and batch.valid is not None:
        logprobs, entropy, values, batch = (
            logprobs[batch.valid],
            entropy[batch.valid],
            values[batch.valid],
            batch.samples(),
        )
    value_scale = model.normalization.value_scale()
    scale = 1.0 if value_scale is None else value_scale
    kind = torch.tensor(kinds, device=batch.obs.device)[batch.obs[..., model.agent_column].long()]
    stats = {}
    for k, name in enumerate(names):
        rows = kind == k
        if not bool(rows.any()):
            continue
        logratio = logprobs[rows] - batch.logprobs[rows]
        stats[f"{name}/entropy"] = entropy[rows].mean().item()
        stats[f"{name}/approx_kl"] = ((logratio.exp() - 1.0) - logratio).mean().item()
        stats[f"{name}/value_loss"] = value_loss(values[rows] / scale, batch.returns[rows] / scale).item()
        stats[f"{name}/explained_variance"] = explained_variance(values[rows], batch.returns[rows])
    return stats


def grad_stats(losses: list[Tensor], grad_norms: list[Tensor]) -> dict:
    """The largest gradient norm before clipping, and where a NaN or infinity first appeared, if one did:
    in a minibatch's loss, or in its gradients while the loss was still finite (checked once per update)."""
    loss_ok = torch.isfinite(torch.stack(losses))
    grad_ok = torch.isfinite(torch.stack(grad_norms)) if grad_norms else torch.ones_like(loss_ok)
    stats: dict[str, float | str | None] = {
        "grad_norm": torch.stack(grad_norms).max().item() if grad_norms else None
    }
    if not bool(loss_ok.all() & grad_ok.all()):
        first = int((~(loss_ok & grad_ok)).nonzero()[0])
        stats["non_finite"] = "loss" if not loss_ok[first] else "gradients"
    return stats
