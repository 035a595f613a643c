"""The rollout phase (detail 1 in docs/SEEDS.md): N vector envs stepped ``num_steps`` times under the policy.

The collector keeps the state that outlives one rollout (the next observation, whether it starts an
episode, and the running episode statistics), so consecutive rollouts continue the same episodes. It is
shared by every algorithm: PPO, VPG and REINFORCE differ only in what they do with the buffer.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from proxima.algo.storage import RolloutBuffer
from proxima.envs import VecEnv
from proxima.envs.interface import InfoKeys, Seeds, Step, env_call, obs_layout
from proxima.policy.protocol import Policy


class Collector(Protocol):
    """What the loop asks of a collector: whole rollouts in ``buffer``. ``RolloutCollector`` (and its recurrent
    kind) steps local envs; ``proxima.scale.rollout_workers.RayCollector`` gathers the slices of Ray actors."""

    buffer: RolloutBuffer  # the last rollout, time-major: (num_steps, num_envs, ...)
    reports_infos: bool  # set by keep_infos

    def collect(self, model: Policy) -> tuple[Tensor, Tensor]:
        """Fill ``buffer`` with the next rollout under ``model``; return ``(next_value, next_done)``, what the
        advantages bootstrap from at its end."""

    def keep_infos(self, keys: InfoKeys) -> bool:
        """Keep each ended episode's info (``keys`` of it, or "all") from the next rollout on; return whether the
        envs report infos at all."""

    def restart(self, seed: Seeds) -> None:
        """Fresh episodes from ``seed`` (a resumed run whose envs could not be saved)."""

    def state_dict(self) -> dict | None:
        """What the next rollout continues from, the envs included; None if the envs cannot be captured."""

    def load_state_dict(self, state: dict) -> None: ...


class RolloutCollector:
    """The ``Collector`` of local envs. ``frozen_stats`` (a rollout worker's slice of the envs,
    ``proxima.scale.rollout_workers``): normalize with the observation and reward statistics as they are, and keep
    what would have updated them (the raw observations, the discounted returns) for the learner to merge.

    A multi-agent env's collector (``proxima.run.multiagent``) enters through the hooks at the end: which rows
    are present at a step, the reward learned from, what a step leaves for the next, and its own state."""

    def __init__(
        self,
        envs: VecEnv,
        num_steps: int,
        gamma: float,
        model: Policy,
        seed: Seeds = None,
        frozen_stats: bool = False,
        generator: torch.Generator | None = None,
    ):
        self.envs, self.gamma, self.frozen_stats = envs, gamma, frozen_stats
        self.generator = generator  # the actions' draws (the run's RunStreams.actions)
        n, device, head, layout = envs.num_envs, envs.device, model.head, obs_layout(envs)
        obs_dtype = model.normalization.obs_dtype(layout.dtype)
        self.buffer = self.new_buffer(
            envs, model, num_steps, n, layout.shape, obs_dtype, head.action_shape, head.action_dtype, device
        )
        self.next_obs = env_call(envs.reset, seed=seed)
        self.next_done = torch.zeros(n, device=device)
        self._episode_return = torch.zeros(n, dtype=torch.float64, device=device)
        self._episode_length = torch.zeros(n, dtype=torch.int64, device=device)
        self._discounted_return = torch.zeros(n, device=device)  # for reward scaling only
        self._infos: InfoKeys | None = None  # keep_infos' keys: None until the run asks for infos
        norm, raw_shape = model.normalization, (num_steps, n, *layout.shape)
        self.raw_obs = torch.zeros(raw_shape, dtype=layout.dtype) if frozen_stats and norm.norm_obs else None
        self.returns_seen = torch.zeros(num_steps, n) if frozen_stats and norm.norm_reward else None

    @torch.no_grad()
    def collect(self, model: Policy) -> tuple[Tensor, Tensor]:
        """``Collector.collect``. The buffer holds observations and rewards as the networks see them: normalized
        and scaled when those are on (with the statistics of the moment they were collected), raw otherwise."""
        buf, norm = self.buffer, model.normalization
        if self._infos is not None:
            buf.episode_infos = {}
        at, steps = buf.rows_by_step(), buf.obs.shape[0]  # each step's rows, written in place
        at["dones"][0].copy_(self.next_done)
        for t in range(steps):
            if self.raw_obs is not None:
                self.raw_obs[t] = self.next_obs
            rows = self._present(t)  # the statistics take in the rows present (None: all)
            obs = norm.obs(self.next_obs, update=not self.frozen_stats, rows=rows)
            at["obs"][t].copy_(obs)
            # One forward pass over the whole batch gives the actions, their log-probs and the values.
            actions, logprobs, values = self._act(model, obs)
            at["logprobs"][t].copy_(logprobs)
            at["values"][t].copy_(values)
            # as sampled: a Box action is clipped only on its way into the env
            at["actions"][t].copy_(actions)
            step = env_call(self.envs.step, actions)
            done = step.done
            score, game_over = step.stats(done)
            self._record_episodes(at, t, score, game_over, rows)
            if step.infos:
                assert buf.episode_infos is not None  # envs report infos only once keep_infos asked for them
                buf.episode_infos.update(((t, i), info) for i, info in step.infos.items())
            reward = self._reward(step.reward, rows)
            if norm.norm_reward:
                self._discounted_return.mul_(self.gamma).add_(step.reward)
                if self.returns_seen is not None:
                    self.returns_seen[t] = self._discounted_return
                reward = norm.reward(reward, self._discounted_return, update=not self.frozen_stats, rows=rows)
                self._discounted_return.masked_fill_(done, 0.0)
            # A time-limit truncation is not the end of the task: the return goes on past the cut, so the
            # target for this step is r + gamma * V(final_obs). A termination's future is worth 0. (Most steps
            # truncate nothing: one test of the truncations, and the cut rows only where there are some.)
            if step.truncated.any():
                cut = step.truncated & ~step.terminated
                if cut.any():
                    rows = cut.nonzero().squeeze(-1)
                    reward = reward.index_add(
                        0, rows, self.gamma * self._final_values(model, step.final_obs, rows)
                    )
            at["rewards"][t].copy_(reward)
            self.next_obs = step.obs
            # 1 where next_obs begins an episode: the next step's row of dones, cast and copied there in one op
            # (the rollout's last, which no row holds, cast alone)
            self.next_done = at["dones"][t + 1].copy_(done) if t + 1 < steps else done.float()
            self._stepped(step)
        return self._values(model, norm.obs(self.next_obs)), self.next_done

    # The policy's share of a step, apart so that the recurrent collector can carry its memory through it, and a
    # rollout worker's (proxima.scale.rollout_workers) can pad the batch to all envs and draw from each env's stream.
    def _act(self, model: Policy, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return model.act(obs, self.generator)

    def _final_values(self, model: Policy, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.value(model.normalization.obs(final_obs[rows]))

    def _values(self, model: Policy, obs: Tensor) -> Tensor:
        return model.value(obs)

    def keep_infos(self, keys: InfoKeys) -> bool:
        """Collect the info of each episode's last step from the next rollout on (``buffer.finished_infos``):
        the ``keys`` it has, or all of it with "all". Returns whether the envs report infos; a backend without
        ``keep_infos`` (native envs) reports none, and its episodes get ``{}``."""
        self._infos = keys
        keep = getattr(self.envs, "keep_infos", None)
        if keep is not None:
            env_call(keep, keys)
        self.reports_infos = keep is not None
        return self.reports_infos

    def restart(self, seed: Seeds) -> None:
        self.next_obs = env_call(self.envs.reset, seed=seed)

    # what state_dict saves of the collector, each by its name without the leading _
    _STATE: tuple[str, ...] = (
        "next_obs",
        "next_done",
        "_episode_return",
        "_episode_length",
        "_discounted_return",
    )

    def state_dict(self) -> dict | None:
        env_state = self.envs.state_dict()
        if env_state is None:
            return None
        return {**{name.lstrip("_"): getattr(self, name) for name in self._STATE}, "env": env_state}

    def load_state_dict(self, state: dict) -> None:
        for name in self._STATE:
            setattr(self, name, state[name.lstrip("_")].to(getattr(self, name)))
        self.envs.load_state_dict(state["env"])

    def _record_episodes(
        self, at: dict[str, tuple[Tensor, ...]], t: int, score: Tensor, game_over: Tensor, rows: Tensor | None
    ) -> None:
        """Statistics of whole games: an Atari game goes on after a lost life, and its score is unclipped.
        ``at``: the buffer's rows by step (``RolloutBuffer.rows_by_step``)."""
        # Each running statistic is summed into its row of the buffer, and that row with the ended games zeroed is
        # the next running one: two ops each, where an add in place, a copy and a fill in place were three.
        returns = torch.add(self._episode_return, score, out=at["episode_returns"][t])
        self._episode_return = returns.masked_fill(game_over, 0.0)
        # a row that is not present takes no step
        lengths = torch.add(self._episode_length, 1 if rows is None else rows, out=at["episode_lengths"][t])
        self._episode_length = lengths.masked_fill(game_over, 0)
        at["episode_ended"][t].copy_(game_over)

    # The hooks of a collector with rows that come and go (proxima.run.multiagent): every row is present here.
    @staticmethod
    def new_buffer(envs, model: Policy, *shapes) -> RolloutBuffer:
        """The buffer of ``envs``' rollouts under ``model`` (``shapes``: ``RolloutBuffer``'s), which
        ``proxima.scale.rollout_workers.RayCollector`` asks its workers' collector class for."""
        return RolloutBuffer(*shapes)

    def _present(self, t: int) -> Tensor | None:
        """The rows present at step ``t``'s observation, which the statistics take in; None: all."""
        return None

    def _reward(self, reward: Tensor, rows: Tensor | None) -> Tensor:
        """The reward learned from: the env's."""
        return reward

    def _stepped(self, step: Step) -> None:
        """After each step, what the next one needs of it beyond its observation and dones: nothing."""


class RecurrentCollector(RolloutCollector):
    """The collector of a recurrent agent (``--recurrent lstm``): the LSTM's memory per env is carried from step
    to step and rollout to rollout, zeroed where an episode starts, and stored in the buffer at the start of each
    rollout, where the update's replay of the sequences begins."""

    def __init__(self, envs: VecEnv, num_steps: int, gamma: float, model: Policy, **options):
        super().__init__(envs, num_steps, gamma, model, **options)
        self.memory: tuple[Tensor, ...] = model.initial_memory(envs.num_envs, envs.device)

    @torch.no_grad()
    def collect(self, model: Policy) -> tuple[Tensor, Tensor]:
        self.buffer.memory = tuple(m.clone() for m in self.memory)
        return super().collect(model)

    def _act(self, model: Policy, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # next_done is still this step's: 1 where obs begins an episode
        actions, logprobs, values, self.memory = model.act_recurrent(
            obs, self.next_done, self.memory, self.generator
        )
        return actions, logprobs, values

    def _final_values(self, model: Policy, final_obs: Tensor, rows: Tensor) -> Tensor:
        # the final observation follows this step's memory: the episode's own, not the next one's zeros
        memory = tuple(m[:, rows] for m in self.memory)
        return model.value_after(model.normalization.obs(final_obs[rows]), memory)

    def _values(self, model: Policy, obs: Tensor) -> Tensor:
        starts = self.next_done.unsqueeze(0)
        return model.forward_sequence(obs.unsqueeze(0), starts, self.memory)[1][0]

    def restart(self, seed: Seeds) -> None:
        super().restart(seed)
        self.memory = tuple(torch.zeros_like(m) for m in self.memory)

    def state_dict(self) -> dict | None:
        state = super().state_dict()
        return None if state is None else {**state, "memory_h": self.memory[0], "memory_c": self.memory[1]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.memory = (state["memory_h"].to(self.memory[0]), state["memory_c"].to(self.memory[1]))
