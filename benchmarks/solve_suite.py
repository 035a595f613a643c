"""Every classic task solved: each task's fast preset (`proxima solve ENV_ID`), seeds 1-5.

For each run: the `proxima train --config PRESET --seed S` process timed from its start to its exit (the
preset stops once solved), its steps, its peak RSS (os.wait4), then the score of 100 episodes of Gymnasium's
own env (`proxima eval`, deterministic unless the preset says otherwise). The raw Gymnasium CartPole rate
(benchmarks/reference.py) is measured before and after, so that days can be compared. With `--record`, the batch
goes to docs/results/data and docs/RESULTS.md and the README's table are rendered again (benchmarks/records.py).

    .venv/bin/python benchmarks/solve_suite.py [--tasks CartPole-v1 ...] [--seeds 1 2 3 4 5] [--record [DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

from proxima.run.config import read_preset, solve_presets

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")


def solve(preset: str, seed: int, extra: list[str]) -> tuple[str, float, float]:
    """Train with ``preset``; return the run directory, the process's wall time and its peak RSS in MB."""
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-solve-"), "run")
    start = time.perf_counter()
    proc = subprocess.Popen([BIN, "train", "--config", preset, "--seed", str(seed), "--run-dir", run_dir,
                             "--quiet", *extra])  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), proc.args)
    return run_dir, wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    presets = solve_presets()
    parser.add_argument("--tasks", nargs="+", default=list(presets), choices=list(presets))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("extra", nargs="*", help="extra flags for proxima train, after --")
    records.add_record_flag(parser)
    args = parser.parse_args()
    batch = records.Batch("solve", out_dir=args.record, software=("proxima", "torch", "gymnasium"))
    print(f"raw Gymnasium CartPole-v1 reference before: {batch.reference['before']:,.0f} steps/s", flush=True)
    print(
        "| task (preset) | seed | steps to solved | wall s (process) | peak RSS MB | 100 episodes, Gymnasium env | solved |"
    )
    print("|---|---|---|---|---|---|---|")
    for env_id in args.tasks:
        preset = presets[env_id]
        task = read_preset(preset)["solve"]
        deterministic = task.get("deterministic", True)
        for seed in args.seeds:
            run_dir, wall, rss = solve(preset, seed, args.extra)
            steps = json.load(open(os.path.join(run_dir, "agent.json")))["global_step"]
            best = os.path.join(run_dir, "best")  # with save_best, proxima solve scores the best agent too
            scored = best if os.path.isdir(best) else run_dir
            out = subprocess.run([BIN, "eval", scored, "--episodes", "100", "--seed", str(seed),
                                  *(["--deterministic"] if deterministic else [])],
                                 check=True, capture_output=True, text=True).stdout  # fmt: skip
            mean, std = (float(x) for x in re.search(r"mean_return=(\S+) std_return=(\S+)", out).groups())
            batch.add(task=env_id, preset=preset, settings=shlex.join(args.extra) or None, seed=seed,
                      score=records.score(mean, std, 100, deterministic), threshold=task["threshold"], steps=steps,
                      wall_s=round(wall, 2), peak_rss_mb=round(rss),
                      command=shlex.join(["proxima", "train", "--config", preset, "--seed", str(seed), *args.extra]))  # fmt: skip
            print(f"| {env_id} ({preset}) | {seed} | {steps:,} | {wall:.1f} | {rss:.0f} | {mean:.1f} ± {std:.1f} "
                  f"{'(det.)' if deterministic else '(sampled)'} | {'yes' if mean >= task['threshold'] else 'NO'} |",
                  flush=True)  # fmt: skip
    path = batch.finish()
    print(f"raw Gymnasium CartPole-v1 reference after: {batch.reference['after']:,.0f} steps/s")
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
