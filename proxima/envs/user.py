"""Your env as you have it: an id, a function that makes one ``gymnasium.Env``, or a ``gymnasium.vector.VectorEnv``
you built, behind proxima's ``VecEnv`` (``proxima.envs.interface``).

A factory (a class, a function, a ``functools.partial``, a lambda) goes through the Gymnasium backend as an id
does: called with ``env_kwargs`` once per sub-env and once for the checks, each env tidied the same way.

A ``VectorEnv`` runs in whichever autoreset mode it was built with, and ``UserVectorEnv`` gives the loop
same-step semantics for each: in SAME_STEP mode the ended episode's last observation is ``info["final_obs"]``;
in NEXT_STEP and DISABLED modes the step that ends an episode returns its last observation, and the wrapper at
once resets just the envs that ended (``reset(options={"reset_mask": done})``, which also clears NEXT_STEP's
pending autoreset). So no step after an episode's end, whose action the env ignores and whose reward is 0,
ever reaches the rollout, and a truncation still bootstraps from ``V(final_obs)``.

A run records what it cannot rebuild: ``describe_env`` gives the label and, where the object has one, the import
path (``module:name``) from which ``load_env_factory`` makes it again.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from proxima.base import trust
from proxima.base.errors import EnvError, UserError, raised
from proxima.base.spaces import MASK_KEY, ObsLayout, action_count
from proxima.envs.gymnasium_backend import GymnasiumVecEnv, call_envs, construct, set_env_attr
from proxima.envs.interface import (
    EnvCalls,
    InfoKeys,
    Seeds,
    Step,
    VideoDirs,
    env_actions,
    env_call,
    row_seeds,
)
from proxima.envs.pettingzoo_backend import PettingZooVecEnv, is_pettingzoo_env
from proxima.envs.registry import make_vec_env

# The kinds of env object that config.json cannot name for a later import (env_factory's value for them).
NOT_REBUILDABLE = ("<lambda>", "<functools.partial>", "<VectorEnv>", "<callable>")

ENV_FORMS = (
    "an env id string, a class or function that returns a gymnasium.Env (called once per sub-env), or a "
    "gymnasium.vector.VectorEnv"
)


def is_env_object(env) -> bool:
    """Whether ``env`` is something other than an id string that ``make_envs`` takes."""
    return env is not None and not isinstance(env, str)


def describe_env(env) -> tuple[str, str]:
    """``(label, env_factory)`` of an env object for config.json: a label that names it (``object:...``, never a
    makeable id, so nothing mistakes it for one), and the ``module:qualname`` of a class or module-level
    function, from which ``load_env_factory`` makes it again, or one of ``NOT_REBUILDABLE``."""
    if isinstance(env, gym.vector.VectorEnv):
        spec = getattr(env, "spec", None)
        name = spec.id if spec is not None else f"{type(env).__module__}.{type(env).__qualname__}"
        return f"object:{name}", "<VectorEnv>"
    if isinstance(env, gym.Env) or (is_pettingzoo_env(env) and not isinstance(env, type)):
        name = type(env.unwrapped if isinstance(env, gym.Env) else env).__name__
        raise UserError(
            f"env= got one {name} instance, but proxima runs num_envs copies: give the function that makes it "
            "(its class, or lambda: ...)"
            + ("" if is_pettingzoo_env(env) else " or a gymnasium.vector.VectorEnv")
        )
    if isinstance(env, functools.partial):
        inner, _ = describe_env(env.func) if callable(env.func) else ("object:partial", "")
        return f"{inner}(partial)", "<functools.partial>"
    if not callable(env):
        raise UserError(f"env= got {type(env).__name__}; give {ENV_FORMS}")
    module, qualname = getattr(env, "__module__", None), getattr(env, "__qualname__", None)
    label = f"object:{module}.{qualname}" if module and qualname else f"object:{type(env).__name__}"
    if qualname and qualname.endswith("<lambda>"):
        return label, "<lambda>"
    if module and qualname and "<locals>" not in qualname and module != "__main__":
        # given by the user: the run's files may name it
        trust.remember("env_factory", f"{module}:{qualname}")
        return label, f"{module}:{qualname}"
    return label, "<callable>"  # defined in a function or a script: nothing to import it from


def env_note(factory: str | None) -> list[str]:
    """A line for a run on an env object that config.json cannot name, said at the start (where a later
    ``proxima eval`` or ``--resume`` of the run would otherwise be the first to say so)."""
    if factory not in NOT_REBUILDABLE:
        return []
    kind = {"<callable>": "a class or function defined in the script run as __main__ or inside a function"}
    return [
        f"note: the env is {kind.get(factory, 'a ' + factory.strip('<>'))}, which config.json cannot name: "
        "proxima eval RUN_DIR and proxima train --resume RUN_DIR cannot make it again (from Python, give it again: "
        "proxima.resume(RUN_DIR, env=...), proxima.evaluate(agent, env=...)); a class or function in a module on "
        "PYTHONPATH makes the run directory complete (docs/ENVS.md)"
    ]


def load_env_factory(path: str, what: str = "the run"):
    """The class or function that ``describe_env`` recorded as ``module:qualname``; a one-line ``UserError``
    where it cannot be imported, or was an object that config.json cannot name."""
    if path in NOT_REBUILDABLE:
        raise UserError(
            f"{what} was trained on an env given as a {path.strip('<>')} object, which config.json cannot make "
            "again; give it again from Python (proxima.resume(RUN_DIR, env=...), proxima.evaluate(agent, env=...)), "
            "or an id with --env-id"
        )
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise UserError(
            f"env_factory must be module:name of a class or function that returns an env, got {path!r}"
        )
    try:
        found = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except ImportError as e:
        raise UserError(
            f"cannot import {module_name!r}, whose {qualname} makes {what}'s env ({e}); run from the directory "
            "that holds it, or add that directory to PYTHONPATH"
        ) from None
    except AttributeError:
        raise UserError(f"{module_name} has no {qualname}, which makes {what}'s env") from None
    return found


def make_envs(
    env,
    num_envs: int,
    *,
    env_kwargs: dict | None = None,
    backend: str = "auto",
    seed: Seeds = None,
    asynchronous: bool = False,
    device: torch.device | str = "cpu",
    video_dir: VideoDirs = None,
    video_episodes: int | None = None,
):
    """``num_envs`` envs of ``env`` behind the ``VecEnv`` interface: an id (``make_vec_env``), a factory that
    returns a ``gymnasium.Env`` (called with ``env_kwargs`` once per sub-env), or a ``VectorEnv`` (used as it
    is: it brings its own envs, so ``num_envs`` must be its count)."""
    if isinstance(env, str):
        return make_vec_env(
            env, num_envs, backend=backend, seed=seed, asynchronous=asynchronous, device=device,
            video_dir=video_dir, video_episodes=video_episodes, env_kwargs=env_kwargs,
        )  # fmt: skip
    label, _ = describe_env(env)
    first = _made_pettingzoo_env(env, label, env_kwargs, backend)
    if first is not None:
        if asynchronous:
            raise UserError("the pettingzoo backend cannot do --async-envs; drop it")
        return PettingZooVecEnv(
            label, num_envs, env, env_kwargs=env_kwargs, seed=seed, device=device, video_dir=video_dir,
            video_episodes=video_episodes, first=first,
        )  # fmt: skip
    if backend not in ("auto", "gymnasium"):
        raise UserError(
            f"an env object runs on the gymnasium or pettingzoo backend, not {backend!r}: drop --env-backend"
        )
    if isinstance(env, gym.vector.VectorEnv):
        refused = [what for what, on in (("video", video_dir), ("--async-envs", asynchronous),
                                         ("env_kwargs", env_kwargs)) if on]  # fmt: skip
        if refused:
            raise UserError(
                f"a VectorEnv you built comes as it is: proxima cannot add {refused[0]} to it; give env= a "
                "function that makes one env instead"
            )
        if num_envs != env.num_envs:
            raise UserError(f"num_envs is {num_envs}, but the VectorEnv given has {env.num_envs} envs")
        return UserVectorEnv(env, device=device, seed=seed, label=label)
    return GymnasiumVecEnv(
        label, num_envs, asynchronous=asynchronous, seed=seed, device=device, video_dir=video_dir,
        video_episodes=video_episodes, env_kwargs=env_kwargs, factory=env,
    )  # fmt: skip


def factory_backend(env, env_kwargs: dict | None, backend: str = "auto") -> str:
    """The backend that ``make_envs`` runs the factory ``env`` on: "pettingzoo" where it makes PettingZoo envs,
    else "gymnasium". Decided where the factory was given, since a process that has not imported PettingZoo (a
    rollout worker's) cannot tell a function that makes one from a Gymnasium factory without calling it."""
    made = _made_pettingzoo_env(env, describe_env(env)[0], env_kwargs, backend)
    if made is None:
        return "gymnasium"
    made.close()
    return "pettingzoo"


def _made_pettingzoo_env(env, label: str, env_kwargs: dict | None, backend: str):
    """One PettingZoo env that the factory ``env`` made, where it makes them; else None. A PettingZoo class says
    so itself; another callable is called once to see, only where PettingZoo is loaded (a factory can make its
    envs only then) or the pettingzoo backend is asked for."""
    if backend == "gymnasium" or isinstance(env, gym.vector.VectorEnv):
        return None
    if isinstance(env, type) and issubclass(env, gym.Env):
        return None
    sure = is_pettingzoo_env(env) or backend == "pettingzoo"
    if not (sure or "pettingzoo" in sys.modules):
        return None
    try:
        made = construct(env, label, None, env_kwargs or {})
    except (UserError, EnvError):
        if sure:
            raise
        return None  # the Gymnasium backend makes it again, and says what is wrong
    if is_pettingzoo_env(made):
        return made
    if backend == "pettingzoo":
        raise UserError(f"the pettingzoo backend takes a PettingZoo env; {label} made {type(made).__name__}")
    if isinstance(made, gym.Env):
        made.close()
    return None


class UserVectorEnv:
    """A ``gymnasium.vector.VectorEnv`` the user built, in any autoreset mode, as a same-step ``VecEnv`` (see
    the module's doc). It stays the user's: ``close`` leaves it open."""

    def __init__(
        self, envs: gym.vector.VectorEnv, *, device: torch.device | str = "cpu", seed=None, label=""
    ):
        self.envs, self._seed, self.label = envs, row_seeds(seed, envs.num_envs), label
        mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)  # Gymnasium's default
        self.mode = AutoresetMode(mode.value if isinstance(mode, AutoresetMode) else mode)
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.obs_layout = _layout(self.single_observation_space, self.single_action_space, label)
        self.device = torch.device(device)
        self._infos: InfoKeys | None = None
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
            raise UserError(f"{self.label} reset every env when asked to reset env 0 alone; {PARTIAL_RESET}")

    def _obs(self, obs) -> Tensor:
        layout = self.obs_layout
        array = layout.pack(obs, batch=True) if layout.packed else np.asarray(obs)
        return torch.as_tensor(array, dtype=layout.dtype, device=self.device)

    def reset(self, seed: Seeds = None) -> Tensor:
        """Reset all envs; sub-env i is seeded with seed + i, or seed[i] where ``seed`` is a sequence, passed to
        the VectorEnv as it is (the seed given at construction, if none here)."""
        seed, self._seed = row_seeds(self._seed if seed is None else seed, self.num_envs), None
        obs, _ = env_call(self.envs.reset, seed=seed)
        return self._obs(obs)

    def step(self, actions: Tensor) -> Step:
        obs, reward, terminated, truncated, info = env_call(
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
                final_obs[ended] = self._obs(_stack(info["final_obs"][ended], self.single_observation_space))
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
        return Step(
            obs_t,
            torch.as_tensor(np.asarray(reward), dtype=torch.float32, device=self.device),
            torch.as_tensor(terminated, device=self.device),
            torch.as_tensor(truncated, device=self.device),
            final_obs,
            infos=None if self._infos is None else _end_infos(end_info, done, self._infos),
        )

    def keep_infos(self, keys: InfoKeys) -> None:
        """From now on each ``Step.infos`` holds the info of the step that ended each episode (its ``keys``)."""
        self._infos = keys

    def call(self, name: str, *args, **kwargs) -> tuple:
        return call_envs(self._calls(), name, *args, **kwargs)

    def set_attr(self, name: str, values) -> None:
        set_env_attr(self._calls(), name, values)

    def _calls(self) -> EnvCalls:
        # VectorEnv declares neither, and a VectorWrapper passes neither on
        if not isinstance(self.envs, EnvCalls):
            raise UserError(
                f"{self.label}'s {type(self.envs).__name__} has no call and set_attr, which Gymnasium's "
                "SyncVectorEnv and AsyncVectorEnv have"
            )
        return self.envs

    def close(self) -> None:
        pass  # the user's VectorEnv: they close it, and may give it to another run (proxima.resume(env=...))

    def state_dict(self) -> None:
        return None  # a Gymnasium env's state could only be saved by pickling it

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError("a VectorEnv cannot be restored; reset it instead")


PARTIAL_RESET = (
    "in NEXT_STEP or DISABLED autoreset mode proxima must reset the ended envs alone: give env= a function that "
    "makes one env (functools.partial(gymnasium.make, ID)), or a gymnasium.vector.SyncVectorEnv or AsyncVectorEnv"
)


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal, NaN where NaN (an observation may hold one)."""
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _layout(space: gym.Space, actions: gym.Space, label: str) -> ObsLayout:
    """A Box travels as it is; another space is packed (``proxima.base.spaces``), its Dict ``action_mask`` too. A mask
    in the info cannot be read from a vector env's batched info reliably: refused."""
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        count = action_count(actions)
        mask_shape = cast(tuple[int, ...], space[MASK_KEY].shape)  # a mask's space has a shape
        if count is None or int(np.prod(mask_shape)) != count:
            raise UserError(f"{label}'s {MASK_KEY} does not fit its action space {actions}")
        return ObsLayout(space, MASK_KEY, count)
    return ObsLayout(space)


def _stack(observations, space: gym.Space):
    """Single observations (SAME_STEP's ``final_obs``) as one batch, in the form ``ObsLayout.pack`` reads."""
    if isinstance(space, gym.spaces.Box):
        return np.stack(list(observations))
    # the batch to fill: never None for a space that ObsLayout packs
    empty = cast(np.ndarray | tuple | dict, gym.vector.utils.create_empty_array(space, len(observations)))
    return gym.vector.utils.concatenate(space, list(observations), empty)


def _end_infos(info: dict, done: np.ndarray, keys: InfoKeys) -> dict[int, dict]:
    """Env index -> the kept keys of its info at the step its episode ended, from a vector env's batched info
    (each key an array, with ``_key`` saying which envs gave it)."""
    wanted = [k for k in info if not k.startswith("_") and (keys == "all" or k in keys) and f"_{k}" in info]
    return {int(i): {k: info[k][i] for k in wanted if info[f"_{k}"][i]} for i in np.flatnonzero(done)}


# Modules whose ids are registered as soon as proxima runs: an id of theirs needs no module named.
ALWAYS_REGISTERED = ("gymnasium", "proxima", "ale_py")


def env_source(env_id: str, env_kwargs: dict | None, env_factory: str | None) -> dict:
    """What an agent records to make its env again besides the id (``Agent.env_source``): the constructor's
    kwargs, the factory's import path, and for a plain id that a user's module registered, that module (a
    later process that never imports it does not know the id: ``unknown_id_hint`` names it)."""
    found = {"env_kwargs": env_kwargs, "env_factory": env_factory}
    if env_factory is None and ":" not in env_id:
        found["module"] = _registering_module(env_id)
    return {key: value for key, value in found.items() if value}


def _registering_module(env_id: str) -> str | None:
    spec = gym.registry.get(env_id)
    if spec is None:
        return None
    entry = spec.entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
    if not module or module.split(".")[0] in ALWAYS_REGISTERED:
        return None
    return module


def unknown_id_hint(env_id: str, source: dict) -> str:
    """How to make ``env_id`` known again in a new process: import the module that registered it."""
    module = source.get("module")
    if module is None:
        return ""
    if module == "__main__":
        return (
            f"; {env_id} was registered by the script that trained the agent: register it in a module and give "
            f"--env-id module:{env_id}"
        )
    return f"; {env_id}'s entry point is in {module}: give --env-id {module}:{env_id}"
