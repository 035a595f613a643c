"""``proxima train --run-dir D --resume-if-exists``: one command line that a scheduler may run again and again
(a SLURM array task requeued, a Kubernetes Job's pod restarted) starts the run, resumes it exactly, or does
nothing once it finished."""

import json
import os
import signal

import pytest
from safetensors.torch import load_file

import proxima
import proxima.scale.trainer
from proxima.base.files import CHECKPOINT, read_checkpoint, write_checkpoint
from proxima.commands import main
from proxima.run.callbacks import Callback

# 8 updates of 4 native CartPole envs x 128 steps; one thread, as in test_resume.py, so that runs started at
# different times compute alike
RUN = [
    "--total-timesteps", "4096", "--num-envs", "4", "--num-steps", "128", "--seed", "3", "--torch-threads", "1",
    "--no-cuda", "--no-plot", "--no-report", "--quiet",
]  # fmt: skip
TIMES = {"time_s", "sps"}


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


class _SigtermAt(Callback):
    """What a scheduler does at the end of a job's time: SIGTERM, here after update ``at``."""

    def __init__(self, at: int):
        self.at = at

    def on_update_end(self, run, result) -> None:
        if run.updates_done == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


def _one_line_exit_2(argv, capsys, match: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("proxima train: error:"), err
    assert match in err[0], err[0]


def test_the_same_command_starts_resumes_exactly_and_then_does_nothing(tmp_path, monkeypatch, capsys):
    uninterrupted = str(tmp_path / "uninterrupted")
    assert main(["train", "--run-dir", uninterrupted, *RUN]) == 0
    run_dir = str(tmp_path / "requeued")
    command = ["train", "--run-dir", run_dir, "--resume-if-exists", *RUN]

    # the first start: the scheduler stops it with SIGTERM after update 3 (exit 143, checkpoint saved)
    made = proxima.scale.trainer.default_callbacks
    with monkeypatch.context() as m:
        m.setattr(
            proxima.scale.trainer, "default_callbacks", lambda run, user=(): made(run, [*user, _SigtermAt(3)])
        )
        assert main(command) == 143
    _, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    assert meta["update"] == 3 and not meta["finished"]
    capsys.readouterr()

    # the second start, the same command: it resumes from update 3 and ends as if never interrupted
    assert main(command) == 0
    weights, expected = (load_file(os.path.join(d, "model.safetensors")) for d in (run_dir, uninterrupted))
    assert weights.keys() == expected.keys() and all((weights[k] == expected[k]).all() for k in weights)
    assert _metrics(run_dir) == _metrics(uninterrupted)
    sessions = json.load(open(os.path.join(run_dir, "machine.json")))["sessions"]
    assert [s["from_step"] for s in sessions] == [0, 3 * 512]

    # the third start, after the run finished: exit 0 and nothing trained or written
    before = {name: open(os.path.join(run_dir, name), "rb").read() for name in (CHECKPOINT, "metrics.jsonl")}
    assert main([*command, "--no-quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        f"{run_dir}: the run already finished (4096 steps); nothing to train (train it further with: proxima "
        f"train --resume {run_dir} --total-timesteps N)"
    ]
    assert before == {name: open(os.path.join(run_dir, name), "rb").read() for name in before}
    # in Python too, where the finished run's agent is returned
    agent = proxima.train(run_dir=run_dir, resume_if_exists=True, total_timesteps=4096, quiet=True)
    assert all((agent.model.state_dict()[k] == weights[k]).all() for k in weights)


@pytest.fixture
def unfinished_run(tmp_path):
    """A run whose last checkpoint is marked unfinished, as if it had been stopped at its very end."""
    run_dir = str(tmp_path / "run")
    assert main(["train", "--run-dir", run_dir, *RUN, "--total-timesteps", "1024"]) == 0
    tensors, meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))
    write_checkpoint(os.path.join(run_dir, CHECKPOINT), tensors, {**meta, "finished": False})
    return run_dir


def test_given_settings_that_differ_from_the_runs_are_named_and_ignored(unfinished_run, capsys):
    config = open(os.path.join(unfinished_run, "config.json")).read()
    argv = ["train", "--run-dir", unfinished_run, "--resume-if-exists", *RUN, "--total-timesteps", "1024"]
    assert main([*argv, "--learning-rate", "0.01", "--no-quiet"]) == 0
    out = capsys.readouterr().out
    assert (
        f"{unfinished_run} holds a run: it resumes with the settings of its config.json, and these given ones, "
        "which differ, are ignored: learning_rate=0.01 (the run's: 0.00025)"
    ) in out
    assert f"resuming {unfinished_run} after update 2 of 2" in out
    assert open(os.path.join(unfinished_run, "config.json")).read() == config
    assert read_checkpoint(os.path.join(unfinished_run, CHECKPOINT))[1]["finished"]


def test_a_run_stopped_before_its_first_checkpoint_starts_again_and_other_files_stay(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir), "--resume-if-exists", *RUN, "--total-timesteps", "1024"]
    assert main(argv) == 0
    os.remove(run_dir / CHECKPOINT)  # as if it had been killed before its first checkpoint
    (run_dir / "metrics.jsonl").write_text('{"global_step": 99999}\n')
    (run_dir / "slurm-1234.out").write_text("the scheduler's log\n")
    assert main([*argv, "--no-quiet"]) == 0
    assert (
        f"{run_dir}: the run stopped before its first checkpoint; starting it again"
        in capsys.readouterr().out
    )
    assert [m["global_step"] for m in _metrics(run_dir)] == [512, 1024]
    assert (run_dir / "slurm-1234.out").read_text() == "the scheduler's log\n"
    assert read_checkpoint(str(run_dir / CHECKPOINT))[1]["finished"]


def test_a_fresh_directory_holding_only_other_files_gets_the_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "slurm-1234.out").write_text("")  # SLURM makes its --output file before the job starts
    assert (
        main(["train", "--run-dir", str(run_dir), "--resume-if-exists", *RUN, "--total-timesteps", "512"])
        == 0
    )
    assert read_checkpoint(str(run_dir / CHECKPOINT))[1]["finished"]


def test_requeue_refuses_what_it_cannot_know_in_one_line(tmp_path, capsys):
    _one_line_exit_2(
        ["train", "--resume-if-exists", *RUN], capsys, "needs the run's directory: give --run-dir"
    )
    run_dir = tmp_path / "not-a-run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("mine\n")
    _one_line_exit_2(
        ["train", "--run-dir", str(run_dir), "--resume-if-exists", *RUN],
        capsys,
        "holds metrics.jsonl but no config.json",
    )
    assert (run_dir / "metrics.jsonl").read_text() == "mine\n"  # left alone
    _one_line_exit_2(
        ["train", "--resume", str(run_dir), "--resume-if-exists"], capsys, "not --resume-if-exists"
    )
    with pytest.raises(proxima.UserError, match="not both"):
        proxima.train(resume=str(run_dir), resume_if_exists=True)
