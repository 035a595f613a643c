"""Your functions in the loop (proxima.algo.custom): the PPO tutorial's compute_advantages, calc_policy_loss,
calc_value_function_loss and calc_entropy_loss, written by a learner (tests/fixtures/student_ppo.py), train
byte-identically to proxima's own; the homework's dones are adapted; wrong ones are refused in one line; a run's
files name them as they name an encoder, and a resume imports them only where the user names them again."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

import proxima
from proxima.algo import custom
from proxima.algo.algorithms import ALGORITHMS
from proxima.algo.custom import OwnTerms, check_advantages
from proxima.algo.losses import value_loss
from proxima.algo.storage import Batch
from proxima.algo.update import Solo, UpdateSettings
from proxima.base import trust
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.run.config import PPOArgs
from tests.fixtures import student_ppo as student

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(env_id="CartPole-v1", total_timesteps=256, num_envs=2, num_steps=64, seed=3, torch_threads=1,
            quiet=True, plot=False, report=False)  # fmt: skip
LOSSES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "grad_norm", "explained_variance")
FLAGS = ["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64", "--seed", "3", "--torch-threads", "1",
         "--no-plot", "--no-report"]  # fmt: skip
ALL = dict(
    advantages=student.compute_advantages,
    policy_loss=student.calc_policy_loss,
    value_loss=student.calc_value_function_loss,
    entropy_loss=student.calc_entropy_loss,
)


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as another would be: given no names (what earlier tests trained with is forgotten)."""
    monkeypatch.setattr(trust, "_GIVEN", {setting: set() for setting in trust.SETTINGS})
    monkeypatch.setattr(custom, "_GIVEN", {setting: {} for setting in custom.FUNCTIONS})


def _trained(run_dir, **functions):
    agent = proxima.train(run_dir=str(run_dir), **TINY, **functions)
    metrics = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    return agent.model.state_dict(), [{k: m[k] for k in LOSSES} for m in metrics]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _trained(tmp_path_factory.mktemp("plain") / "run")


@pytest.mark.parametrize(
    "functions",
    [
        pytest.param(ALL, id="all four"),
        pytest.param({**ALL, "advantages": student.advantages_homework_dones}, id="the homework's dones"),
        pytest.param({"policy_loss": student.calc_policy_loss}, id="the policy loss alone"),
    ],
)
def test_the_tutorials_functions_train_as_proxima_does_to_the_last_bit(functions, plain, tmp_path):
    weights, losses = _trained(tmp_path / "run", **functions)
    assert losses == plain[1]  # every update's losses and diagnostics, exactly
    assert all(torch.equal(weights[k], plain[0][k]) for k in plain[0])


def test_the_value_term_sees_proxima_s_units(tmp_path):
    """With --norm-value the update measures the critic's errors in standard deviations of its targets: the
    critic your function calls, and the returns it gets, are in those units, so the tutorial's
    v_coef * ½·MSE is proxima's vf_coef * value_loss, exactly."""
    agent = proxima.train(run_dir=str(tmp_path / "run"), **TINY)
    model, n = agent.model, 32
    obs = torch.randn(n, 4)
    with torch.no_grad():
        _, logprobs, values = model.act(obs)
    batch = Batch(obs, torch.randint(0, 2, (n,)), logprobs, values, torch.randn(n), 50 + 20 * torch.randn(n))
    own = OwnTerms(value=student.calc_value_function_loss, distribution=custom.PolicyCategorical)
    settings = UpdateSettings.from_args(PPOArgs.of(**TINY), own)
    solo = Solo(model, None, batch, settings, torch.Generator())  # type: ignore[arg-type]  # no step taken
    assert solo.scale is not None and float(solo.scale) > 2  # returns of about 50: standardized units
    (_, _, new_values), on = settings.own.evaluate(model, solo.batch, solo.scale)
    ours = settings.vf_coef * value_loss(new_values / solo.scale, solo.batch.returns)
    theirs = student.calc_value_function_loss(on.critic, solo.batch.obs, solo.batch.returns, settings.vf_coef)
    assert theirs.item() == ours.item() and on.critic(solo.batch.obs).shape == (n, 1)
    assert torch.equal(
        on.critic(solo.batch.obs.clone()), on.critic(solo.batch.obs)
    )  # other obs: the critic's own
    # a real torch distribution: its own numbers are the head's to float rounding, those of the minibatch's
    # actions the head's own tensors
    probs, mb = on.probs, solo.batch
    assert isinstance(probs, torch.distributions.Categorical) and probs.log_prob(mb.actions) is on.logprobs
    torch.testing.assert_close(
        torch.distributions.Categorical(logits=probs.logits).log_prob(mb.actions), on.logprobs
    )
    torch.testing.assert_close(probs.log_prob(mb.actions.clone()), on.logprobs, rtol=0, atol=0)


def test_advantages_are_checked_on_a_known_case():
    assert not check_advantages(student.compute_advantages).shifted
    homework = check_advantages(student.advantages_homework_dones)
    assert homework.shifted and "homework" in homework.note
    with pytest.raises(UserError, match=r"first at step 3, env 0: yours .*; it is GAE where the bootstrap"):
        check_advantages(student.advantages_without_bootstrap)
    with pytest.raises(UserError, match=r"returned \(18,\); .* \(T, N\) = \(6, 3\)"):
        check_advantages(student.advantages_of_wrong_shape)


def test_a_wrong_sign_policy_loss_trains_and_logs_its_own_number(plain, tmp_path):
    """proxima trains what it is given (the grader, `proxima check`, judges it, and probe 4 below shows it):
    the run goes on to its end, and its logged losses are its own."""
    _, losses = _trained(tmp_path / "run", policy_loss=student.policy_loss_wrong_sign)
    assert len(losses) == len(plain[1]) and losses != plain[1]


def test_a_function_with_other_parameter_names_is_refused_in_one_line(capsys):
    with pytest.raises(
        UserError, match=r"policy_loss: proxima calls your policy_loss_wrong_names by .* it lacks"
    ):
        proxima.train(policy_loss=student.policy_loss_wrong_names, **TINY)
    wrong = "tests.fixtures.student_ppo:policy_loss_wrong_names"
    assert main(["train", "--policy-loss", wrong, *FLAGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it lacks 'mb_action', 'mb_advantages', 'mb_logprobs'" in err, err


def test_the_cli_takes_a_module_of_functions_and_a_resume_names_them_again(tmp_path, fresh_process, capsys):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "proxima", "train", "--algo", "tests.fixtures.student_ppo", "--run-dir", str(run),
            "--checkpoint-every", "1", *FLAGS]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT}, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        "your functions in the loop: compute_advantages (tests.fixtures.student_ppo:compute_advantages)"
        in done.stdout
    )
    algorithm = json.loads((run / "config.json").read_text())["algorithm"]
    assert (
        algorithm["algo"] == "ppo"
        and algorithm["policy_loss"] == "tests.fixtures.student_ppo:calc_policy_loss"
    )
    more = ["--total-timesteps", "512", "--quiet"]
    assert main(["train", "--resume", str(run), *more]) == 2  # this process was given none of them
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names the advantage estimator" in err and "--algo MODULE" in err, err
    assert main(["train", "--resume", str(run), *more, "--algo", "tests.fixtures.student_ppo"]) == 0


@pytest.fixture
def own_table():
    """What a test registers is its own: other tests list the algorithm table."""
    saved = dict(ALGORITHMS)
    yield
    ALGORITHMS.clear()
    ALGORITHMS.update(saved)


@pytest.mark.usefixtures("fresh_process", "own_table")
def test_an_algorithm_holds_the_functions_by_name_or_as_module_name(tmp_path, plain):
    mine = dataclasses.replace(student.STUDENT, name="mine")
    weights, _ = _trained(tmp_path / "object", algo=mine)
    assert ALGORITHMS["mine"] is mine and all(torch.equal(weights[k], plain[0][k]) for k in plain[0])
    assert json.loads((tmp_path / "object" / "config.json").read_text())["algorithm"]["algo"] == "mine"
    named = "tests.fixtures.student_ppo:STUDENT"
    assert main(["train", "--algo", named, "--run-dir", str(tmp_path / "named"), "--quiet", *FLAGS]) == 0
    assert json.loads((tmp_path / "named" / "config.json").read_text())["algorithm"]["algo"] == named


def test_a_lambda_is_recorded_as_a_placeholder_that_a_resume_asks_for_again(tmp_path, fresh_process, plain):
    loss = lambda critic, mb_obs, mb_returns, v_coef: student.calc_value_function_loss(  # noqa: E731
        critic, mb_obs, mb_returns, v_coef
    )
    run = tmp_path / "run"
    proxima.train(run_dir=str(run), value_loss=loss, checkpoint_every=1, **TINY)
    assert json.loads((run / "config.json").read_text())["algorithm"]["value_loss"] == "<lambda>"
    custom._GIVEN["value_loss"].clear()  # another process: it has no such object
    with pytest.raises(UserError, match=r"calc_value_function_loss was the function <lambda>.*give it again"):
        proxima.train(resume=str(run), total_timesteps=512, quiet=True)
    agent = proxima.train(resume=str(run), total_timesteps=512, quiet=True, value_loss=loss)
    assert agent is not None


def test_probe_4_blames_a_wrong_sign_policy_loss_on_the_policy_loss(capsys):
    wrong = "tests.fixtures.student_ppo:policy_loss_wrong_sign"
    assert main(["probe", "--policy-loss", wrong, "--probes", "4"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "first failure: probe 4, which points to the advantages or policy loss" in out, (
        out
    )
