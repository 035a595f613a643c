"""The VMAS backend (proxima.envs.vmas_backend) against VMAS itself: the same observations, rewards and flags for
the same actions, packed as the multi-agent design says (checked with ObsLayout.pack), same-step resets,
terminations apart from truncations, reproducible seeds, and exact resume."""

import os
import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import load, save

from proxima.base.errors import UserError
from proxima.envs import make_vec_env
from proxima.envs.registry import resolve_backend

vmas = pytest.importorskip("vmas")
from vmas.simulator.environment.environment import Environment  # noqa: E402

from proxima.envs.vmas_backend import TASK_DEFAULTS, _seeded_states  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VMAS's and gym's deprecation warnings
        yield


def make(scenario: str, num_envs: int, seed: int = 0, **kwargs):
    return make_vec_env(f"vmas:{scenario}", num_envs, seed=seed, env_kwargs=kwargs)


def raw_vmas(scenario: str, num_envs: int, seed: int, **kwargs):
    """VMAS itself, with the backend's task settings and from the generator states the backend starts from."""
    Environment.vmas_random_state[:] = _seeded_states(seed, torch.device("cpu"))[:3]
    kwargs = {**TASK_DEFAULTS.get(scenario, {}), **kwargs}
    return vmas.make_env(scenario, num_envs=num_envs, seed=seed, terminated_truncated=True, **kwargs)


def expected_rows(envs, observations: list) -> torch.Tensor:
    """The rows as ObsLayout.pack lays out the design's Dict: own observation (zero-padded), agent index, every
    agent's observation side by side, and the mask of each agent's actions where they differ."""
    obs = [o.numpy() for o in observations]
    size = max(o.shape[1] for o in obs)
    own = np.stack([np.pad(o, ((0, 0), (0, size - o.shape[1]))) for o in obs], axis=1)
    games, agents = own.shape[:2]
    rows = {
        "obs": own.reshape(games * agents, size),
        "agent": np.tile(np.arange(agents), games),
        "state": np.repeat(own.reshape(games, agents * size), agents, axis=0),
    }
    if envs.obs_layout.mask is not None:
        counts = [space.n for space in envs.env.action_space.spaces]
        mask = np.arange(max(counts))[None, :] < np.array(counts)[:, None]
        rows["action_mask"] = np.tile(mask, (games, 1))
    return torch.from_numpy(envs.obs_layout.pack(rows, batch=True))


def random_actions(envs, generator: torch.Generator) -> torch.Tensor:
    """Actions of the rows, each within its agent's own range."""
    space = envs.single_action_space
    if envs.continuous:
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        return low + (high - low) * torch.rand(envs.num_envs, space.shape[0], generator=generator)
    counts = torch.tensor([s.n for s in envs.env.action_space.spaces]).repeat(envs.num_games)
    return torch.randint(0, 1 << 20, (envs.num_envs,), generator=generator) % counts


def per_agent(envs, actions: torch.Tensor) -> list:
    games, agents = envs.num_games, envs.num_agents
    if not envs.continuous:
        return list(actions.view(games, agents).unbind(1))
    dims = [s.shape[0] for s in envs.env.action_space.spaces]
    return [actions.view(games, agents, -1)[:, a, :dim] for a, dim in enumerate(dims)]


def play_both(scenario: str, num_envs: int, steps: int, seed: int = 0, **kwargs):
    """Step the backend and VMAS itself with the same actions, checking every step; the backend's Steps and
    how many games ended at each step."""
    continuous = kwargs.pop("continuous_actions", True)
    envs = make(scenario, num_envs, seed, continuous_actions=continuous, **kwargs)
    raw = raw_vmas(scenario, num_envs, seed, continuous_actions=continuous, **kwargs)
    assert torch.equal(envs.reset(), expected_rows(envs, raw.reset(seed=seed)))
    generator, taken, ended = torch.Generator().manual_seed(seed), [], []
    for _ in range(steps):
        actions = random_actions(envs, generator)
        step = envs.step(actions)
        obs, rewards, terminated, truncated, _ = raw.step(per_agent(envs, actions))
        rows_of = lambda flags: flags.repeat_interleave(envs.num_agents)  # noqa: E731
        assert torch.equal(step.final_obs, expected_rows(envs, obs))
        assert torch.equal(step.reward, torch.stack(rewards, dim=1).reshape(-1))
        assert torch.equal(step.terminated, rows_of(terminated))
        assert torch.equal(step.truncated, rows_of(truncated))
        assert step.alive is None
        done = terminated | truncated
        if done.all():
            obs = raw.reset()
        elif done.any():
            for i in done.nonzero().flatten().tolist():
                raw.reset_at(i)
            obs = raw.get_from_scenario(
                get_observations=True, get_rewards=False, get_infos=False, get_dones=False
            )[0]
        assert torch.equal(step.obs, expected_rows(envs, obs))
        taken.append(step)
        ended.append(int(done.sum()))
    return envs, taken, ended


@pytest.mark.parametrize(
    "scenario, kwargs",
    [
        ("navigation", {}),  # BenchMARL's navigation: 3 agents, continuous actions
        ("balance", {"n_agents": 2}),
        # two kinds of agent, observations of 3 and 11 (padded), 27 and 9 discrete actions (masked)
        ("simple_speaker_listener", {"continuous_actions": False}),
    ],
)
def test_rows_are_vmas_own_steps_packed_as_the_design_says(scenario, kwargs):
    envs, steps, ended = play_both(scenario, 3, 9, max_steps=4, **kwargs)
    assert envs.num_envs == 3 * envs.num_agents and envs.agents.num_envs == 3
    assert list(envs.single_observation_space.spaces) == [
        "obs",
        "agent",
        "state",
        *(["action_mask"] if envs._mask is not None else []),
    ]
    assert ended == [0, 0, 0, 3, 0, 0, 0, 3, 0]  # the time limit ends every game at once


def test_speaker_and_listener_are_two_kinds_with_their_extra_actions_masked():
    envs = make("simple_speaker_listener", 2, continuous_actions=False)
    assert envs.agents.names == ("speaker_0", "listener_0") and envs.agents.kinds == (0, 1)
    assert envs.single_action_space.n == 27 and envs.obs_layout.mask == "action_mask"
    mask = envs.reset()[:, envs.obs_layout.mask_part.span]
    assert mask.sum(1).tolist() == [27, 9, 27, 9]


def test_time_limit_truncates_and_the_same_step_starts_the_next_episode():
    envs, steps, _ = play_both("navigation", 2, 4, max_steps=4)
    last = steps[-1]
    assert last.truncated.all() and not last.terminated.any()
    assert not torch.equal(
        last.final_obs, last.obs
    )  # final_obs: the ended episode's; obs: the next one's first
    assert all(torch.equal(step.final_obs, step.obs) for step in steps[:-1])


def test_a_scenario_own_end_terminates_and_resets_only_its_games():
    # buzz_wire ends a game when an agent touches the wire: under these random actions, at different steps
    envs, steps, ended = play_both("buzz_wire", 8, 30, max_steps=20)
    terminated = torch.stack([step.terminated for step in steps]).view(30, 8, 2).any(2)
    truncated = torch.stack([step.truncated for step in steps]).view(30, 8, 2).any(2)
    assert (terminated & ~truncated).any()  # a termination that is not the time limit
    assert truncated.any()
    assert any(0 < count < 8 for count in ended)  # some games reset, the others went on (reset_at)


def test_defaults_are_benchmarl_task_settings_and_env_kwargs_override_them():
    navigation = make("navigation", 2)
    assert navigation.agents.num_agents == 3 and navigation.env.max_steps == 100
    assert navigation.env.scenario.shared_rew is False and navigation.continuous
    assert make("balance", 2).agents.num_agents == 4
    other = make("navigation", 2, n_agents=2, max_steps=7, shared_rew=True)
    assert other.agents.num_agents == 2 and other.env.max_steps == 7 and other.env.scenario.shared_rew is True
    assert resolve_backend("vmas:navigation") == "vmas"


@pytest.mark.parametrize(
    "env_id, kwargs, says",
    [
        ("vmas:navigaton", {}, "unknown VMAS scenario 'navigaton'"),
        ("vmas:navigation", {"n_agentz": 2}, "takes no such setting"),
        ("vmas:navigation", {"max_steps": 0}, "max_steps must be a positive integer"),
        ("vmas:navigation", {"continuous_actions": "yes"}, "continuous_actions must be true or false"),
    ],
)
def test_bad_ids_and_settings_are_refused_in_one_line(env_id, kwargs, says):
    with pytest.raises(UserError, match=says) as caught:
        make_vec_env(env_id, 2, env_kwargs=kwargs or None)
    assert "\n" not in str(caught.value)


def test_a_seed_gives_the_same_episodes_whatever_runs_beside_it():
    def play(envs, others=()):
        generator, rows = torch.Generator().manual_seed(5), [envs.reset()]
        for _ in range(6):
            rows.append(envs.step(random_actions(envs, generator)).obs)
            for other in others:  # another VMAS env in the same process draws from its own generators
                other.step(random_actions(other, torch.Generator().manual_seed(9)))
        return torch.stack(rows)

    first = play(make("navigation", 3, seed=1, max_steps=4))
    assert torch.equal(
        first, play(make("navigation", 3, seed=1, max_steps=4), [make("navigation", 3, seed=2)])
    )
    assert not torch.equal(first, play(make("navigation", 3, seed=2, max_steps=4)))
    torch_state = torch.random.get_rng_state()
    envs = make("navigation", 3, seed=1, max_steps=4)
    envs.step(random_actions(envs, torch.Generator()))
    assert torch.equal(envs.reset(seed=1), first[0])  # a seeded reset starts over
    assert torch.equal(torch.random.get_rng_state(), torch_state)  # and leaves the trainer's generator alone


def test_the_step_path_never_goes_through_numpy(monkeypatch):
    envs = make("navigation", 2, max_steps=2)
    envs.reset()

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor went through numpy")

    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    monkeypatch.setattr(torch.Tensor, "__array__", refuse)
    for _ in range(3):  # the second step ends the games and resets them
        envs.step(torch.zeros(envs.num_envs, 2))


@pytest.mark.parametrize(
    "scenario, kwargs",
    [
        ("navigation", {}),
        # torch distributions kept by the scenario; a coarse grid, as each reset evaluates them in every cell
        ("sampling", {"continuous_actions": False, "grid_spacing": 0.25}),
        ("simple_push", {}),  # which landmark is the goal: a reference to an object, drawn at each reset
        ("buzz_wire", {}),  # games that end at different steps
    ],
)
def test_a_restored_env_continues_the_very_same_episodes(scenario, kwargs):
    def rollout(envs, generator, steps):
        return [envs.step(random_actions(envs, generator)) for _ in range(steps)]

    envs = make(scenario, 4, seed=0, max_steps=5, **kwargs)
    envs.reset()
    generator = torch.Generator().manual_seed(1)
    rollout(envs, generator, 7)
    state = load(save(envs.state_dict()))  # through safetensors, as a checkpoint keeps it
    actions = generator.get_state()
    expected = rollout(envs, generator, 9)

    fresh = make(scenario, 4, seed=3, max_steps=5, **kwargs)
    fresh.reset()
    generator.set_state(actions)
    assert not torch.equal(fresh.step(random_actions(fresh, generator)).obs, expected[0].obs)
    fresh.load_state_dict(state)
    generator.set_state(actions)
    for got, want in zip(rollout(fresh, generator, 9), expected, strict=True):
        for field in ("obs", "reward", "terminated", "truncated", "final_obs"):
            assert torch.equal(getattr(got, field), getattr(want, field)), field


def test_a_state_of_other_settings_is_refused_in_one_line():
    state = make("navigation", 4).state_dict()
    with pytest.raises(UserError, match="does not fit this vmas:navigation env"):
        make("navigation", 2).load_state_dict(state)
    with pytest.raises(UserError, match="does not fit"):
        make("navigation", 4, n_agents=2).load_state_dict(state)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_callers_generator_is_left_alone_and_resume_is_exact():
    torch.cuda.init()
    callers = torch.cuda.get_rng_state()
    envs = make_vec_env("vmas:navigation", 4, seed=0, device="cuda", env_kwargs={"max_steps": 5})
    generator = torch.Generator().manual_seed(1)
    envs.reset(seed=3)  # VMAS seeds with torch.manual_seed, which reseeds every CUDA device
    for _ in range(7):
        envs.step(random_actions(envs, generator).cuda())
    assert torch.equal(torch.cuda.get_rng_state(), callers)
    state = {key: value.cpu() for key, value in envs.state_dict().items()}
    actions = [random_actions(envs, generator).cuda() for _ in range(6)]
    expected = [envs.step(a) for a in actions]
    fresh = make_vec_env("vmas:navigation", 4, seed=5, device="cuda", env_kwargs={"max_steps": 5})
    fresh.reset()
    fresh.load_state_dict(state)
    for a, want in zip(actions, expected, strict=True):
        got = fresh.step(a)
        assert torch.equal(got.obs, want.obs) and torch.equal(got.reward, want.reward)


def test_video_records_game_0_from_its_reset_to_its_end(tmp_path):
    pytest.importorskip("moviepy")
    import imageio.v3 as iio

    envs = make_vec_env("vmas:navigation", 2, seed=0, env_kwargs={"max_steps": 4}, video_dir=str(tmp_path),
                        video_episodes=1)  # fmt: skip
    envs.reset()
    moves = torch.ones(envs.num_envs, 2)  # every agent pushes up and right
    for _ in range(6):  # one episode of 4 steps, then 2 steps of the next, which is not recorded
        envs.step(moves)
    envs.close()
    assert os.listdir(tmp_path) == ["rl-video-episode-0.mp4"]
    frames = iio.imread(tmp_path / "rl-video-episode-0.mp4")
    assert frames.shape[0] == 5 and frames.shape[-1] == 3  # its reset and its 4 steps
    assert not (frames[0] == frames[-1]).all()  # the agents moved, and each frame shows where they are
    with pytest.raises(UserError, match=r"the vmas backend records game 0 only, not games \[1\]"):
        make_vec_env("vmas:navigation", 2, video_dir={1: str(tmp_path)})


def test_a_video_resumes_from_the_restored_game_and_the_saved_state_is_the_same_with_or_without_one(tmp_path):
    pytest.importorskip("moviepy")
    moves = torch.ones(6, 2)
    played = make_vec_env("vmas:navigation", 2, seed=0, env_kwargs={"max_steps": 50})
    played.reset()
    for _ in range(4):
        played.step(moves)
    state = played.state_dict()
    restored = make_vec_env(
        "vmas:navigation", 2, seed=1, env_kwargs={"max_steps": 50}, video_dir=str(tmp_path)
    )
    restored.reset()  # a fresh episode, drawn, then replaced by the saved one
    restored.load_state_dict(state)
    assert set(restored.state_dict()) == set(state)  # what VMAS's renderer set is left out
    # the video starts again from the restored game, not the fresh one drawn at the reset (VMAS's renderer draws
    # the same state to within a few pixels; the fresh game differs on average by several grey levels)
    frames = restored._video.frames
    distance = lambda a, b: np.abs(a.astype(float) - b.astype(float)).mean()  # noqa: E731
    fresh = make_vec_env("vmas:navigation", 2, seed=1, env_kwargs={"max_steps": 50})
    fresh.reset()
    assert len(frames) == 1 and distance(frames[0], played._draw()) < 0.1 < 1 < distance(
        frames[0], fresh._draw()
    )
    restored.step(moves)
    assert len(restored._video.frames) == 2


def test_a_video_of_a_game_that_goes_on_stops_at_max_frames(tmp_path, monkeypatch):
    pytest.importorskip("moviepy")
    from proxima.envs import recorder

    monkeypatch.setattr(recorder, "MAX_FRAMES", 3)
    envs = make_vec_env("vmas:navigation", 1, seed=0, env_kwargs={"max_steps": None}, video_dir=str(tmp_path))
    envs.reset()
    for _ in range(5):
        envs.step(torch.zeros(3, 2))
    assert os.listdir(tmp_path) == ["rl-video-episode-0.mp4"] and envs._video.frames is None  # saved at 3
    envs.close()


def test_sampling_is_drawn_though_vmas_colours_it_through_a_function_matplotlib_removed(tmp_path):
    pytest.importorskip("moviepy")
    pytest.importorskip("matplotlib")
    envs = make_vec_env("vmas:sampling", 1, seed=0, env_kwargs={"max_steps": 2}, video_dir=str(tmp_path),
                        video_episodes=1)  # fmt: skip
    envs.reset()
    for _ in range(2):
        envs.step(torch.zeros(3, 2))
    envs.close()
    assert os.listdir(tmp_path) == ["rl-video-episode-0.mp4"]
