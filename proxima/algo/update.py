"""The update phase: epochs of minibatch gradient steps on one rollout (details 6-11 in docs/SEEDS.md).

PPO, VPG and REINFORCE share all of it and differ only in the policy term (``UpdateSettings.policy_loss``,
from ``proxima.algo.algorithms``): PPO's clipped surrogate, or the policy-gradient homework's plain policy gradient,
whose weights are R - V(s) for VPG and R for REINFORCE (a model without a critic predicts V = 0).

``learn`` is the update, written once; what differs between one model (``Solo``) and N stacked seeds
(``proxima.scale.batched.SeedLearner``, ``--num-seeds``) enters through a ``Learner``. Your own loss functions,
written to the PPO tutorial's signatures, enter through ``UpdateSettings.own`` (``proxima.algo.custom``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.utils._pytree import tree_flatten, tree_unflatten

from proxima.algo.algorithms import PolicyLoss, get_algorithm
from proxima.algo.custom import OnMinibatch, OwnTerms
from proxima.algo.losses import clipped_value_loss, entropy_bonus, ratio_diagnostics, value_loss
from proxima.algo.optim import Adam, clip_grad_norm
from proxima.algo.storage import Batch
from proxima.policy.protocol import Learned


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
    # your loss functions, adapted (proxima.algo.custom.in_the_loop); None: proxima's own terms
    own: OwnTerms | None = None

    @classmethod
    def from_args(cls, args, own: OwnTerms | None = None) -> UpdateSettings:
        """From a ``PPOArgs``: its algorithm's settings, and the value normalization's horizon; ``own``: your
        loss functions, adapted."""
        not_args = ("policy_loss", "value_norm_horizon", "own")
        settings = {
            f.name: getattr(args.algorithm, f.name) for f in dataclasses.fields(cls) if f.name not in not_args
        }
        loss, horizon = get_algorithm(args.algorithm.algo).policy_loss, args.network.value_norm_horizon
        return cls(loss, **settings, value_norm_horizon=horizon, own=own)


class Learner(Protocol):
    """What ``learn`` trains: one model (``Solo``) or N stacked seeds (``proxima.scale.batched.SeedLearner``),
    its ``members``, each with its own minibatch order, gradient clipping and ``--target-kl`` test."""

    members: int
    training: list[int]  # the members that go on with this update's epochs

    @property
    def optimizer(self) -> Adam: ...

    def minibatches(self) -> Iterable[Any]:
        """One epoch's minibatches of the training members, each member's in its own order (detail 6)."""
        ...

    def loss(self, mb: Any) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
        """``minibatch_loss`` of each training member on its share of ``mb``, each output ``(members,)``."""
        ...

    def clip(self, max_norm: float) -> Tensor:
        """Each member's global gradient-norm clipping (detail 11); its norms before, ``(members,)``."""
        ...

    def step(self) -> None: ...


def learn(learner: Learner, settings: UpdateSettings) -> list[dict | None]:
    """Train ``learner``'s members for ``update_epochs`` epochs of minibatches; return each member's debug variables
    (detail 12; None for one that does not train). With ``--target-kl`` a member whose KL went past it stops its
    epochs and the others go on.

    As in CleanRL's ppo.py, the losses and KL estimates reported are those of the last minibatch; clipfrac is the
    mean over all minibatches.
    """
    live, steps = learner.training, []  # each minibatch's members, and what it gave them
    for _ in range(settings.update_epochs):
        for mb in learner.minibatches():
            loss, *outputs, diagnostics = learner.loss(mb)
            learner.optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # each member's loss reaches its own parameters only
            norms = learner.clip(settings.max_grad_norm) if settings.max_grad_norm > 0 else None
            learner.step()
            steps.append((learner.training, loss.detach(), norms, (*outputs, diagnostics)))
        if settings.target_kl is not None:  # early stopping on KL: the policy has moved as far as we allow
            kl = diagnostics["approx_kl"].tolist()
            learner.training = [
                j for j, x in zip(learner.training, kl, strict=True) if not x > settings.target_kl
            ]
            if not learner.training:
                break
    steps = _on_host(steps)
    return [_member_stats(steps, j) if j in live else None for j in range(learner.members)]


def update(
    model: Learned, optimizer: Adam, batch: Batch, settings: UpdateSettings, generator: torch.Generator
) -> dict:
    """``learn`` for one model, in minibatches of ``generator``'s order (the run's ``RunStreams.minibatches``, on
    the batch's device); its debug variables."""
    stats = learn(Solo(model, optimizer, batch, settings, generator), settings)[0]
    assert stats is not None
    return stats


class Solo:
    """One model as ``learn``'s only member."""

    members = 1

    def __init__(
        self,
        model: Learned,
        optimizer: Adam,
        batch: Batch,
        settings: UpdateSettings,
        generator: torch.Generator,
    ):
        self.model, self.optimizer, self.settings, self.generator = model, optimizer, settings, generator
        self.training, self.params = [0], list[Tensor](model.parameters())
        model.update_value_normalization(batch.samples()[0].returns, settings.value_norm_horizon)
        # With --norm-value the critic's errors are measured in standard deviations of its targets, the scale its
        # network predicts in; dividing values, old values and returns alike keeps the clipped loss consistent.
        # The batch's share is divided once here; each minibatch divides only its new values.
        self.scale = model.normalization.value_scale()
        if self.scale is not None:
            batch = dataclasses.replace(
                batch, values=batch.values / self.scale, returns=batch.returns / self.scale
            )
        self.batch = batch

    def minibatches(self) -> Iterable[Batch]:
        indices = self.batch.minibatches(self.settings.num_minibatches, self.generator)
        return (self.batch[index] for index in indices)

    def loss(self, mb: Batch) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
        own, on = self.settings.own, None
        if own is None:
            logprobs, entropy, values = mb.evaluate(self.model)
        else:  # the same, and the policy on the minibatch as your functions take it
            (logprobs, entropy, values), on = own.evaluate(self.model, mb, self.scale)
        mb, (logprobs, entropy, values) = mb.samples(logprobs, entropy, values)  # sequences: their samples
        critic = self.model.critic is not None
        return one_member(
            minibatch_loss(logprobs, entropy, values, mb, self.settings, self.scale, critic, on)
        )

    def clip(self, max_norm: float) -> Tensor:
        return clip_grad_norm(self.params, max_norm).unsqueeze(0)

    def step(self) -> None:
        self.optimizer.step()


def one_member(outputs: tuple) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
    """``minibatch_loss``'s outputs of one member as those of many (``(1,)`` each)."""
    *losses, diagnostics = outputs
    return *(x.unsqueeze(0) for x in losses), {k: v.unsqueeze(0) for k, v in diagnostics.items()}


def minibatch_loss(
    logprobs: Tensor,
    entropy: Tensor,
    values: Tensor,
    mb: Batch,
    settings: UpdateSettings,
    scale: Tensor | None,
    has_critic: bool,
    on: OnMinibatch | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
    """One minibatch's loss from the policy's log-probs, entropies and values on it, and what an update reports
    of it: ``(loss, policy loss, value loss, entropy, ratio_diagnostics)``, all but the loss detached.
    ``scale``: the value targets' std (``--norm-value``), which ``mb``'s values and returns are already divided
    by. ``on``: the policy on ``mb`` as ``settings.own``'s functions take it, whose terms replace proxima's."""
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
    if on is None:  # detail 10: the bonus is subtracted
        loss = pg_loss + settings.vf_coef * v_loss - settings.ent_coef * ent
    else:
        assert settings.own is not None  # on is the policy as its functions take it
        loss, pg_loss, v_loss = settings.own.loss(on, pg_loss, v_loss, ent, settings)
    diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, settings.clip_coef)
    return loss, pg_loss.detach(), v_loss.detach(), ent.detach(), diagnostics


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


def _member_stats(steps: list[tuple], j: int) -> dict:
    """Member ``j``'s debug variables from the minibatches it trained on: the last one's losses and KL
    estimates, the mean clip fraction, the largest gradient norm."""
    taken = [
        (members.index(j), loss, norms, outputs) for members, loss, norms, outputs in steps if j in members
    ]
    i, _, _, (pg_loss, v_loss, ent, diagnostics) = taken[-1]
    return {
        **grad_stats([loss[i] for i, loss, _, _ in taken], [n[j] for _, _, n, _ in taken if n is not None]),
        "value_loss": v_loss[i].item(),
        "policy_loss": pg_loss[i].item(),
        "entropy": ent[i].item(),
        "old_approx_kl": diagnostics["old_approx_kl"][i].item(),
        "approx_kl": diagnostics["approx_kl"][i].item(),
        "clipfrac": torch.stack([out[3]["clipfrac"][i] for i, _, _, out in taken]).mean().item(),
    }


def _on_host(tree):
    """``tree`` with its tensors on the CPU, copied off the device at once: on a GPU every ``.item()`` of each
    member's debug variables would wait for the device on its own."""
    leaves, spec = tree_flatten(tree)
    tensors = [x for x in leaves if isinstance(x, Tensor)]
    if not tensors or tensors[0].device.type == "cpu":
        return tree
    flat = torch.cat([x.detach().reshape(-1).double() for x in tensors]).cpu()  # float64: exact for all
    host = iter(flat.split([x.numel() for x in tensors]))
    leaves = [next(host).view(x.shape).to(x.dtype) if isinstance(x, Tensor) else x for x in leaves]
    return tree_unflatten(leaves, spec)
