"""What the collectors ask of a model: the ``Policy`` Protocol that ``ActorCritic`` and the stacked seeds of
``--num-seeds`` (``proxima.scale.batched.SeedModel``) both satisfy."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from proxima.policy.distributions import Head


class ObsNormalization(Protocol):
    """The observation and reward normalization the rollout applies (``Normalization``, or the seeds' stacked)."""

    norm_obs: bool
    norm_reward: bool

    def obs(self, obs: Tensor, update: bool = False, rows: Tensor | None = None) -> Tensor: ...

    def obs_dtype(self, raw: torch.dtype) -> torch.dtype: ...

    def reward(
        self, reward: Tensor, discounted_return: Tensor, update: bool = True, rows: Tensor | None = None
    ) -> Tensor: ...


class Policy(Protocol):
    """What ``RolloutCollector`` and ``RecurrentCollector`` step with: actions, log-probs and values of
    observations already normalized, and for a recurrent model the same from a memory it carries."""

    @property
    def head(self) -> Head: ...

    @property
    def normalization(self) -> ObsNormalization: ...

    def act(
        self, obs: Tensor, noise: Tensor | torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]: ...

    def value(self, obs: Tensor) -> Tensor: ...

    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]: ...

    def act_recurrent(
        self, obs: Tensor, starts: Tensor, memory, noise: Tensor | torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor, tuple]: ...

    def value_after(self, obs: Tensor, memory) -> Tensor: ...

    def forward_sequence(self, obs: Tensor, starts: Tensor, memory) -> tuple[Tensor, Tensor, tuple]: ...
