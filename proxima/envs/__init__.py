"""Environments: the vector-env interface the training loop talks to, its backends, and proxima's own envs."""

from proxima.envs import pendulum, probes  # noqa: F401  (register proxima/* ids with Gymnasium)
from proxima.envs.vector import Step, VecEnv, check_spaces, make_vec_env

__all__ = ["Step", "VecEnv", "check_spaces", "make_vec_env"]
