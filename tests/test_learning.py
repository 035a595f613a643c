"""Learning tests on small budgets: the probe environments with the PPO tutorial's tolerances (docs/SEEDS.md),
CartPole, and the presets."""

import json
import os

import numpy as np
import pytest
import torch

import proxima

pytestmark = pytest.mark.slow


def _train(tmp_path, env_id, steps, seed=1, **kw):
    return proxima.train(
        env_id=env_id, total_timesteps=steps, seed=seed, run_dir=str(tmp_path / "run"), **kw
    ).model


def _values_and_probs(model, obs):
    obs = torch.tensor(obs, dtype=torch.float32)
    with torch.no_grad():
        return model.value(obs), model.head.probs(model.logits(obs))


def test_probe1_constant_reward(tmp_path):
    values, _ = _values_and_probs(_train(tmp_path, "proxima/Probe1-v0", 10_000), [[0.0]])
    torch.testing.assert_close(values, torch.tensor([1.0]), atol=1e-4, rtol=0)


def test_probe2_reward_depends_on_observation(tmp_path):
    values, _ = _values_and_probs(_train(tmp_path, "proxima/Probe2-v0", 10_000), [[-1.0], [1.0]])
    torch.testing.assert_close(values, torch.tensor([-1.0, 1.0]), atol=1e-4, rtol=0)


def test_probe3_discounting(tmp_path):
    values, _ = _values_and_probs(_train(tmp_path, "proxima/Probe3-v0", 20_000), [[0.0], [1.0]])
    torch.testing.assert_close(values, torch.tensor([0.99, 1.0]), atol=1e-3, rtol=0)


def test_probe4_policy_and_advantage(tmp_path):
    values, probs = _values_and_probs(_train(tmp_path, "proxima/Probe4-v0", 30_000), [[0.0]])
    torch.testing.assert_close(probs, torch.tensor([[0.0, 1.0]]), atol=1e-2, rtol=0)
    torch.testing.assert_close(values, torch.tensor([1.0]), atol=1e-2, rtol=0)


def test_probe5_policy_depends_on_observation(tmp_path):
    values, probs = _values_and_probs(_train(tmp_path, "proxima/Probe5-v0", 30_000), [[0.0], [1.0]])
    torch.testing.assert_close(probs, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), atol=1e-2, rtol=0)
    torch.testing.assert_close(values, torch.tensor([1.0, 1.0]), atol=1e-2, rtol=0)


@pytest.mark.parametrize("norm_value", [True, False], ids=["defaults", "seed-critic"])
def test_cartpole_learns_on_a_short_budget(norm_value, tmp_path):
    _train(tmp_path, "CartPole-v1", 61_440, norm_value=norm_value)
    episodes = [json.loads(line) for line in open(tmp_path / "run" / "episodes.jsonl")]
    last20 = np.mean([e["return"] for e in episodes[-20:]])
    assert last20 >= 150, last20  # a random policy scores about 22


def test_same_seed_gives_identical_metrics(tmp_path):
    def run(name):
        proxima.train(env_id="CartPole-v1", total_timesteps=4096, seed=7, run_dir=str(tmp_path / name))
        lines = open(os.path.join(tmp_path, name, "metrics.jsonl")).read().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in ("time_s", "sps")} for line in lines]

    a, b = run("a"), run("b")
    assert len(a) == 8 and a == b
    proxima.train(env_id="CartPole-v1", total_timesteps=4096, seed=8, run_dir=str(tmp_path / "c"))
    c = [json.loads(line)["value_loss"] for line in open(tmp_path / "c" / "metrics.jsonl")]
    assert c != [r["value_loss"] for r in a]  # a different seed really is different


def _last20(run_dir) -> float:
    returns = [json.loads(line)["return"] for line in open(os.path.join(run_dir, "episodes.jsonl"))]
    return float(np.mean(returns[-20:]))


def test_continuous_probe_mean_converges_to_the_target(tmp_path):
    model = _train(
        tmp_path,
        "proxima/ProbeContinuous-v0",
        20_000,
        ent_coef=0.0,
        num_envs=8,
        num_steps=32,
        learning_rate=3e-3,
    )
    obs = torch.zeros(1, 1)
    with torch.no_grad():
        mean, std, value = model.logits(obs).item(), model.head.log_std.exp().item(), model.value(obs).item()
    assert abs(mean - 0.5) < 0.02
    assert std < 0.5  # the policy narrowed from its initial std of 1
    assert abs(value - (-(std**2))) < 0.01  # E[-(a - 0.5)^2] under N(mean, std) is -std^2 when mean = 0.5


def test_pendulum_preset_learns_on_a_short_budget(tmp_path):
    proxima.train(config="pendulum", total_timesteps=40_960, run_dir=str(tmp_path / "run"))
    assert _last20(tmp_path / "run") > -600  # a random policy scores about -1200


def test_pendulum_discrete_preset_learns_on_a_short_budget(tmp_path):
    proxima.train(config="pendulum-discrete", total_timesteps=100_000, run_dir=str(tmp_path / "run"))
    assert _last20(tmp_path / "run") > -40  # random: about -120 (scaled); the target at 300k is -25


def test_cartpole_ppo_fullbatch_preset_learns_on_a_short_budget(tmp_path):
    proxima.train(
        config="cartpole-ppo-fullbatch", total_timesteps=64 * 256 * 25, run_dir=str(tmp_path / "run")
    )
    assert _last20(tmp_path / "run") > 300  # 25 of the preset's 250 iterations


def test_pendulum_discrete_single_env_preset_learns_its_value_function_on_a_short_budget(tmp_path):
    # The PPO-from-scratch walk-through's set-up (one gradient step per 64 samples) improves its policy only
    # slowly: -25 takes about 690k steps (docs/journal/benchmarks.md). On a short budget its separately optimized
    # critic must already fit: at 1,000 updates the value loss of seeds 1-6 measured 0.14-0.37 of its start (seed
    # 1: 0.24), and a critic that barely learns (value learning rate 1e-7, seed 2) 1.28.
    proxima.train(
        config="pendulum-discrete-single-env", total_timesteps=64 * 1000, run_dir=str(tmp_path / "run")
    )
    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert len(metrics) == 1000 and metrics[0]["learning_rate"] == 3e-4
    first = np.mean([m["value_loss"] for m in metrics[:5]])
    last = np.mean([m["value_loss"] for m in metrics[-20:]])
    assert last < 0.5 * first


@pytest.mark.parametrize("algo", ["reinforce", "vpg"])
def test_cartpole_reinforce_and_vpg_presets_learn_on_a_short_budget(algo, tmp_path):
    # 50 of the presets' 250 iterations: both are near 50 there (random play: about 22) and pass 475 later
    # (docs/journal/benchmarks.md).
    proxima.train(config=f"cartpole-{algo}", total_timesteps=64 * 256 * 50, run_dir=str(tmp_path / "run"))
    assert _last20(tmp_path / "run") > 35


@pytest.mark.parametrize("seed,threads", [(1, 2), (4, 1)])
def test_cartpole_fast_preset_solves_gymnasium_cartpole(seed, threads, tmp_path):
    # issue 5's goal, as a test: the agent `proxima solve` scores (RUN_DIR/best, the highest of the rescored best
    # evaluations), played deterministically on 100 episodes of Gymnasium's own CartPole-v1 (not the native env it
    # trained on), scores >= 475. Every seed 1-10 reaches the stop return long before the 300k-step budget with 1
    # thread and with 2 (both cases here: 65,536 steps); seed 4 with 1 thread is the one that ran to the budget
    # with 4 minibatches of 512 (docs/journal/benchmarks.md, "cartpole-fast robust to the thread count").
    proxima.train(config="cartpole-fast", seed=seed, torch_threads=threads, run_dir=str(tmp_path / "run"))
    assert json.loads((tmp_path / "run" / "agent.json").read_text())["global_step"] < 300_000
    assert (
        proxima.evaluate(proxima.load(str(tmp_path / "run" / "best")), 100, deterministic=True).mean() >= 475
    )


def test_cartpole_throughput_preset_learns_on_a_short_budget(tmp_path):
    # The preset's full budget is a benchmark (benchmarks/throughput.py). On 1M steps, with the learning rate
    # annealed over them, seeds 1-3 end at a last-20 mean of about 190-290 (random play: about 22), with 1 thread
    # and with 2. One thread, so the load cannot change it.
    proxima.train(
        config="cartpole-throughput", seed=1, total_timesteps=1_000_000, eval_every=0, stop_return=None,
        run_dir=str(tmp_path / "run"), torch_threads=1,
    )  # fmt: skip
    assert _last20(tmp_path / "run") > 150
