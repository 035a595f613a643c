"""The checkpoint schema: versioned, one component per part of the run; a checkpoint of another version is refused."""

import json
import os

import pytest

from proxima.base.files import read_checkpoint, write_checkpoint
from proxima.commands import main
from proxima.run import agent, checkpoint
from proxima.run.callbacks import Callback
from proxima.scale.trainer import resume, train

TIMES = {"time_s", "sps"}


def _metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


@pytest.fixture
def unfinished(tmp_path):
    run_dir = str(tmp_path / "run")
    train(env_id="CartPole-v1", total_timesteps=1024, plot=False, quiet=True, run_dir=run_dir)
    path = os.path.join(run_dir, "checkpoint.safetensors")
    tensors, meta = read_checkpoint(path)
    write_checkpoint(path, tensors, {**meta, "finished": False})
    return run_dir


def test_an_older_checkpoint_is_refused_in_one_line(unfinished, capsys):
    """Before 1.0 a checkpoint of another version is refused in one line, not converted, and the run directory
    is left as it was."""
    path = os.path.join(unfinished, "checkpoint.safetensors")
    tensors, meta = read_checkpoint(path)
    write_checkpoint(path, tensors, {**meta, "version": checkpoint.VERSION - 1})
    before = {name: os.path.getmtime(os.path.join(unfinished, name)) for name in os.listdir(unfinished)}
    assert main(["train", "--resume", unfinished, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    old = checkpoint.VERSION - 1
    assert f"checkpoint version {old}; this proxima reads version {checkpoint.VERSION} only" in err, err
    assert "older proxima" in err and "\n" not in err
    assert {
        name: os.path.getmtime(os.path.join(unfinished, name)) for name in os.listdir(unfinished)
    } == before


@pytest.mark.parametrize("version", [agent.VERSION - 1, agent.VERSION + 1])
def test_an_agent_of_another_format_version_is_refused_in_one_line(unfinished, capsys, version):
    """agent.json's format changes with what a NetworkSpec holds; one of another version is not converted."""
    path = os.path.join(unfinished, "agent.json")
    with open(path) as f:
        meta = json.load(f)
    with open(path, "w") as f:
        json.dump({**meta, "version": version}, f)
    assert main(["eval", unfinished, "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"has agent format version {version}; this proxima reads version {agent.VERSION} only" in err, err
    assert "\n" not in err


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
