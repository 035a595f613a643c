"""``proxima plot RUN_DIR...``: overlay the learning curves of runs in one PNG."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import files
from proxima.base.errors import UserError
from proxima.commands.argv import parse


@dataclass
class PlotArgs:
    run_dirs: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="RUN_DIR [RUN_DIR ...]", help_behavior_hint="(required)"),
    ]
    """one or more run directories written by `proxima train`"""
    output: str = files.LEARNING_CURVES
    """the PNG to write"""


def run(argv: list[str]) -> int:
    from proxima.base.files import distinct_dirs, seed_run_dirs
    from proxima.run.plotting import plot_runs

    args = parse(PlotArgs, argv, "proxima plot")
    if not args.output.endswith(".png"):
        raise UserError(f"--output must be a .png file, got {args.output!r}")
    run_dirs = distinct_dirs(list(args.run_dirs))
    labels = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    if len(set(labels)) < len(labels):  # same last component: label by the whole path
        labels = run_dirs
    # a batched run's directory is its seeds': one line, with a band over them
    groups = {label: seed_run_dirs(d) or [d] for label, d in zip(labels, run_dirs, strict=True)}
    plot_runs(groups, args.output)
    print(f"wrote {args.output}")
    return 0
