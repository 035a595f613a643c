"""``proxima sweep``: train every combination of settings and seeds (Ray Tune, or one after another)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import trust
from proxima.base.errors import TrainingInterrupted, UserError
from proxima.commands.common import (
    flag_value,
    interrupted,
    parse_command,
    print_results,
    refuse_beside_resume,
    sets_itself,
)
from proxima.run.config import NON_NEGATIVE, POSITIVE_INT


@dataclass(frozen=True)
class SweepFlags:
    """the sweep; every other flag is a `proxima train` flag (proxima train --help)"""

    seeds: str = "3"
    """the seeds of every setting: a count (5: seeds 1-5), a range (1-10; 4-4: seed 4 alone) or a list (1,3,5)"""
    batched: bool = False
    """train each setting's seeds as one batched run (--num-seeds), one trial, instead of one trial each; the seeds must be consecutive (1-10)"""
    grid: Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=V1,V2,...")] = ()
    """one setting and its values, repeatable: --grid learning_rate=3e-4,1e-3 --grid ent_coef=0,0.01 (a train flag's name; a value of several numbers, as for hidden_sizes, has them apart by spaces: --grid "hidden_sizes=64 64,256 256")"""
    executor: Annotated[str, tyro.conf.arg(metavar="ray|local")] = "ray"
    """ray: each run a Ray Tune trial (needs the ray extra); local: one after another in this process"""
    cpus_per_trial: Annotated[int, POSITIVE_INT] = 1
    """CPUs Ray gives each run; a run's torch threads equal them"""
    gpus_per_trial: Annotated[float, NON_NEGATIVE] = 0
    """GPUs Ray gives each run, which then trains on CUDA (0.5: two runs share a GPU)"""
    max_concurrent: Annotated[int | None, POSITIVE_INT] = None
    """at most N runs at once (default: as many as the CPUs allow)"""
    address: str | None = None
    """join a running Ray cluster: auto, or ray://HOST:10001 (default: the one RAY_ADDRESS names, else a new local Ray instance); every node must see the sweep directory"""
    output_dir: str | None = None
    """the sweep directory (default: runs/sweep__{env}__{unix time})"""
    resume: Annotated[str | None, tyro.conf.arg(metavar="SWEEP_DIR")] = None
    """finish a sweep that was stopped: finished and failed runs are kept, interrupted ones resume from their checkpoints, the others start; only --executor, --address, --max-concurrent and --trust-code may be given with it"""
    trust_code: bool = False
    """with --resume: import the code that sweep.json and its runs' files name (an env factory, a module:ID env id, an encoder class); only for files you trust (docs/SECURITY.md)"""


SWEEP_ABOUT = """Trains every combination of the --grid values with every seed, each as an ordinary `proxima train` run
in its own directory under the sweep directory (as a Ray Tune trial, by default), then writes a table of the final
returns over seeds per setting with their IQM and its 95% CI (results.md), the learning curves with bands
(learning_curves.png) and results.json. Every run can be evaluated, plotted or resumed on its own. Exit status 1
if a run failed (a NaN, a crashed env: its reason is in results.md, and the other runs go on; --resume keeps it
failed) or did not run. A run that crashed on anything else (a bug) runs again on --resume."""


# What `proxima sweep --resume SWEEP_DIR` accepts beside it: where the rest runs, not what it is
_SWEEP_RESUME_FLAGS = ("--executor", "--address", "--max-concurrent", trust.TRUST_FLAG)


def run(argv: list[str]) -> int:
    from proxima.scale.sweeps import default_output_dir, parse_seeds, resume_sweep, sweep

    flags, _ = parse_command(argv, "proxima sweep", SweepFlags, description=SWEEP_ABOUT)
    if flags.resume is not None:
        said = "--executor, --address, --max-concurrent and --trust-code"
        refuse_beside_resume(argv, "proxima sweep", _SWEEP_RESUME_FLAGS, said, "sweep.json holds the rest")
        executor = flags.executor if flag_value(argv, "--executor") is not None else None
        try:
            results = resume_sweep(
                flags.resume, executor, flags.address, flags.max_concurrent, flags.trust_code
            )
        except TrainingInterrupted as e:
            return interrupted(e, "sweep", flags.resume)
        return print_results(results, "sweep")
    sets_itself(argv, "sweep", {"--seed": "--seeds", "--run-dir": "--output-dir"})
    settings = _grid_settings(argv, list(flags.grid))
    out = flags.output_dir or default_output_dir(settings[0][1].env.env_id)
    try:
        results = sweep(
            seeds=parse_seeds(flags.seeds),
            settings=settings,
            executor=flags.executor,
            cpus_per_trial=flags.cpus_per_trial,
            gpus_per_trial=flags.gpus_per_trial,
            max_concurrent=flags.max_concurrent,
            address=flags.address,
            output_dir=out,
            batched=flags.batched,
        )
    except TrainingInterrupted as e:
        return interrupted(e, "sweep", out)
    return print_results(results, "sweep")


def _grid_settings(argv: list[str], grid: list[str]):
    """Each combination of the ``--grid`` values (``sweeps.grid_settings``) as ``(label, PPOArgs)``: the
    settings of the command line with that combination's flags added (the last of a flag wins), so that values
    are read, checked and layered (an algo's defaults, a preset) exactly as train's flags are."""
    from proxima.run.config import GROUP_OF
    from proxima.scale.sweeps import grid_settings

    axes: dict[str, list[str]] = {}
    for item in grid:
        name, equals, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not values.strip():
            raise UserError(f"--grid expects NAME=V1,V2,..., got {item!r}")
        if name not in GROUP_OF or name in ("seed", "run_dir"):
            raise UserError(
                f"--grid: {name!r} is not a setting a sweep can vary; accepted: the names of the "
                "train flags (proxima train --help), such as learning_rate, apart from seed and run_dir"
            )
        if name in axes:
            raise UserError("--grid names a setting twice; give all its values in one --grid NAME=V1,V2")
        axes[name] = [value.strip() for value in values.split(",")]
    settings = []
    for label, setting in grid_settings(axes):
        flags = [
            t for name, value in setting.items() for t in ("--" + name.replace("_", "-"), *value.split())
        ]
        settings.append((label, parse_command(argv + flags, "proxima sweep", SweepFlags)[1]))
    return settings
