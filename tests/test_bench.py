"""``proxima bench``: the page's numbers against those recomputed from the runs' own files, a rerun that trains and
scores nothing again, bad input in one line with nothing written, and the shipped suites and published numbers."""

import json
import os
import re

import numpy as np
import pytest
import scipy.stats

from proxima.base.errors import UserError
from proxima.commands import main
from proxima.run.config import read_preset
from proxima.run.scores import reference_scores, with_interval
from proxima.scale import bench

TINY = ["--total-timesteps", "4096", "--episodes", "8"]  # two updates of cartpole-fast's 64 x 32 steps


def _files(root):
    return {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
        for d, _, names in os.walk(root)
        for f in names
        if os.path.join(d, f)
        not in {os.path.join(root, n) for n in (bench.BENCH_JSON, bench.BENCH_MD, "report.html")}
    }  # the bench's own pages are written again


def _one_line(capsys):
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_the_page_holds_the_statistics_of_the_seeds_scores_and_a_rerun_trains_and_scores_nothing(
    tmp_path, capsys
):
    out = str(tmp_path / "bench")
    argv = ["bench", "classic", "--tasks", "CartPole-v1", "--seeds", "4", *TINY, "--output-dir", out]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "CartPole-v1: training 4 seeds as one batched run" in said
    record = json.load(open(os.path.join(out, "bench.json")))
    (task,) = record["results"]["tasks"]
    assert [s["run_dir"] for s in task["seeds"]] == [f"CartPole-v1/seed{s}" for s in range(1, 5)]
    # each seed's score, from its own eval.json: 8 deterministic episodes of the final agent (no evaluation
    # during two updates, so no best agent)
    scores = []
    for s in task["seeds"]:
        evaluation = json.load(open(os.path.join(out, s["run_dir"], "eval.json")))
        assert (
            evaluation["deterministic"] is True
            and evaluation["episodes"] == 8
            and evaluation["agent"] == "final"
        )
        assert len(evaluation["returns"]) == 8
        scores.append(np.mean(evaluation["returns"]))
        assert s["score"] == pytest.approx(scores[-1]) and s["steps"] == 4096
    scores = np.array(scores)
    stats = task["statistics"]
    assert stats["iqm"]["value"] == pytest.approx(
        scipy.stats.trim_mean(scores, 0.25)
    )  # 4 runs: 1 cut each end
    assert stats["iqm"]["value"] == pytest.approx(np.mean(np.sort(scores)[1:3]))
    assert stats["median"]["value"] == pytest.approx(np.median(scores))
    assert stats["mean"]["value"] == pytest.approx(np.mean(scores))
    assert stats["optimality_gap"]["value"] == pytest.approx(475.0 - np.minimum(scores, 475.0).mean())
    # the interval: SciPy's percentile bootstrap of the 4 scores (one task: stratified is plain), seeded 0
    ci = scipy.stats.bootstrap(
        (scores,),
        lambda x, axis: scipy.stats.trim_mean(x, 0.25, axis=axis),
        n_resamples=9999,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert (stats["iqm"]["low"], stats["iqm"]["high"]) == pytest.approx((ci.low, ci.high))
    page = open(os.path.join(out, "bench.md")).read()
    row = next(line for line in page.splitlines() if line.startswith("| CartPole-v1 | `cartpole-fast`"))
    assert with_interval(stats["iqm"]) in row
    assert "490.04 ± 6.12 (3 runs, 500,000 steps)" in row  # CleanRL's, as published
    assert "500.000 ± 0.000 (1 run, 100,000 steps)" in row  # the RL Zoo's
    assert (
        record["command"] in page and record["results"]["aggregate"] is None
    )  # one task: nothing over tasks

    numbers = tmp_path / "stats.json"  # proxima stats on the bench directory: the same numbers
    assert main(["stats", out, "--json", str(numbers)]) == 0
    (group,) = json.loads(numbers.read_text())["groups"]
    assert group["runs"] == 4 and group["iqm"] == stats["iqm"]
    capsys.readouterr()

    before = _files(out)
    assert main(argv) == 0
    assert "training" not in capsys.readouterr().out
    assert _files(out) == before  # no run trained, resumed or scored again

    assert main([*argv[:5], "3", *argv[6:]]) == 2  # --seeds 3 into a bench of 4
    assert "holds another bench (proxima bench classic --seeds 4 --tasks CartPole-v1" in _one_line(capsys)
    assert _files(out) == before


def test_seeds_that_a_batched_run_cannot_train_run_alone_and_a_rerun_scores_only_what_is_missing(
    tmp_path, capsys, monkeypatch
):
    def unbatchable(args, env):
        raise UserError("not batched")

    monkeypatch.setattr(bench, "check_seeds", unbatchable)
    out = str(tmp_path / "bench")
    argv = ["bench", "classic", "--tasks", "CartPole-v1", "--seeds", "2", *TINY, "--output-dir", out]
    assert main(argv) == 0
    assert "training 2 seeds each a run of its own" in capsys.readouterr().out
    for seed in (1, 2):  # ordinary runs, one per seed
        config = json.load(open(os.path.join(out, "CartPole-v1", f"seed{seed}", "config.json")))
        assert (config["run"]["seed"], config["run"]["num_seeds"]) == (seed, 1)
    os.remove(os.path.join(out, "CartPole-v1", "seed2", "eval.json"))
    checkpoints = _files(os.path.join(out, "CartPole-v1", "seed1"))
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "training" not in said and "seed 1:" not in said and "CartPole-v1 seed 2: " in said
    assert _files(os.path.join(out, "CartPole-v1", "seed1")) == checkpoints
    record = json.load(open(os.path.join(out, "bench.json")))
    assert [s["status"] for s in record["results"]["tasks"][0]["seeds"]] == ["scored", "scored"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["bench", "clasic"], "unknown suite 'clasic'; accepted: classic, box2d, mujoco, atari5"),
        (["bench", "classic", "--seeds", "0"], "--seeds must be a positive integer, got 0"),
        (["bench", "classic", "--episodes", "0"], "--episodes must be a positive integer"),
        (
            ["bench", "classic", "--tasks", "LunarLander-v3"],
            "'LunarLander-v3' is not a task of the classic suite",
        ),
        (
            ["bench", "classic", "--total-timesteps", "100"],
            "CartPole-v1 (cartpole-fast): --total-timesteps 100 is less than one batch",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, words):
    out = tmp_path / "bench"
    assert main([*argv, "--output-dir", str(out)]) == 2
    assert words in _one_line(capsys)
    assert not out.exists()


def test_a_directory_that_holds_something_else_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["bench", "classic", "--output-dir", str(tmp_path)]) == 2
    assert "holds no bench and is not empty" in _one_line(capsys)
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_every_suite_plans_ten_batched_seeds_of_its_presets(tmp_path):
    for name in bench.suites():
        tasks = bench.suite_tasks(name)
        units = bench.plan(tasks, 10, None, str(tmp_path))
        assert [u.task for u in units] == tasks  # one batched run of 10 seeds per task
        for unit in units:
            assert unit.seeds == list(range(1, 11))
            assert unit.args.env.env_id == unit.task.env_id
            assert unit.args.algorithm.total_timesteps == unit.task.total_timesteps
            preset = read_preset(unit.task.preset)
            assert unit.args.algorithm.learning_rate == preset["learning_rate"]
    assert [t.env_id for t in bench.suite_tasks("classic")] == [
        "CartPole-v1",
        "Acrobot-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Pendulum-v1",
    ]
    # each classic and Box2D task at its fast preset's own budget, as proxima solve trains it
    for t in bench.suite_tasks("classic") + bench.suite_tasks("box2d"):
        assert read_preset(t.preset)["env_id"] == t.env_id and "solve" in read_preset(t.preset)
        assert t.total_timesteps == read_preset(t.preset)["total_timesteps"]
    assert {t.total_timesteps for t in bench.suite_tasks("mujoco")} == {1_000_000}
    atari = bench.plan(bench.suite_tasks("atari5"), 10, None, str(tmp_path))
    assert {u.args.network.precision for u in atari} == {
        "float32"
    }  # CleanRL's arithmetic; batched seeds need it
    # every classic task has a reference score, so the page has statistics over the tasks
    assert all(t.env_id in reference_scores() for t in bench.suite_tasks("classic"))


def _numbers(text):
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def test_the_published_numbers_are_those_their_cells_write():
    tasks = {t.env_id for s in bench.suites() for t in bench.suite_tasks(s)}
    tables = bench.published()
    assert {t["id"] for t in tables} == {
        "cleanrl-ppo",
        "cleanrl-ppo-continuous",
        "cleanrl-ppo-atari-envpool-xla-jax",
        "rl-zoo",
    }
    for table in tables:
        assert re.fullmatch(r"[0-9a-f]{40}", table["commit"]) and table["file"].endswith(".md")
        for task, row in table["rows"].items():
            assert task in tasks, task
            cells = row["cells"]
            if table["peer"] == "CleanRL":  # "490.04 ± 6.12"
                assert cells[0] == row["env_id"] and _numbers(cells[1]) == [row["mean"], row["std"]]
            else:  # algo, env_id, mean_reward, std_reward, n_timesteps, eval_timesteps, eval_episodes
                assert cells[:2] == ["ppo", row["env_id"]]
                assert [float(cells[2]), float(cells[3]), int(cells[6])] == [
                    row["mean"],
                    row["std"],
                    row["episodes"],
                ]
                count, unit = re.fullmatch(r"(\d+)([kM])", cells[4]).groups()
                assert row["steps"] == int(count) * {"k": 1_000, "M": 1_000_000}[unit]
    rows = {t["id"]: t["rows"] for t in tables}
    assert rows["cleanrl-ppo"]["Acrobot-v1"]["mean"] == -86.36
    assert rows["cleanrl-ppo-continuous"]["Humanoid-v4"]["cells"][1] == "716.11 ± 49.08"
    assert rows["rl-zoo"]["LunarLander-v3"]["env_id"] == "LunarLander-v2"  # the version the RL Zoo ran
    assert rows["rl-zoo"]["QbertNoFrameskip-v4"]["mean"] == 15627.108
    assert "Pendulum-v1" not in rows["cleanrl-ppo"]  # none published: left empty
