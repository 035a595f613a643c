"""What an elementwise activation costs on this CPU, against the matrix product it follows.

    .venv/bin/python benchmarks/activation_cost.py [--threads 1 2] [--repeats 5]

A profile of `--num-seeds 16` on cartpole-fast put `torch.tanh` (proxima's default hidden activation) above
the Linear layers themselves. This prints, for the shapes a run computes (a rollout step of 64 envs, a
minibatch of 256 samples, 16 seeds of each stacked), microseconds per call of torch.tanh, of tanh written as
2 * sigmoid(2x) - 1 (the same function, rounded differently), of sigmoid and relu, of numpy.tanh on the same
floats, and of the 64 x 64 product (baddbmm) the activation follows; the best of ``repeats`` rounds, and the
raw Gymnasium CartPole rate (benchmarks/reference.py) before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.reference import raw_cartpole_sps  # noqa: E402

SHAPES = {  # (stacked seeds, rows, units)
    "rollout step, 1 seed": (1, 64, 64),
    "minibatch, 1 seed": (1, 256, 64),
    "rollout step, 16 seeds": (16, 64, 64),
    "minibatch, 16 seeds": (16, 256, 64),
}


def per_call_us(fn, calls: int) -> float:
    fn()  # the first call may pay for a kernel's selection
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def ways_of(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> dict:
    array = x.numpy()
    return {
        "tanh": lambda: torch.tanh(x),
        "sigmoid form": lambda: torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0),
        "sigmoid": lambda: torch.sigmoid(x),
        "relu": lambda: torch.relu(x),
        "numpy": lambda: np.tanh(array),
        "product": lambda: torch.baddbmm(b, x, w),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"raw Gymnasium CartPole-v1 before: {raw_cartpole_sps():,.0f} steps/s")
    print("| shape | threads | tanh | 2*sigmoid(2x)-1 | sigmoid | relu | numpy tanh | 64x64 product |")
    print("|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, (seeds, rows, units) in SHAPES.items():
            x = torch.randn(seeds, rows, units)
            w, b = torch.randn(seeds, units, units), torch.randn(seeds, 1, units)
            calls = max(200, 2_000_000 // x.numel())
            ways = ways_of(x, w, b)
            best = {k: min(per_call_us(f, calls) for _ in range(args.repeats)) for k, f in ways.items()}
            print(f"| {name} {tuple(x.shape)} | {threads} | " + " | ".join(f"{v:.1f}" for v in best.values()) + " |",
                  flush=True)  # fmt: skip
    print(f"raw Gymnasium CartPole-v1 after: {raw_cartpole_sps():,.0f} steps/s")


if __name__ == "__main__":
    main()
