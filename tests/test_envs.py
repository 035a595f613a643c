import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from proxima.base.errors import UserError
from proxima.envs import make_vec_env
from proxima.envs.probes import PROBES

SHORT = "proxima-test/CartPoleShort-v0"
if SHORT not in gym.registry:
    gym.register(
        SHORT, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=12
    )


@pytest.mark.parametrize("asynchronous", [False, True])
def test_vector_env_matches_single_envs_and_never_returns_a_reset_step(asynchronous):
    """Step N Gymnasium envs one by one beside the vector env: same obs, rewards and flags, and every
    episode's final observation; no step of the vector env is the NEXT_STEP reset step (reward 0)."""
    n, seed = 3, 11
    venv = make_vec_env(SHORT, n, seed=seed, asynchronous=asynchronous, backend="gymnasium")
    singles = [gym.make(SHORT) for _ in range(n)]
    obs = venv.reset()
    ref = [e.reset(seed=seed + i)[0] for i, e in enumerate(singles)]
    np.testing.assert_array_equal(obs.numpy(), np.stack(ref))
    rng = np.random.default_rng(0)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(120):
        actions = rng.integers(0, 2, n)
        actions[0] = 0  # always pushing left drops the pole before the time limit: a termination
        step = venv.step(torch.as_tensor(actions))
        assert torch.all(step.reward == 1.0)  # CartPole pays 1 on every real step
        for i, env in enumerate(singles):
            o, r, term, trunc, _ = env.step(int(actions[i]))
            assert (bool(step.terminated[i]), bool(step.truncated[i])) == (term, trunc)
            np.testing.assert_array_equal(step.final_obs[i].numpy(), o)
            if term or trunc:
                ends["terminated" if term else "truncated"] += 1
                o, _ = env.reset()
            np.testing.assert_array_equal(step.obs[i].numpy(), o)
    venv.close()
    assert ends["terminated"] > 0 and ends["truncated"] > 0


def test_final_obs_is_obs_when_nothing_ended():
    venv = make_vec_env("CartPole-v1", 2, seed=0, backend="gymnasium")
    venv.reset()
    step = venv.step(torch.tensor([0, 1]))
    assert step.final_obs is step.obs
    venv.close()


def test_probe_envs_are_registered_and_behave():
    assert sorted(PROBES) == [f"proxima/Probe{i}-v0" for i in range(1, 6)] + [
        "proxima/ProbeContinuous-v0",
        "proxima/ProbeMemory-v0",
    ]
    pm = gym.make("proxima/ProbeMemory-v0")
    cue = pm.reset(seed=1)[0][0]
    assert cue in (-1.0, 1.0)
    for _ in range(3):  # the cue is shown once, then 0, and nothing is paid until the fourth action
        obs, reward, terminated, *_ = pm.step(0)
        assert obs[0] == 0.0 and reward == 0.0 and not terminated
    assert pm.step(int(cue > 0))[1:3] == (1.0, True)
    pc = gym.make("proxima/ProbeContinuous-v0")
    pc.reset(seed=0)
    assert pc.step(np.array([0.5], dtype=np.float32))[1:3] == (0.0, True)
    assert pc.step(np.array([1.5], dtype=np.float32))[1] == -1.0
    p1 = gym.make("proxima/Probe1-v0")
    assert p1.reset(seed=0)[0].tolist() == [0.0] and p1.step(0)[1:3] == (1.0, True)
    p2 = gym.make("proxima/Probe2-v0")
    for s in range(10):
        o, _ = p2.reset(seed=s)
        assert p2.step(0)[1] == o[0] and o[0] in (-1.0, 1.0)
    p3 = gym.make("proxima/Probe3-v0")
    p3.reset(seed=0)
    assert p3.step(0)[:3][1:] == (0.0, False) and p3.step(0)[1:3] == (1.0, True)
    p4 = gym.make("proxima/Probe4-v0")
    p4.reset(seed=0)
    assert p4.step(1)[1] == 1.0 and p4.step(0)[1] == -1.0
    p5 = gym.make("proxima/Probe5-v0")
    seen = set()
    for s in range(20):
        o, _ = p5.reset(seed=s)
        seen.add(o[0])
        assert p5.step(int(o[0]))[1] == 1.0
        p5.reset(seed=s)
        assert p5.step(1 - int(o[0]))[1] == -1.0
    assert seen == {0.0, 1.0}


def test_module_prefixed_env_id_imports_the_module():
    venv = make_vec_env("tests.fixtures.user_envs:UserCartPole-v0", 2, seed=0)
    assert venv.reset().shape == (2, 4)
    venv.close()


@pytest.mark.parametrize(
    "env_id,match",
    [
        ("NoSuchEnv-v0", "unknown env id"),
        ("no_such_module:Foo-v0", "unknown env id"),
        ("CartPole v1", "unknown env id 'CartPole v1' \\(Malformed environment ID"),
        ("tests.fixtures.no_such_module:Foo-v0", "unknown env id"),
        (
            "tests.fixtures.missing_dependency:Foo-v0",
            r"gymnasium.make\('tests.fixtures.missing_dependency:Foo-v0'\) failed: No module named "
            "'proxima_test_no_such_package'",
        ),
        ("::", "malformed env id"),
        ("a:b:c", "malformed env id"),
    ],
)
def test_bad_env_ids(env_id, match):
    with pytest.raises(UserError, match=match):
        make_vec_env(env_id, 2)


def test_an_unknown_id_near_a_registered_one_names_it(tmp_path, capsys):
    """proxima's envs are registered in Gymnasium's proxima/ namespace; the id without it is named, in one line."""
    import proxima
    from proxima.commands import main

    run_dir = tmp_path / "run"
    said = "unknown env id 'Probe1-v0' (Environment `Probe1` doesn't exist.); did you mean proxima/Probe1-v0? Or give"
    with pytest.raises(UserError, match=f"^{re.escape(said)} a registered Gymnasium id"):
        proxima.train(env_id="Probe1-v0", run_dir=str(run_dir), total_timesteps=512, quiet=True)
    assert (
        main(["train", "--env-id", "Probe1-v0", "--run-dir", str(run_dir), "--total-timesteps", "512"]) == 2
    )
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"proxima train: error: {said} "), err
    assert not run_dir.exists()
    with pytest.raises(UserError, match="did you mean CartPole-v1[?]"):
        make_vec_env("CartPol-v1", 2)
    with pytest.raises(UserError) as far:  # no registered id is near: no guess
        make_vec_env("Zzqxw-v0", 2)
    assert "did you mean" not in str(far.value) and "give a registered Gymnasium id" in str(far.value)


def test_unsupported_spaces_are_refused_before_the_run_directory_exists(tmp_path):
    """The env layer knows nothing of policies: the trainer asks the encoders and heads (check_spaces)."""
    import proxima

    run_dir = tmp_path / "run"
    with pytest.raises(UserError, match="action space Dict"):
        proxima.train(env_id="tests.fixtures.user_envs:DictActions-v0", run_dir=str(run_dir))
    assert not run_dir.exists()


def test_training_with_async_envs_matches_sync(tmp_path):
    """AsyncVectorEnv runs the same envs in subprocesses: same seed, same metrics as the in-process version."""
    import json

    import proxima

    def metrics(name, **kw):
        proxima.train(total_timesteps=1024, seed=5, run_dir=str(tmp_path / name), **kw)
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in ("time_s", "sps")} for line in lines]

    assert metrics("sync", env_backend="gymnasium") == metrics("async", async_envs=True)
