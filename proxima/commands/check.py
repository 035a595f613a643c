"""``proxima check MODULE[:FUNCTION]``: grade a learner's own functions against proxima's answers, on the source
documents' own test inputs (proxima.run.grading)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base.errors import UserError
from proxima.commands.argv import parse

CHECK_ABOUT = """Calls each function of MODULE that one of the source documents asks for (the PPO tutorial's
compute_advantages, calc_policy_loss, ..., the homework's TrajData.calc_gae and Agent.get_loss, the walk-through's
wrappers) by keyword, with the document's parameter names, on the documents' own test inputs and seeded random
batches, and prints per function PASS, or the first mismatch with both values and, where the mistake is a common
one, a hint. Exit status 0 when all pass, 1 when one fails, 2 for bad input. docs/tutorials/check.md has the
list and the tolerances.

--probes then trains proxima's probes (those of proxima probe, the vector probes 1-5, or the ones named) with
MODULE's compute_advantages, calc_policy_loss, calc_value_function_loss, calc_entropy_loss and Agent in proxima's
loop in place of its own, prints the probe table, and names the part the first failure points to; a probe that
fails is exit status 1 too."""


@dataclass
class CheckArgs:
    target: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="MODULE[:FUNCTION]")]
    """a .py file's path or a module's name (from the working directory too), and optionally one function to
    grade: student.py, student.py:compute_advantages, homework:TrajData.calc_gae"""

    probes: Annotated[tuple[str, ...] | None, tyro.conf.arg(metavar="[NAME ...]")] = None
    """after grading, train these probes (none named: 1 2 3 4 5) with MODULE's pieces in proxima's loop"""

    total_timesteps: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """with --probes: every probe's budget in env steps (default: each probe's own, as proxima probe's)"""


# FUNCTION is a name, or Class.method; what precedes the last such colon is the module (a path may hold colons)
_FUNCTION = re.compile(r"(?P<module>.+):(?P<function>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")


def _every_probe(argv: list[str]) -> list[str]:
    """``argv`` with a bare ``--probes`` (no name after it) naming the vector probes: parse refuses a flag of
    several values given none, which for most (``--hidden-sizes``) would be a slip."""
    from proxima.scale.checking import VECTOR_PROBES

    out = []
    for i, word in enumerate(argv):
        out.append(word)
        if word == "--probes" and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out += VECTOR_PROBES
    return out


def run(argv: list[str]) -> int:
    from proxima.run.grading import check, grader_named
    from proxima.scale.checking import chosen_probes, in_the_loop_line, probe_pieces
    from proxima.scale.probe import print_table

    args = parse(CheckArgs, _every_probe(argv), "proxima check", description=CHECK_ABOUT)
    split = _FUNCTION.fullmatch(args.target)
    module, function = (split["module"], split["function"]) if split else (args.target, None)
    if function is not None:
        grader_named(function)  # an unknown name is refused before the module runs
    if args.probes is None and args.total_timesteps is not None:
        raise UserError("--total-timesteps is the probes' budget: give --probes too")
    names = None if args.probes is None else chosen_probes(args.probes, args.total_timesteps)
    grades = check(module, only=function)
    print(grades.found_line())
    for line in grades.lines():
        print(line)
    if names is None:
        return grades.exit_status
    if grades.pieces:
        print(in_the_loop_line(grades, names), flush=True)
    graded = len(grades.results)
    grades = probe_pieces(grades, names, args.total_timesteps)
    for result in grades.results[graded:]:  # the probes' own line: refused, or nothing to probe
        print("\n".join(result.lines()))
    if grades.probes:
        print_table(grades.probes)
    return grades.exit_status
