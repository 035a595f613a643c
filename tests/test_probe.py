"""`proxima probe`: the agent passes every probe, and a component broken on purpose is named by the table."""

import dataclasses
import json

import pytest
import torch

import proxima.algo.storage
import proxima.algo.update
import proxima.scale.trainer
from proxima.algo.algorithms import ALGORITHMS
from proxima.algo.losses import value_loss
from proxima.algo.storage import Batch
from proxima.base.files import PROBES_JSON
from proxima.commands import main
from proxima.policy.networks import ActorCritic
from proxima.run.config import PPOArgs
from proxima.scale.probe import VALUE_LAGS, _verdict, run_probes

NOTE = "probing the critic without value normalization (--no-norm-value)"


def _probe(capsys, *argv):
    code = main(["probe", *argv])
    out = capsys.readouterr().out
    rows = {
        line.split("│")[1].strip(): line
        for line in out.splitlines()
        if line.startswith("│") and line.split("│")[1].strip()
    }
    return code, out, rows


@pytest.mark.slow
def test_the_default_agent_passes_every_probe(capsys):
    code, out, rows = _probe(capsys)
    assert code == 0, out
    assert set(rows) == {"1", "2", "3", "4", "5", "continuous"}
    assert all("│ pass" in row for row in rows.values()), out
    assert "no probe failed (6 passed)" in out
    assert "probe 4: the better of two actions, 30000 steps" in out  # said before each probe's training


def _assert_blames(capsys, probes, failing, blame):
    code, out, rows = _probe(capsys, "--probes", *probes)
    assert code == 1, out
    names = list(rows)
    assert names == probes, out
    assert all("│ pass" in rows[name] for name in names[: names.index(failing)]), out  # the earlier ones pass
    assert "│ FAIL" in rows[failing], out
    assert f"first failure: probe {failing}, which points to the {blame}" in out.replace("\n", " "), out


@pytest.mark.slow
def test_a_value_loss_without_gradient_is_blamed_on_the_value_loss(capsys, monkeypatch):
    monkeypatch.setattr(
        proxima.algo.update, "value_loss", lambda values, returns: value_loss(values.detach(), returns)
    )
    _assert_blames(capsys, ["1", "2"], "1", "value loss or optimizer")


@pytest.mark.slow
def test_probes_train_an_unnormalized_critic_unless_value_normalization_is_asked_for(capsys, monkeypatch):
    """A normalized critic gets probe 1's constant value from its statistics, so it would hide a broken loss."""
    monkeypatch.setattr(
        proxima.algo.update, "value_loss", lambda values, returns: value_loss(values.detach(), returns)
    )
    code, out, rows = _probe(capsys, "--probes", "1")
    assert code == 1 and "│ FAIL" in rows["1"] and NOTE in out, out
    code, out, rows = _probe(capsys, "--probes", "1", "--norm-value")
    assert code == 0 and "│ pass" in rows["1"] and NOTE not in out, out


@pytest.mark.slow
def test_a_critic_that_ignores_its_input_is_blamed_on_the_network(capsys, monkeypatch):
    original = ActorCritic._value
    monkeypatch.setattr(
        ActorCritic, "_value", lambda self, features, *rest: original(self, features * 0, *rest)
    )
    _assert_blames(capsys, ["1", "2"], "2", "backprop or network")


@pytest.mark.slow
def test_a_dropped_discount_is_blamed_on_discounting(capsys, monkeypatch):
    # a single agent's rollout buffer computes them (RolloutBuffer.advantages)
    original = proxima.algo.storage.estimate_advantages

    def undiscounted(estimator, rewards, values, dones, next_value, next_done, gamma, gae_lambda, **turns):
        return original(estimator, rewards, values, dones, next_value, next_done, 1.0, gae_lambda, **turns)

    monkeypatch.setattr(proxima.algo.storage, "estimate_advantages", undiscounted)
    _assert_blames(capsys, ["1", "2", "3"], "3", "discounting")


@pytest.mark.slow
def test_a_flipped_policy_loss_is_blamed_on_the_policy_loss(capsys, monkeypatch):
    # The policy term is the algorithm's (proxima.algo.algorithms), looked up by name when a run starts.
    ppo = ALGORITHMS["ppo"]
    flipped = dataclasses.replace(ppo, policy_loss=lambda *args: -ppo.policy_loss(*args))
    monkeypatch.setitem(ALGORITHMS, "ppo", flipped)
    _assert_blames(capsys, ["1", "2", "3", "4"], "4", "advantages or policy loss")


@pytest.mark.slow
def test_observations_misaligned_with_actions_in_minibatches_are_blamed_on_batching(capsys, monkeypatch):
    def misaligned(self, index):
        # Observations travel with their values and returns, actions with their log-probs and advantages,
        # but the two halves come from different samples: an indexing bug in the minibatch code.
        other = torch.roll(index, 1)
        return Batch(
            self.obs[index], self.actions[other], self.logprobs[other], self.values[index],
            self.advantages[other], self.returns[index],
        )  # fmt: skip

    monkeypatch.setattr(Batch, "__getitem__", misaligned)
    _assert_blames(capsys, ["1", "2", "3", "4", "5"], "5", "batching or stale data")


@pytest.mark.slow
def test_reinforce_has_no_values_to_probe(capsys):
    code, out, rows = _probe(capsys, "--algo", "reinforce", "--probes", "1")
    assert code == 0 and "│ n/a" in rows["1"] and "no critic" in rows["1"], out


@pytest.mark.slow
def test_run_level_flags_do_not_get_in_the_way(capsys, tmp_path):
    """Evaluation, best-agent and plotting flags belong to long runs; probe runs drop them and still pass."""
    argv = [
        "--probes",
        "1",
        "--eval-every",
        "5",
        "--save-best",
        "--stop-return",
        "1",
        "--run-dir",
        str(tmp_path),
    ]
    code, out, rows = _probe(capsys, *argv)
    assert code == 0 and "│ pass" in rows["1"], out
    assert (tmp_path / "probe-1" / "model.safetensors").exists()  # --run-dir keeps the probe runs


@pytest.mark.slow
def test_the_box_only_settings_go_to_the_continuous_probe_alone(capsys):
    """A Beta policy (or a std cap) is a setting of Box actions: the continuous probe trains with it, and the
    discrete probes of the same agent without it (with it, bipedalwalker-fast's Beta policy would stop them)."""
    code, out, rows = _probe(capsys, "--action-dist", "beta", "--probes", "4", "continuous")
    assert code == 0 and set(rows) == {"4", "continuous"}, out
    assert all("│ pass" in row for row in rows.values()), out
    code, out, rows = _probe(capsys, "--config", "bipedalwalker-fast", "--probes", "1")
    assert code == 0 and "│ n/a" in rows["1"] and "values are scaled" in rows["1"], out  # its reward scaling
    code, out, rows = _probe(capsys, "--action-std-end", "0.1", "--probes", "1")
    assert code == 0 and "│ pass" in rows["1"], out


def test_a_tanh_gaussian_policy_passes_the_continuous_probe(capsys):
    """Its std is a function of the state and sharpens within a few thousand steps; the critic without value
    normalization then trails the returns by about 0.17 at the probe's budget (docs/CONTINUOUS.md), with it
    (the training default) it keeps up."""
    code, out, rows = _probe(
        capsys, "--action-dist", "tanh-gaussian", "--norm-value", "--probes", "continuous"
    )
    assert code == 0 and set(rows) == {"continuous"} and "│ pass" in rows["continuous"], out


@pytest.mark.slow
def test_values_that_lag_a_right_policy_are_blamed_on_the_critic(capsys, tmp_path):
    """Without value normalization the tanh head's probe fails on its values alone (mean 0.50, std 0.02, V(0)
    about -0.17 where -0.00 is implied): the head did its job, so the table names the critic, not the head."""
    code, out, rows = _probe(
        capsys, "--action-dist", "tanh-gaussian", "--probes", "continuous", "--run-dir", str(tmp_path)
    )
    assert code == 1 and "│ FAIL" in rows["continuous"], out
    assert "points to the critic: the policy is right, its values are not" in " ".join(out.split()), out
    (saved,) = json.loads((tmp_path / PROBES_JSON).read_text())["probes"]
    assert saved["passed"] is False and saved["points_to"] == VALUE_LAGS


@pytest.mark.parametrize(
    "policy_ok,value_ok,passed,blame",
    [(True, True, True, None), (True, None, True, None), (True, False, False, VALUE_LAGS),
     (False, True, False, None), (False, False, False, None), (False, None, False, None)],
)  # fmt: skip
def test_only_a_failure_of_the_values_alone_moves_the_blame_to_the_critic(policy_ok, value_ok, passed, blame):
    assert _verdict("e", "l", policy_ok, value_ok) == ("e", "l", passed, blame)


@pytest.mark.parametrize(
    "argv,match",
    [(["--probes", "7"], "unknown probe '7'"), (["--env-id", "CartPole-v1"], "drop --env-id")],
)
def test_bad_probe_input_is_one_line_exit_2(argv, match, capsys):
    assert main(["probe", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0], err


def test_probe_help_names_its_own_flags(capsys):
    assert main(["probe", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--probes NAME" in out and "--total-timesteps" in out and "proxima train --help" in out


@pytest.mark.slow
def test_a_failure_with_fewer_gradient_steps_than_the_budgets_assume_says_so(capsys):
    # VPG's default is one gradient step per rollout: probe 1's 10k steps are 19 steps, too few to fit V(0) = 1
    code, out, rows = _probe(capsys, "--algo", "vpg", "--probes", "1")
    assert code == 1 and "│ FAIL" in rows["1"], out
    assert "1 gradient steps per 512 samples, fewer than the 16 per 512" in " ".join(out.split()), out
    code, out, _ = _probe(
        capsys, "--probes", "1", "--learning-rate", "1e-9"
    )  # PPO's step count, but no learning
    assert code == 1 and "first failure: probe 1" in out
    assert "fewer than the 16" not in out  # the step count is not the reason, so no such note


class _Trained(Exception):
    """Stops a probe at its training: the settings it would train with are all these tests need."""


@pytest.fixture
def trained(monkeypatch):
    seen = []

    def train(args, *rest, **kwargs):
        seen.append(args)
        raise _Trained

    monkeypatch.setattr(proxima.scale.trainer, "train", train)
    return seen


def test_run_probes_trains_the_seeds_critic_unless_asked(trained, capsys):
    with pytest.raises(_Trained):
        run_probes(PPOArgs(), names=["1"])
    assert trained[-1].network.norm_value is False and trained[-1].env.env_id == "proxima/Probe1-v0"
    assert NOTE in capsys.readouterr().out
    with pytest.raises(_Trained):
        run_probes(PPOArgs(), names=["1"], norm_value=True)
    assert trained[-1].network.norm_value is True and NOTE not in capsys.readouterr().out
    with pytest.raises(_Trained):
        run_probes(PPOArgs.of(algo="reinforce"), names=["1"])
    assert NOTE not in capsys.readouterr().out  # no critic to speak of


@pytest.mark.parametrize(
    "argv,norm_value,note",
    [
        ([], False, True),
        (["--norm-value"], True, False),
        (["--norm-value", "false"], False, False),
        (["--no-norm-value"], False, False),
        (["--config", "pendulum"], False, False),  # the preset sets norm_value false itself
        (["--config", "critic.json"], True, False),  # a preset that sets norm_value true
        (["--config", "silent.json"], False, True),  # a preset silent on it
    ],
)
def test_the_probe_command_trains_the_seeds_critic_unless_the_flags_or_preset_ask(
    argv, norm_value, note, trained, capsys, tmp_path
):
    (tmp_path / "critic.json").write_text('{"norm_value": true}')
    (tmp_path / "silent.json").write_text('{"num_envs": 2}')
    argv = [str(tmp_path / a) if a.endswith(".json") else a for a in argv]
    with pytest.raises(_Trained):
        main(["probe", "--probes", "1", *argv])
    assert trained[-1].network.norm_value is norm_value
    assert (NOTE in capsys.readouterr().out) is note


def test_the_probe_command_and_run_probes_train_the_same_agent(trained):
    with pytest.raises(_Trained):
        main(["probe", "--probes", "2"])
    with pytest.raises(_Trained):
        run_probes(PPOArgs(), names=["2"])
    cli, api = (args.replace(run_dir=None) for args in trained)
    assert cli == api and cli.network.norm_value is False
