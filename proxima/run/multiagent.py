"""Many agents per env (docs/MULTIAGENT.md): their collector, their buffer and what the loop reports of them.

A multi-agent VecEnv (``proxima.envs.interface.AgentSpec``) has one row per agent of each game, env-major. Rows
come and go: an agent that left its game, or a player waiting its turn, is not present (``Step.alive``), so its
step is no sample. ``MultiAgentCollector`` is a ``RolloutCollector`` that records which rows are present
(``MultiAgentBuffer.valid``) and, with ``--team-reward``, gives each agent its game's mean reward. The loop asks
every buffer the same questions (its advantages, debug variables and episodic returns by part); this buffer
answers them by turns, by kind of agent and by agent. ``check_agents`` refuses the settings that only many
agents give a meaning to.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from proxima.algo.advantages import Estimator, estimate_advantages, open_moves
from proxima.algo.algorithms import get_algorithm
from proxima.algo.losses import explained_variance, value_loss
from proxima.algo.storage import Batch, RolloutBuffer, SequenceBatch, minibatches
from proxima.base.errors import UserError
from proxima.envs.interface import AgentSpec, Step, agent_spec, alive_after_reset
from proxima.policy.multiagent import MultiAgentActorCritic
from proxima.policy.networks import ActorCritic
from proxima.run.config import PPOArgs
from proxima.run.rollout import RecurrentCollector, RolloutCollector


class MultiAgentBuffer(RolloutBuffer):
    """A ``RolloutBuffer`` of a multi-agent env's rows, and which of them were samples."""

    STEPS = (*RolloutBuffer.STEPS, "valid")
    END = ("next_valid",)

    def __init__(self, *shapes, agents: AgentSpec, whole_games: bool = False):
        super().__init__(*shapes)
        self.spec = agents
        self.whole_games = whole_games  # the model's agents of a game share one value (GameBatch)
        num_steps, n = self.obs.shape[:2]
        # valid[t, i]: row i's agent was present at step t, so its action counted
        self.valid = torch.ones((num_steps, n), dtype=torch.bool, device=self.obs.device)
        # a turn-based game's (AgentSpec.turns): a row's advantages run from one of its valid steps to its next;
        # next_valid: (N,) the rows that act at the observation after the rollout (set by the collector)
        self.next_valid = torch.ones(n, dtype=torch.bool, device=self.obs.device)

    @property
    def agents(self) -> int:
        """The agents of a game, whose rows are consecutive."""
        return self.spec.num_agents

    def advantages(
        self,
        estimator: str | Estimator,
        next_value: Tensor,
        next_done: Tensor,
        gamma: float,
        gae_lambda: float,
    ) -> Tensor:
        """A turn-based game's advantages run from each move to the player's next (``gae_by_turns``); the moves
        whose transitions run past the rollout are then no samples."""
        if not self.spec.turns:
            return super().advantages(estimator, next_value, next_done, gamma, gae_lambda)
        advantages = estimate_advantages(
            estimator,
            self.rewards,
            self.values,
            self.dones,
            next_value,
            next_done,
            gamma,
            gae_lambda,
            acting=self.valid,
            next_acting=self.next_valid,
        )
        self.valid &= ~open_moves(self.valid, self.dones, next_done, self.next_valid)
        return advantages

    def flatten(self, advantages: Tensor, returns: Tensor) -> Batch:
        """The steps of agents that had left their game are not samples: they are dropped here, so that no loss,
        normalization or statistic of the update sees them. Where none had, the rows are whole games: a
        ``GameBatch`` where the model's agents of a game share one value."""
        batch = super().flatten(advantages, returns)
        if not bool(self.valid.all()):
            return batch[self.valid.flatten().nonzero().squeeze(-1)]
        return GameBatch(**vars(batch), agents=self.agents) if self.whole_games else batch

    def sequences(self, advantages: Tensor, returns: Tensor) -> SequenceBatch:
        batch = super().sequences(advantages, returns)
        if not bool(self.valid.all()):
            batch.valid = self.valid
        return batch

    def present(self, t: int) -> Tensor:
        return self.valid[t]

    def diagnostics(self, model, batch: Batch) -> dict:
        """The debug variables of each network: one per kind of agent, or one per agent (``--no-share-params``)."""
        agents, shared = self.spec, model.spec.network.share_params
        groups = list(agents.kinds) if shared else list(range(agents.num_agents))
        names = agents.kind_names() if shared else list(agents.names)
        return group_diagnostics(model, batch, groups, names) if len(names) > 1 else {}

    def breakdown(self) -> dict:
        """Each agent's mean episodic return (``episodic_return/NAME``; None where none of its episodes ended):
        which agent lags behind."""
        by_row = self.episode_returns.where(self.episode_ended, torch.nan).view(
            -1, self.obs.shape[1] // self.agents, self.agents
        )
        means = by_row.nanmean((0, 1)).tolist()
        return {
            f"episodic_return/{name}": None if math.isnan(m) else m
            for name, m in zip(self.spec.names, means, strict=True)
        }


@dataclass
class GameBatch(Batch):
    """A batch of whole games, ``agents`` consecutive rows each, for a model whose agents of a game share one
    value (``MultiAgentActorCritic.agents_per_game``, ``--no-critic-agent-index``): its minibatches are whole
    games, so that the value is computed once per game."""

    agents: int

    def __getitem__(self, index: Tensor) -> GameBatch:
        return GameBatch(**vars(super().__getitem__(index)), agents=self.agents)

    def minibatches(self, count: int, generator: torch.Generator) -> list[Tensor]:
        """Each holds the rows of ``len(self) // agents // count`` random games, every game's agents in order."""
        offsets = torch.arange(self.agents, device=generator.device)
        games = minibatches(len(self) // self.agents, count, generator)
        return [(index.unsqueeze(-1) * self.agents + offsets).flatten() for index in games]

    def evaluate(self, model) -> tuple[Tensor, Tensor, Tensor]:
        return cast(MultiAgentActorCritic, model).evaluate(self.obs, self.actions, whole_games=True)


class MultiAgentCollector(RolloutCollector):
    """The collector of a multi-agent env: ``alive`` holds the rows whose agents are present in ``next_obs``
    (``Step.alive``); the normalization statistics take in those alone, not the rows of agents that left or
    wait their turn. ``team_reward``: each present agent learns from its game's mean reward."""

    _STATE = (*RolloutCollector._STATE, "alive")
    buffer: MultiAgentBuffer

    def __init__(self, envs, num_steps: int, gamma: float, model, team_reward: bool = False, **options):
        super().__init__(envs, num_steps, gamma, model, **options)  # new_buffer checks that envs has agents
        self.alive = alive_after_reset(envs)
        self.team = self.buffer.agents if team_reward else None  # check_agents refuses it for one agent
        # a turn-based game's team: a waiting player shares it
        self._in_game = torch.ones(envs.num_envs, dtype=torch.bool, device=envs.device)

    @staticmethod
    def new_buffer(envs, model, *shapes) -> RolloutBuffer:
        agents = agent_spec(envs)
        assert agents is not None, "a multi-agent collector steps multi-agent envs"
        # make_policy made this class: its agents of a game may share one value
        whole_games = cast(MultiAgentActorCritic, model).agents_per_game is not None
        return MultiAgentBuffer(*shapes, agents=agents, whole_games=whole_games)

    @torch.no_grad()
    def collect(self, model) -> tuple[Tensor, Tensor]:
        next_value, next_done = super().collect(model)
        self.buffer.next_valid = self.alive
        return next_value, next_done

    def _present(self, t: int) -> Tensor:
        self.buffer.valid[t] = self.alive
        return self.alive

    def _reward(self, reward: Tensor, rows: Tensor | None) -> Tensor:
        if self.team is None:
            return reward
        assert rows is not None  # _present's
        return team_reward_of(reward, self._in_game if self.buffer.spec.turns else rows, self.team)

    def _stepped(self, step: Step) -> None:
        self.alive = torch.ones_like(self.alive) if step.alive is None else step.alive

    def restart(self, seed) -> None:
        super().restart(seed)
        self.alive = alive_after_reset(self.envs)


class MultiAgentRecurrentCollector(MultiAgentCollector, RecurrentCollector):
    """``MultiAgentCollector`` of a recurrent agent: each row's memory runs on through the steps it is absent."""


def collector_of(envs, args: PPOArgs) -> tuple[type[RolloutCollector], dict]:
    """The class of ``envs``' collector under ``args`` and its options (``--team-reward``'s, of many agents)."""
    recurrent = args.network.recurrent
    if agent_spec(envs) is None:
        return (RecurrentCollector if recurrent else RolloutCollector), {}
    collector = MultiAgentRecurrentCollector if recurrent else MultiAgentCollector
    return collector, {"team_reward": args.env.team_reward}


def resized(agents: AgentSpec | None, num_envs: int) -> AgentSpec | None:
    """``agents`` (None: one agent) of ``num_envs`` games: all slices' games, where each slice's are ``agents``."""
    return None if agents is None else dataclasses.replace(agents, num_envs=num_envs)


def team_reward_of(reward: Tensor, present: Tensor, agents: int) -> Tensor:
    """Each present agent's reward replaced by the mean over the agents present in its game (rows env-major,
    ``agents`` a game); an absent agent's stays 0. A turn-based game's rollout passes every row as present (its
    waiting players are in the team), an agent already out of the game included (docs/MULTIAGENT.md)."""
    r, present = reward.view(-1, agents), present.view(-1, agents)
    mean = r.sum(1, keepdim=True) / present.sum(1, keepdim=True).clamp(min=1)
    return (mean * present).reshape(-1)


@torch.no_grad()
def group_diagnostics(model: ActorCritic, batch: Batch, kinds: list[int], names: list[str]) -> dict:
    """The debug variables of each kind of agent (``kinds``: the kind of each agent index), after the update,
    over the whole batch: ``NAME/entropy``, ``NAME/approx_kl`` (from the rollout's policy), and the critic's
    ``NAME/value_loss`` (in the update's units) and ``NAME/explained_variance``. One forward pass."""
    logprobs, entropy, values = model.evaluate(batch.obs, batch.actions, batch.sequences)
    batch, (logprobs, entropy, values) = batch.samples(logprobs, entropy, values)
    value_scale = model.normalization.value_scale()
    scale = 1.0 if value_scale is None else value_scale
    column = cast(MultiAgentActorCritic, model).agent_column  # rows of agents: make_policy made this class
    kind = torch.tensor(kinds, device=batch.obs.device)[batch.obs[..., column].long()]
    stats = {}
    for k, name in enumerate(names):
        rows = kind == k
        if not bool(rows.any()):
            continue
        logratio = logprobs[rows] - batch.logprobs[rows]
        stats[f"{name}/entropy"] = entropy[rows].mean().item()
        stats[f"{name}/approx_kl"] = ((logratio.exp() - 1.0) - logratio).mean().item()
        stats[f"{name}/value_loss"] = value_loss(values[rows] / scale, batch.returns[rows] / scale).item()
        stats[f"{name}/explained_variance"] = explained_variance(values[rows], batch.returns[rows])
    return stats


def check_agents(args: PPOArgs, agents: AgentSpec | None) -> None:
    """The settings that only a multi-agent env gives a meaning to, refused on any other."""
    algo = args.algorithm.algo
    asked = (
        (f"--algo {algo}", get_algorithm(algo).multi_agent),
        ("centralized_critic", args.network.centralized_critic),
        ("team_reward", args.env.team_reward),
        ("--no-critic-agent-index", not args.network.critic_agent_index),
    )
    named = [name for name, on in asked if on]
    if agents is None and named:
        raise UserError(
            f"{named[0]} trains many agents, and {args.env.env_id} is a single-agent env; multi-agent envs are "
            "pettingzoo:MODULE and vmas:SCENARIO ids (docs/MULTIAGENT.md)"
        )
    if agents is not None and not args.network.critic_agent_index:
        # the setting may come from a preset (vmas-benchmarl sets it), so each line names both ways out
        given = '--no-critic-agent-index (the flag, or a preset\'s "critic_agent_index": false)'
        if not args.network.centralized_critic and args.network.actor_agent_index:
            raise UserError(
                f"{given}: an IPPO critic works on the actor's features, which hold the index unless "
                "--no-actor-agent-index; add that, give --critic-agent-index, or use --algo mappo"
            )
        if agents.turns:
            raise UserError(
                f"{given} gives a game's agents one value, and in a turn-based game each player needs its own: "
                "give --critic-agent-index"
            )
    separate = agents is not None and (agents.num_kinds > 1 or not args.network.share_params)
    if separate and args.network.shared_network:
        raise UserError(
            "--shared-network gives one trunk to every agent; agents of several kinds, or --no-share-params, need "
            "a network each: drop --shared-network"
        )
