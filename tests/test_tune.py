"""proxima tune: search spaces read as the train flags read them; a sample's seeds in lockstep compute what
solo runs compute; Optuna with ASHA stops a sample; PBT copies a better sample's checkpoint and perturbs its
settings; the best settings come out as a preset; a killed search finishes on --resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file

import proxima
from proxima.base.errors import EnvError, TrainingInterrupted
from proxima.commands import main
from proxima.run.checkpoint import read_header
from proxima.run.config import resolve_args
from proxima.scale import executors
from proxima.scale.tuning import (
    _plan,
    _scheduler,
    domain,
    evaluation_points,
    make_searcher,
    parse_space_item,
    run_sample,
    sample_score,
    spec_of,
)
from tests.test_report import page_data
from tests.test_sweep import _json, _kill_session, _metrics

pytestmark = pytest.mark.xdist_group("ray")  # Ray tests share the machine's Ray processes (see test_sweep.py)
needs_ray = pytest.mark.skipif(not executors.ray_available(), reason="needs the ray extra")

# native CartPole: 4 envs x 64 steps an update
SMALL = ["--env-id", "CartPole-v1", "--env-backend", "native", "--num-envs", "4", "--num-steps", "64", "--no-plot",
         "--no-report"]  # fmt: skip


def test_space_items_are_read_as_the_train_flag_reads_them():
    def read(name, text):  # what the CLI passes: the train flag's own parser
        return {
            "learning_rate": float,
            "num_minibatches": int,
            "hidden_sizes": lambda t: tuple(map(int, t.split())),
        }[name](text)

    assert parse_space_item("learning_rate=loguniform:1e-5:1e-2", read) == (
        "learning_rate",
        ["loguniform", 1e-05, 0.01],
    )
    assert parse_space_item("num-minibatches=choice:4,8,16", read) == (
        "num_minibatches",
        ["choice", [4, 8, 16]],
    )
    assert parse_space_item("num_minibatches=randint:2:8", read) == ("num_minibatches", ["randint", 2, 8])
    assert parse_space_item("hidden_sizes=choice:64 64,32", read) == (
        "hidden_sizes",
        ["choice", [(64, 64), (32,)]],
    )
    # Tune's own distributions, in Python; randint's upper bound is Tune's exclusive one
    from ray import tune

    assert spec_of("ent_coef", tune.uniform(0.0, 0.05)) == ["uniform", 0.0, 0.05]
    assert spec_of("learning_rate", tune.loguniform(1e-5, 1e-2)) == ["loguniform", 1e-05, 0.01]
    assert spec_of("num_minibatches", tune.randint(4, 17)) == ["randint", 4, 16]
    assert spec_of("update_epochs", tune.choice([4, 10])) == ["choice", [4, 10]]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--space", "learning_rate=lognormal:1:2"], "--space expects NAME=uniform:LOW:HIGH"),
        (["--space", "num_minibatches=uniform:2:8"], "num_minibatches is a whole number; use randint"),
        (["--space", "learning_rate=loguniform:1e-2:1e-4"], "LOW must be below HIGH"),
        (["--space", "ent_coef=loguniform:0:1e-2"], "loguniform needs LOW > 0"),
        (["--space", "seed=choice:1,2"], "'seed' is not a setting a search can vary"),
        (["--space", "clip_coef=choice:0.1,-2"], "clip_coef must be positive"),
        (["--space", "num_minibatches=choice:4,8", "--scheduler", "pbt"], "pbt perturbs learning_rate"),
        (
            ["--space", "ent_coef=uniform:0:0.1", "--scheduler", "pbt", "--search", "optuna"],
            "give --search random",
        ),
        (["--space", "ent_coef=uniform:0:0.1", "--metric", "eval_return"], "give --eval-every"),
        (["--space", "ent_coef=uniform:0:0.1", "--search", "grid"], "unknown search 'grid'"),
        (["--space", "ent_coef=uniform:0:0.1", "--seeds", "0"], "seeds must be a positive integer"),
        (["--space", "ent_coef=uniform:0:0.1", "--run-dir", "x"], "give --output-dir instead"),
        ([], "give at least one setting to search"),
    ],
)
def test_bad_tune_input_is_one_line_exit_2_and_writes_nothing(argv, match, tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["tune", *SMALL, "--output-dir", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    "env",
    [
        dict(env_id="CartPole-v1", env_backend="native"),
        dict(env_id="proxima/ProbeCentralCritic-v0", algo="mappo"),
    ],
    ids=["cartpole", "many-agents"],
)
def test_a_samples_seeds_in_lockstep_compute_exactly_what_solo_runs_compute(tmp_path, env):
    base = resolve_args(
        **env, num_envs=4, num_steps=64, total_timesteps=2048, plot=False, report=False, seed=3
    )
    settings = {"learning_rate": 1e-3, "num_minibatches": 2}
    plan = _plan(base, {"learning_rate": ["choice", [1e-3]], "num_minibatches": ["choice", [2]]}, "random", 1,
                 "return", "max", 2, "fifo", None, 1, None)  # fmt: skip
    out = tmp_path / "tune"
    out.mkdir()
    assert run_sample(str(out), plan, "s001", settings)["status"] == "finished"
    for seed in (3, 4):
        solo = tmp_path / f"solo{seed}"
        proxima.train(base.replace(**settings, seed=seed, run_dir=str(solo), torch_threads=1, quiet=True))
        sample = out / f"s001__seed{seed}"
        assert _metrics(sample) == _metrics(solo)
        ours, theirs = load_file(sample / "model.safetensors"), load_file(solo / "model.safetensors")
        assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)
        row = _json(sample / "trial.json")
        assert row["status"] == "finished" and row["updates"] == 8
        returns = [json.loads(line)["return"] for line in open(solo / "episodes.jsonl")][-20:]
        assert row["score"] == pytest.approx(np.mean(returns))


def test_the_default_score_is_the_deterministic_evaluation_at_the_rungs_and_the_final_budget(tmp_path):
    """final_eval plays --eval-episodes deterministic episodes after the first update past each ASHA rung and
    after the last: at the end, what a solo run's --eval-every evaluation at its last update gives. It changes
    nothing in the training."""
    base = resolve_args(env_id="CartPole-v1", env_backend="native", num_envs=4, num_steps=64,
                        total_timesteps=2048, eval_episodes=8, plot=False, report=False, seed=3)  # fmt: skip
    plan = _plan(base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "final_eval", "max", 1, "asha", None,
                 1, None)  # fmt: skip
    assert evaluation_points(plan) == (256, 768)  # a grace period of 2048 // 8 steps, then 3x
    pbt = _plan(
        base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "final_eval", "max", 1, "pbt", 3, 1, None
    )
    assert evaluation_points(pbt) == (768, 1536)  # every 3 updates of 256 steps, before the end
    out = tmp_path / "tune"
    out.mkdir()
    assert run_sample(str(out), plan, "s001", {"learning_rate": 1e-3})["status"] == "finished"
    sample = _metrics(out / "s001__seed3")
    assert [m["global_step"] for m in sample if "tune_eval" in m] == [256, 768, 2048]
    solo = tmp_path / "solo"
    proxima.train(
        base.replace(learning_rate=1e-3, eval_every=8, run_dir=str(solo), torch_threads=1, quiet=True)
    )
    theirs = _metrics(solo)
    assert sample[-1]["tune_eval"] == theirs[-1]["eval_return"]
    assert _json(out / "s001__seed3" / "trial.json")["score"] == theirs[-1]["eval_return"]
    drop = ("tune_eval", "eval_return", "sps", "time_s")
    assert [{k: v for k, v in m.items() if k not in drop} for m in sample] == [
        {k: v for k, v in m.items() if k not in drop} for m in theirs
    ]


@needs_ray
def test_the_evaluation_points_are_where_tunes_asha_places_its_rungs():
    for total in (2048, 100_000, 1_000_000):
        base = resolve_args(env_id="CartPole-v1", num_envs=4, num_steps=64, total_timesteps=total)
        plan = _plan(base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "final_eval", "max", 1, "asha",
                     None, 1, None)  # fmt: skip
        asha = _scheduler(plan, {})
        rungs = sorted(milestone for milestone, _ in asha._brackets[0]._rungs)  # Tune keeps them private
        assert list(evaluation_points(plan)) == rungs, total


def test_a_samples_score_is_the_interquartile_mean_of_its_seeds():
    import scipy.stats

    assert sample_score([3.0, 1.0, 2.0]) == 2.0  # up to 3 seeds: the mean
    assert sample_score([1.0, 2.0, 3.0, 100.0]) == 2.5  # 1 and 100 cut
    scores = [5.0, -3.0, 8.0, 1.5, 9.0, 2.0, 7.0, 0.5, 4.0, 6.0]
    assert sample_score(scores) == pytest.approx(scipy.stats.trim_mean(scores, 0.25))


def test_a_resumed_samples_seeds_at_different_updates_each_train_to_their_end_as_solo_runs(tmp_path):
    """A search killed between its seeds' checkpoints leaves them at different updates: on resume, each trains
    from its own to its end (the one ahead ends a round early) and computes what its solo run computes."""
    base = resolve_args(env_id="CartPole-v1", env_backend="native", num_envs=4, num_steps=64,
                        total_timesteps=2048, plot=False, report=False, seed=3)  # fmt: skip
    plan = _plan(base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "return", "max", 2, "fifo", None, 1,
                 None)  # fmt: skip
    settings = {"learning_rate": 1e-3}

    def stopped_after(updates: int):  # a stop asked after each seed's update `updates`
        calls = iter(range(10**6))
        return lambda: signal.SIGTERM if next(calls) >= 2 * (updates - 1) else None

    out, behind = tmp_path / "tune", tmp_path / "behind"
    for directory, updates in ((out, 3), (behind, 1)):
        directory.mkdir()
        with pytest.raises(TrainingInterrupted):
            run_sample(str(directory), plan, "s001", settings, stop=stopped_after(updates))
    shutil.rmtree(out / "s001__seed3")  # seed 3 checkpointed after update 1, seed 4 after update 3
    shutil.copytree(behind / "s001__seed3", out / "s001__seed3")
    at = [read_header(str(out / f"s001__seed{seed}" / "checkpoint.safetensors"))["update"] for seed in (3, 4)]
    assert at == [1, 3]
    assert run_sample(str(out), plan, "s001", settings)["status"] == "finished"
    for seed in (3, 4):
        solo = tmp_path / f"solo{seed}"
        proxima.train(base.replace(**settings, seed=seed, run_dir=str(solo), torch_threads=1, quiet=True))
        sample = out / f"s001__seed{seed}"
        assert _metrics(sample) == _metrics(solo)
        ours, theirs = load_file(sample / "model.safetensors"), load_file(solo / "model.safetensors")
        assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)
        assert _json(sample / "trial.json")["updates"] == 8


def test_a_samples_seed_that_fails_in_its_callbacks_names_its_own_last_checkpoint(tmp_path):
    """An env error raised by a seed's callback (here its stop poll, after update 3) fails the sample with the
    line a solo run gives: where that seed's last checkpoint is and how to continue it."""
    base = resolve_args(env_id="CartPole-v1", env_backend="native", num_envs=4, num_steps=64,
                        total_timesteps=2048, checkpoint_every=2, plot=False, report=False, seed=3)  # fmt: skip
    plan = _plan(base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "return", "max", 2, "fifo", None, 1,
                 None)  # fmt: skip
    calls = iter(range(10**6))

    def stop():  # the seeds poll in turn: seed 3, seed 4, seed 3, ...; seed 4's call after its update 3 fails
        if next(calls) == 5:
            raise EnvError("the env crashed")

    out = tmp_path / "tune"
    out.mkdir()
    row = run_sample(str(out), plan, "s001", {"learning_rate": 1e-3}, stop=stop)
    seed_dir = out / "s001__seed4"
    assert row == {
        "status": "failed",
        "error": f"the env crashed in update 4; the last good checkpoint, from update 2, is "
        f"{seed_dir / 'checkpoint.safetensors'}; continue with: proxima train --resume {seed_dir}",
    }
    assert _json(seed_dir / "trial.json")["error"] == row["error"]


def _drawn(searcher, plan, count, offset=0):
    """Draw ``count`` learning rates from ``searcher``, each scored by its distance from 1e-3 in log10."""
    searcher.set_search_properties(None, None, {"learning_rate": domain(plan["space"]["learning_rate"])})
    rates = []
    for i in range(offset, offset + count):
        rate = searcher.suggest(f"t{i}")["learning_rate"]
        searcher.on_trial_complete(f"t{i}", {"score": -abs(np.log10(rate) + 3)})
        rates.append(rate)
    return rates


@needs_ray
def test_optuna_draws_near_the_settings_that_scored_well_and_is_told_those_of_a_resumed_search():
    base = resolve_args(env_id="CartPole-v1")
    plan = _plan(base, {"learning_rate": ["loguniform", 1e-5, 1e-1]}, "optuna", 30, "return", "max", 1, "fifo",
                 None, 1, None)  # fmt: skip

    def spread(rates):  # median distance from the best rate, in decades
        return float(np.median([abs(np.log10(r) + 3) for r in rates]))

    rates = _drawn(make_searcher(plan, []), plan, 30)
    # its first 10 draws are random (TPE's start-up); after them it draws near 1e-3
    assert spread(rates[-10:]) < 0.6 * spread(rates[:10])
    assert rates == _drawn(make_searcher(plan, []), plan, 30)  # seeded: the same draws again
    told = [({"learning_rate": r}, -abs(np.log10(r) + 3)) for r in rates[:10]]
    resumed = _drawn(make_searcher(plan, told), plan, 10, offset=10)
    assert spread(resumed) < 0.6 * spread(rates[:10])  # it went on from what it was told, not from scratch


@needs_ray
def test_a_searchs_results_and_proxima_stats_give_each_samples_statistics_over_its_seeds(tmp_path, capsys):
    """A search of two samples of four seeds, each trained by run_sample as a Tune trial trains it (without
    Ray, which takes longer to start than the search takes); ``proxima tune --resume`` finds nothing left to
    run and writes the results."""
    import scipy.stats

    from proxima.run.scores import with_interval

    base = resolve_args(env_id="CartPole-v1", env_backend="native", num_envs=4, num_steps=64,
                        total_timesteps=1024, plot=False, report=False, seed=1)  # fmt: skip
    plan = _plan(base, {"learning_rate": ["loguniform", 1e-4, 1e-2]}, "random", 2, "return", "max", 4, "fifo",
                 None, 1, None)  # fmt: skip
    out = tmp_path / "t"
    out.mkdir()
    for name, rate in (("s001", 1e-4), ("s002", 3e-3)):
        plan["samples"].append({"name": name, "settings": {"learning_rate": rate}})
        assert run_sample(str(out), plan, name, {"learning_rate": rate})["status"] == "finished"
    (out / "tune.json").write_text(json.dumps(plan))
    assert main(["tune", "--resume", str(out)]) == 0
    results = _json(out / "results.json")
    samples, found = results["samples"], results["statistics"]
    table = (out / "results.md").read_text()
    assert [g["setting"] for g in found["groups"]] == [s["name"] for s in samples]  # best first
    for sample, group in zip(samples, found["groups"], strict=True):
        # each seed's score, read from its files: the mean return of its last 20 episodes
        finals = [np.mean([json.loads(line)["return"] for line in open(out / run / "episodes.jsonl")][-20:])
                  for run in sample["runs"]]  # fmt: skip
        assert finals == pytest.approx(sample["scores"])  # the search's own score of each seed
        assert group["score"] == ["training return"] and group["runs"] == 4
        assert group["iqm"]["value"] == pytest.approx(scipy.stats.trim_mean(finals, 0.25))
        assert group["median"]["value"] == pytest.approx(np.median(finals))
        assert group["mean"]["value"] == pytest.approx(sample["score_mean"])
        assert group["optimality_gap"]["value"] == pytest.approx(475 - np.mean(np.minimum(finals, 475)))
        assert (
            f"| {sample['name']} | CartPole-v1 | 4 | 1,024 | training return | {with_interval(group['iqm'])} |"
            in table
        )
    (improvement,) = found["improvements"]
    assert improvement["setting"] == samples[1]["name"] and improvement["baseline"] == samples[0]["name"]
    x, y = np.array(samples[1]["scores"]), np.array(samples[0]["scores"])
    wins = (x[:, None] > y[None, :]).mean() + 0.5 * (x[:, None] == y[None, :]).mean()
    assert improvement["probability"]["value"] == pytest.approx(wins)
    # proxima stats on the tune directory: the same numbers, its settings named by what tells them apart
    capsys.readouterr()
    assert main(["stats", str(out), "--json", str(tmp_path / "stats.json")]) == 0
    again = {frozenset(os.path.basename(r["run_dir"]) for r in g["per_run"]): g for g in
             _json(tmp_path / "stats.json")["groups"]}  # fmt: skip
    for sample, group in zip(samples, found["groups"], strict=True):
        same = again[frozenset(sample["runs"])]
        assert same["setting"] == f"learning_rate={sample['settings']['learning_rate']:g}"
        assert same["iqm"] == group["iqm"] and same["optimality_gap"] == group["optimality_gap"]
    assert "performance_profile" in [c["key"] for c in page_data(out / "report.html")["charts"]]


@pytest.mark.slow
@needs_ray
def test_optuna_with_asha_stops_a_sample_and_the_best_settings_train_as_a_preset(tmp_path, capsys):
    out = tmp_path / "t"
    argv = ["tune", *SMALL, "--total-timesteps", "4096", "--space", "learning_rate=choice:1e-5,3e-3",
            "--space", "update_epochs=choice:2,4", "--search", "optuna", "--scheduler", "asha", "--num-samples", "5",
            "--seeds", "2", "--max-concurrent", "1", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    results = _json(out / "results.json")["samples"]
    assert len(results) == 5
    stopped = [s for s in results if s["status"] == "stopped"]
    assert stopped, results  # ASHA acted: a sample was stopped before its last update
    for sample in stopped:
        assert all(_json(out / run / "trial.json")["updates"] < 16 for run in sample["runs"])
    best = results[0]
    assert best["status"] == "finished" and best["settings"]["learning_rate"] == 3e-3
    assert best["score_mean"] == pytest.approx(
        np.mean([_json(out / r / "trial.json")["score"] for r in best["runs"]])
    )
    preset = _json(out / "best.json")
    assert preset["learning_rate"] == 3e-3 and preset["env_backend"] == "native" and "seed" not in preset
    assert "| 1 | " + best["name"] in (out / "results.md").read_text()
    assert (out / "report.html").exists()
    capsys.readouterr()
    run = tmp_path / "from-preset"
    assert (
        main(["train", "--config", str(out / "best.json"), "--total-timesteps", "512", "--run-dir", str(run)])
        == 0
    )
    config = _json(run / "config.json")
    assert config["algorithm"]["learning_rate"] == 3e-3
    assert config["algorithm"]["update_epochs"] == best["settings"]["update_epochs"]


@pytest.mark.slow
@needs_ray
def test_pbt_continues_a_sample_from_a_better_ones_checkpoint_with_perturbed_settings(tmp_path):
    out = tmp_path / "t"
    argv = ["tune", *SMALL, "--total-timesteps", "3072", "--space", "learning_rate=choice:1e-6,1e-5,3e-3",
            "--scheduler", "pbt", "--perturbation-interval", "3", "--num-samples", "2", "--metric", "return",
            "--output-dir", str(out)]  # fmt: skip
    # Training returns: the two samples draw the same rate, and their deterministic evaluations at each interval
    # (final_eval) tie exactly, so PBT would find no sample behind the other
    assert main(argv) == 0
    lines = []
    for run in sorted(os.listdir(out)):
        path = out / run / "perturbations.jsonl"
        if path.exists():
            lines += [(run, json.loads(line)) for line in open(path)]
    assert lines, "PBT never exploited"
    for run, line in lines:
        assert line["from"] != run.split("__")[0]
    # From a run's last exploit on, it trained with the perturbed rate. (An earlier exploit's updates are no
    # longer in its logs: a later one replaced them with the donor's.)
    for run, line in dict(lines).items():
        after = [m for m in _metrics(out / run) if m["global_step"] > line["global_step"]]
        assert after and after[0]["learning_rate"] == pytest.approx(line["settings"]["learning_rate"])
    assert "PBT steps" in (out / "results.md").read_text()
    run, line = lines[0]  # the page's data lists it (its table is drawn from them)
    assert (
        f'"perturbations":[{{"update":{line["update"]},"global_step":{line["global_step"]},"from":"{line["from"]}"'
        in (out / "report.html").read_text()
    )


@pytest.mark.slow
@needs_ray
def test_a_killed_search_finishes_on_resume_without_rerunning_what_ended(tmp_path, capsys):
    out = tmp_path / "t"
    argv = ["tune", *SMALL, "--total-timesteps", "1024", "--space", "learning_rate=loguniform:1e-4:1e-2",
            "--num-samples", "2", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    # as if killed: the second sample's row never written, and one sample never drawn
    plan = _json(out / "tune.json")
    first = plan["samples"][0]["name"]
    kept = (out / f"{first}__seed1" / "metrics.jsonl").stat().st_mtime_ns
    os.remove(out / f"{plan['samples'][1]['name']}__seed1" / "trial.json")
    plan["num_samples"] = 3
    (out / "tune.json").write_text(json.dumps(plan))
    capsys.readouterr()
    assert main(["tune", "--resume", str(out), "--space", "x=1"]) == 2  # only --address goes with --resume
    assert main(["tune", "--resume", str(out)]) == 0
    samples = _json(out / "results.json")["samples"]
    assert sorted(s["name"] for s in samples) == ["s001", "s002", "s003"]
    assert [g["setting"] for g in _json(out / "results.json")["statistics"]["groups"]] == [
        s["name"] for s in samples
    ]
    assert all(s["status"] == "finished" for s in samples)
    assert (out / f"{first}__seed1" / "metrics.jsonl").stat().st_mtime_ns == kept


@pytest.mark.slow
@pytest.mark.serial
@needs_ray
def test_sigterm_stops_a_search_with_every_seed_checkpointed_and_resume_finishes_it(tmp_path):
    from proxima.base.files import read_checkpoint

    out = tmp_path / "t"
    # one sample of 2 seeds, 64 updates each, checkpoints only at the end or on a signal
    argv = ["tune", *SMALL, "--total-timesteps", "16384", "--checkpoint-every", "0", "--space",
            "learning_rate=choice:1e-3", "--num-samples", "1", "--seeds", "2", "--output-dir", str(out)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", *argv], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    runs = [out / "s001__seed1", out / "s001__seed2"]
    deadline = time.monotonic() + 240
    try:
        while not all((run / "metrics.jsonl").exists() for run in runs):
            assert proc.poll() is None and time.monotonic() < deadline, (
                "the search ended before it was stopped"
            )
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        _kill_session(proc.pid)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].endswith(f"finish the search with: proxima tune --resume {out}")
    updates = []
    for run in runs:  # each seed stopped after its update, logged and checkpointed, in lockstep
        meta = read_checkpoint(str(run / "checkpoint.safetensors"))[1]
        assert not meta["finished"] and 1 <= meta["update"] == len(_metrics(run)) < 64
        assert not (run / "trial.json").exists()
        updates.append(meta["update"])
    assert abs(updates[0] - updates[1]) <= 1
    assert main(["tune", "--resume", str(out)]) == 0
    for run in runs:
        assert _json(run / "trial.json")["status"] == "finished"
        assert [r["global_step"] for r in _metrics(run)] == [256 * i for i in range(1, 65)]
