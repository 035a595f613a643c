"""torch's thread count: explicit always, capped by the cores other processes leave free, the user's flag first."""

import os
from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch

from proxima.run import threads
from proxima.run.config import PPOArgs
from proxima.run.loop import setup, thread_notes
from proxima.scale import executors

VECTORS = SimpleNamespace(
    single_observation_space=gym.spaces.Box(-1, 1, (4,))
)  # what thread_notes reads of envs


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(threads, "DEFAULT_THREADS", 2)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


def test_small_minibatches_take_one_thread_without_looking_at_the_load(two_cores, monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda: pytest.fail("no need to sample the load"))
    assert threads.choose_threads(0, 128) == (1, None)


@pytest.mark.parametrize("busy, expected", [(0.0, 2), (0.2, 2), (0.8, 1), (1.0, 1), (2.0, 1), (None, 2)])
def test_large_minibatches_take_the_free_cores(two_cores, monkeypatch, busy, expected):
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    count, note = threads.choose_threads(0, 512)
    assert count == expected
    assert (note is not None) == (expected < 2)
    if note:
        assert f"--torch-threads {expected} reproduces this run" in note


def test_the_users_count_and_a_resumed_runs_count_always_win(two_cores, monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda: 2.0)
    assert threads.choose_threads(2, 512) == (2, None)
    assert threads.choose_threads(0, 512, saved=2) == (2, None)
    assert threads.choose_threads(3, 64, saved=2) == (3, None)


def test_busy_cores_sees_another_process_spinning():
    import subprocess
    import sys

    idle = threads.busy_cores(0.2)
    assert idle is not None and idle >= 0.0
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        import time

        time.sleep(0.3)
        busy = threads.busy_cores(0.3)
    finally:
        spinner.kill()
    assert busy >= 0.7, busy  # one core's worth of spinning, whatever else the machine does


def test_the_run_says_when_the_load_lowers_its_threads_and_when_cuda_is_missing(
    two_cores, monkeypatch, one_thread
):
    monkeypatch.setattr(threads, "busy_cores", lambda: 1.0)
    args = PPOArgs.of(num_envs=16, num_steps=128, cuda=True)
    _, notes = setup(args)
    notes += thread_notes(args, VECTORS)
    assert torch.get_num_threads() == 1
    assert any("--torch-threads 1 reproduces this run" in n for n in notes)
    if not torch.cuda.is_available():
        assert any("no GPU is available" in n for n in notes)
    _, notes = setup(PPOArgs.of(cuda=False))
    assert not any("GPU" in n for n in notes)


@pytest.mark.xdist_group("ray")
@pytest.mark.skipif(not executors.ray_available(), reason="needs the ray extra")
def test_a_local_ray_instance_runs_its_workers_at_the_callers_priority(monkeypatch):
    import ray

    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    threads.ray_worker_priority()
    ray.init(address="local", include_dashboard=False, logging_level="ERROR", num_cpus=1)
    try:
        nice = ray.get(ray.remote(lambda: os.nice(0)).remote())
    finally:
        ray.shutdown()
    assert nice == os.nice(0)  # Ray's default would be 15: a trial crawls beside any other work
