"""Evaluate a trained agent on Gymnasium's own implementation of its environment."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from proxima.agent import Agent
from proxima.envs.vector import make_single_env
from proxima.errors import UserError


def evaluate(
    agent: Agent,
    episodes: int = 10,
    *,
    deterministic: bool = False,
    seed: int = 0,
    env_id: str | None = None,
    max_envs: int = 16,
) -> np.ndarray:
    """Returns of exactly ``episodes`` complete episodes, run in up to ``max_envs`` envs at once.

    Each env is given a fixed quota of episodes before it starts, so short episodes are not over-counted
    (taking the first N episodes to finish across envs would favour them).
    """
    if episodes < 1:
        raise UserError(f"episodes must be a positive integer, got {episodes}")
    env_id = env_id or agent.env_id
    n = min(episodes, max_envs)
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    envs = gym.vector.SyncVectorEnv(
        [lambda: make_single_env(env_id) for _ in range(n)], autoreset_mode=AutoresetMode.SAME_STEP
    )
    try:
        if envs.single_observation_space.shape != agent.observation_space.shape:
            raise UserError(
                f"{env_id} has observations of shape {envs.single_observation_space.shape}, but the agent was "
                f"trained on shape {agent.observation_space.shape}"
            )
        obs, _ = envs.reset(seed=seed)
        running = np.zeros(n)
        returns: list[list[float]] = [[] for _ in range(n)]
        done_count = np.zeros(n, dtype=int)
        while (done_count < quota).any():
            obs, reward, terminated, truncated, _ = envs.step(agent.predict(obs, deterministic))
            running += reward
            for i in np.flatnonzero(terminated | truncated):
                if done_count[i] < quota[i]:
                    returns[i].append(float(running[i]))
                    done_count[i] += 1
                running[i] = 0.0
    finally:
        envs.close()
    return np.array([r for env_returns in returns for r in env_returns])
