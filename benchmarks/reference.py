"""The day's machine speed: raw Gymnasium CartPole-v1 stepping (SyncVectorEnv of 4, random actions).

These machines' speed varies up to 4x from day to day, so every timing is reported beside this number, measured in
the same session: in docs/journal/benchmarks.md, and in every results record (benchmarks/records.py).

    .venv/bin/python benchmarks/reference.py
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np


def raw_cartpole_sps(steps: int = 100_000, num_envs: int = 4) -> float:
    """Env steps per second of a SyncVectorEnv of ``num_envs`` CartPole-v1 under uniformly random actions."""
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(steps // num_envs, num_envs))
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    elapsed = time.perf_counter() - start
    envs.close()
    return len(actions) * num_envs / elapsed


if __name__ == "__main__":
    print(f"raw Gymnasium CartPole-v1, SyncVectorEnv of 4, random actions: {raw_cartpole_sps():,.0f} steps/s")
