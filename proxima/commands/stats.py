"""``proxima stats DIR...``: the IQM, median, mean and optimality gap of runs' final scores, per setting and task,
with stratified bootstrap confidence intervals, and each setting's probability of improvement over a baseline."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from proxima.base.errors import UserError
from proxima.commands.argv import parse

STATS_ABOUT = """The statistics of Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (2021), of the
final scores of the runs under DIR...: per setting and task, the interquartile mean (IQM), the median, the mean and
the optimality gap (against the task's reference score), each with its 95% stratified bootstrap confidence
interval; over several tasks, the same of normalized scores (0: a random policy, 1: the task's reference score);
and each setting's probability of improving on the baseline. docs/STATISTICS.md says how each is computed and
where the reference scores come from. Needs SciPy (the stats extra)."""


@dataclass
class StatsArgs:
    paths: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="DIR [DIR ...]", help_behavior_hint="(required)"),
    ]
    """run directories, a `--num-seeds` run's directory, sweep, compare or tune directories, or directories of runs"""
    score: Literal["auto", "solve", "eval", "eval-return", "training"] = "auto"
    """each run's score: auto takes the first it has of solve (solve.json), eval (a deterministic eval.json),
    eval-return (the last --eval-every evaluation) and training (the mean return of its last 20 episodes)"""
    baseline: str | None = None
    """the setting that the others' probability of improvement is against (default: the first setting)"""
    json: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """also write every number, and each run's score, to this JSON file"""


def run(argv: list[str]) -> int:
    from proxima.base import files
    from proxima.run import statistics
    from proxima.run.scores import scored_groups, summarize

    args = parse(StatsArgs, argv, "proxima stats", description=STATS_ABOUT)
    statistics.scipy_stats()  # before the runs are read: without SciPy there is nothing to compute
    if args.json is not None:
        if not args.json.endswith(".json"):
            raise UserError(f"--json must be a .json file, got {args.json!r}")
        files.output_directory(args.json)
    groups, notes = scored_groups(list(args.paths), args.score)
    summary = summarize(groups, baseline=args.baseline)
    for note in notes + summary["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print_tables(summary)
    if args.json is not None:
        files.write_json(args.json, summary)
        print(f"wrote {args.json}")
    return 0


def _steps(steps: list[int]) -> str:
    low, high = steps
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def print_tables(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from proxima.run.scores import with_interval

    console = Console(width=200) if not Console().is_terminal else Console()
    names = ("IQM", "median", "mean", "optimality gap")
    keys = ("iqm", "median", "mean", "optimality_gap")
    table = Table(
        "setting", "task", "runs", "steps", "score", *names, title="final scores, in each task's units"
    )
    for g in summary["groups"]:
        table.add_row(
            g["setting"],
            g["task"],
            str(g["runs"]),
            _steps(g["steps"]),
            ", ".join(g["score"]),
            *(with_interval(g.get(k)) for k in keys),
        )
    console.print(table)
    if summary["aggregates"]:
        table = Table(
            "setting",
            "tasks",
            "runs",
            *names,
            title="over every task, normalized (0: random, 1: reference score)",
        )
        for a in summary["aggregates"]:
            table.add_row(
                a["setting"], str(len(a["tasks"])), str(a["runs"]), *(with_interval(a[k]) for k in keys)
            )
        console.print(table)
    if summary["improvements"]:
        base = summary["improvements"][0]["baseline"]
        table = Table("setting", "tasks", f"P(setting > {base})", title="probability of improvement")
        for i in summary["improvements"]:
            table.add_row(i["setting"], str(len(i["tasks"])), with_interval(i["probability"]))
        console.print(table)
    console.print(
        f"[…]: {summary['confidence']:.0%} confidence intervals, {summary['interval']}; optimality gap: how far the "
        "scores fall short of the task's reference score, on average (– where the task has none); docs/STATISTICS.md",
        markup=False,
    )
