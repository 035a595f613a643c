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
and each setting's probability of improving on the baseline; --plot draws the performance profiles and each
setting's IQM over steps with their bands. docs/STATISTICS.md says how each is computed and where the reference
scores come from. Needs SciPy (the stats extra)."""


@dataclass
class StatsArgs:
    paths: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="DIR [DIR ...]", help_behavior_hint="(required)"),
    ]
    """run directories, a `--num-seeds` run's directory, sweep, compare or tune directories, or directories of runs"""
    score: Literal["auto", "solve", "eval", "tune-eval", "eval-return", "training"] = "auto"
    """each run's score: auto takes the first it has of solve (solve.json), eval (a deterministic eval.json),
    tune-eval (proxima tune's evaluation at the final budget), eval-return (the last --eval-every evaluation) and training (the mean return of its last 20 episodes)"""
    baseline: str | None = None
    """the setting that the others' probability of improvement is against (default: the first setting)"""
    json: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """also write every number, and each run's score, to this JSON file"""
    plot: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """also draw the performance profiles and each setting's IQM over steps with their 95% bands in this PNG
    (needs matplotlib)"""


def run(argv: list[str]) -> int:
    from proxima.base import files
    from proxima.run import statistics
    from proxima.run.plotting import plot_statistics, pyplot
    from proxima.run.scores import iqm_curves, profiles, scored_groups, summarize

    args = parse(StatsArgs, argv, "proxima stats", description=STATS_ABOUT)
    statistics.scipy_stats()  # before the runs are read: without SciPy there is nothing to compute
    if args.json is not None:
        if not args.json.endswith(".json"):
            raise UserError(f"--json must be a .json file, got {args.json!r}")
        files.output_directory(args.json)
    if args.plot is not None:
        if not args.plot.endswith(".png"):
            raise UserError(f"--plot must be a .png file, got {args.plot!r}")
        files.output_directory(args.plot)
        pyplot()  # before the runs are read, as SciPy
    groups, notes = scored_groups(list(args.paths), args.score)
    summary = summarize(groups, baseline=args.baseline)
    for note in notes + summary["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print_tables(summary)
    if args.json is not None:
        files.write_json(args.json, summary)
        print(f"wrote {args.json}")
    if args.plot is not None:
        plot_statistics(profiles(groups), iqm_curves(groups), args.plot)
        print(f"wrote {args.plot}")
    return 0


def print_tables(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from proxima.run.scores import footnote, tables

    console = Console(width=200) if not Console().is_terminal else Console()
    for t in tables(summary):
        table = Table(*t["head"], title=t["title"])
        for row in t["rows"]:
            table.add_row(*row)
        console.print(table)
    console.print(footnote(summary), markup=False)
