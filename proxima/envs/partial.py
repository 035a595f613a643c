"""Partially observed envs, for recurrent agents: ``proxima/CartPoleNoVelocity-v1``.

CartPole-v1 with only the cart's position and the pole's angle observed (its two velocities removed), as in
sb3-contrib's and CleanRL's recurrent PPO benchmarks. From one observation the velocities cannot be known, so
an agent without memory balances the pole only by luck; an LSTM can infer them from successive positions.
The native backend has the same env (``proxima.envs.native.CartPoleNoVelocity``).
"""

from __future__ import annotations

from typing import cast

import gymnasium as gym
import numpy as np

POSITIONS = [0, 2]  # x and theta of CartPole's (x, x_dot, theta, theta_dot)


class ObserveComponents(gym.ObservationWrapper):
    """Keep only the observation components ``indices`` of a 1-D Box observation."""

    def __init__(self, env: gym.Env, indices: list[int]):
        super().__init__(env)
        self.indices = np.asarray(indices)
        space = cast(gym.spaces.Box, env.observation_space)  # the 1-D Box of the docstring
        self.observation_space = gym.spaces.Box(
            space.low[self.indices], space.high[self.indices], dtype=space.dtype
        )

    def observation(self, observation) -> np.ndarray:
        return np.asarray(observation)[self.indices]


def make_cartpole_no_velocity(render_mode: str | None = None, **kwargs) -> gym.Env:
    return ObserveComponents(gym.make("CartPole-v1", render_mode=render_mode, **kwargs), POSITIONS)


if "proxima/CartPoleNoVelocity-v1" not in gym.registry:
    gym.register("proxima/CartPoleNoVelocity-v1", entry_point=make_cartpole_no_velocity)
