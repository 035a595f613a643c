"""Your env as you have it: an id, a function that makes one ``gymnasium.Env``, or a ``gymnasium.vector.VectorEnv``
you built, behind proxima's ``VecEnv`` (``proxima.envs.interface``).

A factory (a class, a function, a ``functools.partial``, a lambda) goes through the Gymnasium backend as an id
does: called with ``env_kwargs`` once per sub-env and once for the checks, each env tidied the same way.

A ``VectorEnv`` runs in whichever autoreset mode it was built with, behind ``VectorEnvAdapter``
(``proxima.envs.gymnasium_backend``), which gives the loop same-step semantics for each.

A run records what it cannot rebuild: ``describe_env`` gives the label and, where the object has one, the import
path (``module:name``) from which ``load_env_factory`` makes it again.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import cast

import gymnasium as gym
import numpy as np
import torch

from proxima.base import trust
from proxima.base.errors import EnvError, UserError
from proxima.base.spaces import MASK_KEY, ObsLayout, mask_count
from proxima.envs.atari import atari_game
from proxima.envs.gymnasium_backend import GymnasiumVecEnv, VectorEnvAdapter, construct
from proxima.envs.interface import Seeds, VideoDirs
from proxima.envs.pettingzoo_backend import PettingZooVecEnv, is_pettingzoo_env
from proxima.envs.registry import make_vec_env

# The kinds of env object that config.json cannot name for a later import (env_factory's value for them).
NOT_REBUILDABLE = ("<lambda>", "<functools.partial>", "<VectorEnv>", "<callable>")

ENV_FORMS = (
    "an env id string, a class or function that returns a gymnasium.Env (called once per sub-env), or a "
    "gymnasium.vector.VectorEnv"
)


def is_env_object(env) -> bool:  # what make_envs takes besides an id string
    return env is not None and not isinstance(env, str)


def describe_env(env) -> tuple[str, str | None]:
    """``(label, env_factory)`` of an env object for config.json: a label that names it (``object:...``, never a
    makeable id, so nothing mistakes it for one), and the ``module:qualname`` of a class or module-level
    function, from which ``load_env_factory`` makes it again, or one of ``NOT_REBUILDABLE``. A VectorEnv that
    ``made_from_id`` finds made from a registered id is that id, with no factory: the id makes it again."""
    if isinstance(env, gym.vector.VectorEnv):
        made = made_from_id(env)
        if made is not None:
            return made[0], None
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


# What gymnasium.make_vec adds to the spec's kwargs besides the env constructor's: how the envs are vectorized,
# which an evaluation's or a resume's own envs decide again, and wrappers (callables: refused by made_from_id).
VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def made_from_id(envs: gym.vector.VectorEnv) -> tuple[str, dict | None] | None:
    """``(id, env_kwargs)`` of a VectorEnv that ``gymnasium.make_vec`` made from a registered id, which proxima
    makes again as the same envs (``proxima eval RUN_DIR``, a resume): its spec's id, with the constructor's
    kwargs where there are any (None: none); None where the id would make other envs. That is an env in
    vector wrappers (the spec passes through them, the wrappers are not in it), sub-envs in ``wrappers``, an
    id registered otherwise since, an Atari id (proxima adds its preprocessing), or kwargs that JSON cannot
    hold (config.json keeps them). The spec is data that Gymnasium wrote: nothing is imported or pickled."""
    spec = envs.spec
    if spec is None or envs.unwrapped is not envs or not isinstance(spec.id, str):
        return None
    registered = gym.registry.get(spec.id)
    if registered is None or spec.kwargs.get("wrappers") or atari_game(spec.id) is not None:
        return None
    if (registered.entry_point, registered.additional_wrappers) != (
        spec.entry_point,
        spec.additional_wrappers,
    ):
        return None
    kwargs = {k: v for k, v in spec.kwargs.items() if k not in VECTOR_KWARGS}
    if "max_episode_steps" in kwargs and kwargs["max_episode_steps"] == registered.max_episode_steps:
        del kwargs["max_episode_steps"]  # make_vec's native vector envs get the registered limit in kwargs
    kwargs.pop("render_mode", None)  # how the env draws, not what it does: video asks for its own
    try:
        plain = json.loads(json.dumps(kwargs, allow_nan=False)) == kwargs
    except (TypeError, ValueError):
        plain = False
    return (spec.id, kwargs or None) if plain else None


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
            env,
            num_envs,
            backend=backend,
            seed=seed,
            asynchronous=asynchronous,
            device=device,
            video_dir=video_dir,
            video_episodes=video_episodes,
            env_kwargs=env_kwargs,
        )
    label, _ = describe_env(env)
    first = _made_pettingzoo_env(env, label, env_kwargs, backend)
    if first is not None:
        if asynchronous:
            raise UserError("the pettingzoo backend cannot do --async-envs; drop it")
        return PettingZooVecEnv(
            label,
            num_envs,
            env,
            env_kwargs=env_kwargs,
            seed=seed,
            device=device,
            video_dir=video_dir,
            video_episodes=video_episodes,
            first=first,
        )
    if backend not in ("auto", "gymnasium"):
        raise UserError(
            f"an env object runs on the gymnasium or pettingzoo backend, not {backend!r}: drop --env-backend"
        )
    if isinstance(env, gym.vector.VectorEnv):
        refused = [
            what
            for what, on in (("video", video_dir), ("--async-envs", asynchronous), ("env_kwargs", env_kwargs))
            if on
        ]
        if refused:
            raise UserError(
                f"a VectorEnv you built comes as it is: proxima cannot add {refused[0]} to it; give env= a "
                "function that makes one env instead"
            )
        if num_envs != env.num_envs:
            raise UserError(f"num_envs is {num_envs}, but the VectorEnv given has {env.num_envs} envs")
        layout = _layout(env.single_observation_space, env.single_action_space, label)
        return VectorEnvAdapter(env, layout, device=device, seed=seed, label=label)
    return GymnasiumVecEnv(
        label,
        num_envs,
        asynchronous=asynchronous,
        seed=seed,
        device=device,
        video_dir=video_dir,
        video_episodes=video_episodes,
        env_kwargs=env_kwargs,
        factory=env,
    )


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


def _layout(space: gym.Space, actions: gym.Space, label: str) -> ObsLayout:
    """A Box travels as it is; another space is packed (``proxima.base.spaces``), its Dict ``action_mask`` too. A mask
    in the info cannot be read from a vector env's batched info reliably: refused."""
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        size = int(np.prod(cast(tuple[int, ...], space[MASK_KEY].shape)))  # a mask's space has a shape
        return ObsLayout(space, MASK_KEY, mask_count(label, actions, size))
    return ObsLayout(space)


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
