"""False alarms: train the shipped configurations and list every health warning they print.

A healthy run should print none. Each run is the real `proxima train` command line. The last run is a known
unhealthy one, a critic without value normalization on CartPole (docs/HEALTH.md, flat_critic), which should
warn.

    .venv/bin/python benchmarks/health_sweep.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")
RUNS = {
    "CartPole-v1, defaults": [],
    "Acrobot-v1, defaults": ["--env-id", "Acrobot-v1"],
    "cartpole-fast": ["--config", "cartpole-fast"],
    "pendulum": ["--config", "pendulum"],
    "pendulum-discrete": ["--config", "pendulum-discrete"],
    "cartpole-ppo-fullbatch, 400k steps": [
        "--config",
        "cartpole-ppo-fullbatch",
        "--total-timesteps",
        "400000",
    ],
    "cartpole-vpg, 400k steps": ["--config", "cartpole-vpg", "--total-timesteps", "400000"],
    "cartpole-reinforce, 400k steps": [
        "--config",
        "cartpole-reinforce",
        "--total-timesteps",
        "400000",
    ],
    "MountainCar-v0, defaults, 200k steps": ["--env-id", "MountainCar-v0", "--total-timesteps", "200000"],
    "CartPole-v1, --no-norm-value --seed 3 (unhealthy)": ["--no-norm-value", "--seed", "3"],
}


def main() -> None:
    print("| run | wall s | warnings and health lines |")
    print("|---|---|---|")
    for name, flags in RUNS.items():
        run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-health-"), "run")
        start = time.perf_counter()
        out = subprocess.run([BIN, "train", "--run-dir", run_dir, "--no-plot", *flags],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        lines = [line for line in out.splitlines() if line.startswith(("warning:", "health:"))]
        print(f"| {name} | {time.perf_counter() - start:.0f} | {'<br>'.join(lines) or 'none'} |", flush=True)


if __name__ == "__main__":
    main()
