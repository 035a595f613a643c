"""Native batched environments: N copies of an env in one state tensor, stepped by tensor ops.

No per-env Python loop and no numpy round trip: a step of 1024 CartPoles costs a handful of tensor ops.
Each env auto-resets inside the step that ends its episode (returning the real final observation in
``Step.final_obs``), keeps terminated and truncated apart, and draws its initial states from its own seeded
random stream, so env i's episodes do not depend on how many envs run beside it.

The random streams are counter-based: the k-th draw of env i is a hash of (seed + i, k), computed for all
envs at once, and env i's counter advances only when env i resets. So the n-th episode of env i always
starts from the same state, whatever the other envs do. New initial states are drawn only on steps where
some episode ended (one ``any()`` check: cheap on a CPU, a host synchronisation on a GPU).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.envs.vector import Step

_MASK32 = 0xFFFFFFFF


def _mul32(x: Tensor, c: int) -> Tensor:
    """``(x * c) mod 2**32`` for 32-bit ``x`` in int64, in 16-bit halves so no product overflows int64."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _MASK32


def hash32(x: Tensor) -> Tensor:
    """A 32-bit integer hash with good avalanche (Wellons' lowbias32), elementwise on an int64 tensor."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


class CounterRNG:
    """Independent uniform streams, one per env: draw ``k`` of env ``i`` is ``hash(key_i, k)``."""

    def __init__(self, num_envs: int, device: torch.device):
        self.num_envs, self.device = num_envs, device
        self.key = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.counter = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def seed(self, seed: int) -> None:
        ids = torch.arange(self.num_envs, dtype=torch.int64, device=self.device) + int(seed)
        self.key = hash32(hash32(ids) ^ 0x9E3779B9)
        self.counter.zero_()

    def uniform(self, size: int, low: float, high: float, advance: Tensor, dtype=torch.float64) -> Tensor:
        """``(num_envs, size)`` uniforms in [low, high); the streams of envs where ``advance`` is true move on
        by ``size`` draws (the other rows are to be discarded)."""
        k = self.counter.unsqueeze(1) + torch.arange(size, device=self.device)
        bits = hash32(k * 0x9E3779B1 + self.key.unsqueeze(1))
        self.counter += advance.to(torch.int64) * size
        return low + (high - low) * (bits >> 8).to(dtype) / float(1 << 24)


class NativeVecEnv:
    """Base of the native envs: time limit, auto-reset and final observations around ``_dynamics``."""

    max_episode_steps: int
    state_dim: int
    single_observation_space: gym.spaces.Box
    single_action_space: gym.Space

    def __init__(self, num_envs: int, *, seed: int | None = None, device: torch.device | str = "cpu"):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self._seed = seed
        self.rng = CounterRNG(num_envs, self.device)
        self.state = torch.zeros(num_envs, self.state_dim, dtype=torch.float64, device=self.device)
        self.elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset all envs; env i's stream is seeded with seed + i (the seed given at construction, if none)."""
        seed, self._seed = (self._seed if seed is None else seed), None
        self.rng.seed(0 if seed is None else seed)
        self.state = self._initial_state(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self.elapsed.zero_()
        return self._observe(self.state)

    def step(self, actions: Tensor) -> Step:
        state, reward, terminated = self._dynamics(self.state, actions.to(self.device))
        self.elapsed += 1
        # as Gymnasium's TimeLimit: truncation may coincide with termination
        truncated = self.elapsed >= self.max_episode_steps
        done = terminated | truncated
        final_obs = self._observe(state)
        if not done.any():
            self.state = state
            return Step(final_obs, reward, terminated, truncated, final_obs)
        self.state = torch.where(done.unsqueeze(1), self._initial_state(done), state)
        self.elapsed.masked_fill_(done, 0)
        obs = torch.where(done.unsqueeze(1), self._observe(self.state), final_obs)
        return Step(obs, reward, terminated, truncated, final_obs)

    def close(self) -> None:
        pass

    # --- what each env defines -------------------------------------------------------------------------
    def _initial_state(self, reset: Tensor) -> Tensor:
        """Initial states for every env (rows where ``reset`` is false are discarded); draws from ``self.rng``."""
        raise NotImplementedError

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(next_state, reward, terminated)`` for a batch; must not touch ``self.state``."""
        raise NotImplementedError

    def _observe(self, state: Tensor) -> Tensor:
        return state.to(torch.float32)


class CartPole(NativeVecEnv):
    """Gymnasium's CartPole-v1 (Barto, Sutton and Anderson), same constants, Euler integration, 500 steps."""

    max_episode_steps = 500
    state_dim = 4
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masscart + masspole
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    _high = np.array(
        [x_threshold * 2, np.finfo(np.float32).max, theta_threshold * 2, np.finfo(np.float32).max],
        dtype=np.float32,
    )
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(2)

    def _initial_state(self, reset: Tensor) -> Tensor:
        return self.rng.uniform(4, -0.05, 0.05, advance=reset)

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, x_dot, theta, theta_dot = state.unbind(1)
        force = torch.where(actions == 1, self.force_mag, -self.force_mag).to(state.dtype)
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        next_state = torch.stack((x, x_dot, theta, theta_dot), dim=1)
        terminated = (x.abs() > self.x_threshold) | (theta.abs() > self.theta_threshold)
        reward = torch.ones(state.shape[0], dtype=torch.float32, device=state.device)
        return next_state, reward, terminated


NATIVE_ENVS = {"CartPole-v1": CartPole}
