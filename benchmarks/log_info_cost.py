"""What --log-info costs in the rollout: Gymnasium-backend CartPole-v1 rollouts (4 envs x 128 steps) collected
with no infos asked, with one key asked (what ``--log-info KEY`` does), and with all infos asked (a callback's
``info_keys = "all"``), in one process, interleaved; the minimum over repeats is the least disturbed figure.

A run that asks for nothing must step exactly as before: run the script once more with a checkout of the
commit before --log-info on the path, which has only the first mode, and compare its "none" row:

    .venv/bin/python benchmarks/log_info_cost.py
    mkdir -p /tmp/base && git archive BASE proxima | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/log_info_cost.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import proxima
from proxima.envs import make_vec_env
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.run.rollout import RolloutCollector

NUM_ENVS, NUM_STEPS = 4, 128


def collector(infos) -> RolloutCollector:
    envs = make_vec_env("CartPole-v1", NUM_ENVS, backend="gymnasium", seed=0)
    model = ActorCritic(
        NetworkSpec(2, (4,), NetworkSettings(norm_value=False)), make_head(envs.single_action_space)
    )
    c = RolloutCollector(envs, NUM_STEPS, 0.99, model, seed=0)
    if infos is not None:
        c.keep_infos(infos)
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts per timed repeat")
    options = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    modes = {"none": None}
    if hasattr(RolloutCollector, "keep_infos"):  # absent before --log-info
        modes.update({"one key": ("success",), "all": "all"})
    collectors = {name: collector(infos) for name, infos in modes.items()}
    model = ActorCritic(
        NetworkSpec(2, (4,), NetworkSettings(norm_value=False)),
        make_head(collectors["none"].envs.single_action_space),
    )
    seconds: dict[str, list[float]] = {name: [] for name in modes}
    for c in collectors.values():  # warm-up
        c.collect(model)
    for _ in range(options.repeats):
        for name, c in collectors.items():
            start = time.perf_counter()
            for _ in range(options.rollouts):
                c.collect(model)
            seconds[name].append((time.perf_counter() - start) / (options.rollouts * NUM_STEPS * NUM_ENVS))
    for c in collectors.values():
        c.envs.close()
    load = os.getloadavg()
    print(
        f"proxima from {os.path.dirname(proxima.__file__)}; load average {load[0]:.1f} on {os.cpu_count()} cores"
    )
    print("| infos asked | µs per env step, min | median | env steps/s (min time) |")
    print("|---|---|---|---|")
    for name, times in seconds.items():
        best = min(times)
        print(f"| {name} | {best * 1e6:.2f} | {statistics.median(times) * 1e6:.2f} | {1 / best:,.0f} |")


if __name__ == "__main__":
    main()
