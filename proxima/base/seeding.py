"""Every random stream of a run and the seed it starts from: one function per stream, all from the run's seed.

A run is a function of its settings and its seed (``--seed``). Each stream below is keyed apart from the others,
so that no stream repeats another's draws and adding one changes none of the rest. A run draws from its own
``torch.Generator``s (``RunStreams``), passed to what draws (the collector's actions, the update's minibatch
order), and its checkpoint holds their states: runs in one process (a batched run's seeds, a search's lockstep
trials) never share a stream, and nothing saves, swaps or restores torch's global generator. Env ``i`` of a vector env is
seeded with ``seed + i`` by every backend (Gymnasium's vector envs, the native envs' ``CounterRNG``, ALE), so a
function here gives the seed of env 0 and the backend adds ``i``.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import Tensor

# Offsets from the run's seed, far apart, since each stream's env i adds i to its own. (A resumed run's
# seed + global_step may reach EVALUATION's: harmless, as those seed other envs, whose states merely repeat.)
EVALUATION = 1_000_000
RESCORE = 2_000_000
ACTION_NOISE = 0x5EED0000
MINIBATCHES = 0x3B000000
FRESH_EPISODES = 0x7E500000


def seed_globals(seed: int, deterministic: bool) -> None:
    """torch's, numpy's and Python's global generators, seeded where a run's model is about to be built and
    never read back: the networks' initialization (``torch.nn.init`` and the layers' own defaults draw from
    torch's), and envs that draw from numpy's or Python's. Everything a run draws after that comes from its
    ``RunStreams``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = deterministic


class RunStreams:
    """A run's own generators, on its device: ``actions`` (the local collector's action draws) and
    ``minibatches`` (the update's order of samples, detail 6). ``state_dict`` is the checkpoint's ``rng``."""

    def __init__(self, seed: int, device: torch.device | str = "cpu"):
        self.actions = torch.Generator(device).manual_seed(action_noise(seed))
        self.minibatches = torch.Generator(device).manual_seed(seed + MINIBATCHES)

    def state_dict(self) -> dict[str, Tensor]:
        return {"actions": self.actions.get_state(), "minibatches": self.minibatches.get_state()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.actions.set_state(state["actions"])
        self.minibatches.set_state(state["minibatches"])


def training_envs(seed: int, first: int = 0) -> int:
    """The training envs' episodes (env ``i``: ``seed + i``); ``first``: the index of a slice's first env (a
    rollout worker's), so that an env's episodes do not depend on which worker holds it."""
    return seed + first


def action_noise(seed: int, first: int = 0) -> int:
    """A run's action sampling (``RunStreams.actions``), or a rollout worker's, one stream per env (env ``i``:
    ``seed + ACTION_NOISE + i``, whichever worker holds it); apart from the envs' own streams."""
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
