"""Full-loop throughput: env steps per second of rollout plus update.

Runs `proxima train` as a user would (timed from process start, so imports and set-up count) and also
reports the steady-state SPS that the run itself logs. Peak RSS is the training process's own (os.wait4).

    .venv/bin/python benchmarks/throughput.py [--total-timesteps 100000] [-- --async-envs]
    .venv/bin/python benchmarks/throughput.py --suite   # every backend on CartPole-v1 and Pendulum-v1,
                                                        # then cartpole-fast's time to solve, seeds 1-5
    .venv/bin/python benchmarks/throughput.py --cartpole-fast [-- FLAGS]   # only the latter

With `--record`, each table's rows go to docs/results/data as one batch (topic "throughput"; cartpole-fast's time
to solve as topic "solve"), and docs/RESULTS.md and the README's table are rendered again (benchmarks/records.py).
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")
SOFTWARE = ("proxima", "torch", "gymnasium")
BACKENDS = {
    "gymnasium sync": ["--env-backend", "gymnasium"],
    "gymnasium async": ["--async-envs"],
    "native": ["--env-backend", "native"],
}
# (env, steps, flags): settings where the env's cost shows, so that the backends can differ
SUITE = [
    ("CartPole-v1", 200_000, ["--num-envs", "64", "--num-steps", "32"]),
    ("Pendulum-v1", 51_200, ["--config", "pendulum"]),
]


def train(env_id: str, steps: int, flags: list[str]) -> tuple[str, float, dict, float]:
    """Run `proxima train`; return its run directory, wall time from process start, last metrics line, and
    the peak RSS in MB of the training process itself (its env worker processes, with --async-envs, aside)."""
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-bench-"), "run")
    start = time.perf_counter()
    proc = subprocess.Popen([BIN, "train", "--env-id", env_id, "--total-timesteps", str(steps),
                             "--run-dir", run_dir, "--quiet", *flags])  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, unlike RUSAGE_CHILDREN's running max
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    last = json.loads(open(os.path.join(run_dir, "metrics.jsonl")).read().splitlines()[-1])
    return run_dir, wall, last, usage.ru_maxrss / 1024


def command(env_id: str, steps: int, flags: list[str]) -> str:
    return shlex.join(["proxima", "train", "--env-id", env_id, "--total-timesteps", str(steps), *flags])


def suite(record: str | None) -> None:
    batch = records.Batch("throughput", out_dir=record, software=SOFTWARE)
    print(
        "| env | backend | flags | steps | wall s (process) | steps/s (process) | steps/s (loop, logged) | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for env_id, steps, flags in SUITE:
        for backend, backend_flags in BACKENDS.items():
            _, wall, last, rss = train(env_id, steps, [*flags, *backend_flags])
            done = last["global_step"]
            print(f"| {env_id} | {backend} | {' '.join(flags)} | {done} | {wall:.1f} | {done / wall:.0f} | "
                  f"{last['sps']:.0f} | {rss:.0f} |", flush=True)  # fmt: skip
            batch.add(task=env_id, settings=f"{backend}: {' '.join(flags)}", steps=done, wall_s=round(wall, 2),
                      sps_process=round(done / wall), sps_loop=round(last["sps"]), peak_rss_mb=round(rss),
                      command=command(env_id, steps, [*flags, *backend_flags]))  # fmt: skip
    batch.finish()
    print()
    cartpole_fast([], record)


def cartpole_fast(extra: list[str], record: str | None) -> None:
    """cartpole-fast's time to solve from process start, seeds 1-5, with ``extra`` flags."""
    batch = records.Batch("solve", out_dir=record, software=SOFTWARE)
    print(
        "| cartpole-fast, seed | steps | wall s (process) | peak RSS MB | eval mean ± std (100 ep, det., Gymnasium env) |"
    )
    print("|---|---|---|---|---|")
    for seed in range(1, 6):
        run_dir, wall, last, rss = train(
            "CartPole-v1", 300_000, ["--config", "cartpole-fast", "--seed", str(seed), *extra]
        )
        out = subprocess.run([BIN, "eval", run_dir, "--episodes", "100", "--deterministic"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        mean, std = re.search(r"mean_return=(\S+) std_return=(\S+)", out).groups()
        print(f"| {seed} | {last['global_step']} | {wall:.1f} | {rss:.0f} | {mean} ± {std} |", flush=True)
        flags = ["--config", "cartpole-fast", "--seed", str(seed), *extra]
        batch.add(task="CartPole-v1", preset="cartpole-fast", settings=shlex.join(extra) or None, seed=seed,
                  score=records.score(float(mean), float(std), 100), threshold=475, steps=last["global_step"],
                  wall_s=round(wall, 2), peak_rss_mb=round(rss), command=command("CartPole-v1", 300_000, flags))  # fmt: skip
    batch.finish()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--suite", action="store_true", help="every backend on CartPole and Pendulum, then cartpole-fast"
    )
    parser.add_argument("--cartpole-fast", action="store_true", help="only cartpole-fast's time to solve")
    parser.add_argument("extra", nargs="*", help="extra flags for proxima train, after --")
    records.add_record_flag(parser)
    args = parser.parse_args()
    if args.suite:
        return suite(args.record)
    if args.cartpole_fast:
        return cartpole_fast(args.extra, args.record)
    batch = records.Batch("throughput", out_dir=args.record, software=SOFTWARE)
    print("| env | flags | steps | wall s (process) | steps/s (process) | steps/s (logged) | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.repeats):
        _, wall, last, peak = train(args.env_id, args.total_timesteps, args.extra)
        steps = last["global_step"]
        print(f"| {args.env_id} | {' '.join(args.extra) or 'defaults'} | {steps} | {wall:.1f} | {steps / wall:.0f} | "
              f"{last['sps']:.0f} | {peak:.0f} |", flush=True)  # fmt: skip
        batch.add(task=args.env_id, settings=shlex.join(args.extra) or "defaults", steps=steps, wall_s=round(wall, 2),
                  sps_process=round(steps / wall), sps_loop=round(last["sps"]), peak_rss_mb=round(peak),
                  command=command(args.env_id, args.total_timesteps, args.extra))  # fmt: skip
    batch.finish()


if __name__ == "__main__":
    main()
