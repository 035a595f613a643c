"""Native batched envs against Gymnasium's own implementations: same dynamics, flags, time limits."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.envs import make_vec_env
from proxima.envs.native import CartPole, hash32
from proxima.errors import UserError


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
        make_vec_env("Acrobot-v1", 2, backend="native")
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


def test_stop_return_needs_eval_every():
    with pytest.raises(UserError, match="needs evaluations"):
        proxima.train(stop_return=500.0)
