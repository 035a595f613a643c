"""Native batched envs against Gymnasium's own implementations: same dynamics, flags, time limits."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.errors import UserError
from proxima.envs import make_vec_env
from proxima.envs.native import CartPole, hash32
from proxima.envs.probes import IMAGE_PROBES, PROBES


def _lowbias32(x: int) -> int:
    """The reference hash, in plain Python integers."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_hash_matches_the_reference():
    xs = [0, 1, 2, 12345, 0xFFFFFFFF, 0x80000000, 2**31 - 1, 987654321]
    assert hash32(torch.tensor(xs)).tolist() == [_lowbias32(x) for x in xs]


def test_cartpole_one_step_matches_gymnasium_from_random_states():
    rng = np.random.default_rng(0)
    ref = gym.make("CartPole-v1").unwrapped
    ref.reset(seed=0)
    states = rng.uniform([-2.4, -3, -0.21, -3.5], [2.4, 3, 0.21, 3.5], size=(2000, 4))
    actions = rng.integers(2, size=2000)
    native = CartPole(2000, seed=0)
    native.reset()
    next_state, reward, terminated = native._dynamics(torch.as_tensor(states), torch.as_tensor(actions))
    for i in range(2000):
        ref.state = states[i].copy()
        ref.steps_beyond_terminated = None
        obs, r, term, _, _ = ref.step(int(actions[i]))
        np.testing.assert_allclose(next_state[i].numpy(), ref.state, atol=1e-5, rtol=0)
        np.testing.assert_allclose(native._observe(next_state[i : i + 1])[0].numpy(), obs, atol=1e-5, rtol=0)
        assert reward[i].item() == r and bool(terminated[i]) == term


def test_cartpole_ends_where_its_position_or_angle_leaves_its_bounds_whatever_its_velocities():
    """Gymnasium's test, after the Euler step: |x| > 2.4 or |theta| > 12 degrees; no velocity is bounded. Here the
    velocities are far outside the random states above, carrying x or theta back inside, or out."""
    states = np.array(
        [
            [-2.0, 100.0, 0.0, 0.0],  # x: -2 + 0.02 * 100 = 0, x_dot about 100
            [2.0, 100.0, 0.0, 0.0],  # x: 4
            [0.0, 0.0, -0.1, 10.0],  # theta: -0.1 + 0.02 * 10 = 0.1, theta_dot about 10
            [0.0, 0.0, 0.1, 10.0],  # theta: 0.3
            [0.0, -1e6, 0.0, 0.0],  # x: -2e4
        ]
    )
    native = CartPole(len(states), seed=0)
    _, _, terminated = native._dynamics(torch.as_tensor(states), torch.zeros(len(states), dtype=torch.int64))
    assert terminated.tolist() == [False, True, False, True, True]
    ref = gym.make("CartPole-v1").unwrapped
    ref.reset(seed=0)
    for state, term in zip(states, terminated.tolist(), strict=True):
        ref.state, ref.steps_beyond_terminated = state.copy(), None
        assert ref.step(0)[2] == term


def _controller(obs: np.ndarray, rng, noise: float) -> int:
    """Balances well with a little noise (episodes reach the 500-step limit), and falls with a lot."""
    if rng.random() < noise:
        return int(rng.integers(2))
    return int(obs[2] + 0.5 * obs[3] + 0.05 * obs[1] > 0)


def test_cartpole_long_rollouts_match_gymnasium_including_time_limits():
    rng = np.random.default_rng(1)
    native = CartPole(1, seed=7)
    obs = native.reset()[0].numpy()
    ref = gym.make("CartPole-v1")
    saw_truncation = saw_termination = False
    for _episode in range(6):
        ref.reset(seed=0)
        ref.unwrapped.state = native.state[0].numpy().copy()  # start both from the native env's draw
        ref_obs = np.array(ref.unwrapped.state, dtype=np.float32)
        np.testing.assert_allclose(obs, ref_obs, atol=1e-6)
        while True:
            a = _controller(ref_obs, rng, noise=0.05 if _episode % 2 else 0.6)
            step = native.step(torch.tensor([a]))
            ref_obs, r, term, trunc, _ = ref.step(a)
            np.testing.assert_allclose(step.final_obs[0].numpy(), ref_obs, atol=1e-5, rtol=0)
            assert (step.reward[0].item(), bool(step.terminated[0]), bool(step.truncated[0])) == (
                r,
                term,
                trunc,
            )
            if term or trunc:
                saw_truncation |= trunc
                saw_termination |= term
                obs = step.obs[0].numpy()
                assert np.abs(obs).max() <= 0.05  # auto-reset inside the step: a fresh initial state
                break
            np.testing.assert_array_equal(step.obs[0].numpy(), step.final_obs[0].numpy())
    assert saw_truncation and saw_termination


def test_each_env_has_its_own_seeded_stream():
    a = CartPole(2, seed=3).reset()
    b = CartPole(5, seed=3).reset()
    c = CartPole(1, seed=4).reset()
    torch.testing.assert_close(a, b[:2])  # env i's draws do not depend on how many envs run beside it
    torch.testing.assert_close(a[1], c[0])  # env i is seeded with seed + i
    assert not torch.equal(a[0], a[1])
    assert not torch.equal(CartPole(2, seed=4).reset(), CartPole(2, seed=5).reset())
    draws = CartPole(4096, seed=0).reset()
    assert draws.abs().max() <= 0.05 and abs(draws.mean().item()) < 0.002  # uniform on [-0.05, 0.05)


def test_native_backend_through_make_vec_env_and_training(tmp_path):
    envs = make_vec_env("CartPole-v1", 3, backend="native", seed=0)
    assert envs.reset().shape == (3, 4)
    with pytest.raises(UserError, match="no native implementation"):
        make_vec_env("tests.fixtures.user_envs:UserCartPole-v0", 2, backend="native")
    with pytest.raises(UserError, match="unknown env backend"):
        make_vec_env("CartPole-v1", 2, backend="jax")
    agent = proxima.train(env_backend="native", total_timesteps=4096, run_dir=str(tmp_path / "run"))
    assert proxima.evaluate(agent, 2).shape == (2,)  # evaluated on Gymnasium's own CartPole


def test_an_envs_episode_starts_do_not_depend_on_its_neighbours():
    pair, alone = CartPole(2, seed=10), CartPole(1, seed=11)  # env 1 of the pair is seeded 11, like `alone`
    pair.reset(), alone.reset()
    starts_pair, starts_alone = [], []
    for t in range(400):
        # env 0 of the pair always pushes right and fails every few steps; env 1 and `alone` act alike
        a = int(t % 7 < 3)
        s_pair = pair.step(torch.tensor([1, a]))
        s_alone = alone.step(torch.tensor([a]))
        if s_pair.terminated[1] or s_pair.truncated[1]:
            starts_pair.append(s_pair.obs[1])
        if s_alone.terminated[0] or s_alone.truncated[0]:
            starts_alone.append(s_alone.obs[0])
    assert len(starts_pair) >= 3
    torch.testing.assert_close(torch.stack(starts_pair), torch.stack(starts_alone))


def test_evaluation_during_training_and_early_stop(tmp_path):
    import json

    run = tmp_path / "run"
    proxima.train(
        env_backend="native", num_envs=8, num_steps=16, total_timesteps=8 * 16 * 20, eval_every=3,
        eval_episodes=4, stop_return=5.0, run_dir=str(run),
    )  # fmt: skip
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 3  # any policy lasts 5 steps: the first evaluation stops the run
    assert "eval_return" in metrics[2] and "eval_return" not in metrics[0]
    assert metrics[2]["eval_return"] >= 5.0
    assert (run / "model.safetensors").exists()  # the stopped run still saves its agent


def test_stop_return_and_save_best_need_eval_every():
    with pytest.raises(UserError, match="stop_return needs evaluations"):
        proxima.train(stop_return=500.0)
    with pytest.raises(UserError, match="save_best needs evaluations"):
        proxima.train(save_best=True)


def test_save_best_keeps_the_best_evaluated_agent(tmp_path):
    import json

    run = tmp_path / "run"
    proxima.train(
        env_backend="native", num_envs=8, num_steps=64, total_timesteps=8 * 64 * 12, eval_every=2,
        eval_episodes=8, save_best=True, learning_rate=1e-3, run_dir=str(run), quiet=True,
    )  # fmt: skip
    evals = [
        m["eval_return"]
        for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "eval_return" in m
    ]
    assert len(evals) == 6
    saved = json.loads((run / "best" / "agent.json").read_text())
    assert saved["eval_return"] == max(evals)
    first_best = evals.index(max(evals))  # a later tie does not replace it
    assert saved["global_step"] == 8 * 64 * 2 * (first_best + 1)
    # RUN_DIR/best is a complete agent: evaluated as during training, it gives the logged number back
    from proxima.run.callbacks import Evaluation

    best = proxima.load(str(run / "best"))
    evaluation = Evaluation(every=1, episodes=8)
    evaluation.open(proxima.PPOArgs.of(env_backend="native"), best.device)
    assert evaluation.evaluate(best.model).mean() == max(evals)


RESCORED = dict(env_backend="native", num_envs=8, num_steps=64, total_timesteps=8 * 64 * 12, eval_every=2,
                eval_episodes=8, save_best=True, rescore_best=3, rescore_episodes=20, learning_rate=1e-3,
                torch_threads=1, plot=False, quiet=True)  # fmt: skip


def test_rescore_best_keeps_the_highest_of_the_best_evaluations_rescored(tmp_path):
    import json

    from proxima.run.callbacks import Evaluation
    from proxima.run.evaluate import run_episodes

    run = tmp_path / "run"
    proxima.train(run_dir=str(run), **RESCORED)
    evals = [
        (m["eval_return"], m["global_step"])
        for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "eval_return" in m
    ]
    saved = json.loads((run / "best" / "agent.json").read_text())
    # the candidates are the three best evaluations (the earlier of equals), and they alone
    top = sorted(evals, key=lambda e: -e[0])[:3]
    assert [(c["eval_return"], c["global_step"]) for c in saved["rescored"]] == top
    winner = max(saved["rescored"], key=lambda c: c["rescore_return"])
    assert (saved["global_step"], saved["rescore_return"]) == (
        winner["global_step"],
        winner["rescore_return"],
    )
    assert saved["rescore_episodes"] == 20 and not (run / "candidates").exists()
    # RUN_DIR/best is that agent: on the rescoring's 20 episodes it gives the recorded number back, and those
    # episodes are not the evaluations' (whose starting states are seeded apart)
    best = proxima.load(str(run / "best"))
    evaluation = Evaluation(every=1, episodes=8)
    evaluation.open(proxima.PPOArgs.of(env_backend="native"), best.device)
    returns = run_episodes(
        best.model, evaluation.envs, 20, deterministic=True, seed=evaluation.seed + 1_000_000
    )
    assert returns.mean() == saved["rescore_return"]
    assert evaluation.seed + 1_000_000 != evaluation.seed != proxima.PPOArgs().run.seed


def _random_models(logits: int, obs: int, head) -> list:
    """Three freshly initialized agents of seeds 0-2 (``head()`` makes each one's head)."""
    from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec

    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(ActorCritic(NetworkSpec(logits, (obs,), NetworkSettings(norm_value=False)), head()))
    return models


def _rescored(args, episodes: int, rescore_episodes: int, models: list) -> tuple:
    """``(evaluation, returns one at a time, returns of Evaluation's rescoring)`` of ``models`` on the
    rescoring episodes of a run with settings ``args`` and ``episodes`` evaluation envs."""
    from proxima.run.callbacks import Evaluation
    from proxima.run.evaluate import run_episodes

    evaluation = Evaluation(
        every=1, episodes=episodes, rescore=len(models), rescore_episodes=rescore_episodes
    )
    evaluation.open(args, torch.device("cpu"))
    alone = [
        run_episodes(m, evaluation.envs, rescore_episodes, deterministic=True, seed=evaluation.rescore_seed)
        for m in models
    ]
    return evaluation, alone, evaluation._rescore(models)


@pytest.mark.parametrize("backend", ["native", "gymnasium"])
def test_rescoring_plays_the_candidates_at_once_with_their_returns_one_at_a_time(backend):
    from proxima.policy.distributions import CategoricalHead

    models = _random_models(2, 4, lambda: CategoricalHead(2))
    evaluation, alone, together = _rescored(proxima.PPOArgs.of(env_backend=backend), 6, 10, models)
    assert len({tuple(r) for r in alone}) == 3  # three policies that play differently: a mix-up would show
    assert evaluation.rescore_envs.num_envs == 3 * 6  # one vector env of every candidate's evaluation envs
    for one, batched in zip(alone, together, strict=True):
        np.testing.assert_array_equal(one, batched)
    evaluation.close(None)


def test_rescoring_a_continuous_policy_at_once_gives_its_returns_one_at_a_time_to_float_rounding():
    """A Gaussian's mean goes straight into the env: the batched matmuls' rounding moves the states, and the
    returns, in their last digits (the docs say so)."""
    from proxima.policy.distributions import DiagGaussianHead

    models = _random_models(1, 3, lambda: DiagGaussianHead(1))
    args = proxima.PPOArgs.of(env_id="Pendulum-v1", env_backend="native")
    evaluation, alone, together = _rescored(args, 4, 4, models)
    for one, batched in zip(alone, together, strict=True):
        np.testing.assert_allclose(batched, one, rtol=1e-6)
    evaluation.close(None)


def test_rescoring_plays_on_the_backend_of_the_evaluations_whatever_its_env_count():
    """auto takes native Acrobot from 16 envs only: 3 candidates of 8 evaluation envs are 24 envs, which must
    stay Gymnasium's, the evaluations' (other episodes would score another way than one at a time)."""
    from proxima.policy.distributions import CategoricalHead
    from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec

    models = []
    for joint, gain in ((4, -1.0), (5, 1.0), (4, -0.5)):  # torque along a joint's velocity: swings up
        model = ActorCritic(
            NetworkSpec(3, (6,), NetworkSettings(hidden_sizes=(), norm_value=False)), CategoricalHead(3)
        )
        with torch.no_grad():
            out = model.actor[-1]
            out.weight.zero_(), out.bias.zero_()
            out.weight[2, joint], out.weight[0, joint] = gain, -gain
        models.append(model)
    evaluation, alone, together = _rescored(proxima.PPOArgs.of(env_id="Acrobot-v1"), 8, 8, models)
    assert all(len(set(r)) > 1 and r.max() > -500 for r in alone)  # episodes that tell the backends apart
    for one, batched in zip(alone, together, strict=True):
        np.testing.assert_array_equal(one, batched)
    evaluation.close(None)


def test_rescore_best_resumes_exactly_and_needs_save_best(tmp_path):
    import json
    import signal

    from proxima.base.errors import TrainingInterrupted
    from proxima.run.callbacks import Callback

    class CtrlCAt(Callback):
        def on_update_end(self, run, result) -> None:
            if run.updates_done == 7:  # as a user's Ctrl-C: a checkpoint after this update, then a stop
                signal.raise_signal(signal.SIGINT)

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    proxima.train(run_dir=str(whole), **RESCORED)
    with pytest.raises(TrainingInterrupted):
        proxima.train(run_dir=str(cut), callbacks=[CtrlCAt()], **RESCORED)
    assert len(list((cut / "candidates").iterdir())) == 3  # kept on disk for the resumed run
    proxima.train(resume=str(cut), quiet=True)
    assert json.loads((whole / "best" / "agent.json").read_text()) == json.loads(
        (cut / "best" / "agent.json").read_text()
    )
    with pytest.raises(UserError, match="rescore_best chooses the agent in RUN_DIR/best: give --save-best"):
        proxima.train(eval_every=2, rescore_best=3)
    with pytest.raises(UserError, match="rescore_best must be 0 .off. or a number of agents"):
        proxima.train(eval_every=2, save_best=True, rescore_best=-1)


# env id -> (sampler of random states, sampler of random actions, native action as a tensor)
def _uniform(rng, low, high):
    return lambda n: rng.uniform(low, high, size=(n, len(low)))


_CASES = {
    "Pendulum-v1": ([-2 * np.pi, -8.0], [2 * np.pi, 8.0], "box", 2.5),
    "proxima/PendulumDiscrete-v1": ([-2 * np.pi, -8.0], [2 * np.pi, 8.0], 5, None),
    "MountainCar-v0": ([-1.2, -0.07], [0.6, 0.07], 3, None),
    "MountainCarContinuous-v0": ([-1.2, -0.07], [0.6, 0.07], "box", 1.5),
    "Acrobot-v1": ([-np.pi, -np.pi, -4 * np.pi, -9 * np.pi], [np.pi, np.pi, 4 * np.pi, 9 * np.pi], 3, None),
}


def _actions(rng, kind, scale, n):
    if kind == "box":
        return rng.uniform(-scale, scale, size=(n, 1)).astype(np.float32)
    return rng.integers(kind, size=n)


def _to_env(action, space):
    # what proxima's gymnasium backend sends: Box actions clipped to the bounds
    if isinstance(space, gym.spaces.Box):
        return np.clip(action, space.low, space.high).astype(np.float32)
    return int(action)


@pytest.mark.parametrize("env_id", list(_CASES))
def test_native_one_step_matches_gymnasium_from_random_states(env_id):
    from proxima.envs.native import NATIVE_ENVS

    low, high, kind, scale = _CASES[env_id]
    rng = np.random.default_rng(0)
    n = 500
    states = rng.uniform(low, high, size=(n, len(low)))
    states[:20, 0] = low[0]  # the left wall of the mountain cars, exactly
    actions = _actions(rng, kind, scale, n)
    native = NATIVE_ENVS[env_id](n, seed=0)
    native.reset()
    native.state = torch.as_tensor(states)
    step = native.step(torch.as_tensor(actions))
    ref = gym.make(env_id)
    for i in range(n):
        ref.reset(seed=i)
        ref.unwrapped.state = states[i].copy()
        obs, r, term, _, _ = ref.step(_to_env(actions[i], ref.action_space))
        np.testing.assert_allclose(
            step.final_obs[i].numpy(), obs, atol=1e-5, rtol=0, err_msg=f"{env_id} state {i}"
        )
        assert step.reward[i].item() == pytest.approx(r, abs=1e-5) and bool(step.terminated[i]) == term


@pytest.mark.parametrize("env_id", list(_CASES))
def test_native_rollouts_match_gymnasium_including_time_limits(env_id):
    from proxima.envs.native import NATIVE_ENVS

    _, _, kind, scale = _CASES[env_id]
    rng = np.random.default_rng(1)
    native = NATIVE_ENVS[env_id](1, seed=3)
    obs = native.reset()[0]
    ref = gym.make(env_id)
    ends = set()
    for _episode in range(2):
        ref.reset(seed=0)
        ref.unwrapped.state = native.state[0].numpy().copy()
        for _t in range(1000):
            a = _actions(rng, kind, scale, 1)
            step = native.step(torch.as_tensor(a))
            ref_obs, r, term, trunc, _ = ref.step(_to_env(a[0], ref.action_space))
            np.testing.assert_allclose(step.final_obs[0].numpy(), ref_obs, atol=1e-5, rtol=0)
            assert step.reward[0].item() == pytest.approx(r, abs=1e-5)
            assert (bool(step.terminated[0]), bool(step.truncated[0])) == (term, trunc)
            if term or trunc:
                ends.add("terminated" if term else "truncated")
                break
    assert "truncated" in ends or env_id == "Acrobot-v1"  # random play rarely swings the acrobot up in time
    assert obs.shape == native.single_observation_space.shape


# probe: (observation, action) -> (reward, terminated); probe 3's observation 0 pays 0 and goes on to 1, which ends
_PROBE_ANSWERS = {
    "Probe1": lambda o, a: (1.0, True),
    "Probe2": lambda o, a: (o, True),
    "Probe3": lambda o, a: (o, o == 1.0),
    "Probe4": lambda o, a: (1.0 if a == 1 else -1.0, True),
    "Probe5": lambda o, a: (1.0 if a == o else -1.0, True),
    "ProbeContinuous": lambda o, a: (-((min(max(a, -2.0), 2.0) - 0.5) ** 2), True),  # a Box action is clipped
}


@pytest.mark.parametrize("probe", list(_PROBE_ANSWERS))
def test_native_probes_pay_their_known_answers(probe):
    from proxima.envs.native import NATIVE_ENVS

    n = 64
    native = NATIVE_ENVS[f"proxima/{probe}-v0"](n, seed=0)
    rng = np.random.default_rng(0)
    obs = native.reset()
    firsts = set()
    for _ in range(4):
        if probe == "ProbeContinuous":
            actions = torch.as_tensor(rng.uniform(-3, 3, size=(n, 1)), dtype=torch.float32)
        else:
            actions = torch.as_tensor(rng.integers(native.single_action_space.n, size=n))
        step = native.step(actions)
        for i in range(n):
            o, a = float(obs[i, 0]), float(actions[i].reshape(-1)[0])
            firsts.add(o)
            reward, terminated = _PROBE_ANSWERS[probe](o, a)
            assert step.reward[i].item() == pytest.approx(reward, abs=1e-6)
            assert (bool(step.terminated[i]), bool(step.truncated[i])) == (terminated, False)
            if not terminated:
                assert float(step.final_obs[i, 0]) == float(step.obs[i, 0]) == 1.0
        obs = step.obs
    expected_firsts = {"Probe2": {-1.0, 1.0}, "Probe5": {0.0, 1.0}, "Probe3": {0.0, 1.0}}
    assert firsts == expected_firsts.get(probe, {0.0})


_ALL_PROBES = [*PROBES, *IMAGE_PROBES]


@pytest.mark.parametrize("env_id", _ALL_PROBES)
def test_each_gymnasium_probe_is_its_native_probe(env_id):
    """A probe is written once: the Gymnasium env of an id plays native env 0 of the same class and seed, step
    for step, and its unseeded resets go on reproducibly from the seed it was given."""
    from proxima.envs import native

    cls = {**native.PROBE_ENVS, **native.IMAGE_PROBE_ENVS}[env_id]
    assert (PROBES | IMAGE_PROBES)[env_id].native is cls
    rng = np.random.default_rng(0)
    episodes = []
    for _ in range(2):  # two envs given the same seed play the same episodes
        env, played = gym.make(env_id), []
        for episode in range(6):
            seed = 5 if episode == 0 else None
            obs, _ = env.reset(seed=seed)
            played.append(obs.copy())
            if episode == 0:  # the first, seeded episode is native env 0's with that seed
                twin = cls(1, seed=5)
                np.testing.assert_array_equal(twin.reset().numpy()[0], obs)
            for _t in range(10):
                box = isinstance(env.action_space, gym.spaces.Box)
                action = np.float32([rng.uniform(-3, 3)]) if box else int(rng.integers(env.action_space.n))
                obs, reward, terminated, truncated, _ = env.step(action)
                played.append((obs.copy(), reward, terminated, truncated))
                if episode == 0:
                    step = twin.step(torch.as_tensor(np.asarray(action)).reshape(1, *env.action_space.shape))
                    np.testing.assert_array_equal(step.final_obs.numpy()[0], obs)
                    assert (step.reward.item(), bool(step.terminated[0])) == (reward, terminated)
                if terminated or truncated:
                    break
            assert terminated
        episodes.append(played)
        rng = np.random.default_rng(0)
    assert len(episodes[0]) == len(episodes[1])
    for a, b in zip(*episodes, strict=True):
        np.testing.assert_equal(a, b)


@pytest.mark.parametrize("env_id", ["proxima/Probe2-v0", "proxima/Probe5-v0"])
def test_both_backends_start_a_probes_envs_in_the_same_states(env_id):
    """Env i of either backend, seeded with s, starts from native env i's first state of seed s: the Gymnasium
    backend seeds sub-env i with s + i, which is native env 0 of seed s + i, whose stream is native env i's of s."""
    gymnasium = make_vec_env(env_id, 16, backend="gymnasium", seed=3)
    batched = make_vec_env(env_id, 16, backend="native", seed=3)
    torch.testing.assert_close(gymnasium.reset(), batched.reset())
    assert len(set(batched.reset().reshape(-1).tolist())) == 2  # both first observations occur
    gymnasium.close()


def test_ppo_passes_probe_1_on_the_native_backend(tmp_path):
    model = proxima.train(
        env_id="proxima/Probe1-v0", env_backend="native", total_timesteps=10_000, run_dir=str(tmp_path / "r")
    ).model
    with torch.no_grad():
        torch.testing.assert_close(model.value(torch.zeros(1, 1)), torch.ones(1), atol=1e-4, rtol=0)
