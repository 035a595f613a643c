"""What ``networks.forward_skipping_hooks`` saves: ``ActorCritic.act`` on a rollout step's batch (4 CartPole
observations) with its layers applied through ``forward`` (as proxima does) and through ``__call__`` (hooks
dispatched), in one process, alternating; the median time per call of each and their ratio.

    .venv/bin/python benchmarks/forward_dispatch.py [--repeats 30] [--calls 2000] [--batch 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import torch

import proxima.policy.networks as networks
from proxima.policy.distributions import make_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=4)
    options = parser.parse_args()
    torch.set_num_threads(1)
    model = networks.ActorCritic(networks.NetworkSpec(2, (4,)), make_head(gym.spaces.Discrete(2)))
    obs = torch.randn(options.batch, 4)
    ways = {"forward (proxima)": networks.forward_skipping_hooks, "__call__": lambda layers, x: layers(x)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    original = networks.forward_skipping_hooks
    try:
        with torch.no_grad():
            for repeat in range(options.repeats):
                for name in list(ways)[:: 1 if repeat % 2 else -1]:
                    networks.forward_skipping_hooks = ways[name]
                    start = time.perf_counter()
                    for _ in range(options.calls):
                        model.act(obs)
                    times[name].append((time.perf_counter() - start) / options.calls)
    finally:
        networks.forward_skipping_hooks = original
    base = statistics.median(times["forward (proxima)"])
    print(f"torch {torch.__version__}, 1 thread, ActorCritic.act on {options.batch} observations")
    for name, seconds in times.items():
        print(
            f"{name:20} {1e6 * statistics.median(seconds):8.1f} us per call   ratio {statistics.median(seconds) / base:.3f}"
        )


if __name__ == "__main__":
    main()
