"""``proxima compare``: train several algorithms over several seeds on one env, then plot and tabulate them.

A comparison is a sweep (``proxima.sweep``) whose settings are the algorithms, each with its own defaults
under the train flags given: each run is an ordinary ``proxima train`` run in its own directory under the
output directory, and the table, the plot and ``results.json`` come from the sweep's summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from proxima.algo.algorithms import ALGOS
from proxima.base.errors import UserError
from proxima.scale.executors import ray_available
from proxima.scale.sweeps import SweepResults, parse_seeds, sweep

if TYPE_CHECKING:
    from proxima.run.config import PPOArgs

# a comparison's runs are short unless a flag or a preset says otherwise
TOTAL_TIMESTEPS = 100_000


@dataclass(frozen=True)
class CompareFlags:
    """the comparison; every other flag is a `proxima train` flag (proxima train --help), given to every
    algorithm on top of its own defaults; --total-timesteps is 100000 unless given or set by --config"""

    algos: tuple[str, ...] = ("reinforce", "vpg", "ppo")
    """the algorithms to compare (each with its own defaults: see `proxima train --algo A --help`)"""
    seeds: str = "3"
    """the seeds of every algorithm: a count (5: seeds 1-5), a range (1-10; 4-4: seed 4 alone) or a list (1,3,5)"""
    executor: Literal["auto", "local", "ray"] = "auto"
    """where the runs go: ray (Ray Tune trials, 1 CPU each, side by side), local (one after another in this process), or auto (ray where it is installed)"""
    output_dir: str | None = None
    """where to write the runs, the plot and the table (default: runs/compare__{env}__{unix time})"""


def check_algos(algos: tuple[str, ...]) -> None:
    for algo in algos:
        if algo not in ALGOS:
            raise UserError(f"unknown algo {algo!r}; accepted: {', '.join(ALGOS)}")
    if len(set(algos)) < len(algos):
        raise UserError("--algos names an algorithm twice; give each once")


def compare(flags: CompareFlags, settings: list[tuple[str, PPOArgs]], output_dir: str) -> SweepResults:
    """Run every (algo, seed) of ``settings`` (one ``(algo, its settings)`` each); write
    ``learning_curves.png``, ``results.md`` and ``results.json`` to ``output_dir``."""
    executor = flags.executor if flags.executor != "auto" else "ray" if ray_available() else "local"
    return sweep(seeds=parse_seeds(flags.seeds), settings=settings, executor=executor, output_dir=output_dir)
