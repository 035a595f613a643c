"""What a user coming from Stable-Baselines3 or CleanRL naturally tries first through the Python API: each either
works, or is refused in one line (a ``UserError``) before the run starts, not deep inside torch or numpy or,
worse, silently accepted."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.errors import UserError
from proxima.envs import make_vec_env
from proxima.run.callbacks import Callback

TINY = dict(env_id="CartPole-v1", total_timesteps=256, num_envs=2, num_steps=64, quiet=True, report=False,
            plot=False, torch_threads=1)  # fmt: skip


def test_an_env_object_and_an_env_id_are_refused_together(tmp_path):
    with pytest.raises(UserError, match="give the env once"):
        proxima.train(env=lambda: gym.make("Acrobot-v1"), **TINY, run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_an_agent_moves_between_the_native_and_the_gymnasium_cartpole(tmp_path):
    native = make_vec_env("CartPole-v1", 2, seed=0, backend="native")
    ours = make_vec_env("CartPole-v1", 2, seed=0, backend="gymnasium")
    assert native.single_observation_space == ours.single_observation_space  # unbounded velocities in both
    native.close(), ours.close()
    proxima.train(**TINY, run_dir=str(tmp_path / "native"))  # the default backend for CartPole is native
    proxima.train(
        **TINY, env_backend="gymnasium", init_from=str(tmp_path / "native"), run_dir=str(tmp_path / "g")
    )
    assert (tmp_path / "g" / "model.safetensors").exists()


@pytest.mark.parametrize(
    "encoder, match",
    [
        ("FourInputs", r"fails on a batch of observations of shape \(2, 6\) \(RuntimeError: mat1 and mat2"),
        ("WrongFeaturesDim", r"returned shape \(2, 8\) for a batch of 2 observations; with features_dim 10"),
    ],
)
def test_an_encoder_that_does_not_fit_is_refused_before_training(encoder, match, tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(UserError, match=match):
        proxima.train(**{**TINY, "env_id": "Acrobot-v1"}, encoder=f"tests.fixtures.user_encoders:{encoder}",
                      run_dir=str(run_dir))  # fmt: skip
    assert not run_dir.exists()


def test_runs_started_in_the_same_second_get_their_own_default_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(proxima.run.loop.time, "time", lambda: 1_800_000_000.0)
    for _ in range(2):
        proxima.train(**TINY)
    assert sorted(os.listdir(tmp_path / "runs")) == [
        "CartPole-v1__ppo__1__1800000000",
        "CartPole-v1__ppo__1__1800000000_2",
    ]


@pytest.mark.parametrize(
    "setting, match",
    [
        (
            dict(hidden_sizes=64),
            r"hidden_sizes=64 is of type int; hidden_sizes takes a tuple of ints, such as \(64, 64\)",
        ),
        (dict(total_timesteps="1000"), "total_timesteps='1000' is of type str; total_timesteps takes an int"),
        (dict(norm_adv="False"), "norm_adv='False' is of type str; norm_adv takes True or False"),
        (dict(num_envs=2.0), "num_envs=2.0 is of type float; num_envs takes an int"),
        (
            dict(learning_rate=lambda progress: 3e-4 * progress),
            "takes a number; for a schedule give learning_rate_end",
        ),
        (dict(seed=None), "seed=None is of type NoneType; seed takes an int"),
        (dict(recurrent="gru"), "recurrent must be lstm or None, got 'gru'"),
        (dict(action_dist="normal"), "action_dist must be gaussian, beta or tanh-gaussian, got 'normal'"),
    ],
)
def test_a_setting_of_the_wrong_type_is_refused_in_one_line(setting, match, tmp_path):
    with pytest.raises(UserError, match=match):
        proxima.train(**{**TINY, **setting}, run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_numbers_a_user_gives_are_taken_as_python_writes_them(tmp_path):
    """numpy's numbers and a pathlib.Path, where ints, floats and strings are asked for."""
    run_dir = tmp_path / "run"
    proxima.train(**{**TINY, "num_envs": np.int64(2), "learning_rate": np.float32(1e-3)}, run_dir=run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["run"]["run_dir"] == str(run_dir) and config["env"]["num_envs"] == 2


class NumpyMetrics(Callback):
    def on_update_end(self, run, result):
        result.record.update(f32=np.float32(1.5), i64=np.int64(3), tensor=torch.tensor(2.5), one=np.array([4.0]),
                             pair=np.array([1.0, 2.0]))  # fmt: skip


def test_a_callbacks_numpy_and_torch_numbers_are_logged(tmp_path):
    proxima.train(
        **TINY, callbacks=NumpyMetrics(), run_dir=str(tmp_path / "run")
    )  # one Callback, as SB3 takes it
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert (line["f32"], line["i64"], line["tensor"], line["one"], line["pair"]) == (
        1.5,
        3,
        2.5,
        4.0,
        [1.0, 2.0],
    )


class Stateful(Callback):
    def state_dict(self):
        return {"count": 1}


class SB3Style(Callback):
    def _on_step(self):
        return True


@pytest.mark.parametrize(
    "callbacks, match",
    [
        ([lambda run, result: None], r"callbacks\[0\] is function, not a proxima.Callback"),
        ([Stateful()], "Stateful has a state_dict but no state_key"),
        ([SB3Style()], "SB3Style defines _on_step, which proxima never calls"),
        ("StopAt", "callbacks is str; give a list"),
    ],
)
def test_callbacks_that_would_fail_or_be_ignored_are_refused_before_the_run(callbacks, match, tmp_path):
    with pytest.raises(UserError, match=match):
        proxima.train(**TINY, callbacks=callbacks, run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


def test_load_export_and_save_take_what_users_give_them(tmp_path):
    run_dir = tmp_path / "run"
    agent = proxima.train(**TINY, run_dir=str(run_dir))
    with pytest.raises(UserError, match="is a file; give the directory that holds it"):
        proxima.load(str(run_dir / "model.safetensors"))
    with pytest.raises(
        UserError, match=r"its name ends in \.pt, the name of a torchscript file; give format 'torchscript'"
    ):
        proxima.export(str(run_dir), output=str(tmp_path / "policy.pt"))
    with pytest.raises(UserError, match="it is a directory"):
        proxima.export(str(run_dir), output=str(tmp_path))
    assert not (tmp_path / "policy.pt").exists()
    agent.save(str(tmp_path / "new" / "agent"))  # a directory not made yet
    obs = np.zeros(4, dtype=np.float32)
    assert proxima.load(str(tmp_path / "new" / "agent")).predict(obs, True) == agent.predict(obs, True)


@pytest.mark.parametrize("command", [proxima.sweep, proxima.tune])
@pytest.mark.parametrize(
    "objects,match",
    [
        ({"env": lambda: gym.make("CartPole-v1")}, "takes its env by name"),
        ({"callbacks": []}, "takes no callbacks"),
    ],
)
def test_a_sweep_and_a_search_refuse_python_objects_and_say_what_they_take(command, objects, match, tmp_path):
    with pytest.raises(UserError, match=match):
        command(**objects, space={"ent_coef": "uniform:0:0.1"}, output_dir=str(tmp_path / "s"), **TINY)
    assert not (tmp_path / "s").exists()


def test_a_sweep_takes_an_env_factory_by_its_import_path_and_a_count_of_seeds(tmp_path):
    settings = {k: v for k, v in TINY.items() if k != "env_id"}
    settings["env_factory"] = "tests.fixtures.wild_envs:own_time_limit"
    results = proxima.sweep(**settings, seeds=2, executor="local", output_dir=str(tmp_path / "s"))
    assert [(t["seed"], t["status"]) for t in results.trials] == [(1, "finished"), (2, "finished")]
    episodes = (tmp_path / "s" / "base__seed1" / "episodes.jsonl").read_text().splitlines()
    assert episodes and all(json.loads(line)["length"] == 10 for line in episodes)  # the factory's TimeLimit
