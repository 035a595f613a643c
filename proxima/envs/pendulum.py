"""The PPO-from-scratch walk-through's Pendulum (docs/SEEDS.md): 5 torques, angular velocity / 8, reward / 10.

The three wrappers are public so they can be applied to any Pendulum-like env; ``proxima/PendulumDiscrete-v1``
stacks them on Gymnasium's Pendulum-v1 (with its 200-step time limit) in the walk-through's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete

TORQUES = (-2.0, -1.0, 0.0, 1.0, 2.0)


class DiscreteTorques(gym.ActionWrapper):
    """Action ``i`` of ``Discrete(len(torques))`` applies the continuous torque ``torques[i]``."""

    def __init__(self, env: gym.Env, torques: Sequence[float] = TORQUES):
        super().__init__(env)
        self.torques = np.asarray(torques, dtype=np.float32)
        self.action_space = Discrete(len(self.torques))

    def action(self, action) -> np.ndarray:
        return self.torques[int(action)].reshape(1)


class ScaleAngularVelocity(gym.ObservationWrapper):
    """Multiply observation component ``index`` (Pendulum's angular velocity, in [-8, 8]) by ``scale``, so
    that it has the magnitude of the cos/sin components."""

    def __init__(self, env: gym.Env, scale: float = 1 / 8, index: int = 2):
        super().__init__(env)
        space = cast(Box, env.observation_space)  # Pendulum's
        self.factor = np.ones(space.shape, dtype=np.float32)
        self.factor[index] = scale
        bounds = sorted([space.low * self.factor, space.high * self.factor], key=lambda b: b[index])
        self.observation_space = Box(bounds[0], bounds[1], dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return (observation * self.factor).astype(self.observation_space.dtype)  # a copy: never edit in place


class ScaleReward(gym.RewardWrapper):
    """Multiply every reward by ``scale`` (the walk-through uses 1/10)."""

    def __init__(self, env: gym.Env, scale: float = 1 / 10):
        super().__init__(env)
        self.scale = scale

    def reward(self, reward) -> float:
        return float(reward) * self.scale


def make_pendulum_discrete(render_mode: str | None = None, **kwargs) -> gym.Env:
    env = gym.make("Pendulum-v1", render_mode=render_mode, **kwargs)
    return ScaleReward(DiscreteTorques(ScaleAngularVelocity(env)))


gym.register("proxima/PendulumDiscrete-v1", entry_point=make_pendulum_discrete)
