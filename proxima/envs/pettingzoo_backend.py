"""The PettingZoo backend: ``pettingzoo:MODULE`` ids and users' ParallelEnvs, as a multi-agent ``VecEnv``.

``pettingzoo:mpe2.simple_spread_v3`` imports the module and calls its ``parallel_env(**env_kwargs)``. A module
with only an AEC ``env`` enters through PettingZoo's own ``aec_to_parallel`` where that is exact (the env
updates once per cycle: ``metadata["is_parallelizable"]``), else as a turn-based game (``Turns``): only the row
of the agent to move is alive at each step, and the others wait with the rewards its move gives them.

E copies of the game become E * A rows, one per agent, env-major, each a packed Dict of "obs", "agent",
"state" and, where masks are needed, "action_mask" (``proxima.envs.interface.AgentSpec``). Agents of different
kinds share one action space: ``Discrete(max n)`` with the actions a kind lacks masked off, or ``Box(max dim)``
of which each agent takes its first dims. An agent that leaves (absent from ``env.agents`` before the game ends) has a row that is not
alive, with reward 0 and no termination, until its game resets; a game resets within the step that ends it
(all its agents gone), as the Gymnasium backend's envs do. PettingZoo is an optional extra: it is imported
only when an env of it is made.
"""

from __future__ import annotations

import sys
import warnings
from typing import cast

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.base.errors import EnvError, UserError
from proxima.base.spaces import MASK_KEY, ObsLayout, action_count, mask_count, row_actions
from proxima.envs.gymnasium_backend import _close_quietly, _shape_of, construct
from proxima.envs.gymnasium_backend import _reward as one_reward
from proxima.envs.interface import (
    AgentSpec,
    InfoKeys,
    Seeds,
    Step,
    Unrestorable,
    VideoDirs,
    agent_rows,
    env_actions,
    env_call,
    kept_info,
    one_seed,
    per_env_values,
)
from proxima.envs.recorder import GameRecorder, game_zero_dir, quiet_display
from proxima.envs.registry import GAMES_ON_WORKERS, module_factory, register_backend

PREFIX = "pettingzoo:"
ID_FORM = (
    "pettingzoo:MODULE, a module with parallel_env() or an AEC env(), e.g. pettingzoo:mpe2.simple_spread_v3"
)


def is_pettingzoo_env(obj) -> bool:
    """Whether ``obj`` is a PettingZoo env (Parallel or AEC), or a class of one. Only a program that imported
    PettingZoo can hold one, so this imports nothing."""
    module = sys.modules.get("pettingzoo.utils.env")
    if module is None:
        return False
    kinds = (module.ParallelEnv, module.AECEnv)
    return isinstance(obj, kinds) or (isinstance(obj, type) and issubclass(obj, kinds))


def as_parallel(env, label: str):
    """``env`` as a ParallelEnv: itself, or an AEC env converted where that is exact."""
    try:
        from pettingzoo.utils.conversions import aec_to_parallel
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError:
        raise UserError(
            "the pettingzoo backend needs PettingZoo: pip install 'proxima[multiagent]'"
        ) from None

    if isinstance(env, ParallelEnv):
        return env
    if isinstance(env, AECEnv):
        return aec_to_parallel(env) if env.metadata.get("is_parallelizable", False) else Turns(env)
    raise UserError(
        f"{label} made {type(env).__name__}, not a PettingZoo env; give a ParallelEnv or an AEC env"
    )


class Turns:
    """A turn-based AEC env (one agent moves at a time) behind the Parallel API that ``PettingZooVecEnv`` steps:
    ``step`` plays the move of the agent to move (``mover``) and ignores the others'; observations, rewards (the
    env's ``rewards``: what the last move gave each agent), terminations and truncations are every agent's, and
    ``agents`` is empty once every agent is done (the game is over: the VecEnv resets it)."""

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):  # spaces, render, close, state, metadata and the user's own attributes
        if name == "env":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def __setattr__(self, name, value):  # the VecEnv's set_attr reaches the env, as its call does
        if name == "env":
            object.__setattr__(self, name, value)
        else:
            setattr(_owner(self.env, name), name, value)

    @property
    def mover(self) -> str:
        return self.env.agent_selection

    @property
    def agents(self) -> list[str]:
        env = self.env
        over = all(env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents)
        return [] if over else list(env.agents)

    def _all(self) -> tuple[dict, dict]:
        env = self.env
        return {a: env.observe(a) for a in env.agents}, {a: dict(env.infos.get(a, {})) for a in env.agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        env_call(self.env.reset, seed=seed, options=options)
        return self._all()

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        env = self.env
        env_call(env.step, actions[self.mover])
        obs, infos = self._all()
        rewards = {a: float(env.rewards.get(a, 0.0)) for a in env.agents}
        terms = {a: bool(env.terminations.get(a, False)) for a in env.agents}
        truncs = {a: bool(env.truncations.get(a, False)) for a in env.agents}
        # an agent out of a game that goes on is removed the AEC way (a None move when its turn comes), so that
        # the agent to move is always one still playing
        removed = False
        while self.agents and (terms.get(self.mover) or truncs.get(self.mover)):
            env_call(env.step, None)
            removed = True
        if removed:
            # the turn moved on: those still playing are observed as the game now stands (the next mover's mask
            # is the env's for its turn); those removed keep the observation they left with
            now, now_infos = self._all()
            obs.update(now)
            infos.update(now_infos)
        return obs, rewards, terms, truncs, infos


def _owner(env, name: str):
    """The object of an AEC env's wrapper chain that holds ``name``: the outermost wrapper that has it as its own,
    else the env inside them all. A PettingZoo wrapper reads an attribute it lacks from the env it wraps, but an
    attribute set on it would stay there, unseen by the game."""
    from pettingzoo.utils.wrappers import BaseWrapper

    while isinstance(env, BaseWrapper) and name not in vars(env):
        env = env.env
    return env


class _Kind:
    """How one agent's observations, masks and actions become its row's, and back."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, mask: str | None):
        self.obs_space, self.action_space, self.mask = obs_space, action_space, mask
        # the observation without its mask: what "obs" holds
        own = obs_space
        if mask == "obs":
            rest = [(k, s) for k, s in cast(gym.spaces.Dict, obs_space).spaces.items() if k != MASK_KEY]
            own = rest[0][1] if len(rest) == 1 else gym.spaces.Dict(rest)
        self.own = own
        # what ObsLayout packs (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple) flattens to a Box
        self.flat = (
            own if isinstance(own, gym.spaces.Box) else cast(gym.spaces.Box, gym.spaces.flatten_space(own))
        )
        self.size = int(np.prod(self.flat.shape))
        self.count = action_count(action_space)
        # gym.spaces.flatten one-hots a discrete value without checking its range (an index below the start
        # wraps around): its parts are checked as packing checks them
        boxed = isinstance(own, gym.spaces.Box)
        self.discrete = [] if boxed else [p for p in ObsLayout(own).parts if p.kind == "discrete"]

    def values(self, obs, who: str) -> np.ndarray:
        """The agent's observation as a flat vector (its mask left out); ``who`` names it in an error."""
        if self.mask == "obs":
            obs = {k: v for k, v in obs.items() if k != MASK_KEY}
            obs = next(iter(obs.values())) if len(obs) == 1 else obs
        if isinstance(self.own, gym.spaces.Box):
            values = np.asarray(obs).reshape(-1)
            if values.size != self.size:  # it would be cut into the next part of the row, or padded
                raise UserError(
                    f"{who}'s observation has {values.size} values (shape {np.shape(obs)}), but its observation "
                    f"space {self.own} has {self.size}"
                )
            return values
        for part in self.discrete:
            leaf = obs
            for key in part.path:
                leaf = leaf[key]
            part.check_indices(np.asarray(leaf))
        return cast(np.ndarray, gym.spaces.flatten(self.own, obs))  # a Box's values, as self.flat


def _padded_box(kinds: list[_Kind]) -> gym.spaces.Box:
    """One flat Box that holds every kind's observation, each zero-padded to the largest."""
    size = max(k.size for k in kinds)
    low, high = np.zeros(size), np.zeros(size)
    for k in kinds:
        low[: k.size] = np.minimum(low[: k.size], k.flat.low.reshape(-1))
        high[: k.size] = np.maximum(high[: k.size], k.flat.high.reshape(-1))
    return gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)


class PettingZooVecEnv(Unrestorable):
    """E copies of a PettingZoo ParallelEnv as E * A agent rows (see the module's doc)."""

    def __init__(
        self,
        label: str,
        num_envs: int,
        make,
        *,
        env_kwargs: dict | None = None,
        seed: Seeds = None,
        device: torch.device | str = "cpu",
        video_dir: VideoDirs = None,
        video_episodes: int | None = None,
        first=None,
    ):
        """``make(**env_kwargs)`` returns one ParallelEnv (or a parallelizable AEC env); ``first``: one it already
        made, used as game 0 where no video asks for a rendering one."""
        self.label, self._seed = label, one_seed(seed, "pettingzoo")
        video_dir = game_zero_dir(video_dir, num_envs, "pettingzoo")
        if video_dir is not None:
            quiet_display()  # before the games: one may open its renderer when it is made
        kwargs = env_kwargs or {}
        if first is not None and video_dir is not None:  # game 0 is made again, to render
            first.close()
            first = None
        render = "rgb_array" if video_dir else None  # game 0's
        made = [first] if first is not None else [construct(make, label, render, kwargs)]
        made += [construct(make, label, None, kwargs) for _ in range(num_envs - 1)]
        self.games = [as_parallel(game, label) for game in made]
        game = self.games[0]
        self._video = None
        if video_dir is not None:
            fps = game.metadata.get("render_fps", 30)
            self._video = GameRecorder(video_dir, video_episodes, game.render, fps, type(game).__name__)
        names = tuple(getattr(game, "possible_agents", None) or ())
        if not names:
            raise UserError(
                f"{label} has no possible_agents; a PettingZoo env lists every agent it can have in "
                "self.possible_agents in __init__"
            )
        self._names = names
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs_spaces = [game.observation_space(a) for a in names]
            act_spaces = [game.action_space(a) for a in names]
        masks = self._find_masks(obs_spaces)
        self._kinds = [_Kind(*spaces) for spaces in zip(obs_spaces, act_spaces, masks, strict=True)]
        for name, o, kind in zip(names, obs_spaces, self._kinds, strict=True):
            if kind.mask:  # the env's own: it must fit the agent's actions
                size = int(np.prod(o[MASK_KEY].shape)) if kind.mask == "obs" else None
                mask_count(f"{label}'s {name}", kind.action_space, size)
        self._turns = isinstance(game, Turns)
        self.single_action_space, action_dims = row_actions(act_spaces, label)
        pairs = list(zip(obs_spaces, act_spaces, strict=True))
        self.agents = AgentSpec.grouped(names, pairs, num_envs, turns=self._turns, action_dims=action_dims)
        count = action_count(self.single_action_space)
        # masks: the env's own, and the actions a kind lacks where kinds share Discrete(max n)
        self._masked = any(masks) or any(k.count != count for k in self._kinds)
        # a kind's own actions: for its rows where the env gives no mask
        self._default_mask = [
            (np.arange(count or 0) < (k.count or 0)).astype(np.float32) for k in self._kinds
        ]
        own = self._kinds[0].own  # kept as it is (an image stays an image) where every agent has it
        shared = all(k.own == own for k in self._kinds)
        obs_box = own if isinstance(own, gym.spaces.Box) and shared else _padded_box(self._kinds)
        self._obs_size = int(np.prod(obs_box.shape))
        self._state_fn, state_size = self._find_state()
        state_box = gym.spaces.Box(-np.inf, np.inf, (state_size,), dtype=np.float32)
        # a mask on actions that cannot be masked (count None) is refused above, agent by agent
        self.obs_layout = agent_rows(obs_box, len(names), state_box, count if self._masked else None)
        self.single_observation_space = self.obs_layout.space
        self._spans = {p.path[0]: p.span for p in self.obs_layout.parts}
        self._index = {name: i for i, name in enumerate(names)}
        self.num_envs = num_envs * len(names)
        self.device = torch.device(device)
        self._present: list[list[str]] = [[] for _ in self.games]
        self._infos: InfoKeys | None = None
        self._said_missing = False
        self.alive = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)

    def _alive_rows(self) -> Tensor:
        """The rows whose next action counts: the agents present, in a turn-based game the one to move."""
        A, index = len(self._names), self._index
        alive = np.zeros(self.num_envs, dtype=bool)
        for e, game in enumerate(self.games):
            movers = [game.mover] if self._turns else self._present[e]
            alive[[e * A + index[name] for name in movers]] = True
        self.alive = self._tensor(alive)
        return self.alive

    # -- what the env is made of ----------------------------------------------------------------------------

    def _find_masks(self, obs_spaces: list[gym.Space]) -> list[str | None]:
        """Each agent's mask convention: "obs" (a Dict observation's ``action_mask``), "info" (the info of every
        reset and step), or None. A reset of game 0 tells the info convention."""
        found: list[str | None] = [
            "obs" if isinstance(s, gym.spaces.Dict) and MASK_KEY in s.spaces else None for s in obs_spaces
        ]
        _, infos = self._reset_call(self.games[0])  # the run's own reset seeds it
        for i, name in enumerate(self._names):
            if found[i] is None and MASK_KEY in (infos or {}).get(name, {}):
                found[i] = "info"
        return found

    def _find_state(self):
        """``(state, size)``: the function that gives a game's global state, and its size."""
        game = self.games[0]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = np.asarray(game.state(), dtype=np.float32).reshape(-1)
            return (lambda g, obs: np.asarray(g.state(), dtype=np.float32).reshape(-1)), value.size
        except (NotImplementedError, AttributeError, TypeError, ValueError):
            # no state(), or not a method that gives numbers: PettingZoo's own tutorial keeps its observations
            # in a self.state attribute, which hides the method
            pass
        size, a = self._obs_size, len(self._names)

        def joint(_, obs: dict) -> np.ndarray:
            out = np.zeros(size * a, dtype=np.float32)
            for i, name in enumerate(self._names):
                if name in obs:
                    values = self._kinds[i].values(obs[name], f"{self.label}'s agent {name}")
                    out[i * size : i * size + values.size] = values
            return out

        return joint, size * a

    # -- rows -----------------------------------------------------------------------------------------------

    def _fill(self, out: np.ndarray, e: int, obs: dict, infos: dict, state: np.ndarray) -> None:
        """Write game ``e``'s rows into ``out``: an absent agent's "obs" is zeros."""
        A = len(self._names)
        for i in range(A):
            self._row(out[e * A + i], i, obs, infos, state)

    def _row(self, row: np.ndarray, i: int, obs: dict, infos: dict, state: np.ndarray, final=False) -> None:
        """Write agent ``i``'s packed observation into ``row`` (zeros where it is not in ``obs``)."""
        spans, name, kind = self._spans, self._names[i], self._kinds[i]
        if name in obs:
            values = kind.values(obs[name], f"{self.label}'s agent {name}")
            row[spans["obs"].start : spans["obs"].start + values.size] = values
        row[spans["agent"]] = i
        row[spans["state"]] = state
        if self._masked:
            row[spans[MASK_KEY]] = self._mask(i, obs.get(name), (infos or {}).get(name), final)

    def _mask(self, i: int, obs, info, final: bool) -> np.ndarray:
        kind, default = self._kinds[i], self._default_mask[i]
        given = None
        if obs is not None and kind.mask == "obs":
            given = obs[MASK_KEY]
        elif obs is not None and kind.mask == "info":
            given = (info or {}).get(MASK_KEY)
            # an episode's last observation is only valued, never acted on: its mask may be missing
            if given is None and not final:
                raise EnvError(
                    f"{self.label} gave info[{MASK_KEY!r}] for {self._names[i]} at its first reset but not at a "
                    "later reset or step; give it with every one"
                )
        if given is None:
            return default
        given = np.asarray(given).reshape(-1)
        mask_count(f"{self.label}'s {self._names[i]}", kind.action_space, given.size)
        mask = default.copy()
        mask[: given.size] = given
        return mask

    def _tensor(self, array: np.ndarray) -> Tensor:
        return torch.as_tensor(array, device=self.device)

    # -- the VecEnv -----------------------------------------------------------------------------------------

    def reset(self, seed: Seeds = None) -> Tensor:
        seed, self._seed = one_seed(self._seed if seed is None else seed, "pettingzoo"), None
        out = np.zeros((self.num_envs, self.obs_layout.shape[0]), dtype=np.float32)
        for e in range(len(self.games)):
            self._reset_game(out, e, None if seed is None else seed + e)
        self._alive_rows()
        return self._tensor(out)

    def _reset_game(self, out: np.ndarray, e: int, seed: int | None) -> None:
        game = self.games[e]
        obs, infos = self._reset_call(game, seed)
        self._present[e] = list(game.agents)
        if not self._present[e]:
            raise EnvError(
                f"{self.label}'s reset() left env.agents empty; a game starts with its agents in it"
            )
        self._fill(out, e, obs, infos, self._state_fn(game, obs))
        if e == 0 and self._video is not None:
            self._video.start()

    # What the env's own step breaks (its API, a reward, its agents) is said as an EnvError, which stops a run
    # in one line that names the update and how to resume; a reset's, found before the run starts, as bad input.
    def _reset_call(self, game, seed: int | None = None) -> tuple[dict, dict]:
        result = env_call(game.reset, seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
            raise UserError(
                f"{self.label}'s reset() returned {_shape_of(result)}; the Parallel API (PettingZoo 1.22 on) "
                "returns (observations, infos), two dicts keyed by agent"
            )
        return result

    def _step_call(self, game, moves: dict) -> tuple:
        result = env_call(game.step, moves)
        if not (isinstance(result, tuple) and len(result) == 5):
            raise EnvError(
                f"{self.label}'s step() returned {_shape_of(result)}; the Parallel API (PettingZoo 1.22 on) "
                "returns (observations, rewards, terminations, truncations, infos), five dicts keyed by agent"
            )
        return result

    def _reward(self, value, name: str) -> float:
        """One agent's reward as a number: a numpy scalar or an array of one value is taken."""
        if type(value) is float:  # the common case needs no conversion (this runs for every agent's step)
            return value
        try:
            return one_reward(value)
        except (TypeError, ValueError):
            raise EnvError(
                f"{self.label}'s step() gave {_shape_of(value)} as the reward of {name}; give one number per agent"
            ) from None

    def _check_agents(self, e: int, now: list[str], obs: dict, terms: dict, truncs: dict) -> None:
        """After a step of game ``e``: every agent flagged done has left ``env.agents`` (else its game would
        never end), and every agent still in it has an observation."""
        if self._turns:  # an AEC game's agents leave at their turn, which Turns plays
            return
        done = [a for a in now if bool(terms.get(a, False)) or bool(truncs.get(a, False))]
        if done:
            raise EnvError(
                f"{self.label}'s step() flagged {done[0]} terminated or truncated but left it in env.agents; a "
                "ParallelEnv removes an agent from env.agents in the step that ends it"
            )
        missing = [a for a in now if a not in obs]
        if missing and not self._said_missing:
            self._said_missing = True
            warnings.warn(
                f"{self.label}'s step() gave no observation for {missing[0]}, which is still in "
                "env.agents; its row observes zeros",
                RuntimeWarning,
                stacklevel=2,
            )

    def step(self, actions: Tensor) -> Step:
        A, E, index = len(self._names), len(self.games), self._index
        chosen = actions.cpu().numpy()
        per_agent = self._agent_actions(chosen.reshape(E, A, *chosen.shape[1:]))
        n = self.num_envs
        out = np.zeros((n, self.obs_layout.shape[0]), dtype=np.float32)
        reward = np.zeros(n, dtype=np.float32)
        terminated, truncated = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        over = np.zeros(n, dtype=bool)
        final_rows: dict[int, np.ndarray] = {}
        ended_infos: dict[int, dict] = {}
        for e, game in enumerate(self.games):
            acting = self._present[e]
            moves = {name: per_agent[index[name]][e] for name in acting}
            obs, rewards, terms, truncs, infos = self._step_call(game, moves)
            for name in acting:
                row = e * A + index[name]
                reward[row] = self._reward(rewards.get(name, 0.0), name)
                terminated[row] = bool(terms.get(name, False))
                truncated[row] = bool(truncs.get(name, False))
            if e == 0 and self._video is not None:
                self._video.frame()
            now = list(game.agents)
            self._check_agents(e, now, obs, terms, truncs)
            left = [name for name in acting if name not in now]
            ended = not now
            if left:
                state = self._state_fn(game, obs)
            for name in left:
                row = e * A + index[name]
                # without a flag, an agent that left a game that goes on terminated, and a game whose agents are
                # all gone ended without saying why
                if not (terminated[row] or truncated[row]):
                    (truncated if ended else terminated)[row] = True
                final_rows[row] = np.zeros(self.obs_layout.shape[0], dtype=np.float32)
                self._row(final_rows[row], index[name], obs, infos, state, final=True)
                if self._infos is not None:
                    ended_infos[row] = kept_info(infos.get(name, {}), self._infos)
            if ended:
                over[e * A : (e + 1) * A] = True
                if e == 0 and self._video is not None:
                    self._video.save()
                self._reset_game(out, e, None)
            else:  # the agents that left are in this step's obs, but not in the next rows' (nor their state)
                self._present[e] = now
                still = {name: obs[name] for name in now if name in obs}
                self._fill(out, e, still, infos, self._state_fn(game, still))
        alive = self._alive_rows()
        obs_t = self._tensor(out)
        final_obs = obs_t
        if final_rows:
            final_obs = obs_t.clone()
            rows = list(final_rows)
            final_obs[rows] = self._tensor(np.stack([final_rows[r] for r in rows]))
        return Step(
            obs_t,
            self._tensor(reward),
            self._tensor(terminated),
            self._tensor(truncated),
            final_obs,
            None,
            self._tensor(over),
            None if self._infos is None else ended_infos,
            None if bool(alive.all()) else alive,
        )

    def _agent_actions(self, actions: np.ndarray) -> list[np.ndarray]:
        """Each agent's actions in every game, ``(E, *its action shape)``, as its env takes them: a Box agent's
        first dims of the row's Box, a start added, bounds clipped (``env_actions``)."""
        out = []
        for i, kind in enumerate(self._kinds):
            mine = actions[:, i]
            space = kind.action_space
            if isinstance(space, gym.spaces.Box) and space != self.single_action_space:
                size = int(np.prod(space.shape))
                mine = mine.reshape(len(mine), -1)[:, :size].reshape(len(mine), *space.shape)
            out.append(env_actions(mine, space))
        return out

    def keep_infos(
        self, keys: InfoKeys
    ) -> None:  # the infos of the rows whose agent left or whose game ended
        self._infos = keys

    def call(self, name: str, *args, **kwargs) -> tuple:
        """``name(*args, **kwargs)`` on each game (the attribute's value where it is not callable), in order."""
        self._check_attr(name)
        attrs = [getattr(game, name) for game in self.games]
        return tuple(env_call(attr, *args, **kwargs) if callable(attr) else attr for attr in attrs)

    def set_attr(self, name: str, values) -> None:
        values = per_env_values(values, len(self.games))
        self._check_attr(name)
        for game, value in zip(self.games, values, strict=True):
            setattr(game, name, value)

    def _check_attr(self, name: str) -> None:
        if not isinstance(name, str) or not all(hasattr(g, name) for g in self.games):
            raise UserError(
                f"the env has no attribute {name!r}; call and set_attr reach a method or attribute that the "
                "PettingZoo env defines"
            )

    def close(self) -> None:
        if self._video is not None:
            self._video.save()
        for game in self.games:
            _close_quietly(game, self.label)


def _make(env_id: str, num_envs: int, *, env_kwargs: dict | None = None, **kwargs) -> PettingZooVecEnv:
    kwargs.pop("asynchronous", None)  # the registry refuses --async-envs for this backend before here
    make = module_factory(env_id, ("parallel_env", "env"), ID_FORM)
    return PettingZooVecEnv(env_id, num_envs, make, env_kwargs=env_kwargs, **kwargs)


register_backend(
    "pettingzoo",
    _make,
    handles=lambda env_id: env_id.startswith(PREFIX),
    features=("video", "env_kwargs"),
    exclusive=True,
    instead={"asynchronous": GAMES_ON_WORKERS},
)
