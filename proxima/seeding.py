"""Every random stream of a run and the seed it starts from: one function per stream, all from the run's seed.

A run is a function of its settings and its seed (``--seed``). Each stream below is keyed apart from the others,
so that no stream repeats another's draws and adding one changes none of the rest. Env ``i`` of a vector env is
seeded with ``seed + i`` by every backend (Gymnasium's vector envs, the native envs' ``CounterRNG``, ALE), so a
function here gives the seed of env 0 and the backend adds ``i``.
"""

from __future__ import annotations

import random

import numpy as np
import torch

# Offsets from the run's seed, far apart, since each stream's env i adds i to its own. (A resumed run's
# seed + global_step may reach EVALUATION's: harmless, as those seed other envs, whose states merely repeat.)
EVALUATION = 1_000_000
RESCORE = 2_000_000
ACTION_NOISE = 0x5EED0000
FRESH_EPISODES = 0x7E500000


def seed_globals(seed: int, deterministic: bool) -> None:
    """torch's, numpy's and Python's global generators: the networks' initialization, the minibatch order, and the
    actions the local collector samples (``ActorCritic.act`` draws from torch's generator)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = deterministic


def training_envs(seed: int, first: int = 0) -> int:
    """The training envs' episodes (env ``i``: ``seed + i``); ``first``: the index of a slice's first env (a
    rollout worker's), so that an env's episodes do not depend on which worker holds it."""
    return seed + first


def action_noise(seed: int, first: int = 0) -> int:
    """A rollout worker's action sampling, one stream per env (env ``i``: ``seed + ACTION_NOISE + i``), apart
    from the envs' own streams."""
    return seed + ACTION_NOISE + first


def fresh_episodes(seed: int, env_steps: int) -> int:
    """The run seed of a replacement rollout worker whose envs' state could not be saved, after ``env_steps``
    steps of all envs: new episodes, apart from the training envs' and the action streams'."""
    return seed + FRESH_EPISODES + env_steps


def resumed_episodes(seed: int, global_step: int) -> int:
    """The training envs of a resumed run whose envs could not be saved (Gymnasium's): episodes that the run has
    not played before."""
    return seed + global_step


def evaluation(seed: int) -> int:
    """``--eval-every``'s envs: the same starting states at every evaluation, apart from the training envs' and
    from ``proxima eval``'s (which start from its own ``--seed``)."""
    return seed + EVALUATION


def rescore(seed: int) -> int:
    """``--rescore-best``'s episodes: apart from the evaluations' that chose the candidates."""
    return seed + RESCORE
