"""Observation normalization, reward scaling (continuous-control details 6-9, docs/SEEDS.md) and value-target
normalization, saved with the model.

The statistics are buffers of an ``nn.Module`` that lives inside ``ActorCritic``, so they are written to
``model.safetensors`` with the weights, and a loaded agent normalizes exactly as the trained one did at the
end of training. They change only when the rollout asks for it (``update=True``); evaluation, ``predict``
and bootstrapping use them frozen.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def merged_moments(mean: Tensor, var: Tensor, count: Tensor, batch_mean: Tensor, batch_var: Tensor, n):
    """The mean, variance and count of ``count`` samples of moments ``mean`` and ``var`` merged with a batch of
    ``n`` samples of moments ``batch_mean`` and ``batch_var`` (Chan et al.'s parallel update); the counts
    broadcast against the moments (``StackedNormalizations`` gives one per seed)."""
    delta = batch_mean - mean
    total = count + n
    merged_var = (var * count + batch_var * n + delta.square() * count * n / total) / total
    return mean + delta * n / total, merged_var, total


class RunningMeanStd(nn.Module):
    """Mean and variance of every sample seen so far, merged batch by batch (Chan et al.'s parallel update),
    or, where ``update`` is given a ``horizon``, of the recent ones: a new batch then weighs at least
    ``1 / horizon``, and what came before decays by ``1 - 1 / horizon`` per batch.

    Kept in float64: after millions of samples a float32 running mean drifts. Starts, like Gymnasium's
    wrappers, at mean 0, variance 1 and a tiny count, so the first batch dominates.
    """

    # buffers (register_buffer), declared for the type checker: nn.Module's __getattr__ says Tensor | Module
    mean: Tensor
    var: Tensor
    count: Tensor

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor, horizon: int = 0, rows: Tensor | None = None) -> None:
        """Merge the batch ``x`` (samples along its first dimension); ``rows``: a bool mask of the samples to
        merge (the rows of agents present in a game of many), taken without reading it on the host. The
        observation and return statistics take ``rows``, the value statistics ``horizon``: never both."""
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        if rows is not None:
            self._merge_rows(x, rows)
            return
        n = x.shape[0]
        if horizon:  # what came before counts as at most horizon - 1 batches of this size
            self.count.clamp_(max=(horizon - 1) * n)
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        self._merge(batch_mean, batch_var, n)

    def _merge_rows(self, x: Tensor, rows: Tensor) -> None:
        weight = rows.to(x.dtype).reshape(-1, *[1] * (x.dim() - 1))
        n = weight.sum()  # may be 0: then the statistics stay as they are
        batch_mean = (x * weight).sum(0) / n.clamp_min(1)
        batch_var = ((x - batch_mean).square() * weight).sum(0) / n.clamp_min(1)
        self._merge(batch_mean, batch_var, n)

    def _merge(self, batch_mean: Tensor, batch_var: Tensor, n: int | Tensor) -> None:
        merged = merged_moments(self.mean, self.var, self.count, batch_mean, batch_var, n)
        for statistic, value in zip((self.mean, self.var, self.count), merged, strict=True):
            statistic.copy_(value)


class Normalization(nn.Module):
    """``obs -> clip((obs - mean) / std, ±clip_obs)``, ``reward -> clip(reward / std(return), ±clip_reward)``
    and ``critic output -> output * std(targets) + mean(targets)``.

    Reward scaling divides by the running std of the discounted return (not of the reward), as the PPO
    reference code does; the per-env return being accumulated belongs to the rollout, which passes it in.

    Value normalization (``norm_value``, PopArt without its per-task heads) lets the critic's network predict
    the value targets standardized by their running mean and std, while the critic still returns values in the
    rewards' units; ``ActorCritic.update_value_normalization`` updates the statistics without moving the
    values. Without it, a critic whose targets sit far from 0 (about 100 for CartPole's bootstrapped returns)
    must build that offset from its hidden units, because Adam moves the output bias by at most about the
    learning rate per step; the units saturate, and the critic ends up predicting nearly the same value
    everywhere, which leaves the policy without a baseline.
    """

    # buffers (register_buffer), declared for the type checker; value_mean and value_std exist with norm_value
    elements: Tensor | None
    value_mean: Tensor
    value_std: Tensor
    value_rms: RunningMeanStd

    def __init__(
        self,
        obs_shape,
        norm_obs=False,
        norm_reward=False,
        clip_obs=10.0,
        clip_reward=10.0,
        eps=1e-8,
        norm_value=False,
        elements: Tensor | None = None,
    ):
        super().__init__()
        # which elements of a packed observation are normalized (proxima.base.spaces); not saved: the layout says
        self.register_buffer("elements", elements, persistent=False)
        self.norm_obs, self.norm_reward, self.norm_value = norm_obs, norm_reward, norm_value
        self.clip_obs, self.clip_reward, self.eps = clip_obs, clip_reward, eps
        self.obs_rms = RunningMeanStd(tuple(obs_shape))
        self.return_rms = RunningMeanStd(())
        if norm_value:  # only then: an agent without it has no value statistics to save
            self.value_rms = RunningMeanStd(())
            # float32 copies for the per-step rescaling, refreshed when the statistics change
            self.register_buffer("value_mean", torch.zeros(()))
            self.register_buffer("value_std", torch.ones(()))

    def obs(self, obs: Tensor, update: bool = False, rows: Tensor | None = None) -> Tensor:
        """``rows``: which rows the statistics take in when ``update`` (None: all)."""
        if not self.norm_obs:
            return obs
        if update:
            self.obs_rms.update(obs, rows=rows)
        std = (self.obs_rms.var + self.eps).sqrt()
        normalized = ((obs - self.obs_rms.mean) / std).clamp(-self.clip_obs, self.clip_obs).to(torch.float32)
        if self.elements is None:
            return normalized
        return torch.where(self.elements, normalized, obs.to(torch.float32))

    def obs_dtype(self, raw: torch.dtype) -> torch.dtype:
        """The dtype of what ``obs`` returns for raw observations of dtype ``raw`` (what the rollout stores)."""
        return torch.float32 if self.norm_obs else raw

    def reward(
        self, reward: Tensor, discounted_return: Tensor, update: bool = True, rows: Tensor | None = None
    ) -> Tensor:
        if not self.norm_reward:
            return reward
        if update:
            self.return_rms.update(discounted_return, rows=rows)
        std = (self.return_rms.var + self.eps).sqrt()
        return (reward / std).clamp(-self.clip_reward, self.clip_reward).to(reward.dtype)

    def value(self, output: Tensor) -> Tensor:
        """The critic network's output in the rewards' units."""
        if not self.norm_value:
            return output
        return torch.addcmul(self.value_mean, output, self.value_std)  # one op: it runs at every rollout step

    def value_scale(self) -> Tensor | None:
        """The std that the critic's errors are divided by in the value loss (None: not normalized)."""
        return self.value_std if self.norm_value else None

    @torch.no_grad()
    def update_value(self, targets: Tensor, horizon: int = 0) -> None:
        """Merge a batch of value targets into the statistics (once per update, before its epochs); with a
        ``horizon`` (``--value-norm-horizon``) older batches fade (``RunningMeanStd.update``)."""
        if not self.norm_value:
            return
        self.value_rms.update(targets, horizon)
        self.value_mean.copy_(self.value_rms.mean)
        self.value_std.copy_((self.value_rms.var + self.eps).sqrt())
