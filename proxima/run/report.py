"""``proxima report``: one self-contained HTML page for a run, several runs, a sweep or a comparison.

The page loads nothing from the network: the data (JSON), the charting library (uPlot, MIT, bundled in
``proxima/static``), the styles and the videos (base64) are all inside the file, so it can be mailed or attached
to a pull request and opened anywhere. Curves are down-sampled to a fixed number of buckets per series, each
keeping its minimum and maximum, so a 10M-step run's page stays small and its spikes stay visible.

Everything comes from what a run directory already holds: ``config.json``, ``metrics.jsonl`` (with the health
warnings of the update they fired at), ``episodes.jsonl``, ``machine.json``, ``eval.json`` (``proxima eval``),
``probes.json`` (``proxima probe --run-dir``) and the videos. A run still in progress gets a page that reloads
itself; training rewrites ``RUN_DIR/report.html`` every ``REWRITE_S`` seconds (``--report``).
"""

from __future__ import annotations

import base64
import datetime
import html
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from proxima.base.errors import UserError
from proxima.base.files import (
    CHECKPOINT,
    CONFIG_JSON,
    EPISODES,
    EVAL_JSON,
    EVAL_VIDEOS,
    MACHINE_JSON,
    METRICS,
    PERTURBATIONS,
    PROBES_JSON,
    SOLVE_JSON,
    SWEEP_JSON,
    TRIAL_JSON,
    VIDEOS,
    distinct_dirs,
    inside,
    output_directory,
    read_checkpoint_meta,
    read_jsonl,
    write_text,
)
from proxima.run.config import PPOArgs, resolve_args, show_value
from proxima.run.health import HEALTHY
from proxima.run.logger import value_loss_note
from proxima.run.plotting import held, mean_of_last, on_grid

# Charts against env steps, in the page's order: the debug variables (detail 12 in docs/SEEDS.md) and the
# episodes.
CHARTS = (
    "episodic_return",
    "eval_return",
    "episodic_length",
    "value_loss",
    "policy_loss",
    "entropy",
    "approx_kl",
    "old_approx_kl",
    "clipfrac",
    "explained_variance",
    "learning_rate",
    "grad_norm",
    "sps",
)
NOT_CHARTED = {"global_step", "time_s"}  # the x-axes
# a warning kind marks the chart of the same name, else this one
WARNING_CHART = {"flat_critic": "value_loss"}
BUCKETS = 1000  # per series for one run (each keeps 2 points); shared among the runs of a multi-run page
GRID = 200  # points of a group's mean and band
VIDEO_BYTES = 3_000_000  # embedded videos per page, at most
REWRITE_S = 30  # how often a run rewrites its page, and how often an in-progress page reloads
WINDOW = 20  # episodes in a return's running mean, as in the plots and the sweeps' final return
# Settings that do not change what a run learns (where it writes, what it logs and prints, how often it saves):
# not marked as non-default, and runs that differ only in them and their seed form one group.
NOT_SETTINGS = {
    "run_dir",
    "quiet",
    "exp_name",
    "seed",
    "cuda",
    "torch_threads",
    "track",
    "wandb_project_name",
    "wandb_entity",
    "checkpoint_every",
    "plot",
    "report",
    "capture_video",
    "save_best",
    "eval_episodes",
    "rescore_best",
    "rescore_episodes",
    "log_info",
}


@dataclass
class RunData:
    """What one run directory holds, read once."""

    run_dir: str
    label: str
    config: dict
    metrics: list[dict]
    steps: np.ndarray  # of each finished episode
    returns: np.ndarray
    machine: list[dict]
    evaluation: dict | None
    solve: dict | None  # proxima solve's verdict (solve.json), which a later proxima eval leaves as it is
    status: str  # finished, in progress, stopped, failed
    group: str = ""
    videos: list[str] = field(default_factory=list)
    perturbations: list[dict] = field(default_factory=list)  # PBT's (proxima tune --scheduler pbt)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_run(path: str) -> bool:
    return os.path.isfile(os.path.join(path, CONFIG_JSON)) and os.path.isfile(os.path.join(path, METRICS))


def _status(run_dir: str, sessions: list[dict]) -> str:
    trial = _read_json(os.path.join(run_dir, TRIAL_JSON))  # a sweep's verdict on a failed run
    if trial is not None and trial.get("status") == "failed":
        return "failed"
    try:
        if read_checkpoint_meta(os.path.join(run_dir, CHECKPOINT))["finished"]:
            return "finished"
    except (UserError, KeyError):
        pass
    last = sessions[-1] if sessions else {}
    if last.get("host") == platform.node() and isinstance(last.get("pid"), int):
        # its process is gone (killed, crashed): nothing will write its logs again
        return "in progress" if _alive(last["pid"]) else "stopped"
    try:  # no final checkpoint: still writing its logs, or stopped elsewhere
        age = time.time() - os.path.getmtime(os.path.join(run_dir, METRICS))
    except OSError:
        return "stopped"
    return "in progress" if age < 10 * REWRITE_S else "stopped"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, as another user's
        return True
    return True


def read_run(run_dir: str, label: str | None = None) -> RunData:
    config = _read_json(os.path.join(run_dir, CONFIG_JSON))
    if config is None:
        raise UserError(
            f"{run_dir}/{CONFIG_JSON} is missing or not JSON; give a directory written by proxima train"
        )
    config = PPOArgs.from_json(config, f"{run_dir}/config.json").flat()  # the page shows the flat names
    episodes = read_jsonl(os.path.join(run_dir, EPISODES))
    machine = (_read_json(os.path.join(run_dir, MACHINE_JSON)) or {}).get("sessions", [])
    evaluation = _read_json(os.path.join(run_dir, EVAL_JSON))
    # the last evaluation's own videos (an earlier `proxima eval --video` may have left others)
    listed = (evaluation or {}).get("videos", [])
    listed = listed if isinstance(listed, list) else [listed]
    videos = [_own_video(run_dir, v) for v in listed]
    foreign = [v for v, path in zip(listed, videos, strict=True) if path is None]
    if foreign:
        print(
            f"note: {os.path.join(run_dir, EVAL_JSON)} lists {foreign[0]!r}"
            + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + f", not a video that proxima wrote in {os.path.join(run_dir, EVAL_VIDEOS)}: not embedded",
            file=sys.stderr,
        )
    for root, _, files in os.walk(os.path.join(run_dir, VIDEOS)):
        videos += [_own_video(run_dir, os.path.relpath(os.path.join(root, f), run_dir)) for f in files]
    own = [v for v in videos if v is not None]
    return RunData(
        run_dir=run_dir,
        label=label or os.path.basename(os.path.normpath(run_dir)),
        config=config,
        metrics=read_jsonl(os.path.join(run_dir, METRICS)),
        steps=np.array([e["global_step"] for e in episodes], dtype=np.float64),
        returns=np.array([e["return"] for e in episodes], dtype=np.float64),
        machine=machine,
        evaluation=evaluation,
        solve=_read_json(os.path.join(run_dir, SOLVE_JSON)),
        status=_status(run_dir, machine),
        videos=sorted((v for v in own if os.path.isfile(v)), key=_episode_number),
        perturbations=read_jsonl(os.path.join(run_dir, PERTURBATIONS)),  # [] where none was written
    )


def _own_video(run_dir: str, relative) -> str | None:
    """``run_dir/relative`` where it is a video that proxima writes: an .mp4 under ``RUN_DIR/eval-videos`` or
    ``RUN_DIR/videos``, reached through no symbolic link (proxima makes none); else None. The page is meant to
    be shared, and a run's files may come from a stranger: nothing else they name is embedded in it."""
    if not isinstance(relative, str) or not relative.endswith(".mp4") or "\0" in relative:
        return None
    parts = os.path.normpath(relative).split(os.sep)
    if os.path.isabs(relative) or len(parts) < 2 or parts[0] not in (VIDEOS, EVAL_VIDEOS):
        return None
    path = os.path.join(run_dir, *parts)
    return path if os.path.realpath(path) == os.path.join(os.path.realpath(run_dir), *parts) else None


def _episode_number(path: str) -> tuple:
    """Evaluation videos first, then training's by part of the run (videos/resumed-after-update-N/) and episode
    (Gymnasium's rl-video-episode-N.mp4)."""
    numbers = (re.search(pattern, path) for pattern in (r"resumed-after-update-(\d+)", r"(\d+)\.mp4$"))
    return (EVAL_VIDEOS not in path, *(int(found.group(1)) if found else 0 for found in numbers))


def read_runs(paths: list[str]) -> tuple[list[RunData], list[str], list[dict]]:
    """The runs that ``paths`` name, each a run directory, a sweep or compare directory, or a directory of run
    directories (``proxima probe --run-dir``'s, a ``--num-seeds`` run's, a search's); a sweep's runs with their
    setting as their group, the others with none yet; and the sweeps' titles and the probe tables found. Each
    run is read once, in the order first named, however many of ``paths`` name it."""
    runs: list[RunData] = []
    titles: list[str] = []
    probes: list[dict] = []
    for path in distinct_dirs(paths):
        if not os.path.isdir(path):
            raise UserError(
                f"{path!r} is not a directory; give run directories, or a sweep or compare directory"
            )
        found = _read_json(os.path.join(path, PROBES_JSON))
        probes += found.get("probes", []) if found else []
        sweep = _read_json(os.path.join(path, SWEEP_JSON))
        if is_run(path):
            runs.append(read_run(path))
        elif sweep is not None and sweep.get("format") == "proxima-sweep":
            titles.append(sweep.get("title", ""))
            for trial in sweep["trials"]:  # by name under the sweep directory: it may have been moved
                run_dir = inside(path, trial["name"], os.path.join(path, SWEEP_JSON))
                if is_run(run_dir):
                    run = read_run(run_dir)
                    run.group = trial["setting"]
                    runs.append(run)
        else:
            subs = sorted(os.path.join(path, d) for d in os.listdir(path))
            inner = [read_run(d) for d in subs if os.path.isdir(d) and is_run(d)]
            if not inner:  # a directory of --num-seeds runs (a bench's tasks): each one's seeds
                inner = [
                    read_run(os.path.join(d, e))
                    for d in subs
                    if os.path.isdir(d)
                    for e in sorted(os.listdir(d))
                    if is_run(os.path.join(d, e))
                ]
            if not inner and not found:
                raise UserError(
                    f"{path!r} holds no proxima run: give run directories (with config.json and metrics.jsonl), "
                    "or a sweep, compare or probe directory"
                )
            runs += inner
    first: dict[str, RunData] = {}
    for run in runs:  # a run named again inside a sweep or a directory of runs also given
        first.setdefault(os.path.realpath(run.run_dir), run)
    return list(first.values()), titles, probes


def find_runs(paths: list[str]) -> tuple[list[RunData], str, list[dict]]:
    """The runs that ``paths`` name (``read_runs``), each labelled and in its group; and the page's title and
    the probe tables found."""
    runs, titles, probes = read_runs(paths)
    if not runs:
        raise UserError("no run has logged an update yet: there is nothing to report")
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):  # same last component: label by the whole path
        for r in runs:
            r.label = r.run_dir
    group_runs(runs)
    env_ids = sorted({r.config.get("env_id", "?") for r in runs})
    title = titles[0] if len(titles) == 1 and len(distinct_dirs(paths)) == 1 else ", ".join(env_ids)
    return runs, title, probes


def group_runs(runs: list[RunData], alone: Callable[[RunData], str] | None = None) -> None:
    """Runs that differ only in their seed form a group, named by the settings that tell the groups apart;
    where all are one group, by ``alone(run)`` (default: "ppo on CartPole-v1"). A run with a group (a sweep's
    setting) keeps it."""
    ungrouped = [r for r in runs if not r.group]
    keys = {
        r.run_dir: json.dumps({k: v for k, v in r.config.items() if k not in NOT_SETTINGS}, sort_keys=True)
        for r in ungrouped
    }
    distinct = list(dict.fromkeys(keys.values()))
    if not distinct:  # a sweep's runs: grouped by its settings
        return
    if len(distinct) == 1:
        for r in ungrouped:
            r.group = (
                alone(r)
                if alone is not None
                else f"{r.config.get('algo', 'ppo')} on {r.config.get('env_id', '?')}"
            )
        return
    configs = [json.loads(k) for k in distinct]
    differ = [k for k in configs[0] if any(c.get(k) != configs[0].get(k) for c in configs)]
    differ += sorted({k for c in configs for k in c} - set(configs[0]))
    for r in ungrouped:
        c = json.loads(keys[r.run_dir])
        r.group = ",".join(f"{k}={show_value(c.get(k))}" for k in differ)  # every key: names stay distinct


def decimate(x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * buckets`` points of the curve ``(x, y)``: each of ``buckets`` equal runs of points keeps
    its lowest and its highest, in order, so the envelope and every spike survive. NaNs are dropped."""
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) <= 2 * buckets:
        return x, y
    edges = np.linspace(0, len(x), buckets + 1).astype(np.int64)
    chosen = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        lo, hi = a + int(np.argmin(y[a:b])), a + int(np.argmax(y[a:b]))
        chosen += [min(lo, hi), max(lo, hi)] if lo != hi else [lo]
    idx = np.array(chosen)
    return x[idx], y[idx]


def _numbers(a: np.ndarray) -> list:
    """4 significant digits are plenty on a chart, and keep the page small; NaN is JSON's null."""
    return [None if not np.isfinite(v) else float(f"{v:.4g}") for v in np.asarray(a, dtype=np.float64)]


def _metric(run: RunData, key: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [m for m in run.metrics if type(m.get(key)) in (int, float)]  # JSON's numbers, not its booleans
    return (
        np.array([m["global_step"] for m in rows], dtype=np.float64),
        np.array([m[key] for m in rows], dtype=np.float64),
    )


def running_return(run: RunData) -> np.ndarray:
    """The mean of the last ``WINDOW`` returns at each finished episode."""
    return mean_of_last(run.steps, run.returns, run.steps, WINDOW) if len(run.steps) else run.returns


def _seconds_at(run: RunData, steps: np.ndarray) -> np.ndarray:
    """Training time at each env step, interpolated between the updates' (global_step, time_s)."""
    x = np.array([m["global_step"] for m in run.metrics if "time_s" in m], dtype=np.float64)
    t = np.array([m["time_s"] for m in run.metrics if "time_s" in m], dtype=np.float64)
    if not len(x):
        return np.full_like(steps, np.nan)
    return np.interp(steps, np.concatenate([[0.0], x]), np.concatenate([[0.0], t]))


def _band(curves: list[tuple[np.ndarray, np.ndarray]]) -> list:
    """A group's mean, lowest and highest run on a common grid, from each run's first point; a run that ended
    before the others keeps its last value, as in ``proxima plot`` (``plotting.held``)."""
    last = max((x.max() for x, _ in curves if len(x)), default=0.0)
    grid = np.linspace(0.0, last, GRID)
    ys = np.stack([held(on_grid(x, y, grid)) for x, y in curves])
    counted = np.isfinite(ys).sum(0) > 0
    mean, lo, hi = (np.full(GRID, np.nan) for _ in range(3))
    mean[counted] = np.nanmean(ys[:, counted], 0)
    lo[counted], hi[counted] = np.nanmin(ys[:, counted], 0), np.nanmax(ys[:, counted], 0)
    return [_numbers(grid), _numbers(mean), _numbers(lo), _numbers(hi)]


def _chart(key: str, title: str, xlabel: str, runs: list[RunData], groups: list[str], curve) -> dict | None:
    """A chart's line per run (``curve(run) -> (x, y)``), mean and band per group of several; None if none has it."""
    curves = [curve(r) for r in runs]
    if not any(len(x) for x, _ in curves):
        return None
    buckets = max(25, BUCKETS // len(runs))  # a page of many runs stays as small as one of a few
    tables = [[_numbers(dx), _numbers(dy)] for dx, dy in (decimate(x, y, buckets) for x, y in curves)]
    bands = []
    for g, name in enumerate(groups):
        members = [c for r, c in zip(runs, curves, strict=True) if r.group == name and len(c[0])]
        if len(members) > 1:
            bands.append({"group": g, "table": _band(members)})
    markers = [
        {"x": m["global_step"], "run": i, "kind": w["kind"], "text": w["text"]}
        for i, r in enumerate(runs)
        if xlabel == "env steps"
        for m in r.metrics
        for w in m.get("warnings", ())
        if WARNING_CHART.get(w["kind"], w["kind"]) == key
    ]
    return {
        "key": key,
        "title": title,
        "xlabel": xlabel,
        "healthy": HEALTHY.get(key, ""),
        "tables": tables,
        "bands": bands,
        "markers": markers,
    }


def _charts(runs: list[RunData], groups: list[str]) -> list[dict]:
    many = len(runs) > 1
    # one run: every episode (the envelope); several: each run's running mean, which overlays readably
    charts = [
        _chart(
            "episodic_return",
            "episodic return" + (f" (mean of the last {WINDOW})" if many else ""),
            "env steps",
            runs,
            groups,
            lambda r: (r.steps, running_return(r) if many else r.returns),
        ),
        _chart(
            "episodic_return",
            f"episodic return against training time (mean of the last {WINDOW})",
            "training seconds",
            runs,
            groups,
            lambda r: (_seconds_at(r, r.steps), running_return(r)),
        ),
    ]
    if not many:
        charts.insert(
            1,
            _chart(
                "episodic_return",
                f"episodic return, mean of the last {WINDOW}",
                "env steps",
                runs,
                groups,
                lambda r: (r.steps, running_return(r)),
            ),
        )
    others = sorted(
        {
            k
            for r in runs
            for m in r.metrics
            for k, v in m.items()
            if isinstance(v, int | float) and k not in NOT_CHARTED
        }
        - set(CHARTS)
    )
    for key in [*CHARTS[1:], *others]:
        title, note = (key, None) if key != "value_loss" else _value_loss_title(runs)
        chart = _chart(key, title, "env steps", runs, groups, lambda r, k=key: _metric(r, k))
        if chart is not None and note is not None:
            chart["note"] = note
        charts.append(chart)
    return [c for c in charts if c is not None]


def _value_loss_title(runs: list[RunData]) -> tuple[str, str | None]:
    """The value loss chart's title and the note under it: "normalized" where the runs' value_loss is in
    standardized units (``value_loss_note``), so that it is not read in the returns' units."""
    notes = [note for note in map(value_loss_note, (r.config for r in runs)) if note is not None]
    if not notes:
        return "value_loss", None
    if len(notes) == len(runs):
        return "value_loss (normalized)", notes[0]
    return f"value_loss (normalized in {len(notes)} of the {len(runs)} runs: those with norm_value)", notes[0]


def _settings(config: dict) -> list[list]:
    """``[name, value, non-default]`` for each setting, against the defaults of the run's algorithm."""
    try:
        defaults = resolve_args(algo=config.get("algo", "ppo")).flat()
    except UserError:
        defaults = {}
    return [
        [k, v, k in defaults and k not in NOT_SETTINGS and json.dumps(defaults[k]) != json.dumps(v)]
        for k, v in config.items()
    ]


def _summary(run: RunData) -> dict:
    last = run.metrics[-1] if run.metrics else {}
    steps, seconds = last.get("global_step", 0), last.get("time_s")
    final = float(run.returns[-WINDOW:].mean()) if len(run.returns) else None
    evals = [m["eval_return"] for m in run.metrics if m.get("eval_return") is not None]
    warnings = [{"step": m["global_step"], **w} for m in run.metrics for w in m.get("warnings", ())]
    return {
        "steps": steps,
        "seconds": seconds,
        "sps": steps / seconds if seconds else None,
        "episodes": len(run.returns),
        "final_return": final,
        "last_eval": evals[-1] if evals else None,
        "best_eval": max(evals) if evals else None,
        "warnings": warnings,
        "perturbations": run.perturbations,
    }


def _videos(runs: list[RunData]) -> tuple[list[dict], int]:
    """Videos to embed, within ``VIDEO_BYTES``: per run its evaluation's, then its training's last and first;
    and how many were left out."""
    chosen, total, left = [], 0, 0
    for i, r in enumerate(runs):
        evals = [v for v in r.videos if EVAL_VIDEOS in v]
        train = [v for v in r.videos if v not in evals]
        order = evals[:2] + train[-1:] + train[:1]
        for path in dict.fromkeys(order):
            size = os.path.getsize(path)
            if total + size > VIDEO_BYTES:
                left += 1
                continue
            with open(path, "rb") as f:
                src = "data:video/mp4;base64," + base64.b64encode(f.read()).decode()
            chosen.append({"run": i, "name": os.path.relpath(path, r.run_dir), "src": src})
            total += size
        left += len(set(r.videos) - set(order))
    return chosen, left


def report_data(runs: list[RunData], title: str, probes: list[dict], live: bool = False) -> dict:
    """The page's data. ``live``: the page of a run that rewrites it as it trains, which reloads itself while
    the run is in progress (any other page of a run in progress is as of the moment it was written)."""
    groups = list(dict.fromkeys(r.group for r in runs))
    videos, videos_left = _videos(runs)
    in_progress = any(r.status == "in progress" for r in runs)
    shown = [
        {
            "label": r.label,
            "run_dir": r.run_dir,
            "group": groups.index(r.group),
            "status": r.status,
            "summary": _summary(r),
            "settings": _settings(r.config),
            "machine": r.machine,
            "evaluation": r.evaluation,
            "solve": r.solve,
        }
        for r in runs
    ]
    charts = _charts(runs, groups)
    found = None if live else _statistics(runs)  # a live page is rewritten every REWRITE_S: kept cheap
    statistics = None
    if found is not None:
        charts[2:2] = _statistics_charts(found, groups)  # after the returns against steps and time
        statistics = {k: found[k] for k in ("tables", "footnote", "notes")}
    return {
        "title": title,
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "in_progress": in_progress,
        "reload_s": REWRITE_S if live and in_progress else None,
        "window": WINDOW,
        "groups": groups,
        "runs": shown,
        "statistics": statistics,
        "charts": charts,
        "probes": probes,
        "videos": videos,
        "videos_left": videos_left,
    }


def _statistics(runs: list[RunData]) -> dict | None:
    """``scores.page_statistics``: imported here, as that module reads runs with this one's functions."""
    from proxima.run.scores import page_statistics

    return page_statistics(runs)


def _statistics_charts(found: dict, groups: list[str]) -> list[dict]:
    """The performance profiles and the IQM curves of ``scores.page_statistics`` as charts of bands alone: each
    group's line is its statistic, its band the statistic's 95% interval."""
    charts = []
    for p in found["profiles"]:
        task = "every task" if p["task"] is None else p["task"]
        lines = [
            (line["setting"], p["taus"], line["fraction"], line["low"], line["high"])
            for line in p["settings"]
        ]
        note = "Each run's final score, as in the statistics' tables" + (
            " (normalized: 0 random, 1 the reference score)" if p["normalized"] else ""
        )
        charts.append(
            _band_chart(
                "performance_profile",
                f"performance profile, {task}: fraction of runs scoring above τ",
                "normalized score τ" if p["normalized"] else f"score τ on {task}",
                "τ",
                "fraction of runs",
                note,
                lines,
                groups,
            )
        )
    for c in found["curves"]:
        lines = [
            (line["setting"], line["steps"], line["iqm"], line["low"], line["high"]) for line in c["settings"]
        ]
        charts.append(
            _band_chart(
                "iqm_return",
                f"IQM of the seeds' episodic return (mean of the last {WINDOW}), {c['task']}",
                "env steps",
                "step",
                "IQM",
                "A run that ended before the others keeps its last value",
                lines,
                groups,
            )
        )
    return charts


def _band_chart(key, title, xlabel, xname, what, note, lines, groups) -> dict:
    """A chart with no run's line: per group (``lines``: its name, x, y and the interval's ends, None where
    it has none) its statistic ``what`` and its interval as the band."""
    bands = []
    for setting, x, y, low, high in lines:
        ends = [np.full(len(y), np.nan) if e is None else e for e in (low, high)]
        bands.append(
            {"group": groups.index(setting), "table": [_numbers(x), _numbers(y), *map(_numbers, ends)]}
        )
    return {
        "key": key,
        "title": title,
        "xlabel": xlabel,
        "xname": xname,
        "healthy": None,
        "note": f"{note}. Thick lines: each group's {what}; bands: its 95% confidence interval (stratified bootstrap).",
        "band_labels": [what, "CI low", "CI high"],
        "tables": [],
        "bands": bands,
        "markers": [],
    }


def render(data: dict) -> str:
    """The page: the template with the library, the styles and the data inlined."""
    static = resources.files("proxima") / "static"
    page = (static / "report.html").read_text()
    # JSON inside <script>: "</script" would end the element, "<!--" start a comment that swallows the page; in
    # JSON these characters only occur in strings, where \u escapes read the same
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    parts = {
        "TITLE": html.escape(f"proxima report: {data['title']}"),
        "UPLOT_CSS": (static / "uPlot.min.css").read_text(),
        "UPLOT_JS": (static / "uPlot.iife.min.js").read_text(),
        "DATA": payload,
    }
    return re.sub(r"/\*\{\{(\w+)\}\}\*/", lambda m: parts[m.group(1)], page)


def write_report(paths: list[str], output: str, status: str | None = None, live: bool = False) -> str:
    """Write the page of the runs under ``paths`` to ``output`` (atomically), and return it. ``status`` overrides
    every run's (a run's own last page, written as it stops on an error); ``live``: see ``report_data``."""
    if not output.endswith((".html", ".htm")):
        raise UserError(f"--output must be an .html file, got {output!r}")
    runs, title, probes = find_runs(paths)  # first: a missing run's directory is the one to name
    output_directory(output)
    if status:
        for run in runs:
            run.status = status
    write_text(output, render(report_data(runs, title, probes, live)))
    return output
