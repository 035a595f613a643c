"""Env backends: a name, the ids it handles, and a factory; ``make_vec_env`` consults this registry.

A backend is added by one call, from inside proxima or from a user's code, with no if/else to edit::

    register_backend("mine", make_my_envs, handles=lambda env_id: env_id.startswith("Mine"))

``--env-backend auto`` takes the most recently registered backend that handles the id and can do what the
run asks for (processes for ``--async-envs``, rendering for ``--capture-video``) at the run's env count;
Gymnasium's, registered first, handles every id. A backend that is slower than the one below it at a few
envs says from how many envs it is to be taken (``min_envs``, measured: benchmarks/backend_choice.py). A
backend whose ids no other runs (``exclusive``: ``pettingzoo:``, ``vmas:``) is never passed over for them:
what it cannot do is refused by name, where passing its id on would end in Gymnasium's "unknown env id".
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import torch

from proxima.base.errors import UserError
from proxima.envs.interface import Seeds, VecEnv, VideoDirs

FEATURES = {"asynchronous": "--async-envs", "video": "--capture-video", "env_kwargs": "--env-kwargs"}
# what a multi-agent backend that steps its games in this process offers instead of --async-envs
GAMES_ON_WORKERS = "give --rollout-workers N to run the games in N Ray processes"


@dataclass(frozen=True)
class Backend:
    """``make(env_id, num_envs, *, seed, device, asynchronous, video_dir, video_episodes) -> VecEnv``; the other
    fields as ``register_backend`` takes them (``ids``: the ids it handles, for error messages; empty: any)."""

    name: str
    make: Callable[..., VecEnv]
    handles: Callable[[str], bool]
    features: frozenset[str] = frozenset()
    ids: tuple[str, ...] = ()
    min_envs: Mapping[str, int] = dataclasses.field(default_factory=dict)
    exclusive: Callable[[str], bool] = lambda env_id: False
    instead: Mapping[str, str] = dataclasses.field(default_factory=dict)


_BACKENDS: dict[str, Backend] = {}


def register_backend(
    name: str,
    make: Callable[..., VecEnv],
    *,
    handles: Callable[[str], bool] | Collection[str] | None = None,
    features: Collection[str] = (),
    min_envs: Mapping[str, int] | None = None,
    exclusive: bool | Collection[str] = False,
    instead: Mapping[str, str] | None = None,
) -> Backend:
    """Add (or replace) the backend ``name``. ``handles``: a predicate on env ids, or a collection of ids
    (None: every id). ``features``: which of ``FEATURES`` it supports. ``min_envs``: env id -> the fewest envs
    at which ``auto`` picks this backend. ``exclusive``: no other backend runs the ids it handles (True), or
    these ids of them (a collection), so ``auto`` refuses what it cannot do with them instead of trying the
    next. ``instead``: feature -> what to use in its place, said when the feature is refused."""
    if name == "auto":
        raise ValueError("'auto' is not a backend name: it means choosing one")
    unknown = (set(features) | set(instead or {})) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown backend features {sorted(unknown)}; accepted: {sorted(FEATURES)}")
    ids: tuple[str, ...] = ()
    if handles is None:
        predicate = lambda env_id: True  # noqa: E731
    elif callable(handles):
        predicate = handles
    else:
        ids = tuple(handles)
        predicate = frozenset(ids).__contains__
    alone = (lambda env_id: exclusive) if isinstance(exclusive, bool) else frozenset(exclusive).__contains__
    backend = Backend(
        name, make, predicate, frozenset(features), ids, dict(min_envs or {}), alone, dict(instead or {})
    )
    _BACKENDS.pop(name, None)  # a replaced backend moves to the front of `auto`'s order
    _BACKENDS[name] = backend
    return backend


def backend_names() -> list[str]:
    return ["auto", *_BACKENDS]


def get_backend(name: str) -> Backend:
    if name not in _BACKENDS:
        raise UserError(f"unknown env backend {name!r}; accepted: {', '.join(backend_names())}")
    return _BACKENDS[name]


def _refusal(backend: Backend, env_id: str, feature: str, suggest: bool = True) -> UserError:
    flag = FEATURES[feature]
    if backend.exclusive(env_id):
        instead = backend.instead.get(feature) if suggest else None
        return UserError(
            f"the {backend.name} backend cannot do {flag}, and it is the only one that runs {env_id!r}; drop "
            f"{flag}" + (f", or {instead}" if instead else "")
        )
    able = [b.name for b in _BACKENDS.values() if feature in b.features and b.handles(env_id)]
    able = able or [b.name for b in _BACKENDS.values() if feature in b.features]
    return UserError(f"the {backend.name} backend cannot do {flag}; it needs the {' or '.join(able)} backend")


def _wanted(asynchronous: bool, video: bool, env_kwargs: bool) -> list[str]:
    asked = {"asynchronous": asynchronous, "video": video, "env_kwargs": env_kwargs}
    return [feature for feature, on in asked.items() if on]


def resolve_backend(
    env_id: str,
    backend: str = "auto",
    *,
    asynchronous: bool = False,
    video: bool = False,
    num_envs: int | None = None,
    env_kwargs: bool = False,
    suggest: bool = True,
) -> str:
    """The backend that runs ``env_id``: ``backend`` itself unless it is ``auto`` (the module's doc), for
    ``num_envs`` envs (None: any count). The refusal of a feature that an ``exclusive`` backend lacks names
    what it offers instead, unless ``suggest`` is False (a run that uses it already)."""
    if backend != "auto":
        return get_backend(backend).name
    wanted = _wanted(asynchronous, video, env_kwargs)
    for candidate in reversed(_BACKENDS.values()):
        enough = num_envs is None or num_envs >= candidate.min_envs.get(env_id, 1)
        if candidate.handles(env_id) and set(wanted) <= candidate.features and enough:
            return candidate.name
        if candidate.exclusive(env_id) and candidate.handles(env_id):
            lacking = [name for name in wanted if name not in candidate.features]
            if lacking:
                raise _refusal(candidate, env_id, lacking[0], suggest)
            return candidate.name  # below its min_envs, but no other backend runs the id
    raise UserError(
        f"no env backend handles {env_id!r} with {', '.join(FEATURES[w] for w in sorted(wanted))}"
    )


def make_vec_env(
    env_id: str,
    num_envs: int,
    *,
    backend: str = "auto",
    seed: Seeds = None,
    asynchronous: bool = False,
    device: torch.device | str = "cpu",
    video_dir: VideoDirs = None,
    video_episodes: int | None = None,
    env_kwargs: dict | None = None,
) -> VecEnv:
    """Build ``num_envs`` copies of ``env_id`` behind the ``VecEnv`` interface on ``backend`` (``resolve_backend``);
    the first ``reset()`` uses ``seed`` (an int, or one int per env: ``VecEnv.reset``). ``asynchronous``: each
    copy in its own process (Gymnasium's AsyncVectorEnv), which pays off only when one env step costs far more
    than the inter-process round trip. ``video_dir``: ``proxima.envs.interface.video_dirs``. ``env_kwargs``:
    keyword arguments of the env's constructor, for the backends that take them."""
    if not isinstance(env_id, str):  # an env object or a factory: proxima.envs.user.make_envs takes those
        raise UserError(
            f"make_vec_env takes an env id string, got {type(env_id).__name__}; for an env object or a "
            "function that makes one, use proxima.envs.make_envs"
        )
    video, kwargs = video_dir is not None, bool(env_kwargs)
    name = resolve_backend(
        env_id, backend, asynchronous=asynchronous, video=video, num_envs=num_envs, env_kwargs=kwargs
    )
    chosen = _BACKENDS[name]
    if num_envs < 1:
        raise UserError(f"num_envs must be a positive integer, got {num_envs}")
    if not chosen.handles(env_id):
        listed = f"; {name} envs: {', '.join(chosen.ids)}" if chosen.ids else ""
        raise UserError(
            f"no {name} implementation of {env_id!r}{listed} (use --env-backend gymnasium for any other id)"
        )
    lacking = [feature for feature in _wanted(asynchronous, video, kwargs) if feature not in chosen.features]
    if lacking:
        raise _refusal(chosen, env_id, lacking[0])
    # env_kwargs only where given: backends of before take none
    return chosen.make(
        env_id,
        num_envs,
        seed=seed,
        device=device,
        asynchronous=asynchronous,
        video_dir=video_dir,
        video_episodes=video_episodes,
        **({"env_kwargs": env_kwargs} if env_kwargs else {}),
    )


def module_factory(env_id: str, makers: tuple[str, str], form: str):
    """The function that makes one env of ``env_id`` (``PREFIX:MODULE``) with its kwargs: the first of ``makers``
    that MODULE has; ``form`` says what to give instead."""
    name = env_id.partition(":")[2]
    if not name.strip() or ":" in name:
        raise UserError(f"malformed PettingZoo id {env_id!r}; give {form}")
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        raise UserError(f"cannot import {name!r} for {env_id} ({e}); give {form}") from None
    make = getattr(module, makers[0], None) or getattr(module, makers[1], None)
    if not callable(make):
        raise UserError(f"{name} has neither {makers[0]}() nor {makers[1]}(); give {form}")
    return make
