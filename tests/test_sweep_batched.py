"""``proxima sweep --batched``: each setting's seeds train as one batched run (``--num-seeds``), one trial, whose
seeds' directories are the sweep's runs; killed, it finishes on --resume as a sweep of solo runs does."""

import os
import shutil

import pytest

import proxima
from proxima.commands import main
from proxima.run.callbacks import Callback
from proxima.run.config import PPOArgs
from proxima.scale import executors
from tests.test_sweep import StopAt, _json, _metrics

# native CartPole, 4 updates of 4 envs x 32 steps
BUDGET = dict(env_id="CartPole-v1", num_envs=4, num_steps=32, total_timesteps=512, plot=False, report=False)
RATES = [1e-3, 2e-3]


def _sweep(out, **more):
    return proxima.sweep(**BUDGET, **more, grid={"learning_rate": RATES}, seeds=[3, 4], executor="local",
                         batched=True, output_dir=str(out))  # fmt: skip


def test_each_setting_trains_as_one_batched_run_whose_seeds_are_the_sweeps_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    results = _sweep(out)
    assert [(t["setting"], t["seed"], t["status"]) for t in results.trials] == [
        ("learning_rate=0.001", 3, "finished"),
        ("learning_rate=0.001", 4, "finished"),
        ("learning_rate=0.002", 3, "finished"),
        ("learning_rate=0.002", 4, "finished"),
    ]
    said = capsys.readouterr().out
    for rate in RATES:
        group = out / f"learning_rate={rate}"
        assert (
            _json(group / "seeds.json")["run"]["num_seeds"] == 2
            and (group / "checkpoint.safetensors").exists()
        )
        # the same runs as the batched run of that setting trained alone
        proxima.train(**BUDGET, learning_rate=rate, seed=3, num_seeds=2, quiet=True,
                      run_dir=str(tmp_path / f"alone{rate}"))  # fmt: skip
        for seed in (3, 4):
            run_dir = group / f"seed{seed}"
            assert _metrics(run_dir) == _metrics(tmp_path / f"alone{rate}" / f"seed{seed}")
            assert len(_metrics(run_dir)) == 4
            trial = next(t for t in results.trials if t["run_dir"] == str(run_dir))
            assert trial["final_return"] == _json(run_dir / "trial.json")["final_return"]
            assert (
                f"learning_rate={rate}/seed{seed}: finished, final return {trial['final_return']:.1f}" in said
            )
    # results.md gives each setting's seeds' final returns
    table = (out / "results.md").read_text()
    for s in results.settings:
        finals = ", ".join(f"{t['final_return']:.1f}" for t in results.trials if t["setting"] == s["setting"])
        assert (
            f"| {s['setting']} | 2/2 | {s['final_return_mean']:.1f} ± " in table and f"| {finals} |" in table
        )
    from tests.test_report import page_data

    page = page_data(out / "report.html")  # the seeds' runs, grouped by setting
    assert page["groups"] == [s["setting"] for s in results.settings]
    assert [r["run_dir"] for r in page["runs"]] == [t["run_dir"] for t in results.trials]
    assert (out / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    # and --resume of the finished sweep runs nothing again
    before = {p: os.stat(p).st_mtime_ns for p in out.glob("**/trial.json")}
    assert len(before) == 6  # each setting's and each seed's
    assert main(["sweep", "--resume", str(out)]) == 0  # local, as sweep.json says
    assert {p: os.stat(p).st_mtime_ns for p in out.glob("**/trial.json")} == before
    assert "finished, final return" not in capsys.readouterr().out


def test_a_killed_batched_sweep_finishes_on_resume(tmp_path, capsys):
    """One setting's batched run killed after its 2nd update's checkpoint resumes from it; the other's, killed
    before its first checkpoint, starts again: both as their uninterrupted runs."""
    out = tmp_path / "sweep"
    _sweep(out, checkpoint_every=1)
    plan = _json(out / "sweep.json")
    assert plan["version"] == 4 and [g["config"]["run"]["run_dir"] for g in plan["groups"]] == [
        "learning_rate=0.001",
        "learning_rate=0.002",
    ]
    whole = {seed_dir: _metrics(seed_dir) for seed_dir in out.glob("*/seed[0-9]")}
    assert len(whole) == 4
    for group, at in zip(plan["groups"], (3, 1), strict=True):
        config = group["config"]
        shutil.rmtree(out / config["run"]["run_dir"])
        config["run"]["run_dir"] = str(out / config["run"]["run_dir"])
        with pytest.raises(KeyboardInterrupt):
            proxima.train(PPOArgs.from_json(config), callbacks=[StopAt(at)])
    first, second = out / "learning_rate=0.001", out / "learning_rate=0.002"
    assert len(_metrics(first / "seed3")) == 2 and (first / "checkpoint.safetensors").exists()
    assert not (second / "checkpoint.safetensors").exists()
    assert not list(out.glob("*/**/trial.json"))
    capsys.readouterr()
    assert main(["sweep", "--resume", str(out)]) == 0
    assert capsys.readouterr().out.count("finished, final return") == 4
    assert {seed_dir: _metrics(seed_dir) for seed_dir in out.glob("*/seed[0-9]")} == whole
    assert [t["status"] for t in _json(out / "results.json")["trials"]] == ["finished"] * 4


class Signal(Callback):
    """A SIGTERM's interrupt through the run's Checkpointing after update ``at`` of seed ``seed``, as a Ray
    trial's StopWhenAsked gives it."""

    def __init__(self, seed: int, at: int):
        self.seed, self.at = seed, at

    def on_update_end(self, run, result):
        if run.args.run.seed == self.seed and run.updates_done == self.at:
            from proxima.run.callbacks import Checkpointing

            next(c for c in run.callbacks if isinstance(c, Checkpointing)).interrupt(15)


def test_a_stopped_batched_trial_leaves_no_verdict_and_resumes_from_its_checkpoint(tmp_path):
    """``run_trial``, as either executor calls it: stopped (SIGTERM), the batched run checkpoints and writes no
    trial.json; called again, it resumes and writes every seed's."""
    from proxima.base.errors import TrainingInterrupted
    from proxima.scale.sweeps import run_trial

    out = tmp_path / "sweep"
    _sweep(out)
    group = _json(out / "sweep.json")["groups"][0]["config"]
    run_dir = out / group["run"]["run_dir"]
    whole = _metrics(run_dir / "seed4")
    shutil.rmtree(run_dir)
    group["run"]["run_dir"] = str(run_dir)
    with pytest.raises(TrainingInterrupted):
        proxima.train(PPOArgs.from_json(group), callbacks=[Signal(seed=4, at=2)])
    assert not list(run_dir.glob("**/trial.json")) and len(_metrics(run_dir / "seed4")) == 2
    row = run_trial(group, node="here", stop=lambda: None)
    assert row["status"] == "finished" and row["node"] == "here"
    assert _metrics(run_dir / "seed4") == whole
    assert [_json(run_dir / f"seed{s}" / "trial.json")["status"] for s in (3, 4)] == ["finished"] * 2


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--batched", "--seeds", "1,3"], "--batched trains each setting's seeds S to S+N-1 as one run: give "
                                          "consecutive seeds in order, such as 1-2, not 1,3"),
        (["--seeds", "1-2", "--num-seeds", "2"], "for one batched run of them per setting give --batched, not "
                                                 "--num-seeds"),
        (["--batched", "--seeds", "1-2", "--rollout-workers", "2"], "which does not take --rollout-workers yet"),
    ],
)  # fmt: skip
def test_what_a_batched_sweep_cannot_do_is_refused_in_one_line(tmp_path, capsys, argv, said):
    out = tmp_path / "sweep"
    assert main(["sweep", "--env-id", "CartPole-v1", "--total-timesteps", "512", "--executor", "local",
                 "--output-dir", str(out), *argv]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.skipif(not executors.ray_available(), reason="the ray extra is not installed")
def test_a_batched_sweep_on_ray_trains_each_setting_as_one_trial(tmp_path):
    out = tmp_path / "sweep"
    results = proxima.sweep(**BUDGET, seeds=[1, 2], batched=True, executor="ray", output_dir=str(out))
    assert [(t["seed"], t["status"]) for t in results.trials] == [(1, "finished"), (2, "finished")]
    # one trial: the setting's batched run
    assert [p.name for p in out.glob("tune-1/*") if p.is_dir()] == ["base"]
    proxima.train(**BUDGET, seed=1, num_seeds=2, torch_threads=1, quiet=True, run_dir=str(tmp_path / "alone"))
    for seed in (1, 2):
        assert _metrics(out / "base" / f"seed{seed}") == _metrics(tmp_path / "alone" / f"seed{seed}")
