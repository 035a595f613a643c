"""Your env as you have it (docs/ENVS.md): env objects, factories and VectorEnvs in every autoreset mode,
env_kwargs, resume and evaluation of such runs, module:Env-v0 from the working directory, and check-env."""

import dataclasses
import functools
import json
import os
import subprocess
import sys
import threading

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import proxima
from proxima import commands as cli
from proxima.base.errors import UserError
from proxima.commands.common import parse_train_args
from proxima.envs import make_envs, make_vec_env
from proxima.envs.user import describe_env, made_from_id
from tests.fixtures import wild_envs
from tests.fixtures.wild_envs import EPISODE, Float64Obs

TINY = dict(total_timesteps=512, num_envs=2, num_steps=64, quiet=True, report=False, plot=False)
LIMIT = (
    15  # CartPole's episodes truncated here, so that the sequences hold truncations as well as terminations
)


def _short_cartpole(**kwargs):
    return gym.make("CartPole-v1", max_episode_steps=LIMIT, **kwargs)


def _sequence(envs, steps=120, seed=3):
    """What the loop sees of ``envs`` for fixed random actions: every Step's tensors, after the first reset."""
    out = [envs.reset(seed=seed)]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        step = envs.step(torch.as_tensor(rng.integers(0, 2, envs.num_envs)))
        out.append(torch.stack([step.reward, step.terminated.float(), step.truncated.float()]))
        out += [step.obs, step.final_obs]
    return out


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("vector_cls", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_a_vector_env_in_each_autoreset_mode_steps_as_proximas_own_backend(mode, vector_cls):
    ours = make_vec_env("CartPole-v1", 3, backend="gymnasium", env_kwargs={"max_episode_steps": LIMIT})
    expected = _sequence(ours)
    flags = torch.stack(expected[1::3])
    assert flags[:, 1].sum() > 0 and flags[:, 2].sum() > 0  # the sequence holds both kinds of episode end
    users = vector_cls([_short_cartpole] * 3, autoreset_mode=mode)
    try:
        got = _sequence(make_envs(users, 3))
    finally:
        users.close()
    assert len(got) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_a_vector_env_that_cannot_reset_ended_envs_alone_is_refused_in_one_line():
    envs = gym.make_vec(
        "CartPole-v1", num_envs=2
    )  # Gymnasium's CartPoleVectorEnv: reset_mask resets them all
    with pytest.raises(UserError, match="reset every env when asked to reset env 0 alone") as e:
        proxima.train(env=envs, **TINY)
    assert "\n" not in str(e.value) and str(e.value).endswith("or its id: env_id='CartPole-v1', num_envs=2")


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_short_training_run_on_a_vector_env_in_each_mode(mode, tmp_path):
    envs = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=LIMIT,
    )
    agent = proxima.train(env=envs, run_dir=str(tmp_path / "run"), **TINY)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    # made by make_vec from a registered id: the id and its kwargs are recorded, the vectorization is not
    assert config["env"]["env_id"] == "CartPole-v1" and config["env"]["env_factory"] is None
    assert config["env"]["env_kwargs"] == {"max_episode_steps": LIMIT}
    lengths = [json.loads(line)["length"] for line in open(tmp_path / "run" / "episodes.jsonl")]
    assert lengths and max(lengths) <= LIMIT
    returns = proxima.evaluate(agent, 4, env=envs)
    assert len(returns) == 4 and returns.max() <= LIMIT


def _limit(env):
    return gym.wrappers.TimeLimit(env, LIMIT)


@pytest.mark.parametrize(
    "make, made",
    [
        (lambda: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"), ("CartPole-v1", None)),
        (lambda: gym.make_vec("CartPole-v1", 2), ("CartPole-v1", None)),  # Gymnasium's CartPoleVectorEnv
        (
            lambda: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", render_mode="rgb_array"),
            ("CartPole-v1", None),
        ),
        (
            lambda: gym.make_vec("CartPole-v1", 2, vectorization_mode="async", sutton_barto_reward=True),
            ("CartPole-v1", {"sutton_barto_reward": True}),
        ),
        (lambda: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", wrappers=[_limit]), None),
        (
            lambda: gym.wrappers.vector.RecordEpisodeStatistics(
                gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            ),
            None,
        ),
        (lambda: gym.vector.SyncVectorEnv([_short_cartpole] * 2), None),
    ],
    ids=["sync", "native", "render-mode", "kwargs", "sub-env-wrappers", "vector-wrapper", "no-spec"],
)
def test_a_vector_env_made_from_a_registered_id_is_that_id_and_no_other(make, made):
    envs = make()
    try:
        assert made_from_id(envs) == made
        label = "object:" + (envs.spec.id if envs.spec else "gymnasium.vector.sync_vector_env.SyncVectorEnv")
        assert describe_env(envs) == ((made[0], None) if made else (label, "<VectorEnv>"))
    finally:
        envs.close()


def test_a_vector_env_whose_kwargs_json_cannot_hold_keeps_its_label():
    envs = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    envs.unwrapped.spec = dataclasses.replace(envs.spec, kwargs={"sutton_barto_reward": object()})
    assert made_from_id(envs) is None and describe_env(envs) == ("object:CartPole-v1", "<VectorEnv>")
    envs.close()


def test_a_run_on_a_vector_env_made_from_an_id_evaluates_and_resumes_without_it(tmp_path, capsys):
    """SB3's users' way: make_vec, train on it, evaluate the agent (issue 65)."""
    run = str(tmp_path / "run")
    envs = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=LIMIT)
    agent = proxima.train(env=envs, run_dir=run, **TINY)
    assert agent.env_id == "CartPole-v1" and agent.env_source == {"env_kwargs": {"max_episode_steps": LIMIT}}
    returns = proxima.evaluate(agent, 3)
    assert len(returns) == 3 and returns.max() <= LIMIT
    assert cli.main(["eval", run, "--episodes", "2"]) == 0
    assert capsys.readouterr().out.startswith("CartPole-v1: mean_return=")
    proxima.resume(run, total_timesteps=1024)  # on envs that the id makes again
    assert json.loads(open(os.path.join(run, "agent.json")).read())["global_step"] == 1024
    with pytest.raises(UserError, match="proxima cannot add env_kwargs to it"):
        proxima.train(env=envs, env_kwargs={"max_episode_steps": 9}, **TINY)
    envs.close()


class CountedEnv(Float64Obs):
    made = 0

    def __init__(self, render_mode=None, size=1):
        type(self).made += 1
        self.size = size
        super().__init__(render_mode)


def test_a_factory_is_called_once_per_sub_env_and_once_for_the_checks(tmp_path):
    CountedEnv.made = 0
    envs = make_envs(CountedEnv, 3)
    assert CountedEnv.made == 4
    assert envs.reset(seed=0).dtype == torch.float64
    envs.close()


@pytest.mark.parametrize(
    "given, label, factory",
    [
        (Float64Obs, "object:tests.fixtures.wild_envs.Float64Obs", "tests.fixtures.wild_envs:Float64Obs"),
        (
            functools.partial(Float64Obs),
            "object:tests.fixtures.wild_envs.Float64Obs(partial)",
            "<functools.partial>",
        ),
        (lambda: Float64Obs(), f"object:{__name__}.<lambda>", "<lambda>"),
        (
            gym.vector.SyncVectorEnv([Float64Obs, Float64Obs]),
            "object:gymnasium.vector.sync_vector_env.SyncVectorEnv",
            "<VectorEnv>",
        ),
    ],
    ids=["class", "partial", "lambda", "VectorEnv"],
)
@pytest.mark.parametrize("keyword", ["env", "env_id"])
def test_an_env_object_trains_as_env_or_as_env_id(given, label, factory, keyword, tmp_path):
    """The defect of issue 32: env_id=MyEnv or env_id=a VectorEnv gave AttributeError 'startswith'."""
    agent = proxima.train(**{keyword: given}, run_dir=str(tmp_path / "run"), **TINY)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["env"]["env_id"], config["env"]["env_factory"]) == (label, factory)
    assert agent.env_id == label
    lengths = [json.loads(line)["length"] for line in open(tmp_path / "run" / "episodes.jsonl")]
    assert lengths and set(lengths) <= set(range(EPISODE - 3, EPISODE + 1))  # starts at 0..3, ends at EPISODE


def test_one_env_instance_is_refused_in_one_line():
    with pytest.raises(UserError, match="give the function that makes it"):
        proxima.train(env_id=Float64Obs(), **TINY)


def test_env_kwargs_reach_the_env_its_evaluations_and_proxima_eval(tmp_path, capsys):
    run = str(tmp_path / "run")
    proxima.train(
        env_id="CartPole-v1",
        env_kwargs={"max_episode_steps": 7},
        run_dir=run,
        eval_every=1,
        eval_episodes=2,
        **TINY,
    )
    assert json.loads(open(os.path.join(run, "config.json")).read())["env"]["env_kwargs"] == {
        "max_episode_steps": 7
    }
    lengths = [json.loads(line)["length"] for line in open(os.path.join(run, "episodes.jsonl"))]
    assert max(lengths) == 7  # CartPole cannot fall in fewer than 8 steps: every episode was truncated at 7
    evals = [json.loads(line)["eval_return"] for line in open(os.path.join(run, "metrics.jsonl"))]
    assert set(evals) == {7.0}
    assert list(proxima.evaluate(proxima.load(run), 3)) == [7.0, 7.0, 7.0]
    assert cli.main(["eval", run, "--episodes", "2"]) == 0
    assert "mean_return=7.00" in capsys.readouterr().out
    assert cli.main(["eval", run, "--episodes", "2", "--env-kwargs", '{"max_episode_steps": 9}']) == 0
    assert "mean_return=9.00" in capsys.readouterr().out


def test_env_kwargs_on_the_cli_are_json_and_the_native_backend_refuses_them(capsys):
    args = parse_train_args(["--env-kwargs", '{"max_episode_steps": 8}'])
    assert args.env.env_kwargs == {"max_episode_steps": 8}
    assert cli.main(["train", "--env-kwargs", "{size: 8}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--env-kwargs must be a JSON object" in err[0]
    with pytest.raises(UserError, match="the native backend cannot do --env-kwargs"):
        proxima.train(env_id="CartPole-v1", env_backend="native", env_kwargs={"max_episode_steps": 8}, **TINY)
    with pytest.raises(
        UserError, match="CartPole-v1's constructor takes no argument 'size'; give env_kwargs that"
    ):
        proxima.train(env_id="CartPole-v1", env_kwargs={"size": 8}, **TINY)


def test_a_run_on_a_lambda_resumes_and_evaluates_only_with_the_env_given_again(tmp_path, capsys):
    run = str(tmp_path / "run")
    agent = proxima.train(env=lambda: _short_cartpole(), run_dir=run, **TINY)
    for argv in (["train", "--resume", run, "--total-timesteps", "1024"], ["eval", run]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "lambda" in err[0] and "env=" in err[0], err
    with pytest.raises(UserError, match="cannot make again"):
        proxima.evaluate(agent, 2)
    proxima.resume(run, env=_short_cartpole, total_timesteps=1024)
    meta = json.loads(open(os.path.join(run, "agent.json")).read())
    assert meta["global_step"] == 1024
    assert proxima.evaluate(proxima.load(run), 2, env=_short_cartpole).max() <= LIMIT


def test_a_run_on_a_class_is_made_again_from_its_import_path(tmp_path, capsys):
    run = str(tmp_path / "run")
    proxima.train(env=wild_envs.Int64Obs, run_dir=run, **TINY)
    proxima.resume(run, total_timesteps=1024)
    assert cli.main(["eval", run, "--episodes", "3"]) == 0
    assert "object:tests.fixtures.wild_envs.Int64Obs: mean_return=" in capsys.readouterr().out
    returns = proxima.evaluate(proxima.load(run), 3)
    assert len(returns) == 3 and ((0 <= returns) & (returns <= EPISODE)).all()  # action 1 pays 1 a step


def test_a_vector_env_cannot_give_envs_to_evaluations_or_workers():
    envs = gym.vector.SyncVectorEnv([_short_cartpole] * 2)
    with pytest.raises(UserError, match="--eval-every makes envs of its own"):
        proxima.train(env=envs, eval_every=1, **TINY)
    with pytest.raises(UserError, match="cannot add video"):
        proxima.train(env=envs, capture_video=True, **TINY)


def test_rollout_workers_refuse_a_factory_they_cannot_send_in_one_line():
    pytest.importorskip("ray")
    lock = threading.Lock()

    def factory():
        with lock:
            return _short_cartpole()

    with pytest.raises(UserError, match="cannot be serialized") as e:
        proxima.train(env=factory, rollout_workers=2, **TINY)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_rollout_workers_make_the_envs_of_a_factory(tmp_path):
    pytest.importorskip("ray")
    agent = proxima.train(
        env=functools.partial(gym.make, "CartPole-v1", max_episode_steps=LIMIT), rollout_workers=2,
        run_dir=str(tmp_path / "run"), **TINY,
    )  # fmt: skip
    lengths = [json.loads(line)["length"] for line in open(tmp_path / "run" / "episodes.jsonl")]
    assert lengths and max(lengths) <= LIMIT
    assert agent.env_id.startswith("object:")


def test_eval_names_the_module_that_registered_a_plain_id_and_takes_env_id(tmp_path):
    run = str(tmp_path / "run")
    proxima.train(env_id="WildFloat64Obs-v0", run_dir=run, **TINY)  # registered by importing wild_envs here
    proxima_cmd = [os.path.join(os.path.dirname(sys.executable), "proxima"), "eval", run, "--episodes", "2"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failed = subprocess.run(proxima_cmd, capture_output=True, text=True, cwd=root, env=env)
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1
    assert "give --env-id tests.fixtures.wild_envs:WildFloat64Obs-v0" in failed.stderr
    fixed = proxima_cmd + ["--env-id", "tests.fixtures.wild_envs:WildFloat64Obs-v0"]
    # eval reads a run's files, so the working directory is not on its path (docs/SECURITY.md): PYTHONPATH is
    not_found = subprocess.run(fixed, capture_output=True, text=True, cwd=root, env=env)
    assert not_found.returncode == 2 and "tests.fixtures" in not_found.stderr, not_found.stderr
    ok = subprocess.run(fixed, capture_output=True, text=True, cwd=root, env={**env, "PYTHONPATH": root})
    assert ok.returncode == 0, ok.stderr
    assert "episodes=2" in ok.stdout


MODULE = """
import gymnasium as gym
gym.register("HereEnv-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=9)
"""


@pytest.mark.parametrize("how", ["console script", "python -m proxima"])
def test_module_env_ids_import_from_the_working_directory(how, tmp_path):
    (tmp_path / "heremodule.py").write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    program = (
        [os.path.join(os.path.dirname(sys.executable), "proxima")]
        if how == "console script"
        else [sys.executable, "-m", "proxima"]
    )
    result = subprocess.run(
        [*program, "check-env", "heremodule:HereEnv-v0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "time limit: 9 steps" in result.stdout


def test_check_env_says_what_proxima_will_do_with_a_good_env(capsys):
    assert cli.main(["check-env", "CartPole-v1"]) == 0
    out = capsys.readouterr().out
    assert "encoder: flatten-mlp" in out
    assert "action head: CategoricalHead" in out
    assert "backend: native" in out
    assert "time limit: 500 steps" in out
    assert "proxima will train on CartPole-v1" in out
    assert cli.main(["check-env", "tests.fixtures.wild_envs:WildEndless-v0"]) == 0
    out = capsys.readouterr().out
    assert "time limit: none: episodes end only when the env says so" in out
    assert "backend: gymnasium" in out


def test_check_env_refuses_the_old_step_api_in_one_line(capsys):
    assert cli.main(["check-env", "tests.fixtures.wild_envs:WildOldStepApi-v0"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "the old gym API" in lines[0]
    assert "will train" not in captured.out


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_vector_env_of_dict_observations_is_packed_as_proximas_own_backend_packs_it(mode):
    from tests.fixtures import space_envs  # noqa: F401  (registers DictObs-v0)

    def sequence(envs):
        out = [envs.reset(seed=5)]
        for t in range(40):
            step = envs.step(torch.as_tensor(np.random.default_rng(t).integers(0, 2, 2)))
            out += [step.obs, step.reward, step.terminated, step.truncated, step.final_obs]
        return out

    expected = sequence(make_vec_env("DictObs-v0", 2, backend="gymnasium"))
    envs = make_envs(gym.vector.SyncVectorEnv([lambda: gym.make("DictObs-v0")] * 2, autoreset_mode=mode), 2)
    assert envs.obs_layout.packed
    got = sequence(envs)
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_vector_envs_infos_at_episode_ends_and_its_attributes_reach_the_run(mode, tmp_path):
    from tests.fixtures.info_envs import InfoEnv

    envs = gym.vector.SyncVectorEnv([InfoEnv, InfoEnv], autoreset_mode=mode)
    wrapped = make_envs(envs, 2)
    wrapped.set_attr("level", 3)
    assert wrapped.call("level") == (3, 3)
    proxima.train(env=envs, log_info=("level", "success"), run_dir=str(tmp_path / "run"), **TINY)
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    # only the step that ends an episode says level 3 and success (the others say -1 and False)
    assert {r["info/level"] for r in records} == {3.0}
    assert {r["info/success"] for r in records} == {1.0}


class WaitingTurns(gym.Env):
    """Every other step allows no action at all (a player that waits its turn: its mask is all zeros, and the
    env ignores the action), which a policy's masked logits take as a uniform choice."""

    observation_space = gym.spaces.Dict(
        {"obs": gym.spaces.Box(0.0, 1.0, (1,), np.float32), "action_mask": gym.spaces.MultiBinary(3)}
    )
    action_space = gym.spaces.Discrete(3)

    def _obs(self):
        waiting = self.t % 2
        return {"obs": np.array([waiting], np.float32), "action_mask": np.full(3, 1 - waiting, np.int8)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 8, {}


def test_check_env_steps_an_env_whose_mask_allows_no_action_on_some_steps():
    from proxima.run.checkenv import check_env

    if "WaitingTurns-v0" not in gym.registry:
        gym.register("WaitingTurns-v0", entry_point=WaitingTurns)
    report, _, problems = check_env("WaitingTurns-v0")
    assert "observations: packed into one vector of 4, action mask from action_mask" in report
    assert problems == []


class StartsAtOne(gym.Env):
    """Discrete(3, start=1) and MultiDiscrete starts: an action outside the space raises."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    def __init__(self, multi: bool = False):
        self.action_space = (
            gym.spaces.MultiDiscrete([3, 2], start=[1, -1]) if multi else gym.spaces.Discrete(3, start=1)
        )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if not self.action_space.contains(np.asarray(action, dtype=np.int64)):
            raise ValueError(f"action {action} is outside {self.action_space}")
        self.t += 1
        return np.zeros(1, np.float32), 0.0, False, self.t >= 8, {}


if "StartsAtOne-v0" not in gym.registry:
    gym.register("StartsAtOne-v0", entry_point=StartsAtOne)


@pytest.mark.parametrize("multi", [False, True])
def test_check_env_steps_actions_of_a_space_that_starts_elsewhere_than_0(multi):
    from proxima.run.checkenv import check_env

    report, _, problems = check_env("StartsAtOne-v0", {"multi": multi})
    assert problems == [] and any("backend: gymnasium" in line for line in report)


@pytest.mark.parametrize("num_seeds", [1, 2])
def test_a_run_on_an_env_that_config_json_cannot_name_says_so_at_its_start(num_seeds, tmp_path, capsys):
    loud = {**TINY, "quiet": False, "num_seeds": num_seeds, "torch_threads": 1}
    proxima.train(env=lambda: gym.make("CartPole-v1"), run_dir=str(tmp_path / "lambda"), **loud)
    notes = [line for line in capsys.readouterr().out.splitlines() if "config.json cannot name" in line]
    assert len(notes) == 1 and notes[0].startswith("note: the env is a lambda,")
    proxima.train(env=Float64Obs, run_dir=str(tmp_path / "class"), **loud)  # importable: nothing to say
    assert "config.json cannot name" not in capsys.readouterr().out


def test_recording_gymnasium_envs_asks_pygame_for_no_display(tmp_path, monkeypatch):
    """pygame's SDL otherwise looks for a display as the envs are made, and on a machine without one says
    "XDG_RUNTIME_DIR is invalid" on stderr, even under --quiet."""
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    envs = make_vec_env("CartPole-v1", 2, backend="gymnasium", seed=0, video_dir=str(tmp_path / "videos"))
    envs.close()
    assert os.environ["SDL_VIDEODRIVER"] == "dummy"
