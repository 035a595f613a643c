"""A full disk: the write that fails (a checkpoint, a log line, the final agent) leaves the previous checkpoint
whole, the run stops with one line that names the file, the space it needs and the space free (exit status 75),
and once space is freed the run resumes as if nothing had happened."""

import errno
import json
import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from safetensors.torch import load_file

import proxima.base.files
import proxima.scale.trainer
from proxima.base.errors import DiskFullError
from proxima.base.files import CHECKPOINT, read_checkpoint
from proxima.commands import main
from proxima.run.callbacks import Callback
from proxima.run.config import resolve_args

# 8 updates of 4 native CartPole envs x 128 steps, a checkpoint every 2; one thread (see test_resume.py)
RUN = [
    "--total-timesteps", "4096", "--num-envs", "4", "--num-steps", "128", "--seed", "5", "--torch-threads", "1",
    "--no-cuda", "--no-plot", "--no-report", "--quiet", "--checkpoint-every", "2",
]  # fmt: skip
TIMES = {"time_s", "sps"}


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("disk") / "uninterrupted")
    assert main(["train", "--run-dir", run_dir, *RUN]) == 0
    return run_dir


def _with_callback(monkeypatch, callback: Callback) -> None:
    """Every run made by the CLI gets ``callback`` (after the user's place, before logging and checkpoints)."""
    made = proxima.scale.trainer.default_callbacks
    monkeypatch.setattr(
        proxima.scale.trainer, "default_callbacks", lambda run, user=(): made(run, [*user, callback])
    )


def _stops_in_one_line(run_dir: str, capsys, file: str, update: int) -> str:
    """Runs RUN in ``run_dir``, which must stop on a full disk while writing ``file`` (a regular expression),
    with the checkpoint of ``update`` left whole; returns the line."""
    assert main(["train", "--run-dir", run_dir, *RUN]) == 75
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    checkpoint = os.path.join(run_dir, CHECKPOINT)
    assert re.fullmatch(
        rf"proxima train: error: no space left on device writing {re.escape(run_dir + os.sep)}{file}(: it needs about [\d.]+ "
        rf"(bytes|kB|MB))?[,:] [\d.]+ (bytes|kB|MB|GB) free on that filesystem; the last good checkpoint, from "
        rf"update {update}, is {re.escape(checkpoint)}; free space, then continue with: proxima train --resume "
        rf"{re.escape(run_dir)}",
        err[0],
    ), err[0]
    _, meta = read_checkpoint(checkpoint)
    assert meta["update"] == update and not meta["finished"]
    assert not [name for name in os.listdir(run_dir) if name.startswith(".tmp-")]
    return err[0]


def _resumes_exactly(run_dir: str, uninterrupted: str) -> None:
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    weights, expected = (load_file(os.path.join(d, "model.safetensors")) for d in (run_dir, uninterrupted))
    assert weights.keys() == expected.keys() and all((weights[k] == expected[k]).all() for k in weights)
    assert _metrics(run_dir) == _metrics(uninterrupted)
    assert read_checkpoint(os.path.join(run_dir, CHECKPOINT))[1]["finished"]


def _full_at(monkeypatch, name: str, nth: int, code: int = errno.ENOSPC) -> None:
    """The ``nth`` write of ``name`` (``files._atomic``'s) finds the disk full: at its fsync, where a filesystem
    that allocates late (NFS, delayed allocation) says so, after the data went into the temporary file."""
    fsync, seen = proxima.base.files._fsync, []

    def full(path: str) -> None:
        if os.path.basename(path).startswith(".tmp-") and path.endswith(name):
            seen.append(path)
            if len(seen) == nth:
                raise OSError(code, os.strerror(code))
        fsync(path)

    monkeypatch.setattr(proxima.base.files, "_fsync", full)


def test_a_full_disk_at_a_checkpoint_keeps_the_previous_one(uninterrupted, tmp_path, monkeypatch, capsys):
    run_dir = str(tmp_path / "run")
    with monkeypatch.context() as m:
        _full_at(m, CHECKPOINT, 2)  # the checkpoint of update 4
        line = _stops_in_one_line(run_dir, capsys, re.escape(CHECKPOINT), update=2)
    assert "it needs about" in line and "kB" in line
    _resumes_exactly(run_dir, uninterrupted)


def test_a_full_disk_at_the_final_agent_keeps_the_last_checkpoint(
    uninterrupted, tmp_path, monkeypatch, capsys
):
    run_dir = str(tmp_path / "run")
    with monkeypatch.context() as m:
        _full_at(m, "model.safetensors", 1)
        _stops_in_one_line(run_dir, capsys, re.escape("model.safetensors"), update=8)
    _resumes_exactly(run_dir, uninterrupted)


class _LogsToDevFull(Callback):
    """From update ``at`` on, ``metrics.jsonl``'s lines go to /dev/full, where every write fails with ENOSPC."""

    def __init__(self, at: int):
        self.at = at

    def on_update_end(self, run, result) -> None:
        if run.updates_done == self.at:
            run.logger._metrics.close()
            run.logger._metrics = open("/dev/full", "w")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_full_disk_at_a_log_line_keeps_the_checkpoint(uninterrupted, tmp_path, monkeypatch, capsys):
    run_dir = str(tmp_path / "run")
    with monkeypatch.context() as m:
        _with_callback(m, _LogsToDevFull(5))
        _stops_in_one_line(run_dir, capsys, re.escape("metrics.jsonl"), update=4)
    _resumes_exactly(run_dir, uninterrupted)


@pytest.mark.parametrize(
    ("code", "said"),
    [(errno.ENOSPC, "no space left on device"), (errno.EDQUOT, "disk quota exceeded")],
    ids=["disk", "quota"],
)
def test_a_full_disk_in_python_is_one_exception_that_names_the_sizes(code, said, tmp_path, monkeypatch):
    settings = {"run_dir": str(tmp_path / "run"), "total_timesteps": 512, "num_envs": 4, "quiet": True}
    size = len(json.dumps(resolve_args(**settings).to_json(), indent=2)) + 1  # config.json, its first write
    monkeypatch.setattr(proxima.base.files.shutil, "disk_usage", lambda path: SimpleNamespace(free=1500))
    with monkeypatch.context() as m:
        _full_at(m, "config.json", 1, code)
        with pytest.raises(DiskFullError) as raised:
            proxima.train(**settings)
    free = ", 1.5 kB free on that filesystem" if code == errno.ENOSPC else ""  # a quota is not the disk's
    assert str(raised.value) == (
        f"{said} writing {tmp_path / 'run' / 'config.json'}: it needs about {size / 1000:.1f} kB{free}"
    )
    assert raised.value.exit_status == 75 and not os.path.exists(tmp_path / "run")


# A real full disk: a small tmpfs (mounting one needs root), filled by a callback after a checkpoint.


@pytest.fixture
def tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


class _FillDisk(Callback):
    """After update ``at``, a file fills the run's filesystem until ``leave`` bytes are free."""

    def __init__(self, at: int, path: str, leave: int):
        self.at, self.path, self.leave = at, path, leave

    def on_update_end(self, run, result) -> None:
        if run.updates_done == self.at:
            with open(self.path, "wb") as f:
                free = shutil.disk_usage(os.path.dirname(self.path)).free
                try:
                    f.write(b"\0" * max(free - self.leave, 0))
                    f.flush()
                except OSError as e:
                    assert e.errno == errno.ENOSPC


@pytest.mark.parametrize(
    ("leave", "file"),
    # room for the log lines, not for the checkpoint; room for nothing: a log, whichever needs a new page first
    [
        (40_000, re.escape(CHECKPOINT)),
        (0, r"(metrics\.jsonl|episodes\.jsonl|events\.out\.tfevents\.[\w.-]+)"),
    ],
    ids=["checkpoint", "log"],
)
def test_a_real_full_disk_stops_the_run_and_it_resumes_once_space_is_freed(
    leave, file, tmpfs, uninterrupted, monkeypatch, capsys
):
    run_dir = str(tmpfs / "run")
    filler = str(tmpfs / "filler")
    with monkeypatch.context() as m:
        _with_callback(m, _FillDisk(3, filler, leave))
        _stops_in_one_line(run_dir, capsys, file, update=2)
    os.remove(filler)
    _resumes_exactly(run_dir, uninterrupted)
