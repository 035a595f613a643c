"""The policy-gradient family (the second and third source documents, docs/SEEDS.md): losses with the exact
numbers of the policy-gradient homework's unit tests, the rewards-to-go estimator against both documents' own
loops, per-network architectures, separate optimizers, presets, and the
modified Pendulum."""

import json
import pathlib
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import proxima
from proxima.algo.advantages import discounted_returns, estimate_advantages, gae
from proxima.algo.algorithms import ALGORITHMS
from proxima.algo.losses import clipped_surrogate_loss, policy_gradient_loss, value_loss
from proxima.algo.optim import make_adam
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.commands.common import parse_train_args
from proxima.envs.pendulum import DiscreteTorques, ScaleAngularVelocity, ScaleReward
from proxima.policy.distributions import CategoricalHead
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.run.callbacks import Callback
from proxima.run.config import PPOArgs, load_preset, preset_names, read_preset, resolve_args


def _homework_traj_data(ppo: bool = False):
    """The tensors of the policy-gradient homework's unit tests: TrajData(10, 5, 4, 1) filled in its order after
    manual_seed(0)."""
    s, e, o = 10, 5, 4
    torch.manual_seed(0)
    states = torch.rand(s, e, o)
    actions = torch.randint(0, 1, (s, e))
    _rewards = torch.rand(s, e)
    _not_dones = torch.randint(0, 2, (s, e))
    log_probs = torch.rand(s, e)
    returns = 2 * torch.rand(s, e) - 1 if ppo else torch.rand(s, e)
    return states, actions, log_probs, returns


def _homework_linear_nets():
    torch.manual_seed(0)
    return nn.Linear(4, 1), nn.Linear(4, 1)  # a.policy, then a.value, as the homework's tests build them


def test_reinforce_loss_matches_the_homeworks_unit_test():
    _, _, log_probs, returns = _homework_traj_data()
    assert abs(policy_gradient_loss(log_probs, returns).item() - (-0.2369)) < 1e-4


def test_vpg_loss_matches_the_homeworks_unit_test():
    states, _, log_probs, returns = _homework_traj_data()
    _, value_net = _homework_linear_nets()
    values = value_net(states).squeeze(-1)
    # The homework's value term is the MSE without the 1/2: value_loss (1/2 MSE) with vf_coef 2, as its presets
    # use.
    loss = policy_gradient_loss(log_probs, returns - values) + 2.0 * value_loss(values, returns)
    assert abs(loss.item() - 0.0618) < 1e-4


def test_ppo_loss_matches_the_homeworks_unit_test():
    states, actions, old_log_probs, returns = _homework_traj_data(ppo=True)
    policy_net, value_net = _homework_linear_nets()
    head = CategoricalHead(1)
    new_log_probs, _ = head.log_prob_entropy(policy_net(states).reshape(-1, 1), actions.reshape(-1))
    values = value_net(states).squeeze(-1).reshape(-1)
    advantages = returns.reshape(-1) - values
    pg = clipped_surrogate_loss(
        new_log_probs, old_log_probs.reshape(-1), advantages, clip_coef=0.1, normalize_advantages=False
    )
    loss = pg + 2.0 * value_loss(values, returns.reshape(-1))
    assert abs(loss.item() - 0.9314) < 1e-4


def test_vpg_policy_loss_does_not_backprop_into_the_baseline():
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    logprobs = torch.tensor([-0.5, -0.2], requires_grad=True)
    policy_gradient_loss(logprobs, torch.tensor([3.0, 1.0]) - values).backward()
    assert values.grad is None or torch.all(values.grad == 0)
    torch.testing.assert_close(logprobs.grad, -torch.tensor([2.0, -1.0]) / 2)


def _homework_calc_returns(rewards, not_dones, gamma):
    returns = rewards.clone()
    for t in reversed(range(rewards.shape[0] - 1)):
        returns[t] += returns[t + 1] * not_dones[t] * gamma
    return returns


def test_discounted_returns_match_the_homeworks_calc_returns():
    g = torch.Generator().manual_seed(3)
    rewards = torch.rand(12, 4, generator=g)
    # the homework's `done`: the episode ended at step t
    ended = (torch.rand(12, 4, generator=g) < 0.25).float()
    # proxima's dones[t] = 1 marks obs t as a new episode's first: the homework's flags shifted by one.
    dones = torch.cat([torch.zeros(1, 4), ended[:-1]])
    ours = discounted_returns(rewards, dones, torch.zeros(4), ended[-1], gamma=0.99)
    torch.testing.assert_close(ours, _homework_calc_returns(rewards, 1 - ended, 0.99))


def test_discounted_returns_match_the_from_scratch_loop_with_bootstrap():
    rng = np.random.default_rng(0)
    for trial in range(20):
        rewards = rng.normal(size=9).tolist()
        dones = (rng.random(9) < 0.2).tolist()
        final_value = float(rng.normal())
        # the PPO-from-scratch walk-through's loop, verbatim in logic: bootstrap from V(s_T) unless the last step
        # ended an episode
        R = final_value if not dones[-1] else 0.0
        expected = []
        for r, done in zip(reversed(rewards), reversed(dones), strict=True):
            R = r + 0.99 * (0.0 if done else R)
            expected.insert(0, R)
        starts = torch.tensor([[0.0]] + [[float(d)] for d in dones[:-1]])
        ours = discounted_returns(
            torch.tensor(rewards).reshape(9, 1),
            starts,
            torch.tensor([final_value]),
            torch.tensor([float(dones[-1])]),
            0.99,
        )
        torch.testing.assert_close(ours.reshape(-1), torch.tensor(expected), msg=f"trial {trial}")


def test_returns_estimator_is_rewards_to_go_minus_values_and_gae_lambda_1_agrees():
    g = torch.Generator().manual_seed(1)
    r, v = torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)
    d, nv, nd = (torch.rand(6, 3, generator=g) < 0.3).float(), torch.randn(3, generator=g), torch.zeros(3)
    adv = estimate_advantages("returns", r, v, d, nv, nd, 0.9, 0.5)
    torch.testing.assert_close(adv, discounted_returns(r, d, nv, nd, 0.9) - v)
    torch.testing.assert_close(adv, gae(r, v, d, nv, nd, 0.9, 1.0))  # GAE(1) is the Monte Carlo advantage
    torch.testing.assert_close(
        estimate_advantages("gae", r, v, d, nv, nd, 0.9, 0.5), gae(r, v, d, nv, nd, 0.9, 0.5)
    )


def _linears(seq):
    return [(m.in_features, m.out_features) for m in seq if isinstance(m, nn.Linear)]


def test_per_network_hidden_sizes_and_activations():
    spec = NetworkSpec(
        5,
        (3,),
        NetworkSettings(
            hidden_sizes=(64, 32), activation="relu", critic_hidden_sizes=(64,), critic_activation="relu"
        ),
    )
    model = ActorCritic(spec, CategoricalHead(5))
    assert _linears(model.actor) == [(3, 64), (64, 32), (32, 5)]
    assert _linears(model.critic) == [(3, 64), (64, 1)]
    assert all(isinstance(m, nn.ReLU) for m in model.actor if not isinstance(m, nn.Linear))
    spec2 = NetworkSpec(
        2, (4,), NetworkSettings(hidden_sizes=(128,), activation="relu")
    )  # the homework's 128-unit ReLU nets
    model2 = ActorCritic(spec2, CategoricalHead(2))
    assert _linears(model2.actor) == [(4, 128), (128, 2)] and _linears(model2.critic) == [(4, 128), (128, 1)]
    assert NetworkSpec.from_json(spec.to_json()) == spec


def test_reinforce_model_has_no_critic_and_zero_values():
    model = ActorCritic(NetworkSpec(2, (4,), has_critic=False), CategoricalHead(2))
    assert model.critic is None
    obs = torch.randn(7, 4)
    assert torch.equal(model.value(obs), torch.zeros(7))
    assert torch.equal(model(obs)[1], torch.zeros(7))


def test_two_param_groups_step_exactly_like_two_adam_optimizers():
    torch.manual_seed(0)
    spec = NetworkSpec(
        5, (3,), NetworkSettings(hidden_sizes=(8,), critic_hidden_sizes=(6,), norm_value=False)
    )
    a = ActorCritic(spec, CategoricalHead(5))
    b = ActorCritic(spec, CategoricalHead(5))
    b.load_state_dict(a.state_dict())
    joint = make_adam(a.param_groups(3e-4, 1e-3), 3e-4)
    policy_opt = make_adam([p for n, p in b.named_parameters() if not n.startswith("critic")], 3e-4)
    value_opt = make_adam(b.critic.parameters(), 1e-3)
    obs, actions, targets = torch.randn(16, 3), torch.randint(0, 5, (16,)), torch.randn(16)
    for _ in range(5):
        for model, opts in ((a, [joint]), (b, [policy_opt, value_opt])):
            logprobs, _, values = model.evaluate(obs, actions)
            loss = -logprobs.mean() + value_loss(values, targets)
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, msg=name)


def test_adam_eps_sets_how_far_a_weight_with_small_gradients_steps(tmp_path):
    # Adam's step is lr * m / (sqrt(v) + eps): a gradient of 1e-7 under the default 1e-5 moves its weight by about
    # lr / 100, under 1e-8 by about lr (the actor's hidden layers on VMAS navigation, docs/MULTIAGENT.md)
    moved = {}
    for eps in (1e-5, 1e-8):
        weight = nn.Parameter(torch.zeros(3))
        optimizer = make_adam([weight], 1e-3, eps=eps)
        weight.grad = torch.full((3,), 1e-7)
        optimizer.step()
        moved[eps] = -weight.detach()[0].item()
    assert moved[1e-5] == pytest.approx(1e-3 * 1e-7 / (1e-7 + 1e-5), rel=1e-4)
    assert moved[1e-8] == pytest.approx(1e-3 * 1e-7 / (1e-7 + 1e-8), rel=1e-4)

    assert resolve_args().algorithm.adam_eps == 1e-5  # the PPO reference code's, unchanged
    assert parse_train_args(["--adam-eps", "1e-6"]).algorithm.adam_eps == 1e-6
    with pytest.raises(UserError, match="adam_eps must be positive"):
        resolve_args(adam_eps=0.0).validate()

    class Eps(Callback):
        def on_update_end(self, run, result):
            group = getattr(run, "group", None)  # --num-seeds: one Adam for all the seeds
            optimizer = run.optimizer if group is None else group.optimizer
            seen.append({g["eps"] for g in optimizer.param_groups})

    for seeds in (1, 2):  # a run's own Adam, and the one Adam of --num-seeds
        seen = []
        proxima.train(env_id="CartPole-v1", num_envs=2, num_steps=16, total_timesteps=64, adam_eps=1e-6,
                      num_seeds=seeds, value_learning_rate=1e-3, quiet=True, report=False, plot=False,
                      run_dir=str(tmp_path / f"seeds{seeds}"), callbacks=[Eps()])  # fmt: skip
        assert seen and all(eps == {1e-6} for eps in seen)


def test_algo_defaults_then_preset_then_flags():
    assert resolve_args().algorithm.algo == "ppo" and resolve_args().algorithm.update_epochs == 4
    vpg = resolve_args(algo="vpg")
    assert (
        vpg.algorithm.update_epochs,
        vpg.algorithm.num_minibatches,
        vpg.algorithm.advantage,
        vpg.algorithm.norm_adv,
    ) == (1, 1, "returns", False)
    assert resolve_args(algo="reinforce", update_epochs=3).algorithm.update_epochs == 3
    args = resolve_args(config="cartpole-ppo-fullbatch", seed=4, num_envs=8)
    assert (args.algorithm.update_epochs, args.algorithm.clip_coef, args.run.seed, args.env.num_envs) == (
        10,
        0.1,
        4,
        8,
    )
    assert set(ALGORITHMS) == {"ppo", "vpg", "reinforce", "ippo", "mappo"}
    for name, algorithm in ALGORITHMS.items():
        assert resolve_args(algo=name) == PPOArgs.of(algo=name, **algorithm.defaults)
    assert [name for name, algorithm in ALGORITHMS.items() if not algorithm.has_critic] == ["reinforce"]


def test_cli_flags_override_a_preset():
    args = parse_train_args(
        ["--config", "pendulum-discrete-single-env", "--seed", "7", "--value-learning-rate", "5e-4"]
    )
    assert args.env.env_id == "proxima/PendulumDiscrete-v1" and args.run.seed == 7
    assert args.algorithm.value_learning_rate == 5e-4 and args.algorithm.learning_rate == 3e-4
    assert (args.network.hidden_sizes, args.network.critic_hidden_sizes) == (
        (64, 32),
        (64,),
    )  # the preset's, not overridden
    assert "config" not in args.flat()  # the preset is an instruction, not a setting
    assert parse_train_args(["--algo=vpg"]).algorithm.update_epochs == 1
    assert parse_train_args(["--algo", "vpg", "--update-epochs", "2"]).algorithm.update_epochs == 2


REQUIRED_PRESETS = {
    "cartpole-cleanrl",
    "cartpole-reinforce",
    "cartpole-vpg",
    "cartpole-ppo-fullbatch",
    "pendulum-discrete-single-env",
    "pendulum-discrete",
}


def test_every_required_preset_ships_and_validates():
    assert REQUIRED_PRESETS <= set(preset_names())
    for name in preset_names():
        resolve_args(config=name).validate()


def test_an_unknown_preset_name_is_refused_in_one_line_that_lists_the_presets(capsys):
    with pytest.raises(
        UserError, match="unknown preset 'seed001-ppo-cartpole'; accepted: .*cartpole-ppo-fullbatch"
    ):
        load_preset("seed001-ppo-cartpole")
    assert main(["presets", "seed2-ppo-cartpole"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown preset 'seed2-ppo-cartpole'" in err and "cartpole-vpg" in err


def test_presets_hold_the_source_documents_settings():
    assert resolve_args(config="cartpole-cleanrl") == resolve_args(
        config="cartpole-cleanrl",
        **{
            f: PPOArgs().flat()[f]
            for f in ("learning_rate", "num_envs", "num_steps", "ent_coef", "clip_coef")
        },
    )
    for algo in ("reinforce", "vpg", "ppo"):
        a = resolve_args(config=f"cartpole-{algo}" if algo != "ppo" else "cartpole-ppo-fullbatch")
        assert (
            a.algorithm.algo,
            a.env.num_envs,
            a.algorithm.num_steps,
            a.algorithm.learning_rate,
            a.num_updates,
        ) == (algo, 64, 256, 1e-3, 250)
        assert a.network.hidden_sizes == (128,) and a.network.activation == "relu"
    assert resolve_args(config="cartpole-ppo-fullbatch").algorithm.update_epochs == 10
    s002 = resolve_args(config="pendulum-discrete-single-env")
    assert (s002.env.num_envs, s002.batch_size, s002.algorithm.gamma, s002.algorithm.clip_coef) == (
        1,
        64,
        0.99,
        0.2,
    )
    assert (s002.algorithm.learning_rate, s002.algorithm.value_learning_rate) == (3e-4, 1e-3)
    assert (s002.network.hidden_sizes, s002.network.critic_hidden_sizes) == ((64, 32), (64,))


def test_preset_from_a_file_and_bad_presets(tmp_path, capsys):
    path = tmp_path / "mine.json"
    path.write_text('{"algo": "vpg", "num_envs": 2}')
    assert load_preset(str(path)) == {"algo": "vpg", "num_envs": 2}
    assert (
        resolve_args(config=str(path)).algorithm.update_epochs == 1
    )  # the preset's algo brings its defaults
    (tmp_path / "bad.json").write_text('{"num_envz": 2}')
    with pytest.raises(UserError, match="unknown settings"):
        load_preset(str(tmp_path / "bad.json"))
    for config in ("no-such-preset", str(tmp_path / "bad.json"), str(tmp_path / "missing.json")):
        assert main(["train", "--config", config, "--run-dir", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("proxima train: error:")
        assert not (tmp_path / "run").exists()


def test_presets_command_lists_every_preset(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in REQUIRED_PRESETS)
    assert main(["presets", "cartpole-ppo-fullbatch"]) == 0
    assert "--update-epochs 10" in capsys.readouterr().out


def test_every_preset_says_how_long_it_took_and_where_that_was_measured(capsys):
    """``typical``: the steps and wall time of a results table, citing it by file and date, with the preset named
    there (by name, by the old name it had then, or by the quoted section); `proxima presets` and the docs' table
    of presets show it."""
    root = pathlib.Path(__file__).parent.parent
    assert main(["presets"]) == 0
    listed = capsys.readouterr().out
    page = (root / "docs" / "ALGORITHMS.md").read_text()
    for name in preset_names():
        typical = read_preset(name)["typical"]
        cited = re.findall(
            r"(docs/RESULTS\.md|docs/journal/benchmarks\.md)(?:, [^;)]*)?, (\d{4}-\d\d-\d\d)", typical
        )
        assert cited, (name, typical)  # a number always comes with its table and date
        assert re.search(r"\d[\d,.]*[kM]? steps", typical) and re.search(r"\d s\b|minutes|\d h\b", typical), (
            typical
        )
        for table, _ in cited:
            text = (root / table).read_text()
            # a row of the preset (`cartpole-fast`, `vmas-fast: mappo float32`, `cartpole-fast --torch-threads 1`)
            named = [rf"`{re.escape(name)}[`: ]"]
            named += [re.escape(n) for n in re.findall(r"as (seed[\w-]+)[;,]", typical)]
            named += [re.escape(n) for n in re.findall(r"'([A-Z][^']*)'", typical)]
            assert any(re.search(n, text) for n in named), (name, table, named)
        assert "typical" not in load_preset(name)  # it describes the preset and sets nothing
        assert f"how long: {typical}\n" in listed, name
        assert f"| `{name}` | " in page and f" | {typical} |" in page, name


def test_invalid_family_settings_are_one_line_errors(tmp_path, capsys):
    cases = [
        ["--algo", "sarsa"],
        ["--advantage", "td"],
        ["--shared-network", "--value-learning-rate", "1e-3"],
        ["--shared-network", "--critic-hidden-sizes", "256", "256"],  # a shared trunk has no critic layers
        ["--shared-network", "--critic-activation", "relu"],
        ["--algo", "reinforce", "--value-learning-rate", "1e-3"],
        ["--hidden-sizes", "0"],
        ["--env-backend", "jax"],
        ["--env-backend", "native", "--env-id", "Blackjack-v1"],
    ]
    for flags in cases:
        assert main(["train", *flags, "--run-dir", str(tmp_path / "run")]) == 2, flags
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert not (tmp_path / "run").exists()


def test_pendulum_discrete_matches_pendulum_with_the_seed_transforms():
    ours = gym.make("proxima/PendulumDiscrete-v1")
    base = gym.make("Pendulum-v1")
    assert ours.action_space == gym.spaces.Discrete(5)
    assert np.allclose(ours.observation_space.high, [1, 1, 1]) and np.allclose(
        ours.observation_space.low, [-1, -1, -1]
    )
    obs, _ = ours.reset(seed=5)
    ref, _ = base.reset(seed=5)
    rng = np.random.default_rng(0)
    steps = 0
    for _ in range(200):
        steps += 1
        a = int(rng.integers(5))
        np.testing.assert_allclose(obs, ref * np.array([1, 1, 1 / 8], dtype=np.float32), rtol=1e-6)
        obs, r, term, trunc, _ = ours.step(a)
        ref, r_ref, term_ref, trunc_ref, _ = base.step(
            np.array([[-2.0, -1.0, 0.0, 1.0, 2.0][a]], dtype=np.float32)
        )
        assert r == pytest.approx(r_ref / 10) and (term, trunc) == (term_ref, trunc_ref)
    assert trunc and not term and steps == 200  # Pendulum only ever truncates, at 200 steps


def test_pendulum_wrappers_are_public_and_composable():
    env = ScaleReward(
        DiscreteTorques(ScaleAngularVelocity(gym.make("Pendulum-v1")), torques=(-2.0, 2.0)), scale=0.5
    )
    assert env.action_space.n == 2
    obs, _ = env.reset(seed=0)
    assert abs(obs[2]) <= 1.0
    _, r, *_ = env.step(1)
    assert -16.3 / 2 <= r <= 0
    assert proxima.envs.pendulum.TORQUES == (-2.0, -1.0, 0.0, 1.0, 2.0)


@pytest.mark.parametrize("algo", ["reinforce", "vpg"])
def test_reinforce_and_vpg_train_save_and_load(algo, tmp_path):
    agent = proxima.train(algo=algo, total_timesteps=2048, run_dir=str(tmp_path / "run"))
    assert (agent.model.critic is None) == (algo == "reinforce")
    loaded = proxima.load(str(tmp_path / "run"))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True), agent.predict(obs, deterministic=True)
    )
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 2048 // 512


def test_one_gradient_step_per_rollout_for_vpg(tmp_path):
    # With 1 epoch x 1 minibatch, Adam's step count equals the number of rollouts.
    agent = proxima.train(algo="vpg", total_timesteps=4 * 512, run_dir=str(tmp_path / "run"))
    assert agent.model is not None
    config = resolve_args(algo="vpg")
    assert config.algorithm.update_epochs * config.algorithm.num_minibatches == 1


def test_compare_writes_plot_and_table(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(
        [
            "compare",
            "--algos",
            "reinforce",
            "ppo",
            "--seeds",
            "2",
            "--total-timesteps",
            "1024",
            "--output-dir",
            str(out),
            "--executor",
            "local",  # Ray's executor: tests/test_sweep.py
        ]
    )
    assert code == 0
    assert str(out) in capsys.readouterr().out
    png = (out / "learning_curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    table = (out / "results.md").read_text()
    assert "| reinforce |" in table and "| ppo |" in table
    # and proxima report's page of the comparison: one group per algorithm, one legend entry per run
    from tests.test_report import page_data

    page = page_data(out / "report.html")
    assert page["groups"] == ["reinforce", "ppo"]
    assert [(r["label"], page["groups"][r["group"]]) for r in page["runs"]] == [
        ("reinforce__seed1", "reinforce"), ("reinforce__seed2", "reinforce"), ("ppo__seed1", "ppo"),
        ("ppo__seed2", "ppo"),
    ]  # fmt: skip
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and "seed" in p.name) == [
        "ppo__seed1",
        "ppo__seed2",
        "reinforce__seed1",
        "reinforce__seed2",
    ]
    for bad in (["--algos", "dqn"], ["--algos", "ppo", "ppo"], ["--algo", "ppo"], ["--seed", "2"],
                ["--run-dir", "r"], ["--num-envs", "0"]):  # fmt: skip
        assert main(["compare", *bad, "--output-dir", str(tmp_path / "x")]) == 2
        assert not (tmp_path / "x").exists()


def test_compare_gives_train_flags_to_every_algorithm_over_its_own_defaults(tmp_path):
    out = tmp_path / "cmp"
    argv = ["compare", "--algos", "reinforce", "ppo", "--seeds", "2-2", "--num-envs", "2", "--torch-threads", "1",
            "--gamma", "0.9", "--executor", "local", "--output-dir", str(out), "--no-plot", "--no-report"]  # fmt: skip
    assert main([*argv, "--total-timesteps", "512"]) == 0
    configs = {
        algo: json.loads((out / f"{algo}__seed2" / "config.json").read_text())
        for algo in ("reinforce", "ppo")
    }
    for algo, config in configs.items():
        assert (config["env"]["num_envs"], config["run"]["torch_threads"], config["algorithm"]["gamma"]) == (
            2,
            1,
            0.9,
        )
        assert config["run"]["seed"] == 2 and config["algorithm"]["total_timesteps"] == 512
        assert config["algorithm"]["update_epochs"] == resolve_args(algo=algo).algorithm.update_epochs
    assert configs["reinforce"]["algorithm"]["update_epochs"] != configs["ppo"]["algorithm"]["update_epochs"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["ppo__seed2", "reinforce__seed2"]


class _Planned(Exception):
    pass


@pytest.mark.parametrize(
    "flags,total",
    [([], 100_000), (["--total-timesteps", "4096"], 4096), (["--config", "cartpole-fast"], None)],
)
def test_compare_runs_100k_steps_unless_a_flag_or_a_preset_says(flags, total, monkeypatch, tmp_path):
    import proxima.scale.compare

    def planned(seeds, settings, **_):
        raise _Planned(seeds, settings)

    monkeypatch.setattr(proxima.scale.compare, "sweep", planned)
    with pytest.raises(_Planned) as e:
        main(["compare", "--algos", "vpg", "--output-dir", str(tmp_path / "x"), *flags])
    seeds, settings = e.value.args
    assert seeds == [1, 2, 3] and [algo for algo, _ in settings] == ["vpg"]
    expected = total or resolve_args(config="cartpole-fast").algorithm.total_timesteps
    assert (
        settings[0][1].algorithm.total_timesteps
        == expected
        != resolve_args(algo="vpg").algorithm.total_timesteps
    )


def test_cartpole_cleanrl_preset_is_the_defaults_without_value_normalization():
    # the one default beyond CleanRL's ppo.py is value normalization; tests/test_learning.py trains both on
    # CartPole
    preset = resolve_args(config="cartpole-cleanrl")
    assert preset.network.norm_value is False and PPOArgs().network.norm_value is True
    assert preset.replace(norm_value=True) == PPOArgs()


def test_seed_presets_run_the_seeds_critic():
    for name in preset_names():
        if name.startswith("seed"):
            assert resolve_args(config=name).network.norm_value is False, name
