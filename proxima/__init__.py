"""proxima: policy-gradient reinforcement learning (PPO, VPG, REINFORCE) in PyTorch."""

import gc

# Importing torch and the rest creates a few hundred thousand objects, and the cyclic collector's full passes
# over them during the import free nothing: pausing it for proxima's import saves those passes, which every
# `proxima` command and training run would pay (benchmarks/import_time.py measures it).
_collecting = gc.isenabled()
gc.disable()
try:
    from proxima.base.errors import UserError
    from proxima.envs import make_vec_env
    from proxima.run import threads  # noqa: F401  (first: it starts measuring the load before torch's import)
    from proxima.run.agent import Agent, load
    from proxima.run.callbacks import Callback
    from proxima.run.config import PPOArgs
    from proxima.run.evaluate import evaluate
    from proxima.run.export import export
    from proxima.scale.checking import check
    from proxima.scale.sweeps import resume_sweep, sweep
    from proxima.scale.trainer import resume, train
    from proxima.scale.tuning import resume_tune, tune
    from proxima.version import __version__
finally:
    if _collecting:
        gc.enable()

__all__ = [
    "__version__",
    "Agent",
    "Callback",
    "PPOArgs",
    "check",
    "UserError",
    "evaluate",
    "export",
    "load",
    "make_vec_env",
    "resume",
    "resume_sweep",
    "resume_tune",
    "sweep",
    "train",
    "tune",
]
