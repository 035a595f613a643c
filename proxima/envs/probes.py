"""The Gymnasium ids of the probe envs (Andy Jones, "Debugging RL, Without the Agonizing Pain"): what each
is, its answer and what it tests are in docs/tutorials/probes.md and ``proxima.scale.probe``.

Each probe is written once, as a batched native env (``proxima.envs.native``); the Gymnasium env of the same id
is one native env behind ``gym.Env``'s API (``FromNative``), so the two backends play the same probe. The
multi-agent probes (``native.MULTIAGENT_PROBE_ENVS``) are native envs only: a Gymnasium env has one agent.
"""

from __future__ import annotations

from typing import cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.registration import EnvCreator

from proxima.envs import native


class FromNative(gym.Env):
    """One env of a native env class (``native``) as a Gymnasium env.

    ``reset(seed=s)`` starts the episodes of native env 0 seeded with ``s``; a ``reset()`` without a seed starts
    one from a seed drawn from ``np_random``, so a seeded env's later episodes are reproducible too."""

    metadata = {"render_modes": []}
    native: type[native.NativeVecEnv]

    def __init__(self, render_mode: str | None = None):
        self.env = self.native(1)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        return self.env.reset(seed=episode_seed)[0].numpy(), {}

    def step(self, action):
        actions = torch.as_tensor(np.asarray(action)).reshape(1, *self.action_space.shape)
        step = self.env.step(actions)  # the native env starts its next episode at once: reset() replaces it
        return (
            step.final_obs[0].numpy(),
            float(step.reward[0]),
            bool(step.terminated[0]),
            bool(step.truncated[0]),
            {},
        )


# each native probe's Gymnasium env, named as it is
PROBES, IMAGE_PROBES = (
    {
        env_id: type(cls.__name__, (FromNative,), {"native": cls, "__module__": __name__})
        for env_id, cls in table.items()
    }
    for table in (native.PROBE_ENVS, native.IMAGE_PROBE_ENVS)
)
for _env_id, _cls in {**PROBES, **IMAGE_PROBES}.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=cast(EnvCreator, _cls))  # a class: called with the env's kwargs
