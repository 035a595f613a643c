"""A trained agent: the network plus what is needed to use it on its environment, saved and loaded."""

from __future__ import annotations

import dataclasses
import os

import gymnasium as gym
import numpy as np
import torch

from proxima import trust
from proxima.distributions import make_head
from proxima.encoders import class_path
from proxima.envs.interface import env_actions
from proxima.errors import UserError
from proxima.files import (
    AGENT_JSON,
    CHECKPOINT,
    CONFIG_JSON,
    SEEDS_JSON,
    WEIGHTS,
    load_module_state,
    read_json,
    read_tensors,
    write_json,
    write_tensors,
)
from proxima.networks import ActorCritic, NetworkSpec
from proxima.spaces import space_from_json, space_to_json

FORMAT = "proxima-agent"
VERSION = 3


class Agent:
    """A policy ready to act: ``predict`` takes numpy observations and returns numpy actions."""

    def __init__(
        self, model: ActorCritic, env_id: str, observation_space: gym.Space, action_space: gym.Space
    ):
        self.model = model
        self.env_id = env_id
        # How to make the env again besides its id, where there is more to it (docs/ENVS.md): "env_kwargs",
        # "env_factory" (PPOArgs' fields), "module" (the module whose code registered a plain id).
        self.env_source: dict = {}
        self.source = "the agent's agent.json"  # the file it was loaded from, which errors name
        self.observation_space = observation_space
        self.action_space = action_space
        self.layout = model.spec.layout()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def predict(self, obs, state=None, episode_start=None, deterministic: bool = False, action_mask=None):
        """Actions for one raw observation or a batch of them, sampled or, if ``deterministic``, the most
        probable (the Gaussian's mean). A Box observation is an array ``(*shape)`` or ``(B, *shape)``; a Dict
        or Tuple one is a dict or tuple of such arrays, each with the batch axis for a batch. ``action_mask``:
        booleans, one per action (``(B, n)`` for a batch), for an agent trained with masks; masked actions are
        never returned. Observations are normalized with the statistics saved at the end of training. The
        actions are the env's: Box actions clipped to the action space, a Discrete's start added.

        A recurrent agent (``--recurrent lstm``) returns ``(actions, state)``: pass ``state`` back with the next
        observation, and ``episode_start`` (a bool per env) where an episode begins, which zeroes its memory.
        ``state`` None starts every env afresh. As sb3-contrib's, the state is ``(h, c)``, numpy arrays of shape
        ``(layers, B, hidden)``."""
        # predict(obs, True): deterministic, as in the signature before recurrent agents
        if isinstance(state, (bool, np.bool_, int)):
            state, deterministic = None, bool(state)
        if self.model.lstm is None and (state is not None or episode_start is not None):
            raise UserError("this agent is not recurrent: it takes no state or episode_start")
        layout = self.layout
        if action_mask is not None and layout.mask is None:
            raise UserError("this agent was trained without action masks; call predict without action_mask")
        if not layout.packed:
            array, single = self._box_obs(obs)
            obs_t = torch.as_tensor(array, device=self.device)
        else:
            single = not layout.is_batch(obs)
            packed = layout.pack(obs, action_mask if layout.mask == "info" else None, batch=not single)
            if action_mask is not None and layout.mask != "info":  # it overrides the dict's own mask
                mask = np.asarray(action_mask, dtype=bool)
                packed[..., layout.mask_part.span] = mask.reshape(packed[..., layout.mask_part.span].shape)
            obs_t = torch.as_tensor(packed, device=self.device)
        obs_t = obs_t.unsqueeze(0) if single else obs_t
        if self.model.lstm is None:
            actions = self.model.predict(obs_t, deterministic)
        else:
            actions, state = self._predict_recurrent(obs_t, state, episode_start, deterministic)
        actions = env_actions(actions.cpu().numpy(), self.action_space)  # ready for env.step
        actions = actions[0] if single else actions
        return actions if self.model.lstm is None else (actions, state)

    def _box_obs(self, obs) -> tuple[np.ndarray, bool]:
        """A Box observation, or a batch of them, as an array of the space's dtype, and whether it is one. One
        whose shape differs only by axes of size 1 is taken as one observation, as the Gymnasium backend takes
        it from an env (a bare float for a space of shape (1,), a column for a vector); any other shape is
        refused (a transposed image would be scrambled by a reshape)."""
        shape = self.observation_space.shape
        array = np.asarray(obs, dtype=self.observation_space.dtype)
        if array.shape == shape or (array.ndim == len(shape) + 1 and array.shape[1:] == shape):
            return array, array.ndim == len(shape)
        if [d for d in array.shape if d != 1] == [d for d in shape if d != 1]:
            return array.reshape(shape), True
        raise UserError(
            f"predict takes one observation of shape {shape} or a batch of shape (B, {', '.join(map(str, shape))}); "
            f"got one of shape {array.shape}"
        )

    def _predict_recurrent(self, obs: torch.Tensor, state, episode_start, deterministic: bool):
        n = obs.shape[0]
        if state is None:
            memory, starts = self.model.initial_memory(n, self.device), torch.ones(n, device=self.device)
        else:
            memory = tuple(
                torch.as_tensor(np.asarray(s), dtype=torch.float32, device=self.device) for s in state
            )
            starts = torch.zeros(n, device=self.device)
            if episode_start is not None:
                starts = torch.as_tensor(
                    np.asarray(episode_start).reshape(n), dtype=torch.float32, device=self.device
                )
        actions, memory = self.model.predict_recurrent(obs, starts, memory, deterministic)
        return actions, tuple(m.cpu().numpy() for m in memory)

    def save(self, directory: str, **extra) -> None:
        """Write ``model.safetensors`` and ``agent.json`` into ``directory`` (made if it does not exist)."""
        os.makedirs(directory, exist_ok=True)
        write_tensors(os.path.join(directory, WEIGHTS), self.model.state_dict())
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "env_id": self.env_id,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "network": self.model.spec.to_json(),
            **({"env_source": self.env_source} if self.env_source else {}),
            **extra,
        }
        write_json(os.path.join(directory, AGENT_JSON), meta)

    @classmethod
    def load(
        cls, run_dir: str, device: str | torch.device = "cpu", *, encoder=None, trust_code: bool = False
    ) -> Agent:
        """Rebuild the agent saved in ``run_dir``; a ``UserError`` says what is wrong with a bad directory.

        agent.json may name code: an encoder class (``module:Class``) and the env's factory or module. None of
        it is imported unless you name it again or pass ``trust_code`` (docs/SECURITY.md): ``encoder``, the
        class (or its ``module:Class``) to build the network with; the env is named to ``evaluate``."""
        if os.path.isfile(run_dir):
            raise UserError(
                f"{run_dir!r} is a file; give the directory that holds it, as written by `proxima train`"
            )
        if not os.path.isdir(run_dir):
            raise UserError(
                f"run directory {run_dir!r} does not exist; give a directory written by `proxima train`"
            )
        if not os.path.exists(os.path.join(run_dir, AGENT_JSON)):
            _no_agent_yet(run_dir)
        meta = read_json(os.path.join(run_dir, AGENT_JSON))
        if meta.get("format") != FORMAT or not isinstance(meta.get("version"), int):
            raise UserError(f"{run_dir}/{AGENT_JSON} is not a proxima agent")
        if meta["version"] != VERSION:  # before 1.0 an agent of another version is refused, not converted
            raise UserError(
                f"{run_dir}/{AGENT_JSON} has agent format version {meta['version']}; this proxima reads version "
                f"{VERSION} only (train the agent again, or load it with the proxima that saved it)"
            )
        try:
            spec = NetworkSpec.from_json(meta["network"])
            observation_space = space_from_json(meta["observation_space"])
            action_space = space_from_json(meta["action_space"])
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(
                f"{run_dir}/{AGENT_JSON} is missing or has a bad field ({e}); the checkpoint is corrupt"
            ) from None
        if encoder is not None:  # named again: the weights must still fit it (load_module_state checks)
            given = class_path(encoder) if isinstance(encoder, type) else encoder
            trust.remember("encoder", given)
            spec = dataclasses.replace(spec, network=dataclasses.replace(spec.network, encoder=given))
        env_source = meta.get("env_source", {})
        names = {"encoder": spec.network.encoder}
        if trust_code:  # the env's names too, so that evaluate(agent) may make them later in this process
            names |= {"env_id": meta.get("env_id"), "env_factory": env_source.get("env_factory")}
        trust.check(f"{run_dir}/{AGENT_JSON}", names, trusted=trust_code)
        model = ActorCritic(spec, make_head(action_space, spec.network.action_dist))
        path = os.path.join(run_dir, WEIGHTS)
        load_module_state(model, read_tensors(path), path)
        agent = cls(model.to(device).eval(), meta["env_id"], observation_space, action_space)
        agent.env_source = env_source
        agent.source = f"{run_dir}/{AGENT_JSON}"
        return agent


def _no_agent_yet(run_dir: str) -> None:
    """A run directory without its agent: a batched run's parent, or a run that has not finished."""
    there = set(os.listdir(run_dir))
    if SEEDS_JSON in there:
        seeds = sorted(d for d in there if d.startswith("seed") and os.path.isdir(os.path.join(run_dir, d)))
        raise UserError(
            f"{run_dir} holds a batched run (--num-seeds), whose agents are its seeds': give one of "
            f"{', '.join(os.path.join(run_dir, d) for d in seeds[:3])}{', ...' if len(seeds) > 3 else ''}"
        )
    if CONFIG_JSON in there:
        resume = "proxima train --resume " + run_dir
        raise UserError(
            f"the run in {run_dir} has not finished, so it has no agent yet"
            + (f"; continue it to its end first: {resume}" if CHECKPOINT in there else
               "; it stopped before its first checkpoint, so train it again")
        )  # fmt: skip


def load(
    run_dir: str, device: str | torch.device = "cpu", *, encoder=None, trust_code: bool = False
) -> Agent:
    """Load the agent that ``proxima train`` saved in ``run_dir``; ``encoder`` and ``trust_code`` as
    ``Agent.load``'s (docs/SECURITY.md)."""
    return Agent.load(run_dir, device, encoder=encoder, trust_code=trust_code)
