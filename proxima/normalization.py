"""Observation normalization and reward scaling (continuous-control details #6-#9), saved with the model.

The statistics are buffers of an ``nn.Module`` that lives inside ``ActorCritic``, so they are written to
``model.safetensors`` with the weights, and a loaded agent normalizes exactly as the trained one did at the
end of training. They change only when the rollout asks for it (``update=True``); evaluation, ``predict``
and bootstrapping use them frozen.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RunningMeanStd(nn.Module):
    """Mean and variance of every sample seen so far, merged batch by batch (Chan et al.'s parallel update).

    Kept in float64: after millions of samples a float32 running mean drifts. Starts, like Gymnasium's
    wrappers, at mean 0, variance 1 and a tiny count, so the first batch dominates.
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        n = x.shape[0]
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        self.var.copy_(
            (self.var * self.count + batch_var * n + delta.square() * self.count * n / total) / total
        )
        self.count.copy_(total)


class Normalization(nn.Module):
    """``obs -> clip((obs - mean) / std, ±clip_obs)`` and ``reward -> clip(reward / std(return), ±clip_reward)``.

    Reward scaling divides by the running std of the discounted return (not of the reward), as the PPO
    reference code does; the per-env return being accumulated belongs to the rollout, which passes it in.
    """

    def __init__(
        self, obs_shape, norm_obs=False, norm_reward=False, clip_obs=10.0, clip_reward=10.0, eps=1e-8
    ):
        super().__init__()
        self.norm_obs, self.norm_reward = norm_obs, norm_reward
        self.clip_obs, self.clip_reward, self.eps = clip_obs, clip_reward, eps
        self.obs_rms = RunningMeanStd(tuple(obs_shape))
        self.return_rms = RunningMeanStd(())

    def obs(self, obs: Tensor, update: bool = False) -> Tensor:
        if not self.norm_obs:
            return obs
        if update:
            self.obs_rms.update(obs)
        std = (self.obs_rms.var + self.eps).sqrt()
        return ((obs - self.obs_rms.mean) / std).clamp(-self.clip_obs, self.clip_obs).to(obs.dtype)

    def reward(self, reward: Tensor, discounted_return: Tensor, update: bool = True) -> Tensor:
        if not self.norm_reward:
            return reward
        if update:
            self.return_rms.update(discounted_return)
        std = (self.return_rms.var + self.eps).sqrt()
        return (reward / std).clamp(-self.clip_reward, self.clip_reward).to(reward.dtype)
