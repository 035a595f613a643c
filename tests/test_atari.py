"""Atari: ALE ids on ale-py's C++ vector env and on the Gymnasium wrappers, whole-game statistics, the preset,
evaluation, video, resume, predict, and the image probes catching a broken CNN path."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import proxima
from proxima.commands import main
from proxima.envs import make_vec_env
from proxima.envs.ale_backend import AleVecEnv
from proxima.envs.atari import atari_game, make_atari_env
from proxima.envs.registry import resolve_backend
from proxima.policy.encoders import NatureCNN
from proxima.run.config import resolve_args
from proxima.scale.probe import IMAGE_PROBES, PROBES, probes_for, run_probes

# A short Atari run: the preset's network and optimization, 4 envs x 32 steps, 4 updates.
SHORT = [
    "--config", "atari", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "512", "--no-cuda",
    "--quiet", "--no-plot", "--torch-threads", "1",
]  # fmt: skip


def test_ale_ids_keep_their_own_sticky_actions_and_other_ids_are_not_atari():
    assert atari_game("BreakoutNoFrameskip-v4") == {
        "game": "breakout",
        "repeat_action_probability": 0.0,
        "full_action_space": False,
        "max_num_frames_per_episode": 108_000,
    }
    assert atari_game("ALE/Breakout-v5")["repeat_action_probability"] == 0.25
    assert atari_game("ALE/Pong-v5")["game"] == "pong"
    for other in ("CartPole-v1", "ALE/Breakout-ram-v5", "tests.fixtures.user_envs:Anything-v0", "Nope-v0"):
        assert atari_game(other) is None
    assert resolve_backend("BreakoutNoFrameskip-v4") == "ale"
    assert resolve_backend("ALE/MsPacman-v5") == "ale"
    # the C++ env cannot record: video falls back to the Gymnasium wrappers, which give the same frames
    assert resolve_backend("ALE/Breakout-v5", video=True) == "gymnasium"


@pytest.mark.parametrize("env_id", ["BreakoutNoFrameskip-v4", "PongNoFrameskip-v4"])
def test_the_cpp_env_and_the_gymnasium_wrappers_give_the_same_frames(env_id):
    """Frame by frame on a fixed action sequence, across lost lives and ended games. No-op starts are off: the
    two paths draw their number from different generators (and v5's sticky actions too), which is the only
    place they differ (docs/ATARI.md)."""
    cpp = AleVecEnv(env_id, 1, seed=3, noop_max=0)
    wrapped = make_atari_env(env_id, noop_max=0)
    obs, _ = wrapped.reset(seed=3)
    np.testing.assert_array_equal(cpp.reset()[0].numpy(), obs)
    rng = np.random.default_rng(0)
    lives_lost = games = 0
    for t in range(2500):
        action = int(rng.integers(cpp.single_action_space.n))
        step = cpp.step(torch.tensor([action]))
        obs, reward, terminated, truncated, info = wrapped.step(action)
        score, game_over = step.stats()
        np.testing.assert_array_equal(step.final_obs[0].numpy(), obs, err_msg=f"step {t}")
        assert (bool(step.terminated), bool(step.truncated), bool(game_over), float(score), float(step.reward)) == (
            terminated, truncated, info["game_over"], info["score"], reward
        ), t  # fmt: skip
        if terminated or truncated:
            lives_lost += not info["game_over"]
            games += info["game_over"]
            obs, _ = wrapped.reset()
            np.testing.assert_array_equal(step.obs[0].numpy(), obs, err_msg=f"after the reset at step {t}")
    assert games >= 1  # the comparison crossed ended games, and lost lives where the game has lives
    assert lives_lost >= 4 or env_id.startswith("Pong")


@pytest.mark.parametrize("backend", ["ale", "gymnasium"])
def test_statistics_count_whole_games_with_their_raw_scores(backend):
    """Space Invaders scores 5 to 30 points per alien: training sees -1/0/+1, a lost life ends only the
    training episode, and a game's return is the sum of its raw points over all its lives."""
    envs = make_vec_env("SpaceInvadersNoFrameskip-v4", 2, backend=backend, seed=1)
    assert envs.reset().dtype == torch.uint8
    g = torch.Generator().manual_seed(0)
    running, games, life_losses, big = torch.zeros(2), [], 0, False
    for _ in range(1500):
        step = envs.step(torch.randint(0, 6, (2,), generator=g))
        score, over = step.stats()
        assert step.obs.dtype == torch.uint8 and step.obs.shape == (2, 4, 84, 84)
        torch.testing.assert_close(step.reward, score.sign())
        big |= bool((score > 1).any())
        assert not (over & ~step.done).any()  # a game ends only with an episode
        life_losses += int((step.terminated & ~over).sum())
        running += score
        games += running[over].tolist()
        running[over] = 0
    envs.close()
    assert big and life_losses >= 2 and games
    assert all(r >= 5 and r == int(r) for r in games), games  # raw points, not counts of clipped rewards


def _wait_for_updates(run_dir, n: int, proc) -> None:
    path = os.path.join(run_dir, "metrics.jsonl")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= n:
            return
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    raise AssertionError(f"no {n} updates within 120 s")


def test_atari_trains_evaluates_records_the_rgb_game_predicts_and_resumes(tmp_path, capsys):
    run_dir = str(tmp_path / "breakout")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxima.commands", "train", "--env-id", "ALE/Breakout-v5", "--run-dir", run_dir,
         *SHORT, "--checkpoint-every", "1"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for_updates(run_dir, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and f"proxima train --resume {run_dir}" in err
    # Resume is not exact on Atari: the emulators' states stay in C++, so the envs start new games.
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["global_step"] for line in f]
    assert steps[-1] == 512 and steps == sorted(set(steps))

    agent = proxima.load(run_dir)
    spec = json.load(open(os.path.join(run_dir, "agent.json")))["network"]
    net = spec["network"]
    assert net["encoder"] == "nature-cnn" and spec["obs_shape"] == [4, 84, 84] and net["hidden_sizes"] == []
    stack = np.zeros((4, 84, 84), dtype=np.uint8)
    assert agent.predict(stack, deterministic=True) in range(4)
    assert agent.predict(np.stack([stack, stack + 255])).shape == (2,)

    capsys.readouterr()
    assert main(["eval", run_dir, "--episodes", "1", "--video"]) == 0
    out = capsys.readouterr().out
    assert "ALE/Breakout-v5: mean_return=" in out and "episodes=1" in out
    videos = [f for f in os.listdir(os.path.join(run_dir, "eval-videos")) if f.endswith(".mp4")]
    assert videos
    import imageio

    reader = imageio.get_reader(os.path.join(run_dir, "eval-videos", videos[0]))
    assert reader.get_meta_data()["size"] == (160, 210)  # the real RGB screen, not the 84x84 gray input
    assert reader.get_meta_data()["fps"] == 15


def test_a_training_run_logs_whole_games(tmp_path):
    run_dir = str(tmp_path / "breakout")
    assert main(["train", "--env-id", "BreakoutNoFrameskip-v4", "--run-dir", run_dir, *SHORT,
                 "--num-steps", "128", "--total-timesteps", "1024"]) == 0  # fmt: skip
    with open(os.path.join(run_dir, "episodes.jsonl")) as f:
        games = [json.loads(line) for line in f]
    # A random player's Breakout life lasts about 25 agent steps; a game is 5 of them. Per-life episodes
    # would be logged 5 times as often, and 5 times as short.
    assert 1 <= len(games) <= 12 and all(g["length"] >= 80 and g["return"] >= 0 for g in games), games


def test_without_ale_py_an_atari_id_gets_one_line_on_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr("proxima.envs.atari._ale_registered", lambda: False)
    assert main(["train", "--env-id", "ALE/Breakout-v5", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        "proxima train: error: ALE/Breakout-v5 is an Atari game, and ale-py is not installed: pip install 'proxima[atari]' "
        "(make installs it)"
    ]


def test_probe_runs_the_image_probes_for_an_image_agent():
    assert probes_for(resolve_args(config="atari", cuda=False)) == IMAGE_PROBES
    assert probes_for(resolve_args(cuda=False)) == PROBES


_ORIGINAL = NatureCNN._as_images
_FORWARD = NatureCNN.forward
BREAKS = {
    "pixels not divided by 255": ("_as_images", lambda self, obs: obs.to(torch.float32)),
    "pixels divided by 255 twice": ("_as_images", lambda self, obs: _ORIGINAL(self, obs) / 255.0),
    "a CNN that never learns": ("forward", lambda self, obs: _FORWARD(self, obs).detach()),
}


def _probe_atari_agent(precision: str = "float32", names: list[str] | None = None) -> dict:
    args = resolve_args(config="atari", cuda=False, quiet=True, torch_threads=1, precision=precision)
    return {r.probe.name: r.passed for r in run_probes(args, names)}


@pytest.mark.slow
def test_the_atari_agent_passes_the_image_probes_at_their_budgets():
    assert _probe_atari_agent() == {"image-value": True, "image-policy": True}


@pytest.mark.slow
def test_the_atari_agent_learns_the_image_values_with_bfloat16_convolutions():
    # bf16 is the convolutions' alone (the heads stay float32), and the value probe is the one that needs the
    # CNN's bits (docs/ATARI.md); emulated on an AVX2 CPU it takes 9x float32's time, so the policy probe, whose
    # CNN path is the same, runs in float32 only
    assert _probe_atari_agent("bfloat16", ["image-value"]) == {"image-value": True}


@pytest.mark.slow
@pytest.mark.parametrize("broken", BREAKS)
def test_the_image_probes_catch_a_broken_cnn_path(broken, monkeypatch):
    monkeypatch.setattr(NatureCNN, *BREAKS[broken])
    assert _probe_atari_agent(names=["image-value"]) == {"image-value": False}, broken


def test_the_ram_as_observation_goes_by_an_env_object_and_env_kwargs_on_an_ale_id_say_so(tmp_path, capsys):
    import functools

    import gymnasium as gym

    argv = ["train", "--env-id", "ALE/Breakout-v5", "--env-kwargs", '{"obs_type": "ram"}', "--run-dir",
            str(tmp_path / "refused"), "--total-timesteps", "512", "--quiet"]  # fmt: skip
    assert main(argv) == 2 and not (tmp_path / "refused").exists()
    assert "obs_type='ram'" in capsys.readouterr().err
    ram = functools.partial(gym.make, "ALE/Breakout-v5", obs_type="ram")
    agent = proxima.train(env=ram, num_envs=2, num_steps=64, total_timesteps=128, torch_threads=1, quiet=True,
                          plot=False, report=False, run_dir=str(tmp_path / "ram"))  # fmt: skip
    assert agent.observation_space.shape == (128,) and agent.model.encoder.__class__.__name__ != "NatureCNN"
