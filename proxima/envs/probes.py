"""Probe environments 1-5 (Andy Jones, "Debugging RL, Without the Agonizing Pain"; the
tolerances are the PPO tutorial's, docs/SEEDS.md).

Each isolates one part of an agent, and has an exact answer:

1. One action, obs 0, reward 1, one step: V(0) = 1. Tests the value loss and optimizer.
2. One action, obs ±1, reward = obs, one step: V(±1) = ±1. Tests that the value network uses the observation.
3. One action, two steps: obs 0 with reward 0, then obs 1 with reward 1: V(0) = gamma, V(1) = 1. Tests discounting.
4. Two actions, obs 0, reward +1 for action 1 and -1 for action 0: pi(1|0) = 1, V(0) = 1. Tests the policy
   loss and advantages.
5. Two actions, obs 0 or 1, reward +1 when the action equals the obs, else -1: pi(a=obs) = 1, V = 1. Tests
   that the policy uses the observation, and that observations and actions stay aligned in batches.

ProbeMemory (for recurrent agents): observation ±1 at the first step only, then 0; the action at the fourth step
is paid +1 when it names the first observation's sign, else -1. Without memory the best is chance (0 on
average); with it, pi(right | cue, 0, 0, 0) = 1 and V = 1 there. Tests the LSTM, its state and its replay.

ProbeContinuous: one step, obs 0, a 1-D action in [-2, 2], reward -(a - 0.5)^2: the Gaussian's mean must
converge to 0.5 and V(0) to minus its variance. Tests the continuous head (log-probs, log-std) end to end.

ProbeImageValue and ProbeImagePolicy: probes 2 and 5 seen through a 1x36x36 image (one half bright), for the
CNN encoder.

Multi-agent probes (two agents per game, one row each, ``proxima.envs.interface.AgentSpec``; one step):
ProbeCoordination: observation 0, two actions each; both agents are paid 1 when they chose the same action, else
0: P(same action) = 1, V = 1. Tests the per-agent rows, their rewards and advantages, and the shared policy.
ProbeCentralCritic: each agent sees a random bit of its own, one action; both are paid the sum of the bits. A
critic that sees the state (MAPPO's) learns V = the sum; one that sees only its agent's bit (IPPO's) can only
learn V = its bit + 0.5. Tests what each critic reads. These two are native envs only (``native.MULTIAGENT_PROBE_ENVS``):
a Gymnasium env has one agent.

Each probe is written once, as a batched native env (``proxima.envs.native``); the Gymnasium env of the same id
is one native env behind ``gym.Env``'s API (``FromNative``), so the two backends play the same probe.
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


def _gymnasium(env: type[native.NativeVecEnv]) -> type[FromNative]:
    """The Gymnasium env of a native probe, named as it is."""
    return type(env.__name__, (FromNative,), {"native": env, "__module__": __name__})


PROBES = {env_id: _gymnasium(cls) for env_id, cls in native.PROBE_ENVS.items()}
IMAGE_PROBES = {env_id: _gymnasium(cls) for env_id, cls in native.IMAGE_PROBE_ENVS.items()}


def probe_images() -> np.ndarray:
    """The image probes' two observations, ``(2, 1, 36, 36)`` uint8: left half bright, then right half."""
    return (
        native.ProbeImageValue(2)
        ._observe(torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64))
        .numpy()
    )


for _env_id, _cls in {**PROBES, **IMAGE_PROBES}.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=cast(EnvCreator, _cls))  # a class: called with the env's kwargs
