"""Many seeds as one computation (``--num-seeds N``): N independent agents whose parameters are stacked along a
leading axis, so that each forward and backward pass is one batched call (``torch.func.vmap`` over
``functional_call``) instead of N streams of small ops.

Each seed keeps its own ``ActorCritic``, whose parameters and buffers are *views* of the stacked tensors: what the
batched update writes, the seed's evaluation, checkpoint and saved agent see, and a normalization statistic that a
seed's model updates in place is the stacked one. Nothing is shared across seeds: each has its own random stream
(``SeedStreams``), statistics, advantage normalization per minibatch, and gradient-norm clipping
(``clip_grad_norms``); Adam is elementwise, so one Adam over the stacked tensors steps each seed as its own would.
A seed's run is thus the algorithm of a solo run with its seed, on the same env seeds and random draws; only
the batched kernels round differently (``tests/test_num_seeds.py`` measures by how much).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from proxima.encoders import FlattenEncoder
from proxima.envs import VecEnv
from proxima.evaluate import episode_quota, run_episodes
from proxima.losses import ratio_diagnostics
from proxima.networks import ActorCritic
from proxima.normalization import Normalization
from proxima.optim import Adam
from proxima.rollout import RolloutCollector
from proxima.storage import Batch, RolloutBuffer, minibatches
from proxima.update import UpdateSettings, grad_stats, minibatch_loss


class SeedStreams:
    """Each seed's own stream of torch's global generator, as a solo run with that seed would draw from it: the
    generator's state is swapped in around each of the seed's draws (action samples, minibatch orders), so that
    the seed's code is the solo run's own."""

    def __init__(self, states: list[Tensor]):
        self.states = states

    def each(self, draw: Callable[[int], object], seeds: list[int] | None = None) -> list:
        """``[draw(j) for each seed j]`` (of ``seeds``, default all), each under seed ``j``'s stream."""
        outer = torch.get_rng_state()
        results = []
        try:
            for j in range(len(self.states)) if seeds is None else seeds:
                torch.set_rng_state(self.states[j])
                results.append(draw(j))
                self.states[j] = torch.get_rng_state()
        finally:
            torch.set_rng_state(outer)
        return results


class _Calls(nn.Module):
    """A model's methods by name, for ``functional_call`` (which calls ``forward``)."""

    def __init__(self, model: ActorCritic):
        super().__init__()
        self.model = model

    def forward(self, method: str, obs: Tensor, actions: Tensor | None = None):
        if method == "evaluate":
            return self.model.evaluate(obs, actions)
        return getattr(self.model, method)(obs)  # forward, value or logits


class StackedModels:
    """N models of one architecture with their parameters and buffers stacked (``params``: the leaves the
    optimizer steps); each model's own tensors become views of these."""

    def __init__(self, models: list[ActorCritic], share: bool = True):
        calls = [_Calls(m) for m in models]
        self.params, self.buffers = stack_module_state(calls)
        for j, module in enumerate(calls if share else ()):  # else the stack is a copy
            for name, p in module.named_parameters():
                p.data = self.params[name].detach()[j]
            for name, b in module.named_buffers():
                b.data = self.buffers[name][j]
        self.models = models
        self.head = models[0].head
        self._base = copy.deepcopy(calls[0]).to("meta")  # the architecture, without tensors of its own
        # a CNN lays its images out channels-last, which vmap does not take: the default layout here
        for module in self._base.modules():
            if getattr(module, "memory_format", None) is not None:
                module.memory_format = torch.contiguous_format
        self._value_std = self.buffers.get("model.normalization.value_std")
        self._plain = plain_mlps(models[0])
        self._frozen: dict[int, dict[str, Tensor]] = {}

    def __len__(self) -> int:
        return len(self.models)

    def call(self, method: str, obs: Tensor, actions: Tensor | None = None):
        """``model.METHOD(obs[j], actions[j])`` of every seed ``j`` at once; ``obs`` is ``(N, B, ...)``."""
        if self._plain and method != "evaluate" and not torch.is_grad_enabled():
            return self._plain_call(method, obs)

        def one(params, buffers, o, a):
            return functional_call(self._base, (params, buffers), (method, o, a), tie_weights=False)

        in_dims = (0, 0, 0, None if actions is None else 0)
        return vmap(one, in_dims=in_dims)(self.params, self.buffers, obs, actions)

    # The rollout's and the evaluations' forward passes of an agent of plain MLPs (the usual case) go through
    # batched matmuls directly: vmap's fixed cost per call (hundreds of microseconds: it rebinds every tensor of
    # the model) would be most of a step's time at a rollout's small batches. The update keeps vmap.
    def _mlp(self, prefix: str, layers: nn.Module, x: Tensor) -> Tensor:
        if not isinstance(layers, nn.Sequential):
            return x  # the trunk's Identity
        for i, layer in enumerate(layers):
            weight, bias = self.params.get(f"{prefix}.{i}.weight"), self.params.get(f"{prefix}.{i}.bias")
            if isinstance(layer, nn.Linear):
                x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            elif isinstance(layer, nn.LayerNorm):
                x = nn.functional.layer_norm(x, layer.normalized_shape, eps=layer.eps)
                x = torch.addcmul(bias.unsqueeze(1), x, weight.unsqueeze(1))
            else:
                x = layer(x)
        return x

    def _plain_call(self, method: str, obs: Tensor):
        model = self._base.model
        features = self._mlp("model.trunk", model.trunk, obs.flatten(2).to(torch.float32))
        outputs = []
        if method in ("forward", "logits"):
            outputs.append(model._masked(self._mlp("model.actor", model.actor, features), obs))
        if method in ("forward", "value"):
            value = self._mlp("model.critic", model.critic, features).squeeze(-1)
            if self._value_std is not None:
                mean = self.buffers["model.normalization.value_mean"]
                value = torch.addcmul(mean.unsqueeze(1), value, self._value_std.unsqueeze(1))
            outputs.append(value)
        return tuple(outputs) if method == "forward" else outputs[0]

    def value_scale(self) -> Tensor | None:
        """Each seed's std of its value targets, ``(N,)`` (``--norm-value``; None without it)."""
        return self._value_std

    def named_groups(self, groups: list[dict]) -> list[dict]:
        """A seed's optimizer groups (``ActorCritic.param_groups``) as groups of the stacked parameters."""
        name_of = {id(p): f"model.{name}" for name, p in self.models[0].named_parameters()}
        return [{**g, "params": [self.params[name_of[id(p)]] for p in g["params"]]} for g in groups]

    # --- seeds that have finished: their weights no longer change -------------------------------------
    def freeze(self, j: int) -> None:
        self._frozen[j] = {name: p.detach()[j].clone() for name, p in self.params.items()}

    @property
    def frozen(self) -> set[int]:
        return set(self._frozen)

    @torch.no_grad()
    def restore_frozen(self) -> None:
        """Put back the weights of the finished seeds, which the batched step moved along with the rest."""
        for j, saved in self._frozen.items():
            for name, p in self.params.items():
                p[j] = saved[name]


def plain_mlps(model: ActorCritic) -> bool:
    """Whether ``model`` is a flat observation through MLPs of Linear, LayerNorm and activation layers only,
    which ``StackedModels`` computes with batched matmuls outside vmap."""

    def plain(layers) -> bool:
        return isinstance(layers, nn.Identity) or (
            isinstance(layers, nn.Sequential)
            and all(isinstance(m, nn.Linear | nn.LayerNorm) or not list(m.parameters()) for m in layers)
        )

    return (
        isinstance(model.encoder, FlattenEncoder)
        and model.lstm is None
        and model.actor_index is None
        and model.critic is not None
        and all(plain(layers) for layers in (model.trunk, model.actor, model.critic))
    )


class _Normalizations:
    """The seeds' observation and reward normalization over the rows of all of them (seed-major, ``rows`` a
    seed), each seed's rows with its own statistics; a finished seed's statistics no longer change."""

    def __init__(self, norms: list[Normalization], rows: int, frozen: Callable[[], set[int]]):
        self.norms, self.rows, self.frozen = norms, rows, frozen
        first = norms[0]
        self.norm_obs, self.norm_reward, self.norm_value = first.norm_obs, first.norm_reward, first.norm_value
        self.obs_dtype = first.obs_dtype

    def _each(self, fn, *tensors: Tensor) -> Tensor:
        done = self.frozen()
        parts = [t.split(self.rows) for t in tensors]
        return torch.cat([fn(n, j not in done, *(p[j] for p in parts)) for j, n in enumerate(self.norms)])

    def obs(self, obs: Tensor, update: bool = False) -> Tensor:
        if not self.norm_obs:
            return obs
        return self._each(lambda n, live, o: n.obs(o, update=update and live), obs)

    def reward(self, reward: Tensor, discounted_return: Tensor, update: bool = True) -> Tensor:
        if not self.norm_reward:
            return reward
        return self._each(
            lambda n, live, r, g: n.reward(r, g, update=update and live), reward, discounted_return
        )


class SeedModel:
    """What the rollout steps with (``RolloutCollector``'s ``model``): the stacked seeds over all rows, each
    seed's actions drawn from its own stream."""

    def __init__(self, stacked: StackedModels, streams: SeedStreams, rows: int):
        self.stacked, self.streams, self.rows = stacked, streams, rows
        self.head = stacked.head
        self.normalization = _Normalizations(
            [m.normalization for m in stacked.models], rows, lambda: stacked.frozen
        )

    def _seeds(self, obs: Tensor) -> Tensor:
        return obs.view(len(self.stacked), self.rows, *obs.shape[1:])

    def act(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logits, values = self.stacked.call("forward", self._seeds(obs))
        # each seed's own head: a Gaussian's log-std is one of the seed's parameters
        drawn = self.streams.each(lambda j: self.stacked.models[j].head.sample(logits[j]))
        actions, logprobs = (torch.cat(parts) for parts in zip(*drawn, strict=True))
        return actions, logprobs, values.flatten()

    def value(self, obs: Tensor) -> Tensor:
        return self.stacked.call("value", self._seeds(obs)).flatten()


class _Policies:
    """What ``run_episodes`` plays with: several models' deterministic policies over their rows (``rows`` each,
    in model order), each normalizing with its own frozen statistics."""

    lstm = None

    def __init__(self, models: list[ActorCritic], rows: int):
        self.stacked = StackedModels(models, share=False)
        self.rows = rows
        self.normalization = _Normalizations([m.normalization for m in models], rows, lambda: set())

    @torch.no_grad()
    def predict(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        obs = self.normalization.obs(obs)
        logits = self.stacked.call("logits", obs.view(len(self.stacked), self.rows, *obs.shape[1:]))
        return self.stacked.head.mode(logits.flatten(0, 1))


def deterministic_returns(
    models: list[ActorCritic],
    envs: Callable[[int], VecEnv],
    episodes: int,
    rows: int,
    seeds: list[int],
    name: str,
) -> list[np.ndarray]:
    """Each model's returns of ``episodes`` deterministic episodes on ``rows`` envs seeded ``seeds[j]`` + k, as
    ``run_episodes`` gives them for one model alone, from one vector env of all (``envs(n)`` makes one of
    ``n`` envs) and one stacked forward pass per step."""
    quota = episode_quota(episodes, rows)
    returns = run_episodes(
        _Policies(models, rows), envs(len(models) * rows), episodes * len(models), deterministic=True,
        seed=[s + k for s in seeds for k in range(rows)], name=name, quota=np.tile(quota, len(models)),
    )  # fmt: skip
    return list(returns.reshape(len(models), episodes))


class SeedCollector(RolloutCollector):
    """The rollout of all seeds' envs (one vector env, seed-major). A truncated episode's final observation is
    valued with its own seed's critic: all rows are valued, and the truncated ones kept."""

    def _final_values(self, model: SeedModel, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.value(model.normalization.obs(final_obs))[rows]


def seed_batches(buf: RolloutBuffer, advantages: Tensor, returns: Tensor, seeds: int) -> Batch:
    """The rollout as each seed's flat batch, stacked: every field ``(N, T * E, ...)``, seed ``j``'s samples in
    the order of its solo run's ``RolloutBuffer.flatten``."""

    def per_seed(x: Tensor) -> Tensor:
        steps, rows = x.shape[:2]
        return x.view(steps, seeds, rows // seeds, *x.shape[2:]).transpose(0, 1).flatten(1, 2)

    return Batch(
        *(per_seed(x) for x in (buf.obs, buf.actions, buf.logprobs, buf.values, advantages, returns))
    )


def clip_grad_norms(params: list[Tensor], max_norm: float) -> Tensor:
    """Each seed's global gradient-norm clipping over its own parameters (detail 11), as
    ``torch.nn.utils.clip_grad_norm_`` does for one; returns the seeds' norms before clipping, ``(N,)``."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))
    return norms


def update_seeds(
    stacked: StackedModels, optimizer: Adam, batch: Batch, settings: UpdateSettings, streams: SeedStreams
) -> list[dict | None]:
    """``proxima.update.update`` for every seed at once: the same epochs of minibatches, each seed's in its own
    order, one batched loss and backward pass per minibatch. Returns each seed's debug variables (None for a
    finished seed)."""
    seeds, size = batch.obs.shape[:2]
    live = [j for j in range(seeds) if j not in stacked.frozen]
    for j in live:
        stacked.models[j].update_value_normalization(batch.returns[j], settings.value_norm_horizon)
    scale = stacked.value_scale()
    if scale is not None:
        batch = dataclasses.replace(
            batch, values=batch.values / scale[:, None], returns=batch.returns / scale[:, None]
        )
    has_critic = stacked.models[0].critic is not None
    params = list(stacked.params.values())
    # a minibatch is gathered from the seeds' samples laid end to end, by each seed's own indices
    flat = [getattr(batch, f.name).flatten(0, 1) for f in dataclasses.fields(Batch)]
    device = batch.obs.device
    offsets = torch.tensor(live, device=device)[:, None] * size
    # The finished seeds' weights no longer change (restore_frozen): only the others' are computed with.
    alive = None if len(live) == seeds else torch.tensor(live, device=device)

    def of_live(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
        return tensors if alive is None else {k: v.index_select(0, alive) for k, v in tensors.items()}

    def loss_of(params, buffers, fields: tuple[Tensor, ...], scale):
        mb = Batch(*fields)  # vmap maps over tensors, tuples and dicts, not dataclasses
        logprobs, entropy, values = functional_call(
            stacked._base, (params, buffers), ("evaluate", mb.obs, mb.actions), tie_weights=False
        )
        loss, pg_loss, v_loss, ent = minibatch_loss(
            logprobs, entropy, values, mb, settings, scale, has_critic
        )
        diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, settings.clip_coef)
        return loss, pg_loss.detach(), v_loss.detach(), ent.detach(), diagnostics

    losses_of = vmap(loss_of, in_dims=(0, 0, 0, None if scale is None else 0))
    losses, grad_norms, clipfracs = [], [], []
    for _ in range(settings.update_epochs):
        orders = torch.stack(
            streams.each(lambda j: torch.stack(minibatches(size, settings.num_minibatches, device)), live)
        )  # (live seeds, minibatches, minibatch size)
        for k in range(orders.shape[1]):
            index = (orders[:, k] + offsets).flatten()
            mb = tuple(x.index_select(0, index).view(len(live), -1, *x.shape[1:]) for x in flat)
            live_scale = scale if alive is None or scale is None else scale[alive]
            loss, pg_loss, v_loss, ent, diagnostics = losses_of(
                of_live(stacked.params), of_live(stacked.buffers), mb, live_scale
            )
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # each seed's loss reaches its own parameters only
            if settings.max_grad_norm > 0:
                grad_norms.append(clip_grad_norms(params, settings.max_grad_norm))
            optimizer.step()
            stacked.restore_frozen()
            losses.append(loss.detach())
            clipfracs.append(diagnostics["clipfrac"])
    stats: list = [None] * seeds
    clipfrac = torch.stack(clipfracs).mean(0).tolist()
    last = {
        "value_loss": v_loss.tolist(),
        "policy_loss": pg_loss.tolist(),
        "entropy": ent.tolist(),
        "old_approx_kl": diagnostics["old_approx_kl"].tolist(),
        "approx_kl": diagnostics["approx_kl"].tolist(),
    }
    for i, j in enumerate(live):  # i: the seed's place among the live ones, j: among all
        stats[j] = {
            **grad_stats([x[i] for x in losses], [x[j] for x in grad_norms]),
            **{name: values[i] for name, values in last.items()},
            "clipfrac": clipfrac[i],
        }
    return stats
