"""Self-play for two-player games (docs/MULTIAGENT.md): the pool of opponents, snapshots of the agent itself,
and the games against a fixed player that measure it.

The env (``proxima.envs.selfplay``, ids ``selfplay:MODULE``) plays the opponents' moves; this module gives it
its opponents. Every ``self_play_every`` updates the agent is saved as an ordinary agent in
``RUN_DIR/snapshots/UPDATE`` (``proxima.load`` reads it), loaded back, and added to the pool, which keeps the
``self_play_pool`` most recent opponents: at first only the random player, which the snapshots then push out.
A game draws the latest snapshot with probability ``self_play_latest`` and any other member of the pool
uniformly otherwise; older snapshots keep the agent from forgetting how to beat the play it has left behind.
With ``self_play_random_moves`` a snapshot's move is a random legal one now and then.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from proxima.base.errors import UserError
from proxima.envs import make_envs
from proxima.envs.selfplay import (
    Policy,
    connect_four_board,
    connect_four_part,
    immediate_wins,
    is_selfplay_id,
    make_player,
)
from proxima.run.agent import Agent
from proxima.run.evaluate import action_generator, episode_quota, run_episodes

SNAPSHOTS = "snapshots"
RANDOM = "random"


def snapshot_dir(run_dir: str, update: int) -> str:
    return os.path.join(run_dir, SNAPSHOTS, f"{update:06d}")


class OpponentPool:
    """The opponents of a self-play run: ``"random"`` and the updates whose snapshots it holds, oldest first."""

    def __init__(self, every: int, size: int, latest: float, random_moves: float = 0.0):
        self.every, self.size, self.latest, self.random_moves = every, size, latest, random_moves
        self.members: list[str | int] = [RANDOM]
        self.policies: dict[str | int, Policy] = {}

    def open(self, envs, run_dir: str, device) -> None:
        """Load the members' policies (the snapshots of a resumed run too) and give the envs the pool."""
        if not hasattr(envs, "set_opponents"):
            raise UserError(
                "self-play gives its opponents to envs of this process (selfplay: ids); drop --rollout-workers"
            )
        self.envs = envs
        self.policies = {member: self._policy(member, envs, run_dir, device) for member in self.members}
        self._install()

    def _policy(self, member, envs, run_dir: str, device) -> Policy:
        if member == RANDOM:
            return envs.random_player
        # the snapshot's sampled moves, on packed observations (the opponents obey the mask as the learner does)
        policy: Policy = Agent.load(snapshot_dir(run_dir, member), device=device).model.predict
        return policy if not self.random_moves else self._sometimes_random(policy, envs)

    def _sometimes_random(self, policy: Policy, envs) -> Policy:
        def play(obs):
            coin = torch.rand(len(obs), generator=envs.generator, device=obs.device) < self.random_moves
            return torch.where(coin, envs.random_player(obs), policy(obs))

        return play

    def add(self, agent: Agent, update: int, run_dir: str, global_step: int, device) -> None:
        """Save ``agent`` as the snapshot of ``update``, load it back into the pool, and give the envs the pool."""
        agent.save(snapshot_dir(run_dir, update), global_step=global_step, update=update)  # made if need be
        self.members.append(update)
        self.policies[update] = self._policy(update, self.envs, run_dir, device)
        for gone in self.members[: -self.size]:
            del self.policies[gone]  # its directory stays: every snapshot is an agent of the run
        del self.members[: -self.size]
        self._install()

    def probabilities(self) -> list[float]:
        n = len(self.members)
        if n == 1 or self.members[-1] == RANDOM:
            return [1 / n] * n
        return [(1 - self.latest) / (n - 1)] * (n - 1) + [self.latest]

    def _install(self) -> None:
        self.envs.set_opponents([self.policies[m] for m in self.members], self.probabilities())

    def state_dict(self) -> dict:
        return {"members": list(self.members)}

    def load_state_dict(self, state: dict) -> None:
        self.members = list(state["members"])


def play_against(
    agent: Agent,
    opponent: str,
    episodes: int,
    *,
    seed: int = 0,
    deterministic: bool = False,
    max_games: int = 100,
) -> tuple[np.ndarray, dict]:
    """``episodes`` games of a self-play agent against a built-in player (``"random"``, ``"lookahead"``), in
    ``max_games`` games at once, each alternating seats from game to game and game ``i`` starting in seat
    ``i % 2``: half the games in each seat where every game plays an even number of them. Returns the
    learner's returns and a summary: wins, draws, losses and their rates, overall and by seat, and in Connect
    Four the learner's ``tactics`` (``Tactics``)."""
    if not is_selfplay_id(agent.env_id):
        raise UserError(
            f"--opponent plays the games of self-play agents (selfplay: ids); this agent plays {agent.env_id}"
        )
    if episodes < 1:
        raise UserError(f"episodes must be a positive integer, got {episodes}")
    n = min(episodes, max_games)
    envs = make_envs(agent.env_id, n, env_kwargs=agent.env_source.get("env_kwargs"), device=agent.device)
    try:
        generator = torch.Generator(device=agent.device).manual_seed(seed)
        envs.set_opponents([make_player(opponent, envs.obs_layout, generator)])
        watched = Tactics(agent.model, envs.obs_layout) if connect_four_part(envs.obs_layout) else None
        returns = run_episodes(
            watched or agent.model,
            envs,
            episodes,
            deterministic=deterministic,
            seed=seed,
            name=agent.env_id,
            generator=action_generator(seed, agent.device, deterministic),
        )
    finally:
        envs.close()
    quota = episode_quota(episodes, n)  # as run_episodes shares the games among the envs
    seats = np.array([(i + k) % 2 for i in range(n) for k in range(quota[i])])
    summary = {"opponent": opponent, **_counts(returns)}
    summary["by_seat"] = {name: _counts(returns[seats == s]) for s, name in enumerate(("first", "second"))}
    if watched is not None:
        summary["tactics"] = watched.summary()
    return returns, summary


class Tactics:
    """A Connect Four agent's model, counting as it plays what a one-step lookahead sees: the moves where it
    could win at once and did, and those where it had no win but the opponent threatened one and it blocked it.
    A policy that loses to the lookahead player mostly misses these (docs/MULTIAGENT.md). Every move of the
    games played counts."""

    def __init__(self, model, layout):
        self.model, self.layout, self.board = model, layout, connect_four_board(layout)
        self.wins = self.wins_taken = self.threats = self.blocked = 0

    def __getattr__(self, name):  # the rest of the model (its LSTM, its memory) as it is
        return getattr(self.model, name)

    def predict(self, obs: torch.Tensor, deterministic: bool = False, generator=None) -> torch.Tensor:
        actions = self.model.predict(obs, deterministic, generator)
        self.count(obs, actions)
        return actions

    def predict_recurrent(self, obs, starts, memory, deterministic: bool = False, generator=None):
        actions, memory = self.model.predict_recurrent(obs, starts, memory, deterministic, generator)
        self.count(obs, actions)
        return actions, memory

    def count(self, obs: torch.Tensor, actions: torch.Tensor) -> None:
        wins, threats = immediate_wins(self.layout, self.board, obs)
        chosen = actions.reshape(-1, 1).long()
        could_win, must_block = wins.any(1), threats.any(1) & ~wins.any(1)
        self.wins += int(could_win.sum())
        self.wins_taken += int(wins.gather(1, chosen).squeeze(1)[could_win].sum())
        self.threats += int(must_block.sum())
        self.blocked += int(threats.gather(1, chosen).squeeze(1)[must_block].sum())

    def summary(self) -> dict:
        return {
            "wins": self.wins,
            "wins_taken": self.wins_taken,
            "win_taken_rate": self.wins_taken / max(self.wins, 1),
            "threats": self.threats,
            "blocked": self.blocked,
            "blocked_rate": self.blocked / max(self.threats, 1),
        }


def _counts(returns: np.ndarray) -> dict:
    n = len(returns)
    wins, losses = int((returns > 0).sum()), int((returns < 0).sum())
    draws = n - wins - losses
    rates = {"win_rate": wins / max(n, 1), "draw_rate": draws / max(n, 1), "loss_rate": losses / max(n, 1)}
    return {"games": n, "wins": wins, "draws": draws, "losses": losses, **rates}
