"""Full-budget learning runs: default flags (CartPole-v1, Acrobot-v1 at 500k steps) or a preset, several seeds.

Each run is the real command line (`proxima train`, then `proxima eval` of the final checkpoint), timed from
process start. Prints one markdown row per run; docs/journal/benchmarks.md records them.

    .venv/bin/python benchmarks/learning.py --env-id CartPole-v1 --seeds 1 2 3
    .venv/bin/python benchmarks/learning.py --config pendulum --threshold -200 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")


def last20(run_dir: str) -> float:
    returns = [json.loads(line)["return"] for line in open(os.path.join(run_dir, "episodes.jsonl"))]
    return float(np.mean(returns[-20:]))


def first_step_reaching(run_dir: str, threshold: float) -> int | None:
    episodes = [json.loads(line) for line in open(os.path.join(run_dir, "episodes.jsonl"))]
    returns = np.array([e["return"] for e in episodes])
    for i in range(20, len(returns) + 1):
        if returns[i - 20 : i].mean() >= threshold:
            return episodes[i - 1]["global_step"]
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default=None, help="default: the preset's, or CartPole-v1")
    parser.add_argument("--config", default=None, help="a preset name or JSON file for proxima train")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threshold", type=float, default=475.0, help="target for the last-20-episode mean")
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("extra", nargs="*", help="extra flags for proxima train, after --")
    args = parser.parse_args()
    flags = [
        *(["--config", args.config] if args.config else []),
        *(["--env-id", args.env_id] if args.env_id else []),
    ]
    if args.env_id is None:
        from proxima.run.config import resolve_args

        args.env_id = resolve_args(config=args.config).env.env_id
    print(
        "| env | seed | steps | wall s (process) | SPS | first step with last-20 mean >= "
        f"{args.threshold:g} | last-20 mean at end | eval mean ± std ({args.eval_episodes} ep, det.) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-bench-"), "run")
        start = time.perf_counter()
        subprocess.run([BIN, "train", *flags, "--seed", str(seed), "--run-dir", run_dir, *args.extra],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        wall = time.perf_counter() - start
        metrics = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        out = subprocess.run([BIN, "eval", run_dir, "--episodes", str(args.eval_episodes), "--deterministic"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        mean, std = re.search(r"mean_return=(\S+) std_return=(\S+)", out).groups()
        label = f"{args.env_id} ({args.config})" if args.config else args.env_id
        print(f"| {label} | {seed} | {metrics[-1]['global_step']} | {wall:.1f} | {metrics[-1]['sps']:.0f} | "
              f"{first_step_reaching(run_dir, args.threshold)} | {last20(run_dir):.1f} | {mean} ± {std} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
