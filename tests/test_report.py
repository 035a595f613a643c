"""``proxima report``: the page's data, its size, its runs and groups, and what training writes for it.
The page in a real browser is tests/test_report_browser.py."""

import json
import os
import re

import numpy as np
import pytest

import proxima
from proxima.commands import main
from proxima.run.config import resolve_args
from proxima.run.health import HEALTHY
from proxima.run.logger import RunLogger
from proxima.run.report import CHARTS, decimate, find_runs, report_data

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


def page_data(path) -> dict:
    """The JSON a page carries (what its script draws)."""
    text = open(path).read()
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def fake_run(path, updates=50, steps_per_update=512, episodes_per_update=3, spike_at=None, **settings):
    """A run directory as training writes it, without training: ``updates`` metrics lines and their episodes."""
    os.makedirs(path)
    config = resolve_args(run_dir=str(path), **settings).to_json()
    rng = np.random.default_rng(config["run"]["seed"])
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    with (
        open(os.path.join(path, "metrics.jsonl"), "w") as m,
        open(os.path.join(path, "episodes.jsonl"), "w") as e,
    ):
        for u in range(1, updates + 1):
            step = u * steps_per_update
            line = {"global_step": step, "time_s": step / 5000, "sps": 5000.0, "approx_kl": 0.01 + 0.001 * rng.random(),
                    "entropy": 0.69 - u / updates / 2, "value_loss": 1.0, "episodic_return": float(u)}  # fmt: skip
            if u == spike_at:
                line["approx_kl"] = 9.5
                line["warnings"] = [{"kind": "approx_kl", "text": "approx_kl is above 0.05"}]
            m.write(json.dumps(line) + "\n")
            for _ in range(episodes_per_update):
                e.write(json.dumps({"global_step": step, "return": u + rng.random(), "length": 10}) + "\n")
    return str(path)


def test_decimation_keeps_every_spike_and_bounds_the_points():
    x = np.arange(100_000, dtype=np.float64)
    y = np.sin(x / 5000)
    y[12_345], y[77_777] = 50.0, -50.0
    dx, dy = decimate(x, y, 500)
    assert len(dx) <= 1000 and np.all(np.diff(dx) > 0)  # in order, each point once
    assert dy.max() == 50.0 and dx[dy.argmax()] == 12_345
    assert dy.min() == -50.0 and dx[dy.argmin()] == 77_777
    short = decimate(x[:10], y[:10], 500)  # nothing to drop
    assert np.array_equal(short[0], x[:10])
    with_nan = decimate(np.arange(4.0), np.array([1.0, np.nan, 2.0, np.inf]), 500)
    assert with_nan[1].tolist() == [1.0, 2.0]


def test_a_10m_step_run_page_stays_under_5_mb_and_keeps_its_spike(tmp_path):
    # 10M steps at the defaults' 512 per update; CartPole-like episode counts: 12 per update
    run = fake_run(tmp_path / "long", updates=19_532, episodes_per_update=12, spike_at=7_000)
    assert main(["report", run, "--output", str(tmp_path / "long.html")]) == 0
    size = os.path.getsize(tmp_path / "long.html")
    assert size < 5_000_000, size
    data = page_data(tmp_path / "long.html")
    kl = next(c for c in data["charts"] if c["key"] == "approx_kl")
    x, y = kl["tables"][0]
    assert len(x) <= 2000 and max(y) == 9.5 and x[y.index(9.5)] == 7_000 * 512
    assert kl["markers"] == [
        {"x": 7_000 * 512, "run": 0, "kind": "approx_kl", "text": "approx_kl is above 0.05"}
    ]
    assert data["runs"][0]["summary"]["warnings"][0]["step"] == 7_000 * 512


def test_a_run_page_has_every_chart_the_run_logged_and_marks_non_default_settings(tmp_path):
    run_dir = tmp_path / "run"
    proxima.train(total_timesteps=2048, eval_every=2, eval_episodes=2, run_dir=str(run_dir), quiet=True)
    # training wrote its page at the end, with the final checkpoint's verdict
    data = page_data(run_dir / "report.html")
    (run,) = data["runs"]
    assert run["status"] == "finished" and data["reload_s"] is None
    keys = [c["key"] for c in data["charts"]]
    assert keys[:3] == ["episodic_return"] * 3  # every episode, the running mean, against time
    assert set(CHARTS) <= set(keys)  # every debug variable of detail 12 in docs/SEEDS.md
    for chart in data["charts"]:
        assert chart["healthy"] == HEALTHY[chart["key"]]
        assert any(v is not None for v in chart["tables"][0][1])
    lines = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    value_loss = next(c for c in data["charts"] if c["key"] == "value_loss")["tables"][0]
    assert value_loss[0] == [m["global_step"] for m in lines]
    assert value_loss[1] == pytest.approx([m["value_loss"] for m in lines], rel=1e-3)
    settings = {name: (value, marked) for name, value, marked in run["settings"]}
    assert settings["total_timesteps"] == (2048, True) and settings["learning_rate"] == (2.5e-4, False)
    assert settings["eval_every"] == (2, True) and settings["run_dir"][1] is False
    assert run["summary"]["steps"] == 2048 and run["summary"]["sps"] == pytest.approx(
        2048 / lines[-1]["time_s"]
    )
    machine = run["machine"][0]
    assert machine["proxima"] == proxima.__version__ and machine["from_step"] == 0 and machine["cores"] >= 1
    # proxima eval's final evaluation joins the page
    assert main(["eval", str(run_dir), "--episodes", "3", "--deterministic"]) == 0
    evaluation = json.load(open(run_dir / "eval.json"))
    assert evaluation["episodes"] == 3 and evaluation["deterministic"] is True
    assert evaluation["mean"] == pytest.approx(np.mean(evaluation["returns"]))
    assert main(["report", str(run_dir)]) == 0
    assert page_data(run_dir / "report.html")["runs"][0]["evaluation"] == evaluation
    assert "env_id" not in evaluation and "env_kwargs" not in evaluation  # the run's own env
    # on another env, eval.json and the page say which (the score is not the run's own env's)
    import gymnasium as gym

    if "ShortCartPole-v0" not in gym.registry:
        gym.register("ShortCartPole-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                     max_episode_steps=20)  # fmt: skip
    argv = ["eval", str(run_dir), "--episodes", "2", "--env-id", "ShortCartPole-v0", "--env-kwargs",
            '{"sutton_barto_reward": true}']  # fmt: skip
    assert main(argv) == 0 and main(["report", str(run_dir)]) == 0
    evaluation = page_data(run_dir / "report.html")["runs"][0]["evaluation"]
    assert evaluation["env_id"] == "ShortCartPole-v0" and evaluation["env_kwargs"] == {
        "sutton_barto_reward": True
    }


def test_the_value_loss_chart_says_when_it_is_normalized(tmp_path):
    """norm_value (the default) titles the chart "value_loss (normalized)" with a note under it; a page of runs
    without it keeps the plain title, and a page of both says how many of them are normalized."""

    def value_chart(*runs):
        assert main(["report", *runs, "--output", str(tmp_path / "page.html")]) == 0
        charts = page_data(tmp_path / "page.html")["charts"]
        return next(c for c in charts if c["key"] == "value_loss")

    normalized = fake_run(tmp_path / "normalized", updates=5)
    raw = fake_run(tmp_path / "raw", updates=5, norm_value=False)
    reinforce = fake_run(tmp_path / "reinforce", updates=5, algo="reinforce")  # no critic: nothing normalized
    chart = value_chart(normalized)
    assert chart["title"] == "value_loss (normalized)"
    assert chart["note"].startswith(
        "value_loss is normalized (norm_value): the critic's errors are measured in"
    )
    for plain in ([raw], [reinforce], [raw, reinforce]):
        chart = value_chart(*plain)
        assert chart["title"] == "value_loss" and "note" not in chart, plain
    chart = value_chart(normalized, raw, reinforce)
    assert chart["title"] == "value_loss (normalized in 1 of the 3 runs: those with norm_value)"


def test_a_page_loads_nothing_from_the_network(tmp_path):
    run = fake_run(tmp_path / "run", updates=5)
    main(["report", run])
    text = open(os.path.join(run, "report.html")).read()
    assert "uPlot" in text and "<script src" not in text and "<link" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text) and "@import" not in text


def test_runs_that_differ_only_in_their_seed_form_a_group_with_a_band(tmp_path):
    runs = [
        fake_run(tmp_path / f"lr{lr}-s{seed}", updates=20, seed=seed, learning_rate=lr)
        for lr in (2.5e-4, 1e-3)
        for seed in (1, 2, 3)
    ]
    found, title, probes = find_runs([str(tmp_path)])
    data = report_data(found, title, probes)
    assert data["groups"] == ["learning_rate=0.00025", "learning_rate=0.001"]
    assert [r["group"] for r in data["runs"]] == [0, 0, 0, 1, 1, 1]
    assert [r["label"] for r in data["runs"]] == [os.path.basename(r) for r in runs]
    kl = next(c for c in data["charts"] if c["key"] == "approx_kl")
    assert len(kl["tables"]) == 6 and [b["group"] for b in kl["bands"]] == [0, 1]
    grid, mean, low, high = kl["bands"][0]["table"]
    per_run = [np.interp(grid[-1], *map(np.array, kl["tables"][i])) for i in range(3)]
    assert mean[-1] == pytest.approx(np.mean(per_run), rel=1e-3)
    assert (low[-1], high[-1]) == pytest.approx((min(per_run), max(per_run)), rel=1e-3)
    # one group when only the seeds differ, and settings that do not change learning (plot, quiet, ...)
    found, _, _ = find_runs(
        runs[:3] + [fake_run(tmp_path / "other", updates=5, seed=4, plot=False, quiet=True)]
    )
    assert {r.group for r in found} == {"ppo on CartPole-v1"}
    # every setting that differs names a group, so groups never merge
    many = [fake_run(tmp_path / "many" / f"r{i}", updates=5, gamma=0.9, gae_lambda=0.9, ent_coef=0.0,
                     learning_rate=lr) for i, lr in enumerate((1e-3, 3e-4))]  # fmt: skip
    found, _, _ = find_runs(many + runs[:1])
    assert len({r.group for r in found}) == 3
    assert found[0].group == "ent_coef=0.0,gae_lambda=0.9,gamma=0.9,learning_rate=0.001"


def test_a_label_cannot_break_out_of_the_pages_data(tmp_path):
    name = "<!--<script>x&"  # a directory name: no "/"; a setting holds the closing tag
    run = fake_run(tmp_path / name, updates=3, exp_name="</script><!--")
    assert main(["report", run, "--output", str(tmp_path / "page.html")]) == 0
    text = open(tmp_path / "page.html").read()
    data_element = text[
        text.index('id="report-data">') : text.index("</script>", text.index('id="report-data">'))
    ]
    assert "<" not in data_element[len('id="report-data">') :] and name not in text
    data = page_data(tmp_path / "page.html")
    assert data["runs"][0]["label"] == name  # the same strings, escaped
    assert ["exp_name", "</script><!--", False] in data["runs"][0]["settings"]


def test_runs_of_several_envs_share_a_page(tmp_path):
    runs = [fake_run(tmp_path / env, updates=5, env_id=env) for env in ("CartPole-v1", "Acrobot-v1")]
    found, title, probes = find_runs(runs)
    assert title == "Acrobot-v1, CartPole-v1" and [r.group for r in found] == [
        "env_id=CartPole-v1",
        "env_id=Acrobot-v1",
    ]


def test_a_run_in_progress_gets_a_page_that_reloads_where_the_run_rewrites_it(tmp_path):
    run = fake_run(tmp_path / "run", updates=3)  # no final checkpoint, logs just written
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write('{"global_step": 2048, "time')  # a line being written right now
    main(["report", run])  # a page as of now: nothing will rewrite it, so it does not reload
    data = page_data(os.path.join(run, "report.html"))
    assert data["runs"][0]["status"] == "in progress" and data["in_progress"] and data["reload_s"] is None
    assert data["runs"][0]["summary"]["steps"] == 1536  # the cut line is left out
    live = report_data(*find_runs([run]), live=True)  # the page the run writes of itself
    assert live["reload_s"] == 30


def test_a_run_whose_process_is_gone_is_stopped_and_its_page_does_not_reload(tmp_path):
    import platform
    import subprocess

    run = fake_run(tmp_path / "run", updates=3)
    gone = subprocess.Popen(["true"])
    gone.wait()
    for pid, status in ((os.getpid(), "in progress"), (gone.pid, "stopped")):
        with open(os.path.join(run, "machine.json"), "w") as f:
            json.dump({"sessions": [{"host": platform.node(), "pid": pid, "from_step": 0}]}, f)
        data = report_data(*find_runs([run]), live=True)
        assert data["runs"][0]["status"] == status
        assert data["reload_s"] == (30 if status == "in progress" else None)


def test_a_run_that_crashes_leaves_a_page_that_says_it_stopped(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(proxima.base.errors.EnvError):
        proxima.train(env_id="tests.fixtures.wild_envs:WildCrashAfter1000-v0", total_timesteps=4096,
                      run_dir=str(run_dir), quiet=True)  # fmt: skip
    data = page_data(run_dir / "report.html")
    assert data["runs"][0]["status"] == "stopped" and data["reload_s"] is None
    last = json.loads(open(run_dir / "metrics.jsonl").read().splitlines()[-1])
    assert data["runs"][0]["summary"]["steps"] == last["global_step"] < 4096  # the update before the crash


def test_training_rewrites_its_page_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr("proxima.run.callbacks.REWRITE_S", 0)  # every update
    monkeypatch.setattr("proxima.run.callbacks.ReportPageWriter.COST_RATIO", 0)
    seen = []

    class Look(proxima.run.callbacks.Callback):
        def on_update_end(self, run, result):
            path = os.path.join(run.run_dir, "report.html")
            seen.append(page_data(path)["runs"][0]["summary"]["steps"] if os.path.exists(path) else None)

    # the user's callbacks run before the page is written: each sees the page of the update before
    proxima.train(total_timesteps=2048, run_dir=str(tmp_path / "run"), quiet=True, callbacks=[Look()])
    assert seen == [None, 512, 1024, 1536]
    data = page_data(tmp_path / "run" / "report.html")
    assert data["runs"][0]["status"] == "finished" and data["runs"][0]["summary"]["steps"] == 2048


def test_a_long_runs_pages_are_spaced_by_their_cost(tmp_path, monkeypatch):
    """A page costs more as the logs grow; a run never spends more than 1/COST_RATIO of its time on them."""
    # the clock at the start; then at each check, and at a page's start and end
    clock = iter([0.0, 31.0, 31.0, 33.0, 40.0, 120.0, 135.0, 135.0, 137.0])
    monkeypatch.setattr("proxima.run.callbacks.time", type("Clock", (), {"monotonic": lambda: next(clock)}))
    written = []
    monkeypatch.setattr(
        "proxima.run.callbacks.write_report", lambda paths, out, status, live: written.append(out)
    )
    page = proxima.run.callbacks.ReportPageWriter(30)
    run = type("R", (), {"run_dir": str(tmp_path)})()
    page.on_train_start(run)  # t=0
    page.on_update_end(run, None)  # t=31: a page, from 31 to 33: 2 s
    page.on_update_end(run, None)  # t=40: 7 s later, not 30 s
    page.on_update_end(run, None)  # t=120: 87 s later, but not 50 * 2 = 100 s
    assert len(written) == 1
    page.on_update_end(run, None)  # t=135: 102 s later
    assert len(written) == 2


def test_metrics_lines_carry_the_warnings_that_fired(tmp_path):
    logger = RunLogger(str(tmp_path), {}, tensorboard=False).open()
    logger.log_update({"global_step": 512, "approx_kl": 0.2}, [{"kind": "approx_kl", "text": "too far"}])
    logger.log_update({"global_step": 1024, "approx_kl": 0.01})
    logger.close()
    lines = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert lines == [
        {"global_step": 512, "approx_kl": 0.2, "warnings": [{"kind": "approx_kl", "text": "too far"}]},
        {"global_step": 1024, "approx_kl": 0.01},
    ]


def test_probe_results_are_saved_and_shown(tmp_path, capsys):
    out = tmp_path / "probes"
    assert main(["probe", "--probes", "1", "2", "--run-dir", str(out), "--quiet"]) == 0
    saved = json.load(open(out / "probes.json"))["probes"]
    assert [p["name"] for p in saved] == ["1", "2"] and all(p["passed"] for p in saved)
    assert main(["report", str(out)]) == 0
    data = page_data(out / "report.html")
    assert data["probes"] == saved
    assert sorted(r["label"] for r in data["runs"]) == ["probe-1", "probe-2"]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["report", "NOPE"], "'NOPE' is not a directory"),
        (["report", "{tmp}", "--output", "{tmp}/page.png"], "--output must be an .html file"),
        (["report", "{tmp}"], "holds no proxima run"),
        (["report"], "missing DIR [DIR ...]"),
    ],
)
def test_bad_report_input_is_one_line_exit_2_and_writes_nothing(argv, match, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []


def test_an_output_in_a_missing_directory_is_one_line_exit_2(tmp_path, capsys):
    run = fake_run(tmp_path / "run", updates=3)
    output = tmp_path / "no" / "page.html"
    assert main(["report", run, "--output", str(output)]) == 2
    err = capsys.readouterr().err  # as proxima export and proxima plot say it
    assert (
        err
        == f"proxima report: error: cannot write {output}: the directory {tmp_path / 'no'} does not exist\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["run"] and "report.html" not in os.listdir(run)


def test_a_run_named_twice_is_reported_once_in_the_order_first_named(tmp_path):
    runs = [fake_run(tmp_path / "runs" / name, updates=3) for name in ("a", "b")]
    page = str(tmp_path / "page.html")
    assert main(["report", runs[0], runs[0] + "/", runs[0], "--output", page]) == 0
    assert [r["label"] for r in page_data(page)["runs"]] == ["a"]
    # b named, then again inside the directory of runs that holds a and b
    found, _, _ = find_runs([runs[1], str(tmp_path / "runs"), runs[1]])
    assert [r.label for r in found] == ["b", "a"]


def test_every_charts_healthy_line_stands_in_docs_health():
    doc = open(os.path.join(DOCS, "HEALTH.md")).read()
    for key, line in HEALTHY.items():
        assert f"- **{key}**: {line}." in doc


def test_videos_embedded_are_the_evaluations_then_the_last_and_first_training_episodes(tmp_path, monkeypatch):
    run = fake_run(tmp_path / "run", updates=3)
    with open(os.path.join(run, "eval.json"), "w") as f:  # the evaluation's video; eval-videos/old.mp4 is not
        json.dump(
            {"videos": ["eval-videos/rl-video-episode-0.mp4"], "mean": 1.0, "std": 0.0, "episodes": 1}, f
        )
    for name in ("videos/rl-video-episode-0.mp4", "videos/rl-video-episode-1.mp4", "videos/rl-video-episode-8.mp4",
                 "videos/rl-video-episode-27.mp4", "eval-videos/rl-video-episode-0.mp4", "eval-videos/old.mp4"):  # fmt: skip
        os.makedirs(os.path.dirname(os.path.join(run, name)), exist_ok=True)
        with open(os.path.join(run, name), "wb") as f:
            f.write(name.encode() * 10)
    data = report_data(*find_runs([run]))
    assert [v["name"] for v in data["videos"]] == [
        "eval-videos/rl-video-episode-0.mp4", "videos/rl-video-episode-27.mp4", "videos/rl-video-episode-0.mp4",
    ]  # fmt: skip
    assert data["videos_left"] == 2
    first = data["videos"][0]["src"]
    assert first.startswith("data:video/mp4;base64,")  # inside the page, not a link
    monkeypatch.setattr("proxima.run.report.VIDEO_BYTES", 700)  # room for two of them
    data = report_data(*find_runs([run]))
    assert len(data["videos"]) == 2 and data["videos_left"] == 3


def test_a_groups_band_holds_a_seed_that_stopped_early_as_proxima_plot_does():
    from proxima.run.report import _band

    grid, mean, low, high = _band([(np.array([0.0, 100.0, 200.0]), np.array([1.0, 1.0, 1.0])),
                                   (np.array([0.0, 100.0]), np.array([3.0, 3.0]))])  # fmt: skip
    assert grid[-1] == 200.0 and (mean[-1], low[-1], high[-1]) == (2.0, 1.0, 3.0)


def test_a_page_with_several_seeds_of_a_setting_gives_their_statistics_profile_and_iqm_over_steps(tmp_path):
    import scipy.stats

    for lr in (2.5e-4, 1e-3):
        for seed in (1, 2, 3, 4):
            fake_run(tmp_path / "runs" / f"lr{lr}-s{seed}", updates=20, seed=seed, learning_rate=lr)
    data = report_data(*find_runs([str(tmp_path / "runs")]))
    finals = {}  # each group's runs' final scores: the mean return of their last 20 episodes
    for run in sorted((tmp_path / "runs").iterdir()):
        returns = [json.loads(line)["return"] for line in open(run / "episodes.jsonl")][-20:]
        finals.setdefault(run.name.split("-")[0], []).append(np.mean(returns))
    first, over = data["statistics"]["tables"]
    assert first["head"][:6] == ["setting", "task", "runs", "steps", "score", "IQM"]
    assert [row[:3] for row in first["rows"]] == [["learning_rate=0.00025", "CartPole-v1", "4"],
                                                  ["learning_rate=0.001", "CartPole-v1", "4"]]  # fmt: skip
    iqm = scipy.stats.trim_mean(finals["lr0.00025"], 0.25)  # the middle two of four
    assert float(first["rows"][0][5].split(" [")[0]) == pytest.approx(iqm, abs=0.01)  # 4 digits
    assert over["head"] == ["setting", "tasks", "P(setting > learning_rate=0.00025)"]
    keys = [c["key"] for c in data["charts"]]
    assert keys[:4] == ["episodic_return", "episodic_return", "performance_profile", "iqm_return"]
    profile, curve = data["charts"][2:4]
    assert profile["tables"] == [] and [b["group"] for b in profile["bands"]] == [0, 1]
    assert profile["band_labels"] == ["fraction of runs", "CI low", "CI high"] and profile["healthy"] is None
    taus, fraction, low, high = profile["bands"][0]["table"]
    # the profile's taus run from the lowest run of all (fake_run's returns follow the seed: each group's
    # lowest) to the highest: 3 of 4 above the first, none above the last
    assert fraction[0] == 0.75 and fraction[-1] == 0.0
    assert all(lo <= f <= hi for lo, f, hi in zip(low, fraction, high, strict=True))
    for band, group in zip(curve["bands"], ("lr0.00025", "lr0.001"), strict=True):
        steps, value, low, high = band["table"]
        # at the runs' last step, their running return is their final score
        assert steps[-1] == 20 * 512 and value[-1] == pytest.approx(
            scipy.stats.trim_mean(finals[group], 0.25), rel=1e-3
        )
        assert low[-1] <= value[-1] <= high[-1]
    # one run per setting, or a page that training rewrites as it goes: no statistics
    one = report_data(
        *find_runs([str(tmp_path / "runs" / "lr0.001-s1"), str(tmp_path / "runs" / "lr0.00025-s1")])
    )
    assert one["statistics"] is None and "iqm_return" not in [c["key"] for c in one["charts"]]
    live = report_data(*find_runs([str(tmp_path / "runs")]), live=True)
    assert live["statistics"] is None and "performance_profile" not in [c["key"] for c in live["charts"]]
