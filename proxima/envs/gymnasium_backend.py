"""The Gymnasium backend: any registered id, through Gymnasium's SyncVectorEnv or AsyncVectorEnv, as a ``VecEnv``.

The vector env runs in same-step autoreset mode (see ``proxima.envs.interface``). Envs written by other
people differ from Gymnasium's own: no ``render_mode`` argument, observations of another dtype, the old gym
step API. Each is either handled here or refused with one line that says what Gymnasium 1.x expects.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import warnings

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from proxima.envs.atari import atari_game, make_atari_env
from proxima.envs.interface import Step, env_actions
from proxima.envs.registry import register_backend
from proxima.errors import EnvError, UserError
from proxima.spaces import MASK_KEY, ObsLayout, action_count

ENV_ID_FORMS = (
    "a registered Gymnasium id such as CartPole-v1, or module:EnvName-v0 to import a module that registers it"
)


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


OLD_API = (
    "Gymnasium 1.x expects reset() -> (obs, info) and step() -> (obs, reward, terminated, truncated, info): "
    "update the env (gymnasium.farama.org/introduction/migration_guide)"
)


def check_step_api(env: gym.Env, env_id: str) -> dict:
    """One reset and one step of ``env``; a ``UserError`` if they do not follow the Gymnasium 1.x API: the old
    gym API (a bare observation from reset, 4-tuple steps), which Gymnasium's vector envs would fail on with
    an unpacking error; a reset that cannot be given a seed; an observation whose size is not its space's; a
    reward that is not one number. Make ``env`` with ``disable_env_checker=True``: this check replaces
    Gymnasium's, which warns, or fails with an ``AssertionError``, on what this refuses in one line. Returns
    the infos of the reset and of the step."""
    parameters = inspect.signature(env.unwrapped.reset).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    missing = [name for name in ("seed", "options") if name not in parameters and not takes_any]
    if missing:
        raise UserError(
            f"{env_id}'s reset() takes no {' or '.join(missing)} argument; Gymnasium 1.x calls "
            "reset(seed=..., options=...): define it as reset(self, *, seed=None, options=None)"
        )
    reset = env.reset(seed=0)
    if not (isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict)):
        raise UserError(f"{env_id}'s reset() returned {_shape_of(reset)}, the old gym API; {OLD_API}")
    _check_obs(reset[0], env, env_id, "reset()")
    if env.render_mode is not None:
        frame = env.render()
        if not (isinstance(frame, np.ndarray) and frame.ndim == 3):
            raise UserError(
                f"{env_id} cannot render {env.render_mode} frames (render() gave {_shape_of(frame)}), which video needs"
            )
    result = env.step(_valid_action(env.action_space, *reset))
    if not (isinstance(result, tuple) and len(result) == 5):
        raise UserError(
            f"{env_id}'s step() returned {_shape_of(result)}, the old gym API (obs, reward, done, info); {OLD_API}"
        )
    _check_obs(result[0], env, env_id, "step()")
    try:
        _reward(result[1])
    except (TypeError, ValueError):
        raise UserError(
            f"{env_id}'s step() returned {_shape_of(result[1])} as its reward; Gymnasium 1.x expects one number"
        ) from None
    return reset[1], result[4] if isinstance(result[4], dict) else {}


def _valid_action(space: gym.Space, obs, info: dict):
    """A random action, among the valid ones where the env gives an action mask (a masked one may raise)."""
    mask = info.get(MASK_KEY, obs.get(MASK_KEY) if isinstance(obs, dict) else None)
    if mask is None or action_count(space) != np.size(mask):
        return space.sample()
    mask = np.asarray(mask).astype(np.int8).reshape(-1)
    if isinstance(space, gym.spaces.Discrete):
        return space.sample(mask=mask) if mask.any() else space.sample()
    return space.sample(mask=tuple(np.split(mask, np.cumsum(space.nvec)[:-1])))


def find_obs_layout(env_id: str, env: gym.Env, reset_info: dict, step_info: dict) -> ObsLayout:
    """How ``env``'s observations travel (``proxima.spaces``), with its action mask if it gives one: as the
    ``action_mask`` key of a Dict observation, or in the info of every reset and step."""
    space, actions = env.observation_space, env.action_space
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        mask, size = MASK_KEY, int(np.prod(space[MASK_KEY].shape))
    elif MASK_KEY in reset_info:
        mask, size = "info", int(np.size(reset_info[MASK_KEY]))
    elif MASK_KEY in step_info:  # masks it would never get at an episode's first step
        raise UserError(
            f"{env_id} gives info[{MASK_KEY!r}] from step() but not from reset(); give it from both, or put it "
            "in a Dict observation's action_mask key (docs/SPACES.md)"
        )
    else:
        return ObsLayout(space)
    count = action_count(actions)
    if count is None:
        raise UserError(
            f"{env_id} gives an {MASK_KEY}, but its action space {actions} cannot be masked; masks are for "
            "Discrete and MultiDiscrete actions"
        )
    if size != count:
        raise UserError(
            f"{env_id}'s {MASK_KEY} has {size} values, but its action space {actions} needs {count} "
            "(one boolean per action; per dimension, side by side, for a MultiDiscrete)"
        )
    return ObsLayout(space, mask, count)


def _check_obs(obs, env: gym.Env, env_id: str, where: str) -> None:
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        return  # other spaces are refused, or handled, by the encoders
    try:
        size = np.asarray(obs, dtype=space.dtype).size
    except (TypeError, ValueError):
        raise UserError(
            f"{env_id}'s {where} returned {_shape_of(obs)} as its observation, not numbers that fit its "
            f"observation_space {space}"
        ) from None
    if size != int(np.prod(space.shape)):
        raise UserError(
            f"{env_id}'s {where} returned an observation of shape {np.shape(obs)}, but its observation_space "
            f"declares shape {space.shape}"
        )


def _shape_of(value) -> str:
    if isinstance(value, tuple):
        return f"{len(value)} values"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _reward(reward) -> float:
    """One number from a reward given as a float, an int, a numpy scalar or a one-element array."""
    if reward is None:  # numpy would make it a NaN
        raise TypeError("a reward of None")
    value = np.asarray(reward, dtype=np.float64)
    if value.size != 1:
        raise ValueError(f"a reward of shape {value.shape}")
    return float(value.reshape(()))


# The info keys proxima reads, from proxima's own wrappers (proxima.envs.atari): a game's unclipped reward, and
# whether the whole game ended (a lost life ends only the training episode).
STAT_KEYS = ("score", "game_over")


class _Tidy(gym.Wrapper):
    """Each sub-env's results as the vector env needs them, whatever the env returns: the observation as a
    fresh array of the space's dtype and shape (a list, float64 values in a float32 space, or one array
    updated in place from step to step, which would change the vector env's record of an episode's final
    observation when reset overwrote it); the reward as a float; plain bools; and of the info only
    ``STAT_KEYS``, for ALE ids (Gymnasium's vector env fails on info arrays whose shape changes from step to
    step). A
    ``close()`` that raises becomes a warning: the run's results are already saved."""

    def __init__(self, env: gym.Env, env_id: str, layout: ObsLayout):
        super().__init__(env)
        self._env_id = env_id
        self._layout = layout if layout.packed else None
        if layout.packed:  # any space but a Box travels as one vector (proxima.spaces)
            self.observation_space = layout.packed_space()
        # Only proxima's own wrappers report the statistics keys: a user env's info["score"] means something
        # else, and may change shape from step to step.
        self._keep = STAT_KEYS if atari_game(env_id) is not None else ()
        space = env.observation_space
        self._obs_layout = (space.dtype, space.shape) if isinstance(space, gym.spaces.Box) else None

    def _obs(self, obs, info, final: bool = False):
        if self._layout is not None:
            mask = None
            if self._layout.mask == "info":
                mask = info.get(MASK_KEY) if info else None
                # an episode's last observation is only ever valued, never acted on: its mask may be missing
                if mask is None and not final:
                    raise EnvError(
                        f"{self._env_id} gave info[{MASK_KEY!r}] at its first reset but not at a later reset or "
                        "step; give it with every one"
                    )
            return self._layout.pack(obs, mask)
        if self._obs_layout is None:
            return obs
        dtype, shape = self._obs_layout
        out = np.array(obs, dtype=dtype)  # always a copy
        return out if out.shape == shape else out.reshape(shape)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._obs(obs, info), {}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if type(reward) is not float:  # the common case needs no conversion (this runs at every env step)
            reward = _reward(reward)
        stats = {key: info[key] for key in self._keep if key in info} if info else {}
        final = bool(terminated) or bool(truncated)
        return self._obs(obs, info, final), reward, bool(terminated), bool(truncated), stats

    def close(self):
        _close_quietly(self.env, self._env_id)


def _close_quietly(env: gym.Env, env_id: str) -> None:
    try:
        env.close()
    except Exception as e:
        warnings.warn(f"{env_id}'s close() raised {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


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
        self._asynchronous = asynchronous
        self._reports_stats = atari_game(env_id) is not None
        # Fail fast, in this process, on a bad id, an env that cannot render, or the old step API.
        # Gymnasium's own checker and its warnings are left to the sub-envs: an env refused here gets one line.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = _make_env(env_id, render_mode="rgb_array" if video_dir else None, checked=True)
            try:
                infos = _with_env_errors(env_id, lambda: check_step_api(probe, env_id))
                self.obs_layout = find_obs_layout(env_id, probe, *infos)
            finally:
                _close_quietly(probe, env_id)
        fns = [
            _env_factory(env_id, self.obs_layout, video_dir if i == 0 else None, video_episodes, asynchronous)
            for i in range(num_envs)
        ]
        vector_cls = gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv
        self.envs = vector_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        self.num_envs = num_envs
        self.single_observation_space = self.obs_layout.space  # the env's own, not the packed vector's
        self.single_action_space = self.envs.single_action_space
        self.device = torch.device(device)
        self._obs_dtype = self.obs_layout.dtype

    def _obs(self, array) -> Tensor:
        return torch.as_tensor(np.asarray(array), dtype=self._obs_dtype, device=self.device)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset all envs; sub-env i is seeded with seed + i (the seed given at construction, if none here)."""
        seed, self._seed = (self._seed if seed is None else seed), None
        with self._worker_errors_quiet():
            obs, _ = self.envs.reset(seed=seed)
        return self._obs(obs)

    def step(self, actions: Tensor) -> Step:
        with self._worker_errors_quiet():
            obs, reward, terminated, truncated, info = self.envs.step(
                env_actions(actions.cpu().numpy(), self.single_action_space)
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
            *self._stats(info),
        )

    def _stats(self, info: dict) -> tuple[Tensor | None, Tensor | None]:
        """``(score, game_over)`` where the envs report them (``STAT_KEYS``), else ``(None, None)``. In same-step
        autoreset an ended episode's info is under ``final_info``; the top level holds the reset's."""
        if not self._reports_stats:
            return None, None
        score, over = np.zeros(self.num_envs), np.zeros(self.num_envs, dtype=bool)
        for source in (info, info.get("final_info", {})):
            for key, out in (("score", score), ("game_over", over)):
                if key in source:
                    present = source[f"_{key}"]
                    out[present] = source[key][present]
        return (
            torch.as_tensor(score, dtype=torch.float32, device=self.device),
            torch.as_tensor(over, device=self.device),
        )

    def close(self) -> None:
        with self._worker_errors_quiet():
            self.envs.close()

    @contextlib.contextmanager
    def _worker_errors_quiet(self):
        """AsyncVectorEnv reports a worker's exception as warnings (its traceback included) before raising
        it again here; the exception, which becomes an ``EnvError``, is enough: a failed run ends with one line."""
        if not self._asynchronous:
            yield
            return
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"gymnasium\.vector\.async_vector_env")
            yield

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


def _env_factory(
    env_id: str,
    layout: ObsLayout,
    video_dir: str | None,
    video_episodes: int | None = None,
    worker: bool = False,
):
    """``video_episodes``: record the first that many episodes; None: Gymnasium's 0, 1, 8, 27, ... schedule.
    ``worker``: the env lives in its own process (AsyncVectorEnv), where this runs."""

    def make() -> gym.Env:
        if worker:
            # Ctrl-C reaches the whole process group; the trainer handles it (checkpoint, then exit), so a
            # worker must not die of it mid-update.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if video_dir is None:
            return _Tidy(_make_env(env_id), env_id, layout)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array needs no display; keeps SDL quiet
        trigger = None if video_episodes is None else (lambda episode: episode < video_episodes)

        def record(env: gym.Env) -> gym.Env:
            return gym.wrappers.RecordVideo(env, video_dir, episode_trigger=trigger, disable_logger=True)

        return _Tidy(_make_env(env_id, render_mode="rgb_array", record=record), env_id, layout)

    return make


def _make_env(env_id: str, render_mode: str | None = None, record=None, checked: bool = False) -> gym.Env:
    """One env as the vector env runs it: an ALE id with the Atari preprocessing (proxima.envs.atari), any
    other id as it is registered. ``record`` wraps it for video (for Atari, around whole games).
    ``checked``: the env is ``check_step_api``'s, which replaces Gymnasium's checker."""
    if atari_game(env_id) is not None:
        return make_atari_env(env_id, render_mode, record=record)
    env = make_single_env(env_id, render_mode, **({"disable_env_checker": True} if checked else {}))
    return env if record is None else record(env)


def _make(env_id: str, num_envs: int, **kwargs) -> GymnasiumVecEnv:
    return GymnasiumVecEnv(env_id, num_envs, **kwargs)


register_backend("gymnasium", _make, features=("asynchronous", "video"))
