"""VMAS (Bettini et al., "VMAS: A Vectorized Multi-Agent Simulator for Collective Robot Learning", 2022) as a
multi-agent ``VecEnv``: ids ``vmas:SCENARIO`` (``vmas:navigation``, ``vmas:balance``, ``vmas:sampling``, ...).

VMAS simulates all its envs as one batch of torch tensors, so this backend never leaves torch: the agents'
observations are padded, stacked and concatenated into the packed rows of the multi-agent design
(docs/MULTIAGENT.md, ``proxima.envs.interface.AgentSpec``), with no numpy round trip on the step path. E games
of A agents are E * A rows, env-major; "state" is every agent's observation side by side, since VMAS has no
global state of its own. VMAS agents never leave before their game ends, so ``Step.alive`` is None.

A scenario's own ``done`` is a termination; ``max_steps``, VMAS's time limit, is a truncation (VMAS reports the
two apart with ``terminated_truncated=True``). Games that end are reset in the same step: all of them at once
with VMAS's vectorized reset where every game ended together (a time limit), else one ``reset_at`` each.

VMAS draws its random numbers from generators it swaps in around every call (``Environment.vmas_random_state``,
one for the whole class). Each ``VmasVecEnv`` keeps its own copy and swaps it in around its calls, so two VMAS
envs in one process (training and evaluation) do not share a stream, and VMAS's ``torch.manual_seed`` at a
seeded reset cannot reseed the trainer's CUDA generator. Those states and every tensor and number of the
simulated world make ``state_dict``, from which a checkpoint continues the very same episodes.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.base.errors import EnvError, UserError, raised
from proxima.base.spaces import row_actions
from proxima.envs.interface import AgentSpec, NoEnvObjects, Seeds, Step, VideoDirs, agent_rows, one_seed
from proxima.envs.recorder import GameRecorder, game_zero_dir
from proxima.envs.registry import GAMES_ON_WORKERS, register_backend

PREFIX = "vmas:"

# BenchMARL's task configs (benchmarl/conf/task/vmas/<task>.yaml), so that runs compare with its published
# results; they differ from the scenarios' own defaults in n_agents and shared_rew. --env-kwargs override them.
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "navigation": {
        "max_steps": 100,
        "n_agents": 3,
        "collisions": True,
        "agents_with_same_goal": 1,
        "split_goals": False,
        "observe_all_goals": False,
        "shared_rew": False,
        "lidar_range": 0.35,
        "agent_radius": 0.1,
    },
    "balance": {"max_steps": 100, "n_agents": 4, "random_package_pos_on_line": True, "package_mass": 5},
    "sampling": {
        "max_steps": 100,
        "n_agents": 3,
        "shared_rew": False,
        "n_gaussians": 3,
        "lidar_range": 0.2,
        "cov": 0.05,
        "collisions": True,
        "spawn_same_pos": False,
    },
}
# Most VMAS scenarios never end by themselves: without a time limit an episode would never end, so every
# scenario gets BenchMARL's most common horizon unless --env-kwargs says otherwise ("max_steps": null: none).
DEFAULT_MAX_STEPS = 100
# Settings of the backend itself; every other --env-kwargs key goes to the scenario.
OWN_KWARGS = ("max_steps", "continuous_actions")

# What VMAS sets once it draws (the Environment's renderer, each entity's `_render` flags): not the world's state,
# and not in a checkpoint, so that a run's saved state is the same whether it records video or not.
RENDERING = ("viewer", "headless", "visible_display", "text_lines", "_render")
# How state_dict keeps each leaf of the world (see there).
LEAF_KINDS = ("tensor.", "number.", "none.", "alias.", "object.")
NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}

NO_ENV_OBJECTS = (
    "VMAS simulates its envs as one batch of tensors with no per-env objects, so call and set_attr cannot reach "
    "one; give the scenario's settings with --env-kwargs"
)


def _vmas():
    try:
        import vmas
    except ImportError:
        raise UserError(
            "vmas: ids need the vmas package; install proxima's multiagent extra (pip install 'proxima[multiagent]')"
        ) from None
    return vmas


class VmasVecEnv(NoEnvObjects):
    """``num_envs`` games of one VMAS scenario, ``num_envs * n_agents`` rows (``AgentSpec``)."""

    no_env_objects = NO_ENV_OBJECTS

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        seed: int | None = None,
        device: torch.device | str = "cpu",
        env_kwargs: dict | None = None,
        video_dir: VideoDirs = None,
        video_episodes: int | None = None,
        **unused,
    ):
        scenario = env_id.removeprefix(PREFIX)
        vmas = _vmas()
        names = sorted({*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios})
        if scenario not in names:
            raise UserError(
                f"unknown VMAS scenario {scenario!r} in {env_id!r}; accepted: vmas:{', vmas:'.join(names)}"
            )
        kwargs = {**TASK_DEFAULTS.get(scenario, {}), **(env_kwargs or {})}
        max_steps = kwargs.pop("max_steps", DEFAULT_MAX_STEPS)
        continuous = kwargs.pop("continuous_actions", True)
        if max_steps is not None and not (type(max_steps) is int and max_steps >= 1):
            raise UserError(
                f"{env_id}'s max_steps must be a positive integer or null (no limit), got {max_steps!r}"
            )
        if not isinstance(continuous, bool):
            raise UserError(f"{env_id}'s continuous_actions must be true or false, got {continuous!r}")
        seed = one_seed(seed, "vmas")
        self.env_id, self.device, self._seed = env_id, torch.device(device), seed
        self._rng = _seeded_states(0 if seed is None else seed, self.device)
        video_dir = game_zero_dir(video_dir, num_envs, "vmas")
        self._make(scenario, num_envs, max_steps, continuous, kwargs)
        self._describe(num_envs)
        self._video = None
        if video_dir is not None:
            self._video = GameRecorder(video_dir, video_episodes, self._draw, 1 / self.env.world.dt, env_id)

    def _make(self, scenario: str, num_envs: int, max_steps, continuous: bool, kwargs: dict) -> None:
        vmas = _vmas()
        with self._own_rng(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.env = vmas.make_env(
                    scenario,
                    num_envs=num_envs,
                    device=self.device,
                    continuous_actions=continuous,
                    seed=0 if self._seed is None else self._seed,
                    max_steps=max_steps,
                    terminated_truncated=True,
                    **kwargs,
                )
            except Exception as e:
                raise UserError(
                    f"VMAS could not make {self.env_id} with settings {kwargs}: {raised(e)}"
                ) from None
        ignored = [str(w.message) for w in caught if "passed but not used" in str(w.message)]
        if ignored:  # VMAS only warns of a setting that the scenario does not take
            raise UserError(
                f"{self.env_id} takes no such setting: {ignored[0].split(' This will')[0]} (the backend's own: "
                f"{', '.join(OWN_KWARGS)})"
            )

    def _describe(self, num_envs: int) -> None:
        """The rows' spaces, and what the step path needs to build rows and split actions."""
        env = self.env
        obs_spaces, action_spaces = env.observation_space.spaces, env.action_space.spaces
        for name, space in zip((agent.name for agent in env.agents), obs_spaces, strict=True):
            if type(space).__name__ != "Box" or len(space.shape) != 1:
                raise UserError(
                    f"{self.env_id}'s agent {name} observes {space}; the vmas backend takes flat Boxes"
                )
        self.obs_sizes = [int(space.shape[0]) for space in obs_spaces]
        agents, size = len(self.obs_sizes), max(self.obs_sizes)
        self.num_games, self.num_agents, self.obs_size = num_envs, agents, size
        self.num_envs = num_envs * agents
        self.continuous = env.continuous_actions
        spaces: list[gym.Space] = [  # VMAS's are gym's, not Gymnasium's
            gym.spaces.Box(s.low, s.high, dtype=np.float32)
            if self.continuous
            else gym.spaces.Discrete(int(s.n))
            for s in action_spaces
        ]
        # the space covers every agent's range; each agent's actions are clipped to its own in step()
        self.single_action_space, action_dims = row_actions(spaces, self.env_id)
        keys = [(n, _action_key(space)) for n, space in zip(self.obs_sizes, action_spaces, strict=True)]
        names = tuple(agent.name for agent in env.agents)
        self.agents = AgentSpec.grouped(names, keys, num_envs, action_dims=action_dims)
        self._mask = mask_size = None
        if self.continuous:
            self.action_dims = [int(space.shape[0]) for space in action_spaces]
            # each agent's own range (inf, -inf where it has no such dim: those components are dropped)
            low = torch.full((agents, max(self.action_dims)), torch.inf, dtype=torch.float32)
            high = -low
            for a, space in enumerate(action_spaces):
                low[a, : self.action_dims[a]] = torch.as_tensor(space.low)
                high[a, : self.action_dims[a]] = torch.as_tensor(space.high)
            self._low, self._high = low.to(self.device), high.to(self.device)
        else:
            counts = [int(space.n) for space in action_spaces]
            if len(set(counts)) > 1:  # the extra actions of agents with fewer are masked off
                mask = torch.arange(max(counts)).unsqueeze(0) < torch.tensor(counts).unsqueeze(1)
                self._mask = mask.to(self.device, torch.float32).unsqueeze(0)  # (1, A, n)
                mask_size = max(counts)
        own, state = (gym.spaces.Box(-np.inf, np.inf, (n,), np.float32) for n in (size, agents * size))
        self.obs_layout = agent_rows(own, agents, state, mask_size)
        self.single_observation_space = self.obs_layout.space
        self._agent_ids = torch.arange(agents, dtype=torch.float32, device=self.device).view(1, agents, 1)

    # --- the step path: tensors only ------------------------------------------------------------------------
    def _rows(self, observations: list[Tensor]) -> Tensor:
        """The packed rows ``(E * A, P)`` of the agents' observations (one ``(E, O_a)`` tensor per agent), in
        ``obs_layout``'s order: own observation (zero-padded), agent index, state, and the mask where there is
        one."""
        games, agents = self.num_games, self.num_agents
        padded = [
            obs
            if obs.shape[1] == self.obs_size
            else torch.nn.functional.pad(obs, (0, self.obs_size - obs.shape[1]))
            for obs in observations
        ]
        own = torch.stack(padded, dim=1).to(torch.float32)  # (E, A, O)
        state = own.reshape(games, 1, agents * self.obs_size).expand(-1, agents, -1)
        parts = [own, self._agent_ids.expand(games, -1, -1), state]
        if self._mask is not None:
            parts.append(self._mask.expand(games, -1, -1))
        return torch.cat(parts, dim=2).reshape(self.num_envs, -1)

    def _agent_actions(self, actions: Tensor) -> list[Tensor]:
        """Each agent's ``(E, d)`` actions, as VMAS takes them, from the rows' actions."""
        actions = actions.to(self.device)
        if not self.continuous:
            return list(actions.view(self.num_games, self.num_agents, 1).unbind(1))
        per_game = actions.view(self.num_games, self.num_agents, -1).to(torch.float32)
        per_game = torch.clamp(per_game, self._low, self._high)  # each agent's own range: VMAS refuses others
        return [per_game[:, a, :dim] for a, dim in enumerate(self.action_dims)]

    def _per_row(self, flags: Tensor) -> Tensor:
        return flags.unsqueeze(1).expand(-1, self.num_agents).reshape(-1)

    def reset(self, seed: Seeds = None) -> Tensor:  # the batch is seeded as one
        seed, self._seed = one_seed(self._seed if seed is None else seed, "vmas"), None
        with self._own_rng():
            observations = self.env.reset(seed=seed)
            if self._video is not None:
                self._video.start()
        return self._rows(observations)

    def step(self, actions: Tensor) -> Step:
        with self._own_rng():
            observations, rewards, terminated, truncated, _ = self.env.step(self._agent_actions(actions))
            final_obs = self._rows(observations)
            obs = final_obs
            done = terminated | truncated
            restart = False  # game 0's recording: its episode ended, and the next one starts after the reset
            if self._video is not None:
                self._video.frame()
                restart = bool(done[0])
                if restart:
                    self._video.save()
            if done.any():
                obs = torch.where(
                    self._per_row(done).unsqueeze(1), self._rows(self._reset_ended(done)), final_obs
                )
            if restart and self._video is not None:
                self._video.start()
        reward = torch.stack(rewards, dim=1).reshape(-1).to(torch.float32)
        return Step(obs, reward, self._per_row(terminated), self._per_row(truncated), final_obs)

    def _draw(self):
        """Game 0 as VMAS draws it (pyglet, headless through EGL, for rgb_array)."""
        _colormaps_for_vmas()
        return self.env.render(mode="rgb_array", env_index=0)

    def close(self) -> None:
        if self._video is not None:  # the episode under way, as far as it went
            self._video.save()

    def _reset_ended(self, done: Tensor) -> list[Tensor]:  # every game's observations after it
        if done.all():
            return self.env.reset()
        for index in done.nonzero().flatten().tolist():
            self.env.reset_at(index, return_observations=False)
        return self.env.get_from_scenario(
            get_observations=True, get_rewards=False, get_infos=False, get_dones=False
        )[0]

    # --- VMAS's random generators, this env's own --------------------------------------------------------
    @contextlib.contextmanager
    def _own_rng(self):
        """Run VMAS with this env's generator states, and leave everyone else's as they were."""
        shared = _vmas().simulator.environment.environment.Environment.vmas_random_state
        outer = list(shared)
        on_cuda = self.device.type == "cuda"
        # VMAS's scenarios draw on the device's own generator, and its seeding reseeds every CUDA device
        cuda = on_cuda or torch.cuda.is_initialized()
        outer_cuda = torch.cuda.get_rng_state_all() if cuda else None
        shared[:] = self._rng[:3]
        if on_cuda:
            torch.cuda.set_rng_state(self._rng[3], self.device)
        try:
            yield
        finally:
            self._rng = [*shared, torch.cuda.get_rng_state(self.device) if on_cuda else None]
            shared[:] = outer
            if cuda:
                torch.cuda.set_rng_state_all(outer_cuda)

    # --- exact resume ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Tensor]:
        """Every tensor and number of the simulated world (entities, scenario, step counters), which object each
        reference points to, and VMAS's generator states, so that a restored env continues the very same
        episodes. Keyed by where each leaf lives (``_world_tree``): ``tensor.PATH``; ``number.PATH``: a Python
        number; ``none.PATH``: None; ``alias.PATH``: a tensor also found at an earlier path, and
        ``object.PATH``: a reference to the object at home elsewhere, both as that path in UTF-8 bytes."""
        leaves, homes = _world_tree(self.env)
        home_of = {id(node): path for path, node in homes.items()}
        state: dict[str, Tensor] = {}
        first: dict[int, str] = {}  # id of a tensor -> the first path it was found at
        for path, (_, _, value) in leaves.items():
            if value is None:
                state[f"none.{path}"] = torch.zeros(0)
            elif type(value) in NUMBER_DTYPES:
                state[f"number.{path}"] = torch.tensor(value, dtype=NUMBER_DTYPES[type(value)])
            elif not isinstance(value, Tensor):
                state[f"object.{path}"] = _text(home_of[id(value)])
            elif id(value) in first:
                state[f"alias.{path}"] = _text(first[id(value)])
            else:  # a copy of its own: checkpoints refuse shared memory
                first[id(value)] = path
                state[f"tensor.{path}"] = value.detach().clone().contiguous()
        state.update(_rng_tensors(self._rng))
        return state

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self._seed = None  # the restored generators replace the construction seed's
        leaves, homes = _world_tree(self.env)
        saved = {key.split(".", 1)[1] for key in state if key.startswith(LEAF_KINDS)}
        # an attribute that a scenario adds mid-episode (football's rewards)
        for path in saved - leaves.keys():
            parent, _, name = path.rpartition(".")
            if parent in homes and _descend(homes[parent]) and name.isidentifier():
                leaves[path] = (homes[parent], name, None)
        if saved != leaves.keys():
            raise UserError(
                f"the saved VMAS state does not fit this {self.env_id} env (it differs at "
                f"{sorted(saved ^ leaves.keys())[0]}); resume with the settings the run was started with"
            )
        restored = {}
        for path, (_, _, value) in leaves.items():
            tensor = state.get(f"tensor.{path}")
            if tensor is None:
                continue
            if isinstance(value, Tensor) and tensor.shape != value.shape:
                raise UserError(
                    f"the saved VMAS state does not fit this {self.env_id} env: {path} has shape "
                    f"{tuple(tensor.shape)}, here {tuple(value.shape)}; resume with the run's num_envs and settings"
                )
            restored[path] = tensor.to(self.device).clone()
        for path, (parent, slot, _) in leaves.items():
            if f"none.{path}" in state:
                value = None
            elif f"number.{path}" in state:
                number = state[f"number.{path}"]
                value = {torch.bool: bool, torch.int64: int}.get(number.dtype, float)(number.item())
            elif f"object.{path}" in state:
                home = _untext(state[f"object.{path}"])
                if home not in homes:
                    raise UserError(f"the saved VMAS state does not fit this {self.env_id} env (no {home})")
                value = homes[home]
            elif f"alias.{path}" in state:
                value = restored[_untext(state[f"alias.{path}"])]
            else:
                value = restored[path]
            _assign(parent, slot, value)
        self._rng = _rng_from_tensors(state, self.device)
        if self._video is not None:  # the episode under way is the restored one
            self._video.redraw()


def _colormaps_for_vmas() -> None:
    """VMAS 1.5 colours some scenarios' drawings (sampling's density) through ``matplotlib.cm.get_cmap``, which
    matplotlib 3.9 removed; where it is gone, put back what it returned: the colormap, resampled to ``lut``
    entries where given."""
    try:
        import matplotlib
        import matplotlib.cm
    except ImportError:
        return  # VMAS then needs none, or says so itself
    if not hasattr(matplotlib.cm, "get_cmap"):

        def get_cmap(name=None, lut=None):
            cmap = matplotlib.colormaps[name or matplotlib.rcParams["image.cmap"]]
            return cmap if lut is None else cmap.resampled(lut)

        matplotlib.cm.get_cmap = get_cmap  # type: ignore[attr-defined]  # restored: newer matplotlib removed it


def _action_key(space) -> tuple:
    if type(space).__name__ == "Box":
        return ("box", space.shape, space.low.tobytes(), space.high.tobytes())
    return ("discrete", int(space.n))


def _seeded_states(seed: int, device: torch.device) -> list:
    """VMAS's generator states (torch's CPU one, numpy's, Python's, and the CUDA device's where it runs there),
    seeded with ``seed``: the scenario's world is built with them, before VMAS seeds its first reset."""
    cuda = torch.Generator(device).manual_seed(seed).get_state() if device.type == "cuda" else None
    return [
        torch.Generator().manual_seed(seed).get_state(),
        np.random.RandomState(seed).get_state(),
        random.Random(seed).getstate(),
        cuda,
    ]


# --- the world's state as a tree of leaves -----------------------------------------------------------------
def _descend(value) -> bool:
    """Whether the walk enters ``value``'s attributes: VMAS's own objects (its scenarios are loaded from files as
    modules named ""), and the torch distributions that scenarios keep (sampling's Gaussians)."""
    module = type(value).__module__ or ""
    return hasattr(value, "__dict__") and (
        module == "" or module.startswith("vmas.") or isinstance(value, torch.distributions.Distribution)
    )


def _world_tree(env) -> tuple[dict[str, tuple], dict[str, object]]:
    """``(leaves, homes)`` of VMAS's objects: ``leaves``, path -> ``(parent, slot, value)`` of every tensor, Python
    number, None (a tensor may be set there later: an action before the first step), and every reference to an
    object entered at another path (navigation's goal landmarks); ``homes``, path -> object, where each object
    was entered. Breadth-first from the world, so that an entity's home is its place in the world's lists (not
    wherever a scenario points to it from), in attribute-name order (not by age: attributes may be added
    mid-episode). A tensor is listed at every path."""
    leaves: dict[str, tuple] = {}
    homes: dict[str, object] = {}
    home_of: dict[int, str] = {}
    queue = deque([(env.scenario.world, "world", None, None), (env, "env", None, None)])
    while queue:
        value, path, parent, slot = queue.popleft()
        keep = parent is not None and not isinstance(parent, tuple)
        if isinstance(value, Tensor) or value is None or type(value) in NUMBER_DTYPES:
            if keep:
                leaves[path] = (parent, slot, value)
            continue
        children = _children(value, path, home_of)
        if children is None:
            continue  # functions, enums, devices, spaces: set when the env is made
        if id(value) in home_of:
            if keep:
                leaves[path] = (parent, slot, value)
            continue
        home_of[id(value)] = path
        homes[path] = value
        queue.extend((item, child, value, key) for child, key, item in children)
    return leaves, homes


def _children(value, path: str, home_of: dict[int, str]) -> list[tuple] | None:
    """``(path, slot, item)`` of what ``value`` holds, or None where the walk does not enter it. A dict's items
    are named by their key: a name, a number, or an object entered before (football's AI keeps its plans by
    agent); items under other keys have no lasting name and are left out."""
    if type(value) in (list, tuple):
        return [(f"{path}[{i}]", i, item) for i, item in enumerate(value)]
    if type(value) is dict:
        keys = [key for key in value if type(key) in (str, int) or id(key) in home_of]
        return [
            (f"{path}[{key if type(key) in (str, int) else '@' + home_of[id(key)]}]", key, value[key])
            for key in keys
        ]
    if _descend(value):
        return [
            (f"{path}.{name}", name, item)
            for name, item in sorted(vars(value).items())
            if name not in RENDERING
        ]
    return None


def _text(text: str) -> Tensor:
    return torch.tensor(list(text.encode()), dtype=torch.uint8)


def _untext(tensor: Tensor) -> str:
    return bytes(tensor.tolist()).decode()


def _assign(parent, slot, value) -> None:
    if isinstance(parent, list | dict):
        parent[slot] = value
    elif isinstance(parent, tuple):
        raise EnvError("a VMAS scenario keeps its state in a tuple, which cannot be restored")
    else:
        setattr(parent, slot, value)


def _rng_tensors(states: list) -> dict[str, Tensor]:
    torch_state, (_, keys, pos, has_gauss, gauss), (version, internal, gauss_next), cuda = states
    out = {
        "rng.torch": torch_state.clone(),
        "rng.numpy.keys": torch.from_numpy(keys.astype(np.int64)),
        "rng.numpy.pos": torch.tensor([pos, has_gauss], dtype=torch.int64),
        "rng.numpy.gauss": torch.tensor(gauss, dtype=torch.float64),
        "rng.python": torch.tensor([version, *internal], dtype=torch.int64),
        "rng.python.gauss": torch.tensor(np.nan if gauss_next is None else gauss_next, dtype=torch.float64),
    }
    if cuda is not None:
        out["rng.cuda"] = cuda.cpu().clone()
    return out


def _rng_from_tensors(state: dict[str, Tensor], device: torch.device) -> list:
    pos, has_gauss = state["rng.numpy.pos"].tolist()
    keys = state["rng.numpy.keys"].numpy().astype(np.uint32)
    numpy_state = ("MT19937", keys, pos, has_gauss, float(state["rng.numpy.gauss"]))
    version, *internal = state["rng.python"].tolist()
    gauss_next = float(state["rng.python.gauss"])
    python_state = (version, tuple(internal), None if np.isnan(gauss_next) else gauss_next)
    cuda = state.get("rng.cuda")
    cuda = cuda.cpu() if cuda is not None and device.type == "cuda" else None
    return [state["rng.torch"].cpu().clone(), numpy_state, python_state, cuda]


# In-process tensor ops with its own settings; video of game 0; no worker processes (VMAS batches itself).
register_backend(
    "vmas",
    VmasVecEnv,
    handles=lambda env_id: env_id.startswith(PREFIX),
    features=("video", "env_kwargs"),
    exclusive=True,
    instead={"asynchronous": GAMES_ON_WORKERS},
)
