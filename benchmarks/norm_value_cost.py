"""What value normalization costs in the hot path: one rollout step's forward pass (4 observations) and one
update (4 epochs of 4 minibatches of 128), with and without ``norm_value``, in one process, interleaved.

The full-loop figures of throughput.py vary by more than this difference between runs on a shared machine, so
this times the two parts directly; the minimum over repeats is the least disturbed figure.

    .venv/bin/python benchmarks/norm_value_cost.py
"""

from __future__ import annotations

import time

import torch

from proxima.algo.optim import make_adam
from proxima.algo.storage import Batch
from proxima.algo.update import UpdateSettings, update
from proxima.policy.distributions import CategoricalHead
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.run.config import PPOArgs


def main() -> None:
    torch.set_num_threads(1)  # what a default run uses at minibatches of 128
    torch.manual_seed(0)
    models = {
        nv: ActorCritic(NetworkSpec(2, (4,), NetworkSettings(norm_value=nv)), CategoricalHead(2))
        for nv in (False, True)
    }
    step_us: dict[bool, list[float]] = {False: [], True: []}
    obs = torch.randn(4, 4)
    for _ in range(5):
        for nv, model in models.items():
            start = time.perf_counter()
            with torch.no_grad():
                for _ in range(5000):
                    model.act(obs)
            step_us[nv].append((time.perf_counter() - start) / 5000 * 1e6)
    update_ms: dict[bool, list[float]] = {False: [], True: []}
    args, big = PPOArgs(), torch.randn(512, 4)
    for _ in range(3):
        for nv, model in models.items():
            optimizer = make_adam(model.parameters(), args.algorithm.learning_rate)
            with torch.no_grad():
                actions, logprobs, values = model.act(big)
            batch = Batch(big, actions, logprobs, values, torch.randn(512), values + torch.randn(512))
            start = time.perf_counter()
            for _ in range(20):
                update(model, optimizer, batch, UpdateSettings.from_args(args))
            update_ms[nv].append((time.perf_counter() - start) / 20 * 1e3)
    print("| norm_value | act, 4 observations (µs) | update, 512 samples (ms) |")
    print("|---|---|---|")
    for nv in (False, True):
        print(f"| {nv} | {min(step_us[nv]):.1f} | {min(update_ms[nv]):.2f} |")


if __name__ == "__main__":
    main()
