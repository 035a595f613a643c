"""Rollout storage: preallocated time-major tensors ``(num_steps, num_envs, ...)``, flattened once per update."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from proxima.algo.advantages import Estimator, estimate_advantages
from proxima.policy.protocol import Learned


def minibatches(batch_size: int, count: int, generator: torch.Generator) -> list[Tensor]:
    """A random permutation of ``range(batch_size)`` from ``generator`` (on its device) cut into ``count`` index
    tensors, whose sizes differ by at most one where ``count`` does not divide the batch (a batch less its steps
    that are no samples, proxima.run.multiagent).

    Every sample appears in exactly one minibatch (detail 6 of the 13 in docs/SEEDS.md): on-policy data is
    thrown away after the update, so a sample that random sampling happened to skip would be wasted.
    """
    return list(torch.randperm(batch_size, generator=generator, device=generator.device).tensor_split(count))


@dataclass
class Batch:
    """A flat batch of transitions (CleanRL's ``b_*`` tensors); indexing it gives a minibatch (``mb_*``)."""

    obs: Tensor
    actions: Tensor
    logprobs: Tensor
    values: Tensor
    advantages: Tensor
    returns: Tensor

    def __len__(self) -> int:
        return self.obs.shape[0]

    def __getitem__(self, index: Tensor) -> Batch:
        return Batch(*(getattr(self, f.name)[index] for f in fields(Batch)))

    # How the update takes the batch (proxima.algo.update.Solo): a batch of rows that belong together, as a
    # game's agents do (proxima.run.multiagent.GameBatch), keeps them together in both.
    def minibatches(self, count: int, generator: torch.Generator) -> list[Tensor]:
        """One epoch's ``count`` minibatches (``minibatches``), as indices into the batch."""
        return minibatches(len(self), count, generator)

    def evaluate(self, model: Learned) -> tuple[Tensor, Tensor, Tensor]:
        """``model.evaluate`` of the batch: the log-probs of its actions, the entropies and the values."""
        return model.evaluate(self.obs, self.actions, self.sequences)

    @property
    def sequences(self) -> tuple[Tensor, tuple[Tensor, ...]] | None:
        """What a recurrent agent's update replays (``SequenceBatch``); a flat batch has none."""
        return None

    def samples(self, *outputs: Tensor) -> tuple[Batch, tuple[Tensor, ...]]:
        """The batch's samples as a flat batch, and ``outputs`` (of a forward pass over its steps) at them: every
        step of a flat batch is a sample."""
        return self, outputs


@dataclass
class SequenceBatch(Batch):
    """A recurrent agent's batch: whole env sequences, time-major ``(T, N, ...)``, and the memory each env's
    sequence starts from. Indexing takes envs, so a minibatch is a set of whole sequences (as in CleanRL's
    ``ppo_atari_lstm.py`` and sb3-contrib's RecurrentPPO); ``len`` is the number of envs."""

    starts: Tensor  # (T, N): 1 where obs[t] begins an episode
    memory: tuple[Tensor, ...]  # (h, c), each (layers, N, hidden), before the rollout's first step
    # (T, N): the steps that are samples; the others are replayed through the LSTM (its memory runs on) but are
    # no samples (proxima.run.multiagent: the steps of an agent that had left). None: every step is one.
    valid: Tensor | None = None

    def __len__(self) -> int:
        return self.obs.shape[1]

    def __getitem__(self, index: Tensor) -> SequenceBatch:
        steps = {
            f.name: getattr(self, f.name)[:, index] for f in fields(self) if f.name not in ("memory", "valid")
        }
        valid = None if self.valid is None else self.valid[:, index]
        return SequenceBatch(**steps, memory=tuple(m[:, index] for m in self.memory), valid=valid)

    def samples(self, *outputs: Tensor) -> tuple[Batch, tuple[Tensor, ...]]:
        """The steps of ``valid`` as a flat batch, and ``outputs`` at them (after the LSTM's replay, the losses
        need no more); the whole batch where every step is a sample."""
        keep = self.valid
        if keep is None:
            return self, outputs
        return Batch(*(getattr(self, f.name)[keep] for f in fields(Batch))), tuple(x[keep] for x in outputs)

    @property
    def sequences(self) -> tuple[Tensor, tuple[Tensor, ...]]:
        return self.starts, self.memory


class RolloutBuffer:
    """Everything one rollout records, written in place step by step, with no per-step allocation."""

    # a recurrent agent's (h, c) before the rollout's first step, set by its collector
    memory: tuple[Tensor, ...]
    # What a rollout is, as a rollout worker's slice carries it back to be joined along the rows
    # (proxima.scale.rollout_workers): the tensors of its steps, (num_steps, rows, ...), and of its end, (rows, ...)
    STEPS: tuple[str, ...] = (
        "obs",
        "actions",
        "logprobs",
        "values",
        "rewards",
        "dones",
        "episode_returns",
        "episode_lengths",
        "episode_ended",
    )
    END: tuple[str, ...] = ()

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
        # dones[t] = 1: obs[t] is the first observation of a new episode (seed convention)
        self.dones = zeros()
        self.values = zeros()
        # Episode statistics, from the env's own rewards: the running return and length at each step, and
        # whether an episode ended there. Read once per update, so the rollout never syncs on them.
        self.episode_returns = zeros(dtype=torch.float64)
        self.episode_lengths = zeros(dtype=torch.int64)
        self.episode_ended = zeros(dtype=torch.bool)
        # (step, env) -> the env's info where an episode ended there; None: the run asked for no infos
        self.episode_infos: dict[tuple[int, int], dict] | None = None

    def rows_by_step(self) -> dict[str, tuple[Tensor, ...]]:
        """Each of ``STEPS``' tensors as its steps' rows, views that a rollout writes in place: one ``unbind`` per
        tensor and rollout rather than an index at each write (at a few envs, a step's time is the fixed cost of
        its ops)."""
        return {name: getattr(self, name).unbind(0) for name in self.STEPS}

    def advantages(
        self,
        estimator: str | Estimator,
        next_value: Tensor,
        next_done: Tensor,
        gamma: float,
        gae_lambda: float,
    ) -> Tensor:
        """The rollout's advantages by ``estimator`` (``estimate_advantages``: a name, or your own function
        adapted), bootstrapped from ``next_value`` where the rollout cuts an episode off."""
        return estimate_advantages(
            estimator, self.rewards, self.values, self.dones, next_value, next_done, gamma, gae_lambda
        )

    def flatten(self, advantages: Tensor, returns: Tensor) -> Batch:
        """Merge the time and env axes; the minibatches (detail 6) are sliced from this."""
        return Batch(
            obs=self.obs.flatten(0, 1),
            actions=self.actions.flatten(0, 1),
            logprobs=self.logprobs.flatten(),
            values=self.values.flatten(),
            advantages=advantages.flatten(),
            returns=returns.flatten(),
        )

    def sequences(self, advantages: Tensor, returns: Tensor) -> SequenceBatch:
        """The rollout as whole env sequences, for a recurrent agent (``memory``: set by its collector)."""
        values = (self.obs, self.actions, self.logprobs, self.values, advantages, returns, self.dones)
        return SequenceBatch(*values, self.memory)

    def columns(self, start: int, stop: int) -> RolloutBuffer:
        """Envs ``start`` to ``stop`` of this rollout as a buffer of their own (views, no copy): one seed's share
        of a batched run's rollout (``--num-seeds``), whose episodes and infos are that seed's alone."""
        part = object.__new__(type(self))
        for name, value in vars(self).items():
            setattr(part, name, value[:, start:stop] if isinstance(value, torch.Tensor) else value)
        if self.episode_infos is not None:
            part.episode_infos = {
                (t, i - start): info for (t, i), info in self.episode_infos.items() if start <= i < stop
            }
        return part

    def finished_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes that ended during this rollout, in time order."""
        ended = self.episode_ended
        return self.episode_returns[ended].tolist(), self.episode_lengths[ended].tolist()

    def finished_infos(self) -> list[dict]:
        """The info at the end of each of ``finished_episodes``, in the same order (``{}`` where the env gave
        none); ``[]`` when the run asked for no infos."""
        if self.episode_infos is None:
            return []
        ends = self.episode_ended.nonzero().tolist()  # row-major: the order of the boolean indexing above
        return [self.episode_infos.get((t, i), {}) for t, i in ends]

    # What a rollout whose rows come and go, or fall into parts, says of them (proxima.run.multiagent's
    # MultiAgentBuffer): here every row is present, and all rows are one part.
    def present(self, t: int) -> Tensor | None:
        """The rows present at step ``t``, whose observation and return the statistics take in; None: all."""
        return None

    def diagnostics(self, model, batch: Batch) -> dict:
        """The update's debug variables of each part of ``batch``'s rows, after ``model``'s update."""
        return {}

    def breakdown(self) -> dict:
        """The record's mean episodic return of each part of the rows."""
        return {}
