"""A trained agent: the network plus what is needed to use it on its environment, saved and loaded."""

from __future__ import annotations

import dataclasses
import os

import gymnasium as gym
import numpy as np
import torch

from proxima.base import trust
from proxima.base.errors import UserError
from proxima.base.files import (
    AGENT_JSON,
    CHECKPOINT,
    CONFIG_JSON,
    SEEDS_JSON,
    WEIGHTS,
    check_finite,
    check_shapes,
    load_module_state,
    make_dirs,
    read_json,
    read_tensors,
    seed_run_dirs,
    shapes_of,
    tensor_shapes,
    write_json,
    write_tensors,
)
from proxima.base.spaces import ObsLayout, space_from_json, space_to_json
from proxima.envs.interface import env_actions
from proxima.policy.distributions import make_head
from proxima.policy.encoders import class_path
from proxima.policy.networks import ActorCritic, NetworkSpec, make_policy, network_shapes
from proxima.policy.user import EnvSpaces

FORMAT = "proxima-agent"
VERSION = 3


class Agent:
    """A policy ready to act: ``predict`` takes numpy observations and returns numpy actions."""

    def __init__(
        self, model: ActorCritic, env_id: str, observation_space: gym.Space, action_space: gym.Space
    ):
        self.model, self.env_id = model, env_id
        # How to make the env again besides its id, where there is more to it (docs/ENVS.md): "env_kwargs",
        # "env_factory" (PPOArgs' fields), "module" (the module whose code registered a plain id).
        self.env_source: dict = {}
        self.source = "the agent's agent.json"  # the file it was loaded from, which errors name
        self.observation_space, self.action_space = observation_space, action_space
        self.layout = model.spec.layout()

    def env_spaces(self) -> EnvSpaces:
        """What a user's actor-critic class is built with again (``NetworkSettings.actor_critic``): the spaces
        agent.json holds, and one env."""
        return EnvSpaces(self.observation_space, self.action_space)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def predict(
        self,
        obs,
        state=None,
        episode_start=None,
        deterministic: bool = False,
        action_mask=None,
        generator=None,
    ):
        """Actions for one raw observation or a batch of them, sampled or, if ``deterministic``, the most
        probable (the Gaussian's mean). A Box observation is an array ``(*shape)`` or ``(B, *shape)``; a Dict
        or Tuple one is a dict or tuple of such arrays, each with the batch axis for a batch. ``action_mask``:
        booleans, one per action (``(B, n)`` for a batch), for an agent trained with masks; masked actions are
        never returned. Observations are normalized with the statistics saved at the end of training. The
        actions are the env's: Box actions clipped to the action space, a Discrete's start added.

        A recurrent agent (``--recurrent lstm``) returns ``(actions, state)``: pass ``state`` back with the next
        observation, and ``episode_start`` (a bool per env) where an episode begins, which zeroes its memory.
        ``state`` None starts every env afresh. As sb3-contrib's, the state is ``(h, c)``, numpy arrays of shape
        ``(layers, B, hidden)``.

        Sampled actions draw from ``generator``, a ``torch.Generator`` on the agent's device, which makes them
        repeat without touching torch's global generator; None: the global one (``torch.manual_seed``)."""
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
            given = obs
            try:
                obs = self._with_state(obs)
                single = not layout.is_batch(obs)
                packed = layout.pack(obs, action_mask if layout.mask == "info" else None, batch=not single)
            except (KeyError, IndexError, TypeError):
                raise UserError(
                    f"predict takes an observation of {self.observation_space} (a dict or tuple of its parts, "
                    f"each with a batch axis for a batch); got {type(given).__name__} "
                    f"{sorted(given) if isinstance(given, dict) else ''}".rstrip()
                ) from None
            if action_mask is not None and layout.mask != "info":  # it overrides the dict's own mask
                mask, part = np.asarray(action_mask, dtype=bool), layout.mask_part
                assert part is not None  # the layout has a mask (refused above otherwise)
                packed[..., part.span] = mask.reshape(packed[..., part.span].shape)
            obs_t = torch.as_tensor(packed, device=self.device)
        obs_t = obs_t.unsqueeze(0) if single else obs_t
        if self.model.lstm is None:
            actions = self.model.predict(obs_t, deterministic, generator)
        else:
            actions, state = self._predict_recurrent(obs_t, state, episode_start, deterministic, generator)
        chosen = env_actions(actions.cpu().numpy(), self.action_space)  # ready for env.step
        chosen = chosen[0] if single else chosen
        return chosen if self.model.lstm is None else (chosen, state)

    def _with_state(self, obs):
        """A multi-agent observation as predict takes it: what the exported actor takes (``{"obs": ...,
        "agent": ...}``, docs/MULTIAGENT.md), with or without the global ``state``. Only a centralized critic
        reads the state, never the actor, so zeros stand in for it where it is not given, as in the exported
        file."""
        if self.model.spec.agents is None or not isinstance(obs, dict) or "state" in obs:
            return obs
        parts = {p.path[0]: p for p in self.layout.parts}
        state, given = parts.get("state"), next((p for p in self.layout.parts if p.path[0] in obs), None)
        if state is None or given is None:
            return obs
        value = obs[given.path[0]]
        batch = (len(value),) if np.ndim(value) > len(given.shape) else ()
        return {**obs, "state": np.zeros((*batch, *state.shape), dtype=self.observation_space["state"].dtype)}

    def _box_obs(self, obs) -> tuple[np.ndarray, bool]:
        """A Box observation, or a batch of them, as an array of the space's dtype, and whether it is one. One
        whose shape differs only by axes of size 1 is taken as one observation, as the Gymnasium backend takes
        it from an env (a bare float for a space of shape (1,), a column for a vector); any other shape is
        refused (a transposed image would be scrambled by a reshape)."""
        shape = self.observation_space.shape
        assert shape is not None  # a Box's: the layout is not packed
        array = np.asarray(obs, dtype=self.observation_space.dtype)
        if array.shape == shape or (array.ndim == len(shape) + 1 and array.shape[1:] == shape):
            return array, array.ndim == len(shape)
        if [d for d in array.shape if d != 1] == [d for d in shape if d != 1]:
            return array.reshape(shape), True
        raise UserError(
            f"predict takes one observation of shape {shape} or a batch of shape (B, {', '.join(map(str, shape))}); "
            f"got one of shape {array.shape}"
        )

    def _predict_recurrent(self, obs: torch.Tensor, state, episode_start, deterministic: bool, generator):
        n = obs.shape[0]
        memory: tuple[torch.Tensor, ...]
        if state is None:
            memory, starts = self.model.initial_memory(n, self.device), torch.ones(n, device=self.device)
        else:
            memory = tuple(
                torch.as_tensor(np.asarray(s), dtype=torch.float32, device=self.device) for s in state
            )
            starts = torch.as_tensor(
                np.zeros(n) if episode_start is None else np.asarray(episode_start).reshape(n),
                dtype=torch.float32,
                device=self.device,
            )
        actions, memory = self.model.predict_recurrent(obs, starts, memory, deterministic, generator)
        return actions, tuple(m.cpu().numpy() for m in memory)

    def save(self, directory: str, **extra) -> None:
        """Write ``model.safetensors`` and ``agent.json`` into ``directory`` (made if it does not exist)."""
        make_dirs(directory)
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
        cls,
        run_dir: str,
        device: str | torch.device = "cpu",
        *,
        encoder=None,
        actor_critic=None,
        trust_code: bool = False,
    ) -> Agent:
        """Rebuild the agent saved in ``run_dir``; a ``UserError`` says what is wrong with a bad directory.

        agent.json may name code: an encoder class or an actor-critic class (``module:Class``) and the env's
        factory or module. None of it is imported unless you name it again or pass ``trust_code``
        (docs/SECURITY.md): ``encoder`` and ``actor_critic``, the classes (or their ``module:Class``) to build
        the network with; the env is named to ``evaluate``."""
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
        source, path = f"{run_dir}/{AGENT_JSON}", os.path.join(run_dir, WEIGHTS)
        try:
            spec = NetworkSpec.from_json(meta["network"])
            observation_space = space_from_json(meta["observation_space"])
            action_space = space_from_json(meta["action_space"])
            env_source = meta.get("env_source", {})
            if not isinstance(meta["env_id"], str) or not isinstance(env_source, dict):
                raise TypeError("env_id must be a string and env_source an object")
            for setting, value in (("encoder", encoder), ("actor_critic", actor_critic)):
                if value is not None:  # named again: the weights must still fit it (check_shapes says)
                    given = class_path(value, setting) if isinstance(value, type) else value
                    trust.remember(setting, given)
                    network = dataclasses.replace(spec.network, **{setting: given})  # type: ignore[arg-type]
                    spec = dataclasses.replace(spec, network=network)
            names: dict[str, str | None] = {s: getattr(spec.network, s) for s in ("encoder", "actor_critic")}
            if trust_code:  # the env's names too, so that evaluate(agent) may make them later in this process
                names |= {"env_id": meta["env_id"], "env_factory": env_source.get("env_factory")}
            # before the network is built, even on the meta device: building it imports its encoder
            trust.check(source, names, trusted=trust_code)
            check_spec(spec, observation_space, action_space, source)
            # the network on the meta device: what the weights must be, with nothing allocated yet
            expected = network_shapes(spec, action_space)
        except UserError:
            raise
        except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RuntimeError) as e:
            raise UserError(
                f"{source} is missing or has a bad field ({e}); the checkpoint is corrupt"
            ) from None
        if expected is not None:  # from the header, before a tensor is read
            check_shapes(tensor_shapes(path), expected, path, source)
        tensors = read_tensors(path)
        check_finite(tensors, path)
        model = make_policy(
            spec,
            make_head(action_space, spec.network.action_dist),
            EnvSpaces(observation_space, action_space),
        )
        if expected is None:  # the network itself, then: load_state_dict would convert another dtype
            check_shapes(shapes_of(tensors), shapes_of(model.state_dict()), path, source)
        load_module_state(model, tensors, path)
        agent = cls(model.to(device).eval(), meta["env_id"], observation_space, action_space)
        agent.env_source, agent.source = env_source, source
        return agent


def check_spec(spec: NetworkSpec, observation_space: gym.Space, action_space: gym.Space, source: str) -> None:
    """A one-line ``UserError`` unless ``spec`` (read from ``source``) is of the types a saved one has, holds
    settings that ``proxima train`` accepts, takes the observations of ``observation_space`` as its input and
    gives the logits of ``action_space``: the file's parts must be of one agent."""
    from proxima.run.config import check_fields

    ints = lambda v: isinstance(v, tuple) and all(isinstance(n, int) and n > 0 for n in v)  # noqa: E731
    kinds = {
        "logits_dim": lambda v: isinstance(v, int) and v > 0,
        "obs_shape": ints,
        "has_critic": lambda v: isinstance(v, bool),
        "obs_layout": lambda v: isinstance(v, dict | None),
        "agents": lambda v: isinstance(v, dict | None),
    }
    for name, fits in kinds.items():
        if not fits(getattr(spec, name)):
            raise UserError(
                f"{source}'s network has {name}={getattr(spec, name)!r}; the checkpoint is corrupt"
            )
    check_fields(spec.network)
    spec.network.validate()
    layout = spec.layout()
    if layout.packed:
        takes = ObsLayout(observation_space, layout.mask, layout.mask_size)
        same = [(p.path, p.kind, p.size) for p in takes.parts] == [
            (p.path, p.kind, p.size) for p in layout.parts
        ] and tuple(takes.shape) == spec.obs_shape
    else:
        same = (
            isinstance(observation_space, gym.spaces.Box)
            and isinstance(layout.space, gym.spaces.Box)
            and tuple(observation_space.shape) == spec.obs_shape
        )
    if not same or tuple(layout.shape) != spec.obs_shape:
        raise UserError(
            f"{source}'s observation_space, {observation_space}, is not what its network takes (observations "
            f"{'packed ' if layout.packed else ''}of shape {spec.obs_shape}); the checkpoint is corrupt"
        )
    logits = make_head(action_space, spec.network.action_dist).logits_dim
    if logits != spec.logits_dim:
        raise UserError(
            f"{source}'s action_space, {action_space}, needs {logits} logits; its network gives "
            f"{spec.logits_dim}: the checkpoint is corrupt"
        )


def _no_agent_yet(run_dir: str) -> None:
    """A run directory without its agent: a batched run's parent, or a run that has not finished (as
    ``proxima.run.checkpoint.finished`` says: the message gives the command that finishes it)."""
    from proxima.run.checkpoint import finished, read_header

    there = set(os.listdir(run_dir))
    if SEEDS_JSON in there:
        seeds = seed_run_dirs(run_dir)
        raise UserError(
            f"{run_dir} holds a batched run (--num-seeds), whose agents are its seeds': give one of "
            f"{', '.join(seeds[:3])}{', ...' if len(seeds) > 3 else ''}"
        )
    if CONFIG_JSON not in there:
        return
    # a batched run's seed: its checkpoint is its parent's, the group's
    seed = os.path.exists(os.path.join(os.path.dirname(os.path.abspath(run_dir)), SEEDS_JSON))
    owner = (os.path.dirname(os.path.normpath(run_dir)) or ".") if seed else run_dir
    which = (
        f"the batched run in {owner} has not finished, so {run_dir}"
        if seed
        else f"the run in {run_dir} has not finished, so it"
    )
    if not os.path.exists(os.path.join(owner, CHECKPOINT)):
        raise UserError(
            f"{which} has no agent yet; it stopped before its first checkpoint, so train it again"
        )
    if not finished(owner):
        raise UserError(
            f"{which} has no agent yet; continue it to its end first: proxima train --resume {owner}"
        )
    if seed:  # a batched run goes no further than the steps it started for
        raise UserError(
            f"the batched run in {owner} finished, but {run_dir} lacks its agent ({AGENT_JSON}): its files were "
            "changed since; train it again"
        )
    steps = read_header(os.path.join(run_dir, CHECKPOINT))["global_step"]
    raise UserError(
        f"the run in {run_dir} finished, but its agent ({AGENT_JSON}) is missing: its files were changed since; "
        f"save it again from the final checkpoint with: proxima train --resume {run_dir} --total-timesteps {steps}"
    )


def load(
    run_dir: str,
    device: str | torch.device = "cpu",
    *,
    encoder=None,
    actor_critic=None,
    trust_code: bool = False,
) -> Agent:
    """Load the agent that ``proxima train`` saved in ``run_dir``; ``encoder``, ``actor_critic`` and
    ``trust_code`` as ``Agent.load``'s (docs/SECURITY.md)."""
    return Agent.load(run_dir, device, encoder=encoder, actor_critic=actor_critic, trust_code=trust_code)
