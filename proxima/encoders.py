"""Observation encoders: the one place that knows what an observation looks like (docs/ARCHITECTURE.md).

An encoder turns a batch of raw observations, in the observation space's own dtype, into float features;
the actor's and critic's layers sit on top of it. The observation space picks the encoder
(``encoder_for``), the name is saved in ``agent.json`` (``NetworkSpec.encoder``), and the training loop
never asks what an observation is. Adding an observation kind (images, dicts) means registering an encoder
here, not a branch in the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from proxima.distributions import make_head
from proxima.errors import UserError


class FlattenEncoder(nn.Module):
    """``flatten-mlp``: the observation as one float vector; the MLPs of ``ActorCritic`` sit on top."""

    def __init__(self, obs_shape: tuple[int, ...]):
        super().__init__()
        self.features_dim = int(np.prod(obs_shape))

    def forward(self, obs: Tensor) -> Tensor:
        # both are no-ops (the same tensor) for the flat float32 batches of classic control
        return obs.flatten(1).to(torch.float32)


@dataclass(frozen=True)
class EncoderType:
    name: str
    make: Callable[[tuple[int, ...]], nn.Module]  # obs_shape -> a module with ``features_dim``
    supports: Callable[[gym.Space], bool]
    accepts: str  # for the error when no encoder supports a space


ENCODERS: dict[str, EncoderType] = {}


def register_encoder(encoder: EncoderType) -> None:
    ENCODERS[encoder.name] = encoder


def _flat_box(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 1


register_encoder(EncoderType("flatten-mlp", FlattenEncoder, _flat_box, "1-D Box observations"))


def encoder_for(observation_space: gym.Space) -> str:
    """The name of the first registered encoder that supports the space, or a ``UserError``."""
    for encoder in ENCODERS.values():
        if encoder.supports(observation_space):
            return encoder.name
    accepted = ", ".join(e.accepts for e in ENCODERS.values())
    raise UserError(f"observation space {observation_space} is not supported yet; proxima accepts {accepted}")


def make_encoder(name: str, obs_shape: tuple[int, ...]) -> nn.Module:
    if name not in ENCODERS:
        raise UserError(f"unknown encoder {name!r}; accepted: {', '.join(ENCODERS)}")
    return ENCODERS[name].make(tuple(obs_shape))


def check_spaces(observation_space: gym.Space, action_space: gym.Space) -> None:
    """Raise a ``UserError`` for spaces proxima cannot train on yet: no encoder or no policy head."""
    encoder_for(observation_space)
    make_head(action_space)
