"""Envs "in the wild" (tests/fixtures/wild_envs.py): each either trains, or stops with one line on stderr.

The contract: ``proxima train`` on any of them returns 0 and leaves its outputs, or exits 2 (bad input: the
line says what Gymnasium 1.x expects, and no run directory is made) or 1 (the env crashed: the line names
the exception, the update, and how to resume; nothing already written is lost), with no traceback.

Every wild env is the same small task: a position ``t`` starts at 0 to 3, each step adds 1 and pays 1 for
action 1, and the episode ends at ``t = 16``: so every episode lasts 13 to 16 steps and returns a whole
number between 0 and its length.
"""

import json
import os
import signal
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.errors import EnvError, UserError
from proxima.commands import main
from proxima.envs import make_vec_env
from proxima.run import checkpoint
from tests.fixtures import wild_envs

PREFIX = "tests.fixtures.wild_envs:"
TINY = ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128", "--no-plot", "--quiet"]
TINY += ["--checkpoint-every", "1", "--update-epochs", "1"]
# CrashAfter1000's envs each die on their 1001st step: with 250 steps per env per update, in update 5, after
# the checkpoint of update 4; resumed with fresh envs, they die again 4 updates later, in update 9 of 10.
CRASH = ["--total-timesteps", "5000", "--num-envs", "2", "--num-steps", "250", "--no-plot", "--quiet"]
CRASH += ["--checkpoint-every", "1", "--update-epochs", "1"]

TRAINABLE = [
    "WildNoRenderMode-v0",
    "WildFloat64Obs-v0",
    "WildShape1Obs-v0",
    "WildNumpyReward-v0",
    "WildIntReward-v0",
    "WildInfoArrays-v0",
    "WildEndless-v0",
    "WildIgnoresSeed-v0",
    "WildInt64Obs-v0",
    "WildNumpyBoolTerminated-v0",
    "WildOutOfBounds-v0",
    "WildListObs-v0",
    "WildFloat64ValuesInFloat32Space-v0",
    "WildSharedObsBuffer-v0",
    "WildCloseRaises-v0",
    "WildColumnObs-v0",
    "WildScalarObs-v0",
    "WildFloat64Actions-v0",
    "WildRewardArray-v0",
    "WildTruncatesItself-v0",
    "WildFloat64Image-v0",
    "WildScalarBox-v0",
    "WildDiscreteStart-v0",
]
# id, extra flags, what the one line must say
BAD_INPUT = [
    ("WildOldStepApi-v0", [], ["old gym API", "(obs, reward, terminated, truncated, info)", "(obs, info)"]),
    ("WildOldStepOnly-v0", [], ["step() returned 4 values", "(obs, reward, terminated, truncated, info)"]),
    ("WildResetWithoutSeed-v0", [], ["reset()", "seed", "reset(self, *, seed=None, options=None)"]),
    ("WildWrongObsSize-v0", [], ["shape (3,)", "declares shape (2,)"]),
    ("WildVectorReward-v0", [], ["array of shape (2,) as its reward", "one number"]),
    ("WildNoRenderMode-v0", ["--capture-video"], ["cannot render", "render_mode"]),
    (
        "WildRenderNotImplemented-v0",
        ["--capture-video"],
        ["cannot render rgb_array", "raised NotImplementedError)"],
    ),
    ("WildForgetsDiscreteStart-v0", [], ["not one of its space's values, the integers 10 to 26"]),
    ("WildNeedsSize-v0", [], ["missing a required argument: 'size'", "--env-kwargs"]),
    ("WildResetInfoNotDict-v0", [], ["reset() returned 2 values whose second is a float, not the info dict"]),
    # gym.make checks the metadata of a registered id; a factory's env is made without it (test below)
    (
        "WildNoneMetadata-v0",
        [],
        ["gymnasium.make(", "failed: Expect the environment metadata to be dict"],
    ),
]


def run_cli(argv, capsys):
    """``main(argv)``'s exit status, the lines it wrote to stderr, the warnings it issued (which reach a
    terminal's stderr too, though pytest keeps them out of capsys), and its stdout."""
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    out, err = capsys.readouterr()
    return code, err.splitlines(), [str(w.message) for w in caught], out


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def assert_one_line(lines, *fragments, command="train"):
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"proxima {command}: "), lines
    assert "Traceback" not in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``trained(name)``: the run directory of ``proxima train`` on wild env ``name`` (trained once)."""
    root, runs = tmp_path_factory.mktemp("wild"), {}

    def train(name):
        if name not in runs:
            run_dir = str(root / name)
            runs[name] = (main(["train", "--env-id", PREFIX + name, "--run-dir", run_dir, *TINY]), run_dir)
        return runs[name]

    return train


def test_every_wild_env_is_registered_on_import():
    assert len(wild_envs.WILD_ENVS) >= 12
    for name in wild_envs.WILD_ENVS:
        assert name in gym.registry and gym.registry[name].max_episode_steps is None
    tested = (
        set(TRAINABLE)
        | {name for name, _, _ in BAD_INPUT}
        | {"WildCrashAfter1000-v0", "WildConstructorRaises-v0"}
    )
    assert tested == set(wild_envs.WILD_ENVS)


@pytest.mark.parametrize("name", TRAINABLE)
def test_wild_env_trains(name, trained):
    """Exit 0 and every output; 1024 steps in batches of 256 are 4 updates; the episodes are the task's."""
    code, run_dir = trained(name)
    assert code == 0
    assert {"config.json", "metrics.jsonl", "episodes.jsonl", "model.safetensors"} <= set(os.listdir(run_dir))
    metrics = read_lines(os.path.join(run_dir, "metrics.jsonl"))
    assert [m["global_step"] for m in metrics] == [256, 512, 768, 1024]
    assert all(np.isfinite(m["value_loss"]) and np.isfinite(m["policy_loss"]) for m in metrics)
    episodes = read_lines(os.path.join(run_dir, "episodes.jsonl"))
    if name == "WildEndless-v0":  # no episode ever ends, and nothing claims one did
        assert episodes == [] and all(m["episodic_return"] is None for m in metrics)
        return
    # 2 envs x 512 steps of 13-to-16-step episodes: at least 2 * (512 // 16) = 64 of them ended
    assert len(episodes) >= 64
    for episode in episodes:
        assert 13 <= episode["length"] <= 16, episode
        assert 0 <= episode["return"] <= episode["length"] and episode["return"] == int(episode["return"])


@pytest.mark.parametrize(
    "name, dtype, shape",
    [
        ("WildFloat64Obs-v0", torch.float64, (2,)),
        ("WildInt64Obs-v0", torch.int64, (3,)),
        ("WildListObs-v0", torch.float32, (2,)),
        ("WildFloat64ValuesInFloat32Space-v0", torch.float32, (2,)),
        ("WildScalarObs-v0", torch.float32, (1,)),
        ("WildColumnObs-v0", torch.float32, (2,)),
        ("WildRewardArray-v0", torch.float32, (2,)),
        ("WildInfoArrays-v0", torch.float32, (2,)),
    ],
)
def test_wild_observations_and_rewards_reach_the_loop_in_the_space_dtype_and_shape(name, dtype, shape):
    envs = make_vec_env(PREFIX + name, 2, seed=0, backend="gymnasium")
    try:
        obs = envs.reset()
        assert obs.dtype == dtype and tuple(obs.shape) == (2, *shape)
        for _ in range(20):  # action 1 pays exactly 1, always
            step = envs.step(torch.ones(2, dtype=torch.int64))
            assert step.obs.dtype == dtype and tuple(step.obs.shape) == (2, *shape)
            assert step.reward.tolist() == [1.0, 1.0]
    finally:
        envs.close()


def test_an_env_that_updates_one_obs_array_in_place_keeps_its_final_observation():
    """SharedObsBuffer's episode ends at t = 16, observation 16/16 = 1.0; reset then overwrites the same
    array with t = 0 to 3. The step that ends the episode must report 1.0 as final_obs, not the reset's."""
    envs = make_vec_env(PREFIX + "WildSharedObsBuffer-v0", 2, seed=0, backend="gymnasium")
    try:
        envs.reset()
        ended = 0
        for _ in range(40):
            step = envs.step(torch.ones(2, dtype=torch.int64))
            for i in step.terminated.nonzero().flatten().tolist():
                ended += 1
                assert step.final_obs[i].tolist() == [1.0, 1.0]
                assert step.obs[i, 0].item() in (0.0, 1 / 16, 2 / 16, 3 / 16)
        assert ended >= 4
    finally:
        envs.close()


@pytest.mark.parametrize("name", ["WildFloat64Obs-v0", "WildInt64Obs-v0"])
def test_agents_of_float64_and_int64_envs_predict_on_observations_of_that_dtype(name, trained):
    code, run_dir = trained(name)
    assert code == 0
    agent = proxima.load(run_dir)
    env = gym.make(PREFIX + name)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == env.observation_space.dtype  # float64 / int64, as the env gives them
    action = agent.predict(obs)
    assert np.ndim(action) == 0 and env.action_space.contains(int(action))
    batch = agent.predict(np.stack([obs, obs, obs]), deterministic=True)
    assert batch.shape == (3,) and len(set(batch.tolist())) == 1  # deterministic: one action for one obs
    env.close()


def test_a_float64_channels_last_image_goes_through_the_cnn_in_bfloat16_too(trained, tmp_path, capsys):
    code, run_dir = trained("WildFloat64Image-v0")
    with open(os.path.join(run_dir, "agent.json")) as f:
        assert code == 0 and json.load(f)["network"]["network"]["encoder"] == "nature-cnn"
    run_dir = str(tmp_path / "bf16")
    code, err, _, _ = run_cli(["train", "--env-id", PREFIX + "WildFloat64Image-v0", "--run-dir", run_dir, *TINY,
                               "--precision", "bfloat16"], capsys)  # fmt: skip
    assert code == 0 and err == []
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["network"]["precision"] == "bfloat16"
    metrics = read_lines(os.path.join(run_dir, "metrics.jsonl"))
    assert all(np.isfinite(m["value_loss"]) and np.isfinite(m["policy_loss"]) for m in metrics)
    env = gym.make(PREFIX + "WildFloat64Image-v0")
    obs, _ = env.reset(seed=0)  # float64, (36, 36, 3), as the env gives it
    assert env.action_space.contains(int(proxima.load(run_dir).predict(obs)))
    env.close()


@pytest.mark.parametrize("name, flags, fragments", BAD_INPUT)
def test_bad_wild_env_exits_2_with_one_line_and_no_run_dir(name, flags, fragments, tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", PREFIX + name, "--run-dir", str(run_dir), *TINY, *flags]
    code, lines, caught, _ = run_cli(argv, capsys)
    assert code == 2
    assert_one_line(lines, PREFIX + name, *fragments)
    assert caught == []  # no Gymnasium warning beside the line either
    assert not run_dir.exists()


@pytest.mark.parametrize("env_id", ["::", "a:b:c", ":Name-v0", "tests.fixtures.wild_envs:"])
def test_malformed_env_ids_exit_2_with_one_line(env_id, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, lines, _, _ = run_cli(["train", "--env-id", env_id, "--run-dir", str(run_dir), *TINY], capsys)
    assert code == 2
    assert_one_line(lines, "malformed env id", repr(env_id))
    assert not run_dir.exists()


def test_eval_video_of_an_agent_whose_env_cannot_render_exits_2(trained, capsys):
    code, run_dir = trained("WildNoRenderMode-v0")
    assert code == 0
    code, lines, _, _ = run_cli(["eval", run_dir, "--video", "--episodes", "2"], capsys)
    assert code == 2
    assert_one_line(lines, "cannot render", "WildNoRenderMode-v0", command="eval")
    assert not os.path.exists(os.path.join(run_dir, "eval-videos"))
    code, lines, _, out = run_cli(["eval", run_dir, "--episodes", "2"], capsys)  # without video it evaluates
    assert code == 0 and lines == [] and "episodes=2" in out


def test_constructor_that_raises_is_an_env_error_and_leaves_no_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(EnvError) as error:
        proxima.train(env_id=PREFIX + "WildConstructorRaises-v0", run_dir=str(run_dir), quiet=True)
    assert "constructor raised RuntimeError: cannot find the simulator's assets in /opt/sim" in str(
        error.value
    )
    assert not run_dir.exists()


def test_a_type_error_inside_a_registered_constructor_given_its_arguments_is_the_envs_exit_1(
    tmp_path, capsys
):
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", PREFIX + "WildTypeErrorInside-v0", "--run-dir", str(run_dir), *TINY]
    code, lines, _, _ = run_cli(argv, capsys)
    assert code == 1 and not run_dir.exists()
    assert_one_line(lines, "constructor raised TypeError", "unsupported operand")


def test_cli_constructor_that_raises_exits_1_with_one_line(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", PREFIX + "WildConstructorRaises-v0", "--run-dir", str(run_dir), *TINY]
    code, lines, _, _ = run_cli(argv, capsys)
    assert code == 1
    assert_one_line(lines, "RuntimeError", "cannot find the simulator's assets")
    assert "--resume" not in lines[0]  # nothing was written, so nothing to resume
    assert not run_dir.exists()


def crash_args(run_dir, *extra):
    return ["train", "--env-id", PREFIX + "WildCrashAfter1000-v0", "--run-dir", str(run_dir), *CRASH, *extra]


def assert_crashed_run_kept(run_dir, updates):
    """config.json, one metrics line per finished update (500 steps each), and their checkpoint; no agent."""
    names = set(os.listdir(run_dir))
    assert {"config.json", "metrics.jsonl", "episodes.jsonl", "checkpoint.safetensors"} <= names
    assert "model.safetensors" not in names  # the run did not finish
    metrics = read_lines(os.path.join(run_dir, "metrics.jsonl"))
    assert [m["global_step"] for m in metrics] == [500 * (u + 1) for u in range(updates)]
    meta, _ = checkpoint.read(os.path.join(run_dir, "checkpoint.safetensors"))
    assert meta["update"] == updates and not meta["finished"]
    episodes = read_lines(os.path.join(run_dir, "episodes.jsonl"))
    assert episodes and max(e["global_step"] for e in episodes) <= 500 * updates


def snapshot(run_dir):
    return {
        n: open(os.path.join(run_dir, n), "rb").read()
        for n in ("config.json", "metrics.jsonl", "episodes.jsonl")
    }


@pytest.mark.parametrize("asynchronous", [False, True])
def test_env_crash_mid_run_keeps_the_run_and_resume_starts(asynchronous, tmp_path):
    """Python API: an EnvError naming the exception, the update and the resume command; updates 1-4 kept.
    Resumed, it trains updates 5-8 and crashes in update 9, appending to the logs without changing them."""
    run_dir = str(tmp_path / "run")
    args = dict(env_id=PREFIX + "WildCrashAfter1000-v0", run_dir=run_dir, total_timesteps=5000, num_envs=2)
    args.update(num_steps=250, plot=False, quiet=True, checkpoint_every=1, update_epochs=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(EnvError) as error:
            proxima.train(async_envs=asynchronous, **args)
    message = str(error.value)
    assert "RuntimeError: simulator crashed" in message and "in update 5;" in message
    assert "from update 4" in message and f"continue with: proxima train --resume {run_dir}" in message
    # an AsyncVectorEnv reports a worker's exception, traceback included, as warnings: none get out
    assert not [w for w in caught if "Traceback" in str(w.message) or "Worker" in str(w.message)]
    assert_crashed_run_kept(run_dir, 4)
    before = snapshot(run_dir)

    with pytest.raises(EnvError) as error:
        proxima.train(resume=run_dir, quiet=True)
    assert "RuntimeError: simulator crashed" in str(error.value) and "in update 9;" in str(error.value)
    assert "from update 8" in str(error.value)
    assert_crashed_run_kept(run_dir, 8)
    after = snapshot(run_dir)
    assert after["config.json"] == before["config.json"]
    for name in ("metrics.jsonl", "episodes.jsonl"):  # appended to, never rewritten
        assert after[name].startswith(before[name]) and len(after[name]) > len(before[name])


def test_cli_env_crash_mid_run_exits_1_with_one_line_and_resume_starts(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    code, lines, _, _ = run_cli(crash_args(run_dir), capsys)
    assert code == 1
    assert_one_line(
        lines, "RuntimeError", "simulator crashed", "update 5", f"proxima train --resume {run_dir}"
    )
    assert_crashed_run_kept(run_dir, 4)
    before = snapshot(run_dir)

    code, lines, _, _ = run_cli(["train", "--resume", run_dir, "--quiet"], capsys)
    assert code == 1
    assert_one_line(
        lines, "RuntimeError", "simulator crashed", "update 9", f"proxima train --resume {run_dir}"
    )
    assert_crashed_run_kept(run_dir, 8)
    after = snapshot(run_dir)
    assert after["config.json"] == before["config.json"]
    assert all(after[n].startswith(before[n]) for n in ("metrics.jsonl", "episodes.jsonl"))


class _Hung(Exception):
    pass


def test_eval_of_an_env_whose_episodes_never_end_stops_with_one_line(trained, capsys, monkeypatch):
    """Endless never ends an episode: ``proxima eval`` cannot finish one, and must say so rather than hang."""
    code, run_dir = trained("WildEndless-v0")
    assert code == 0
    # the module, not the function proxima.evaluate; 100k steps by default: seconds here
    monkeypatch.setattr(sys.modules["proxima.run.evaluate"], "EPISODE_STEP_LIMIT", 2000)

    def hung(*_):
        raise _Hung

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(3)
    try:
        code, lines, _, _ = run_cli(["eval", run_dir, "--episodes", "2"], capsys)
    except _Hung:
        pytest.fail("proxima eval was still running after 3 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert code == 2
    assert_one_line(lines, "WildEndless-v0", command="eval")


@pytest.mark.parametrize("dist", ["beta", "tanh-gaussian"])
def test_a_bounded_policy_acts_inside_a_float64_box_that_asserts_its_actions(tmp_path, capsys, dist):
    # WildFloat64Actions-v0's step asserts action_space.contains(action): every draw must be inside
    run_dir = str(tmp_path / dist)
    code, err, _, _ = run_cli(["train", "--env-id", PREFIX + "WildFloat64Actions-v0", "--run-dir", run_dir, *TINY,
                               "--action-dist", dist], capsys)  # fmt: skip
    assert code == 0 and err == []
    agent = proxima.load(run_dir)
    assert agent.model.spec.network.action_dist == dist
    env = gym.make(PREFIX + "WildFloat64Actions-v0")
    obs, _ = env.reset(seed=0)
    for deterministic in (False, True):
        action = agent.predict(obs, deterministic=deterministic)
        assert env.action_space.contains(action), action
    env.close()


def test_predict_takes_what_the_env_gives_and_refuses_other_shapes_in_one_line(trained):
    code, run_dir = trained("WildScalarBox-v0")  # a Box of shape (): packed as a vector of one
    assert code == 0
    agent = proxima.load(run_dir)
    assert np.ndim(agent.predict(0.5)) == 0 and agent.predict(np.float64(0.5), deterministic=True) in (0, 1)
    assert agent.predict([0.0, 0.5, 1.0], deterministic=True).shape == (3,)
    code, run_dir = trained("WildShape1Obs-v0")
    agent = proxima.load(run_dir)
    assert np.ndim(agent.predict(0.5)) == 0  # a bare float for shape (1,), as the env may give it
    assert agent.predict([[0.0], [0.5]], deterministic=True).shape == (2,)
    with pytest.raises(UserError, match=r"predict takes one observation of shape \(1,\) or a batch of shape \(B, 1\); "
                       r"got one of shape \(2,\)"):  # fmt: skip
        agent.predict([0.0, 0.5])  # two numbers: neither one observation nor a batch of them
    code, run_dir = trained("WildDiscreteStart-v0")
    agent = proxima.load(run_dir)
    assert np.ndim(agent.predict(12)) == 0 and agent.predict([10, 26], deterministic=True).shape == (2,)
    for outside in (2, 27, 10.5):  # the encoder would have clamped these onto a valid one-hot
        with pytest.raises(UserError, match="not one of its space's values, the integers 10 to 26"):
            agent.predict(outside)
    code, run_dir = trained("WildColumnObs-v0")  # shape (2,); the env gives a (2, 1) column
    agent = proxima.load(run_dir)
    assert np.ndim(agent.predict([[0.5], [0.5]])) == 0  # that column, as the env gives it: one observation
    with pytest.raises(
        UserError, match=r"shape \(2,\) or a batch of shape \(B, 2\); got one of shape \(3, 2, 2\)"
    ):
        agent.predict(np.zeros((3, 2, 2)))  # neither one observation nor a batch of them


def test_a_factory_needing_an_argument_is_refused_in_one_line_then_takes_it(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "--env-factory", "tests.fixtures.wild_envs:NeedsSize", "--run-dir", str(run_dir), *TINY]
    code, lines, _, _ = run_cli(argv, capsys)
    assert code == 2 and not run_dir.exists()
    assert_one_line(lines, "missing a required argument: 'size'", "--env-kwargs")
    code, lines, _, _ = run_cli([*argv, "--env-kwargs", '{"size": 3}'], capsys)
    assert code == 0 and lines == []


def test_a_factorys_env_with_metadata_none_trains(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = [
        "train",
        "--env-factory",
        "tests.fixtures.wild_envs:NoneMetadata",
        "--run-dir",
        str(run_dir),
        *TINY,
    ]
    code, lines, _, _ = run_cli(argv, capsys)
    assert code == 0 and lines == []
    assert [m["global_step"] for m in read_lines(run_dir / "metrics.jsonl")] == [256, 512, 768, 1024]


def test_check_env_finds_a_time_limit_the_factory_wrapped_itself(capsys):
    assert main(["check-env", "--env-factory", "tests.fixtures.wild_envs:own_time_limit"]) == 0
    assert "time limit: 10 steps" in capsys.readouterr().out
