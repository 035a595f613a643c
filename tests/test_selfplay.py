"""Self-play on two-player games (docs/MULTIAGENT.md): the ``selfplay:`` env plays the opponent's moves inside its
step, the lookahead player, the pool of snapshots, and a short run that beats the random player."""

import json
import os
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

import proxima  # noqa: E402
import proxima.commands  # noqa: E402
from proxima.base.errors import UserError  # noqa: E402
from proxima.envs import make_envs  # noqa: E402
from proxima.envs.selfplay import lookahead_player  # noqa: E402
from proxima.run.selfplay import RANDOM, OpponentPool, Tactics, play_against, snapshot_dir  # noqa: E402

C4 = "selfplay:pettingzoo.classic.connect_four_v3"


def column(c):
    """An opponent that always plays column ``c``."""
    return lambda obs: torch.full((len(obs),), c, dtype=torch.int64)


def board(envs, obs_row):
    """The board of a packed observation: (6, 7, 2), plane 0 the pieces of the player to move."""
    part = next(p for p in envs.obs_layout.parts if p.path == ("observation",))
    return obs_row[part.span].reshape(6, 7, 2).numpy()


def mask(envs, obs_row):
    return obs_row[envs.obs_layout.mask_part.span].numpy().astype(bool)


def test_a_known_win_gives_plus_one_and_a_known_loss_minus_one_and_the_seats_alternate():
    envs = make_envs(C4, 2, seed=0)
    envs.set_opponents([column(1)])
    obs = envs.reset(seed=0)
    # game 0: the learner moves first, into an empty board; game 1: the opponent opened in column 1
    assert board(envs, obs[0]).sum() == 0
    assert board(envs, obs[1])[5, 1, 1] == 1 and board(envs, obs[1]).sum() == 1
    # the learner plays column 0 in both games: in game 0 its fourth piece wins; in game 1 the opponent's
    # fourth piece in column 1 wins first, after the learner's third
    for move in range(4):
        step = envs.step(torch.tensor([0, 0]))
        ended = step.terminated.tolist()
        if move < 3:
            assert ended == [False, move == 2] and not step.truncated.any()
        else:
            assert ended == [True, False]
        if move == 2:
            assert step.reward.tolist() == [0.0, -1.0]
            lost = board(envs, step.final_obs[1])  # the learner's view of the lost game's last position
            assert lost[:, 1, 1].sum() == 4 and lost[:, 0, 0].sum() == 3
            assert board(envs, step.obs[1]).sum() == 0  # its next game: the learner's turn to open
    assert step.reward.tolist() == [1.0, 0.0]
    won = board(envs, step.final_obs[0])
    assert won[:, 0, 0].sum() == 4 and won[:, 1, 1].sum() == 3
    # game 0's next episode has the learner in the other seat: the opponent has opened
    assert board(envs, step.obs[0])[5, 1, 1] == 1 and board(envs, step.obs[0]).sum() == 1
    assert envs.seats.tolist() == [1, 0] and envs.episodes.tolist() == [1, 1]


def test_a_full_column_is_masked_for_the_learner_and_never_played_by_the_opponents():
    envs = make_envs(C4, 1, seed=0)
    envs.set_opponents([column(0)])
    obs = envs.reset(seed=0)
    assert mask(envs, obs[0]).all()
    for _ in range(3):  # learner and opponent both fill column 0: six pieces
        obs = envs.step(torch.zeros(1, dtype=torch.int64)).obs
    assert mask(envs, obs[0]).tolist() == [False] + [True] * 6
    envs = make_envs(C4, 3, seed=0)
    obs = envs.reset(seed=0)
    # random players: every move of both sides legal for hundreds of games (PettingZoo asserts on illegal ones)
    envs.set_opponents([envs.random_player])
    rng = torch.Generator().manual_seed(0)
    ends = 0
    for _ in range(300):
        allowed = obs[:, envs.obs_layout.mask_part.span] > 0
        step = envs.step(torch.multinomial(allowed.float(), 1, generator=rng).squeeze(1))
        obs, ends = step.obs, ends + int(step.terminated.sum())
    assert ends > 20


def test_the_lookahead_player_takes_a_win_before_blocking_and_blocks_a_loss():
    envs = make_envs(C4, 1, seed=0)
    layout = envs.obs_layout
    play = lookahead_player(layout, torch.Generator().manual_seed(0))

    def packed(own, other, legal=None):
        planes = np.zeros((6, 7, 2), dtype=np.int8)
        for r, c in own:
            planes[r, c, 0] = 1
        for r, c in other:
            planes[r, c, 1] = 1
        legal = np.ones(7, dtype=np.int8) if legal is None else np.asarray(legal, dtype=np.int8)
        one = layout.pack({"action_mask": legal, "observation": planes})
        return torch.as_tensor(np.repeat(one[None], 64, axis=0))

    # the player to move has three in the bottom row (column 3 wins); the other threatens column 6 upwards
    win = packed([(5, 0), (5, 1), (5, 2), (4, 0)], [(5, 6), (4, 6), (3, 6), (4, 1)])
    assert play(win).tolist() == [3] * 64
    # no win of its own: it blocks the other's vertical three in column 6
    block = packed([(5, 0), (5, 2), (4, 0)], [(5, 6), (4, 6), (3, 6)])
    assert play(block).tolist() == [6] * 64
    # a diagonal to block: the other's (5,0) (4,1) (3,2) is completed at (2,3), reachable once column 3 has 3 pieces
    diagonal = packed([(5, 3), (4, 3), (5, 1), (4, 2), (5, 5)], [(5, 0), (4, 1), (3, 2), (3, 3), (5, 2)])
    assert play(diagonal).tolist() == [3] * 64
    # nothing to win or block: a random legal move, never a masked one
    moves = play(packed([], [], legal=[1, 1, 0, 1, 1, 1, 1])).tolist()
    assert set(moves) == {0, 1, 3, 4, 5, 6}


TINY = {
    "env_id": C4, "num_envs": 4, "num_steps": 32, "total_timesteps": 512, "hidden_sizes": (32,),
    "self_play_every": 1, "self_play_pool": 3, "quiet": True, "report": False, "plot": False,
}  # fmt: skip


def test_snapshots_are_agents_in_the_run_directory_and_the_pool_keeps_the_latest(tmp_path):
    run_dir = str(tmp_path / "run")
    agent = proxima.train(**TINY, run_dir=run_dir)
    assert sorted(os.listdir(os.path.join(run_dir, "snapshots"))) == ["000001", "000002", "000003", "000004"]
    last = proxima.load(snapshot_dir(run_dir, 4))
    for name, tensor in agent.model.state_dict().items():
        assert torch.equal(tensor, last.model.state_dict()[name]), name
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [r["self_play_opponents"] for r in records] == [2, 3, 3, 3]  # the random player, pushed out at 3
    # the pool itself: loaded snapshots replace the random player, the latest drawn half the time
    envs = make_envs(C4, 8, seed=0)
    pool = OpponentPool(every=1, size=3, latest=0.5)
    pool.open(envs, run_dir, "cpu")
    assert pool.members == [RANDOM] and pool.probabilities() == [1.0]
    for update in (1, 2, 3):
        pool.add(proxima.load(snapshot_dir(run_dir, update)), 10 + update, str(tmp_path / "pool"), 0, "cpu")
    assert pool.members == [11, 12, 13] and pool.probabilities() == [0.25, 0.25, 0.5]
    assert len(envs._pool) == 3 and envs._probs.tolist() == [0.25, 0.25, 0.5]
    assert sorted(os.listdir(tmp_path / "pool" / "snapshots")) == ["000011", "000012", "000013"]
    # a resumed run's pool comes back from its state and the snapshots on disk
    again = OpponentPool(every=1, size=3, latest=0.5)
    again.load_state_dict(json.loads(json.dumps(pool.state_dict())))
    again.open(envs, str(tmp_path / "pool"), "cpu")
    assert again.members == [11, 12, 13]
    obs = envs.reset(seed=0)
    moves = envs._pool[2](obs)
    assert mask(envs, obs[0]).all() and moves.shape == (8,)
    envs.step(moves)  # the opponents move inside the step, legally
    # --self-play-random-moves: with probability 1 every move of a snapshot is the random player's
    noisy = OpponentPool(every=1, size=3, latest=0.5, random_moves=1.0)
    noisy.load_state_dict({"members": [11]})
    noisy.open(envs, str(tmp_path / "pool"), "cpu")
    state = envs.generator.get_state()
    moves = envs._pool[0](obs)
    envs.generator.set_state(state)
    torch.rand(len(obs), generator=envs.generator)  # the coins
    assert torch.equal(moves, envs.random_player(obs))


def test_eval_against_a_player_plays_half_the_games_in_each_seat(tmp_path):
    run_dir = str(tmp_path / "run")
    agent = proxima.train(**TINY, run_dir=run_dir)
    returns, summary = play_against(agent, "random", 40, seed=3, max_games=8)
    assert len(returns) == 40 and summary["wins"] + summary["draws"] + summary["losses"] == 40
    assert summary["by_seat"]["first"]["games"] == summary["by_seat"]["second"]["games"] == 20
    assert summary["win_rate"] == pytest.approx(np.mean(returns > 0))
    with pytest.raises(UserError, match="unknown opponent"):
        play_against(agent, "minimax", 10)


def packed(envs, own, other):
    """A packed observation of the board with the mover's pieces at ``own`` and the other's at ``other``
    ((row, column), row 0 at the top), the full columns masked."""
    planes = np.zeros((1, 6, 7, 2), np.int8)
    for plane, cells in enumerate((own, other)):
        for r, c in cells:
            planes[0, r, c, plane] = 1
    legal = (planes[0, 0].sum(1) == 0).astype(np.int8)[None]
    return torch.as_tensor(envs.obs_layout.pack({"observation": planes, "action_mask": legal}, batch=True))


def test_tactics_count_the_immediate_wins_taken_and_the_threats_blocked():
    envs = make_envs(C4, 1, seed=0)
    three_at_bottom, three_above = [(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (5, 6)]
    tactics = Tactics(None, envs.obs_layout)
    tactics.count(packed(envs, three_at_bottom, three_above), torch.tensor([3]))  # a win, taken
    tactics.count(packed(envs, three_at_bottom, three_above), torch.tensor([4]))  # a win, missed
    tactics.count(packed(envs, three_above, three_at_bottom), torch.tensor([3]))  # a threat, blocked
    tactics.count(packed(envs, three_above, three_at_bottom), torch.tensor([6]))  # a threat, missed
    # a win in column 6 and a threat in column 3: blocking instead misses the win, and is no block counted
    tactics.count(packed(envs, [(5, 6), (4, 6), (3, 6)], three_at_bottom), torch.tensor([3]))
    tactics.count(packed(envs, [(5, 6)], [(5, 0)]), torch.tensor([0]))  # neither
    assert tactics.summary() == {
        "wins": 3, "wins_taken": 1, "win_taken_rate": 1 / 3, "threats": 2, "blocked": 1, "blocked_rate": 0.5,
    }  # fmt: skip
    envs.close()


def test_eval_against_the_lookahead_says_how_often_the_agent_takes_its_wins_and_blocks(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    proxima.train(**TINY, run_dir=run_dir)
    assert proxima.commands.main(["eval", run_dir, "--opponent", "lookahead", "--episodes", "20"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(
        r"immediate wins taken: \d+\.\d% of \d+; the opponent's immediate wins blocked \(where it had none\): "
        r"\d+\.\d% of \d+",
        out[-1],
    ), out
    saved = json.loads(open(os.path.join(run_dir, "eval.json")).read())
    assert set(saved["tactics"]) == {
        "wins",
        "wins_taken",
        "win_taken_rate",
        "threats",
        "blocked",
        "blocked_rate",
    }


def test_rescore_best_of_a_self_play_run_plays_each_candidate_on_its_own_games(tmp_path):
    """The self-play env takes one seed for all its games, and its opponents draw from one generator: the
    candidates are not played on one env of all their games, and the best keeps its own games' score."""
    from proxima.run.callbacks import Evaluation
    from proxima.run.evaluate import run_episodes

    run = tmp_path / "run"
    rescored = dict(eval_every=1, eval_episodes=4, save_best=True, rescore_best=2, rescore_episodes=6)
    proxima.train(**TINY, **rescored, run_dir=str(run))
    saved = json.loads((run / "best" / "agent.json").read_text())
    assert len(saved["rescored"]) == 2
    best = proxima.load(str(run / "best"))
    evaluation = Evaluation(every=1, episodes=4)
    evaluation.open(proxima.PPOArgs.of(env_id=C4), best.device)
    returns = run_episodes(best.model, evaluation.envs, 6, deterministic=True, seed=evaluation.rescore_seed)
    assert returns.mean() == saved["rescore_return"]
    evaluation.close(None)


SHORT = {
    "env_id": C4, "num_envs": 16, "num_steps": 64, "total_timesteps": 20480, "hidden_sizes": (64, 64),
    "learning_rate": 1e-3, "self_play_every": 4, "quiet": True, "report": False, "plot": False,
}  # fmt: skip


def test_a_short_self_play_run_beats_the_random_player(tmp_path):
    """20k steps, deterministic play: 0.875 to 0.92 of 200 games won on seeds 1, 2 and 3."""
    agent = proxima.train(**SHORT, run_dir=str(tmp_path / "run"), seed=1)
    _, summary = play_against(agent, "random", 200, seed=0, deterministic=True)
    assert summary["win_rate"] > 0.7, summary


def test_check_env_says_what_a_self_play_game_becomes_and_steps_it_with_legal_moves(capsys):
    """check-env reads a self-play game from its own backend (no Gymnasium id), and its random steps draw
    among the mask's legal moves: the env refuses an illegal one."""
    assert proxima.commands.main(["check-env", "selfplay:pettingzoo.classic.connect_four_v3"]) == 0
    out = capsys.readouterr().out
    assert "action mask from action_mask" in out and "backend: selfplay (the only one that runs" in out
    assert "proxima will train on selfplay:pettingzoo.classic.connect_four_v3" in out


def test_the_board_cnn_sees_connect_fours_board_as_a_board_and_learns(tmp_path):
    """``--encoder board-cnn``: the 6x7 board through 3x3 convolutions that keep its size (32 features a cell),
    the mask no feature; chosen by name only (auto stays multi-input), refused where there is no board, and
    a short self-play run with it beats the random player; its agent comes back with the encoder."""
    from proxima.base.spaces import ObsLayout
    from proxima.policy.encoders import BoardCNN, choose_encoder, encoder_for, make_encoder

    envs = make_envs(C4, 2, seed=0)
    layout = envs.obs_layout
    assert encoder_for(layout) == "multi-input" and choose_encoder("board-cnn", layout) == "board-cnn"
    encoder = make_encoder("board-cnn", layout)
    obs = envs.reset()
    envs.close()
    assert encoder.features_dim == 32 * 6 * 7 and encoder(obs).shape == (2, 32 * 6 * 7)
    # a piece changes the features of the cells within 3 of it only (three 3x3 layers), and theirs do change
    part = next(p for p in layout.parts if p.path == ("observation",))
    placed = obs[:1].clone()
    placed[0, part.offset + (5 * 7 + 0) * 2] = 1  # a piece of the player to move, bottom left
    with torch.no_grad():
        moved = (encoder(placed) != encoder(obs[:1])).view(32, 6, 7).any(0)
    near = torch.zeros(6, 7, dtype=torch.bool)
    near[2:, :4] = True
    assert torch.equal(moved, near)
    flat = gym.spaces.Dict({"v": gym.spaces.Box(-1, 1, (4,)), "m": gym.spaces.MultiBinary(3)})
    with pytest.raises(UserError, match="board-cnn.*a board, a part of shape"):
        choose_encoder("board-cnn", ObsLayout(flat))
    agent = proxima.train(**SHORT, encoder="board-cnn", run_dir=str(tmp_path / "run"), seed=1)
    assert isinstance(proxima.load(str(tmp_path / "run")).model.encoder, BoardCNN)
    _, summary = play_against(agent, "random", 200, seed=0, deterministic=True)
    assert summary["win_rate"] > 0.7, summary


def test_drop_columns_reads_each_columns_landing_cell_and_learns(tmp_path):
    """``--encoder drop-columns``: a column's features are the convolutions' channels at the cell where a piece
    dropped into it lands (the lowest empty cell; a full column's top cell), checked against a loop over the
    boards of random games; then each channel's mean and max over the board. A short self-play run with it
    beats the random player, and its agent comes back with the encoder."""
    from proxima.policy.encoders import DropColumns, choose_encoder, make_encoder

    envs = make_envs(C4, 8, seed=0)
    layout = envs.obs_layout
    assert choose_encoder("drop-columns", layout) == "drop-columns"
    encoder = make_encoder("drop-columns", layout)
    rows, generator = [envs.reset()], torch.Generator().manual_seed(0)
    for _ in range(40):
        legal = torch.stack([torch.as_tensor(mask(envs, row)) for row in rows[-1]]).float()
        rows.append(envs.step(torch.multinomial(legal, 1, generator=generator).squeeze(1)).obs)
    envs.close()
    obs = torch.cat(rows)
    part = next(p for p in layout.parts if p.path == ("observation",))
    (convs,) = encoder.cnns.values()
    boards = obs[:, part.span].reshape(-1, 6, 7, 2)
    with torch.no_grad():
        features = encoder(obs)
        planes = boards.permute(0, 3, 1, 2)
        cells = convs.convs(torch.cat([planes, torch.ones_like(planes[:, :1])], 1))  # (B, 32, 6, 7)
    assert features.shape == (len(obs), 32 * 7 + 2 * 32)
    full_columns = 0
    for b in range(len(obs)):
        for c in range(7):
            empty = [r for r in range(6) if boards[b, r, c].sum() == 0]
            landing = max(empty) if empty else 0
            full_columns += not empty
            column = features[b, : 32 * 7].view(32, 7)[:, c]
            torch.testing.assert_close(column, cells[b, :, landing, c])
    assert full_columns > 0  # 40 random moves of 8 games fill some columns
    torch.testing.assert_close(features[:, 32 * 7 : 32 * 8], cells.mean((2, 3)))
    torch.testing.assert_close(features[:, 32 * 8 :], cells.amax((2, 3)))
    agent = proxima.train(**SHORT, encoder="drop-columns", run_dir=str(tmp_path / "run"), seed=1)
    assert isinstance(proxima.load(str(tmp_path / "run")).model.encoder, DropColumns)
    _, summary = play_against(agent, "random", 200, seed=0, deterministic=True)
    assert summary["win_rate"] > 0.7, summary
