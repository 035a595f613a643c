"""Whether bf16 autocast would make the large-MLP updates of the multi-agent benchmark cheaper (issue 35: the
update is almost all of a VMAS run at BenchMARL's settings, 675 gradient steps of 4,096-frame minibatches on
256-256 MLPs per iteration).

    .venv/bin/python benchmarks/mlp_precision.py [--rows 12288 4096 256] [--threads 1 2] [--repeats 5]

One gradient step (forward, backward and Adam) of an actor MLP (21 inputs -> 256 -> 256 -> 4) and a critic MLP
(21 -> 256 -> 256 -> 1) with tanh, on ``rows`` random rows, in float32 and under
``torch.autocast("cpu", torch.bfloat16)`` (the weights and Adam stay float32), the two alternated so that a
change of the machine's load hits both. Prints the best of ``repeats`` rounds of 10 steps each, in ms per
step, and the raw Gymnasium CartPole rate (benchmarks/reference.py). Not wired into proxima: `--precision`
applies to CNN encoders only. bf16 pays only where the CPU multiplies it natively (AVX512-BF16 or AMX).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.reference import raw_cartpole_sps  # noqa: E402
from proxima.policy.encoders import native_bfloat16  # noqa: E402


def mlp(inputs: int, outputs: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(inputs, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, outputs)
    )


def step_time(rows: int, bf16: bool, steps: int = 10) -> float:
    """Milliseconds per gradient step of the actor and critic on ``rows`` rows."""
    torch.manual_seed(0)
    actor, critic, x = mlp(21, 4), mlp(21, 1), torch.randn(rows, 21)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-4)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = actor(x).float().pow(2).mean() + critic(x).float().pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()  # the first call pays oneDNN's kernel selection
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[12288, 4096, 256])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"native bf16 on this CPU: {native_bfloat16(torch.device('cpu'))}")
    print(f"raw Gymnasium CartPole-v1 before: {raw_cartpole_sps():,.0f} steps/s")
    print("| rows | threads | float32 ms/step | bf16 autocast ms/step | float32 / bf16 |")
    print("|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for rows in args.rows:
            times = {False: [], True: []}
            for _ in range(args.repeats):
                for bf16 in (False, True):
                    times[bf16].append(step_time(rows, bf16))
            fp32, bf16 = min(times[False]), min(times[True])
            print(f"| {rows} | {threads} | {fp32:.1f} | {bf16:.1f} | {fp32 / bf16:.2f} |", flush=True)
    print(f"raw Gymnasium CartPole-v1 after: {raw_cartpole_sps():,.0f} steps/s")


if __name__ == "__main__":
    main()
