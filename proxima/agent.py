"""A trained agent: the network plus what is needed to use it on its environment, saved and loaded."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import torch

from proxima.distributions import make_head
from proxima.envs.interface import clip_to_space
from proxima.errors import UserError
from proxima.files import (
    AGENT_JSON,
    WEIGHTS,
    load_module_state,
    read_json,
    read_tensors,
    write_json,
    write_tensors,
)
from proxima.networks import ActorCritic, NetworkSpec

FORMAT = "proxima-agent"
VERSION = 1


def space_to_json(space: gym.Space) -> dict:
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.Box):
        # JSON has no infinity: an unbounded side is written as null
        bound = lambda a: [float(x) if np.isfinite(x) else None for x in a.reshape(-1)]  # noqa: E731
        return {
            "type": "Box",
            "shape": list(space.shape),
            "low": bound(space.low),
            "high": bound(space.high),
            "dtype": np.dtype(space.dtype).name,
        }
    raise UserError(f"cannot describe space {space}")


class Agent:
    """A policy ready to act: ``predict`` takes numpy observations and returns numpy actions."""

    def __init__(
        self, model: ActorCritic, env_id: str, observation_space: gym.Space, action_space: gym.Space
    ):
        self.model = model
        self.env_id = env_id
        self.observation_space = observation_space
        self.action_space = action_space

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def predict(self, obs, deterministic: bool = False) -> np.ndarray:
        """Actions for one raw observation ``(obs_dim,)`` or a batch ``(B, obs_dim)``, sampled or, if
        ``deterministic``, the most probable (the Gaussian's mean). Observations are normalized with the
        statistics saved at the end of training; Box actions come back clipped to the action space."""
        obs_t = torch.as_tensor(np.asarray(obs, dtype=self.observation_space.dtype), device=self.device)
        single = obs_t.ndim == len(self.observation_space.shape)
        actions = self.model.predict(obs_t.unsqueeze(0) if single else obs_t, deterministic)
        actions = clip_to_space(actions.cpu().numpy(), self.action_space)  # ready for env.step
        return actions[0] if single else actions

    def save(self, directory: str, **extra) -> None:
        """Write ``model.safetensors`` and ``agent.json`` into ``directory``."""
        write_tensors(os.path.join(directory, WEIGHTS), self.model.state_dict())
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "env_id": self.env_id,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "network": self.model.spec.to_json(),
            **extra,
        }
        write_json(os.path.join(directory, AGENT_JSON), meta)

    @classmethod
    def load(cls, run_dir: str, device: str | torch.device = "cpu") -> Agent:
        """Rebuild the agent saved in ``run_dir``; a ``UserError`` says what is wrong with a bad directory."""
        if not os.path.isdir(run_dir):
            raise UserError(
                f"run directory {run_dir!r} does not exist; give a directory written by `proxima train`"
            )
        meta = read_json(os.path.join(run_dir, AGENT_JSON))
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise UserError(f"{run_dir}/{AGENT_JSON} is not a proxima agent (format version {VERSION})")
        try:
            spec = NetworkSpec.from_json(meta["network"])
            observation_space = _box(meta["observation_space"])
            action_space = _action_space(meta["action_space"])
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(
                f"{run_dir}/{AGENT_JSON} is missing or has a bad field ({e}); the checkpoint is corrupt"
            ) from None
        model = ActorCritic(spec, make_head(action_space))
        path = os.path.join(run_dir, WEIGHTS)
        load_module_state(model, read_tensors(path), path)
        return cls(model.to(device).eval(), meta["env_id"], observation_space, action_space)


def _action_space(data: dict) -> gym.Space:
    if data["type"] == "Discrete":
        return gym.spaces.Discrete(int(data["n"]))
    if data["type"] == "Box":
        return _box(data)
    raise ValueError(f"action space type {data['type']!r}")


def _box(data: dict) -> gym.spaces.Box:
    """``space_to_json``'s inverse for a Box; agents saved before "dtype" existed had float32 spaces."""
    shape, dtype = tuple(data["shape"]), np.dtype(data.get("dtype", "float32"))
    low = np.array([-np.inf if x is None else x for x in data["low"]], dtype=np.float64).reshape(shape)
    high = np.array([np.inf if x is None else x for x in data["high"]], dtype=np.float64).reshape(shape)
    return gym.spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)


def load(run_dir: str, device: str | torch.device = "cpu") -> Agent:
    """Load the agent that ``proxima train`` saved in ``run_dir``."""
    return Agent.load(run_dir, device)
