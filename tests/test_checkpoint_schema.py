"""The checkpoint schema: versioned, one component per part of the run; a checkpoint of another version is refused."""

import json
import os
import shutil

import pytest

from proxima import checkpoint
from proxima.callbacks import Callback
from proxima.cli import main
from proxima.files import read_checkpoint, write_checkpoint
from proxima.trainer import resume, train

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "checkpoint-v1")
TIMES = {"time_s", "sps"}


def _metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


def test_an_older_checkpoint_is_refused_in_one_line(tmp_path, capsys):
    """tests/fixtures/checkpoint-v1 was written by commit 5b414c6 (before the schema had components). Before 1.0
    a checkpoint of another version is refused in one line, not converted, and the run directory is left as
    it was."""
    run_dir = str(tmp_path / "v1")
    shutil.copytree(FIXTURE, run_dir)
    _, meta = read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))
    assert meta["version"] == 1 and meta["update"] == 3
    before = sorted(os.listdir(run_dir))
    assert main(["train", "--resume", run_dir, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"checkpoint version 1; this proxima reads version {checkpoint.VERSION} only" in err, err
    assert "older proxima" in err and "\n" not in err
    assert sorted(os.listdir(run_dir)) == before


@pytest.fixture
def unfinished(tmp_path):
    run_dir = str(tmp_path / "run")
    train(env_id="CartPole-v1", total_timesteps=1024, plot=False, quiet=True, run_dir=run_dir)
    path = os.path.join(run_dir, "checkpoint.safetensors")
    tensors, meta = read_checkpoint(path)
    write_checkpoint(path, tensors, {**meta, "finished": False})
    return run_dir


@pytest.mark.parametrize(
    "change, words",
    [
        ({"version": checkpoint.VERSION + 1}, f"checkpoint version {checkpoint.VERSION + 1}"),
        ({"version": "2"}, "not a proxima checkpoint"),
        ({"format": "something-else"}, "not a proxima checkpoint"),
    ],
)
def test_a_checkpoint_of_an_unknown_or_newer_version_is_refused_in_one_line(
    unfinished, capsys, change, words
):
    path = os.path.join(unfinished, "checkpoint.safetensors")
    tensors, meta = read_checkpoint(path)
    write_checkpoint(path, tensors, {**meta, **change})
    assert main(["train", "--resume", unfinished]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


class Counter(Callback):
    """A user's callback with state of its own, carried through a checkpoint."""

    state_key = "counter"

    def __init__(self):
        self.seen = 0

    def on_update_end(self, run, result):
        self.seen += 1

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = state["seen"]


def test_a_callback_with_state_is_a_checkpoint_component(unfinished, tmp_path):
    run_dir = str(tmp_path / "counted")
    counter = Counter()
    train(
        env_id="CartPole-v1",
        total_timesteps=2048,
        plot=False,
        quiet=True,
        run_dir=run_dir,
        callbacks=[counter],
    )
    assert counter.seen == 4
    path = os.path.join(run_dir, "checkpoint.safetensors")
    tensors, meta = read_checkpoint(path)
    assert meta["components"]["counter"] == {"seen": 4}
    # as if killed before its last update: the resumed counter continues from the saved count
    write_checkpoint(path, tensors, {**meta, "finished": False, "update": 3, "global_step": 1536})
    restored = Counter()
    resume(run_dir, quiet=True, callbacks=[restored])
    assert restored.seen == 5
