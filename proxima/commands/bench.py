"""``proxima bench SUITE``: train a suite's tasks × seeds with each task's preset, score every agent, and write a
page of the statistics beside the published PPO numbers (``proxima.scale.bench``)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base.errors import TrainingInterrupted
from proxima.commands.argv import parse
from proxima.run.config import POSITIVE_INT

BENCH_ABOUT = """Train every task of SUITE with each of --seeds seeds (seeds 1 to N), with the task's preset (its
seeds as one batched run, --num-seeds, where the preset allows it), score each seed's agent on --episodes
deterministic episodes of Gymnasium's env, and write OUTPUT_DIR/bench.md and bench.json: per task the IQM, median,
mean and optimality gap with 95% stratified bootstrap intervals, the same over the tasks of normalized scores,
beside the PPO numbers that CleanRL (Open RL Benchmark) and the RL Zoo published (docs/BENCH.md). The same
command again finishes what is missing in OUTPUT_DIR and trains nothing that finished. Exit status 1 if a run
failed (a NaN, a crashed env: its reason is on the page). Needs SciPy (the stats extra).

suites (tasks: preset, steps budget):
{suites}"""


@dataclass
class BenchArgs:
    suite: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="SUITE")]
    """the suite: one of those listed above"""
    seeds: Annotated[int, POSITIVE_INT] = 10
    """seeds per task (1 to N); rliable advises 10 or more, as fewer leave the intervals too wide to tell settings apart"""
    output_dir: str | None = None
    """the bench directory (default: runs/bench_SUITE); the same command again finishes what is missing there"""
    tasks: tuple[str, ...] = ()
    """only these of the suite's tasks (their env ids)"""
    total_timesteps: Annotated[int | None, POSITIVE_INT] = None
    """every task's steps budget instead of the suite's (a quick look; the published numbers are at the suite's)"""
    episodes: Annotated[int, POSITIVE_INT] = 100
    """deterministic episodes that score each seed's agent"""


def run(argv: list[str]) -> int:
    from proxima.run import statistics
    from proxima.scale.bench import BENCH_JSON, BENCH_MD, bench, default_output_dir, suites

    listed = []
    for name, suite in suites().items():
        tasks = ", ".join(f"{t['env_id']} ({t['preset']}, {t['total_timesteps']:,})" for t in suite["tasks"])
        listed.append(f"  {name:8s} {tasks}")
    args = parse(BenchArgs, argv, "proxima bench", description=BENCH_ABOUT.format(suites="\n".join(listed)))
    statistics.scipy_stats()  # before anything trains: without SciPy there would be no page
    out = args.output_dir or default_output_dir(args.suite)
    try:
        record = bench(
            args.suite,
            seeds=args.seeds,
            output_dir=out,
            tasks=args.tasks,
            total_timesteps=args.total_timesteps,
            episodes=args.episodes,
        )
    except TrainingInterrupted as e:
        print(f"proxima bench: {e}; finish the bench with the same command", file=sys.stderr)
        return e.exit_status
    with open(os.path.join(out, BENCH_MD), encoding="utf-8") as f:
        summary = f.read().split("\n## ", 1)[0]
    print(f"\n{summary}\nwrote {os.path.join(out, BENCH_MD)}, {os.path.join(out, BENCH_JSON)}")
    seeds = [s for t in record["results"]["tasks"] for s in t["seeds"]]
    unscored = [s for s in seeds if s["status"] != "scored"]
    if unscored:
        print(
            f"proxima bench: of {len(seeds)} seeds, {len(unscored)} did not train to the end (see {out}/{BENCH_MD})",
            file=sys.stderr,
        )
    return 1 if unscored else 0
