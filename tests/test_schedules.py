"""Settings that change during training (schedules, run.set), continuing a run to more steps, starting from
another run's agent, and SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from proxima import resume, train
from proxima.algo.schedules import Schedules
from proxima.base.errors import UserError
from proxima.base.files import read_checkpoint
from proxima.commands import main
from proxima.run import checkpoint
from proxima.run.callbacks import Callback

# 8 updates of 4 native CartPole envs x 128 steps
SMALL = dict(
    env_id="CartPole-v1", num_envs=4, num_steps=128, total_timesteps=4096, seed=3, torch_threads=1,
    quiet=True, plot=False, report=False,
)  # fmt: skip
TIMES = {"time_s", "sps"}


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _line(start, end, u, n):
    """The closed form the schedules use: start at update 0, end at update n."""
    f = u / n
    return (1.0 - f) * start + f * end


# --- the lines themselves ------------------------------------------------------------------------------


def test_a_line_starts_and_ends_exactly_and_set_starts_a_new_one_towards_the_same_end():
    s = Schedules(10, {"ent_coef": [0.1, 0.0, 0]})
    assert s.value("ent_coef", 0) == 0.1 and s.value("ent_coef", 10) == 0.0
    assert s.value("ent_coef", 4) == pytest.approx(0.06)
    s.set(5, {"ent_coef": 0.5, "vf_coef": 2.0})
    assert s.value("ent_coef", 5) == 0.5 and s.value("ent_coef", 10) == 0.0
    assert s.value("ent_coef", 8) == pytest.approx(0.2)  # 0.5 -> 0 over updates 5..10
    assert s.value("vf_coef", 9) == 2.0  # no schedule: the value set stays
    s.set(7, {"vf_coef": 3.0, "target_kl": None})
    assert s.value("vf_coef", 10) == 3.0 and s.value("target_kl", 8) is None
    s.num_updates = 15  # a run continued to more updates: each line now ends there
    assert s.value("ent_coef", 10) == pytest.approx(0.5 * 5 / 10) and s.value("ent_coef", 15) == 0.0


@pytest.mark.parametrize(
    "values, words",
    [
        ({"gamma": 0.9}, "run.set cannot change 'gamma'; accepted: learning_rate, ent_coef"),
        ({"ent_coef": -1}, "ent_coef must be a non-negative number"),
        ({"clip_coef": 0}, "clip_coef must be a positive number"),
        ({"learning_rate": "1e-3"}, "learning_rate must be a non-negative number"),
        ({"target_kl": 0}, "target_kl must be a positive number or None"),
    ],
)
def test_set_refuses_what_it_cannot_change_in_one_line(values, words):
    s = Schedules(10)
    with pytest.raises(UserError, match=words) as e:
        s.set(0, values)
    assert "\n" not in str(e.value) and s.lines == {}


def test_the_end_values_are_checked_in_one_line():
    with pytest.raises(UserError, match="ent_coef_end must be non-negative when given, got -0.1"):
        train(**SMALL, ent_coef_end=-0.1)


# --- in a run --------------------------------------------------------------------------------------------


def test_schedules_go_linearly_to_their_end_and_are_logged_each_update(tmp_path):
    run_dir = str(tmp_path / "run")
    train(**SMALL, run_dir=run_dir, learning_rate=1e-3, learning_rate_end=1e-4, ent_coef=0.02,
          ent_coef_end=0.0, clip_coef_end=0.1, anneal_lr=False)  # fmt: skip
    records = _metrics(run_dir)
    assert len(records) == 8
    for u, r in enumerate(records):
        assert r["learning_rate"] == pytest.approx(_line(1e-3, 1e-4, u, 8), rel=1e-12)
        assert r["ent_coef"] == pytest.approx(_line(0.02, 0.0, u, 8), rel=1e-12)
        assert r["clip_coef"] == pytest.approx(_line(0.2, 0.1, u, 8), rel=1e-12)
        assert "vf_coef" not in r and "target_kl" not in r  # not changing: not logged
    assert records[0]["learning_rate"] == 1e-3 and records[0]["clip_coef"] == 0.2


def test_a_run_without_schedules_logs_what_it_did_before(tmp_path):
    """benchmarks/compare_commits.py compares whole records: a run that schedules nothing but --anneal-lr's
    learning rate (logged before) must add no key."""
    train(**SMALL, run_dir=str(tmp_path / "run"))
    keys = set(_metrics(str(tmp_path / "run"))[0])
    assert not keys & {"ent_coef", "clip_coef", "vf_coef", "max_grad_norm", "target_kl"}


class SetAt(Callback):
    """run.set(**values) at the end of update ``at``; keeps the parameters as they were then."""

    def __init__(self, at: int, **values):
        self.at, self.values, self.params = at, values, None

    def on_update_end(self, run, result):
        if run.updates_done == self.at:
            run.set(**self.values)
            self.params = {k: v.detach().clone() for k, v in run.model.named_parameters()}


@pytest.mark.parametrize("value_learning_rate", [None, 1e-3])
def test_run_set_takes_effect_from_the_next_update(tmp_path, value_learning_rate):
    """A learning rate of 0 set after update 3 leaves every parameter as it was then (the critic's too: its
    own rate keeps its ratio to learning_rate); it is logged from update 4 on and kept in the checkpoint.
    (Without --norm-value, which rescales the critic's last layer as its statistics move.)"""
    run_dir = str(tmp_path / "run")
    setter = SetAt(3, learning_rate=0.0, ent_coef=0.5)
    agent = train(**SMALL, run_dir=run_dir, value_learning_rate=value_learning_rate, norm_value=False,
                  callbacks=[setter])  # fmt: skip
    for name, param in agent.model.named_parameters():
        assert torch.equal(param, setter.params[name]), name
    records = _metrics(run_dir)
    assert records[2]["learning_rate"] > 0 and "ent_coef" not in records[2]
    assert [r["learning_rate"] for r in records[3:]] == [0.0] * 5
    assert [r["ent_coef"] for r in records[3:]] == [0.5] * 5
    meta, _ = checkpoint.read(os.path.join(run_dir, "checkpoint.safetensors"))
    assert meta["components"]["settings"]["lines"]["ent_coef"] == [0.5, None, 3]


class Assign(Callback):
    def __init__(self, how):
        self.how = how

    def on_update_end(self, run, result):
        if run.updates_done == 2:
            self.how(run)


@pytest.mark.parametrize(
    "how, words",
    [
        (lambda run: setattr(run.args.algorithm, "ent_coef", 0.05), r"AlgoSettings.ent_coef cannot be assigned: .*run.set\(ent_coef=...\)"),
        (lambda run: setattr(run.args.algorithm, "gamma", 0.9), r"AlgoSettings.gamma cannot be assigned: .*args.replace\(gamma=...\)"),
        (lambda run: setattr(run.args, "network", None), r"PPOArgs.network cannot be assigned: .*dataclasses.replace\(args, network=...\)"),
        (lambda run: run.optimizer.param_groups[0].update(lr=1.0), r"outside run.set.*run.set\(learning_rate=...\)"),
    ],
)  # fmt: skip
def test_what_a_callback_can_reach_takes_effect_or_refuses(tmp_path, how, words):
    with pytest.raises(UserError, match=words) as e:
        train(**SMALL, run_dir=str(tmp_path / "run"), callbacks=[Assign(how)])
    assert "\n" not in str(e.value)


class InterruptAt(Callback):
    """Ctrl-C after update ``at``, as a user would press it (the Checkpointing callback catches it)."""

    def __init__(self, at: int):
        self.at = at

    def on_update_end(self, run, result):
        if run.updates_done == self.at:
            os.kill(os.getpid(), signal.SIGINT)


def test_a_scheduled_run_interrupted_and_resumed_is_the_uninterrupted_run(tmp_path):
    settings = dict(SMALL, ent_coef_end=0.0, clip_coef_end=0.1, learning_rate_end=1e-5, checkpoint_every=0)
    whole = str(tmp_path / "whole")
    train(**settings, run_dir=whole, callbacks=[SetAt(2, vf_coef=0.25, learning_rate=5e-4)])
    cut = str(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        train(**settings, run_dir=cut, callbacks=[SetAt(2, vf_coef=0.25, learning_rate=5e-4), InterruptAt(5)])
    assert read_checkpoint(os.path.join(cut, "checkpoint.safetensors"))[1]["update"] == 5
    resume(cut, quiet=True, callbacks=[SetAt(2, vf_coef=0.25, learning_rate=5e-4)])
    assert _weights_equal(load_file(f"{whole}/model.safetensors"), load_file(f"{cut}/model.safetensors"))
    assert _metrics(whole) == _metrics(cut)
    assert [r["vf_coef"] for r in _metrics(cut)[2:]] == [0.25] * 6


# --- continue and fine-tune -------------------------------------------------------------------------------


def test_resume_with_total_timesteps_continues_a_finished_run_and_stretches_the_schedule(tmp_path):
    """The rule: every schedule then ends at the new last update, so from the resume point on each value is
    the one a run started with the new total would have: --anneal-lr's rate at update u of 16 is lr(1 - u/16)."""
    run_dir = str(tmp_path / "run")
    train(**{**SMALL, "total_timesteps": 2048}, run_dir=run_dir, ent_coef_end=0.0)  # 4 updates
    with pytest.raises(UserError, match=r"already finished \(update 4\); .*--total-timesteps N"):
        resume(run_dir, quiet=True)
    with pytest.raises(UserError, match="total_timesteps 1024 is below the 2048 steps"):
        resume(run_dir, quiet=True, total_timesteps=1024)
    assert main(["train", "--resume", run_dir, "--total-timesteps", "8192", "--quiet"]) == 0
    records = _metrics(run_dir)
    assert [r["global_step"] for r in records] == [512 * (u + 1) for u in range(16)]
    for u, r in enumerate(records):
        n = 4 if u < 4 else 16
        assert r["learning_rate"] == pytest.approx(_line(2.5e-4, 0.0, u, n), rel=1e-12), u
        assert r["ent_coef"] == pytest.approx(_line(0.01, 0.0, u, n), rel=1e-12), u
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["algorithm"]["total_timesteps"] == 8192
    _, meta = read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))
    assert meta["finished"] and meta["update"] == 16


def test_only_quiet_total_timesteps_and_torch_threads_go_with_resume(tmp_path):
    with pytest.raises(
        UserError,
        match="only --quiet, --total-timesteps, --torch-threads, --trust-code and the run.s own --env-id, --env-factory, "
        "--encoder, --actor-critic, --algo and functions .* may be given, not --seed",
    ):
        from proxima.commands.train import run as cmd_train

        cmd_train(["--resume", str(tmp_path), "--seed", "2"])
    with pytest.raises(
        UserError, match="takes only quiet, total_timesteps, torch_threads and trust_code.*not seed"
    ):
        train(resume=str(tmp_path), seed=2)


def test_resume_goes_on_with_another_thread_count_when_given_one_and_says_so(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    train(**{**SMALL, "total_timesteps": 1024}, run_dir=run_dir)  # 1 thread
    capsys.readouterr()
    assert main(["train", "--resume", run_dir, "--total-timesteps", "2048", "--torch-threads", "2"]) == 0
    assert "the run trained with 1 torch thread(s) and goes on with 2" in capsys.readouterr().out
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["run"]["torch_threads"] == 2  # a later resume keeps the new count
    assert read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))[1]["torch_threads"] == 2
    assert main(["train", "--resume", run_dir, "--total-timesteps", "3072"]) == 0
    assert "torch thread(s)" not in capsys.readouterr().out
    assert read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))[1]["torch_threads"] == 2
    assert [r["global_step"] for r in _metrics(run_dir)] == [512 * (u + 1) for u in range(6)]
    with pytest.raises(
        UserError, match=r"torch_threads must be 0 \(automatic\) or a number of threads up to 1024, got -1"
    ):
        resume(run_dir, total_timesteps=4096, torch_threads=-1)
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["run"]["torch_threads"] == 2 and len(_metrics(run_dir)) == 6  # nothing written


def test_init_from_starts_from_the_agents_weights_and_statistics_with_a_fresh_optimizer(tmp_path):
    source = str(tmp_path / "source")
    train(**SMALL, run_dir=source, norm_obs=True)
    seen = {}

    class AtStart(Callback):
        def on_train_start(self, run):
            seen["state"] = {k: v.clone() for k, v in run.model.state_dict().items()}
            seen["optimizer"], seen["update"] = dict(run.optimizer.state), run.updates_done

    tuned = str(tmp_path / "tuned")
    train(**{**SMALL, "total_timesteps": 1024}, run_dir=tuned, norm_obs=True, init_from=source,
          callbacks=[AtStart()])  # fmt: skip
    saved = load_file(os.path.join(source, "model.safetensors"))
    assert _weights_equal(seen["state"], saved)
    assert saved["normalization.obs_rms.count"] > 4096  # the statistics came along
    assert seen["optimizer"] == {} and seen["update"] == 0
    with open(os.path.join(tuned, "config.json")) as f:
        assert json.load(f)["run"]["init_from"] == source
    assert len(_metrics(tuned)) == 2


@pytest.mark.parametrize(
    "change, words",
    [
        ({"hidden_sizes": (32, 32)}, "its agent's network has hidden_sizes 64x64, this run's 32x32"),
        ({"norm_obs": False}, "its agent's network has norm_obs True, this run's False"),
        ({"env_id": "Acrobot-v1"}, "its agent's observation space is Box"),
    ],
)
def test_init_from_an_agent_that_does_not_fit_is_refused_in_one_line(tmp_path, change, words):
    source = str(tmp_path / "source")
    train(**{**SMALL, "total_timesteps": 512}, run_dir=source, norm_obs=True)
    target = str(tmp_path / "target")
    with pytest.raises(UserError, match=words) as e:
        train(
            **{**SMALL, "total_timesteps": 512, "norm_obs": True, **change}, run_dir=target, init_from=source
        )
    assert "\n" not in str(e.value) and not os.path.exists(target)


# --- SIGTERM ------------------------------------------------------------------------------------------------


def test_sigterm_saves_a_checkpoint_says_how_to_resume_and_exits_143(tmp_path):
    run_dir = str(tmp_path / "run")
    flags = ["--total-timesteps", "8192", "--num-envs", "4", "--num-steps", "128", "--checkpoint-every", "0",
             "--torch-threads", "1", "--quiet", "--no-plot", "--no-report", "--no-cuda"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxima.commands", "train", "--run-dir", run_dir, *flags], stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    metrics, deadline = os.path.join(run_dir, "metrics.jsonl"), time.monotonic() + 120
    while not (os.path.exists(metrics) and sum(1 for _ in open(metrics)) >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be stopped"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "stopped by SIGTERM after update" in last and f"proxima train --resume {run_dir}" in last
    _, meta = read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))
    assert 1 <= meta["update"] < 16 and not meta["finished"]
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    assert len(_metrics(run_dir)) == 16
