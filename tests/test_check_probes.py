"""`proxima check MODULE --probes` and `proxima.check(..., probes=...)`: a learner's functions and Agent, graded,
then trained on proxima's probes in the loop. A right module passes both and trains CartPole through `proxima
train`; a wrong sign or a wrong critic fails its grader line and the probe that names the broken part; a piece
the loop refuses is a FAIL line, not a crash. Each case trains only the probes it needs."""

import json
import re

import torch
from torch import nn

import proxima
from proxima.commands import main
from proxima.run.grading import check as grade
from tests.fixtures import student_agent, student_ppo

RIGHT = "tests.fixtures.student_ppo"


def _rows(out: str) -> dict[str, str]:
    """The probe table's rows, by probe name."""
    return {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}


def test_a_students_functions_and_agent_pass_check_with_the_probes_and_train_cartpole(capsys, tmp_path):
    assert main(["check", RIGHT, "--probes", "1", "4"]) == 0
    out = capsys.readouterr().out
    for name in [
        "Agent",
        "compute_advantages",
        "calc_policy_loss",
        "calc_value_function_loss",
        "calc_entropy_loss",
    ]:
        assert any(line.startswith(f"PASS {name} (") for line in out.splitlines()), out
    assert (
        "probes 1, 4 with your compute_advantages, calc_policy_loss, calc_value_function_loss, calc_entropy_loss, "
        "Agent in proxima's loop (proxima's own for the rest)" in out
    )
    rows = _rows(out)
    assert list(rows) == ["1", "4"] and all("│ pass" in row for row in rows.values()), out
    assert "no probe failed (2 passed)" in out
    # the same file trains CartPole through `proxima train`
    run = tmp_path / "run"
    argv = ["train", "--algo", RIGHT, "--actor-critic", f"{RIGHT}:Agent", "--total-timesteps", "1024"]
    assert main([*argv, "--run-dir", str(run), "--quiet"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["algorithm"]["policy_loss"] == f"{RIGHT}:calc_policy_loss"
    assert config["network"]["actor_critic"] == f"{RIGHT}:Agent"


def test_a_wrong_sign_policy_loss_fails_its_grader_and_probe_4_names_the_policy_loss(capsys, tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(
        "from tests.fixtures import student_ppo\n\n\n"
        "def calc_policy_loss(probs, mb_action, mb_advantages, mb_logprobs, clip_coef):\n"
        "    return -student_ppo.calc_policy_loss(probs, mb_action, mb_advantages, mb_logprobs, clip_coef)\n"
    )
    # 10k steps, a third of probe 4's budget: the wrong sign takes π(best) from 0.5 down, not up
    assert main(["check", str(mine), "--probes", "4", "--total-timesteps", "10000"]) == 1
    out = capsys.readouterr().out
    assert 'FAIL calc_policy_loss: case "ratios within the clip range": ' in out
    assert "  hint: the sign is flipped: return minus L^CLIP" in out
    row = _rows(out)["4"]
    assert "│ FAIL" in row and float(row.split("π(best) = ")[1].split(",")[0]) < 0.5, out
    assert "first failure: probe 4, which points to the advantages or policy loss" in out.replace("\n", " ")


def test_a_critic_that_ends_in_a_relu_fails_its_grader_and_probe_2_names_the_network():
    grades = proxima.check({"Agent": student_agent.ReluCritic}, probes=["2"])
    assert grades.lines() == [
        'FAIL Agent: case "the critic\'s output layer: rows of norm 1": the critic ends in ReLU (yours) vs an '
        "nn.Linear with 1 output (the tutorial's: a value of either sign)"
    ]
    (probe,) = grades.probes
    assert probe.passed is False and probe.blame == "backprop or network", (
        probe
    )  # V(-1) = -1 is out of its reach
    assert not grades.passed and grades.exit_status == 1


def test_a_piece_the_loop_refuses_is_a_fail_line_and_the_probes_stop(capsys, tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(
        "from tests.fixtures import student_ppo\n\n\n"
        "def compute_advantages(next_value, next_done, rewards, values, dones, device, gamma, gae_lambda):\n"
        "    return student_ppo.advantages_without_bootstrap(\n"
        "        next_value, next_done, rewards, values, dones, device, gamma, gae_lambda\n"
        "    )\n"
    )
    assert main(["check", str(mine), "--probes"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[-1].startswith(
        "FAIL probes: proxima's loop refuses your pieces: compute_advantages differs from proxima's GAE "
    ) and lines[-1].endswith("it is GAE where the bootstrap from next_value, V(obs_T), is missing"), out
    assert "hint: your advantages do not bootstrap from next_value" in out and err == ""
    assert "probe 2:" not in out and _rows(out) == {}  # refused as the first probe started
    # nothing graded is a piece of the loop: a SKIP line, and the grades decide
    assert main(["check", "tests.fixtures.student_answers:layer_init", "--probes", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("SKIP probes: nothing graded is a piece of ")
    for argv, error in [
        ([RIGHT, "--probes", "continuous"], "unknown probe 'continuous' for check; accepted: 1, 2, 3, 4, 5"),
        ([RIGHT, "--total-timesteps", "1000"], "--total-timesteps is the probes' budget: give --probes too"),
    ]:
        assert main(["check", *argv]) == 2
        assert capsys.readouterr().err.startswith(f"proxima check: error: {error}")


def test_the_tutorials_agent_is_graded_on_cartpoles_spaces_and_its_init():
    assert grade(student_ppo).results[0].lines() == ["PASS Agent (3 cases)"]

    class DefaultNorms(student_agent.Agent):  # the actor's output layer made with layer_init's default
        def __init__(self, envs):
            super().__init__(envs)
            self.actor[-1] = student_agent.layer_init(nn.Linear(64, 2))

    (result,) = grade({"Agent": DefaultNorms}).results
    assert result.case == "the actor's output layer: rows of norm 0.01"
    # sqrt(2) to float32 rounding, whose last printed digit depends on the orthogonal draw
    assert re.match(
        r"the actor's output layer's row norm\[0\] = 1\.41421[34] \(yours\) vs 0\.01 \(the tutorial's",
        result.detail,
    ), result.detail
    assert (
        result.hint
        == "the rows have norm sqrt(2), layer_init's default: pass row_norm=0.01 for the actor's output"
    )

    class FlatCritic(student_agent.Agent):
        def __init__(self, envs):
            super().__init__(envs)
            self.critic.append(nn.Flatten(0))

    (result,) = grade({"Agent": FlatCritic}).results
    assert result.detail == "critic(obs) has shape (5,) (yours) vs shape (5, 1) (the tutorial's)"
    torch.manual_seed(5)
    before = torch.get_rng_state()
    proxima.check({"Agent": student_agent.Agent})
    assert torch.equal(torch.get_rng_state(), before)  # its init draws from a fork of torch's generator
