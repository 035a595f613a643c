"""The one vector-environment interface of proxima (STYLE.md, point 4), and its Gymnasium backend.

The training loop sees only ``VecEnv``: ``reset(seed)`` gives a batch of observations as a tensor, and
``step(actions)`` gives a ``Step`` of tensors. Every sub-environment resets *within* the step that ends its
episode, and that step reports the episode's real final observation in ``final_obs``. So no step ever
returns a reset observation with a meaningless reward, which Gymnasium's default NEXT_STEP autoreset does
(the step after an episode ends ignores the action and returns reward 0): such a transition can never
reach the rollout buffer. Terminated and truncated stay separate, because a time-limit truncation must
bootstrap from ``V(final_obs)`` and a termination must not.

A backend written in torch (N envs stepping as tensor ops) implements the same two methods and plugs
into the loop unchanged.
"""

from __future__ import annotations

import os
import signal
from typing import NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from proxima.distributions import clip_to_space, make_head
from proxima.errors import UserError


class Step(NamedTuple):
    """One step of N environments; all tensors have leading dimension N."""

    obs: Tensor  # (N, *obs_shape) float32; for an env whose episode just ended, the first obs of the next one
    reward: Tensor  # (N,) float32
    terminated: Tensor  # (N,) bool: the episode reached a terminal state; its future value is 0
    truncated: Tensor  # (N,) bool: the episode was cut short (time limit); its future value is V(final_obs)
    final_obs: (
        Tensor  # (N, *obs_shape): the last obs of the ended episode where terminated | truncated, else obs
    )


class VecEnv(Protocol):
    num_envs: int
    single_observation_space: gym.Space
    single_action_space: gym.Space
    device: torch.device

    def reset(self, seed: int | None = None) -> Tensor: ...

    def step(self, actions: Tensor) -> Step: ...

    def close(self) -> None: ...

    def state_dict(self) -> dict[str, Tensor] | None:
        """The envs' complete state as tensors, or None where it cannot be captured without pickling."""
        ...

    def load_state_dict(self, state: dict[str, Tensor]) -> None: ...


def check_spaces(observation_space: gym.Space, action_space: gym.Space) -> None:
    """Raise a ``UserError`` for spaces proxima cannot train on yet."""
    if not (isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1):
        raise UserError(
            f"observation space {observation_space} is not supported yet; proxima accepts 1-D Box observations"
        )
    make_head(action_space)


def make_single_env(env_id: str, render_mode: str | None = None, **kwargs) -> gym.Env:
    """``gymnasium.make`` with its errors turned into one-line ``UserError`` messages.

    Accepts any registered id, and ``module:EnvName-v0``, which Gymnasium handles by importing ``module``
    first (so a user's package can register its envs on import).
    """
    try:
        return gym.make(env_id, render_mode=render_mode, **kwargs)
    except (gym.error.Error, ModuleNotFoundError, ImportError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"unknown env id {env_id!r} ({message}); give a registered Gymnasium id such as CartPole-v1, "
            "or module:EnvName-v0 to import a module that registers it"
        ) from None


class GymnasiumVecEnv:
    """Gymnasium's SyncVectorEnv or AsyncVectorEnv, in same-step autoreset mode, speaking tensors."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        asynchronous: bool = False,
        seed: int | None = None,
        device: torch.device | str = "cpu",
        video_dir: str | None = None,
        video_episodes: int | None = None,
    ):
        self._seed = seed
        probe = make_single_env(env_id)  # fail fast, in this process, on a bad id or unsupported spaces
        check_spaces(probe.observation_space, probe.action_space)
        probe.close()
        fns = [
            _env_factory(env_id, video_dir if i == 0 else None, video_episodes, worker=asynchronous)
            for i in range(num_envs)
        ]
        vector_cls = gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv
        self.envs = vector_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        self.num_envs = num_envs
        self.single_observation_space = self.envs.single_observation_space
        self.single_action_space = self.envs.single_action_space
        self.device = torch.device(device)

    def _tensor(self, array: np.ndarray, dtype=torch.float32) -> Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset all envs; sub-env i is seeded with seed + i (the seed given at construction, if none here)."""
        seed, self._seed = (self._seed if seed is None else seed), None
        obs, _ = self.envs.reset(seed=seed)
        return self._tensor(obs)

    def step(self, actions: Tensor) -> Step:
        obs, reward, terminated, truncated, info = self.envs.step(
            clip_to_space(actions.cpu().numpy(), self.single_action_space)
        )
        obs_t = self._tensor(obs)
        final_obs = obs_t
        if "_final_obs" in info:
            ended = np.flatnonzero(info["_final_obs"])
            final_obs = obs_t.clone()
            final_obs[ended] = self._tensor(np.stack(info["final_obs"][ended]))
        return Step(
            obs_t,
            self._tensor(reward),
            self._tensor(terminated, torch.bool),
            self._tensor(truncated, torch.bool),
            final_obs,
        )

    def close(self) -> None:
        self.envs.close()

    def state_dict(self) -> None:
        # A Gymnasium env's state is an arbitrary Python object; saving it would mean pickling it.
        return None

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError("Gymnasium envs cannot be restored; reset them instead")


def _env_factory(env_id: str, video_dir: str | None, video_episodes: int | None = None, worker: bool = False):
    """``video_episodes``: record the first that many episodes; None: Gymnasium's 0, 1, 8, 27, ... schedule.
    ``worker``: the env lives in its own process (AsyncVectorEnv), where this runs."""

    def make() -> gym.Env:
        if worker:
            # Ctrl-C reaches the whole process group; the trainer handles it (checkpoint, then exit), so a
            # worker must not die of it mid-update.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if video_dir is None:
            return make_single_env(env_id)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array needs no display; keeps SDL quiet
        env = make_single_env(env_id, render_mode="rgb_array")
        trigger = None if video_episodes is None else (lambda episode: episode < video_episodes)
        return gym.wrappers.RecordVideo(env, video_dir, episode_trigger=trigger, disable_logger=True)

    return make


BACKENDS = ("auto", "gymnasium", "native")


def resolve_backend(
    env_id: str, backend: str = "auto", *, asynchronous: bool = False, video: bool = False
) -> str:
    """``auto`` is ``native`` for the ids proxima implements in torch (shown step for step identical to
    Gymnasium's in tests/test_native_envs.py), unless processes or video are asked for; else ``gymnasium``."""
    if backend != "auto":
        return backend
    from proxima.envs.native import NATIVE_ENVS

    return "native" if env_id in NATIVE_ENVS and not asynchronous and not video else "gymnasium"


def make_vec_env(
    env_id: str,
    num_envs: int,
    *,
    backend: str = "auto",
    seed: int | None = None,
    asynchronous: bool = False,
    device: torch.device | str = "cpu",
    video_dir: str | None = None,
    video_episodes: int | None = None,
) -> VecEnv:
    """Build ``num_envs`` copies of ``env_id`` behind the ``VecEnv`` interface; the first ``reset()`` uses ``seed``.

    ``backend="gymnasium"`` wraps Gymnasium's vector envs (any registered id); ``backend="native"`` uses
    proxima's batched torch implementation (``proxima.envs.native.NATIVE_ENVS``), which steps all envs as
    tensor ops with no numpy round trip; ``"auto"`` (the default) picks native where it exists.

    ``asynchronous`` runs each copy in its own process (Gymnasium's AsyncVectorEnv), which pays off only when
    one env step costs far more than the inter-process round trip. ``video_dir`` records env 0 there.
    """
    if backend not in BACKENDS:
        raise UserError(f"unknown env backend {backend!r}; accepted: {', '.join(BACKENDS)}")
    backend = resolve_backend(env_id, backend, asynchronous=asynchronous, video=video_dir is not None)
    if num_envs < 1:
        raise UserError(f"num_envs must be a positive integer, got {num_envs}")
    if backend == "native":
        from proxima.envs.native import NATIVE_ENVS

        if env_id not in NATIVE_ENVS:
            raise UserError(
                f"no native implementation of {env_id!r}; native envs: {', '.join(NATIVE_ENVS)} "
                "(use --env-backend gymnasium for any other id)"
            )
        if asynchronous or video_dir:
            raise UserError(
                "native envs run in-process as tensor ops: --async-envs and --capture-video need the gymnasium backend"
            )
        return NATIVE_ENVS[env_id](num_envs, seed=seed, device=device)
    return GymnasiumVecEnv(
        env_id,
        num_envs,
        asynchronous=asynchronous,
        seed=seed,
        device=device,
        video_dir=video_dir,
        video_episodes=video_episodes,
    )
