"""`proxima check MODULE[:FUNCTION]` and `proxima.check`: a learner's right answers pass every grader, the common
wrong ones fail with the hint that names their mistake, and the command's exit status says which."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import proxima
from proxima.commands import main
from proxima.run.grading import GRADERS, check, homework_loss, homework_traj_data
from tests.fixtures import student_answers, student_wrong

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = "tests/fixtures/student_answers.py"
WRONG = "tests/fixtures/student_wrong.py"


def test_a_students_right_answers_pass_every_grader():
    grades = check(ROOT / ANSWERS)
    # its Agent is the homework's (with get_loss); the tutorial's Agent(envs) is graded in tests/test_check_probes.py
    assert [r.name for r in grades.results] == [n for n in GRADERS if n != "Agent"] and grades.missing == [
        "Agent"
    ]
    assert [line for line in grades.lines() if not line.startswith("PASS")] == []
    assert "PASS compute_advantages (4 cases)" in grades.lines()
    assert grades.exit_status == 0


def test_the_graders_reference_is_the_homeworks_unit_test_numbers():
    for kind, number in [("REINFORCE", -0.23688789), ("VPG", 0.06184128), ("PPO", 0.93139088)]:
        data = homework_traj_data(ppo=kind == "PPO")
        torch.manual_seed(0)  # the homework's tests build a.policy, then a.value, after this
        policy, value = nn.Linear(4, 1), nn.Linear(4, 1)
        loss, _ = homework_loss(kind, data, policy, value)
        assert loss.item() == pytest.approx(number, abs=5e-9), kind


def _one(function, name):
    (result,) = check({name: function}).results
    return result


@pytest.mark.parametrize(
    ("wrong", "name", "case", "hint"),
    [
        (student_wrong.calc_policy_loss, "calc_policy_loss", "ratios within the clip range", "the sign is flipped"),
        (student_wrong.compute_advantages, "compute_advantages", "no episode ends",
         "your advantages do not bootstrap from next_value"),
        (student_wrong.compute_advantages_homework_dones, "compute_advantages", "episode boundaries",
         "your advantages are proxima's with the dones read one step early"),
        (student_wrong.calc_value_function_loss, "calc_value_function_loss", "v_coef 0.5",
         "the loss is not weighted by v_coef"),
        (student_wrong.calc_value_function_loss_broadcast, "calc_value_function_loss", "v_coef 0.5",
         "critic(mb_obs) has shape (B, 1) and mb_returns (B,): their difference broadcasts to (B, B)"),
    ],
)  # fmt: skip
def test_a_common_mistake_fails_with_the_hint_that_names_it(wrong, name, case, hint):
    result = _one(wrong, name)
    assert result.passed is False and result.case == case
    assert " (yours) vs " in result.detail and result.detail.endswith("(proxima's)")
    assert result.hint is not None and result.hint.startswith(hint), result.hint


def test_a_fail_line_gives_both_values_and_an_exception_is_its_one_line_message():
    lines = check(ROOT / WRONG).lines()
    assert lines[2:4] == [
        'FAIL calc_policy_loss: case "ratios within the clip range": loss = 0.01341196 (yours) vs -0.01341196 '
        "(proxima's)",
        "  hint: the sign is flipped: return minus L^CLIP, so that gradient descent maximizes the objective",
    ]
    assert lines[-1] == (
        "FAIL calc_entropy_loss: case \"ent_coef 0.01, 4 actions\": raised AttributeError: 'Categorical' object "
        "has no attribute 'entropi'"
    )


def test_a_loss_that_carries_no_gradient_fails_its_gradient_case():
    def detached(probs, ent_coef):
        return -ent_coef * probs.entropy().mean().item()

    result = _one(detached, "calc_entropy_loss")
    assert result.case == "the gradient to the logits" and "carries no gradient" in result.detail


def test_a_call_the_documents_keywords_do_not_bind_names_the_signature():
    def renamed(probs, coef):
        return -coef * probs.entropy().mean()

    result = _one(renamed, "calc_entropy_loss")
    assert result.passed is False and result.detail.startswith(
        "calc_entropy_loss cannot be called as the document calls it, calc_entropy_loss(probs, ent_coef): "
    )


def test_the_homeworks_agent_is_graded_by_its_name():
    class Agent(nn.Module):  # VPG without its value term
        def __init__(self, n_obs, n_actions):
            super().__init__()
            self.name = "VPG"
            self.policy, self.value = nn.Linear(n_obs, n_actions), nn.Linear(n_obs, 1)

        def get_loss(self, traj_data):
            advantage = traj_data.returns - self.value(traj_data.states).squeeze()
            return -(traj_data.log_probs * advantage).mean()

    result = _one(Agent, "Agent")
    assert result.passed is False and result.case == "the homework's unit test"
    assert result.hint.startswith("the value loss is missing")

    class GAEAgent(Agent):
        def __init__(self, n_obs, n_actions):
            super().__init__(n_obs, n_actions)
            self.name = "GAE"

    assert _one(GAEAgent, "Agent").lines() == [
        "SKIP Agent.get_loss: Agent(n_obs=4, n_actions=1).name is 'GAE'; graded: REINFORCE, VPG, PPO (the homework's)"
    ]


def test_grading_leaves_the_callers_torch_generator_as_it_was():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    proxima.check(student_answers)  # the homework's Agent seeds torch's generator; layer_init draws from it
    assert torch.equal(torch.get_rng_state(), before)


def test_the_command_names_what_it_found_and_refuses_bad_input_in_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["check", "tests.fixtures.student_answers:calc_gae"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "tests.fixtures.student_answers: grading TrajData.calc_gae",
        "PASS TrajData.calc_gae (3 cases)",
    ]
    assert main(["check", WRONG]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{WRONG}: grading compute_advantages, calc_policy_loss, ")
    assert (
        "; not found: the PPO tutorial's layer_init, " in first and "the policy-gradient homework's " in first
    )
    for argv, error in [
        ([f"{WRONG}:layer_init"], f"{WRONG} defines no layer_init"),
        (
            ["no_such_module_here"],
            "no module named 'no_such_module_here' on the path: give a .py file's path, or",
        ),
        (["tests/fixtures/no_such_file.py"], "no such file: tests/fixtures/no_such_file.py"),
    ]:
        assert main(["check", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"proxima check: error: {error}") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("target", "status", "stream", "start"),
    [
        (ANSWERS, 0, "stdout", "PASS layer_init (3 cases)"),
        (f"{WRONG}:compute_advantages", 1, "stdout", 'FAIL compute_advantages: case "no episode ends": '),
        (f"{ANSWERS}:compute_advantage", 2, "stderr", "proxima check: error: unknown function 'compute_advantage'; "
         "gradable: layer_init, Agent, compute_advantages, "),
    ],
)  # fmt: skip
def test_the_command_exits_0_1_2_from_a_process_of_its_own(target, status, stream, start):
    done = subprocess.run(
        [sys.executable, "-m", "proxima", "check", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == status, done.stderr
    lines = getattr(done, stream).splitlines()
    assert any(line.startswith(start) for line in lines), lines
    if status == 2:
        assert len(lines) == 1 and done.stdout == ""


def test_the_tutorials_skeleton_of_pass_bodies_fails_every_grader_in_one_line():
    import gymnasium as gym

    def left_as_pass(**kwargs):
        pass

    class PPOScheduler:
        def __init__(self, optimizer, initial_lr, end_lr, num_updates):
            self.optimizer = optimizer

        def step(self):
            pass

    class TrajData:
        def __init__(self, n_steps, n_envs, n_obs, n_actions):
            pass

        def calc_returns(self, gamma=0.99):
            pass

        def calc_gae(self, values, gamma=0.99, lam=0.95):
            pass

    class Agent(nn.Module):
        def __init__(self, n_obs, n_actions):
            super().__init__()
            self.name = "PPO"

        def get_loss(self, traj_data):
            pass

    class DiscreteActionWrapper(gym.ActionWrapper):
        def __init__(self, env, n_actions=5):
            super().__init__(env)
            self.action_space = gym.spaces.Discrete(n_actions)

        def action(self, action):
            pass

    class ObservationWrapper(gym.ObservationWrapper):
        def observation(self, observation):
            pass

    class RewardScalingWrapper(gym.RewardWrapper):
        def __init__(self, env, scaling_factor=0.1):
            super().__init__(env)

        def reward(self, reward):
            pass

    class TutorialAgent(nn.Module):  # the PPO tutorial's Agent(envs), of the same name as the homework's
        critic: nn.Sequential
        actor: nn.Sequential

        def __init__(self, envs):
            pass

    classes = [PPOScheduler, TrajData, Agent, DiscreteActionWrapper, ObservationWrapper, RewardScalingWrapper]
    functions = {g.name: left_as_pass for g in GRADERS.values() if g.owner is None and g.name[0].islower()}
    grades = check({**functions, **{c.__name__: c for c in classes}})
    assert [r.name for r in grades.results] == [n for n in GRADERS if n != "Agent"]
    (agent,) = check({"Agent": TutorialAgent}).results
    assert agent.lines() == [
        'FAIL Agent: case "actor(obs) and critic(obs) of 5 CartPole observations": raised AttributeError: '
        "'TutorialAgent' object has no attribute 'actor'"
    ]
    assert all(r.passed is False and r.case for r in grades.results), grades.lines()
    lines = dict(line.split(": ", 1) for line in grades.lines() if not line.startswith("  hint"))
    assert lines["FAIL compute_advantages"] == (
        'case "no episode ends": advantages is None (yours) vs a tensor of shape (8, 3) (proxima\'s)'
    )
    assert lines["FAIL minibatch_indexes"].startswith(
        'case "batch_size 64, minibatch_size 16": returned None, which is not the document\'s answer (TypeError: '
    )
    assert lines["FAIL DiscreteActionWrapper"] == (
        'case "the 5 torques": torque of action is None (yours) vs a tensor of shape (5,) (proxima\'s)'
    )
