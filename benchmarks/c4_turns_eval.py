"""Score an agent trained on Connect Four by turns on the PettingZoo backend (one shared policy in both seats)
against proxima's built-in players, as `proxima eval --opponent` scores a `selfplay:` agent.

    .venv/bin/proxima train --env-id pettingzoo:pettingzoo.classic.connect_four_v3 --algo ippo --num-envs 32 \\
        --num-steps 128 --hidden-sizes 256 256 --total-timesteps 1000000 --seed 1 --run-dir RUN
    .venv/bin/python benchmarks/c4_turns_eval.py RUN [--episodes 1000]

The games are the self-play env's (`selfplay:pettingzoo.classic.connect_four_v3`: the agent's seat alternates
from game to game, the opponent moves inside the step); each of the agent's observations is rewritten as the
PettingZoo backend's row of the same position (its board, its seat as the agent index, both players' boards as
the state, the mask), which the script first checks against the backend's own rows on random positions. Prints
the win, draw and loss counts and the tactics (immediate wins taken, threats blocked) against each player.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from proxima.envs import make_envs
from proxima.envs.selfplay import make_player
from proxima.run.agent import Agent
from proxima.run.evaluate import run_episodes
from proxima.run.selfplay import Tactics

TURNS = "pettingzoo:pettingzoo.classic.connect_four_v3"
SELFPLAY = "selfplay:pettingzoo.classic.connect_four_v3"
MASK = "action_mask"


class AsRows:
    """A PettingZoo-trained model behind the self-play env's observations."""

    def __init__(self, model, games, rows_layout):
        self.model, self.games = model, games
        parts = {p.path[0]: p.span for p in games.obs_layout.parts}
        self.board, self.mask = parts["observation"], parts["action_mask"]
        self.rows = rows_layout
        self.spans = {p.path[0]: p.span for p in rows_layout.parts}

    def __getattr__(self, name):
        return getattr(self.model, name)

    def convert(self, obs: torch.Tensor) -> torch.Tensor:
        n, s = len(obs), self.spans
        board = obs[:, self.board].reshape(n, 6, 7, 2)  # planes: the player to move's pieces, the other's
        seat = torch.as_tensor(self.games.seats[:n], dtype=torch.float32)[:, None]
        mine, theirs = board.reshape(n, -1), board.flip(-1).reshape(n, -1)
        out = torch.zeros(n, self.rows.shape[0])
        out[:, s["obs"]] = mine
        out[:, s["agent"]] = seat
        out[:, s["state"]] = torch.cat(
            [torch.where(seat == 0, mine, theirs), torch.where(seat == 0, theirs, mine)], 1
        )
        out[:, s[MASK]] = obs[:, self.mask]
        return out

    def predict(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.model.predict(self.convert(obs), deterministic)


def check_conversion(rows_layout) -> None:
    """The rewritten observations against the backend's own rows, over random games."""
    turns, games = make_envs(TURNS, 1, seed=0), make_envs(SELFPLAY, 1, seed=0)
    convert, rng, checked = AsRows(None, games, rows_layout).convert, np.random.default_rng(0), 0
    rows = turns.reset()
    game = turns.games[0].env
    while checked < 200:
        mover = game.agent_selection
        seat = turns.agents.names.index(mover)
        seen = game.observe(mover)
        games.seats[0] = seat
        assert torch.equal(convert(torch.as_tensor(games._pack([seen])))[0], rows[seat]), "conversion differs"
        actions = torch.zeros(2, dtype=torch.long)
        actions[seat] = int(rng.choice(np.flatnonzero(seen[MASK])))
        rows, checked = turns.step(actions).obs, checked + 1
    turns.close()
    games.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--episodes", type=int, default=1000)
    args = parser.parse_args()
    agent = Agent.load(args.run)
    layout = make_envs(TURNS, 1).obs_layout
    check_conversion(layout)
    for opponent in ("random", "lookahead"):
        games = make_envs(SELFPLAY, min(args.episodes, 100))
        games.set_opponents([make_player(opponent, games.obs_layout, torch.Generator().manual_seed(0))])
        watched = Tactics(AsRows(agent.model, games, layout), games.obs_layout)
        returns = run_episodes(watched, games, args.episodes, deterministic=True, seed=0, name=TURNS)
        games.close()
        wins, losses = int((returns > 0).sum()), int((returns < 0).sum())
        print(f"against {opponent}: {wins} wins, {len(returns) - wins - losses} draws, {losses} losses "
              f"of {len(returns)} ({wins / len(returns):.1%} won); tactics {watched.summary()}")  # fmt: skip


if __name__ == "__main__":
    main()
