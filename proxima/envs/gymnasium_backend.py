"""The Gymnasium backend: any registered id, through Gymnasium's SyncVectorEnv or AsyncVectorEnv, as a ``VecEnv``.

The vector env runs in same-step autoreset mode (see ``proxima.envs.interface``). Envs written by other
people differ from Gymnasium's own: no ``render_mode`` argument, observations of another dtype, the old gym
step API. Each is either handled here or refused with one line that says what Gymnasium 1.x expects.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import os
import re
import signal
import types
import warnings
from typing import cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode
from torch import Tensor

from proxima.base.errors import EnvError, UserError, raised
from proxima.base.spaces import MASK_KEY, ObsLayout, action_count, mask_count
from proxima.envs.atari import atari_game, make_atari_env
from proxima.envs.interface import (
    EnvCalls,
    InfoKeys,
    Seeds,
    Step,
    Unrestorable,
    VideoDirs,
    env_actions,
    env_call,
    kept_info,
    per_env_values,
    row_seeds,
    video_dirs,
)
from proxima.envs.recorder import quiet_display
from proxima.envs.registry import register_backend

ENV_ID_FORMS = (
    "a registered Gymnasium id such as CartPole-v1, or module:EnvName-v0 to import a module that registers it"
)


def _unknown_id(error: Exception, env_id: str) -> bool:
    """Whether what ``gym.make(env_id)`` raised means it found no such env, rather than that the env it found
    failed (a missing dependency, bad metadata)."""
    if isinstance(error, (gym.error.UnregisteredEnv, gym.error.DeprecatedEnv)):  # and the *NotFound errors
        return True
    if isinstance(error, ImportError):  # only the id's own module missing, not one it imports
        missing = [x.name for x in (error, error.__cause__) if isinstance(x, ModuleNotFoundError) and x.name]
        module = env_id.partition(":")[0] if ":" in env_id else ""
        return any(module == name or module.startswith(name + ".") for name in missing)
    # gymnasium's plain Error: a malformed id, or no env registered with it, or something else entirely
    return type(error) is gym.error.Error and str(error).startswith(
        ("Malformed environment ID", "No registered env")
    )


def _close_id(env_id: str) -> str | None:
    """The registered id nearest ``env_id`` by spelling (``Probe1-v0``: ``proxima/Probe1-v0``, whose namespace
    proxima's envs are registered in), with ``env_id``'s ``module:`` prefix; None if none is near."""
    module, _, name = env_id.rpartition(":")
    close = difflib.get_close_matches(name, list(gym.registry), n=1)
    return (f"{module}:{close[0]}" if module else close[0]) if close else None


def make_single_env(
    env_id: str, kwargs: dict, render_mode: str | None = None, disable_env_checker: bool = False
) -> gym.Env:
    """``gymnasium.make`` with its errors turned into one-line messages.

    Accepts any registered id, and ``module:EnvName-v0``, which Gymnasium handles by importing ``module``
    first (so a user's package can register its envs on import). ``render_mode`` is passed only when one is
    asked for: many envs outside Gymnasium take no such argument. ``kwargs``: the env's own (env_kwargs);
    ``disable_env_checker``: gym.make's (when true; else the registration's).
    """
    parts = env_id.split(":")  # refused here: what Gymnasium cannot even parse (``::``, ``a:b:c``, ``:Name``)
    if not env_id or len(parts) > 2 or not all(p.strip() for p in parts):
        raise UserError(f"malformed env id {env_id!r}; give {ENV_ID_FORMS}")

    def make(**given) -> gym.Env:
        try:
            return gym.make(env_id, **({"disable_env_checker": True} if disable_env_checker else {}), **given)
        except TypeError:
            # gym.make takes any keyword: the registered constructor's own signature, for construct's check of
            # the arguments given (a required one missing is the user's mistake, not the env's)
            make.__signature__ = _registered_signature(env_id)  # type: ignore[attr-defined]  # functions take any attribute
            raise
        except (gym.error.Error, ModuleNotFoundError, ImportError) as e:
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            if _unknown_id(e, env_id):
                close = _close_id(env_id) if not isinstance(e, ImportError) else None
                hint = f"did you mean {close}? Or " if close and close not in message else ""
                raise UserError(f"unknown env id {env_id!r} ({message}); {hint}give {ENV_ID_FORMS}") from None
            raise UserError(f"gymnasium.make({env_id!r}) failed: {message}") from None

    return _construct(make, env_id, render_mode, kwargs)


def _registered_signature(env_id: str) -> inspect.Signature | None:
    """The signature of the constructor that ``gym.make(env_id)`` calls, with the registration's own kwargs
    bound, or None where it cannot be read."""
    try:
        spec = gym.spec(env_id.partition(":")[2] or env_id)
        if spec.entry_point is None:
            return None
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        return inspect.signature(functools.partial(creator, **spec.kwargs))
    except Exception:  # no such registration, or a creator without a signature to read: no check
        return None


def _refuse_kwargs(error: TypeError, make, kwargs: dict, label: str) -> None:
    """``env_kwargs`` that the constructor does not take (of the given ones only: a call inside the constructor
    can raise the same TypeError, the env's own bug), or that do not fit its signature (a required argument
    missing): the user's mistake, in one line. A TypeError from inside a constructor that they fit is the env's."""
    # gym.make words it "... raised from the environment creator for ID with kwargs ...": take the name alone
    found = re.search(r"unexpected keyword argument '([^']*)'", str(error))
    if found and found[1] in kwargs:
        raise UserError(
            f"{label}'s constructor takes no argument {found[1]!r}; give env_kwargs that its __init__ accepts"
        ) from None
    try:
        inspect.signature(make).bind(**kwargs)
    except TypeError as e:
        raise UserError(
            f"{label}'s constructor cannot be called with env_kwargs {kwargs}: {e}; give the arguments its "
            "__init__ needs with --env-kwargs (env_kwargs= in Python)"
        ) from None
    except ValueError:  # no signature to read (a builtin)
        return


OLD_API = (
    "Gymnasium 1.x expects reset() -> (obs, info) and step() -> (obs, reward, terminated, truncated, info): "
    "update the env (gymnasium.farama.org/introduction/migration_guide)"
)


def check_step_api(env: gym.Env, env_id: str) -> tuple[dict, dict]:
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
        what = f"{_shape_of(reset)}, the old gym API"
        if isinstance(reset, tuple) and len(reset) == 2:  # an old env's observation may be a pair
            what = f"2 values whose second is {_shape_of(reset[1])}, not the info dict"
        raise UserError(f"{env_id}'s reset() returned {what}; {OLD_API}")
    _check_obs(reset[0], env, env_id, "reset()")
    if env.render_mode is not None:
        try:
            frame = env.render()
            wrong = None if isinstance(frame, np.ndarray) and frame.ndim == 3 else f"gave {_shape_of(frame)}"
        except Exception as e:  # an env that takes render_mode but never implemented render()
            wrong = f"raised {raised(e)}"
        if wrong:
            raise UserError(
                f"{env_id} cannot render {env.render_mode} frames (render() {wrong}), which video needs"
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
    nvec = cast(gym.spaces.MultiDiscrete, space).nvec  # the other space that action_count counts
    return space.sample(mask=tuple(np.split(mask, np.cumsum(nvec)[:-1])))


def find_obs_layout(env_id: str, env: gym.Env, reset_info: dict, step_info: dict) -> ObsLayout:
    """How ``env``'s observations travel (``proxima.base.spaces``), with its action mask if it gives one: as the
    ``action_mask`` key of a Dict observation, or in the info of every reset and step."""
    space, actions = env.observation_space, env.action_space
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        mask, size = MASK_KEY, int(np.prod(cast(tuple[int, ...], space[MASK_KEY].shape)))  # a mask has one
    elif MASK_KEY in reset_info:
        mask, size = "info", int(np.size(reset_info[MASK_KEY]))
    elif MASK_KEY in step_info:  # masks it would never get at an episode's first step
        raise UserError(
            f"{env_id} gives info[{MASK_KEY!r}] from step() but not from reset(); give it from both, or put it "
            "in a Dict observation's action_mask key (docs/SPACES.md)"
        )
    else:
        return ObsLayout(space)
    return ObsLayout(space, mask, mask_count(env_id, actions, size))


def _check_obs(obs, env: gym.Env, env_id: str, where: str) -> None:
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        # a Discrete or MultiDiscrete part that is not one of its values, said here in one line before Gymnasium's
        # checker in the sub-envs warns of it; whatever else is wrong is left to the encoders and the sub-envs
        try:
            layout = ObsLayout(space)
        except UserError:
            return
        try:
            layout.pack(obs)
        except UserError as e:
            raise UserError(f"{env_id}'s {where}: {e}") from None
        except Exception:
            pass
        return
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


# Where ``_Tidy`` puts an ended episode's info (after ``keep_infos``), the one info key besides ``STAT_KEYS`` it passes.
END_INFO = "proxima_episode_info"


class _Tidy(gym.Wrapper):
    """Each sub-env's results as the vector env needs them, whatever the env returns: the observation as a
    fresh array of the space's dtype and shape (a list, float64 values in a float32 space, or one array
    updated in place from step to step, which would change the vector env's record of an episode's final
    observation when reset overwrote it); the reward as a float; plain bools; and of the info only
    ``STAT_KEYS``, for ALE ids (Gymnasium's vector env fails on info arrays whose shape changes from step to
    step). A ``close()`` that raises becomes a warning: the run's results are already saved."""

    def __init__(self, env: gym.Env, env_id: str, layout: ObsLayout):
        super().__init__(env)
        self._env_id = env_id
        # A non-Box observation is packed into one vector (proxima.base.spaces); a Box one is copied to the space's
        # dtype and shape.
        self._packing = layout if layout.packed else None
        if layout.packed:
            self.observation_space = layout.packed_space()
        # Only proxima's own wrappers report the statistics keys: a user env's info["score"] means something
        # else, and may change shape from step to step.
        self._keep = STAT_KEYS if atari_game(env_id) is not None else ()
        self.info_keys: InfoKeys | None = None  # keep_infos': None until a run asks for infos
        space = env.observation_space
        self._box_dtype_shape = (space.dtype, space.shape) if isinstance(space, gym.spaces.Box) else None

    def _obs(self, obs, info, final: bool = False):
        if self._packing is not None:
            mask = None
            if self._packing.mask == "info":
                mask = info.get(MASK_KEY) if info else None
                # an episode's last observation is only ever valued, never acted on: its mask may be missing
                if mask is None and not final:
                    raise EnvError(
                        f"{self._env_id} gave info[{MASK_KEY!r}] at its first reset but not at a later reset or "
                        "step; give it with every one"
                    )
            try:
                return self._packing.pack(obs, mask)
            except UserError as e:
                raise UserError(f"{self._env_id}: {e}") from None
        if self._box_dtype_shape is None:
            return obs
        dtype, shape = self._box_dtype_shape
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
        if final and self.info_keys is not None:
            # in a plain object, which Gymnasium's info batching stores as it is (a dict it would split by key, and
            # arrays it would stack, failing on shapes that change from episode to episode)
            kept = kept_info(info if isinstance(info, dict) else {}, self.info_keys)
            stats[END_INFO] = types.SimpleNamespace(info=kept)
        return self._obs(obs, info, final), reward, bool(terminated), bool(truncated), stats

    def keep_infos(self, keys: InfoKeys) -> None:
        """From now on, pass on each ended episode's info (its ``keys``) under ``END_INFO``. Called through the
        vector env's ``call``, in the process that holds this env."""
        self.info_keys = keys

    def end_video(self, folder: str) -> None:
        """Where this env records into ``folder``: it records no more, as if it had closed (the episode being
        recorded is saved). Called through the vector env's ``call`` (``GymnasiumVecEnv.end_video``)."""
        env = self.env
        while not isinstance(env, gym.wrappers.RecordVideo):  # for Atari, inside the game's wrappers
            if not isinstance(env, gym.Wrapper):
                return
            env = env.env
        if env.video_folder == os.path.abspath(folder):
            if env.recording:
                env.stop_recording()
            env.episode_trigger = None

    def close(self):
        _close_quietly(self.env, self._env_id)


def _close_quietly(env: gym.Env, env_id: str) -> None:
    try:
        env.close()
    except Exception as e:
        warnings.warn(f"{env_id}'s close() raised {raised(e)}", RuntimeWarning, stacklevel=2)


class VectorEnvAdapter(Unrestorable):
    """A Gymnasium ``VectorEnv`` in any autoreset mode as a same-step ``VecEnv``, speaking tensors. In SAME_STEP
    mode the ended episode's last observation is ``info["final_obs"]``; in NEXT_STEP and DISABLED modes the
    step that ends an episode returns its last observation, and the ended envs alone are reset at once
    (``reset(options={"reset_mask": done})``, which also clears NEXT_STEP's pending autoreset). So no step after
    an episode's end, whose action the env ignores and whose reward is 0, ever reaches the rollout, and a
    truncation still bootstraps from ``V(final_obs)``."""

    # whether the sub-envs give their observations packed already (``_Tidy``'s), else they are packed here
    packed_by_envs = False
    _reports_stats = False

    def __init__(self, envs, layout: ObsLayout, *, device: torch.device | str, seed: Seeds, label: str):
        self.envs, self.obs_layout, self.label = envs, layout, label
        self.num_envs = envs.num_envs
        self.single_observation_space = layout.space  # the env's own, not the packed vector's
        self.single_action_space = envs.single_action_space
        self.device = torch.device(device)
        self._seed = row_seeds(seed, self.num_envs)
        self._infos: InfoKeys | None = None  # keep_infos' keys: None until a run asks
        mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)  # Gymnasium's default
        self.mode = AutoresetMode(mode.value if isinstance(mode, AutoresetMode) else mode)
        if self.mode != AutoresetMode.SAME_STEP:
            self._check_partial_reset()

    def _check_partial_reset(self) -> None:
        """A ``UserError`` for a vector env whose ``reset(options={"reset_mask": ...})`` resets more than the masked
        envs (Gymnasium's CartPoleVectorEnv resets them all): the ended envs could not be reset alone, and the
        step after an episode's end, whose action the env ignores, would be trained on. Gymnasium's Sync and
        Async vector envs honour the mask; another is tried once: a step, then a reset of env 0 alone."""
        base = self.envs.unwrapped
        if self.num_envs < 2 or isinstance(base, gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv):
            return
        env_call(self.envs.reset, seed=0)  # the run's own reset seeds the envs again
        stepped = self._obs(env_call(self.envs.step, self.envs.action_space.sample())[0])
        mask = np.arange(self.num_envs) == 0
        try:
            after = self._obs(self.envs.reset(options={"reset_mask": mask})[0])
        except Exception as e:
            raise UserError(
                f"{self.label}'s reset(options={{'reset_mask': ...}}) raised {raised(e)}; {PARTIAL_RESET}"
            ) from None
        if not _same(stepped[1:], after[1:]):
            # gymnasium.make_vec(ID) gives such an env for CartPole: the id itself gives proxima's own
            own = (
                f"; or its id: env_id={self.label!r}, num_envs={self.num_envs}"
                if self.label in gym.registry
                else ""
            )
            raise UserError(
                f"{self.label} reset every env when asked to reset env 0 alone; {PARTIAL_RESET}{own}"
            )

    def _run(self, method, *args, **kwargs):
        """``method(...)`` of the vector env, as this adapter calls it (``GymnasiumVecEnv``: workers quiet)."""
        return env_call(method, *args, **kwargs)

    def _obs(self, obs) -> Tensor:
        layout = self.obs_layout
        packed = layout.packed and not self.packed_by_envs
        array = layout.pack(obs, batch=True) if packed else np.asarray(obs)
        return torch.as_tensor(array, dtype=layout.dtype, device=self.device)

    def reset(self, seed: Seeds = None) -> Tensor:
        seed, self._seed = row_seeds(self._seed if seed is None else seed, self.num_envs), None
        # a list[int] where Gymnasium's annotation asks for list[int | None], which it only reads
        obs, _ = self._run(self.envs.reset, seed=cast("int | list[int | None] | None", seed))
        return self._obs(obs)

    def step(self, actions: Tensor) -> Step:
        obs, reward, terminated, truncated, info = self._run(
            self.envs.step, env_actions(actions.cpu().numpy(), self.single_action_space)
        )
        terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
        done = terminated | truncated
        obs_t = final_obs = self._obs(obs)
        end_info = info
        if self.mode == AutoresetMode.SAME_STEP:
            if "_final_obs" in info and np.any(info["_final_obs"]):
                ended = np.flatnonzero(info["_final_obs"])
                final_obs = obs_t.clone()
                final_obs[ended] = self._obs(
                    _stack(info["final_obs"][ended], self.envs.single_observation_space)
                )
            end_info = info.get("final_info", {})
        elif done.any():  # NEXT_STEP, DISABLED: this step's observation is the episode's last
            try:
                reset_obs, _ = self.envs.reset(options={"reset_mask": done})
            except Exception as e:
                raise EnvError(
                    f"{self.label}'s reset(options={{'reset_mask': ...}}) raised {raised(e)}; proxima "
                    f"resets ended envs so in {self.mode.value} autoreset mode: build the VectorEnv with "
                    "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (a vector wrapper that refuses that "
                    "mode, such as NormalizeObservation, has a proxima flag: --norm-obs, --norm-reward)"
                ) from e
            obs_t = self._obs(reset_obs)
            kept = torch.as_tensor(~done, device=self.device)
            if not _same(obs_t[kept], final_obs[kept]):  # a vector env that reset more than the ended ones
                raise EnvError(f"{self.label} reset envs whose episode had not ended; {PARTIAL_RESET}")
        reward_t = torch.as_tensor(np.asarray(reward), dtype=torch.float32, device=self.device)
        return Step(
            obs_t,
            reward_t,
            torch.as_tensor(terminated, device=self.device),
            torch.as_tensor(truncated, device=self.device),
            final_obs,
            *self._stats(end_info, info),
            None if self._infos is None else self._ended_infos(end_info, done),
        )

    def _ended_infos(self, info: dict, done: np.ndarray) -> dict[int, dict]:
        """Env index -> the kept keys of its info at the step its episode ended, from a vector env's batched info
        (each key an array, with ``_key`` saying which envs gave it)."""
        keys = cast(InfoKeys, self._infos)
        wanted = [
            k for k in info if not k.startswith("_") and (keys == "all" or k in keys) and f"_{k}" in info
        ]
        return {int(i): {k: info[k][i] for k in wanted if info[f"_{k}"][i]} for i in np.flatnonzero(done)}

    def _stats(self, ended: dict, info: dict) -> tuple[Tensor | None, Tensor | None]:
        """``(score, game_over)`` where the envs report them (``STAT_KEYS``), else ``(None, None)``: an ended
        episode's from ``ended`` (SAME_STEP's ``final_info``), the others' from the top level."""
        if not self._reports_stats:
            return None, None
        score, over = np.zeros(self.num_envs), np.zeros(self.num_envs, dtype=bool)
        for source in (info, ended):
            for key, out in (("score", score), ("game_over", over)):
                if key in source:
                    present = source[f"_{key}"]
                    out[present] = source[key][present]
        return (
            torch.as_tensor(score, dtype=torch.float32, device=self.device),
            torch.as_tensor(over, device=self.device),
        )

    def keep_infos(self, keys: InfoKeys) -> None:
        self._infos = keys

    def call(self, name: str, *args, **kwargs) -> tuple:
        """Gymnasium's ``VectorEnv.call``: ``name(*args, **kwargs)`` on each sub-env (the attribute's value where
        it is not callable), the results in env order. ``name`` is looked up through the wrappers to the env."""
        envs = self._calls()
        _check_attr(envs, name)
        with _workers_quiet():
            return env_call(envs.call, name, *args, **kwargs)

    def set_attr(self, name: str, values) -> None:
        """Gymnasium's ``VectorEnv.set_attr``: a list or tuple gives each env its own value, anything else goes
        to every env. Only an attribute that the env or a wrapper already has (a typo would make a new one on
        the outermost wrapper, which the env never reads)."""
        envs = self._calls()
        values = per_env_values(values, envs.num_envs)
        _check_attr(envs, name)
        with _workers_quiet():
            env_call(envs.set_attr, name, values)

    def _calls(self) -> EnvCalls:
        # VectorEnv declares neither, and a VectorWrapper passes neither on
        if not isinstance(self.envs, EnvCalls):
            raise UserError(
                f"{self.label}'s {type(self.envs).__name__} has no call and set_attr, which Gymnasium's "
                "SyncVectorEnv and AsyncVectorEnv have"
            )
        return self.envs

    def close(self) -> None:
        pass  # a user's VectorEnv: they close it, and may give it to another run (proxima.resume(env=...))


PARTIAL_RESET = (
    "in NEXT_STEP or DISABLED autoreset mode proxima must reset the ended envs alone: give env= a function that "
    "makes one env (functools.partial(gymnasium.make, ID)), or a gymnasium.vector.SyncVectorEnv or AsyncVectorEnv"
)


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal, NaN where NaN (an observation may hold one)."""
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _stack(observations, space: gym.Space):
    """Single observations (SAME_STEP's ``final_obs``) as one batch, in the form ``ObsLayout.pack`` reads."""
    if isinstance(space, gym.spaces.Box):
        return np.stack(list(observations))
    # the batch to fill: never None for a space that ObsLayout packs
    empty = cast(np.ndarray | tuple | dict, gym.vector.utils.create_empty_array(space, len(observations)))
    return gym.vector.utils.concatenate(space, list(observations), empty)


class GymnasiumVecEnv(VectorEnvAdapter):
    """Gymnasium's SyncVectorEnv or AsyncVectorEnv of an id's or a factory's envs, in same-step autoreset mode."""

    packed_by_envs = True

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        asynchronous: bool = False,
        seed: Seeds = None,
        device: torch.device | str = "cpu",
        video_dir: VideoDirs = None,
        video_episodes: int | None = None,
        env_kwargs: dict | None = None,
        factory=None,
    ):
        """``factory``: a callable that returns a ``gymnasium.Env``, called (with ``env_kwargs``) once per
        sub-env and once for the checks; ``env_id`` then only names it in messages (proxima.envs.user).
        ``video_dir``: env 0's directory, or env index -> directory (``video_dirs``)."""
        videos = video_dirs(video_dir, num_envs)
        if videos:
            quiet_display()  # before the envs: pygame looks for a display as they are made
        self._asynchronous = asynchronous
        self._reports_stats = atari_game(env_id) is not None
        # Fail fast, in this process, on a bad id, an env that cannot render, or the old step API.
        # Gymnasium's own checker and its warnings are left to the sub-envs: an env refused here gets one line.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make = EnvMaker(env_id, env_kwargs or {}, factory)
            probe = make(render_mode="rgb_array" if videos else None, checked=True)
            try:
                infos = check_step_api(probe, env_id)
                layout = find_obs_layout(env_id, probe, *infos)
            except (UserError, EnvError):
                raise
            except Exception as e:
                raise EnvError(f"{env_id} raised {raised(e)}") from e
            finally:
                _close_quietly(probe, env_id)
        fns = [
            _env_factory(make, layout, videos.get(i), video_episodes, asynchronous) for i in range(num_envs)
        ]
        vector_cls = gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv
        envs = vector_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        super().__init__(envs, layout, device=device, seed=seed, label=env_id)
        self._videos = videos

    def _run(self, method, *args, **kwargs):
        with _workers_quiet() if self._asynchronous else contextlib.nullcontext():
            return method(*args, **kwargs)

    def _ended_infos(self, info: dict, done: np.ndarray) -> dict[int, dict]:
        """Env index -> the info ``_Tidy`` kept, for the envs whose episode ended in this step."""
        kept = info.get(END_INFO, ())
        return {int(i): kept[i].info for i in np.flatnonzero(info.get(f"_{END_INFO}", ()))}

    def keep_infos(self, keys: InfoKeys) -> None:
        super().keep_infos(keys)
        self._run(self.envs.call, "keep_infos", keys)

    def end_video(self, env: int) -> None:
        """Env ``env`` records no more, as if it had closed: the episode it is recording is saved and no later
        one is recorded (a batched run's seed that stopped training, whose envs go on stepping with the others')."""
        if env in self._videos:
            self._run(self.envs.call, "end_video", self._videos[env])

    def close(self) -> None:
        self._run(self.envs.close)


@contextlib.contextmanager
def _workers_quiet():
    """AsyncVectorEnv reports a worker's exception as warnings (its traceback included) before raising it again
    here; the exception, which becomes an ``EnvError``, is enough: a failed run ends with one line."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"gymnasium\.vector\.async_vector_env")
        yield


def _check_attr(envs: EnvCalls, name: str) -> None:
    if not isinstance(name, str) or not all(env_call(envs.call, "has_wrapper_attr", name)):
        raise UserError(
            f"the env has no attribute {name!r}; call and set_attr reach a method or attribute that the env "
            "(or one of its wrappers) defines: define it in the env's __init__"
        )


def _env_factory(
    make: EnvMaker,
    layout: ObsLayout,
    video_dir: str | None,
    video_episodes: int | None = None,
    worker: bool = False,
):
    """``video_episodes``: record the first that many episodes; None: Gymnasium's 0, 1, 8, 27, ... schedule.
    ``worker``: the env lives in its own process (AsyncVectorEnv), where this runs."""

    def make_one() -> gym.Env:
        if worker:
            # Ctrl-C reaches the whole process group; the trainer handles it (checkpoint, then exit), so a
            # worker must not die of it mid-update.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if video_dir is None:
            return _Tidy(make(), make.env_id, layout)
        quiet_display()
        trigger = None if video_episodes is None else (lambda episode: episode < video_episodes)

        def record(env: gym.Env) -> gym.Env:
            return gym.wrappers.RecordVideo(env, video_dir, episode_trigger=trigger, disable_logger=True)

        return _Tidy(make(render_mode="rgb_array", record=record), make.env_id, layout)

    return make_one


class EnvMaker:
    """How one sub-env is made: from a registered id with its constructor's ``kwargs``, or by a user's
    ``factory`` (a class, a function, a ``functools.partial``) called with them. A plain object, so that
    AsyncVectorEnv can send it to its worker processes."""

    def __init__(self, env_id: str, kwargs: dict, factory=None):
        self.env_id, self.kwargs, self.factory = env_id, kwargs, factory

    def __call__(self, render_mode: str | None = None, record=None, checked: bool = False) -> gym.Env:
        """One env as the vector env runs it: an ALE id with the Atari preprocessing (proxima.envs.atari),
        any other id as it is registered, a factory's env as it returns it. ``record`` wraps it for video (for
        Atari, around whole games). ``checked``: the env is ``check_step_api``'s, which replaces Gymnasium's
        checker."""
        env_id = self.env_id
        if self.factory is not None:
            env = _construct(self.factory, env_id, render_mode, self.kwargs)
        elif atari_game(env_id) is not None:
            if self.kwargs:
                raise UserError(
                    f"{env_id} takes no env_kwargs here: proxima's Atari preprocessing makes the ALE env (for the "
                    f"128-byte RAM as the observation, give train(env=functools.partial(gymnasium.make, "
                    f"{env_id!r}, obs_type='ram')) or an --env-factory that returns that env)"
                )
            return make_atari_env(env_id, render_mode, record=record)
        else:
            env = make_single_env(env_id, self.kwargs, render_mode, disable_env_checker=checked)
        if env.metadata is None:  # written so in some envs; Gymnasium's vector envs copy it with dict()
            env.metadata = {}
        if _mask_method(env) is not None:
            env = MaskMethod(env)
        return env if record is None else record(env)


def _mask_method(env: gym.Env):
    """The env's ``action_masks`` method (sb3-contrib's convention: on the env, or on a wrapper such as its
    ``ActionMasker``), or None."""
    try:
        method = env.get_wrapper_attr("action_masks")
    except AttributeError:
        return None
    return method if callable(method) else None


class MaskMethod(gym.Wrapper):
    """An env that gives its mask through an ``action_masks()`` method, as sb3-contrib's MaskablePPO reads it,
    with the mask in the info of every reset and step, the convention proxima reads: called after each, so
    that it describes the state the observation shows. A mask the info already has wins."""

    supplied = False  # whether a mask came from the method (check-env says where the mask comes from)

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._action_masks = _mask_method(env)  # looked up once: the wrapper chain does not change

    def _with_mask(self, info: dict) -> dict:
        if MASK_KEY in info:
            return info
        self.supplied = True
        mask = np.asarray(self._action_masks(), dtype=bool).reshape(-1)
        return {**info, MASK_KEY: mask}

    # What does not follow Gymnasium's API passes as it is, for ``check_step_api`` to refuse in one line.
    def reset(self, *, seed=None, options=None):
        result = self.env.reset(seed=seed, options=options)
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            return result[0], self._with_mask(result[1])
        return result

    def step(self, action):
        result = self.env.step(action)
        if isinstance(result, tuple) and len(result) == 5:
            return (*result[:4], self._with_mask(result[4] if isinstance(result[4], dict) else {}))
        return result


def _construct(make, label: str, render_mode: str | None, kwargs: dict) -> gym.Env:
    """``make(**kwargs)``, an id's or a user's factory (with ``render_mode`` when video asks for one), checked
    to be a Gymnasium env; what the constructor raises becomes one line that names ``label``."""
    env = construct(make, label, render_mode, kwargs)
    if not isinstance(env, gym.Env):
        raise UserError(
            f"{label} returned {_shape_of(env)}, not a gymnasium.Env; give env= a class or function that "
            "returns one env, or a gymnasium.vector.VectorEnv"
        )
    return env


def construct(make, label: str, render_mode: str | None, kwargs: dict):
    """``make(**kwargs)`` (with ``render_mode`` when video asks for one), whatever it returns; what the
    constructor raises becomes one line that names ``label``."""
    if "render_mode" in kwargs:
        raise UserError(
            f"{label}: env_kwargs cannot set render_mode; proxima asks the env for rgb_array frames where it "
            "records video, and for none otherwise"
        )
    if render_mode is not None:
        kwargs = {**kwargs, "render_mode": render_mode}
    try:
        env = make(**kwargs)
    except TypeError as e:
        if render_mode is not None and "render_mode" in str(e):
            raise UserError(
                f"{label} cannot render: its constructor takes no render_mode argument, which video needs"
            ) from None
        _refuse_kwargs(e, make, kwargs, label)
        raise EnvError(f"{label}'s constructor raised {raised(e)}") from e
    except (UserError, EnvError):
        raise
    except Exception as e:  # the user's constructor itself failed
        raise EnvError(f"{label}'s constructor raised {raised(e)}") from e
    return env


register_backend("gymnasium", GymnasiumVecEnv, features=("asynchronous", "video", "env_kwargs"))
