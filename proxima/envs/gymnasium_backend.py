"""The Gymnasium backend: any registered id, through Gymnasium's SyncVectorEnv or AsyncVectorEnv, as a ``VecEnv``.

The vector env runs in same-step autoreset mode (see ``proxima.envs.interface``). Envs written by other
people differ from Gymnasium's own: no ``render_mode`` argument, observations of another dtype, the old gym
step API. Each is either handled here or refused with one line that says what Gymnasium 1.x expects.
"""

from __future__ import annotations

import os
import signal

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from proxima.envs.interface import Step, clip_to_space, torch_dtype
from proxima.envs.registry import register_backend
from proxima.errors import EnvError, UserError

ENV_ID_FORMS = "a registered Gymnasium id such as CartPole-v1, or module:EnvName-v0 to import a module that registers it"


def check_env_id(env_id: str) -> None:
    """A ``UserError`` for an id Gymnasium cannot even parse (``::``, ``a:b:c``, ``:Name``, ``module:``)."""
    parts = env_id.split(":")
    if not env_id or len(parts) > 2 or not all(p.strip() for p in parts):
        raise UserError(f"malformed env id {env_id!r}; give {ENV_ID_FORMS}")


def make_single_env(env_id: str, render_mode: str | None = None, **kwargs) -> gym.Env:
    """``gymnasium.make`` with its errors turned into one-line messages.

    Accepts any registered id, and ``module:EnvName-v0``, which Gymnasium handles by importing ``module``
    first (so a user's package can register its envs on import). ``render_mode`` is passed only when one is
    asked for: many envs outside Gymnasium take no such argument.
    """
    check_env_id(env_id)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return gym.make(env_id, **kwargs)
    except (gym.error.Error, ModuleNotFoundError, ImportError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"unknown env id {env_id!r} ({message}); give {ENV_ID_FORMS}") from None
    except TypeError as e:
        if render_mode is not None and "render_mode" in str(e):
            raise UserError(
                f"{env_id} cannot render: its constructor takes no render_mode argument, which video needs"
            ) from None
        raise EnvError(f"{env_id}'s constructor raised {type(e).__name__}: {e}") from e
    except Exception as e:  # the user's constructor itself failed
        raise EnvError(f"{env_id}'s constructor raised {type(e).__name__}: {e}") from e


def check_step_api(env: gym.Env, env_id: str) -> None:
    """One reset and one step of ``env``; a ``UserError`` if they follow the old gym API (4-tuple steps, a
    bare observation from reset), which Gymnasium's vector envs would fail on with an unpacking error."""
    reset = env.reset(seed=0)
    if not (isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict)):
        raise UserError(
            f"{env_id}'s reset() returned {_shape_of(reset)}; Gymnasium 1.x expects (obs, info): "
            "update the env to the Gymnasium API (gymnasium.farama.org/introduction/migration_guide)"
        )
    if env.render_mode is not None:
        frame = env.render()
        if not (isinstance(frame, np.ndarray) and frame.ndim == 3):
            raise UserError(f"{env_id} cannot render {env.render_mode} frames (render() gave {_shape_of(frame)}), which video needs")
    result = env.step(env.action_space.sample())
    if not (isinstance(result, tuple) and len(result) == 5):
        raise UserError(
            f"{env_id}'s step() returned {_shape_of(result)}, the old gym API (obs, reward, done, info); "
            "Gymnasium 1.x expects (obs, reward, terminated, truncated, info): update the env "
            "(gymnasium.farama.org/introduction/migration_guide)"
        )


def _shape_of(value) -> str:
    return f"{len(value)} values" if isinstance(value, tuple) else f"a {type(value).__name__}"


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
        # Fail fast, in this process, on a bad id, an env that cannot render, or the old step API.
        probe = make_single_env(env_id, render_mode="rgb_array" if video_dir else None)
        try:
            _with_env_errors(env_id, lambda: check_step_api(probe, env_id))
        finally:
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
        self._obs_dtype = torch_dtype(self.single_observation_space)

    def _obs(self, array) -> Tensor:
        return torch.as_tensor(np.asarray(array), dtype=self._obs_dtype, device=self.device)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset all envs; sub-env i is seeded with seed + i (the seed given at construction, if none here)."""
        seed, self._seed = (self._seed if seed is None else seed), None
        obs, _ = self.envs.reset(seed=seed)
        return self._obs(obs)

    def step(self, actions: Tensor) -> Step:
        obs, reward, terminated, truncated, info = self.envs.step(
            clip_to_space(actions.cpu().numpy(), self.single_action_space)
        )
        obs_t = self._obs(obs)
        final_obs = obs_t
        if "_final_obs" in info:
            ended = np.flatnonzero(info["_final_obs"])
            final_obs = obs_t.clone()
            final_obs[ended] = self._obs(np.stack(info["final_obs"][ended]))
        return Step(
            obs_t,
            torch.as_tensor(reward, dtype=torch.float32, device=self.device),
            torch.as_tensor(terminated, dtype=torch.bool, device=self.device),
            torch.as_tensor(truncated, dtype=torch.bool, device=self.device),
            final_obs,
        )

    def close(self) -> None:
        self.envs.close()

    def state_dict(self) -> None:
        # A Gymnasium env's state is an arbitrary Python object; saving it would mean pickling it.
        return None

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError("Gymnasium envs cannot be restored; reset them instead")


def _with_env_errors(env_id: str, fn):
    try:
        return fn()
    except (UserError, EnvError):
        raise
    except Exception as e:
        raise EnvError(f"{env_id} raised {type(e).__name__}: {e}") from e


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


def _make(env_id: str, num_envs: int, **kwargs) -> GymnasiumVecEnv:
    return GymnasiumVecEnv(env_id, num_envs, **kwargs)


register_backend("gymnasium", _make, features=("asynchronous", "video"))
