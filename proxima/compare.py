"""``proxima compare``: train several algorithms over several seeds on one env, then plot and tabulate them.

Each run is an ordinary ``proxima train`` run (its own directory under the output directory), so every
run can later be evaluated, plotted or inspected like any other.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from proxima.algorithms import ALGOS
from proxima.config import resolve_args
from proxima.errors import UserError
from proxima.files import write_json
from proxima.plotting import final_return, plot_runs


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


def compare(args: CompareArgs) -> str:
    """Run every (algo, seed), write ``learning_curves.png``, ``results.md`` and ``results.json``; return the
    output directory."""
    for algo in args.algos:
        if algo not in ALGOS:
            raise UserError(f"unknown algo {algo!r}; accepted: {', '.join(ALGOS)}")
    if args.seeds < 1:
        raise UserError(f"seeds must be a positive integer, got {args.seeds}")
    env_name = args.env_id.replace("/", "_").replace(":", "_")
    out = args.output_dir or os.path.join("runs", f"compare__{env_name}__{int(time.time())}")
    if os.path.exists(out) and os.listdir(out):
        raise UserError(f"output directory {out!r} already exists and is not empty; give a new --output-dir")
    # Check every configuration before the first run, so bad input fails in a second, not after an hour.
    configs = {
        (algo, seed): resolve_args(
            algo=algo,
            env_id=args.env_id,
            seed=seed,
            total_timesteps=args.total_timesteps,
            run_dir=os.path.join(out, f"{algo}__seed{seed}"),
            quiet=True,
        ).validate()
        for algo in args.algos
        for seed in range(1, args.seeds + 1)
    }
    from proxima.trainer import train

    results = []
    for (algo, seed), config in configs.items():
        start = time.perf_counter()
        train(config)
        wall = time.perf_counter() - start
        results.append(
            {"algo": algo, "seed": seed, "final_return": final_return(config.run_dir), "wall_s": wall}
        )
        print(
            f"{algo} seed {seed}: final return {results[-1]['final_return']:.1f} in {wall:.1f} s", flush=True
        )

    groups = {algo: [configs[algo, s].run_dir for s in range(1, args.seeds + 1)] for algo in args.algos}
    plot_runs(groups, os.path.join(out, "learning_curves.png"), title=f"{args.env_id}, {args.seeds} seed(s)")
    write_json(os.path.join(out, "results.json"), {"env_id": args.env_id, "runs": results})
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(results_table(args, results))
    return out


def results_table(args: CompareArgs, results: list[dict]) -> str:
    lines = [
        f"{args.env_id}, {args.total_timesteps} env steps per run; final return = mean of the last 20 episodes",
        "",
        "| algo | final return, mean ± std over seeds | per seed | wall s per run (mean) |",
        "|---|---|---|---|",
    ]
    for algo in args.algos:
        rows = [r for r in results if r["algo"] == algo]
        finals = np.array([r["final_return"] for r in rows])
        per_seed = ", ".join(f"{r['final_return']:.1f}" for r in rows)
        wall = np.mean([r["wall_s"] for r in rows])
        lines.append(f"| {algo} | {finals.mean():.1f} ± {finals.std():.1f} | {per_seed} | {wall:.1f} |")
    return "\n".join(lines) + "\n"
