"""Many seeds as one computation (``--num-seeds N``): N independent agents whose parameters are stacked along a
leading axis, so that each forward and backward pass is one batched call (``torch.func.vmap`` over
``functional_call``) instead of N streams of small ops.

Each seed keeps its own ``ActorCritic``, whose parameters and buffers are *views* of the stacked tensors: what the
batched update writes, the seed's evaluation, checkpoint and saved agent see, and a normalization statistic that a
seed's model updates in place is the stacked one. Nothing is shared across seeds: each has its own random
generators (its run's ``seeding.RunStreams``, the solo run's), statistics, advantage normalization per minibatch, and gradient-norm clipping
(``clip_grad_norms``), and Adam step count (``optim.SeedAdam``: Adam is elementwise, so one Adam over the stacked
tensors steps each seed as its own would).
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
from torch.utils._pytree import tree_flatten, tree_unflatten

from proxima.encoders import FlattenEncoder
from proxima.envs import VecEnv
from proxima.evaluate import episode_quota, run_episodes
from proxima.losses import ratio_diagnostics
from proxima.networks import ActorCritic, Bf16Linear
from proxima.normalization import Normalization
from proxima.optim import SeedAdam
from proxima.rollout import RecurrentCollector, RolloutCollector
from proxima.storage import Batch, RolloutBuffer, SequenceBatch, minibatches
from proxima.update import UpdateSettings, grad_stats, minibatch_loss


class _Calls(nn.Module):
    """A model's methods by name, for ``functional_call`` (which calls ``forward``)."""

    def __init__(self, model: ActorCritic):
        super().__init__()
        self.model = model

    def forward(self, method: str, obs: Tensor, actions: Tensor | None = None, memory: tuple | None = None):
        # memory: a recurrent agent's (starts, h, c), its sequences' episode starts and memory before them
        if method == "evaluate":
            sequences = None if memory is None else (memory[0], memory[1:])
            return self.model.evaluate(obs, actions, sequences)
        if method == "sequence":  # logits, values and memory after the steps
            logits, values, (h, c) = self.model.forward_sequence(obs, memory[0], memory[1:])
            return logits, values, h, c
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
        self.plain = plain_mlps(models[0])
        self._base.model.lstm_by_steps = True  # nn.LSTM's fused kernel has no vmap batching rule
        self._frozen: set[int] = set()

    def __len__(self) -> int:
        return len(self.models)

    def call(
        self,
        method: str,
        obs: Tensor,
        actions: Tensor | None = None,
        weights: tuple | None = None,
        memory: tuple | None = None,
    ):
        """``model.METHOD(obs[j], actions[j])`` of every seed ``j`` at once; ``obs`` is ``(N, B, ...)``.
        ``weights``: ``weights_of(seeds)``, to compute for those seeds only (``obs`` then theirs). ``memory``:
        a recurrent agent's ``(starts, h, c)``, each with the seeds first (method ``sequence``, or
        ``evaluate`` of sequences)."""
        params, buffers = weights or (self.params, self.buffers)
        if self.plain and method != "evaluate" and not torch.is_grad_enabled():
            return self._plain_call(method, obs, params, buffers)

        def one(params, buffers, o, a, m):
            return functional_call(self._base, (params, buffers), (method, o, a, m), tie_weights=False)

        in_dims = (0, 0, 0, None if actions is None else 0, None if memory is None else 0)
        return vmap(one, in_dims=in_dims)(params, buffers, obs, actions, memory)

    def weights_of(self, seeds: Tensor) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """The parameters and buffers of ``seeds`` (indices), stacked as ``call`` takes them."""
        return tuple({k: v.index_select(0, seeds) for k, v in d.items()} for d in (self.params, self.buffers))

    # The rollout's and the evaluations' forward passes of an agent of plain MLPs (the usual case) go through
    # batched matmuls directly: vmap's fixed cost per call (hundreds of microseconds: it rebinds every tensor of
    # the model) would be most of a step's time at a rollout's small batches. The update keeps vmap.
    def _mlp(self, prefix: str, layers: nn.Module, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        if not isinstance(layers, nn.Sequential):
            return x  # the trunk's Identity
        for i, layer in enumerate(layers):
            weight, bias = params.get(f"{prefix}.{i}.weight"), params.get(f"{prefix}.{i}.bias")
            if isinstance(layer, Bf16Linear):  # its product in bf16, as the layer computes it
                with torch.autocast(x.device.type, dtype=torch.bfloat16):
                    x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2)).float()
            elif isinstance(layer, nn.Linear):
                x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            elif isinstance(layer, nn.LayerNorm):
                x = nn.functional.layer_norm(x, layer.normalized_shape, eps=layer.eps)
                x = torch.addcmul(bias.unsqueeze(1), x, weight.unsqueeze(1))
            else:
                x = layer(x)
        return x

    def _plain_call(self, method: str, obs: Tensor, params: dict[str, Tensor], buffers: dict[str, Tensor]):
        model = self._base.model
        features = self._mlp("model.trunk", model.trunk, obs.flatten(2).to(torch.float32), params)
        outputs = []
        if method in ("forward", "logits"):
            outputs.append(model._masked(self._mlp("model.actor", model.actor, features, params), obs))
        if method in ("forward", "value"):
            value = self._mlp("model.critic", model.critic, features, params).squeeze(-1)
            std = buffers.get("model.normalization.value_std")
            if std is not None:
                mean = buffers["model.normalization.value_mean"]
                value = torch.addcmul(mean.unsqueeze(1), value, std.unsqueeze(1))
            outputs.append(value)
        return tuple(outputs) if method == "forward" else outputs[0]

    def value_scale(self) -> Tensor | None:
        """Each seed's std of its value targets, ``(N,)`` (``--norm-value``; None without it)."""
        return self._value_std

    def named_groups(self, groups: list[dict]) -> list[dict]:
        """A seed's optimizer groups (``ActorCritic.param_groups``) as groups of the stacked parameters."""
        name_of = {id(p): f"model.{name}" for name, p in self.models[0].named_parameters()}
        return [{**g, "params": [self.params[name_of[id(p)]] for p in g["params"]]} for g in groups]

    # --- seeds that have finished: their weights no longer change (update_seeds), and the rollout leaves them
    # out (SeedModel) ---------------------------------------------------------------------------------------
    def freeze(self, j: int) -> None:
        self._frozen.add(j)

    @property
    def frozen(self) -> set[int]:
        return set(self._frozen)


def plain_mlps(model: ActorCritic) -> bool:
    """Whether ``model`` is a flat observation through MLPs of Linear (``Bf16Linear`` too), LayerNorm and
    activation layers only, which ``StackedModels`` computes with batched matmuls outside vmap."""

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
    seed), each seed's rows with its own statistics, computed for all seeds at once on the stacked statistics
    (``buffers``, of which each seed's ``Normalization`` holds views): ``RunningMeanStd.update``'s merge and
    ``Normalization``'s arithmetic, with the seeds on a leading axis. A finished seed's statistics no longer
    change; its rows are normalized with them, and nothing reads them but their action masks, which are not
    normalized (``SeedModel``)."""

    def __init__(self, norms: list[Normalization], buffers: dict[str, Tensor], rows: int, frozen: Callable):
        self.rows, self.frozen, self.n = rows, frozen, len(norms)
        first = norms[0]
        self.norm_obs, self.norm_reward, self.norm_value = first.norm_obs, first.norm_reward, first.norm_value
        self.obs_dtype = first.obs_dtype
        self.eps, self.clip_obs, self.clip_reward = first.eps, first.clip_obs, first.clip_reward
        self.elements = first.elements
        prefix = "model.normalization."
        self._obs_rms = [buffers[f"{prefix}obs_rms.{k}"] for k in ("mean", "var", "count")]
        self._return_rms = [buffers[f"{prefix}return_rms.{k}"] for k in ("mean", "var", "count")]

    def _merge(self, rms: list[Tensor], x: Tensor) -> None:
        """``RunningMeanStd.update`` of each live seed's statistics with its rows of ``x``, ``(N, rows, ...)``."""
        mean, var, count = rms
        x = x.to(torch.float64)
        n = x.shape[1]
        batch_mean, batch_var = x.mean(1), x.var(1, unbiased=False)
        if x[0, 0].numel() == 1:  # one number a sample (the return): torch's variance of a seed's flat rows,
            # as its solo run takes it, rounds otherwise than per row of the seeds' matrix
            batch_var = torch.stack([rows.var(0, unbiased=False) for rows in x])
        per_seed = (-1, *[1] * (mean.dim() - 1))
        delta = batch_mean - mean
        total = count + n
        t, c = total.view(per_seed), count.view(per_seed)
        new_mean = mean + delta * n / t
        new_var = (var * c + batch_var * n + delta.square() * c * n / t) / t
        frozen = self.frozen()
        if frozen:  # a finished seed keeps its statistics
            live = torch.ones(self.n, dtype=torch.bool, device=mean.device)
            live[sorted(frozen)] = False
            new_mean = torch.where(live.view(per_seed), new_mean, mean)
            new_var = torch.where(live.view(per_seed), new_var, var)
            total = torch.where(live, total, count)
        mean.copy_(new_mean)
        var.copy_(new_var)
        count.copy_(total)

    def _seeds(self, x: Tensor) -> Tensor:
        return x.view(self.n, self.rows, *x.shape[1:])

    def obs(self, obs: Tensor, update: bool = False, rows: None = None) -> Tensor:
        """``Normalization.obs`` for every seed's rows; ``rows`` is always None, as games of many agents are
        not batched (``check_seeds``)."""
        if not self.norm_obs:
            return obs
        x = self._seeds(obs)
        if update:
            self._merge(self._obs_rms, x)
        mean, var, _ = self._obs_rms
        std = (var + self.eps).sqrt().unsqueeze(1)
        normalized = ((x - mean.unsqueeze(1)) / std).clamp(-self.clip_obs, self.clip_obs).to(torch.float32)
        normalized = normalized.view(obs.shape)
        if self.elements is None:
            return normalized
        return torch.where(self.elements, normalized, obs.to(torch.float32))

    def reward(
        self, reward: Tensor, discounted_return: Tensor, update: bool = True, rows: None = None
    ) -> Tensor:
        if not self.norm_reward:
            return reward
        if update:
            self._merge(self._return_rms, self._seeds(discounted_return))
        # in the reward's dtype: a solo run divides by its std as a 0-dim tensor, which does not promote
        std = (self._return_rms[1] + self.eps).sqrt().to(reward.dtype).unsqueeze(1)
        scaled = (self._seeds(reward) / std).clamp(-self.clip_reward, self.clip_reward)
        return scaled.to(reward.dtype).view(reward.shape)


class SeedModel:
    """What the rollout steps with (``RolloutCollector``'s ``model``): the stacked seeds over all rows, each
    seed's actions drawn from its own stream.

    A finished seed is left out of the forward passes and the draws (``start``): its envs still step, since
    they share one vector env with the others', and are given the mode of uniform logits (an action that any
    env takes, its mask respected); its rows of the rollout hold what nothing reads."""

    def __init__(self, stacked: StackedModels, generators: list[torch.Generator], rows: int):
        self.stacked, self.generators, self.rows = (
            stacked,
            generators,
            rows,
        )  # generators: each seed's actions'
        self.head = stacked.head
        self.normalization = _Normalizations(
            [m.normalization for m in stacked.models], stacked.buffers, rows, lambda: stacked.frozen
        )
        self.start()

    def start(self) -> None:
        """Before each rollout: the seeds that still train, and the seeds and weights that its forward passes
        compute with (no step of it changes a weight)."""
        n, rows, frozen = len(self.stacked), self.rows, self.stacked.frozen
        device = next(iter(self.stacked.params.values())).device
        self.live, done = [j for j in range(n) if j not in frozen], sorted(frozen)
        self._place = {j: i for i, j in enumerate(self.live)}  # seed -> its place among the live ones
        # the live seeds' head parameters (a Gaussian's log-std), one row per row: no step of a rollout changes them
        live = torch.tensor(self.live, device=device)
        self._head_rows = {
            name: self.stacked.params[f"model.head.{name}"].detach().index_select(0, live)
            .repeat_interleave(rows, 0)
            for name, _ in self.head.named_parameters()
        }  # fmt: skip
        computed, self._weights = list(range(n)), None
        # Batched matmuls round each seed's rows alike whatever the other seeds (vmap's batched convolutions do
        # not: there every seed goes on through the forward passes). But torch's batched matmul of a single
        # matrix takes another kernel (a matrix-vector product for the critic's output): a lone live seed goes
        # through twice.
        if done and self.stacked.plain:
            computed = self.live * 2 if len(self.live) == 1 else self.live
            self._computed = torch.tensor(computed, device=device)
            self._weights = self.stacked.weights_of(self._computed)
        picked = [computed.index(j) for j in self.live]
        self._pick = None if picked == list(range(len(computed))) else torch.tensor(picked, device=device)
        self._done = torch.tensor(done, device=device)
        # the rows of all seeds, seed-major, as rows of [the live seeds' rows, the finished seeds' rows]
        place = torch.tensor(self.live + done, device=device).argsort()
        self._order = (place[:, None] * rows + torch.arange(rows, device=device)).flatten()
        self._zeros = torch.zeros(len(done) * rows, device=device)
        self._uniform = torch.zeros(len(done) * rows, self.head.logits_dim, device=device)

    def _seeds(self, obs: Tensor) -> Tensor:
        return obs.view(len(self.stacked), self.rows, *obs.shape[1:])

    def _call(self, method: str, obs: Tensor):
        """The live seeds' ``method`` on their rows of ``obs`` (all rows, seed-major), ``(live seeds, ...)``."""
        obs = self._seeds(obs)
        if self._weights is None:
            out = self.stacked.call(method, obs)
        else:
            out = self.stacked.call(method, obs[self._computed], weights=self._weights)
        if self._pick is None:
            return out
        return tuple(x[self._pick] for x in out) if isinstance(out, tuple) else out[self._pick]

    def _all_rows(self, live: Tensor, finished: Tensor) -> Tensor:
        """The live seeds' rows and the finished seeds' rows as the rows of all seeds."""
        return live if not len(self._done) else torch.cat([live, finished]).index_select(0, self._order)

    def act(self, obs: Tensor, noise: None = None) -> tuple[Tensor, Tensor, Tensor]:
        """``ActorCritic.act``; ``noise``: none (the collector's own generator is None), each seed draws from
        its own generator."""
        return self._draw(*self._call("forward", obs), obs)

    def _draw(self, logits: Tensor, values: Tensor, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Actions, log-probs and values of all rows from the live seeds' logits and values."""
        models, place, head = self.stacked.models, self._place, self.head
        # Only the draws need each seed's generator; the arithmetic on them is row by row, so one call for all
        # seeds gives each row what its seed's own call would, at a tenth of the calls per step. A head's
        # parameters (a Gaussian's log-std) are each seed's own: one row per row.
        noise = torch.cat([head.noise(logits[place[j]], self.generators[j]) for j in self.live])
        actions, logprobs = head.sample(logits.flatten(0, 1), noise, **self._head_rows)
        values = values.flatten()
        if not len(self._done):
            return actions, logprobs, values
        idle = self.head.mode(models[0]._masked(self._uniform, self._seeds(obs)[self._done].flatten(0, 1)))
        return (
            self._all_rows(actions, idle),
            self._all_rows(logprobs, self._zeros),
            self._all_rows(values, self._zeros),
        )

    def value(self, obs: Tensor) -> Tensor:
        return self._all_rows(self._call("value", obs).flatten(), self._zeros)

    # --- a recurrent agent's (--recurrent lstm), whose memory the collector carries for all rows: (h, c), each
    # (layers, rows of all seeds, hidden). Every seed goes through the LSTM, only the live ones' draws count.
    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]:
        return self.stacked.models[0].initial_memory(n, device)

    def _live(self, x: Tensor) -> Tensor:
        return x if self._pick is None else x[self._pick]

    def act_recurrent(
        self, obs: Tensor, starts: Tensor, memory, noise: None = None
    ) -> tuple[Tensor, Tensor, Tensor, tuple]:
        logits, values, memory = _one_step(self.stacked, obs, starts, memory, self.rows)
        return *self._draw(self._live(logits), self._live(values), obs), memory

    def recurrent_values(self, obs: Tensor, starts: Tensor | None, memory) -> Tensor:
        """The values of all rows after ``memory``, reset where ``starts`` (None: nowhere)."""
        starts = torch.zeros(obs.shape[0], device=obs.device) if starts is None else starts
        values = _one_step(self.stacked, obs, starts, memory, self.rows)[1]
        return self._all_rows(self._live(values).flatten(), self._zeros)


def _one_step(stacked: StackedModels, obs: Tensor, starts: Tensor, memory, rows: int):
    """One step of every seed's recurrent model on its rows (seed-major): logits ``(N, rows, ...)``, values
    ``(N, rows)``, and the memory after it, laid out as ``memory`` is (``(layers, N * rows, hidden)`` each)."""
    n = len(stacked)
    by_seed = (m.view(m.shape[0], n, rows, -1).transpose(0, 1) for m in memory)
    logits, values, h, c = stacked.call(
        "sequence", obs.view(n, 1, rows, *obs.shape[1:]), memory=(starts.view(n, 1, rows), *by_seed)
    )
    return logits[:, 0], values[:, 0], tuple(m.transpose(0, 1).flatten(1, 2) for m in (h, c))


class _Policies:
    """What ``run_episodes`` plays with: several models' deterministic policies over their rows (``rows`` each,
    in model order), each normalizing with its own frozen statistics."""

    def __init__(self, models: list[ActorCritic], rows: int):
        self.stacked = StackedModels(models, share=False)
        self.rows = rows
        self.normalization = _Normalizations(
            [m.normalization for m in models], self.stacked.buffers, rows, lambda: set()
        )
        self.lstm = models[0].lstm

    @torch.no_grad()
    def predict(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        obs = self.normalization.obs(obs)
        logits = self.stacked.call("logits", obs.view(len(self.stacked), self.rows, *obs.shape[1:]))
        return self.stacked.head.mode(logits.flatten(0, 1))

    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]:
        return self.stacked.models[0].initial_memory(n, device)

    @torch.no_grad()
    def predict_recurrent(self, obs: Tensor, starts: Tensor, memory, deterministic: bool = True):
        logits, _, memory = _one_step(
            self.stacked, self.normalization.obs(obs), starts.float(), memory, self.rows
        )
        return self.stacked.head.mode(logits.flatten(0, 1)), memory


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

    @torch.no_grad()
    def collect(self, model: SeedModel) -> tuple[Tensor, Tensor]:
        model.start()
        return super().collect(model)

    def _final_values(self, model: SeedModel, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.value(model.normalization.obs(final_obs))[rows]


class SeedRecurrentCollector(SeedCollector, RecurrentCollector):
    """``SeedCollector`` of a recurrent agent: the memory of all seeds' envs, each seed's rows through its own
    LSTM; all rows are valued after the memory, and the truncated ones kept."""

    def _final_values(self, model: SeedModel, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.recurrent_values(model.normalization.obs(final_obs), None, self.memory)[rows]

    def _values(self, model: SeedModel, obs: Tensor) -> Tensor:
        return model.recurrent_values(obs, self.next_done, self.memory)


def seed_batches(
    buf: RolloutBuffer, advantages: Tensor, returns: Tensor, seeds: int, sequences: bool = False
):
    """The rollout as each seed's flat batch, stacked: every field ``(N, T * E, ...)``, seed ``j``'s samples in
    the order of its solo run's ``RolloutBuffer.flatten``. ``sequences``: as each seed's ``SequenceBatch``
    (a recurrent agent's), stacked: every field ``(N, T, E, ...)``, the memory ``(N, layers, E, hidden)``."""

    def per_seed(x: Tensor) -> Tensor:  # (T, N * E, ...) -> (N, T, E, ...)
        steps, rows = x.shape[:2]
        return x.view(steps, seeds, rows // seeds, *x.shape[2:]).transpose(0, 1)

    parts = [per_seed(x) for x in (buf.obs, buf.actions, buf.logprobs, buf.values, advantages, returns)]
    if not sequences:
        return Batch(*(x.flatten(1, 2) for x in parts))
    return SequenceBatch(*parts, starts=per_seed(buf.dones), memory=tuple(per_seed(m) for m in buf.memory))


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
    stacked: StackedModels,
    optimizer: SeedAdam,
    batch: Batch,
    settings: UpdateSettings,
    generators: list[torch.Generator],
) -> list[dict | None]:
    """``proxima.update.update`` for every seed at once: the same epochs of minibatches, each seed's in its own
    order (from its ``generators[j]``, its run's ``RunStreams.minibatches``), one batched loss and backward pass per minibatch. With ``--target-kl`` a seed whose KL went past it
    stops its epochs as its solo run would, and the others go on. Returns each seed's debug variables (None
    for a finished seed)."""
    sequences = isinstance(batch, SequenceBatch)
    # A minibatch is gathered from the seeds' units (samples; a recurrent agent's env sequences, on the axis
    # after the steps) laid end to end, by each seed's own indices.
    axis = 2 if sequences else 1
    seeds, size = batch.obs.shape[0], batch.obs.shape[axis]
    live = [j for j in range(seeds) if j not in stacked.frozen]
    for j in live:
        stacked.models[j].update_value_normalization(batch.returns[j], settings.value_norm_horizon)
    scale = stacked.value_scale()
    if scale is not None:
        per_seed = scale.view(-1, *[1] * (batch.values.dim() - 1))
        batch = dataclasses.replace(batch, values=batch.values / per_seed, returns=batch.returns / per_seed)
    has_critic = stacked.models[0].critic is not None
    params = list(stacked.params.values())
    fields = [getattr(batch, f.name) for f in dataclasses.fields(Batch)]
    if sequences:  # each env sequence's episode starts and its memory before the rollout go with it
        fields += [batch.starts, *batch.memory]
    units = [x.movedim(axis, 1).flatten(0, 1) for x in fields]
    device = batch.obs.device

    def loss_of(params, buffers, fields: tuple[Tensor, ...], scale):
        mb = Batch(*fields[:6])  # vmap maps over tensors, tuples and dicts, not dataclasses
        memory = fields[6:] or None  # (starts, h, c)
        logprobs, entropy, values = functional_call(
            stacked._base, (params, buffers), ("evaluate", mb.obs, mb.actions, memory), tie_weights=False
        )
        loss, pg_loss, v_loss, ent = minibatch_loss(
            logprobs, entropy, values, mb, settings, scale, has_critic
        )
        diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, settings.clip_coef)
        return loss, pg_loss.detach(), v_loss.detach(), ent.detach(), diagnostics

    losses_of = vmap(loss_of, in_dims=(0, 0, 0, None if scale is None else 0))
    training = live  # the seeds that go on with this update's epochs
    steps = []  # each minibatch's seeds, and what it gave them: (seeds, loss, grad norms, outputs)
    for _ in range(settings.update_epochs):
        orders = torch.stack(
            [torch.stack(minibatches(size, settings.num_minibatches, generators[j])) for j in training]
        )  # (training seeds, minibatches, minibatch size)
        which = torch.tensor(training, device=device)
        offsets = which[:, None] * size
        own_scale = None if scale is None else scale[which]
        for k in range(orders.shape[1]):
            index = (orders[:, k] + offsets).flatten()
            mb = tuple(
                x.index_select(0, index).view(len(training), -1, *x.shape[1:]).movedim(1, axis) for x in units
            )
            # Only these seeds are computed with: the others' gradients are zero, and Adam leaves their rows.
            weights = (
                (stacked.params, stacked.buffers) if len(training) == seeds else stacked.weights_of(which)
            )
            loss, *outputs = (losses_of if len(training) > 1 else _alone(loss_of))(*weights, mb, own_scale)
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # each seed's loss reaches its own parameters only
            norms = clip_grad_norms(params, settings.max_grad_norm) if settings.max_grad_norm > 0 else None
            optimizer.step(training, finished=stacked.frozen)
            steps.append((training, loss.detach(), norms, outputs))
        if settings.target_kl is not None:  # --target-kl's early stopping, on each seed's last minibatch
            kl = outputs[-1]["approx_kl"].tolist()
            training = [j for j, x in zip(training, kl, strict=True) if not x > settings.target_kl]
            if not training:
                break
    steps = _on_host(steps)
    return [None if j in stacked.frozen else _seed_stats(steps, j) for j in range(seeds)]


def _on_host(tree):
    """``tree`` with its tensors on the CPU, copied off the device at once: on a GPU every ``.item()`` of each
    seed's debug variables would wait for the device on its own."""
    leaves, spec = tree_flatten(tree)
    tensors = [x for x in leaves if isinstance(x, Tensor)]
    if not tensors or tensors[0].device.type == "cpu":
        return tree
    flat = torch.cat([x.detach().reshape(-1).double() for x in tensors]).cpu()  # float64: exact for all
    host = iter(flat.split([x.numel() for x in tensors]))
    leaves = [next(host).view(x.shape).to(x.dtype) if isinstance(x, Tensor) else x for x in leaves]
    return tree_unflatten(leaves, spec)


def _alone(loss_of: Callable) -> Callable:
    """``loss_of`` for one seed, called on its own tensors without vmap, its outputs stacked as vmap's would be:
    a batch's last live seed trains about as fast as a solo run (vmap's fixed cost per call is about a solo
    minibatch's), an MLP agent through its solo run's kernels (an LSTM stays ``lstm_by_steps``)."""

    def one(params, buffers, fields, scale):
        *losses, diagnostics = loss_of(
            {k: v[0] for k, v in params.items()},
            {k: v[0] for k, v in buffers.items()},
            tuple(x[0] for x in fields),
            None if scale is None else scale[0],
        )
        return *(x.unsqueeze(0) for x in losses), {k: v.unsqueeze(0) for k, v in diagnostics.items()}

    return one


def _seed_stats(steps: list[tuple], j: int) -> dict:
    """Seed ``j``'s debug variables from the minibatches it trained on, as ``proxima.update.update`` gives
    them: the last one's losses and KL estimates, the mean clip fraction, the largest gradient norm."""
    taken = [(seeds.index(j), loss, norms, outputs) for seeds, loss, norms, outputs in steps if j in seeds]
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
