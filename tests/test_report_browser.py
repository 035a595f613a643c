"""``proxima report``'s page in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

`make test` installs both (Playwright with the dev extra, Chromium with apt-get where it runs as root). Without
them this module is skipped, with a line saying how to install them. Set PROXIMA_SCREENSHOTS=DIR to keep the
screenshots (docs/REPORT.md's is one).
"""

import json
import os

import numpy as np
import pytest

import proxima
from proxima.base.files import SOLVE_JSON
from proxima.commands import main
from proxima.run.evaluate import save_evaluation
from tests.test_report import fake_run

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser test needs Playwright: pip install playwright (the dev extra)"
)


def open_page(browser, path, tmp_path, name):
    """The page, loaded, with what it asked the network for and every error it logged."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = path.resolve().as_uri()
    page.goto(url)
    page.wait_for_function("window.proximaReport && window.proximaReport.ready", timeout=10_000)
    page.wait_for_timeout(300)  # the videos' metadata
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("PROXIMA_SCREENSHOTS"):
        page.screenshot(path=os.path.join(os.environ["PROXIMA_SCREENSHOTS"], f"report-{name}.png"))
    assert shot.stat().st_size > 10_000
    assert errors == []
    assert requests == [url]  # the page itself, and nothing else
    return page


# Per chart: how often uPlot drew it, how many of its series hold a value, and how many pixels of its plot have
# a colour (the series are coloured; the grid, the axes and the background are grey or white).
CHARTS_DRAWN = """() => window.proximaReport.charts.map(c => {
  const ctx = c.u.ctx, b = c.u.bbox, px = ctx.getImageData(b.left, b.top, b.width, b.height).data;
  let coloured = 0;
  for (let i = 0; i < px.length; i += 4)
    if (Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 60) coloured++;
  const filled = c.u.data.slice(1).filter(s => s.some(v => v !== null && v !== undefined)).length;
  return {key: c.key, drawn: c.u.proximaDrawn || 0, series: c.u.series.length - 1, filled, coloured};
})"""


STATISTICS_CHARTS = ("performance_profile", "iqm_return")  # a multi-run page's, of each group's seeds


def hover(page, index):
    """Move the mouse over chart ``index``'s middle; return its readout."""
    over = page.locator(".chart .u-over").nth(index)
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=4)
    return page.locator(".chart .readout").nth(index).inner_text()


def test_a_run_page_draws_every_chart_shows_values_on_hover_and_plays_its_video(browser, tmp_path):
    run_dir = tmp_path / "run"
    proxima.train(total_timesteps=4096, eval_every=2, eval_episodes=2, capture_video=True, run_dir=str(run_dir),
                  quiet=True)  # fmt: skip
    assert main(["eval", str(run_dir), "--episodes", "2", "--video"]) == 0
    # proxima solve's verdict, which its own file keeps beside the last proxima eval's
    returns = np.array([20.0, 30.0])
    save_evaluation(
        str(run_dir), returns, deterministic=True, seed=1, into=SOLVE_JSON, threshold=475, solved=False
    )
    assert main(["report", str(run_dir)]) == 0
    page = open_page(browser, run_dir / "report.html", tmp_path, "run")
    charts = page.evaluate(CHARTS_DRAWN)
    assert len(charts) >= 15
    for chart in charts:
        assert chart["drawn"] >= 1 and chart["filled"] == chart["series"] == 1, chart
        assert chart["coloured"] > 50, chart
    # every y tick says its own value: a learning rate of order 1e-4 once had all its ticks labelled "0"
    ticks = page.evaluate(
        "() => window.proximaReport.charts.map(c => [c.key, c.u.axes[1]._splits, c.u.axes[1]._values])"
    )
    assert "learning_rate" in [key for key, _, _ in ticks]
    for key, splits, labels in ticks:
        assert len(set(labels)) == len(labels) == len(splits), (key, labels)
        step = min(abs(b - a) for a, b in zip(splits, splits[1:], strict=False)) if len(splits) > 1 else 1
        for value, label in zip(splits, labels, strict=True):
            assert abs(float(label.replace(",", "")) - value) <= 0.01 * step, (key, value, label)
    for index in (0, 5):
        readout = hover(page, index)
        assert readout.startswith("step ") and any(ch.isdigit() for ch in readout.split()[-1]), readout
    videos = page.evaluate("[...document.querySelectorAll('video')].map(v => [v.readyState, v.duration])")
    assert videos and all(state >= 1 and duration > 0 for state, duration in videos), videos
    assert "over 2 sampled episodes" in page.inner_text("body")
    solved = "task's score (proxima solve)\t25 ± 5 over 2 deterministic episodes (threshold 475: not solved)"
    assert solved in page.inner_text("body")


def test_a_multi_run_page_has_one_legend_entry_per_run_bands_and_warning_marks(browser, tmp_path):
    for lr in (2.5e-4, 1e-3):
        for seed in (1, 2):
            fake_run(tmp_path / "runs" / f"lr{lr}-s{seed}", updates=40, seed=seed, learning_rate=lr,
                     spike_at=20 if (lr, seed) == (1e-3, 2) else None)  # fmt: skip
    assert main(["report", str(tmp_path / "runs"), "--output", str(tmp_path / "runs.html")]) == 0
    page = open_page(browser, tmp_path / "runs.html", tmp_path, "runs")
    entries = page.locator("[data-legend-run]")
    assert entries.count() == 4
    assert sorted(entries.all_inner_texts()) == ["lr0.00025-s1", "lr0.00025-s2", "lr0.001-s1", "lr0.001-s2"]
    charts = page.evaluate(CHARTS_DRAWN)
    for chart in charts:  # 4 runs, and each group's mean, lowest and highest; the statistics' groups alone
        runs = 0 if chart["key"] in STATISTICS_CHARTS else 4
        assert (
            chart["drawn"] >= 1 and chart["series"] == runs + 2 * 3 and chart["filled"] == chart["series"]
        ), chart
        assert chart["coloured"] > 50, chart
    keys = [c["key"] for c in charts]
    assert keys[2:4] == list(STATISTICS_CHARTS)  # after the returns against steps and against time
    assert "τ " in hover(page, 2) and "learning_rate=0.001 IQM: " in hover(page, 3)
    body = page.inner_text("body")
    assert "Statistics over seeds" in body and "P(setting > learning_rate=0.00025)" in body
    readout = hover(page, [c["key"] for c in charts].index("approx_kl"))
    assert "lr0.001-s2: " in readout, readout
    # the warning is drawn on approx_kl's chart, in red, and listed with its step
    marks = page.evaluate(
        """() => window.proximaReport.charts.filter(c => c.markers.length).map(c => c.key)"""
    )
    assert marks == ["approx_kl"]
    assert "approx_kl is above 0.05" in page.inner_text("body")
    # a legend click hides that run in every chart
    entries.nth(0).click()
    shown = page.evaluate("() => window.proximaReport.charts.map(c => c.u.series[1].show)")
    assert shown == [key in STATISTICS_CHARTS for key in keys]  # theirs are the groups' lines


def test_a_page_of_pbt_runs_lists_each_perturbation(browser, tmp_path):
    for sample in ("s001", "s002"):
        fake_run(
            tmp_path / "tune" / f"{sample}__seed1",
            updates=20,
            learning_rate=1e-3 if sample == "s001" else 3e-4,
        )
    line = {
        "update": 8,
        "global_step": 4096,
        "from": "s001",
        "settings": {"learning_rate": 0.0012, "ent_coef": 0.01},
    }
    (tmp_path / "tune" / "s002__seed1" / "perturbations.jsonl").write_text(json.dumps(line) + "\n")
    assert main(["report", str(tmp_path / "tune"), "--output", str(tmp_path / "tune.html")]) == 0
    page = open_page(browser, tmp_path / "tune.html", tmp_path, "tune")
    tables = [t for t in page.locator("table").all_inner_texts() if "copied from" in t]
    assert len(tables) == 1
    rows = tables[0].strip().splitlines()
    assert rows[1].split("\t") == ["s002__seed1", "8", "4,096", "s001", "learning_rate=0.0012, ent_coef=0.01"]


def test_a_benchs_page_draws_each_tasks_performance_profile_and_iqm_over_steps(browser, tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["bench", "classic", "--tasks", "CartPole-v1", "--seeds", "4", "--total-timesteps", "4096",
            "--episodes", "8", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert "report.html" in (out / "bench.md").read_text()
    page = open_page(browser, out / "report.html", tmp_path, "bench")
    charts = {c["key"]: c for c in page.evaluate(CHARTS_DRAWN)}
    for key in STATISTICS_CHARTS:  # the task's one group: its line and band (lowest, highest)
        assert charts[key]["drawn"] >= 1 and charts[key]["filled"] == charts[key]["series"] == 3, charts[key]
        assert charts[key]["coloured"] > 50, charts[key]
    body = page.inner_text("body")
    assert "Statistics over seeds" in body and "CartPole-v1" in body
    # the page's IQM is the bench's
    record = json.loads((out / "bench.json").read_text())
    iqm = record["results"]["tasks"][0]["statistics"]["iqm"]["value"]
    assert f"{iqm:.2f}" in body or f"{iqm:.1f}" in body, iqm
