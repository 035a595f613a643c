"""Checkpoints and resume: atomic, complete, exact after SIGKILL or Ctrl-C, and never unpickled."""

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from proxima.base.files import CHECKPOINT, read_checkpoint
from proxima.commands import main

# 12 updates of 16 envs x 128 steps on native CartPole (long enough to interrupt), a checkpoint every 2.
# One thread given explicitly: the automatic count of these 512-sample minibatches depends on the load at
# the start (proxima.run.threads), and the runs compared here start at different times.
RUN = [
    "--total-timesteps", "24576", "--num-envs", "16", "--num-steps", "128", "--checkpoint-every", "2",
    "--quiet", "--no-plot", "--seed", "4", "--torch-threads", "1",
]  # fmt: skip
TIMES = {"time_s", "sps"}


def _cli(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "proxima.commands", *argv], stderr=subprocess.PIPE, text=True, cwd=os.getcwd()
    )


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


def _wait_for_updates(run_dir, n: int, proc: subprocess.Popen) -> None:
    path = os.path.join(run_dir, "metrics.jsonl")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                if sum(1 for _ in f) >= n:
                    return
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.01)
    raise AssertionError(f"no {n} updates within 120 s")


def _assert_same_run(a, b) -> None:
    wa, wb = load_file(os.path.join(a, "model.safetensors")), load_file(os.path.join(b, "model.safetensors"))
    assert wa.keys() == wb.keys()
    for key in wa:
        assert (wa[key] == wb[key]).all(), key
    assert _metrics(a) == _metrics(b)
    with open(os.path.join(a, "episodes.jsonl")) as fa, open(os.path.join(b, "episodes.jsonl")) as fb:
        assert fa.read() == fb.read()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("resume") / "uninterrupted")
    assert main(["train", "--run-dir", run_dir, *RUN, "--no-cuda"]) == 0
    return run_dir


@pytest.fixture(scope="module")
def uninterrupted_cuda(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("resume") / "uninterrupted-cuda")
    assert main(["train", "--run-dir", run_dir, *RUN, "--cuda"]) == 0
    return run_dir


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_sigkill_at_a_random_point_then_resume_matches_an_uninterrupted_run(device, request, tmp_path):
    uninterrupted = request.getfixturevalue("uninterrupted" if device == "cpu" else "uninterrupted_cuda")
    run_dir = str(tmp_path / "killed")
    # updates logged before the kill: by 3 a checkpoint (every 2) exists, and by 9 of 12 the run is not over.
    # The point is random, from a seed printed here so that a failure can be reproduced (PROXIMA_KILL_SEED).
    seed = int(os.environ.get("PROXIMA_KILL_SEED", random.SystemRandom().randrange(2**32)))
    kill_after = random.Random(seed).randint(3, 9)
    print(f"killing after {kill_after} updates (PROXIMA_KILL_SEED={seed} repeats this)")
    proc = _cli("train", "--run-dir", run_dir, *RUN, "--cuda" if device == "cuda" else "--no-cuda")
    _wait_for_updates(run_dir, kill_after, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(_metrics(run_dir)) < 12
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    _assert_same_run(uninterrupted, run_dir)


def test_ctrl_c_saves_a_checkpoint_says_how_to_resume_and_resumes_exactly(uninterrupted, tmp_path):
    run_dir = str(tmp_path / "interrupted")
    # only the Ctrl-C checkpoint
    proc = _cli("train", "--run-dir", run_dir, *RUN, "--no-cuda", "--checkpoint-every", "0")
    _wait_for_updates(run_dir, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert f"proxima train --resume {run_dir}" in err.strip().splitlines()[-1]
    _, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    assert 3 <= meta["update"] < 12 and not meta["finished"]
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    _assert_same_run(uninterrupted, run_dir)
    # machine.json (proxima report's) has both parts of the run
    sessions = json.load(open(os.path.join(run_dir, "machine.json")))["sessions"]
    assert [s["from_step"] for s in sessions] == [0, meta["global_step"]]


def test_checkpoint_holds_every_part_of_the_training_state(uninterrupted):
    tensors, meta = read_checkpoint(os.path.join(uninterrupted, CHECKPOINT))
    prefixes = {key.split("/")[0] for key in tensors}
    assert prefixes == {"model", "optimizer", "rng", "collector"}
    assert {
        "collector/env/state",
        "collector/env/rng_counter",
        "collector/next_obs",
        "rng/actions",
        "rng/minibatches",
    } <= tensors.keys()
    assert any(
        k.startswith("optimizer/state/") and k.endswith("exp_avg_sq") for k in tensors
    )  # Adam's moments
    assert meta["version"] == 4 and meta["update"] == 12 and meta["global_step"] == 24576 and meta["finished"]
    parts = meta["components"]
    assert parts["settings"]["lines"] == {"learning_rate": [2.5e-4, 0.0, 0]}  # --anneal-lr's line
    assert set(parts) == {"model", "optimizer", "settings", "collector", "rng", "health", "logging"}
    assert parts["optimizer"]["param_groups"]  # the generators' states are tensors only
    assert parts["logging"]["offsets"]["global_step"] == 24576 and set(parts["health"]) >= {
        "streaks",
        "counts",
    }
    # the final checkpoint's weights are the saved agent's
    weights = load_file(os.path.join(uninterrupted, "model.safetensors"))
    assert all((tensors[f"model/{k}"] == v).all() for k, v in weights.items())


def test_checkpoints_are_written_atomically(tmp_path, monkeypatch):
    """A write that dies halfway leaves the previous checkpoint whole and no temporary file behind."""
    import proxima.base.files as checkpoint

    run_dir = str(tmp_path / "run")
    assert main(["train", "--run-dir", run_dir, *RUN, "--total-timesteps", "4096"]) == 0
    path = os.path.join(run_dir, CHECKPOINT)
    before = open(path, "rb").read()

    def dying_fsync(path):  # the temporary file holds half of it when the write fails
        if os.path.basename(path).startswith(".tmp-"):
            os.truncate(path, os.path.getsize(path) // 2)
            raise OSError("I/O error")

    monkeypatch.setattr(checkpoint, "_fsync", dying_fsync)
    with pytest.raises(OSError, match="I/O error"):
        checkpoint.write_checkpoint(path, {}, {"x": 1})
    assert open(path, "rb").read() == before
    assert sorted(os.listdir(run_dir)) == sorted(
        [
            "agent.json",
            "checkpoint.safetensors",
            "config.json",
            "episodes.jsonl",
            "machine.json",
            "metrics.jsonl",
            "model.safetensors",
            "report.html",
        ]
        + [f for f in os.listdir(run_dir) if f.startswith("events.out")]
    )


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_writes_get_the_mode_of_a_plain_file(umask, tmp_path):
    """A file written atomically (a temporary file, then a rename) gets the mode a file written plainly does,
    0666 less the umask: not tempfile.mkstemp's 0600, which no one else could read on a shared disk."""
    from proxima.base.files import write_checkpoint, write_json, write_tensors, write_text

    def mode(path) -> int:
        return os.stat(path).st_mode & 0o777

    old = os.umask(umask)
    try:
        write_json(str(tmp_path / "a.json"), {"a": 1})
        write_text(str(tmp_path / "a.html"), "<p>")
        write_tensors(str(tmp_path / "a.safetensors"), {"w": torch.zeros(2)})
        write_checkpoint(str(tmp_path / "c.safetensors"), {"w": torch.zeros(2)}, {"x": 1})
        run_dir = tmp_path / "run"
        assert main(["train", "--run-dir", str(run_dir), "--total-timesteps", "2048", "--num-envs", "4",
                     "--num-steps", "64", "--checkpoint-every", "2", "--quiet", "--no-plot", "--seed", "4",
                     "--torch-threads", "1"]) == 0  # fmt: skip
    finally:
        os.umask(old)
    files = ["agent.json", "model.safetensors", "config.json", "checkpoint.safetensors", "report.html"]
    written = {p.name: mode(p) for p in tmp_path.iterdir() if p.is_file()}
    written |= {name: mode(run_dir / name) for name in [*files, "metrics.jsonl"]}  # metrics: written plainly
    assert written == dict.fromkeys(written, 0o666 & ~umask)
    assert not [p for p in [*tmp_path.iterdir(), *run_dir.iterdir()] if p.name.startswith(".tmp-")]


def test_gymnasium_envs_resume_with_new_episodes_and_say_so(tmp_path, capsys):
    run_dir = str(tmp_path / "gym")
    proc = _cli("train", "--run-dir", run_dir, *RUN, "--env-backend", "gymnasium")
    _wait_for_updates(run_dir, 3, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    tensors, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    assert meta["components"]["collector"] is None and not any(k.startswith("collector/") for k in tensors)
    assert main(["train", "--resume", run_dir]) == 0
    out = capsys.readouterr().out
    assert f"resuming {run_dir} after update {meta['update']} of 12" in out
    assert "start new episodes" in out
    steps = [m["global_step"] for m in _metrics(run_dir)]
    assert steps == [2048 * (i + 1) for i in range(12)]


def _one_line_exit_2(argv, capsys, match: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("proxima train: error:"), err
    assert match in err[0], err[0]


@pytest.fixture
def interrupted_run(tmp_path):
    """A short run whose final checkpoint is marked unfinished, as if it had been killed just before the end."""
    run_dir = str(tmp_path / "run")
    assert main(["train", "--run-dir", run_dir, *RUN, "--total-timesteps", "2048"]) == 0
    from proxima.base.files import write_checkpoint

    tensors, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    write_checkpoint(os.path.join(run_dir, CHECKPOINT), tensors, {**meta, "finished": False})
    return run_dir


def test_resume_refuses_other_flags(interrupted_run, capsys):
    _one_line_exit_2(["train", "--resume", interrupted_run, "--seed", "3"], capsys, "--seed")


def test_resume_refuses_a_missing_checkpoint(interrupted_run, capsys):
    os.remove(os.path.join(interrupted_run, CHECKPOINT))
    _one_line_exit_2(["train", "--resume", interrupted_run], capsys, "before its first checkpoint")


def test_resume_refuses_a_truncated_checkpoint(interrupted_run, capsys):
    path = os.path.join(interrupted_run, CHECKPOINT)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 3])
    _one_line_exit_2(["train", "--resume", interrupted_run], capsys, "not a readable safetensors file")


def test_resume_refuses_a_checkpoint_of_other_env_spaces(interrupted_run, capsys):
    path = os.path.join(interrupted_run, CHECKPOINT)
    tensors, meta = read_checkpoint(path)
    from proxima.base.files import write_checkpoint

    spaces = {**meta["spaces"], "action_space": {"type": "Discrete", "n": 3}}
    write_checkpoint(path, tensors, {**meta, "spaces": spaces})
    _one_line_exit_2(["train", "--resume", interrupted_run], capsys, "written for another env")


def test_resume_refuses_weights_of_the_wrong_shape(interrupted_run, capsys):
    config_path = os.path.join(interrupted_run, "config.json")
    config = json.load(open(config_path))
    json.dump({**config, "network": {**config["network"], "hidden_sizes": [32, 32]}}, open(config_path, "w"))
    _one_line_exit_2(["train", "--resume", interrupted_run], capsys, "does not match the network")


class _CreatesAFile:
    """Unpickling this creates a file: the proof that a loader unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("command", ["eval", "resume"])
def test_a_malicious_pickle_is_rejected_without_being_unpickled(interrupted_run, tmp_path, capsys, command):

    marker = tmp_path / "pwned"
    name = "model.safetensors" if command == "eval" else CHECKPOINT
    # torch.save's zip format and a bare pickle: the two forms a .pt "checkpoint" comes in
    for writer in (
        lambda f: torch.save({"x": _CreatesAFile(str(marker))}, f),
        lambda f: pickle.dump(_CreatesAFile(str(marker)), f),
    ):
        with open(os.path.join(interrupted_run, name), "wb") as f:
            writer(f)
        assert not marker.exists()  # writing it did not run it
        argv = ["eval", interrupted_run] if command == "eval" else ["train", "--resume", interrupted_run]
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "not a readable safetensors file" in err[0], err
        assert not marker.exists()


def test_track_logs_to_wandb_offline_and_a_resumed_run_continues_the_same_wandb_run(
    interrupted_run, monkeypatch
):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = os.path.join(os.path.dirname(interrupted_run), "tracked")
    assert main(["train", "--run-dir", run_dir, *RUN, "--total-timesteps", "2048", "--track"]) == 0
    # --track logs to W&B (offline here): one run, with its data file (W&B's start-up costs 10 s, so the
    # plain --track check lives in this test instead of a run of its own)
    first = [r for r in os.listdir(os.path.join(run_dir, "wandb")) if r.startswith("offline-run-")]
    assert len(first) == 1
    assert any(f.endswith(".wandb") for f in os.listdir(os.path.join(run_dir, "wandb", first[0])))
    from proxima.base.files import write_checkpoint

    tensors, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    wandb_id = meta["components"]["logging"]["wandb_id"]
    assert wandb_id
    write_checkpoint(os.path.join(run_dir, CHECKPOINT), tensors, {**meta, "finished": False})
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    runs = sorted(os.listdir(os.path.join(run_dir, "wandb")))
    offline = [r for r in runs if r.startswith("offline-run-")]
    assert len(offline) == 2 and all(r.endswith("-" + wandb_id) for r in offline), runs


def test_videos_from_before_the_interruption_are_kept(tmp_path):
    run_dir = str(tmp_path / "video")
    proc = _cli("train", "--run-dir", run_dir, *RUN, "--capture-video")
    _wait_for_updates(run_dir, 2, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    before = sorted(f for f in os.listdir(os.path.join(run_dir, "videos")) if f.endswith(".mp4"))
    assert before
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    after = sorted(f for f in os.listdir(os.path.join(run_dir, "videos")) if f.endswith(".mp4"))
    assert after == before
    _, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    resumed = [
        d for d in os.listdir(os.path.join(run_dir, "videos")) if d.startswith("resumed-after-update-")
    ]
    assert len(resumed) == 1
    assert any(f.endswith(".mp4") for f in os.listdir(os.path.join(run_dir, "videos", resumed[0])))


def test_every_run_sets_its_thread_count_instead_of_inheriting_one(monkeypatch):
    """The thread count changes float sums: a run must not take whatever an earlier run in the process left."""
    from types import SimpleNamespace

    import gymnasium as gym

    from proxima.run import threads
    from proxima.run.config import PPOArgs
    from proxima.run.loop import thread_notes

    monkeypatch.setattr(threads, "busy_cores", lambda: 0.0)  # an idle machine
    big = PPOArgs.of(num_envs=16, num_steps=128)  # minibatches of 512: torch's default thread count
    vectors = SimpleNamespace(single_observation_space=gym.spaces.Box(-1, 1, (4,)))
    images = SimpleNamespace(single_observation_space=gym.spaces.Box(0, 255, (4, 84, 84), dtype="uint8"))
    try:
        torch.set_num_threads(threads.DEFAULT_THREADS + 1)
        thread_notes(big, vectors)
        assert torch.get_num_threads() == threads.DEFAULT_THREADS
        thread_notes(PPOArgs(), vectors)  # minibatches of 128: one thread
        assert torch.get_num_threads() == 1
        thread_notes(PPOArgs(), images)  # ... unless they are images through a CNN
        assert torch.get_num_threads() == threads.DEFAULT_THREADS
        thread_notes(big, vectors, saved=3)  # a resumed run's saved count wins
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads.DEFAULT_THREADS)


def test_the_checkpoint_records_the_thread_count(uninterrupted):
    _, meta = read_checkpoint(os.path.join(uninterrupted, CHECKPOINT))
    assert meta["torch_threads"] >= 1


def test_resume_refuses_logs_shorter_than_the_checkpoint_says(interrupted_run, capsys):
    metrics = os.path.join(interrupted_run, "metrics.jsonl")
    with open(metrics, "a") as f:
        f.write('{"global_step": 99999}\n')  # a line from after the checkpoint, which a resume would cut
    before = open(metrics).read()
    open(os.path.join(interrupted_run, "episodes.jsonl"), "w").close()  # emptied after the checkpoint
    _one_line_exit_2(["train", "--resume", interrupted_run], capsys, "shorter than its checkpoint says")
    assert open(metrics).read() == before  # both logs are checked before either is cut back
