"""Several agents' networks as one: their parameters stacked along a leading axis, each forward pass one
batched call (``torch.func.vmap`` over ``functional_call``, or batched matmuls for plain MLPs). A batched run's
seeds (``proxima.scale.batched``) train this way, and an evaluation plays several candidates at once with it
(``proxima.run.evaluate.deterministic_returns``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from proxima.policy.encoders import FlattenEncoder
from proxima.policy.multiagent import MultiAgentActorCritic
from proxima.policy.networks import ActorCritic, Bf16Linear
from proxima.policy.normalization import Normalization, merged_moments


class _Calls(nn.Module):
    """A model's methods by name, for ``functional_call`` (which calls ``forward``)."""

    def __init__(self, model: ActorCritic):
        super().__init__()
        self.model = model

    def forward(self, method: str, obs: Tensor, actions: Tensor | None = None, memory: tuple | None = None):
        # memory: a recurrent agent's (starts, h, c), its sequences' episode starts and memory before them
        if method == "evaluate":
            sequences = None if memory is None else (memory[0], memory[1:])
            assert actions is not None  # evaluate is of the actions taken
            return self.model.evaluate(obs, actions, sequences)
        if method == "sequence":  # logits, values and memory after the steps
            assert memory is not None  # a sequence starts from its memory
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
        for part in self._base.modules():
            if getattr(part, "memory_format", None) is not None:
                part.memory_format = torch.contiguous_format  # type: ignore[assignment]  # an attribute, not a tensor
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
        params, buffers = (
            {k: v.index_select(0, seeds) for k, v in d.items()} for d in (self.params, self.buffers)
        )
        return params, buffers

    # The rollout's and the evaluations' forward passes of an agent of plain MLPs (the usual case) go through
    # batched matmuls directly: vmap's fixed cost per call (hundreds of microseconds: it rebinds every tensor of
    # the model) would be most of a step's time at a rollout's small batches. The update keeps vmap.
    def _mlp(self, prefix: str, layers: nn.Module, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        if not isinstance(layers, nn.Sequential):
            return x  # the trunk's Identity
        for i, layer in enumerate(layers):
            # present for the layers that use them: proxima's Linear and LayerNorm have both (plain_mlps)
            weight = cast(Tensor, params.get(f"{prefix}.{i}.weight"))
            bias = cast(Tensor, params.get(f"{prefix}.{i}.bias"))
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
            assert model.critic is not None  # plain_mlps: a plain model has its critic
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
        and not isinstance(model, MultiAgentActorCritic)  # its rows are cut into the actor's and the critic's
        and model.critic is not None
        and all(plain(layers) for layers in (model.trunk, model.actor, model.critic))
    )


class StackedNormalizations:
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
        batch_mean, batch_var = x.mean(1), x.var(1, unbiased=False)
        if x[0, 0].numel() == 1:  # one number a sample (the return): torch's variance of a seed's flat rows,
            # as its solo run takes it, rounds otherwise than per row of the seeds' matrix
            batch_var = torch.stack([rows.var(0, unbiased=False) for rows in x])
        per_seed = (-1, *[1] * (mean.dim() - 1))
        merged = merged_moments(mean, var, count.view(per_seed), batch_mean, batch_var, x.shape[1])
        frozen = self.frozen()
        live = torch.ones(self.n, dtype=torch.bool, device=mean.device)
        live[sorted(frozen)] = False  # a finished seed keeps its statistics
        for statistic, value in zip(rms, merged, strict=True):
            kept = torch.where(live.view(per_seed), value, statistic.view_as(value))
            statistic.copy_(kept.view_as(statistic))

    def _seeds(self, x: Tensor) -> Tensor:
        return x.view(self.n, self.rows, *x.shape[1:])

    def obs(self, obs: Tensor, update: bool = False, rows: Tensor | None = None) -> Tensor:
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
        self, reward: Tensor, discounted_return: Tensor, update: bool = True, rows: Tensor | None = None
    ) -> Tensor:
        if not self.norm_reward:
            return reward
        if update:
            self._merge(self._return_rms, self._seeds(discounted_return))
        # in the reward's dtype: a solo run divides by its std as a 0-dim tensor, which does not promote
        std = (self._return_rms[1] + self.eps).sqrt().to(reward.dtype).unsqueeze(1)
        scaled = (self._seeds(reward) / std).clamp(-self.clip_reward, self.clip_reward)
        return scaled.to(reward.dtype).view(reward.shape)


def stacked_step(stacked: StackedModels, obs: Tensor, starts: Tensor, memory, rows: int):
    """One step of every seed's recurrent model on its rows (seed-major): logits ``(N, rows, ...)``, values
    ``(N, rows)``, and the memory after it, laid out as ``memory`` is (``(layers, N * rows, hidden)`` each)."""
    n = len(stacked)
    by_seed = (m.view(m.shape[0], n, rows, -1).transpose(0, 1) for m in memory)
    logits, values, h, c = stacked.call(
        "sequence", obs.view(n, 1, rows, *obs.shape[1:]), memory=(starts.view(n, 1, rows), *by_seed)
    )
    return logits[:, 0], values[:, 0], tuple(m.transpose(0, 1).flatten(1, 2) for m in (h, c))


class StackedPolicies:
    """What ``run_episodes`` plays with: several models' deterministic policies over their rows (``rows`` each,
    in model order), each normalizing with its own frozen statistics."""

    def __init__(self, models: list[ActorCritic], rows: int):
        self.stacked = StackedModels(models, share=False)
        self.rows = rows
        self.normalization = StackedNormalizations(
            [m.normalization for m in models], self.stacked.buffers, rows, lambda: set()
        )
        self.lstm = models[0].lstm

    @torch.no_grad()
    def predict(self, obs: Tensor, deterministic: bool = True, generator=None) -> Tensor:
        # always the mode: stacked seeds are only evaluated deterministically (``generator``: as ``Policy``'s)
        obs = self.normalization.obs(obs)
        logits = self.stacked.call("logits", obs.view(len(self.stacked), self.rows, *obs.shape[1:]))
        return self.stacked.head.mode(logits.flatten(0, 1))

    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]:
        return self.stacked.models[0].initial_memory(n, device)

    @torch.no_grad()
    def predict_recurrent(
        self, obs: Tensor, starts: Tensor, memory, deterministic: bool = True, generator=None
    ):
        logits, _, memory = stacked_step(
            self.stacked, self.normalization.obs(obs), starts.float(), memory, self.rows
        )
        return self.stacked.head.mode(logits.flatten(0, 1)), memory
