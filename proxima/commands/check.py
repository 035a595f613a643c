"""``proxima check MODULE[:FUNCTION]``: grade a learner's own functions against proxima's answers, on the source
documents' own test inputs (proxima.run.grading)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.commands.argv import parse

CHECK_ABOUT = """Calls each function of MODULE that one of the source documents asks for (the PPO tutorial's
compute_advantages, calc_policy_loss, ..., the homework's TrajData.calc_gae and Agent.get_loss, the walk-through's
wrappers) by keyword, with the document's parameter names, on the documents' own test inputs and seeded random
batches, and prints per function PASS, or the first mismatch with both values and, where the mistake is a common
one, a hint. Exit status 0 when all pass, 1 when one fails, 2 for bad input. docs/tutorials/check.md has the
list and the tolerances."""


@dataclass
class CheckArgs:
    target: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="MODULE[:FUNCTION]")]
    """a .py file's path or a module's name (from the working directory too), and optionally one function to
    grade: student.py, student.py:compute_advantages, homework:TrajData.calc_gae"""


# FUNCTION is a name, or Class.method; what precedes the last such colon is the module (a path may hold colons)
_FUNCTION = re.compile(r"(?P<module>.+):(?P<function>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")


def run(argv: list[str]) -> int:
    from proxima.run.grading import check, grader_named

    args = parse(CheckArgs, argv, "proxima check", description=CHECK_ABOUT)
    split = _FUNCTION.fullmatch(args.target)
    module, function = (split["module"], split["function"]) if split else (args.target, None)
    if function is not None:
        grader_named(function)  # an unknown name is refused before the module runs
    grades = check(module, only=function)
    print(grades.found_line())
    for line in grades.lines():
        print(line)
    return grades.exit_status
