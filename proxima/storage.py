"""Rollout storage: preallocated time-major tensors ``(num_steps, num_envs, ...)``, flattened once per update."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor


def minibatch_indices(batch_size: int, minibatch_size: int, device=None) -> list[Tensor]:
    """A random permutation of ``range(batch_size)`` cut into ``batch_size // minibatch_size`` index tensors.

    Every sample appears in exactly one minibatch (detail #6): on-policy data is thrown away after the
    update, so a sample that random sampling happened to skip would be wasted.
    """
    if batch_size % minibatch_size:
        raise ValueError(f"minibatch_size {minibatch_size} does not divide batch_size {batch_size}")
    return list(torch.randperm(batch_size, device=device).split(minibatch_size))


@dataclass
class Batch:
    """A flat batch of transitions (the seed's ``b_*`` tensors); indexing it gives a minibatch (``mb_*``)."""

    obs: Tensor
    actions: Tensor
    logprobs: Tensor
    values: Tensor
    advantages: Tensor
    returns: Tensor

    def __len__(self) -> int:
        return self.obs.shape[0]

    def __getitem__(self, index: Tensor) -> Batch:
        return Batch(*(getattr(self, f.name)[index] for f in fields(self)))


class RolloutBuffer:
    """Everything one rollout records, written in place step by step, with no per-step allocation."""

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        action_shape: tuple[int, ...],
        action_dtype: torch.dtype,
        device: torch.device,
    ):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs = zeros(*obs_shape, dtype=obs_dtype)  # the space's own dtype: uint8 images stay uint8
        self.actions = zeros(*action_shape, dtype=action_dtype)
        self.logprobs = zeros()
        self.rewards = zeros()  # includes gamma * V(final_obs) on time-limit truncations
        self.dones = (
            zeros()
        )  # dones[t] = 1: obs[t] is the first observation of a new episode (seed convention)
        self.values = zeros()
        # Episode statistics, from the env's own rewards: the running return and length at each step, and
        # whether an episode ended there. Read once per update, so the rollout never syncs on them.
        self.episode_returns = zeros(dtype=torch.float64)
        self.episode_lengths = zeros(dtype=torch.int64)
        self.episode_ended = zeros(dtype=torch.bool)

    def flatten(self, advantages: Tensor, returns: Tensor) -> Batch:
        """Merge the time and env axes (detail #6 then slices minibatches from this)."""
        return Batch(
            obs=self.obs.flatten(0, 1),
            actions=self.actions.flatten(0, 1),
            logprobs=self.logprobs.flatten(),
            values=self.values.flatten(),
            advantages=advantages.flatten(),
            returns=returns.flatten(),
        )

    def finished_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes that ended during this rollout, in time order."""
        ended = self.episode_ended
        return self.episode_returns[ended].tolist(), self.episode_lengths[ended].tolist()
