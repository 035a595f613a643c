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
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.base.spaces import ObsLayout
from proxima.envs.interface import AgentSpec, NoEnvObjects, Seeds, Step, agent_rows, one_seed, row_seeds
from proxima.envs.registry import register_backend

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
        self._offsets: dict[int, Tensor] = {}  # arange(size) by size: made once, not at every draw

    def seed(self, seed: int | list[int]) -> None:
        """Key env i's stream by ``seed + i``, or by ``seed[i]`` where ``seed`` is a list of one int per env."""
        if isinstance(seed, list):
            ids = torch.tensor(seed, dtype=torch.int64, device=self.device)
        else:
            ids = torch.arange(self.num_envs, dtype=torch.int64, device=self.device) + int(seed)
        self.key = hash32(hash32(ids) ^ 0x9E3779B9)
        self.counter.zero_()

    def uniform(self, size: int, low: float, high: float, advance: Tensor, dtype=torch.float64) -> Tensor:
        """``(num_envs, size)`` uniforms in [low, high); the streams of envs where ``advance`` is true move on
        by ``size`` draws (the other rows are to be discarded)."""
        offsets = self._offsets.get(size)
        if offsets is None:
            offsets = self._offsets[size] = torch.arange(size, device=self.device)
        k = self.counter.unsqueeze(1) + offsets
        bits = hash32(k * 0x9E3779B1 + self.key.unsqueeze(1))
        self.counter.add_(advance, alpha=size)  # one op for a bool's cast, the product and the sum
        return low + (high - low) * (bits >> 8).to(dtype) / float(1 << 24)

    def state_dict(self) -> dict[str, Tensor]:
        return {"rng_key": self.key, "rng_counter": self.counter}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.key = state["rng_key"].to(self.device, torch.int64)
        self.counter = state["rng_counter"].to(self.device, torch.int64)


# VecEnv.call and set_attr (curriculum) need an object per env; native envs report no info either, so
# --log-info and a callback's info_keys get empty infos from them (docs/CALLBACKS.md).
NO_ENV_OBJECTS = (
    "native envs are batched tensors with no per-env objects, so call and set_attr cannot reach one; use "
    "--env-backend gymnasium (env_backend='gymnasium') to call env methods or set env attributes"
)


class NativeVecEnv(NoEnvObjects):
    """Base of the native envs: time limit, auto-reset and final observations around ``_dynamics``."""

    no_env_objects = NO_ENV_OBJECTS

    max_episode_steps: int
    state_dim: int
    single_observation_space: gym.spaces.Box
    single_action_space: gym.Space

    def __init__(self, num_envs: int, *, seed: Seeds = None, device: torch.device | str = "cpu"):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self._seed = row_seeds(seed, num_envs)
        self.rng = CounterRNG(num_envs, self.device)
        self.state = torch.zeros(num_envs, self.state_dim, dtype=torch.float64, device=self.device)
        self._box_actions = False  # whether step clips the actions into a Box's bounds
        if isinstance(space := self.single_action_space, gym.spaces.Box):
            self._box_actions = True
            self._action_low, self._action_high = (
                torch.as_tensor(b, dtype=torch.float64, device=self.device) for b in (space.low, space.high)
            )
        self.elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.obs_layout = ObsLayout(self.single_observation_space)

    def reset(self, seed: Seeds = None) -> Tensor:
        seed, self._seed = row_seeds(self._seed if seed is None else seed, self.num_envs), None
        self.rng.seed(0 if seed is None else seed)
        self.state = self._initial_state(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self.elapsed.zero_()
        return self._observe(self.state)

    def step(self, actions: Tensor) -> Step:
        actions = actions.to(self.device)
        if self._box_actions:  # what a Gymnasium env would receive
            actions = actions.to(torch.float64).clamp(self._action_low, self._action_high)
        state, reward, terminated = self._dynamics(self.state, actions)
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
        obs = torch.where(done.view(-1, *(1,) * (final_obs.dim() - 1)), self._observe(self.state), final_obs)
        return Step(obs, reward, terminated, truncated, final_obs)

    def state_dict(self) -> dict[str, Tensor]:
        """Everything the next steps depend on, so a checkpoint can continue the very same episodes."""
        return {"state": self.state, "elapsed": self.elapsed, **self.rng.state_dict()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self._seed = None  # the restored streams replace the construction seed's
        self.state = state["state"].to(self.device, torch.float64)
        self.elapsed = state["elapsed"].to(self.device, torch.int64)
        self.rng.load_state_dict(state)

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
    # Gymnasium's own space (1.x: unbounded velocities), so that an agent moves between the two backends
    _high = np.array([x_threshold * 2, np.inf, theta_threshold * 2, np.inf], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(2)

    def __init__(self, num_envs: int, *, seed: Seeds = None, device: torch.device | str = "cpu"):
        super().__init__(num_envs, seed=seed, device=device)
        # the bounds of |x|, |x_dot|, |theta|, |theta_dot|: no |velocity| is above infinity, so the test of
        # the whole state is that of x and theta, without cutting them out of it first
        bounds = [self.x_threshold, math.inf, self.theta_threshold, math.inf]
        self._limits = torch.tensor(bounds, dtype=torch.float64, device=device)
        # the force of actions 0 and 1, made once: where() of two Python numbers makes two tensors and casts
        self._forces = tuple(
            torch.tensor(f, dtype=torch.float64, device=device) for f in (-self.force_mag, self.force_mag)
        )

    def _initial_state(self, reset: Tensor) -> Tensor:
        return self.rng.uniform(4, -0.05, 0.05, advance=reset)

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, x_dot, theta, theta_dot = state.unbind(1)
        force = torch.where(actions == 1, self._forces[1], self._forces[0])
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        # Euler's step for all four variables at once: the same products and sums as one by one, in fewer ops
        next_state = state + self.tau * torch.stack((x_dot, xacc, theta_dot, thetaacc), dim=1)
        terminated = (next_state.abs() > self._limits).any(1)  # x or theta out of bounds
        reward = torch.ones(state.shape[0], dtype=torch.float32, device=state.device)
        return next_state, reward, terminated


class CartPoleNoVelocity(CartPole):
    """``proxima/CartPoleNoVelocity-v1``: CartPole observed through its position and angle only (for LSTMs)."""

    single_observation_space = gym.spaces.Box(
        CartPole._high[[0, 2]] * -1, CartPole._high[[0, 2]], dtype=np.float32
    )

    def _observe(self, state: Tensor) -> Tensor:
        return state[:, [0, 2]].to(torch.float32)


def _angle_normalize(x: Tensor) -> Tensor:
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(NativeVecEnv):
    """Gymnasium's Pendulum-v1: torque in [-2, 2], g = 10, 200 steps; it never terminates."""

    max_episode_steps = 200
    state_dim = 2
    max_speed, max_torque, dt, g, m, length = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0
    single_observation_space = gym.spaces.Box(
        np.array([-1.0, -1.0, -8.0], dtype=np.float32), np.array([1.0, 1.0, 8.0], dtype=np.float32)
    )
    single_action_space: gym.Space = gym.spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)

    def _initial_state(self, reset: Tensor) -> Tensor:
        u = self.rng.uniform(2, 0.0, 1.0, advance=reset)
        return torch.stack((math.pi * (2 * u[:, 0] - 1), 2 * u[:, 1] - 1), dim=1)

    def _torque(self, actions: Tensor) -> Tensor:
        return actions.reshape(-1).to(torch.float64)

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        th, thdot = state.unbind(1)
        # Gymnasium receives a float32 torque, and under NumPy 2's promotion rules the terms in u stay float32
        # while the rest is float64; rounding them the same way keeps long rollouts within 1e-5 of it.
        u = self._torque(actions).to(torch.float32)
        costs = _angle_normalize(th) ** 2 + 0.1 * thdot**2 + (0.001 * u**2).double()
        push = (3.0 / (self.m * self.length**2) * u).double()
        newthdot = thdot + (3 * self.g / (2 * self.length) * torch.sin(th) + push) * self.dt
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = th + newthdot * self.dt
        terminated = torch.zeros(state.shape[0], dtype=torch.bool, device=state.device)
        return torch.stack((newth, newthdot), dim=1), (-costs).to(torch.float32), terminated

    def _observe(self, state: Tensor) -> Tensor:
        th, thdot = state.unbind(1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), dim=1).to(torch.float32)


class PendulumDiscrete(Pendulum):
    """``proxima/PendulumDiscrete-v1``: 5 torques, angular velocity / 8, reward / 10 (docs/SEEDS.md)."""

    single_observation_space = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    single_action_space = gym.spaces.Discrete(5)

    def _torque(self, actions: Tensor) -> Tensor:
        return actions.to(torch.float64) - 2.0  # action i -> torque i - 2, i.e. -2, -1, 0, 1, 2

    def _dynamics(self, state, actions):
        next_state, reward, terminated = super()._dynamics(state, actions)
        return next_state, reward / 10, terminated

    def _observe(self, state: Tensor) -> Tensor:
        return super()._observe(state) * torch.tensor([1.0, 1.0, 1 / 8], device=state.device)


class MountainCar(NativeVecEnv):
    """Gymnasium's MountainCar-v0: push left, none or right; -1 per step until the flag; 200 steps."""

    max_episode_steps = 200
    state_dim = 2
    min_position, max_position, max_speed, goal_position, goal_velocity = -1.2, 0.6, 0.07, 0.5, 0.0
    force, gravity = 0.001, 0.0025
    single_observation_space = gym.spaces.Box(
        np.array([-1.2, -0.07], dtype=np.float32), np.array([0.6, 0.07], dtype=np.float32)
    )
    single_action_space: gym.Space = gym.spaces.Discrete(3)

    def _initial_state(self, reset: Tensor) -> Tensor:
        position = self.rng.uniform(1, -0.6, -0.4, advance=reset)
        return torch.cat((position, torch.zeros_like(position)), dim=1)

    def _push(self, actions: Tensor) -> Tensor:
        return (actions.to(torch.float64) - 1) * self.force

    def _reward(self, actions: Tensor, terminated: Tensor) -> Tensor:
        return -torch.ones(terminated.shape[0], dtype=torch.float32, device=terminated.device)

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        position, velocity = state.unbind(1)
        velocity = velocity + self._push(actions) + torch.cos(3 * position) * (-self.gravity)
        velocity = velocity.clamp(-self.max_speed, self.max_speed)
        position = (position + velocity).clamp(self.min_position, self.max_position)
        velocity = torch.where((position == self.min_position) & (velocity < 0), 0.0, velocity)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        return torch.stack((position, velocity), dim=1), self._reward(actions, terminated), terminated


class MountainCarContinuous(MountainCar):
    """Gymnasium's MountainCarContinuous-v0: force in [-1, 1]; +100 at the flag, -0.1 * force^2; 999 steps."""

    max_episode_steps = 999
    goal_position, power = 0.45, 0.0015
    single_action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def _push(self, actions: Tensor) -> Tensor:
        return (actions.reshape(-1).to(torch.float32) * self.power).double()  # float32, as in Gymnasium

    def _reward(self, actions: Tensor, terminated: Tensor) -> Tensor:
        return (100.0 * terminated - 0.1 * actions.reshape(-1) ** 2).to(torch.float32)


class Acrobot(NativeVecEnv):
    """Gymnasium's Acrobot-v1 ("book" dynamics, RK4 over dt = 0.2, no torque noise); 500 steps."""

    max_episode_steps = 500
    state_dim = 4
    dt, l1, m1, m2, lc1, lc2, moi, g = 0.2, 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 9.8
    max_vel_1, max_vel_2 = 4 * math.pi, 9 * math.pi
    _high = np.array([1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(3)

    def _initial_state(self, reset: Tensor) -> Tensor:
        return self.rng.uniform(4, -0.1, 0.1, advance=reset)

    def _derivatives(self, s: Tensor, torque: Tensor) -> Tensor:
        m1, m2, l1, lc1, lc2, moi, g = self.m1, self.m2, self.l1, self.lc1, self.lc2, self.moi, self.g
        theta1, theta2, dtheta1, dtheta2 = s.unbind(1)
        # Gymnasium's _dsdt term for term; cos and sin of theta2 are computed once (the same values)
        # because at a few envs each tensor op's fixed cost, not the arithmetic, is the step's time.
        cos2, sin2 = torch.cos(theta2), torch.sin(theta2)
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + moi + moi
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + moi
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * sin2
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
            + phi2
        )
        ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
            m2 * lc2**2 + moi - d2**2 / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return torch.stack((dtheta1, dtheta2, ddtheta1, ddtheta2), dim=1)

    def _dynamics(self, state: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        torque = actions.to(torch.float64) - 1.0  # actions 0, 1, 2 -> torques -1, 0, 1
        dt = self.dt
        k1 = self._derivatives(state, torque)
        k2 = self._derivatives(state + dt / 2 * k1, torque)
        k3 = self._derivatives(state + dt / 2 * k2, torque)
        k4 = self._derivatives(state + dt * k3, torque)
        ns = state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        theta1, theta2 = _wrap(ns[:, 0]), _wrap(ns[:, 1])
        velocity1 = ns[:, 2].clamp(-self.max_vel_1, self.max_vel_1)
        velocity2 = ns[:, 3].clamp(-self.max_vel_2, self.max_vel_2)
        ns = torch.stack((theta1, theta2, velocity1, velocity2), dim=1)
        terminated = -torch.cos(theta1) - torch.cos(theta2 + theta1) > 1.0
        reward = torch.where(terminated, 0.0, -1.0).to(torch.float32)
        return ns, reward, terminated

    def _observe(self, state: Tensor) -> Tensor:
        t1, t2, d1, d2 = state.unbind(1)
        return torch.stack((torch.cos(t1), torch.sin(t1), torch.cos(t2), torch.sin(t2), d1, d2), dim=1).to(
            torch.float32
        )


def _wrap(x: Tensor) -> Tensor:
    """Gymnasium's ``wrap(x, -pi, pi)``: shift by 2 pi until inside, leaving values already inside alone."""
    return torch.where((x > math.pi) | (x < -math.pi), torch.remainder(x + math.pi, 2 * math.pi) - math.pi, x)


class _NativeProbe(NativeVecEnv):
    """Base of the probes (``proxima.envs.probes`` says what each tests): state = (observation, steps taken)."""

    max_episode_steps = 2**62  # probes end themselves; no time limit
    state_dim = 2
    single_observation_space: gym.spaces.Box = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    single_action_space: gym.Space = gym.spaces.Discrete(1)

    def _first_obs(self, reset: Tensor) -> Tensor:
        return torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)

    def _coin(self, reset: Tensor) -> Tensor:  # each env's own fair coin
        return self.rng.uniform(1, 0.0, 1.0, advance=reset)[:, 0] < 0.5

    def _initial_state(self, reset: Tensor) -> Tensor:
        obs = self._first_obs(reset)
        return torch.stack((obs, torch.zeros_like(obs)), dim=1)

    def _observe(self, state: Tensor) -> Tensor:
        return state[:, :1].to(torch.float32)

    def _one_step(self, state: Tensor, reward: Tensor):
        done = torch.ones(state.shape[0], dtype=torch.bool, device=state.device)
        return state, reward.to(torch.float32), done


class Probe1(_NativeProbe):
    """Constant observation 0, one action, reward 1, episode of one step."""

    def _dynamics(self, state, actions):
        return self._one_step(state, torch.ones_like(state[:, 0]))


class Probe2(_NativeProbe):
    """Observation ±1 at random, one action, reward equal to the observation, episode of one step."""

    def _first_obs(self, reset: Tensor) -> Tensor:
        return torch.where(self._coin(reset), -1.0, 1.0).double()

    def _dynamics(self, state, actions):
        return self._one_step(state, state[:, 0])


class Probe3(_NativeProbe):
    """Two steps: observation 0 with reward 0, then observation 1 with reward 1."""

    def _dynamics(self, state, actions):
        first = state[:, 1] == 0  # obs 0, reward 0, then obs 1, reward 1 and the end
        next_state = torch.where(first.unsqueeze(1), state.new_tensor([1.0, 1.0]), state)
        return next_state, torch.where(first, 0.0, 1.0).to(torch.float32), ~first


class Probe4(_NativeProbe):
    """Observation 0, two actions: reward +1 for action 1, -1 for action 0, episode of one step."""

    single_action_space = gym.spaces.Discrete(2)

    def _dynamics(self, state, actions):
        return self._one_step(state, torch.where(actions == 1, 1.0, -1.0))


class Probe5(Probe4):
    """Observation 0 or 1 at random, two actions: reward +1 when the action equals the observation, else -1."""

    def _first_obs(self, reset: Tensor) -> Tensor:
        return self._coin(reset).double()

    def _dynamics(self, state, actions):
        return self._one_step(state, torch.where(actions == state[:, 0].long(), 1.0, -1.0))


class ProbeContinuous(_NativeProbe):
    """Observation 0, one continuous action in [-2, 2], reward -(action - 0.5)^2, episode of one step."""

    single_action_space = gym.spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
    target = 0.5

    def _dynamics(self, state, actions):
        return self._one_step(state, -((actions.reshape(-1) - self.target) ** 2))


class ProbeMemory(_NativeProbe):
    """Memory: observation ±1 at the first of four steps only, then 0; the action at the fourth is paid +1 when it
    is 1 for a first observation of +1 (0 for -1), else -1; nothing is paid before. State: (observation, steps
    taken, the first observation)."""

    single_action_space = gym.spaces.Discrete(2)
    state_dim = 3
    length = 4

    def _initial_state(self, reset: Tensor) -> Tensor:
        cue = torch.where(self._coin(reset), -1.0, 1.0).double()
        return torch.stack((cue, torch.zeros_like(cue), cue), dim=1)

    def _dynamics(self, state, actions):
        steps, cue = state[:, 1] + 1, state[:, 2]
        last = steps >= self.length
        paid = torch.where(actions == (cue > 0).long(), 1.0, -1.0)
        reward = torch.where(last, paid, 0.0).to(torch.float32)
        return torch.stack((torch.zeros_like(cue), steps, cue), dim=1), reward, last


def probe_images(right: Tensor | Sequence[bool] = (False, True)) -> Tensor:
    """The image probes' observations, ``(N, 1, 36, 36)`` uint8: the right half bright (255) where ``right``,
    else the left half (by default the two: left half bright, then right half)."""
    right = torch.as_tensor(right)
    bright = (torch.arange(36, device=right.device) >= 18).unsqueeze(0) == right.unsqueeze(1)  # (N, columns)
    return torch.where(bright, 255, 0).to(torch.uint8)[:, None, None, :].expand(-1, 1, 36, 36).contiguous()


class _ImageProbe(_NativeProbe):
    """A 1x36x36 image, one half bright and the other dark, at random (``probe_images``); one step. The smallest
    image the Nature CNN takes, so that the pixel path trains in seconds. State: (the bright half: 0 left, 1
    right, steps taken)."""

    single_observation_space = gym.spaces.Box(0, 255, shape=(1, 36, 36), dtype=np.uint8)

    def _first_obs(self, reset: Tensor) -> Tensor:
        return self._coin(reset).double()

    def _observe(self, state: Tensor) -> Tensor:
        return probe_images(state[:, 0].bool())


class ProbeImageValue(_ImageProbe):
    """One action; reward +1 when the left half is bright, -1 when the right half is: V = +1 or -1 by the image.
    Tests that the value reaches through the CNN to the pixels."""

    def _dynamics(self, state, actions):
        return self._one_step(state, torch.where(state[:, 0] == 0, 1.0, -1.0))


class ProbeImagePolicy(_ImageProbe):
    """Two actions; reward +1 for the action that names the bright half (0: left, 1: right), else -1.
    Tests that the policy reads the image: pi(side | image) = 1, V = 1."""

    single_action_space = gym.spaces.Discrete(2)

    def _dynamics(self, state, actions):
        return self._one_step(state, torch.where(actions == state[:, 0].long(), 1.0, -1.0))


class _MultiAgentProbe(NoEnvObjects):
    """Base of the multi-agent probes (``proxima.envs.probes`` says what each tests): ``num_envs`` games of two
    agents as ``2 * num_envs`` rows (``AgentSpec``; row ``2e + a`` is agent ``a`` of game ``e``), each row's
    observation the packed Dict of ``"obs"`` (the agent's own), ``"agent"`` and ``"state"`` (both agents'
    ``"obs"`` side by side). Every episode is one step, so every row is alive at every step. Game ``e`` draws
    from its own seeded stream (seed + e), as the single-agent probes do."""

    no_env_objects = NO_ENV_OBJECTS
    names = ("agent_0", "agent_1")
    single_action_space: gym.spaces.Discrete

    def __init__(self, num_envs: int, *, seed: int | None = None, device: torch.device | str = "cpu"):
        agents = len(self.names)
        self.agents = AgentSpec(self.names, (0,) * agents, num_envs)
        self.num_envs = num_envs * agents
        self.device = torch.device(device)
        self._seed = one_seed(seed, "native multi-agent")
        self.rng = CounterRNG(num_envs, self.device)
        self.own = torch.zeros(num_envs, agents, dtype=torch.float32, device=self.device)
        own, state = (gym.spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32) for n in (1, agents))
        self.obs_layout = agent_rows(own, agents, state)
        self.single_observation_space = self.obs_layout.space

    def reset(self, seed: Seeds = None) -> Tensor:
        seed, self._seed = one_seed(self._seed if seed is None else seed, "native multi-agent"), None
        self.rng.seed(0 if seed is None else seed)
        self.own = self._draw()
        return self.observe(self.own)

    def step(self, actions: Tensor) -> Step:
        games = self.agents.num_envs
        reward = self._reward(self.own, actions.to(self.device).reshape(games, -1)).reshape(-1)
        final_obs = self.observe(self.own)
        self.own = self._draw()  # every game ends at every step and starts its next episode at once
        done = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        return Step(self.observe(self.own), reward.to(torch.float32), done, ~done, final_obs)

    def observe(self, own: Tensor) -> Tensor:
        """The packed rows of games whose agents observe ``own`` (games x agents): ``(games * agents, 1 + 1 +
        agents)`` float32, each row its own observation, its agent index and the state."""
        games, agents = own.shape
        index = torch.arange(agents, dtype=own.dtype, device=own.device).expand(games, agents)
        state = own.unsqueeze(1).expand(games, agents, agents)
        return torch.cat((own.unsqueeze(2), index.unsqueeze(2), state), dim=2).reshape(games * agents, -1)

    def state_dict(self) -> dict[str, Tensor]:
        return {"own": self.own, **self.rng.state_dict()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self._seed = None
        self.own = state["own"].to(self.device, torch.float32)
        self.rng.load_state_dict(state)

    def _draw(self) -> Tensor:  # every game's next observations, (games, agents)
        return torch.zeros_like(self.own)

    def _reward(self, own: Tensor, actions: Tensor) -> Tensor:
        """``(games, agents)`` rewards of ``actions`` (games x agents) in games whose agents observe ``own``."""
        raise NotImplementedError


class ProbeCoordination(_MultiAgentProbe):
    """Two agents, observation 0, two actions each: both are paid 1 when they chose the same action, else 0."""

    single_action_space = gym.spaces.Discrete(2)

    def _reward(self, own, actions):
        same = (actions[:, 0] == actions[:, 1]).to(torch.float32)
        return same.unsqueeze(1).expand_as(own)


class ProbeCentralCritic(_MultiAgentProbe):
    """Two agents, each observing a random bit of its own, one action: both are paid the sum of the two bits.
    An agent's own bit leaves the other's unknown, so only a critic that sees the state, both bits, can value a
    game exactly."""

    single_action_space = gym.spaces.Discrete(1)

    def _draw(self):
        every_game = torch.ones(self.agents.num_envs, dtype=torch.bool, device=self.device)
        return (self.rng.uniform(len(self.names), 0.0, 1.0, advance=every_game) < 0.5).to(torch.float32)

    def _reward(self, own, actions):
        return own.sum(dim=1, keepdim=True).expand_as(own)


def _ids(*probes: type) -> dict:
    return {f"proxima/{cls.__name__}-v0": cls for cls in probes}


PROBE_ENVS = _ids(Probe1, Probe2, Probe3, Probe4, Probe5, ProbeContinuous, ProbeMemory)
# Multi-agent VecEnvs (AgentSpec): served by this backend only; they are not Gymnasium envs.
MULTIAGENT_PROBE_ENVS = _ids(ProbeCoordination, ProbeCentralCritic)
IMAGE_PROBE_ENVS = _ids(ProbeImageValue, ProbeImagePolicy)

NATIVE_ENVS: dict[str, type[NativeVecEnv] | type[_MultiAgentProbe]] = {
    # the vector probes but the memory one: the memory and image probes are served by Gymnasium's backend only
    # (proxima.envs.probes), as their probe budgets were set there
    **_ids(Probe1, Probe2, Probe3, Probe4, Probe5, ProbeContinuous),
    **MULTIAGENT_PROBE_ENVS,
    "CartPole-v1": CartPole,
    "proxima/CartPoleNoVelocity-v1": CartPoleNoVelocity,
    "Acrobot-v1": Acrobot,
    "MountainCar-v0": MountainCar,
    "MountainCarContinuous-v0": MountainCarContinuous,
    "Pendulum-v1": Pendulum,
    "proxima/PendulumDiscrete-v1": PendulumDiscrete,
}


def _make(
    env_id: str, num_envs: int, *, seed=None, device="cpu", **unused
) -> NativeVecEnv | _MultiAgentProbe:
    return NATIVE_ENVS[env_id](num_envs, seed=seed, device=device)


# Where a run of fewer envs goes faster on Gymnasium's envs, `--env-backend auto` takes those below this many
# (benchmarks/backend_choice.py, docs/journal/benchmarks.md). Acrobot's RK4 step is about 150 small tensor ops, whose
# fixed cost Gymnasium's per-env numpy code undercuts until about 16 envs: 0.57x at the default 4 envs. The
# other envs are within noise of Gymnasium's at 4 envs and faster from 8.
NATIVE_FROM = {"Acrobot-v1": 16}

# In-process tensor ops: no worker processes, no rendering. Gymnasium has the single-agent ids too, not the
# multi-agent probes, so a feature those lack is refused here rather than passed on to Gymnasium.
register_backend("native", _make, handles=NATIVE_ENVS, min_envs=NATIVE_FROM, exclusive=MULTIAGENT_PROBE_ENVS)
