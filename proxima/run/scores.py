"""Each run's final score, the runs grouped by setting and task, the reference scores that normalize a task's
scores, and the statistics of ``proxima.run.statistics`` over them: for ``proxima stats``, the results of a
batched run, a sweep and a search, and the report page.

A run's score is the first of these that its directory holds (``--score auto``), or the one asked for:

1. ``solve.json``: ``proxima solve``'s 100 deterministic episodes of Gymnasium's env;
2. ``eval.json``: the last ``proxima eval --deterministic`` on the run's own env (a sampled one, or one on
   another env, does not count);
3. ``eval_return``: the last deterministic evaluation during training (``--eval-every``), of
   ``--eval-episodes`` episodes;
4. ``training``: the mean return of the run's last 20 training episodes, which the policy sampled its actions
   in; the sweeps' tables show the same number.

Runs are found as ``proxima report`` finds them (``report.read_runs``). On each task, the runs that differ only
in their seed form a setting, named as the report names its groups: a sweep's or a comparison's runs by the
sweep's setting, the others by the settings that tell them apart on that task, or by their algorithm where all
of the task's runs share their settings. So the same algorithm's runs on several tasks form one setting, whose
statistics over the tasks are of normalized scores.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from proxima.base.errors import UserError
from proxima.run import statistics
from proxima.run.plotting import held, on_grid
from proxima.run.report import (
    GRID,
    NOT_SETTINGS,
    WINDOW,
    RunData,
    group_runs,
    read_run,
    read_runs,
    running_return,
)

# --score's choices, each with the words that name it in a table, in auto's order
SOURCES = {
    "solve": "solve.json",
    "eval": "eval.json",
    "tune-eval": "tune_eval",
    "eval-return": "eval_return",
    "training": "training return",
}
# the same, in a sentence
SAID = {
    "solve": "solve.json's deterministic episodes",
    "eval": "eval.json's deterministic episodes",
    "tune-eval": "proxima tune's deterministic evaluation at the final budget",
    "eval-return": "the last --eval-every evaluation, deterministic",
    "training": "the mean return of the last 20 training episodes",
}
REFERENCE_SCORES = "reference_scores.json"  # in this package: the tasks' random and reference scores
PROFILE_POINTS = 101  # the taus of a performance profile


@dataclass(frozen=True)
class RunScore:
    run_dir: str
    score: float
    source: str  # one of SOURCES
    steps: int  # env steps trained, at the last update logged
    status: str  # finished, in progress, stopped (report._status)
    data: RunData = field(repr=False, compare=False)  # its curve, for the IQM over steps


@dataclass
class Group:
    """The scored runs of one setting on one task."""

    setting: str
    task: str
    runs: list[RunScore] = field(default_factory=list)

    @property
    def scores(self) -> np.ndarray:
        return np.array([r.score for r in self.runs], dtype=np.float64)


def _number(value) -> float | None:
    """A finite JSON number (not a boolean), else None: a run's files may come from a stranger."""
    return float(value) if type(value) in (int, float) and math.isfinite(value) else None


def _deterministic_mean(evaluation: dict | None) -> float | None:
    if evaluation is None or evaluation.get("deterministic") is not True:
        return None
    if "env_id" in evaluation or "env_kwargs" in evaluation:  # played on another env than the run's
        return None
    return _number(evaluation.get("mean"))


def _last(run: RunData, key: str) -> float | None:
    """The last finite ``key`` that the run's metrics.jsonl logged."""
    return next((v for v in (_number(m.get(key)) for m in reversed(run.metrics)) if v is not None), None)


def final_score(run: RunData, source: str = "auto") -> tuple[float, str] | None:
    """The run's score and its source (a key of ``SOURCES``): the first that it holds, for ``"auto"``; None
    where it holds none (or not the one asked for)."""
    found = {
        "solve": lambda: _deterministic_mean(run.solve),
        "eval": lambda: _deterministic_mean(run.evaluation),
        "tune-eval": lambda: _last(run, "tune_eval"),
        "eval-return": lambda: _last(run, "eval_return"),
        "training": lambda: float(run.returns[-WINDOW:].mean()) if len(run.returns) else None,
    }
    for name in SOURCES if source == "auto" else [source]:
        value = found[name]()
        if value is not None and math.isfinite(value):
            return value, name
    return None


def task_of(config: dict) -> str:
    """A run's task: its env id, with its env kwargs where it has any (they may change the task's scale)."""
    env_id, kwargs = str(config.get("env_id", "?")), config.get("env_kwargs")
    return f"{env_id} {json.dumps(kwargs, sort_keys=True)}" if kwargs else env_id


def _missing(run: RunData, source: str) -> str:
    what = {
        "solve": "no deterministic solve.json (proxima solve writes it)",
        "eval": "no deterministic eval.json of its own env (proxima eval RUN_DIR --deterministic writes it)",
        "tune-eval": "no tune_eval in its metrics.jsonl (proxima tune's default score logs it)",
        "eval-return": "no eval_return in its metrics.jsonl (train with --eval-every N)",
        "training": "no finished training episode",
    }[source]
    return (
        f"{run.run_dir} has {what}; give --score auto to take each run's first score of: {', '.join(SOURCES)}"
    )


def scored_groups(paths: list[str], source: str = "auto") -> tuple[list[Group], list[str]]:
    """The groups of the runs under ``paths`` with their scores, in the order first found; and notes on the
    runs left out (failed, or with no score) and the groups whose runs are not all finished."""
    runs, _, _ = read_runs(paths)
    if not runs:
        raise UserError(
            f"no run found under {', '.join(paths)}: give run, sweep, compare or tune directories"
        )
    by_task: dict[str, list[RunData]] = {}
    for run in runs:
        by_task.setdefault(task_of(run.config), []).append(run)
    for task_runs in by_task.values():
        group_runs(task_runs, alone=lambda r: str(r.config.get("algo", "ppo")))
    return score_runs(runs, source)


def score_runs(runs: list[RunData], source: str = "auto") -> tuple[list[Group], list[str]]:
    """``scored_groups`` of runs already in their groups (``RunData.group``): a sweep's settings, a search's
    samples, a report page's groups."""
    groups: dict[tuple[str, str], Group] = {}
    configs: dict[tuple[str, str], dict[str, dict]] = {}  # each group's distinct settings, but the seed's
    notes, failed, unscored = [], 0, 0
    for run in runs:
        if run.status == "failed":
            failed += 1
            continue
        scored = final_score(run, source)
        if scored is None:
            if source != "auto":
                raise UserError(_missing(run, source))
            unscored += 1
            continue
        steps = run.metrics[-1].get("global_step", 0) if run.metrics else 0
        key = (run.group, task_of(run.config))
        groups.setdefault(key, Group(*key)).runs.append(
            RunScore(run.run_dir, scored[0], scored[1], int(steps) if _number(steps) else 0, run.status, run)
        )
        settings = {k: v for k, v in run.config.items() if k not in NOT_SETTINGS}
        configs.setdefault(key, {})[json.dumps(settings, sort_keys=True)] = settings
    if failed:
        notes.append(f"{failed} failed run{'s' if failed > 1 else ''} left out")
    if unscored:
        notes.append(f"{unscored} run{'s' if unscored > 1 else ''} with no finished episode left out")
    if not groups:
        raise UserError(f"none of the {len(runs)} runs found has a score: {'; '.join(notes)}")
    for key, g in groups.items():
        notes += _group_notes(g, list(configs[key].values()))
    return list(groups.values()), notes


def _group_notes(g: Group, configs: list[dict]) -> list[str]:
    """What a reader of ``g``'s statistics should know: its runs' scores are of different kinds, its runs
    differ in more than their seed (two sweeps' settings of one name), or some did not finish."""
    notes, where = [], f"{g.setting} on {g.task}"
    sources = sorted({r.source for r in g.runs})
    if len(sources) > 1:
        kinds = ", ".join(SOURCES[s] for s in sources)
        notes.append(f"{where}: its runs' scores are of different kinds ({kinds}); --score names one")
    if len(configs) > 1:
        differ = sorted({k for c in configs for k in c if any(c.get(k) != o.get(k) for o in configs)})
        notes.append(
            f"{where}: its runs differ in more than their seed ({', '.join(differ)}): settings of one name from "
            "different sweeps or comparisons, whose statistics are of them all"
        )
    unfinished = sum(r.status != "finished" for r in g.runs)
    if unfinished:
        notes.append(
            f"{where}: {unfinished} of its {len(g.runs)} runs did not finish (in progress or stopped): scored as "
            "they stand"
        )
    return notes


def reference_scores() -> dict[str, dict]:
    """The tasks' random and reference scores (``proxima/run/reference_scores.json``, docs/STATISTICS.md): the
    scores that normalize a task's scores to 0 and 1."""
    data = json.loads((resources.files("proxima.run") / REFERENCE_SCORES).read_text())
    atari, tasks = data["atari"], dict(data["tasks"])
    for game, known in atari["games"].items():
        # a human-normalized score: 0 the random agent's, 1 the human tester's
        entry = {
            "random": known["random"],
            "reference": known["human"],
            "random_source": f"the random agent's score of {game} in {atari['source']}",
            "reference_source": f"the human tester's score of {game} in {atari['source']}",
        }
        for env_id in (f"ALE/{game}-v5", f"{game}NoFrameskip-v4"):
            tasks.setdefault(env_id, entry)
    return tasks


def _range(values: list[int]) -> list[int]:
    return [min(values), max(values)]


def summarize(
    groups: list[Group], *, baseline: str | None = None, seed: int = 0, table: dict[str, dict] | None = None
) -> dict:
    """The statistics of ``groups``, as ``proxima stats --json`` writes them: per setting and task in the task's
    own units (the optimality gap against the task's reference score, where ``table`` has one); per setting over
    every task, of normalized scores, where there are several tasks, each with its reference, and the setting has
    runs on all; each setting's probability of improvement over ``baseline`` (default: the first setting) on the
    tasks both have runs on; and notes on the statistics over the tasks that could not be computed."""
    table = reference_scores() if table is None else table
    settings = list(dict.fromkeys(g.setting for g in groups))
    tasks = list(dict.fromkeys(g.task for g in groups))
    if baseline is not None and baseline not in settings:
        raise UserError(
            f"--baseline {baseline!r} is not a setting of these runs; they are: {', '.join(map(repr, settings))}"
        )
    rows = []
    for g in groups:
        known = table.get(g.task)
        rows.append(
            {
                "setting": g.setting,
                "task": g.task,
                "runs": len(g.runs),
                "steps": _range([r.steps for r in g.runs]),
                "score": sorted({SOURCES[r.source] for r in g.runs}),
                "random": known["random"] if known else None,
                "reference": known["reference"] if known else None,
                **{
                    name: e.to_json()
                    for name, e in statistics.estimates(
                        [g.scores], gamma=known["reference"] if known else None, seed=seed
                    ).items()
                },
                "per_run": [
                    {"run_dir": r.run_dir, "score": r.score, "source": SOURCES[r.source], "status": r.status}
                    for r in g.runs
                ],
            }
        )
    aggregates, notes = [], []
    unknown = [t for t in tasks if t not in table]
    if len(tasks) > 1 and unknown:
        notes.append(
            f"no statistics over the tasks: {', '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} no "
            "reference score to normalize by (docs/STATISTICS.md)"
        )
    if len(tasks) > 1 and not unknown:
        for s in settings:
            mine = {g.task: g for g in groups if g.setting == s}
            if set(mine) != set(tasks):
                notes.append(
                    f"{s} has runs on {len(mine)} of the {len(tasks)} tasks: no statistics over the tasks"
                )
                continue
            scores = [
                statistics.normalized(mine[t].scores, table[t]["random"], table[t]["reference"])
                for t in tasks
            ]
            aggregates.append(
                {
                    "setting": s,
                    "tasks": tasks,
                    "runs": sum(len(x) for x in scores),
                    **{n: e.to_json() for n, e in statistics.estimates(scores, gamma=1.0, seed=seed).items()},
                }
            )
    improvements = []
    base = baseline or settings[0]
    of = {(g.setting, g.task): g for g in groups}
    for s in settings:
        common = [t for t in tasks if (s, t) in of and (base, t) in of]
        if s == base or not common:
            continue
        p = statistics.improvement(
            [of[s, t].scores for t in common], [of[base, t].scores for t in common], seed=seed
        )
        improvements.append({"setting": s, "baseline": base, "tasks": common, "probability": p.to_json()})
    return {
        "format": "proxima-stats",
        "version": 1,
        "confidence": statistics.CONFIDENCE,
        "interval": f"stratified bootstrap, percentile (scipy.stats.bootstrap, {statistics.RESAMPLES} resamples, seed {seed})",
        "groups": rows,
        "aggregates": aggregates,
        "improvements": improvements,
        "notes": notes,
    }


def profiles(groups: list[Group], table: dict[str, dict] | None = None) -> list[dict]:
    """The performance profiles of ``groups``' settings (``statistics.performance_profile``): one over every
    task, of normalized scores, where there are several tasks each with its reference score (of the settings
    with runs on all, as ``summarize``'s statistics over the tasks), else one per task in the task's units.
    Each: its ``task`` (None: every task), ``normalized``, the ``taus`` (from the lowest score to the highest;
    normalized, from 0 to 1 at least) and per setting its ``fraction`` above each tau, with ``low`` and
    ``high`` (None: no interval)."""
    table = reference_scores() if table is None else table
    tasks = list(dict.fromkeys(g.task for g in groups))
    of = {(g.setting, g.task): g for g in groups}
    panels: list[tuple[str | None, dict[str, list[np.ndarray]]]]
    panels = [(t, {g.setting: [g.scores] for g in groups if g.task == t}) for t in tasks]
    if len(tasks) > 1 and all(t in table for t in tasks):
        norm = {t: (table[t]["random"], table[t]["reference"]) for t in tasks}
        every = {
            s: [statistics.normalized(of[s, t].scores, *norm[t]) for t in tasks]
            for s in dict.fromkeys(g.setting for g in groups)
            if all((s, t) in of for t in tasks)
        }
        panels = [(None, every)] if every else panels
    found = []
    for task, scores in panels:
        pooled = np.concatenate([x for tasks_of in scores.values() for x in tasks_of])
        low, high = pooled.min(), pooled.max()
        if task is None:
            low, high = min(low, 0.0), max(high, 1.0)
        elif low == high:  # every run scored the same
            low, high = low - 1, high + 1
        taus = np.linspace(low, high, PROFILE_POINTS)
        lines = []
        for setting, x in scores.items():
            fraction, lo, hi = statistics.performance_profile(x, taus)
            lines.append(
                {"setting": setting, "runs": sum(map(len, x)), "fraction": fraction, "low": lo, "high": hi}
            )
        found.append({"task": task, "normalized": task is None, "taus": taus, "settings": lines})
    return found


def iqm_curves(groups: list[Group], points: int = GRID) -> list[dict]:
    """The IQM over each setting's runs of their running return (the mean of their last ``WINDOW`` episodes,
    as the report draws it) at each of ``points`` steps from 0 to the setting's last, with its 95% band
    (``statistics.iqm_over_steps``); a run that ended before the others keeps its last value, as in the
    report's bands (``plotting.held``). One per task: its ``task`` and per setting its ``steps``, ``iqm``,
    ``low`` and ``high`` (None: one run, no band)."""
    found = []
    for task in dict.fromkeys(g.task for g in groups):
        lines = []
        for g in (g for g in groups if g.task == task):
            runs = [
                r.data for r in g.runs if len(r.data.steps)
            ]  # a run with no finished episode has no curve
            if not runs:
                continue
            # and each run's last episode, as seeds_curve's grid has them: a run whose episodes all ended at
            # one step (its envs' first episodes, in one update) has a value there to hold, not none
            ends = [float(r.steps.max()) for r in runs]
            grid = np.union1d(np.linspace(0.0, max(ends), points), ends)
            curves = np.stack([held(on_grid(r.steps, running_return(r), grid)) for r in runs])
            iqm, low, high = statistics.iqm_over_steps(curves)
            lines.append(
                {"setting": g.setting, "runs": len(runs), "steps": grid, "iqm": iqm, "low": low, "high": high}
            )
        if lines:
            found.append({"task": task, "settings": lines})
    return found


def steps_range(steps: list[int]) -> str:
    low, high = steps
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def tables(summary: dict) -> list[dict]:
    """``summarize``'s numbers as the tables that ``proxima stats`` prints, the results files write and the
    report page shows: each a ``title``, its ``head`` and its ``rows``, of strings."""
    names = ["IQM", "median", "mean", "optimality gap"]
    found = [
        {
            "title": "final scores, in each task's units",
            "head": ["setting", "task", "runs", "steps", "score", *names],
            "rows": [
                [g["setting"], g["task"], str(g["runs"]), steps_range(g["steps"]), ", ".join(g["score"])]
                + [with_interval(g.get(k)) for k in statistics.NAMES]
                for g in summary["groups"]
            ],
        }
    ]
    if summary["aggregates"]:
        found.append(
            {
                "title": "over every task, normalized (0: random, 1: reference score)",
                "head": ["setting", "tasks", "runs", *names],
                "rows": [
                    [a["setting"], str(len(a["tasks"])), str(a["runs"])]
                    + [with_interval(a[k]) for k in statistics.NAMES]
                    for a in summary["aggregates"]
                ],
            }
        )
    if summary["improvements"]:
        base = summary["improvements"][0]["baseline"]
        found.append(
            {
                "title": "probability of improvement",
                "head": ["setting", "tasks", f"P(setting > {base})"],
                "rows": [
                    [i["setting"], str(len(i["tasks"])), with_interval(i["probability"])]
                    for i in summary["improvements"]
                ],
            }
        )
    return found


def footnote(summary: dict) -> str:
    return (
        f"[…]: {summary['confidence']:.0%} confidence intervals, {summary['interval']}; optimality gap: how far the "
        "scores fall short of the task's reference score, on average (– where the task has none); docs/STATISTICS.md"
    )


def markdown(summary: dict) -> list[str]:
    """``tables(summary)`` in Markdown, with the footnote and the notes."""
    lines = []
    for t in tables(summary):
        lines += [f"{t['title']}:", "", "| " + " | ".join(t["head"]) + " |", "|" + "---|" * len(t["head"])]
        lines += ["| " + " | ".join(row) + " |" for row in t["rows"]] + [""]
    return [*lines, footnote(summary), *(line for n in summary["notes"] for line in ("", f"note: {n}"))]


def results_statistics(named: dict[str, list[str]]) -> tuple[dict | None, str]:
    """The statistics of a sweep's or a search's runs (``named``: each setting's or sample's finished run
    directories), as ``proxima stats`` computes them, each setting against the first: for its
    ``results.json`` (None where no run has a score, or SciPy is missing), and the section of its
    ``results.md`` that gives them."""
    heading = "## Statistics of the final scores\n\n"
    if not any(named.values()):
        return None, f"{heading}No run finished: no statistics.\n"
    try:
        statistics.scipy_stats()
        runs = []
        for name, run_dirs in named.items():
            for run_dir in run_dirs:
                runs.append(read_run(run_dir))
                runs[-1].group = name
        groups, notes = score_runs(runs)
    except UserError as e:  # no SciPy, or no score: the table above is still the result
        return None, f"{heading}No statistics: {e}\n"
    summary = summarize(groups)
    summary["notes"] = notes + summary["notes"]
    kinds = {r.source for g in groups for r in g.runs}
    said = "; ".join(SAID[k] for k in SOURCES if k in kinds)
    text = (
        f"{heading}Of each setting's final scores ({said}), over its runs that finished, as `proxima stats` "
        "computes them: the IQM, median, mean and optimality gap with their 95% confidence intervals, and "
        "each setting's probability of improving on the first one above.\n\n"
    )
    return summary, text + "\n".join(markdown(summary)) + "\n"


def page_statistics(runs: list[RunData]) -> dict | None:
    """The statistics that the report page shows where one of its groups has several runs on a task: the
    ``tables``, the ``footnote``, the ``notes``, the ``profiles`` and the IQM ``curves`` of its runs in their
    groups; only a note where SciPy is missing; None where no group has several runs, or no run a score."""
    try:
        groups, notes = score_runs(runs)
    except UserError:  # no run with a score
        return None
    if not any(len(g.runs) > 1 for g in groups):
        return None
    try:
        statistics.scipy_stats()
    except UserError as e:
        return {"tables": [], "footnote": "", "notes": [str(e)], "profiles": [], "curves": []}
    summary = summarize(groups)
    return {
        "tables": tables(summary),
        "footnote": footnote(summary),
        "notes": notes + summary["notes"],
        "profiles": profiles(groups),
        "curves": iqm_curves(groups),
    }


def seeds_iqm(runs: list[RunData], parent: str) -> tuple[dict | None, str]:
    """A batched run's seeds' IQM with its 95% interval, for its ``results.json`` (None where no seed has a
    score, or SciPy is missing), and the line that says it in its ``results.md``."""
    scored = [s for s in (final_score(r) for r in runs) if s is not None]
    if not scored:
        return None, "No seed has a score (no evaluation, no finished episode): no IQM"
    try:
        estimate = statistics.interval("iqm", [[s for s, _ in scored]])
    except UserError as e:  # no SciPy: each seed's own files are what matter
        return None, f"No IQM of the seeds' scores: {e}"
    kinds = sorted({SOURCES[k] for _, k in scored})
    said_kinds = "; ".join(SAID[k] for k in sorted({k for _, k in scored}))
    said = (
        f"IQM of the {len(scored)} seeds' scores ({said_kinds}) [95% CI, stratified bootstrap]: "
        f"{with_interval(estimate.to_json())}; `proxima stats {parent}` adds the median, mean and optimality gap "
        "(docs/STATISTICS.md)"
    )
    return {"score": kinds, "seeds": len(scored), **estimate.to_json()}, said


def number(value: float | None, scale: float | None = None) -> str:
    """Four significant digits of ``scale`` (default: of the value itself), with no exponent: 487.3, 3542,
    0.9532, -3.752; None as a dash. An interval's ends take its value's or its widest end's scale, so that
    all three have as many decimals."""
    if value is None:
        return "–"
    scale = abs(value if scale is None else scale)
    if not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 3 - math.floor(math.log10(scale))) if scale else 0}f}"


def with_interval(estimate: dict | None) -> str:
    """``value [low, high]``, with as many decimals each; a value alone where there is no interval."""
    if estimate is None:
        return "–"
    if estimate["low"] is None:
        return f"{number(estimate['value'])} (one run: no CI)"
    scale = max(abs(estimate[k]) for k in ("value", "low", "high"))
    low, value, high = (number(estimate[k], scale) for k in ("low", "value", "high"))
    return f"{value} [{low}, {high}]"
