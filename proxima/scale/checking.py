"""``proxima check MODULE --probes`` and ``proxima.check(..., probes=...)``: a learner's functions graded against
proxima's answers (``proxima.run.grading``), then proxima's probes (``proxima.scale.probe``) trained with the
learner's pieces in the loop, in place of proxima's own: the PPO tutorial's ``compute_advantages`` and three
losses through the custom seam (``proxima.algo.custom``) and its ``Agent`` as the actor-critic
(``proxima.policy.user``). A grader compares numbers on fixed inputs; a probe shows what the piece does to
learning, and its table names the part a failure points to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from proxima.base.errors import UserError, raised
from proxima.run.config import PPOArgs
from proxima.run.grading import IN_THE_LOOP, Grades, Result
from proxima.run.grading import check as grade_functions
from proxima.scale.probe import PROBES, run_probes

# The vector probes: the PPO tutorial's five, whose envs take the tutorial's Discrete actions and 1-number
# observations (the continuous probe needs a Box of actions, which the tutorial's Agent and losses do not take)
VECTOR_PROBES = [p.name for p in PROBES if p.name != "continuous"]


def check(
    source: Any,
    only: str | None = None,
    probes: bool | Sequence[str] = False,
    total_timesteps: int | None = None,
) -> Grades:
    """Grade the learner's functions in ``source`` (``proxima.run.grading.check``: a module, a module's name or
    ``.py`` path, or a dict of the documents' names to functions; ``only``: one name). With ``probes`` (True:
    the vector probes 1-5, or a list of names such as ``["1", "4"]``), then train those probes with the graded
    pieces in proxima's loop (``probe_pieces``): ``Grades.probes`` holds their results, and ``passed`` needs
    them to pass. ``total_timesteps`` replaces every probe's own budget."""
    grades = grade_functions(source, only)
    if probes is False:
        return grades
    return probe_pieces(grades, None if probes is True else list(probes), total_timesteps)


def probe_pieces(
    grades: Grades, names: Sequence[str] | None = None, total_timesteps: int | None = None
) -> Grades:
    """``grades`` with the probes ``names`` (default: the vector probes 1-5) trained at proxima's default
    settings with ``grades.pieces`` in the loop, and the critic unnormalized, as the tutorial's is (and as
    ``proxima probe`` probes it). A piece the loop refuses (an estimator that is not GAE on its known case, a
    function of other parameter names, an Agent whose outputs have the wrong shapes), or that raises while it
    trains, is one ``FAIL probes`` line, and the probes stop there; nothing of the loop's to probe is a ``SKIP`` line."""
    names = chosen_probes(names, total_timesteps)
    if not grades.pieces:
        takes = ", ".join(IN_THE_LOOP)
        line = Result("probes", None, 0, detail=f"nothing graded is a piece of proxima's loop ({takes})")
        return dataclasses.replace(grades, results=[*grades.results, line])
    # the learner's Agent draws its init from torch's global generator, as grading does: the caller's is kept
    try:
        with torch.random.fork_rng(devices=[]):
            args = PPOArgs().replace(**grades.pieces)
            results = run_probes(args, names, total_timesteps, norm_value=False)
    except UserError as e:
        refused = f"proxima's loop refuses your pieces: {e}"
        return dataclasses.replace(
            grades, results=[*grades.results, Result("probes", False, 0, detail=refused)]
        )
    except Exception as e:  # the learner's code raised in the loop: its message, on one line
        stopped = f"training with your pieces in the loop raised {' '.join(raised(e).split())}"
        return dataclasses.replace(
            grades, results=[*grades.results, Result("probes", False, 0, detail=stopped)]
        )
    return dataclasses.replace(grades, probes=results)


def chosen_probes(names: Sequence[str] | None, total_timesteps: int | None = None) -> list[str]:
    """The probes ``names`` asks for (None or none: the vector probes), or a one-line ``UserError`` for bad
    input: a probe check does not run, or a budget no run takes (before the learner's pieces are judged)."""
    chosen = list(names or VECTOR_PROBES)
    unknown = [n for n in chosen if n not in VECTOR_PROBES]
    if unknown:
        raise UserError(
            f"unknown probe {unknown[0]!r} for check; accepted: {', '.join(VECTOR_PROBES)} (the PPO tutorial's)"
        )
    if total_timesteps is not None:
        PPOArgs().replace(total_timesteps=total_timesteps).validate()
    return chosen


def in_the_loop_line(grades: Grades, names: Sequence[str] | None = None) -> str:
    """The line said before the probes train: which probes, and whose pieces."""
    yours = [name for name, setting in IN_THE_LOOP.items() if setting in grades.pieces]
    chosen = chosen_probes(names)
    return (
        f"probe{'s' if len(chosen) > 1 else ''} {', '.join(chosen)} with your {', '.join(yours)} in proxima's loop "
        "(proxima's own for the rest)"
    )
