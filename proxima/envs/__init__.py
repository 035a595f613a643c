"""Environments: the vector-env interface the training loop talks to, its backends, and proxima's own envs.

Importing this package registers the built-in backends (Gymnasium's first, then native, ALE's, PettingZoo's and
VMAS's) and proxima's Gymnasium ids (``proxima/...``). VMAS itself is imported only when a ``vmas:`` env is made.
"""

from proxima.envs import (  # noqa: F401  (registrations)
    ale_backend,
    gymnasium_backend,
    native,
    partial,
    pendulum,
    pettingzoo_backend,
    probes,
    selfplay,
    vmas_backend,
)
from proxima.envs.interface import Step, VecEnv, env_actions
from proxima.envs.registry import backend_names, make_vec_env, register_backend
from proxima.envs.user import make_envs

__all__ = [
    "Step",
    "VecEnv",
    "backend_names",
    "env_actions",
    "make_envs",
    "make_vec_env",
    "register_backend",
]
