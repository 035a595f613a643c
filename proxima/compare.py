"""``proxima compare``: train several algorithms over several seeds on one env, then plot and tabulate them.

A comparison is a sweep (``proxima.sweep``) whose settings are the algorithms: each run is an ordinary
``proxima train`` run in its own directory under the output directory, and the table, the plot and
``results.json`` come from the sweep's summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from proxima.algorithms import ALGOS
from proxima.config import resolve_args
from proxima.errors import UserError
from proxima.executors import ray_available
from proxima.sweeps import SweepResults, default_output_dir, sweep


@dataclass
class CompareArgs:
    env_id: str = "CartPole-v1"
    """the environment every run trains on"""
    algos: tuple[str, ...] = ("reinforce", "vpg", "ppo")
    """the algorithms to compare (each with its own defaults: see `proxima train --algo A --help`)"""
    seeds: int = 3
    """how many seeds per algorithm (seeds 1..N)"""
    total_timesteps: int = 100000
    """env steps per run"""
    output_dir: str | None = None
    """where to write the runs, the plot and the table (default: runs/compare__{env}__{unix time})"""
    executor: Literal["auto", "local", "ray"] = "auto"
    """where the runs go: ray (Ray Tune trials, 1 CPU each, side by side), local (one after another in this
    process), or auto (ray where it is installed)"""


def compare(args: CompareArgs) -> SweepResults:
    """Run every (algo, seed); write ``learning_curves.png``, ``results.md`` and ``results.json``."""
    for algo in args.algos:
        if algo not in ALGOS:
            raise UserError(f"unknown algo {algo!r}; accepted: {', '.join(ALGOS)}")
    if args.seeds < 1:
        raise UserError(f"seeds must be a positive integer, got {args.seeds}")
    executor = args.executor if args.executor != "auto" else "ray" if ray_available() else "local"
    return sweep(
        seeds=range(1, args.seeds + 1),
        # each algorithm with its own defaults (resolve_args puts an algo's defaults under the overrides)
        settings=[
            (algo, resolve_args(algo=algo, env_id=args.env_id, total_timesteps=args.total_timesteps))
            for algo in args.algos
        ],
        executor=executor,
        output_dir=args.output_dir or default_output_dir(args.env_id, "compare"),
    )
