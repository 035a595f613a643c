"""Full-loop throughput: env steps per second of rollout plus update, default PPO flags, CartPole-v1.

Runs `proxima train` as a user would (timed from process start, so imports and set-up count) and also
reports the steady-state SPS that the run itself logs. Peak RSS is read from the child's rusage.

    .venv/bin/python benchmarks/throughput.py [--total-timesteps 100000] [--async-envs]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="extra flags for proxima train, after --")
    args = parser.parse_args()
    print("| env | flags | steps | wall s (process) | steps/s (process) | steps/s (logged) | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.repeats):
        run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-bench-"), "run")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        subprocess.run([BIN, "train", "--env-id", args.env_id, "--total-timesteps", str(args.total_timesteps),
                        "--run-dir", run_dir, *args.extra], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        wall = time.perf_counter() - start
        peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
        last = json.loads(open(os.path.join(run_dir, "metrics.jsonl")).read().splitlines()[-1])
        steps = last["global_step"]
        print(f"| {args.env_id} | {' '.join(args.extra) or 'defaults'} | {steps} | {wall:.1f} | {steps / wall:.0f} | "
              f"{last['sps']:.0f} | {peak:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
