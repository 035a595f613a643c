"""The one vector-environment interface of proxima (docs/ARCHITECTURE.md): ``VecEnv`` and its ``Step``.

The training loop sees only ``VecEnv``: ``reset(seed)`` gives a batch of observations as a tensor, and
``step(actions)`` gives a ``Step`` of tensors. Every sub-environment resets *within* the step that ends its
episode, and that step reports the episode's real final observation in ``final_obs``. So no step ever
returns a reset observation with a meaningless reward, which Gymnasium's default NEXT_STEP autoreset does
(the step after an episode ends ignores the action and returns reward 0): such a transition can never
reach the rollout buffer. Terminated and truncated stay separate, because a time-limit truncation must
bootstrap from ``V(final_obs)`` and a termination must not.

Observations keep the observation space's dtype (``uint8`` images stay ``uint8``); the policy's encoder
turns them into float features. Backends (``proxima.envs.registry``) implement this interface; nothing
here knows about policies.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, cast, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.base.errors import EnvError, UserError, raised
from proxima.base.spaces import MASK_KEY, ObsLayout

Seeds = int | Sequence[int] | None
"""A VecEnv's seed: an int (env i gets ``seed + i``), one int per env, or None (``VecEnv.reset``)."""
VideoDirs = str | Mapping[int, str] | None
"""Where a VecEnv records videos: a directory (env 0 records there), env index -> directory, or None."""


class Step(NamedTuple):
    """One step of N environments; all tensors have leading dimension N."""

    obs: Tensor
    """(N, *obs_shape) in the space's dtype; where an episode just ended, the next one's first obs"""
    reward: Tensor
    """(N,) float32"""
    terminated: Tensor
    """(N,) bool: the episode reached a terminal state; its future value is 0"""
    truncated: Tensor
    """(N,) bool: the episode was cut short (time limit); its future value is V(final_obs)"""
    final_obs: Tensor
    """(N, *obs_shape): the last obs of the ended episode where terminated | truncated, else obs"""
    # score and game_over serve the statistics only, where an episode is not a whole game (Atari: a lost life
    # terminates the training episode, and rewards are clipped). None: the same as reward and done.
    score: Tensor | None = None
    """(N,) float32: the env's own reward, unclipped"""
    game_over: Tensor | None = None
    """(N,) bool: a whole game ended here (every life lost, or its time limit)"""
    infos: dict[int, dict] | None = None
    """Only after ``keep_infos`` (None otherwise, and from backends that report no info): env index -> the info
    its env gave at the step that ended its episode, for the envs whose episode ended here."""
    alive: Tensor | None = None
    """(N,) bool, multi-agent envs only (``AgentSpec``): whether row i's agent is present in ``obs``, so its next
    action counts. A row whose agent left (it terminated before its env's episode ended) is not alive until its
    env resets: its actions are ignored, its rewards are 0, it never ends an episode, and the trainer masks its
    steps out of the losses and the advantages. In a turn-based game (``AgentSpec.turns``) only the rows of the
    agents to move are alive; the others wait, with the rewards and ends the movers' actions give them.
    None: every row is alive."""

    @property
    def done(self) -> Tensor:
        return self.terminated | self.truncated

    def stats(self, done: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(score, game_over)``: what episode statistics count, whole games with their raw scores. ``done``:
        ``self.done``, where the caller has it already (each is an op, at every step of a rollout)."""
        over = self.game_over
        if over is None:
            over = self.done if done is None else done
        return self.reward if self.score is None else self.score, over


class VecEnv(Protocol):
    """N environments stepped together, each starting its next episode itself: what the training loop talks
    to (docs/ARCHITECTURE.md)."""

    num_envs: int
    device: torch.device

    # read-only here, so that a backend may hold a narrower space (a Box, a Dict) in the attribute
    @property
    def single_observation_space(self) -> gym.Space: ...

    @property
    def single_action_space(self) -> gym.Space: ...

    def reset(self, seed: Seeds = None) -> Tensor:
        """Start a new episode in every env; return the observations, ``(N, *obs_shape)``. ``seed``: an int
        seeds env i with ``seed + i``; a sequence of N ints seeds env i with ``seed[i]`` (``row_seeds``), so
        one VecEnv can hold the envs of several runs, each seeded as it would be alone; None: the seed given
        at construction (or none). Multi-agent backends take an int only."""
        ...

    def step(self, actions: Tensor) -> Step:
        """Apply one action per env; an env whose episode ends starts the next one in the same call."""
        ...

    def close(self) -> None: ...

    def state_dict(self) -> dict[str, Tensor] | None:
        """The envs' complete state as tensors, or None where it cannot be captured without pickling."""
        ...

    def load_state_dict(self, state: dict[str, Tensor]) -> None: ...

    # Optional, where a backend has them (docs/CALLBACKS.md):
    # - ``keep_infos(keys: InfoKeys) -> None``: from now on ``Step.infos`` holds each ended episode's info;
    # - ``call(name, *args, **kwargs) -> tuple`` and ``set_attr(name, values) -> None``: Gymnasium's
    #   ``VectorEnv.call`` and ``set_attr``, on every sub-env, results in env order. Backends with no per-env
    #   objects raise a one-line ``UserError`` from them;
    # - ``end_video(env: int) -> None``: env ``env`` (one that ``video_dir`` names) records no more.


@runtime_checkable
class EnvCalls(Protocol):
    """A VecEnv's optional ``call`` and ``set_attr`` (every backend here has them), and Gymnasium's
    SyncVectorEnv's and AsyncVectorEnv's (its ``VectorEnv`` base has neither)."""

    num_envs: int

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]: ...

    def set_attr(self, name: str, values: Any) -> None: ...


class NoEnvObjects:
    """Base of the backends whose envs are one batch with no object per env (native, VMAS, ALE): ``call`` and
    ``set_attr`` refuse in the backend's words, its ``no_env_objects``; ``close`` has nothing to free."""

    no_env_objects: str

    def close(self) -> None:
        pass

    def call(self, name: str, *args, **kwargs) -> tuple:
        raise UserError(self.no_env_objects)

    def set_attr(self, name: str, values) -> None:
        raise UserError(self.no_env_objects)


class Unrestorable:
    """Base of the backends whose envs keep their state in Python objects (or in C++), which a checkpoint could
    keep only by pickling: ``state_dict`` is None, and a resumed run starts new episodes."""

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be restored; reset it instead")


@dataclass(frozen=True)
class AgentSpec:
    """What a multi-agent VecEnv is (docs/MULTIAGENT.md): ``num_envs`` copies of a game of ``len(names)`` agents,
    presented as ``num_envs * len(names)`` rows, one per agent of each env, env-major (row ``e * A + a`` is
    agent ``a`` of env ``e``). Each row's observation is a Dict, packed (``obs_layout``): ``"obs"`` (the agent's
    own observation, zero-padded to the largest kind's), ``"agent"`` (``Discrete(A)``: which agent),
    ``"state"`` (the global state: the env's ``state()``, else every agent's observation side by side) and,
    where the env gives masks, ``"action_mask"``. Rewards, terminations and truncations are per row."""

    names: tuple[str, ...]
    """the agents, in row order (PettingZoo's ``possible_agents``)"""
    kinds: tuple[int, ...]
    """each agent's kind: agents with the same observation and action spaces share one (0, 1, ...)"""
    num_envs: int
    """E, the number of games; the VecEnv's ``num_envs`` is E * len(names)"""
    turns: bool = False
    """a turn-based game: at each step only the rows of the agents to move act (``Step.alive``), and the others'
    rewards count toward their last move (``proxima.algo.advantages.gae_by_turns``)"""
    action_dims: tuple[int, ...] | None = None
    """where agents' Box actions differ in size: each agent's, the first components of the rows'
    ``Box(max dim)``; None where every agent acts with every component"""

    @classmethod
    def grouped(cls, names: tuple[str, ...], keys: list, num_envs: int, **fields) -> AgentSpec:
        """The agents ``names`` whose spaces are described by ``keys``: agents of equal keys share a kind,
        numbered in the order of their first agents."""
        firsts = [keys.index(key) for key in keys]
        return cls(names, tuple(sorted(set(firsts)).index(first) for first in firsts), num_envs, **fields)

    @property
    def num_agents(self) -> int:
        return len(self.names)

    @property
    def num_kinds(self) -> int:
        return max(self.kinds) + 1

    def kind_names(self) -> list[str]:
        """A name for each kind: its agents' common name before the last ``_`` (``adversary`` for
        ``adversary_0``, ``adversary_1``), else ``kind0``, ``kind1``, ..."""
        names = []
        for kind in range(self.num_kinds):
            stems = {
                name.rpartition("_")[0] or name
                for name, k in zip(self.names, self.kinds, strict=True)
                if k == kind
            }
            names.append(stems.pop() if len(stems) == 1 else f"kind{kind}")
        return names if len(set(names)) == len(names) else [f"kind{k}" for k in range(self.num_kinds)]

    def to_json(self) -> dict:
        out = {"names": list(self.names), "kinds": list(self.kinds), "num_envs": self.num_envs}
        dims = {} if self.action_dims is None else {"action_dims": list(self.action_dims)}
        return {**out, **({"turns": True} if self.turns else {}), **dims}


def agent_rows(obs: gym.Space, agents: int, state: gym.Space, mask: int | None = None) -> ObsLayout:
    """The layout of a multi-agent VecEnv's packed rows (``AgentSpec``): a Dict of "obs", "agent", "state" and,
    where actions are masked, "action_mask" of ``mask`` booleans, in this order (a plain dict's would be sorted)."""
    parts = [("obs", obs), ("agent", gym.spaces.Discrete(agents)), ("state", state)]
    if mask is not None:
        parts.append((MASK_KEY, gym.spaces.MultiBinary(mask)))
    return ObsLayout(gym.spaces.Dict(parts), None if mask is None else MASK_KEY)


def alive_after_reset(envs) -> Tensor:
    """A multi-agent VecEnv's rows whose agents act first after its reset: its ``alive`` where it keeps one
    (a turn-based game's movers), else every row."""
    alive = getattr(envs, "alive", None)
    if isinstance(alive, Tensor):
        return alive.clone()
    return torch.ones(envs.num_envs, dtype=torch.bool, device=envs.device)


def agent_spec(envs) -> AgentSpec | None:  # None for a single-agent env
    return getattr(envs, "agents", None)


# What ``keep_infos`` keeps of the info at an episode's end: these keys (where present), or "all" of them.
InfoKeys = tuple[str, ...] | Literal["all"]


def kept_info(info: dict, keys: InfoKeys) -> dict:
    return dict(info) if keys == "all" else {k: info[k] for k in keys if k in info}


def merge_info_keys(*wanted: InfoKeys) -> InfoKeys | None:
    """The infos that several users of a run ask for: "all" if one asks for all, else the union of their keys
    in the order asked; None when nobody asks (then nothing is collected)."""
    if any(w == "all" for w in wanted):
        return "all"
    keys = tuple(dict.fromkeys(key for w in wanted for key in w))
    return keys or None


def row_seeds(seed: Seeds, num_envs: int) -> int | list[int] | None:
    """``seed`` as a backend's reset takes it: None or an int as it is (env i gets ``seed + i``), a sequence
    as a list of ``num_envs`` ints (env i gets ``seed[i]``), which must have one per env."""
    if seed is None or isinstance(seed, numbers.Integral):
        return cast("int | None", seed)  # an Integral (numpy's too), passed on as it came
    if isinstance(seed, np.ndarray) and seed.ndim == 1:
        seed = seed.tolist()
    if isinstance(seed, str | bytes) or not isinstance(seed, Sequence):
        raise UserError(f"seed must be an int or a sequence of one int per env, got {seed!r}")
    seeds = list(seed)
    if not all(isinstance(s, numbers.Integral) for s in seeds):
        raise UserError(f"a seed sequence must hold ints only, got {seeds!r}")
    if len(seeds) != num_envs:
        raise UserError(f"a seed sequence needs one int per env: {num_envs} envs, got {len(seeds)} seeds")
    return [int(s) for s in seeds]


def video_dirs(video_dir: VideoDirs, num_envs: int) -> dict[int, str]:
    """``video_dir`` as env index -> the directory that env records into: a directory is env 0's; a mapping
    names each recorded env, as a batched run's seeds record the first env of each into their own run
    directories (seed-major rows)."""
    if video_dir is None:
        return {}
    if not isinstance(video_dir, Mapping):
        return {0: video_dir}
    outside = [i for i in video_dir if not (isinstance(i, numbers.Integral) and 0 <= i < num_envs)]
    if outside:
        raise UserError(f"video_dir names env {outside[0]!r}, but the envs are 0 to {num_envs - 1}")
    return {int(i): d for i, d in video_dir.items()}


def one_seed(seed: Seeds, backend: str) -> int | None:
    """``seed`` for a backend that seeds its envs from one int only (its games are not batched by seed): a
    sequence is refused."""
    if seed is None or isinstance(seed, numbers.Integral):
        return cast("int | None", seed)  # an Integral (numpy's too), passed on as it came
    raise UserError(
        f"the {backend} backend takes one int seed for all its envs, not one seed per env (as --num-seeds "
        "gives them): train each seed as a run of its own"
    )


def per_env_values(values, num_envs: int) -> list:
    """``set_attr``'s values as one per env, as Gymnasium reads them: a list or tuple gives each env its own (it
    must have one per env), anything else is given to every env."""
    if not isinstance(values, list | tuple):
        return [values] * num_envs
    if len(values) != num_envs:
        raise UserError(
            f"set_attr got {len(values)} values for {num_envs} envs; give one value per env in a list or "
            "tuple, or a single value (not a list) for all of them"
        )
    return list(values)


def env_actions(actions: np.ndarray, action_space: gym.Space) -> np.ndarray:
    """What an env receives for the heads' actions: Box actions clipped to the space's finite bounds (an
    unbounded component is sent as sampled); a Discrete's or MultiDiscrete's indices shifted by its ``start``;
    MultiBinary's 0/1 floats as its int8."""
    if isinstance(action_space, gym.spaces.Box):
        return np.clip(actions, action_space.low, action_space.high).astype(action_space.dtype, copy=False)
    if isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        start = action_space.start
        return actions + start.astype(actions.dtype) if np.any(start) else actions
    if isinstance(action_space, gym.spaces.MultiBinary):
        return actions.astype(action_space.dtype)
    return actions


def obs_layout(envs: VecEnv) -> ObsLayout:
    """What each env's observation tensor holds (``proxima.base.spaces``): a Box observation as it is, or any other
    space packed into one vector, with the action mask where the env gives one. A backend that packs says so
    in an ``obs_layout`` attribute; one without it (a user's Box-only backend) gives its space's own arrays."""
    layout = getattr(envs, "obs_layout", None)
    if layout is not None:
        return layout
    space = envs.single_observation_space
    if isinstance(space, gym.spaces.Box) and space.shape == ():  # would be packed: (N, 1), not its (N,)
        raise UserError(
            f"{type(envs).__name__} gives observations of shape (); a backend without an obs_layout must give "
            "Box observations of 1 or more dimensions: give them shape (1,)"
        )
    return ObsLayout(space)


def env_call(method, *args, **kwargs):
    """``method(...)`` of a VecEnv, with an exception raised inside the env (its simulator crashed, a bug in a
    user's env) turned into an ``EnvError`` that names it; the trainer adds what survives of the run."""
    try:
        return method(*args, **kwargs)
    except (UserError, EnvError, KeyboardInterrupt):
        raise
    except Exception as e:
        raise EnvError(f"the env raised {raised(e)}") from e
