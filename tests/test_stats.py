"""``proxima stats`` and ``proxima.run.statistics``: the estimators on fixed data against hand-computed values,
the stratified bootstrap's intervals, the reference scores, the command on run directories written by hand (no
training), and a batched run's IQM in its results."""

import json
import os
import re
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import scipy.stats
import torch
from safetensors.torch import save_file

from proxima.commands import main
from proxima.run import statistics
from proxima.run.config import read_preset, resolve_args
from proxima.run.scores import reference_scores
from proxima.scale.seedgroup import _summarize_seeds

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


def test_the_estimators_on_fixed_data_are_the_hand_computed_values():
    assert statistics.iqm([range(1, 9)]) == 4.5  # 1..8: the middle half 3..6
    assert statistics.iqm([range(1, 11)]) == 5.5  # 1..10: floor(10 / 4) = 2 cut at each end, 3..8 left
    assert statistics.iqm([[1, 2, 3, 4], [5, 6, 7, 8]]) == 4.5  # the runs of every task pooled
    rng = np.random.default_rng(3)
    ragged = [rng.normal(size=7), rng.normal(size=4), rng.normal(size=9)]
    assert statistics.iqm(ragged) == pytest.approx(scipy.stats.trim_mean(np.concatenate(ragged), 0.25))
    assert statistics.median([[1, 2, 10]]) == 2  # one task: the median of its runs
    assert statistics.median([[1, 3], [10, 20], [0, 2]]) == 2  # the task means 2, 15 and 1
    assert statistics.mean([[1, 3], [10, 20, 30]]) == 11  # the task means 2 and 20 (pooled: 12.8)
    assert statistics.optimality_gap([[0.5, 1.2], [0.0, 0.9]]) == pytest.approx(0.4)  # 1 - (0.5+1+0+0.9)/4
    assert statistics.optimality_gap([[400, 500]], gamma=475) == 37.5  # 475 - (400 + 475) / 2
    assert statistics.normalized([22, 475, 248.5], 22, 475).tolist() == [0.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="at least one run"):
        statistics.iqm([[1.0], []])


def test_the_probability_of_improvement_counts_wins_and_half_the_ties():
    assert statistics.probability_of_improvement([[10, 11, 12]], [[1, 2, 3]]) == 1.0
    assert statistics.probability_of_improvement([[1, 2, 3]], [[10, 11, 12]]) == 0.0
    assert statistics.probability_of_improvement([[1, 2, 3]], [[1, 2, 3]]) == 0.5
    assert statistics.probability_of_improvement([[1, 3]], [[2, 2]]) == 0.5  # 3 wins twice, 1 loses twice
    assert statistics.probability_of_improvement([[2, 3]], [[2]]) == 0.75  # a tie and a win
    # two tasks: 1 on the first, 0.5 on the second
    assert statistics.probability_of_improvement([[5, 6], [1, 2]], [[1, 2], [1, 2]]) == 0.75
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=8), rng.normal(0.3, size=6)
    u = scipy.stats.mannwhitneyu(x, y, alternative="greater").statistic
    assert statistics.probability_of_improvement([x], [y]) == pytest.approx(u / (8 * 6))  # rliable's way
    separated = statistics.improvement([[10, 11, 12], [5, 6]], [[1, 2, 3], [0, 1]])
    assert (separated.value, separated.low, separated.high) == (1.0, 1.0, 1.0)
    same = statistics.improvement([[1, 2, 3, 4]], [[1, 2, 3, 4]])
    assert same.value == 0.5 and same.low < 0.5 < same.high


def test_the_interval_contains_the_estimate_and_narrows_with_more_runs():
    rng = np.random.default_rng(0)
    few, many = rng.normal(100, 20, size=(2, 5)), rng.normal(100, 20, size=(2, 50))
    for name in statistics.NAMES:
        narrow = statistics.interval(name, many, gamma=110)
        wide = statistics.interval(name, few, gamma=110)
        for e in (narrow, wide):
            assert e.low <= e.value <= e.high, (name, e)
        assert narrow.high - narrow.low < (wide.high - wide.low) / 2, name
    one = statistics.interval("iqm", [[3.0], [4.0, 5.0]])  # a task with one run: nothing to resample
    assert (one.value, one.low, one.high) == (4.0, None, None)


def test_the_bootstrap_resamples_each_task_on_its_own():
    """Stratified: each resample keeps a task's number of runs, so tasks whose runs agree give a mean that no
    resample moves. Resampling the pooled runs would mix the tasks' shares and spread it."""
    mean = statistics.interval("mean", [[0.0] * 5, [1.0] * 5])
    assert (mean.value, mean.low, mean.high) == (0.5, 0.5, 0.5)


def test_a_stratified_bootstrap_interval_on_fixed_data_is_its_known_answer():
    """The known answer: ``scipy.stats.bootstrap`` (SciPy 1.17.1) with the data as one sample per task,
    ``method="percentile"``, 9999 resamples and ``rng=np.random.default_rng(0)``, computed once by
    ``statistics.interval("iqm", scores)`` and written down; the IQM itself is the mean of the pooled middle
    half, 0.5, 0.6, 0.7, 0.8, 0.8 and 0.9 (10 scores: 2 cut at each end), 4.3 / 6, by hand."""
    scores = [[0.2, 0.9, 0.8, 0.6, 1.0], [0.1, 0.7, 0.9, 0.8, 0.5]]
    e = statistics.interval("iqm", scores)
    assert e.value == pytest.approx(4.3 / 6)
    assert (e.low, e.high) == pytest.approx(KNOWN_IQM_INTERVAL, abs=1e-12)


KNOWN_IQM_INTERVAL = (0.45, 0.85)


def test_the_reference_scores_are_the_ones_their_sources_give():
    table = reference_scores()
    for env_id, task in table.items():
        assert isinstance(task["random"], float) and task["random"] < task["reference"], env_id
        if task["reference_source"].startswith("Gymnasium's reward_threshold"):
            assert gym.spec(env_id).reward_threshold == task["reference"], env_id
    assert table["Pendulum-v1"]["reference"] == read_preset("pendulum-fast")["solve"]["threshold"]
    assert gym.spec("Pendulum-v1").reward_threshold is None
    # docs/STATISTICS.md shows the same table
    page = open(os.path.join(DOCS, "STATISTICS.md")).read()
    rows = dict(re.findall(r"^\| `([^`]+)` \| (-?[\d.]+ \| -?[\d.]+) \|", page, re.M))
    own = {k: t for k, t in table.items() if "dqn_zoo" not in t["reference_source"]}
    assert rows == {k: f"{t['random']:g} | {t['reference']:g}" for k, t in own.items()}
    games = dict(re.findall(r"^    \| (\w+) \| (-?[\d.]+ \| -?[\d.]+) \|", page, re.M))
    assert len(games) == 57
    for game, numbers in games.items():
        for env_id in (f"ALE/{game}-v5", f"{game}NoFrameskip-v4"):
            assert numbers == f"{table[env_id]['random']:g} | {table[env_id]['reference']:g}", env_id
    # dqn_zoo's numbers (atari_data.py, commit 45061f4), as the source gives them
    assert (table["ALE/Pong-v5"]["random"], table["ALE/Pong-v5"]["reference"]) == (-20.7, 14.6)
    assert (table["BreakoutNoFrameskip-v4"]["random"], table["BreakoutNoFrameskip-v4"]["reference"]) == (
        1.7,
        30.5,
    )


def _finished(run_dir):
    """The header of a finished run's checkpoint, which the report reads for the run's status."""
    save_file({"x": torch.zeros(1)}, os.path.join(run_dir, "checkpoint.safetensors"),
              metadata={"proxima": json.dumps({"finished": True})})  # fmt: skip


def fake_run(path, score, env_id="CartPole-v1", seed=1, finished=True, evaluation=True, **settings):
    """A run directory as training and ``proxima eval --deterministic`` write it, without training: its
    config, two updates, four episodes and an eval.json whose mean is ``score``."""
    os.makedirs(path)
    config = resolve_args(env_id=env_id, seed=seed, run_dir=str(path), **settings).to_json()
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for step in (512, 1024):
            f.write(json.dumps({"global_step": step, "time_s": step / 1000, "episodic_return": 20.0}) + "\n")
    with open(os.path.join(path, "episodes.jsonl"), "w") as f:
        for r in (10.0, 20.0, 30.0, 40.0):
            f.write(json.dumps({"global_step": 1024, "return": r, "length": 10}) + "\n")
    if evaluation:
        with open(os.path.join(path, "eval.json"), "w") as f:
            json.dump({"episodes": 10, "deterministic": True, "seed": 0, "mean": score, "std": 0.0}, f)
    if finished:
        _finished(str(path))
    return str(path)


@pytest.fixture
def two_settings(tmp_path):
    """Two learning rates on two tasks, five seeds each: the higher one wins on both."""
    scores = {
        ("CartPole-v1", 0.001): [500, 500, 480, 490, 470],
        ("CartPole-v1", 0.0003): [200, 250, 150, 300, 220],
        ("Acrobot-v1", 0.001): [-80, -85, -90, -75, -95],
        ("Acrobot-v1", 0.0003): [-200, -150, -300, -250, -180],
    }
    for (env_id, lr), values in scores.items():
        for seed, score in enumerate(values, 1):
            fake_run(tmp_path / f"{env_id}-{lr}" / f"seed{seed}", score, env_id, seed, learning_rate=lr)
    return tmp_path


def test_stats_prints_the_tables_and_writes_every_number(two_settings, capsys):
    dirs = sorted(str(p) for p in two_settings.iterdir())
    out = two_settings / "stats.json"
    assert main(["stats", *dirs, "--baseline", "learning_rate=0.0003", "--json", str(out)]) == 0
    printed, err = capsys.readouterr()
    assert err == ""  # every run finished, with a score of one kind
    for words in ("final scores", "IQM", "optimality gap", "normalized", "P(setting > learning_rate=0.0003)"):
        assert words in printed, words
    data = json.loads(out.read_text())
    cartpole = next(
        g for g in data["groups"] if g["setting"] == "learning_rate=0.001" and g["task"] == "CartPole-v1"
    )
    assert cartpole["runs"] == 5 and cartpole["score"] == ["eval.json"] and cartpole["steps"] == [1024, 1024]
    assert cartpole["iqm"]["value"] == 490  # 470 and 500 cut: the mean of 480, 490, 500
    assert cartpole["median"]["value"] == 490 and cartpole["mean"]["value"] == 488
    assert cartpole["optimality_gap"]["value"] == pytest.approx(1.0)  # 475 - (4 * 475 + 470) / 5
    assert "490.0 [473.3, 500.0]" in printed  # the interval's ends as the value: 4 digits
    assert len(data["groups"]) == 4 and [a["setting"] for a in data["aggregates"]] == [
        "learning_rate=0.0003", "learning_rate=0.001",
    ]  # fmt: skip
    assert data["aggregates"][0]["runs"] == 10 and sorted(data["aggregates"][0]["tasks"]) == [
        "Acrobot-v1",
        "CartPole-v1",
    ]
    (better,) = data["improvements"]
    assert better["setting"] == "learning_rate=0.001" and better["probability"] == {
        "value": 1.0,
        "low": 1.0,
        "high": 1.0,
    }


def test_stats_takes_the_score_asked_for_and_says_which_runs_lack_it(tmp_path, capsys):
    for seed in (1, 2, 3):
        fake_run(tmp_path / "runs" / f"seed{seed}", 100.0 * seed, seed=seed, finished=seed != 3)
    out = tmp_path / "stats.json"
    assert main(["stats", str(tmp_path / "runs"), "--score", "training", "--json", str(out)]) == 0
    (group,) = json.loads(out.read_text())["groups"]
    assert group["setting"] == "ppo" and group["score"] == ["training return"]
    assert group["iqm"]["value"] == 25.0  # each run's mean of its four episodes
    assert capsys.readouterr().err == (
        "note: ppo on CartPole-v1: 1 of its 3 runs did not finish (in progress or stopped): scored as they stand\n"
    )
    assert main(["stats", str(tmp_path / "runs"), "--score", "solve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"proxima stats: error: {tmp_path / 'runs' / 'seed1'} has no deterministic solve.json"
    )
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["stats"], "missing DIR [DIR ...]"),
        (["stats", "{tmp}/nowhere"], "'{tmp}/nowhere' is not a directory"),
        (["stats", "{tmp}/empty"], "'{tmp}/empty' holds no proxima run"),
        (
            ["stats", "{tmp}/runs", "--baseline", "sgd"],
            "--baseline 'sgd' is not a setting of these runs; they are: 'ppo'",
        ),
        (["stats", "{tmp}/runs", "--json", "{tmp}/stats.txt"], "--json must be a .json file"),
        (["stats", "{tmp}/runs", "--score", "best"], "--score"),
        (["stats", "{tmp}/runs", "--plot", "{tmp}/stats.pdf"], "--plot must be a .png file"),
        (
            ["stats", "{tmp}/runs", "--plot", "{tmp}/none/stats.png"],
            "the directory {tmp}/none does not exist",
        ),
    ],
    ids=["no-dir", "missing", "no-runs", "baseline", "json", "score", "plot", "plot-dir"],
)
def test_bad_input_is_one_line_and_exit_2(argv, said, tmp_path, capsys):
    os.makedirs(tmp_path / "empty")
    fake_run(tmp_path / "runs" / "seed1", 1.0)
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("proxima stats: error: ") and said.format(tmp=tmp_path) in err


def test_without_scipy_stats_names_the_extra_and_a_batched_run_still_ends(tmp_path, monkeypatch, capsys):
    fake_run(tmp_path / "runs" / "seed1", 1.0)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # import scipy.stats fails
    assert main(["stats", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (
        "proxima stats: error: the statistics need SciPy, which the stats extra installs: pip install 'proxima[stats]'\n"
    )
    _summarize_seeds(str(tmp_path / "runs"), [_seed_run(tmp_path / "runs" / "seed1", 1)])
    assert (
        (tmp_path / "runs" / "results.md")
        .read_text()
        .endswith(
            "No IQM of the seeds' scores: the statistics need SciPy, which the stats extra installs: pip install "
            "'proxima[stats]'\n"
        )
    )
    # a sweep's or a search's results, and a report page of several seeds, say so in a line
    from proxima.run.report import find_runs
    from proxima.run.scores import page_statistics, results_statistics

    said = "the statistics need SciPy, which the stats extra installs: pip install 'proxima[stats]'"
    fake_run(tmp_path / "runs" / "seed2", 2.0, seed=2)
    assert results_statistics({"ppo": [str(tmp_path / "runs" / "seed1")]}) == (
        None, f"## Statistics of the final scores\n\nNo statistics: {said}\n",
    )  # fmt: skip
    assert page_statistics(find_runs([str(tmp_path / "runs")])[0])["notes"] == [said]


def _seed_run(run_dir, seed):
    """What ``_summarize_seeds`` reads of a seed's ``SeedRun``."""
    return SimpleNamespace(run_dir=str(run_dir), args=SimpleNamespace(run=SimpleNamespace(seed=seed), num_updates=2),
                           global_step=1024, updates_done=2)  # fmt: skip


def test_a_batched_runs_results_give_the_iqm_of_its_seeds_with_its_interval(tmp_path):
    parent = tmp_path / "group"
    seeds = [_seed_run(fake_run(parent / f"seed{s}", 0.0, seed=s, evaluation=False), s) for s in range(1, 5)]
    for s, run in enumerate(seeds, 1):  # the seeds' last --eval-every evaluations: 10, 20, 30, 40
        with open(os.path.join(run.run_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"global_step": 1536, "eval_return": 10.0 * s}) + "\n")
    _summarize_seeds(str(parent), seeds)
    iqm = json.loads((parent / "results.json").read_text())["iqm"]
    assert (
        iqm["value"] == 25.0 and iqm["score"] == ["eval_return"] and iqm["seeds"] == 4
    )  # the mean of 20, 30
    assert iqm["low"] <= 25.0 <= iqm["high"]
    line = (parent / "results.md").read_text().splitlines()[-1]
    assert line.startswith(
        "IQM of the 4 seeds' scores (the last --eval-every evaluation, deterministic) [95% CI, stratified "
        "bootstrap]: 25.00 ["
    )
    assert main(["stats", str(parent)]) == 0  # the same number from the command


def test_two_sweeps_settings_of_one_name_are_one_setting_with_a_note(tmp_path, capsys):
    """A sweep's runs are grouped by its setting's name, as the report groups them: two grid-less sweeps are
    both "base", and a note says that their runs differ."""
    for name, lr in (("a", 0.001), ("b", 0.0003)):
        trials = []
        for seed in (1, 2):
            fake_run(tmp_path / name / f"base__seed{seed}", 100.0 + seed, seed=seed, learning_rate=lr)
            trials.append({"name": f"base__seed{seed}", "setting": "base", "seed": seed})
        plan = {"format": "proxima-sweep", "title": name, "trials": trials}
        (tmp_path / name / "sweep.json").write_text(json.dumps(plan))
    out = tmp_path / "stats.json"
    assert main(["stats", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]) == 0
    (group,) = json.loads(out.read_text())["groups"]
    assert group["setting"] == "base" and group["runs"] == 4
    assert capsys.readouterr().err == (
        "note: base on CartPole-v1: its runs differ in more than their seed (learning_rate): settings of one name "
        "from different sweeps or comparisons, whose statistics are of them all\n"
    )


def test_a_performance_profile_on_hand_made_scores_is_the_exact_fractions():
    fractions, _, _ = statistics.performance_profile([[0.0, 0.25, 0.5, 0.75, 1.0]], [-1, 0, 0.5, 0.99, 1])
    assert fractions.tolist() == [1.0, 0.8, 0.4, 0.2, 0.0]  # strictly above: a run at tau is not counted
    # the runs of every task pooled: 1 of the first task's and 2 of the second's are above 0.5, 3 of 5 (the
    # mean of the tasks' fractions would be 0.583)
    fractions, _, _ = statistics.performance_profile([[0.0, 1.0], [0.5, 0.6, 2.0]], [0.5])
    assert fractions.tolist() == [0.6]
    # stratified: where each task's runs agree, no resample moves the fraction
    fractions, low, high = statistics.performance_profile([[1.0, 1.0, 1.0], [0.0, 0.0]], [0.5])
    assert (fractions.tolist(), low.tolist(), high.tolist()) == ([0.6], [0.6], [0.6])
    # each tau's interval is SciPy's of that fraction alone: the same 9999 resamples, drawn from seed 0
    x, taus = np.random.default_rng(5).normal(size=8), [-0.5, 0.0, 0.5]
    _, low, high = statistics.performance_profile([x], taus)
    for i, tau in enumerate(taus):
        alone = scipy.stats.bootstrap((x,), lambda s, axis, tau=tau: (s > tau).mean(axis=axis), vectorized=True,
                                      method="percentile", rng=np.random.default_rng(0))  # fmt: skip
        assert (low[i], high[i]) == pytest.approx(tuple(alone.confidence_interval))
    assert statistics.performance_profile([[1.0], [2.0, 3.0]], [1.5])[1:] == (None, None)  # a task of one run


def test_the_iqm_over_steps_is_each_steps_iqm_with_the_runs_resampled_whole():
    curves = np.random.default_rng(6).normal(size=(6, 4))
    curves[0, 0] = np.nan  # a run with no value yet at the first step
    curves[:, 3] = 2.0  # every run at 2 at the last step
    iqm, low, high = statistics.iqm_over_steps(curves)
    assert np.isnan([iqm[0], low[0], high[0]]).all()
    assert iqm[1:] == pytest.approx(scipy.stats.trim_mean(curves[:, 1:], 0.25, axis=0))
    assert (iqm[3], low[3], high[3]) == (2.0, 2.0, 2.0)
    for step in (1, 2):  # SciPy's interval of that step alone, from the same resamples of the runs
        alone = scipy.stats.bootstrap((curves[:, step],), lambda s, axis: scipy.stats.trim_mean(s, 0.25, axis=axis),
                                      vectorized=True, method="percentile", rng=np.random.default_rng(0))  # fmt: skip
        assert (low[step], high[step]) == pytest.approx(tuple(alone.confidence_interval))
    one = statistics.iqm_over_steps(curves[:1])
    assert one[0][1:].tolist() == curves[0, 1:].tolist() and one[1:] == (None, None)


def test_the_profiles_of_settings_on_several_tasks_are_of_normalized_scores(two_settings):
    from proxima.run.scores import profiles, scored_groups

    groups, _ = scored_groups(sorted(str(p) for p in two_settings.iterdir()))
    (panel,) = profiles(groups)  # two tasks, each with its reference: one profile over both
    assert panel["task"] is None and panel["normalized"]
    table = reference_scores()
    for line in panel["settings"]:
        pooled = np.concatenate([(g.scores - table[g.task]["random"]) / (table[g.task]["reference"] - table[g.task]["random"])
                                 for g in groups if g.setting == line["setting"]])  # fmt: skip
        assert line["runs"] == 10
        assert line["fraction"].tolist() == [np.mean(pooled > tau) for tau in panel["taus"]]
        assert (line["low"] <= line["fraction"]).all() and (line["fraction"] <= line["high"]).all()
    assert panel["taus"][0] == 0.0 and panel["taus"][-1] > 1.0  # from random to past the best run
    cartpole = [g for g in groups if g.task == "CartPole-v1"]
    (panel,) = profiles(cartpole)  # one task: in its own units
    assert panel["task"] == "CartPole-v1" and not panel["normalized"]
    assert (panel["taus"][0], panel["taus"][-1]) == (150.0, 500.0)
    best = next(line for line in panel["settings"] if line["setting"] == "learning_rate=0.001")
    assert (
        best["fraction"][0] == 1.0 and best["fraction"][-1] == 0.0
    )  # all above the worst run, none above 500


def test_stats_plot_draws_the_profiles_and_the_iqm_over_steps(two_settings, capsys):
    dirs = sorted(str(p) for p in two_settings.iterdir())
    out = two_settings / "stats.png"
    assert main(["stats", *dirs, "--plot", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {out}\n")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_a_sweeps_results_keep_their_table_and_add_the_statistics_of_each_setting(tmp_path):
    """A sweep directory as a local sweep leaves it (runs, their trial.json, sweep.json), without training:
    its summary adds the statistics of each setting's eval.json scores to results.json and results.md."""
    from proxima.run.scores import with_interval
    from proxima.scale.sweeps import summarize

    scores = {"ppo": [100.0, 300.0, 200.0, 400.0], "vpg": [50.0, 150.0, 100.0, 350.0]}
    trials = []
    for setting, values in scores.items():
        for seed, score in enumerate(values, 1):
            run_dir = fake_run(tmp_path / f"{setting}__seed{seed}", score, seed=seed, algo=setting)
            (tmp_path / f"{setting}__seed{seed}" / "trial.json").write_text(
                json.dumps({"status": "finished", "final_return": 25.0, "wall_s": 1.0})
            )
            trials.append({"name": f"{setting}__seed{seed}", "setting": setting, "seed": seed,
                           "config": {"run": {"run_dir": run_dir}}})  # fmt: skip
    plan = {"format": "proxima-sweep", "title": "two algorithms", "trials": trials}
    (tmp_path / "sweep.json").write_text(json.dumps(plan))
    summarize(str(tmp_path), plan)
    results = json.loads((tmp_path / "results.json").read_text())
    assert [s["setting"] for s in results["settings"]] == ["ppo", "vpg"]  # the old keys, as they were
    assert results["settings"][0]["final_return_mean"] == 25.0 and len(results["trials"]) == 8
    found = results["statistics"]
    assert found["format"] == "proxima-stats" and [g["setting"] for g in found["groups"]] == ["ppo", "vpg"]
    table = (tmp_path / "results.md").read_text()
    assert table.startswith("two algorithms\n\nfinal return = mean return of a run's last 20 episodes")
    for g in found["groups"]:
        x = np.array(scores[g["setting"]])
        assert g["score"] == ["eval.json"]
        assert g["iqm"]["value"] == scipy.stats.trim_mean(x, 0.25)  # the middle two of four
        assert g["median"]["value"] == np.median(x) and g["mean"]["value"] == x.mean()
        assert g["optimality_gap"]["value"] == 475 - np.minimum(x, 475).mean()
        row = f"| {g['setting']} | CartPole-v1 | 4 | 1,024 | eval.json | {with_interval(g['iqm'])} | "
        assert row in table
    (improvement,) = found["improvements"]
    x, y = np.array(scores["vpg"]), np.array(scores["ppo"])
    wins = (x[:, None] > y[None, :]).mean() + 0.5 * (x[:, None] == y[None, :]).mean()
    assert wins == 4.5 / 16  # 150 > 100, 350 > 100, 200 and 300, and 100 = 100: 4 wins and a tie of 16 pairs
    assert improvement["baseline"] == "ppo" and improvement["probability"]["value"] == wins
    assert f"| vpg | 1 | {with_interval(improvement['probability'])} |" in table
    assert "P(setting > ppo)" in table and "eval.json's deterministic episodes" in table


def test_the_iqm_curve_holds_a_run_whose_episodes_ended_at_one_step_and_leaves_out_one_with_none():
    """A seed that solved its task in its first update has all its episodes at one step (or none): its curve is
    its value there, held to the end; a seed with no episode has no curve and is left out."""
    from proxima.run.report import RunData
    from proxima.run.scores import Group, RunScore, iqm_curves

    def run(steps, returns):
        data = RunData(
            "r", "r", {}, [], np.array(steps, float), np.array(returns, float), [], None, None, "finished"
        )
        return RunScore("r", 0.0, "training", 0, "finished", data)

    group = Group("s", "Acrobot-v1")
    group.runs = [run([110.0] * 3, [-90.0, -80.0, -70.0]), run([40.0, 200.0], [-300.0, -100.0]), run([], [])]
    (curve,) = iqm_curves([group], points=5)
    (line,) = curve["settings"]
    assert line["runs"] == 2
    assert list(line["steps"]) == [0.0, 50.0, 100.0, 110.0, 150.0, 200.0]  # the grid, and each run's end
    # the first run: -80 (its three episodes' mean) from step 110 on; the second: its running return, -300 at
    # step 40 to -200 at step 200 (the mean of both), linearly; two runs: their IQM is their mean
    iqm = np.array(line["iqm"], dtype=float)
    assert np.isnan(iqm[:3]).all()
    assert iqm[3:] == pytest.approx([(-80 - 256.25) / 2, (-80 - 231.25) / 2, (-80 - 200) / 2])
