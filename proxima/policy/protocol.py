"""The model as a run uses it, one Protocol per user: ``Policy`` for the collectors (``proxima.run.rollout``),
``Learned`` for the update (``proxima.algo.update.Solo``) and ``Player`` for evaluation
(``proxima.run.evaluate.run_episodes``). ``ActorCritic`` (with ``MultiAgentActorCritic``, whose rows are a game's
agents) is all three; the stacked seeds of ``--num-seeds`` are a ``Policy`` (``proxima.scale.batched.SeedModel``)
and a ``Player`` (``proxima.policy.stacked.StackedPolicies``), as is self-play's ``proxima.run.selfplay.Tactics``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

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


class ValueNormalization(ObsNormalization, Protocol):
    """The normalization as the update sees it: the scale of the critic's targets too (``--norm-value``)."""

    def value_scale(self) -> Tensor | None: ...


class Learned(Policy, Protocol):
    """What the update trains (``Solo``): the log-probs, entropies and values of a batch's stored actions
    (``Batch.evaluate`` calls ``evaluate``), the parameters, and the critic's value normalization."""

    @property
    def normalization(self) -> ValueNormalization: ...

    @property
    def critic(self) -> object: ...  # None: no value function (REINFORCE)

    def evaluate(self, obs: Tensor, actions: Tensor, sequences=None) -> tuple[Tensor, Tensor, Tensor]: ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def update_value_normalization(self, targets: Tensor, horizon: int = 0) -> None: ...


class Player(Protocol):
    """What ``run_episodes`` plays with: actions for raw observations (the model normalizes them with its frozen
    statistics), and for a recurrent model the same from a memory it carries."""

    @property
    def lstm(self) -> object: ...  # None: not recurrent

    def initial_memory(self, n: int, device: torch.device) -> tuple[Tensor, ...]: ...

    def predict(
        self, obs: Tensor, deterministic: bool, generator: torch.Generator | None = None
    ) -> Tensor: ...

    def predict_recurrent(
        self,
        obs: Tensor,
        starts: Tensor,
        memory: Any,
        deterministic: bool,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Any]: ...
