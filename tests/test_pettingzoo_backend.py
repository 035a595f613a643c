"""The PettingZoo backend (proxima.envs.pettingzoo_backend): E games of A agents as E * A rows that match
PettingZoo's own env step for step, agents that leave, agents of two kinds, masks, and one-line refusals."""

from __future__ import annotations

import functools
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")
from pettingzoo import ParallelEnv  # noqa: E402

from proxima.base.errors import UserError  # noqa: E402
from proxima.base.spaces import MASK_KEY  # noqa: E402
from proxima.envs import make_envs, make_vec_env  # noqa: E402

RUNNERS = ("runner_0", "runner_1")


class Chase(ParallelEnv):
    """Two runners (Box(3) observations, Discrete(3) moves: left, stay, right) walk an integer line towards 0
    and terminate there; a scout (Box(5), Discrete(2)) leaves the game after ``scout_steps``; everyone still
    there is truncated after ``max_cycles``. A runner may not move right from 2 or beyond: its mask, in the info
    or (``mask_in_obs``) in a Dict observation. Written as PettingZoo's custom-env tutorial writes envs."""

    metadata = {"name": "chase_v0", "render_modes": []}

    def __init__(self, max_cycles=8, scout_steps=2, mask_in_obs=False, render_mode=None):
        self.max_cycles, self.scout_steps, self.mask_in_obs = max_cycles, scout_steps, mask_in_obs
        self.possible_agents = [*RUNNERS, "scout"]
        self.render_mode = render_mode
        self.rng = np.random.default_rng()

    @functools.cache  # noqa: B019  (PettingZoo's tutorial caches the spaces so)
    def observation_space(self, agent):
        if agent == "scout":
            return gym.spaces.Box(-10, 10, (5,), np.float32)
        box = gym.spaces.Box(-10, 10, (3,), np.float32)
        if self.mask_in_obs:
            return gym.spaces.Dict({"observation": box, MASK_KEY: gym.spaces.MultiBinary(3)})
        return box

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return gym.spaces.Discrete(2 if agent == "scout" else 3)

    def _mask(self, agent):
        return np.array([1, 1, self.pos[agent] < 2], dtype=np.int8)

    def _observe(self, agent):
        if agent == "scout":
            return np.array([self.t, 1, 2, 3, 4], dtype=np.float32)
        obs = np.array([self.pos[agent], self.t, self.noise], dtype=np.float32)
        return {"observation": obs, MASK_KEY: self._mask(agent)} if self.mask_in_obs else obs

    def _infos(self):
        return {
            a: {} if a == "scout" or self.mask_in_obs else {MASK_KEY: self._mask(a), "pos": self.pos[a]}
            for a in self.agents
        }

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = self.possible_agents[:]
        self.t = 0
        self.pos = {a: int(self.rng.integers(-3, 4)) or 3 for a in RUNNERS}
        self.noise = float(self.rng.normal())
        return {a: self._observe(a) for a in self.agents}, self._infos()

    def step(self, actions):
        self.t += 1
        self.noise = float(self.rng.normal())
        rewards, terminations, truncations = {}, {}, {}
        for agent, action in actions.items():
            assert action in self.action_space(agent), (agent, action)
            if agent == "scout":
                rewards[agent] = 0.5 * int(action)
                terminations[agent] = self.t >= self.scout_steps
            else:
                assert self._mask(agent)[action], "a masked action was taken"
                self.pos[agent] += int(action) - 1
                rewards[agent] = -abs(self.pos[agent]) + self.noise
                terminations[agent] = self.pos[agent] == 0
            truncations[agent] = self.t >= self.max_cycles and not terminations[agent]
        observations = {a: self._observe(a) for a in actions}
        infos = {a: {} if a == "scout" or self.mask_in_obs else {MASK_KEY: self._mask(a)} for a in actions}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos


def _parts(envs, obs: torch.Tensor) -> dict[str, np.ndarray]:
    return {p.path[0]: obs[:, p.span].numpy() for p in envs.obs_layout.parts}


def _padded(values, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.float32)
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    out[: flat.size] = flat
    return out


def _own(obs):
    return obs["observation"] if isinstance(obs, dict) else obs


def _check_rows(envs, obs_t, games, observations, joint=False):
    """Every row of ``obs_t`` against the reference games' own observations (absent agents: zeros) and state
    (``joint``: the env has no ``state()``, so every agent's padded observation side by side)."""
    names, A = envs.agents.names, envs.agents.num_agents
    parts = _parts(envs, obs_t)
    size = parts["obs"].shape[1]
    for e, game in enumerate(games):
        padded = [
            _padded(_own(observations[e][n]), size) if n in observations[e] else np.zeros(size) for n in names
        ]
        state = np.concatenate(padded) if joint else np.asarray(game.state(), dtype=np.float32)
        for i in range(A):
            np.testing.assert_array_equal(parts["obs"][e * A + i], padded[i])
            assert parts["agent"][e * A + i, 0] == i
            np.testing.assert_array_equal(parts["state"][e * A + i], state)


def _random_actions(envs, obs_t, rng) -> torch.Tensor:
    """A valid action for every row under its mask, where the rows have masks."""
    n = envs.single_action_space.n
    mask = _parts(envs, obs_t).get(MASK_KEY, np.ones((len(obs_t), n)))
    return torch.tensor([rng.choice(np.flatnonzero(m)) for m in mask])


def test_simple_spread_matches_pettingzoo_step_for_step():
    simple_spread = pytest.importorskip("mpe2.simple_spread_v3")
    E, seed, cycles = 3, 11, 5
    envs = make_vec_env("pettingzoo:mpe2.simple_spread_v3", E, seed=seed, env_kwargs={"max_cycles": cycles})
    assert envs.num_envs == 9 and envs.agents.names == ("agent_0", "agent_1", "agent_2")
    assert envs.agents.kinds == (0, 0, 0) and envs.single_action_space == gym.spaces.Discrete(5)
    assert list(envs.single_observation_space.spaces) == ["obs", "agent", "state"]
    games = [simple_spread.parallel_env(max_cycles=cycles) for _ in range(E)]
    observations = [g.reset(seed=seed + e)[0] for e, g in enumerate(games)]
    obs_t = envs.reset()
    assert obs_t.dtype == torch.float32 and obs_t.shape == (9, 18 + 1 + 54)
    assert _play_along(envs, obs_t, games, observations, 2 * cycles + 2) == 2 * E
    envs.close()


def _play_along(envs, obs_t, games, observations, steps: int) -> int:
    """Step ``envs`` (games of 3 agents that never leave) and PettingZoo's own ``games`` with the same random
    actions, checking every row's reward, flags and observations; return how many games ended."""
    _check_rows(envs, obs_t, games, observations)
    rng = np.random.default_rng(0)
    resets = 0
    for _ in range(steps):
        actions = _random_actions(envs, obs_t, rng)
        step = envs.step(actions)
        for e, game in enumerate(games):
            moves = {name: int(actions[e * 3 + i]) for i, name in enumerate(envs.agents.names)}
            obs, rewards, terms, truncs, _ = game.step(moves)
            rows = slice(3 * e, 3 * e + 3)
            want = [rewards[n] for n in envs.agents.names]
            np.testing.assert_allclose(step.reward[rows].numpy(), want, rtol=1e-6)
            assert step.terminated[rows].tolist() == [terms[n] for n in envs.agents.names]
            assert step.truncated[rows].tolist() == [truncs[n] for n in envs.agents.names]
            over = not game.agents
            assert step.game_over[rows].tolist() == [over] * 3
            if over:  # same-step reset: final_obs holds the last observations, obs the next game's first
                final_parts = _parts(envs, step.final_obs)
                for i, name in enumerate(envs.agents.names):
                    np.testing.assert_array_equal(final_parts["obs"][3 * e + i], obs[name])
                obs, _ = game.reset()
                resets += 1
            observations[e] = obs
        assert step.alive is None  # MPE's agents never leave early
        _check_rows(envs, step.obs, games, observations)
        obs_t = step.obs
    return resets


def test_custom_env_with_a_leaving_agent_and_two_kinds_matches_step_for_step():
    E, seed = 2, 5
    envs = make_envs(Chase, E, seed=seed, env_kwargs={"max_cycles": 6, "scout_steps": 2})
    assert envs.agents.names == (*RUNNERS, "scout") and envs.agents.kinds == (0, 0, 1)
    assert envs.single_action_space == gym.spaces.Discrete(3)  # the scout's Discrete(2), plus one masked off
    assert envs.obs_layout.mask == MASK_KEY
    assert envs.single_observation_space["obs"].shape == (5,)  # the runners' 3 values padded to the scout's 5
    assert envs.single_observation_space["state"].shape == (15,)
    games = [Chase(max_cycles=6, scout_steps=2) for _ in range(E)]
    observations = [g.reset(seed=seed + e)[0] for e, g in enumerate(games)]
    obs_t = envs.reset()
    _check_rows(envs, obs_t, games, observations, joint=True)
    rng = np.random.default_rng(1)
    A, left_rows, ends = 3, 0, 0
    for _ in range(20):
        actions = _random_actions(envs, obs_t, rng)
        alive_before = [set(g.agents) for g in games]
        step = envs.step(actions)
        for e, game in enumerate(games):
            moves = {n: int(actions[e * A + i]) for i, n in enumerate(envs.agents.names) if n in game.agents}
            obs, rewards, terms, truncs, _ = game.step(moves)
            for i, name in enumerate(envs.agents.names):
                row = e * A + i
                if name in alive_before[e]:
                    assert step.reward[row].item() == pytest.approx(rewards[name])
                    assert step.terminated[row].item() == terms[name]
                    assert step.truncated[row].item() == truncs[name]
                else:  # it left earlier: nothing more of it until its game resets
                    left_rows += 1
                    assert step.reward[row] == 0 and not step.terminated[row] and not step.truncated[row]
            if not game.agents:
                ends += 1
                assert step.game_over[e * A : e * A + A].all()
                obs, _ = game.reset()
                assert step.alive is None or step.alive[e * A : e * A + A].all()
            else:
                assert not step.game_over[e * A : e * A + A].any()
                present = [n in game.agents for n in envs.agents.names]
                alive = [True] * A if step.alive is None else step.alive[e * A : e * A + A].tolist()
                assert alive == present
            observations[e] = {n: obs[n] for n in game.agents} if game.agents else obs
        _check_rows(envs, step.obs, games, observations, joint=True)
        obs_t = step.obs
    assert left_rows > 0 and ends > 0
    envs.close()


def test_a_leaving_agent_row_is_not_alive_and_gets_nothing():
    envs = make_envs(Chase, 1, seed=0, env_kwargs={"max_cycles": 4, "scout_steps": 1})
    obs = envs.reset()
    scout = envs.agents.names.index("scout")
    for t in range(4):
        actions = torch.ones(3, dtype=torch.long)  # the runners stay; the scout plays 1 (0.5 while there)
        step = envs.step(actions)
        if t == 0:  # the scout leaves: its last step is a termination with its reward and last observation
            assert step.terminated[scout] and step.reward[scout] == 0.5
            assert step.alive.tolist() == [True, True, False]
            np.testing.assert_array_equal(_parts(envs, step.final_obs)["obs"][scout], [1, 1, 2, 3, 4])
            assert not _parts(envs, step.obs)["obs"][scout].any()  # not present: zeros
        elif t < 3:
            assert step.alive.tolist() == [True, True, False]
            assert step.reward[scout] == 0 and not step.done[scout]
        else:  # the game is truncated, resets in the same step, and every row is alive again
            assert step.truncated.tolist() == [True, True, False] and step.alive is None
            assert step.game_over.all()
        obs = step.obs
    assert obs.shape == (3, envs.obs_layout.shape[0])
    envs.close()


class Quitters(ParallelEnv):
    """Agents that leave without a flag, as envs in the wild do: b drops out of ``agents`` after 2 steps, and
    the game ends after 4 with every agent gone and none flagged."""

    metadata = {"name": "quitters_v0"}
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return gym.spaces.Box(-10, 10, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents, self.t = ["a", "b"], 0
        return {a: np.float32([0]) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.float32([self.t]) for a in self.agents}
        rewards = {a: 1.0 for a in self.agents}
        self.agents = [] if self.t == 4 else ["a"] if self.t >= 2 else ["a", "b"]
        return obs, rewards, {}, {}, {a: {} for a in obs}


def test_an_agent_that_leaves_without_a_flag_terminates_and_a_game_that_ends_so_is_truncated():
    envs = make_envs(Quitters, 1, seed=0)
    envs.reset()
    flags = []
    for _ in range(4):
        step = envs.step(torch.zeros(2, dtype=torch.long))
        flags.append((step.terminated.tolist(), step.truncated.tolist(), step.alive))
    assert flags[0] == ([False, False], [False, False], None)
    # b's last step: a termination (nothing to bootstrap), with its last observation; then its row is absent
    assert flags[1][:2] == ([False, True], [False, False]) and flags[1][2].tolist() == [True, False]
    assert flags[2][:2] == ([False, False], [False, False]) and flags[2][2].tolist() == [True, False]
    # the game ended without saying why: a cut, not a termination, and it starts again with both agents
    assert flags[3] == ([False, False], [True, False], None) and step.game_over.all()
    envs.close()


def test_dead_rows_take_any_action():
    envs = make_envs(Chase, 1, seed=0, env_kwargs={"max_cycles": 4, "scout_steps": 1})
    envs.reset()
    envs.step(torch.tensor([1, 1, 1]))
    # 2 is not one of the scout's actions, and Chase asserts on one: the row is not alive, so it is never sent
    step = envs.step(torch.tensor([1, 1, 2]))
    assert step.alive.tolist() == [True, True, False]
    envs.close()


@pytest.mark.parametrize("mask_in_obs", [False, True])
def test_masks_from_the_info_or_the_observation_and_the_kind(mask_in_obs):
    envs = make_envs(Chase, 2, seed=3, env_kwargs={"mask_in_obs": mask_in_obs, "max_cycles": 5})
    assert envs.obs_layout.mask == MASK_KEY and envs.obs_layout.mask_part.size == 3
    games = [Chase(mask_in_obs=mask_in_obs, max_cycles=5) for _ in range(2)]
    obs_t = envs.reset()
    for e, game in enumerate(games):
        game.reset(seed=3 + e)
    rng = np.random.default_rng(2)
    for _ in range(12):
        mask = _parts(envs, obs_t)[MASK_KEY]
        for e, game in enumerate(games):
            for i, name in enumerate(envs.agents.names):
                if name == "scout":  # Discrete(2) of the rows' Discrete(3): its third action is masked off
                    want = [1, 1, 0]
                else:  # a runner that left has every action allowed: none of them is sent
                    want = game._mask(name) if name in game.agents else [1, 1, 1]
                np.testing.assert_array_equal(mask[e * 3 + i], want)
        actions = _random_actions(envs, obs_t, rng)
        step = envs.step(actions)
        for e, game in enumerate(games):
            game.step(
                {n: int(actions[e * 3 + i]) for i, n in enumerate(envs.agents.names) if n in game.agents}
            )
            if not game.agents:
                game.reset()
        obs_t = step.obs
    envs.close()


class Reach(ParallelEnv):
    """Box actions of two sizes: agent "arm" moves in 2 dims, "slider" in 1; each is paid its action's sum."""

    metadata = {"name": "reach_v0"}

    def __init__(self, slider_action=None):
        self.possible_agents = ["arm", "slider"]
        self.slider_action = slider_action or gym.spaces.Box(-0.5, 0.5, (1,), np.float32)

    def observation_space(self, agent):
        return gym.spaces.Box(-1, 1, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Box(-1, 1, (2,), np.float32) if agent == "arm" else self.slider_action

    def reset(self, seed=None, options=None):
        self.agents = self.possible_agents[:]
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert actions["arm"].shape == (2,) and actions["slider"].shape == self.slider_action.shape
        assert abs(actions["slider"][0]) <= self.slider_action.high[0]
        rewards = {a: float(np.sum(x)) for a, x in actions.items()}
        no = {a: False for a in self.agents}
        return {a: np.ones(2, np.float32) for a in self.agents}, rewards, no, no, {a: {} for a in self.agents}


def test_box_actions_of_two_sizes_take_their_first_dims():
    envs = make_envs(Reach, 2, seed=0)
    assert envs.agents.kinds == (0, 1)
    space = envs.single_action_space
    assert space.shape == (2,) and space.low.tolist() == [-1, -1] and space.high.tolist() == [1, 1]
    assert envs.obs_layout.mask is None  # Box actions have nothing to mask
    envs.reset()
    step = envs.step(torch.tensor([[0.25, 0.5], [0.9, 0.7]] * 2))  # the slider takes 0.9, clipped to 0.5
    np.testing.assert_allclose(step.reward.numpy(), [0.75, 0.5, 0.75, 0.5])
    envs.close()


def test_a_factory_function_and_env_kwargs_route_to_the_backend():
    envs = make_envs(functools.partial(Chase, max_cycles=3), 2, seed=0, env_kwargs={"scout_steps": 1})
    assert envs.agents.num_envs == 2 and envs.num_envs == 6
    envs.close()


def test_video_records_game_0(tmp_path):
    pytest.importorskip("mpe2")
    pytest.importorskip("moviepy")
    envs = make_vec_env(
        "pettingzoo:mpe2.simple_spread_v3", 2, seed=0, env_kwargs={"max_cycles": 3},
        video_dir=str(tmp_path), video_episodes=1,
    )  # fmt: skip
    envs.reset()
    for _ in range(7):
        envs.step(torch.zeros(6, dtype=torch.long))
    envs.close()
    assert os.listdir(tmp_path) == ["rl-video-episode-0.mp4"]  # the first game only, 3 steps and its reset


@pytest.mark.parametrize(
    "env_id, says",
    [
        ("pettingzoo:", "malformed PettingZoo id"),
        ("pettingzoo:no_such_module_for_proxima", "cannot import"),
        ("pettingzoo:json", "neither parallel_env() nor env()"),
    ],
)
def test_bad_ids_are_one_line(env_id, says):
    with pytest.raises(UserError, match=None) as error:
        make_vec_env(env_id, 2)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_mixed_action_types_and_instances_are_refused_in_one_line():
    with pytest.raises(UserError, match="action spaces of different types") as error:
        make_envs(functools.partial(Reach, slider_action=gym.spaces.Discrete(2)), 2)
    assert "\n" not in str(error.value)
    with pytest.raises(UserError, match="give the function that makes it"):
        make_envs(Chase(), 2)
    with pytest.raises(UserError, match="pettingzoo backend cannot do --async-envs"):
        make_vec_env("pettingzoo:mpe2.simple_spread_v3", 2, backend="pettingzoo", asynchronous=True)


def test_resume_starts_new_games_and_eval_films_the_games(tmp_path, capsys):
    envs = make_envs(Chase, 2, seed=0)
    assert envs.state_dict() is None  # PettingZoo state cannot be saved without pickling
    envs.close()
    pytest.importorskip("mpe2")
    import json

    from proxima.commands import main

    run = tmp_path / "run"
    assert main(["train", "--env-id", "pettingzoo:mpe2.simple_spread_v3", "--env-kwargs", '{"max_cycles": 25}',
                 "--algo", "mappo", "--num-envs", "2", "--num-steps", "16", "--total-timesteps", "64",
                 "--run-dir", str(run), "--quiet", "--no-plot", "--no-report"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--total-timesteps", "128"]) == 0
    said = "".join(capsys.readouterr())
    assert "resuming" in said and "they start new episodes" in said
    steps = [json.loads(line)["global_step"] for line in open(run / "metrics.jsonl")]
    assert steps == [32, 64, 96, 128]
    # proxima eval plays the resumed agent's games and films each as mpe2 renders it: 6 episodes of 3 agents'
    # rows are 2 games, which --video plays in turn on one env
    pytest.importorskip("moviepy")
    assert main(["eval", str(run), "--video", "--episodes", "6"]) == 0
    films = ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    assert sorted(os.listdir(run / "eval-videos")) == films
    assert all((run / "eval-videos" / f).stat().st_size > 0 for f in films)


def test_an_aec_env_enters_where_its_conversion_is_exact():
    simple_spread = pytest.importorskip("mpe2.simple_spread_v3")
    connect_four = pytest.importorskip("pettingzoo.classic.connect_four_v3")
    envs = make_envs(
        functools.partial(simple_spread.env, max_cycles=5), 2, seed=4
    )  # an AEC env, parallelizable: the same games as its own parallel version's, step for step
    games = [simple_spread.parallel_env(max_cycles=5) for _ in range(2)]
    observations = [g.reset(seed=4 + e)[0] for e, g in enumerate(games)]
    assert _play_along(envs, envs.reset(), games, observations, 12) == 4
    envs.close()
    envs = make_envs(connect_four.env, 2, seed=0)  # turn-based: not converted, stepped by turns
    assert envs.agents.turns
    envs.close()


def test_a_turn_based_game_matches_pettingzoos_step_for_step():
    """Connect Four by turns: at each step only the row of the player to move is alive and its action is played;
    every row sees its player's own observation, and both get the game's rewards when it ends, the loser at
    the winner's move. Checked against PettingZoo's AEC env played by hand, over whole games."""
    connect_four = pytest.importorskip("pettingzoo.classic.connect_four_v3")
    envs = make_envs(connect_four.env, 3, seed=0)
    reference = [connect_four.env() for _ in range(3)]
    for game in reference:
        game.reset()
    obs, alive = envs.reset(), envs.alive
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(200):
        for e, game in enumerate(reference):
            mover = envs.agents.names.index(game.agent_selection)
            assert alive[2 * e : 2 * e + 2].tolist() == [mover == 0, mover == 1]
            for i, name in enumerate(envs.agents.names):
                parts = _parts(envs, obs[2 * e + i : 2 * e + i + 1])
                seen = game.observe(name)
                np.testing.assert_array_equal(parts["obs"][0], seen["observation"].reshape(-1))
                np.testing.assert_array_equal(parts[MASK_KEY][0], seen["action_mask"])
        actions = torch.tensor(rng.integers(0, 7, envs.num_envs))
        for e, game in enumerate(
            reference
        ):  # the mover plays a legal move: its row's, or the first legal one
            mover = envs.agents.names.index(game.agent_selection)
            legal = np.flatnonzero(game.observe(game.agent_selection)["action_mask"])
            if actions[2 * e + mover].item() not in legal:
                actions[2 * e + mover] = int(legal[0])
            actions[2 * e + 1 - mover] = 6 - actions[2 * e + 1 - mover]  # the waiting row's: ignored
            game.step(actions[2 * e + mover].item())
        step = envs.step(actions)
        for e, game in enumerate(reference):
            over = all(game.terminations.values())
            for i, name in enumerate(envs.agents.names):
                assert step.reward[2 * e + i].item() == game.rewards[name]
                assert step.terminated[2 * e + i].item() == over
            if over:
                ended += 1
                assert sorted(game.rewards.values()) in ([-1, 1], [0, 0])
                game.reset()
        obs, alive = step.obs, (envs.alive if step.alive is None else step.alive)
    assert ended >= 5
    envs.close()


@pytest.mark.parametrize("flags", [["--algo", "ippo"], ["--algo", "mappo", "--no-share-params"]])
def test_a_turn_based_game_trains_each_player_on_its_own_moves(tmp_path, capsys, flags):
    """Call and answer (tests/fixtures/wild_aec_envs.py): the caller is paid at the answerer's move, while it
    waits. Trained with one shared policy, the caller learns to call card 1 and the answerer to answer it, and
    the value of the caller's move is the 1 it is paid, undiscounted (gamma 0.5 here): the answerer's turn is not
    a step of the caller's."""
    from proxima import commands as cli
    from proxima.run.agent import Agent
    from tests.fixtures.wild_aec_envs import env

    assert cli.main(["check-env", "--env-factory", "tests.fixtures.wild_aec_envs:env"]) == 0
    assert "turn-based: one agent moves at a time" in capsys.readouterr().out
    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", "tests.fixtures.wild_aec_envs:env", *flags, "--num-envs", "8",
            "--num-steps", "15", "--total-timesteps", "1920", "--learning-rate", "0.01", "--gamma", "0.5", "--seed", "1",
            "--torch-threads", "1", "--run-dir", str(run_dir), "--quiet", "--no-report", "--no-plot"]  # fmt: skip
    assert cli.main(argv) == 0
    agent = Agent.load(str(run_dir))
    envs = make_envs(env, 1, seed=0)
    called = envs.reset()[0:1]  # the caller to move
    answering = envs.step(torch.tensor([1, 0])).obs[1:2]  # the answerer, card 1 called
    envs.close()
    with torch.no_grad():
        assert torch.softmax(agent.model.logits(called), -1)[0, 1] > 0.9
        assert torch.softmax(agent.model.logits(answering), -1)[0, 1] > 0.9
        assert agent.model.value(called).item() == pytest.approx(1.0, abs=0.05)


def test_an_env_written_as_pettingzoos_tutorial_writes_one_is_checked_and_trains(tmp_path, capsys):
    """Tuple observations in a MultiDiscrete space, lru_cached spaces, int rewards, ``agents`` emptied at the
    end (tests/fixtures/wild_parallel_envs.py): check-env takes it by --env-factory, and a run on it records
    zero-sum returns (the prisoner's return is minus the guard's in every update's episodes)."""
    import json

    from proxima import commands as cli

    factory = "tests.fixtures.wild_parallel_envs:PrisonerGuard"
    assert cli.main(["check-env", "--env-factory", factory]) == 0
    out = capsys.readouterr().out
    assert "2 agents a game (prisoner, guard)" in out and "each agent observes 147 values" in out
    assert f"proxima will train on {factory} (proxima train --env-factory {factory})" in out
    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", factory, "--algo", "ippo", "--num-envs", "4", "--num-steps", "64",
            "--total-timesteps", "2048", "--run-dir", str(run_dir), "--quiet", "--no-report", "--no-plot"]  # fmt: skip
    assert cli.main(argv) == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    ended = [r for r in records if "episodic_return/prisoner" in r]
    assert ended, "no episode ended in 2048 steps"
    for r in ended:
        assert r["episodic_return/prisoner"] == pytest.approx(-r["episodic_return/guard"])
    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert {e["return"] for e in episodes} <= {-1.0, 0.0, 1.0} and max(e["length"] for e in episodes) <= 102


def test_a_discrete_observation_outside_its_space_is_refused_in_one_line(tmp_path, capsys):
    """CellsFromOne declares cells 1 to 49 and gives 0 to 48: flattening would one-hot cell 0 as cell 49."""
    from proxima import commands as cli

    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", "tests.fixtures.wild_parallel_envs:CellsFromOne", "--algo", "ippo",
            "--num-envs", "2", "--num-steps", "16", "--total-timesteps", "64", "--run-dir", str(run_dir), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is 0, not one of its space's values, the integers 1 to 49" in err[0], err
    assert not run_dir.exists()


def test_check_env_takes_a_gymnasium_env_factory_and_wants_one_env(capsys):
    from proxima import commands as cli

    assert cli.main(["check-env", "--env-factory", "tests.fixtures.wild_envs:NoRenderMode"]) == 0
    out = capsys.readouterr().out
    assert "backend: gymnasium" in out and "action head: CategoricalHead" in out
    assert cli.main(["check-env"]) == 2
    assert "give the env to check: an ENV_ID, or --env-factory MODULE:NAME" in capsys.readouterr().err
    assert (
        cli.main(["check-env", "CartPole-v1", "--env-factory", "tests.fixtures.wild_envs:NoRenderMode"]) == 2
    )


def test_a_turn_based_team_reward_is_shared_with_the_players_who_wait():
    """--team-reward in a turn-based game: every player of the game is in the team, the one waiting too (the
    team's reward is not the mover's alone). Call and answer: both players get the mean of what the answer
    paid the caller (1 for card 1) and the answerer (1 for the caller's card)."""
    from proxima.policy.distributions import make_head
    from proxima.policy.networks import NetworkSettings, NetworkSpec, make_policy
    from proxima.run.multiagent import MultiAgentCollector
    from tests.fixtures.wild_aec_envs import env

    envs = make_envs(env, 3, seed=0)
    head = make_head(envs.single_action_space)
    spec = NetworkSpec(head.logits_dim, envs.obs_layout.shape, NetworkSettings(norm_value=False),
                       obs_layout=envs.obs_layout.to_json(), agents=envs.agents.to_json())  # fmt: skip
    model = make_policy(spec, head)
    collector = MultiAgentCollector(envs, 6, 0.99, model, seed=0, team_reward=True)
    collector.collect(model)
    envs.close()
    buf = collector.buffer
    rewards, actions = buf.rewards.view(6, 3, 2), buf.actions.view(6, 3, 2)
    card, answer = actions[0::2, :, 0], actions[1::2, :, 1]  # the caller moves at even steps
    paid = ((card == 1).float() + (answer == card).float()) / 2
    assert torch.equal(rewards[1::2, :, 0], paid) and torch.equal(rewards[1::2, :, 1], paid)
    assert not rewards[0::2].any()


@pytest.mark.parametrize("wrapped", [False, True], ids=["raw-env", "wrapped-as-classic-games-are"])
def test_set_attr_reaches_a_turn_based_games_env(wrapped):
    """``set_attr`` changes the AEC env itself, not the ``Turns`` around it nor a PettingZoo wrapper around the
    env (where it would shadow the game's attribute): what ``call`` then reads, and what the env plays with.
    Call and answer: the card set is the one the answerer sees."""
    from tests.fixtures.wild_aec_envs import env, raw_env

    envs = make_envs(env if wrapped else raw_env, 2, seed=0)
    envs.reset()
    envs.set_attr("card", [0, 1])
    assert [game.env.unwrapped.card for game in envs.games] == [0, 1] and envs.call("card") == (0, 1)
    seen = [obs["observation"].tolist() for obs in envs.call("observe", "answerer")]
    assert seen == [[1, 0, 0], [0, 1, 0]]
    envs.close()


def test_a_player_put_out_of_a_turn_based_game_leaves_and_the_next_mover_sees_its_turn():
    """Last stand (tests/fixtures/wild_aec_envs.py): a's move 1 puts c out, and the env makes c the agent to
    move until its None move removes it. The rows after the step are the game after that removal: b moves, with
    the mask of its turn; c's final observation is the one it left with."""
    from tests.fixtures.wild_aec_envs import last_stand_env

    envs = make_envs(last_stand_env, 1, seed=0)
    span = envs.obs_layout.mask_part.span
    obs = envs.reset()
    assert obs[:, span].tolist() == [[1, 1], [0, 0], [0, 0]]
    step = envs.step(torch.tensor([1, 0, 0]))
    assert step.alive.tolist() == [False, True, False]  # b moves next
    assert step.obs[1, span].tolist() == [1, 1] and step.obs[0, span].tolist() == [0, 0]
    assert step.reward.tolist() == [0, 0, -1] and step.terminated.tolist() == [False, False, True]
    assert step.final_obs[2, span].tolist() == [1, 1]  # c, as it left: the agent to move was c itself then
    step = envs.step(torch.tensor([0, 0, 0]))  # b's move ends the game, which starts again with a to move
    assert step.terminated[:2].all() and step.alive.tolist() == [True, False, False]
    envs.close()


def test_pettingzoos_own_tutorial_game_trains_though_it_keeps_its_observations_in_self_state(
    tmp_path, capsys
):
    """rps_v2, the tutorial's rock-paper-scissors, sets ``self.state`` to a dict, which hides ``state()``: the
    global state is then every agent's observation side by side, as for an env without ``state()``."""
    import json

    from proxima import commands as cli

    assert cli.main(["check-env", "pettingzoo:pettingzoo.classic.rps_v2"]) == 0
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", "pettingzoo:pettingzoo.classic.rps_v2", "--algo", "mappo", "--num-envs", "2",
            "--num-steps", "100", "--total-timesteps", "400", "--run-dir", str(run_dir), "--quiet", "--no-report",
            "--no-plot", "--torch-threads", "1"]  # fmt: skip
    assert cli.main(argv) == 0
    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert episodes and {e["length"] for e in episodes} == {15}  # the game's 15 rounds
    at_step = {}
    for e in episodes:  # zero-sum: the returns of the games that end together cancel
        at_step.setdefault(e["global_step"], []).append(e["return"])
    assert all(len(returns) % 2 == 0 and sum(returns) == 0 for returns in at_step.values())
    assert any(r != 0 for e in episodes for r in [e["return"]])


WILD_PARALLEL = "tests.fixtures.wild_parallel_envs:"


@pytest.mark.parametrize(
    "env, code, message, written",
    [
        ("OldReset", 2, "reset() returned a dict; the Parallel API (PettingZoo 1.22 on) returns (observations, "
         "infos)", False),
        ("NoPossibleAgents", 2, "has no possible_agents; a PettingZoo env lists every agent", False),
        ("BoxOfFour", 2, "agent prisoner's observation has 3 values (shape (3,)), but its observation space "
         "Box(0.0, 49.0, (4,), float32) has 4", False),
        ("OldStep", 1, "step() returned 4 values; the Parallel API (PettingZoo 1.22 on) returns (observations, "
         "rewards, terminations, truncations, infos)", True),
        ("NeverRemoves", 1, "flagged prisoner terminated or truncated but left it in env.agents", True),
    ],
)  # fmt: skip
def test_a_parallel_env_that_breaks_the_api_is_one_line(env, code, message, written, tmp_path, capsys):
    """Before the run (its reset: exit 2, nothing written) or in it (its step: exit 1, as a crash)."""
    from proxima import commands as cli

    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", WILD_PARALLEL + env, "--algo", "ippo", "--num-envs", "2", "--num-steps", "64",
            "--total-timesteps", "512", "--run-dir", str(run_dir), "--quiet", "--torch-threads", "1"]  # fmt: skip
    assert cli.main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert run_dir.exists() == written


def test_rewards_as_arrays_of_one_value_train_and_a_missing_observation_is_warned_of_once(tmp_path):
    import json

    from proxima import commands as cli

    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", WILD_PARALLEL + "ArrayRewards", "--algo", "ippo", "--num-envs", "2",
            "--num-steps", "64", "--total-timesteps", "512", "--run-dir", str(run_dir), "--quiet", "--no-report",
            "--no-plot", "--torch-threads", "1"]  # fmt: skip
    assert cli.main(argv) == 0
    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert episodes and {e["return"] for e in episodes} <= {-1.0, 0.0, 1.0}
    argv[2], argv[argv.index(str(run_dir))] = WILD_PARALLEL + "SkipsAnObservation", str(tmp_path / "skips")
    with pytest.warns(
        RuntimeWarning, match="gave no observation for guard, which is still in env.agents"
    ) as said:
        assert cli.main(argv) == 0
    assert len([w for w in said if "gave no observation" in str(w.message)]) == 1
