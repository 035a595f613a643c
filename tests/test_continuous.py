"""Continuous actions: the Gaussian head, action clipping, normalization that travels with the model."""

import json
import math
import signal

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.errors import TrainingInterrupted, UserError
from proxima.envs import env_actions, make_vec_env
from proxima.policy.distributions import (
    GAMMA_TRIES,
    BetaHead,
    DiagGaussianHead,
    TanhGaussianHead,
    gamma_from_uniforms,
    make_head,
)
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.policy.normalization import Normalization, RunningMeanStd
from proxima.run.callbacks import Callback
from proxima.run.rollout import RolloutCollector


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    torch.manual_seed(0)
    head = DiagGaussianHead(3)
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([-0.5, 0.0, 0.7]))
    mean, actions = torch.randn(8, 3), torch.randn(8, 3) * 2
    logprob, entropy = head.log_prob_entropy(mean, actions)
    reference = torch.distributions.Normal(mean, head.log_std.exp())
    torch.testing.assert_close(logprob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    sampled, sampled_logprob = head.sample(mean, head.noise(mean))
    torch.testing.assert_close(sampled_logprob, reference.log_prob(sampled).sum(-1))


def test_gaussian_samples_have_the_head_mean_and_std():
    torch.manual_seed(1)
    head = DiagGaussianHead(2)
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([np.log(0.5), np.log(2.0)]))
    means = torch.tensor([1.0, -3.0]).expand(200_000, 2)
    samples, _ = head.sample(means, head.noise(means))
    torch.testing.assert_close(samples.mean(0), torch.tensor([1.0, -3.0]), atol=0.02, rtol=0)
    torch.testing.assert_close(samples.std(0), torch.tensor([0.5, 2.0]), atol=0.02, rtol=0)
    assert torch.equal(head.mode(torch.tensor([[0.3, 0.4]])), torch.tensor([[0.3, 0.4]]))


def test_make_head_for_box_and_unsupported_spaces():
    assert isinstance(make_head(gym.spaces.Box(-1, 1, (4,))), DiagGaussianHead)
    grid = make_head(gym.spaces.Box(-1, 1, (2, 3)))  # computed flat, given in the space's shape
    assert grid.logits_dim == 6 and grid.action_shape == (2, 3)
    with pytest.raises(UserError, match="not supported"):
        make_head(gym.spaces.Tuple((gym.spaces.Discrete(2),)))


def test_clipping_rule_bounds_and_unbounded_components():
    space = gym.spaces.Box(
        np.array([-1.0, -np.inf], dtype=np.float32), np.array([2.0, np.inf], dtype=np.float32)
    )
    out = env_actions(np.array([[5.0, 1e6], [-5.0, -1e6]], dtype=np.float32), space)
    np.testing.assert_array_equal(out, [[2.0, 1e6], [-1.0, -1e6]])  # finite bounds clip; infinite ones do not
    np.testing.assert_array_equal(env_actions(np.array([3, 0]), gym.spaces.Discrete(4)), [3, 0])


class _RecordingEnv(gym.Env):
    """Box(-1, 1) actions; remembers every action it receives."""

    received: list = []

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-1, 1, (2,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        _RecordingEnv.received.append(np.array(action))
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


def test_buffer_keeps_the_sampled_action_and_the_env_gets_it_clipped():
    if "RecordingBox-v0" not in gym.registry:
        gym.register("RecordingBox-v0", entry_point=_RecordingEnv)
    envs = make_vec_env("RecordingBox-v0", 2, seed=0)
    _RecordingEnv.received = []  # from here: the Gymnasium backend steps a probe env once as it starts
    head = make_head(envs.single_action_space)
    model = ActorCritic(NetworkSpec(head.logits_dim, (2,), NetworkSettings(norm_value=False)), head)
    with torch.no_grad():
        head.log_std.fill_(np.log(3.0))  # std 3: most samples fall outside [-1, 1]
    collector = RolloutCollector(envs, 16, 0.99, model, seed=0)
    collector.collect(model)
    stored = collector.buffer.actions.reshape(-1)
    received = np.concatenate(_RecordingEnv.received).reshape(-1)
    assert stored.abs().max() > 1.5
    np.testing.assert_allclose(received, stored.clamp(-1, 1).numpy(), rtol=1e-6)
    envs.close()


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = [rng.normal(3, 2, size=(n, 3)) for n in (1, 7, 100, 33)]
    rms = RunningMeanStd((3,), epsilon=0.0 + 1e-12)
    for batch in data:
        rms.update(torch.as_tensor(batch))
    everything = np.concatenate(data)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-9)


def test_normalization_clips_and_is_frozen_unless_asked():
    norm = Normalization((2,), norm_obs=True, norm_reward=True, clip_obs=3.0, clip_reward=2.0)
    x = torch.tensor([[0.0, 0.0], [2.0, 4.0]])
    out = norm.obs(x, update=True)
    torch.testing.assert_close(
        norm.obs_rms.mean, torch.tensor([1.0, 2.0], dtype=torch.float64), atol=1e-3, rtol=0
    )
    torch.testing.assert_close(out, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]), atol=1e-3, rtol=0)
    before = norm.obs_rms.mean.clone()
    far = norm.obs(torch.tensor([[100.0, -100.0]]))  # no update: frozen
    assert torch.equal(norm.obs_rms.mean, before)
    torch.testing.assert_close(far, torch.tensor([[3.0, -3.0]]))
    # rewards: divided by the std of the discounted returns seen, then clipped
    r = norm.reward(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(r, torch.tensor([1.0, 1.0]), atol=1e-3, rtol=0)  # std of {1, 3} is 1
    torch.testing.assert_close(
        norm.reward(torch.tensor([50.0]), torch.tensor([0.0]), update=False), torch.tensor([2.0])
    )


def test_normalization_off_is_the_identity():
    norm = Normalization((2,))
    x = torch.randn(4, 2)
    assert norm.obs(x, update=True) is x
    reward = x[:, 0]
    assert norm.reward(reward, x[:, 1]) is reward


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    """One short Pendulum run shared by the tests below: they may read the trained agent but never change it;
    a test that needs to change an agent loads its own from the run directory."""
    run_dir = tmp_path_factory.mktemp("pendulum") / "run"
    agent = proxima.train(
        env_id="Pendulum-v1",
        total_timesteps=4096,
        num_envs=2,
        num_steps=512,
        norm_obs=True,
        norm_reward=True,
        run_dir=str(run_dir),
    )
    state = {name: value.clone() for name, value in agent.model.state_dict().items()}
    yield agent, str(run_dir)
    after = agent.model.state_dict()
    changed = [name for name, value in state.items() if not torch.equal(value, after[name])]
    assert not changed, f"a test changed the shared trained agent: {changed}"


def test_normalization_statistics_survive_the_checkpoint(pendulum_run):
    agent, run_dir = pendulum_run
    loaded = proxima.load(run_dir)
    trained, restored = agent.model.normalization, loaded.model.normalization
    assert trained.obs_rms.count.item() > 4000  # the statistics really were collected
    for name in (
        "obs_rms.mean",
        "obs_rms.var",
        "obs_rms.count",
        "return_rms.mean",
        "return_rms.var",
        "return_rms.count",
    ):
        a, b = trained.get_buffer(name), restored.get_buffer(name)
        assert torch.equal(a, b), name
    assert restored.norm_obs and restored.norm_reward
    obs = np.random.default_rng(0).uniform(-1, 1, size=(16, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True), agent.predict(obs, deterministic=True)
    )


def test_loaded_agent_scores_exactly_as_the_trained_one(pendulum_run):
    agent, run_dir = pendulum_run
    loaded = proxima.load(run_dir)
    a = proxima.evaluate(agent, 4, deterministic=True, seed=3)
    b = proxima.evaluate(loaded, 4, deterministic=True, seed=3)
    np.testing.assert_array_equal(a, b)
    # and the statistics matter: without them the same weights act differently
    loaded.model.normalization.norm_obs = False
    obs = np.random.default_rng(0).uniform(-1, 1, size=(16, 3)).astype(np.float32)
    assert not np.array_equal(loaded.predict(obs, deterministic=True), agent.predict(obs, deterministic=True))


def test_predict_returns_actions_inside_the_bounds(pendulum_run):
    _, run_dir = pendulum_run
    agent = proxima.load(run_dir)  # its own copy: the shared trained agent keeps its log std
    with torch.no_grad():
        agent.model.head.log_std.fill_(2.0)  # std 7.4: most samples fall outside [-2, 2]
    actions = agent.predict(np.zeros((256, 3), dtype=np.float32))
    assert actions.shape == (256, 1) and actions.min() >= -2.0 and actions.max() <= 2.0
    assert (np.abs(actions) == 2.0).mean() > 0.5  # so the bounds really were applied


@pytest.mark.parametrize("env_id", ["MountainCarContinuous-v0", "Hopper-v5", "HalfCheetah-v5"])
def test_trains_saves_and_evaluates_on_continuous_envs(env_id, tmp_path):
    if env_id.endswith("-v5"):
        pytest.importorskip("mujoco")  # the mujoco extra, which make installs
    run_dir = str(tmp_path / "run")
    proxima.train(
        env_id=env_id,
        total_timesteps=1024,
        num_envs=2,
        num_steps=256,
        norm_obs=True,
        norm_reward=True,
        run_dir=run_dir,
    )
    agent = proxima.load(run_dir)
    assert agent.action_space.shape == gym.make(env_id).action_space.shape
    returns = proxima.evaluate(agent, 2, deterministic=True)
    assert returns.shape == (2,) and np.isfinite(returns).all()


def test_cap_std_lowers_only_the_components_above_the_cap():
    head = DiagGaussianHead(3)
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([-2.0, 0.0, 0.5]))
    head.cap_std(0.5)
    torch.testing.assert_close(head.log_std.detach(), torch.tensor([-2.0, math.log(0.5), math.log(0.5)]))


def test_action_std_end_caps_the_std_on_a_falling_schedule(tmp_path):
    # A std ceiling falling evenly in log std from 1 to action_std_end: 0.1 ** (update / updates) after each update
    run_dir = tmp_path / "run"
    agent = proxima.train(env_id="Pendulum-v1", num_envs=4, num_steps=32, total_timesteps=4 * 32 * 5,
                          action_std_end=0.1, ent_coef=0.1, run_dir=str(run_dir), quiet=True)  # fmt: skip
    caps = [json.loads(line)["action_std_cap"] for line in open(run_dir / "metrics.jsonl")]
    np.testing.assert_allclose(caps, [0.1 ** (k / 5) for k in range(1, 6)])
    # the entropy bonus pushes the std up; the cap holds it at the last ceiling, 0.1
    torch.testing.assert_close(agent.model.head.log_std.detach().exp(), torch.full((1,), 0.1))
    assert json.loads((run_dir / "config.json").read_text())["algorithm"]["action_std_end"] == 0.1


class _CtrlCAt(Callback):
    def __init__(self, update: int):
        self.update = update

    def on_update_end(self, run, result) -> None:
        if run.updates_done == self.update:  # as a user's Ctrl-C: a checkpoint after this update, then a stop
            signal.raise_signal(signal.SIGINT)


def test_a_run_with_action_std_end_resumes_exactly(tmp_path):
    # The ceiling depends only on the update count, which the checkpoint restores; native Pendulum resumes exactly
    run = dict(env_id="Pendulum-v1", num_envs=4, num_steps=32, total_timesteps=4 * 32 * 6, action_std_end=0.1,
               ent_coef=0.1, torch_threads=1, plot=False, quiet=True)  # fmt: skip
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    proxima.train(run_dir=str(whole), **run)
    with pytest.raises(TrainingInterrupted):
        proxima.train(run_dir=str(cut), callbacks=[_CtrlCAt(2)], **run)
    assert len((cut / "metrics.jsonl").read_text().splitlines()) == 2
    agent = proxima.train(resume=str(cut), quiet=True)
    times = {"time_s", "sps"}
    metrics = [
        [{k: v for k, v in json.loads(line).items() if k not in times} for line in open(d / "metrics.jsonl")]
        for d in (whole, cut)
    ]
    assert metrics[0] == metrics[1] and metrics[1][-1]["action_std_cap"] == pytest.approx(0.1)
    weights = proxima.load(str(whole)).model.state_dict()
    for key, value in agent.model.state_dict().items():
        assert torch.equal(value, weights[key]), key


def test_action_std_end_refuses_discrete_actions_and_bad_values_in_one_line(tmp_path, capsys):
    from proxima.commands import main

    run_dir = tmp_path / "run"
    assert (
        main(["train", "--env-id", "CartPole-v1", "--action-std-end", "0.1", "--run-dir", str(run_dir)]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert "--action-std-end" in err and "Discrete(2)" in err and "\n" not in err
    assert not run_dir.exists()  # nothing half-written
    # nor the folder --capture-video's recorder makes as the envs are built
    argv = ["train", "--env-id", "CartPole-v1", "--env-backend", "gymnasium", "--capture-video"]
    assert main([*argv, "--action-std-end", "0.1", "--run-dir", str(run_dir)]) == 2
    assert "--action-std-end" in capsys.readouterr().err and not run_dir.exists()
    assert main(["train", "--env-id", "Pendulum-v1", "--action-std-end", "0", "--run-dir", str(run_dir)]) == 2
    assert "--action-std-end must be a standard deviation in (0, 1]" in capsys.readouterr().err


# --- --action-dist beta: a Beta policy stretched to the Box's bounds


def test_beta_log_prob_and_entropy_match_torch_distributions_on_the_stretched_bounds():
    torch.manual_seed(0)
    # float64 bounds, as envs in the wild have them
    space = gym.spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 0.5]), dtype=np.float64)
    head = make_head(space, "beta")
    assert isinstance(head, BetaHead) and head.logits_dim == 4 and head.action_shape == (2,)
    params = torch.randn(8, 4) * 2
    alpha, beta = (
        1 + torch.nn.functional.softplus(params[:, :2]),
        1 + torch.nn.functional.softplus(params[:, 2:]),
    )
    low, scale = torch.tensor([-2.0, 0.0]), torch.tensor([4.0, 0.5])
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Beta(alpha, beta), torch.distributions.AffineTransform(low, scale)
    )
    actions, sampled_logprob = head.sample(params, head.noise(params))
    assert actions.dtype == torch.float32 and ((actions > low) & (actions < low + scale)).all()
    torch.testing.assert_close(sampled_logprob, reference.log_prob(actions).sum(-1))
    logprob, entropy = head.log_prob_entropy(params, actions)
    torch.testing.assert_close(logprob, sampled_logprob)
    # a Beta's entropy plus log(scale): the entropy of the stretched density
    torch.testing.assert_close(
        entropy, (torch.distributions.Beta(alpha, beta).entropy() + scale.log()).sum(-1)
    )
    torch.testing.assert_close(head.mode(params), low + alpha / (alpha + beta) * scale)  # the mean


def test_beta_samples_have_the_mean_and_spread_of_their_concentrations():
    torch.manual_seed(1)
    head = make_head(gym.spaces.Box(-1.0, 1.0, (1,)), "beta")
    # softplus^-1(1) and softplus^-1(3): alpha = 2, beta = 4, so x has mean 1/3 and variance 8/252
    inverse = lambda y: math.log(math.expm1(y))  # noqa: E731
    params = torch.tensor([[inverse(1.0), inverse(3.0)]]).expand(200_000, 2)
    samples, _ = head.sample(params, head.noise(params))
    x = (samples + 1) / 2
    assert x.mean().item() == pytest.approx(1 / 3, abs=0.003)
    assert x.var().item() == pytest.approx(8 / 252, abs=0.001)


def test_gamma_draws_from_uniforms_have_the_moments_of_their_concentration_and_are_each_rows_own():
    # Gamma(a, 1) has mean a and variance a; a = 1 is the slowest case of Marsaglia-Tsang (95% accepted)
    torch.manual_seed(2)
    concentration = torch.tensor([1.0, 2.5, 30.0]).expand(200_000, 3)
    uniforms = torch.rand(200_000, 3 * GAMMA_TRIES * 3, dtype=torch.float64)
    draws = gamma_from_uniforms(concentration, uniforms)
    assert draws.dtype == torch.float64 and bool((draws > 0).all())
    for k, a in enumerate((1.0, 2.5, 30.0)):
        assert draws[:, k].mean().item() == pytest.approx(a, rel=0.01)
        assert draws[:, k].var().item() == pytest.approx(a, rel=0.03)
    # a row's draws depend on its own uniforms and concentrations only: the partition invariance of workers
    rows = torch.tensor([5, 17, 4])
    torch.testing.assert_close(
        gamma_from_uniforms(concentration[rows], uniforms[rows]), draws[rows], rtol=0, atol=0
    )


def test_beta_samples_from_uniforms_follow_the_same_law_as_torch_samples():
    head = make_head(gym.spaces.Box(-2.0, 2.0, (2,)), "beta")
    inverse = lambda y: math.log(math.expm1(y))  # noqa: E731  softplus^-1: alpha = 1 + y
    # component 0: Beta(1, 1) (uniform), component 1: Beta(6, 2.5)
    params = torch.tensor([[inverse(1e-6), inverse(5.0), inverse(1e-6), inverse(1.5)]]).expand(100_000, 4)
    generator = torch.Generator().manual_seed(3)
    noise = head.noise(params, generator)
    assert noise.shape == (100_000, 3 * GAMMA_TRIES * 4)
    ours, logprob = head.sample(params, noise)
    alpha, beta = (1.0 + torch.nn.functional.softplus(params)).chunk(2, dim=-1)
    theirs = -2.0 + 4.0 * torch.distributions.Beta(alpha, beta).sample()
    assert ours.dtype == torch.float32 and bool((ours.abs() < 2).all())
    torch.testing.assert_close(logprob, head.log_prob_entropy(params, ours)[0])
    quantiles = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])
    for k in range(2):
        torch.testing.assert_close(
            ours[:, k].quantile(quantiles), theirs[:, k].quantile(quantiles), rtol=0, atol=0.03
        )
    # Beta(6, 2.5) on [-2, 2]: mean -2 + 4 * 6 / 8.5
    assert ours[:, 1].mean().item() == pytest.approx(-2 + 24 / 8.5, abs=0.01)


@pytest.mark.parametrize("dist", ["beta", "tanh-gaussian"])
def test_bounded_heads_refuse_unbounded_or_non_box_spaces_and_the_options_they_cannot_take(
    dist, tmp_path, capsys
):
    from proxima.commands import main

    with pytest.raises(UserError, match=f"--action-dist {dist} needs a Box action space with finite bounds"):
        make_head(gym.spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, np.inf])), dist)
    with pytest.raises(
        UserError, match="action_dist must be one of gaussian, beta, tanh-gaussian, got 'normal'"
    ):
        make_head(gym.spaces.Box(-1, 1, (2,)), "normal")
    run_dir = tmp_path / "run"
    for argv, says in (
        (["--env-id", "CartPole-v1", "--action-dist", dist], "Discrete(2)"),
        (["--env-id", "Pendulum-v1", "--action-dist", dist, "--action-std-end", "0.1"], "--action-std-end"),
    ):
        assert main(["train", *argv, "--run-dir", str(run_dir)]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err and not run_dir.exists()


def test_a_beta_policy_solves_mountaincar_continuous_and_loads_with_its_head(tmp_path):
    # mountaincarcontinuous-fast with a Beta policy, seed 1: the first evaluation (40,960 steps) reaches the
    # preset's 93, and 100 episodes score 98.6 (docs/journal/benchmarks.md); here 20 episodes must clear the threshold
    run_dir = str(tmp_path / "run")
    agent = proxima.train(config="mountaincarcontinuous-fast", action_dist="beta", seed=1, torch_threads=1,
                          run_dir=run_dir, quiet=True)  # fmt: skip
    assert agent.model.spec.network.action_dist == "beta"
    loaded = proxima.load(run_dir)
    assert isinstance(loaded.model.head, BetaHead)
    assert set(loaded.model.state_dict()) == set(agent.model.state_dict())  # the bounds are not weights
    returns = proxima.evaluate(loaded, episodes=20, seed=1, deterministic=True)
    assert returns.mean() >= 90, returns
    obs = np.zeros((3, 2), dtype=np.float32)
    actions = loaded.predict(obs)  # sampled: inside the bounds, nothing to clip
    assert actions.shape == (3, 1) and np.all(np.abs(actions) <= 1.0)


# --- --action-dist tanh-gaussian: a Gaussian squashed into the Box's bounds, its std a function of the state


def _tanh_reference(head: TanhGaussianHead, params: torch.Tensor) -> torch.distributions.Distribution:
    """torch's own squashed Gaussian on the head's bounds: N(mean, std), then tanh, then the affine map."""
    mean, x = params.chunk(2, dim=-1)
    std = torch.nn.functional.softplus(x + math.log(math.expm1(0.99))) + 0.01
    return torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, std),
        [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(head.low + head.half_scale,
                                                                                  head.half_scale)],
    )  # fmt: skip


def test_tanh_gaussian_log_prob_matches_torch_distributions_on_the_bounds():
    torch.manual_seed(0)
    space = gym.spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 0.5]), dtype=np.float64)
    head = make_head(space, "tanh-gaussian")
    assert isinstance(head, TanhGaussianHead) and head.logits_dim == 4 and head.action_shape == (2,)
    params = torch.randn(64, 4) * 1.5
    reference = _tanh_reference(head, params)
    actions, sampled_logprob = head.sample(params, head.noise(params))
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 0.5])
    assert actions.dtype == torch.float32 and bool(((actions > low) & (actions < high)).all())
    torch.testing.assert_close(sampled_logprob, reference.log_prob(actions).sum(-1), rtol=1e-4, atol=1e-4)
    logprob, _ = head.log_prob_entropy(params, actions)
    torch.testing.assert_close(logprob, sampled_logprob, rtol=0, atol=0)  # the update's ratio starts at 1
    mean = params[:, :2]
    torch.testing.assert_close(head.mode(params), low + (torch.tanh(mean) + 1) / 2 * (high - low))
    # an actor output of 0 is a std of 1 (its output layer starts near 0)
    torch.testing.assert_close(head._mean_std(torch.zeros(1, 4))[1], torch.ones(1, 2))


def test_tanh_gaussian_keeps_draws_that_float32_rounds_onto_the_bounds_inside_them():
    head = make_head(gym.spaces.Box(-1.0, 1.0, (1,)), "tanh-gaussian")
    params = torch.tensor([[30.0, -20.0], [-30.0, -20.0]])  # tanh(+-30) is +-1 in float32
    actions, logprob = head.sample(params, head.noise(params))
    assert bool((actions.abs() < 1).all()) and bool(torch.isfinite(logprob).all())
    torch.testing.assert_close(head.log_prob_entropy(params, actions)[0], logprob, rtol=0, atol=0)


def test_tanh_gaussian_entropy_and_moments_match_monte_carlo_and_the_entropy_has_a_gradient():
    torch.manual_seed(1)
    head = make_head(gym.spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 0.5])), "tanh-gaussian")
    inverse = lambda y: math.log(math.expm1(y - 0.01)) - math.log(math.expm1(0.99))  # noqa: E731  std -> x
    # a narrow one near the middle, a wide one, and one pressed against a bound (the quadrature's 16 nodes are
    # exact to 0.01 for a std up to 2; at a std of 10, two spikes at the bounds, off by 0.4 in about -14)
    for mean, std in (((0.2, -0.3), (0.1, 0.3)), ((0.0, 1.0), (1.5, 1.0)), ((2.5, -3.0), (0.5, 0.2))):
        params = torch.tensor([[*mean, inverse(std[0]), inverse(std[1])]], requires_grad=True)
        many = params.detach().expand(400_000, 4)
        draws, _ = head.sample(many, head.noise(many))
        monte_carlo = -head.log_prob_entropy(params.detach().expand(400_000, 4), draws)[0].mean()
        _, entropy = head.log_prob_entropy(params, draws[:1])
        assert entropy.item() == pytest.approx(monte_carlo.item(), abs=0.01)
        torch.testing.assert_close(torch.stack(head.mean_std(params.detach()), -1)[0],
                                   torch.stack([draws.mean(0), draws.std(0)], -1), rtol=0, atol=0.01)  # fmt: skip
        # the entropy bonus's gradient: the quadrature's against the reparameterized Monte Carlo estimate's
        (quadrature,) = torch.autograd.grad(entropy.sum(), params)
        wide = params.expand(400_000, 4)
        reparameterized = -head.sample(wide, head.noise(wide))[1].mean()
        (sampled,) = torch.autograd.grad(reparameterized, params)
        torch.testing.assert_close(quadrature, sampled, rtol=0, atol=0.02)


def test_tanh_gaussian_samples_from_uniforms_follow_the_same_law_as_torch_samples():
    head = make_head(gym.spaces.Box(-2.0, 2.0, (2,)), "tanh-gaussian")
    params = torch.tensor([[0.3, -1.0, 0.0, -0.5]]).expand(100_000, 4)
    torch.manual_seed(3)
    ours, logprob = head.sample(params, head.noise(params))
    mean, x = params.chunk(2, dim=-1)
    std = torch.nn.functional.softplus(x + head.STD_SHIFT) + head.STD_MIN
    theirs = 2.0 * torch.tanh(torch.distributions.Normal(mean, std).sample())
    torch.testing.assert_close(logprob, head.log_prob_entropy(params, ours)[0])
    quantiles = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])
    for k in range(2):
        torch.testing.assert_close(
            ours[:, k].quantile(quantiles), theirs[:, k].quantile(quantiles), rtol=0, atol=0.03
        )
    # given its noise, a draw is a function of its own row alone (a batched run's seeds each draw their own)
    noise = head.noise(params[:5])
    assert noise.shape == (5, 2)
    torch.testing.assert_close(head.sample(params[:5], noise)[0][3:], head.sample(params[3:5], noise[3:])[0])
