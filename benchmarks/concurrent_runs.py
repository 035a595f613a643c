"""Two runs at once against the same two runs in turn: does a run stay fast when another shares the cores?

    .venv/bin/python benchmarks/concurrent_runs.py [--copies 2] [-- TRAIN FLAGS]   # default: --config cartpole-fast --seed 4

Each run is `proxima train` from process start to exit. Prints the raw Gymnasium CartPole reference first
(benchmarks/reference.py), then the wall time of every run, in turn and at once.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from reference import raw_cartpole_sps

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")


def start(flags: list[str], env: dict) -> tuple[subprocess.Popen, float]:
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-concurrent-"), "run")
    cmd = [BIN, "train", *flags, "--run-dir", run_dir, "--quiet"]
    return subprocess.Popen(cmd, env=env), time.perf_counter()


def wait(proc: subprocess.Popen, started: float) -> float:
    if proc.wait():
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("flags", nargs="*", default=["--config", "cartpole-fast", "--seed", "4"])
    args = parser.parse_args()
    env = dict(os.environ)
    print(
        f"reference: raw Gymnasium CartPole-v1 (SyncVectorEnv of 4, random actions): {raw_cartpole_sps():,.0f} steps/s"
    )
    in_turn = [wait(*start(args.flags, env)) for _ in range(args.copies)]
    procs = [start(args.flags, env) for _ in range(args.copies)]
    at_once = [wait(*p) for p in procs]
    print(f"flags: {' '.join(args.flags)}")
    print(f"in turn: {', '.join(f'{t:.1f}' for t in in_turn)} s (total {sum(in_turn):.1f} s)")
    print(f"at once: {', '.join(f'{t:.1f}' for t in at_once)} s (all done after {max(at_once):.1f} s)")


if __name__ == "__main__":
    main()
