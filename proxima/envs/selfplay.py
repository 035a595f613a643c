"""Two-player zero-sum turn-based games (PettingZoo's classic AEC envs) as a single-agent ``VecEnv``, for
self-play (docs/MULTIAGENT.md).

``selfplay:MODULE`` (``selfplay:pettingzoo.classic.connect_four_v3``) makes N games of MODULE's AEC env. Each
row is one game seen from the learner's seat; the other seat is an opponent whose moves happen inside
``step``. The learner's seat alternates from one episode of a game to the next (game ``i`` starts its first
episode in seat ``i % 2``), so the policy learns both. An opponent is a policy of packed observations,
``(B, D) -> (B,)`` actions: each game draws one from the pool (``set_opponents``) when its episode starts,
and every step moves all the games that share an opponent in one batched call. Until a pool is set, the
opponent is the random player. Rewards are the env's own for the learner's seat (+1 win, -1 loss, 0 draw
in the classic games), summed over the learner's move and the opponent's answer.

The env knows no networks: the snapshots of the agent that the pool holds come from ``proxima.run.selfplay``.
The observation is the env's own, with its ``action_mask``, which the learner's policy obeys through the
mask convention of docs/SPACES.md and the opponents obey too. A distinct id prefix, rather than PettingZoo's
own ids, makes every part of proxima that builds envs from a run's id (evaluation during training,
``proxima eval``, ``--resume``) build this env again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import cast

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima.base.errors import UserError
from proxima.base.spaces import ObsLayout
from proxima.envs.interface import Seeds, Step, Unrestorable, one_seed
from proxima.envs.registry import module_factory, register_backend

PREFIX = "selfplay:"
MASK = "action_mask"
ID_FORM = (
    "selfplay:MODULE of a PettingZoo AEC env, such as selfplay:pettingzoo.classic.connect_four_v3 (needs the "
    "multiagent extra)"
)

Policy = Callable[[Tensor], Tensor]
"""An opponent: packed observations ``(B, D)`` of the seat to move -> its actions ``(B,)``."""


def is_selfplay_id(env_id: str) -> bool:
    return isinstance(env_id, str) and env_id.startswith(PREFIX)


class SelfPlayVecEnv(Unrestorable):
    """``num_envs`` games of a two-player AEC env, one row per game, from the learner's seat (module doc)."""

    def __init__(
        self, env_id: str, num_envs: int, *, seed: int | None = None, device="cpu", env_kwargs=None, **_
    ):
        self.env_id, self.num_envs, self.device = env_id, num_envs, torch.device(device)
        # raw_env: the wrappers only police illegal moves, and every move here obeys the mask
        make = module_factory(env_id, ("raw_env", "env"), ID_FORM)
        self.games = [make(**(env_kwargs or {})) for _ in range(num_envs)]
        game = self.games[0]
        self.names = tuple(game.possible_agents)
        space, action_space = game.observation_space(self.names[0]), game.action_space(self.names[0])
        if len(self.names) != 2 or not isinstance(action_space, gym.spaces.Discrete):
            raise UserError(
                f"{env_id}: self-play takes two-player games with Discrete actions; it has agents {self.names} "
                f"and actions {action_space}"
            )
        if not (isinstance(space, gym.spaces.Dict) and MASK in space.spaces):
            raise UserError(
                f"{env_id}: self-play needs the game's action masks (a Dict with {MASK!r}); it has {space}"
            )
        self.single_observation_space, self.single_action_space = space, action_space
        self.obs_layout = ObsLayout(space, mask=MASK)
        self.seats = np.arange(num_envs) % 2  # the learner's index in self.names, this episode
        self.episodes = np.zeros(num_envs, dtype=np.int64)
        self._seed = one_seed(seed, "selfplay")
        self._rng = np.random.default_rng(self._seed)
        self.generator = torch.Generator(device=self.device)  # the built-in players' draws
        self.random_player = random_player(self.obs_layout, self.generator)
        self.set_opponents([self.random_player])
        self.opponents: list[Policy] = [self.random_player] * num_envs

    # the pool

    def set_opponents(self, policies: Sequence[Policy], probs: Sequence[float] | None = None) -> None:
        """From the next episode of each game on, its opponent is one of ``policies``, drawn with ``probs``
        (None: uniformly); games in play finish against the opponent they have."""
        if not policies:
            raise UserError("set_opponents needs at least one opponent policy")
        uniform = np.full(len(policies), 1 / len(policies))
        p = uniform if probs is None else np.asarray(probs, dtype=np.float64)
        if p.shape != (len(policies),) or (p < 0).any() or not p.sum() > 0:
            raise UserError(f"set_opponents takes one non-negative probability per policy, got {probs}")
        self._pool, self._probs = list(policies), p / p.sum()

    # the VecEnv interface

    def reset(self, seed: Seeds = None) -> Tensor:
        seed = one_seed(self._seed if seed is None else seed, "selfplay")
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self.generator.manual_seed(seed)
        self.seats = np.arange(self.num_envs) % 2
        self.episodes[:] = 0
        for i, game in enumerate(self.games):
            game.reset(seed=None if seed is None else seed + i)
            self._draw_opponent(i)
        self._opponents_move(self._waiting(range(self.num_envs)))
        return self._observe()

    @torch.no_grad()
    def step(self, actions: Tensor) -> Step:
        moves = actions.reshape(self.num_envs).cpu().numpy()
        reward = np.zeros(self.num_envs, dtype=np.float32)
        ended = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        final: dict[int, np.ndarray] = {}
        ends = (reward, ended, truncated, final)
        for i in range(self.num_envs):
            self._move(i, int(moves[i]), ends)
        self._opponents_move(self._waiting(range(self.num_envs)), ends)
        obs = self._observe()
        final_obs = obs.clone()
        for i, packed in final.items():
            final_obs[i] = torch.as_tensor(packed, device=self.device)
        terminated = torch.as_tensor(ended & ~truncated, device=self.device)
        return Step(
            obs,
            torch.as_tensor(reward, device=self.device),
            terminated,
            torch.as_tensor(truncated, device=self.device),
            final_obs,
        )

    def close(self) -> None:
        for game in self.games:
            game.close()

    # inside a step

    def _learner(self, i: int) -> str:
        return self.names[self.seats[i]]

    def _waiting(self, games) -> list[int]:  # those where the opponent is to move
        return [i for i in games if self.games[i].agent_selection != self._learner(i)]

    def _draw_opponent(self, i: int) -> None:
        self.opponents[i] = self._pool[self._rng.choice(len(self._pool), p=self._probs)]

    def _move(self, i: int, action: int, ends: tuple | None) -> None:
        """Play ``action`` for whoever is to move in game ``i``; where the game ends, note its end in ``ends``
        (``step``'s reward, ended, truncated and final, from the learner's seat) and start the next episode,
        with the other seat and a new opponent."""
        game, learner = self.games[i], self._learner(i)
        game.step(action)
        if ends is None:  # an opening move of the opponent, at reset: no episode to report on
            return
        reward, ended, truncated, final = ends
        if not ended[i]:
            reward[i] += game.rewards[learner]
        if not any(game.terminations.values()) and not any(game.truncations.values()):
            return
        ended[i] = True
        truncated[i] = not any(game.terminations.values())
        final[i] = self._pack([game.observe(learner)])[0]
        self.seats[i] ^= 1
        self.episodes[i] += 1
        game.reset()
        self._draw_opponent(i)

    def _opponents_move(self, waiting: list[int], ends: tuple | None = None) -> None:
        """Every game in ``waiting`` gets its opponent's move: one batched call per opponent. A game that ends
        and whose next episode the opponent opens moves again."""
        while waiting:
            groups: dict[int, list[int]] = {}
            for i in waiting:
                groups.setdefault(id(self.opponents[i]), []).append(i)
            for members in groups.values():
                games = [self.games[i] for i in members]
                obs = self._pack([game.observe(game.agent_selection) for game in games])
                actions = self.opponents[members[0]](torch.as_tensor(obs, device=self.device))
                for i, action in zip(members, actions.reshape(-1).tolist(), strict=True):
                    self._move(i, int(action), ends)
            waiting = self._waiting(waiting)

    def _observe(self) -> Tensor:
        obs = [game.observe(self._learner(i)) for i, game in enumerate(self.games)]
        return torch.as_tensor(self._pack(obs), device=self.device)

    def _pack(self, observations: list[dict]) -> np.ndarray:
        batch = {
            key: np.stack([o[key] for o in observations]) for key in self.single_observation_space.spaces
        }
        return self.obs_layout.pack(batch, batch=True)


def _mask(layout: ObsLayout, obs: Tensor) -> Tensor:
    assert layout.mask_part is not None  # self-play's games observe their legal moves
    return obs[:, layout.mask_part.span] > 0


def _choose(allowed: Tensor, generator: torch.Generator) -> Tensor:
    """One allowed action per row, uniformly (every row allows one at least)."""
    return torch.multinomial(allowed.float(), 1, generator=generator).squeeze(1)


def random_player(layout: ObsLayout, generator: torch.Generator) -> Policy:
    return lambda obs: _choose(_mask(layout, obs), generator)


CONNECT_FOUR_SHAPE = (6, 7, 2)


def connect_four_part(layout: ObsLayout):
    """The part of ``layout`` that is Connect Four's board, or None for another game."""
    board = next((p for p in layout.parts if p.path == ("observation",)), None)
    return board if board is not None and board.shape == CONNECT_FOUR_SHAPE else None


def connect_four_board(layout: ObsLayout):
    """The part of ``layout`` that is Connect Four's board; refused for another game."""
    board = connect_four_part(layout)
    if board is None:
        raise UserError(
            f"the lookahead player plays Connect Four (a {CONNECT_FOUR_SHAPE} observation), not {layout.space}"
        )
    return board


def immediate_wins(layout: ObsLayout, board, obs: Tensor) -> tuple[Tensor, Tensor]:
    """``(B, 7)`` each, for Connect Four's packed observations: the legal columns where the player to move wins
    at once, and those where the other player would win on its next move (the threats to block)."""
    planes = obs[:, board.span].reshape(-1, *CONNECT_FOUR_SHAPE).float()
    legal = _mask(layout, obs)
    own, other = planes[..., 0], planes[..., 1]  # PettingZoo's planes: the player to move's, the other's
    return _completes_four(own, own + other) & legal, _completes_four(other, own + other) & legal


def lookahead_player(layout: ObsLayout, generator: torch.Generator) -> Policy:
    """Connect Four's one-step lookahead: a winning move where there is one, else a move that blocks the
    opponent's immediate win, else a random legal move (ties broken at random)."""
    board = connect_four_board(layout)

    def play(obs: Tensor) -> Tensor:
        wins, blocks = immediate_wins(layout, board, obs)
        choice = torch.where(blocks.any(1, keepdim=True), blocks, _mask(layout, obs))
        return _choose(torch.where(wins.any(1, keepdim=True), wins, choice), generator)

    return play


def _completes_four(pieces: Tensor, filled: Tensor) -> Tensor:
    """``(B, 7)``: whether dropping a piece of ``pieces`` (``(B, 6, 7)``, row 0 at the top) into each column
    makes four in a row. ``filled``: every piece on the board."""
    rows, cols = pieces.shape[1:]
    height = filled.sum(1).long()  # pieces in each column; the drop lands at row rows - 1 - height
    landing = torch.nn.functional.one_hot((rows - 1 - height).clamp(min=0), rows).transpose(1, 2)  # (B, 6, 7)
    column = torch.eye(cols, device=pieces.device)  # candidate c: the landing cell of column c only
    boards = pieces.unsqueeze(1) + landing.unsqueeze(1) * column.view(1, cols, 1, cols)  # (B, 7, 6, 7)
    return _four(boards.flatten(0, 1)).view(-1, cols) & (height < rows)


def _four(x: Tensor) -> Tensor:
    """``(M,)``: whether each ``(rows, cols)`` board of 0/1 has four in a row in any direction."""
    r, c = x.shape[1:]
    lines = (
        _total(x[:, :, k : c - 3 + k] for k in range(4)),
        _total(x[:, k : r - 3 + k, :] for k in range(4)),
        _total(x[:, k : r - 3 + k, k : c - 3 + k] for k in range(4)),
        _total(x[:, k : r - 3 + k, 3 - k : c - k] for k in range(4)),
    )
    return torch.stack([(line >= 4).flatten(1).any(1) for line in lines]).any(0)


def _total(windows: Iterable[Tensor]) -> Tensor:
    return cast(Tensor, sum(windows))  # 0 + the first window: a tensor


PLAYERS = {"random": random_player, "lookahead": lookahead_player}


def make_player(name: str, layout: ObsLayout, generator: torch.Generator) -> Policy:
    if name not in PLAYERS:
        raise UserError(f"unknown opponent {name!r}; accepted: {', '.join(PLAYERS)}")
    return PLAYERS[name](layout, generator)


# no --rollout-workers either: the opponents' policies are given to the envs of this process
register_backend("selfplay", SelfPlayVecEnv, handles=is_selfplay_id, features=("env_kwargs",), exclusive=True)
