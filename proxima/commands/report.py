"""``proxima report DIR...``: one self-contained HTML page of runs, a sweep or a comparison."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import files
from proxima.commands.argv import parse


@dataclass
class ReportArgs:
    paths: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="DIR [DIR ...]", help_behavior_hint="(required)"),
    ]
    """run directories (`proxima train`'s), sweep or compare directories, or a directory of runs (as `proxima
    probe --run-dir` writes): the runs that differ only in their seed form a group, with its mean and band"""
    output: str | None = None
    """the HTML file to write (default: DIR/report.html for one directory, else report.html here)"""


def run(argv: list[str]) -> int:
    from proxima.run.report import write_report

    args = parse(ReportArgs, argv, "proxima report")
    output = args.output or (
        os.path.join(args.paths[0], files.REPORT) if len(args.paths) == 1 else files.REPORT
    )
    print(f"wrote {write_report(list(args.paths), output)}")
    return 0
