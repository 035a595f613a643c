"""Tries at a cheaper PPO update per sample (issue 16, item 4), on the 500k steps/s configuration's shapes.

    .venv/bin/python benchmarks/update_tries.py [--threads 2] [--repeats 5]

One update of 1,024 envs x 16 steps of CartPole (16,384 samples, 4 minibatches of 4,096, 4 epochs: 16 gradient
steps), with proxima's own `update` on a synthetic batch. Each try changes one thing and reports the update's
samples per second (best of ``repeats``) and, for torch.compile, the compile time that a run pays once:

- eager: proxima as it is;
- compiled: `torch.compile` of the model's `evaluate` (forward, log-probs, entropy), the rest as is;
- stacked: the network's forward and backward alone, actor and critic as one batched matmul per layer (the two
  first layers as one 4 x 128 weight, the next two and the heads as one `baddbmm`), against the same two
  networks run apart. This one is a bound on the gain: it is not wired into proxima.
"""

from __future__ import annotations

import argparse
import time

import torch

from proxima.algo.algorithms import get_algorithm
from proxima.algo.optim import make_adam
from proxima.algo.storage import Batch
from proxima.algo.update import UpdateSettings, update
from proxima.policy.distributions import CategoricalHead
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec

SAMPLES, MINIBATCHES, EPOCHS, OBS, ACTIONS = 16_384, 4, 4, 4, 2


def batch() -> Batch:
    g = torch.Generator().manual_seed(0)
    return Batch(
        obs=torch.randn(SAMPLES, OBS, generator=g),
        actions=torch.randint(0, ACTIONS, (SAMPLES,), generator=g),
        logprobs=torch.full((SAMPLES,), -0.69),
        values=torch.randn(SAMPLES, generator=g),
        advantages=torch.randn(SAMPLES, generator=g),
        returns=torch.randn(SAMPLES, generator=g),
    )


def model() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(
        NetworkSpec(ACTIONS, (OBS,), NetworkSettings(norm_value=True)), CategoricalHead(ACTIONS)
    )


def time_updates(m: ActorCritic, repeats: int) -> tuple[float, float]:
    """(seconds of the first update, best seconds of the next ``repeats``)."""
    settings = UpdateSettings(get_algorithm("ppo").policy_loss, EPOCHS, MINIBATCHES)
    optimizer = make_adam(m.param_groups(2.5e-4, None), 2.5e-4)
    b = batch()
    start = time.perf_counter()
    update(m, optimizer, b, settings, torch.Generator())
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        update(m, optimizer, b, settings, torch.Generator())
        best = min(best, time.perf_counter() - start)
    return first, best


class Stacked(torch.nn.Module):
    """Actor and critic (4 -> 64 -> 64 -> 2 and 4 -> 64 -> 64 -> 1, tanh) with each layer pair as one matmul."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(OBS, 128) * 0.5)
        self.b1 = torch.nn.Parameter(torch.zeros(128))
        self.w2 = torch.nn.Parameter(torch.randn(2, 64, 64) * 0.1)
        self.b2 = torch.nn.Parameter(torch.zeros(2, 1, 64))
        self.w3 = torch.nn.Parameter(torch.randn(2, 64, ACTIONS) * 0.1)  # the critic's uses column 0
        self.b3 = torch.nn.Parameter(torch.zeros(2, 1, ACTIONS))

    def forward(self, x):
        h = torch.tanh(torch.addmm(self.b1, x, self.w1)).view(-1, 2, 64).transpose(0, 1)  # (2, B, 64)
        h = torch.tanh(torch.baddbmm(self.b2, h, self.w2))
        out = torch.baddbmm(self.b3, h, self.w3)
        return out[0], out[1, :, 0]


class Apart(torch.nn.Module):
    def __init__(self):
        super().__init__()
        act = torch.nn.Tanh
        self.actor = torch.nn.Sequential(torch.nn.Linear(OBS, 64), act(), torch.nn.Linear(64, 64), act(),
                                         torch.nn.Linear(64, ACTIONS))  # fmt: skip
        self.critic = torch.nn.Sequential(torch.nn.Linear(OBS, 64), act(), torch.nn.Linear(64, 64), act(),
                                          torch.nn.Linear(64, 1))  # fmt: skip

    def forward(self, x):
        return self.actor(x), self.critic(x).squeeze(-1)


def time_network(net: torch.nn.Module, repeats: int) -> float:
    """Best seconds of 16 forward + backward passes over minibatches of 4,096."""
    x = torch.randn(SAMPLES // MINIBATCHES, OBS)
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(EPOCHS * MINIBATCHES):
            logits, values = net(x)
            (logits.logsumexp(-1).sum() + values.square().sum()).backward()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} threads; one update = {SAMPLES:,} samples, 16 gradient steps"
    )
    first, best = time_updates(model(), args.repeats)
    print(f"eager      update {best * 1000:7.1f} ms  {SAMPLES / best:9,.0f} samples/s")
    m = model()
    m.evaluate = torch.compile(m.evaluate, dynamic=False)
    first_c, best_c = time_updates(m, args.repeats)
    payoff = (f"pays off after {first_c / (best - best_c):,.0f} updates" if best_c < best
              else "never pays off")  # fmt: skip
    print(f"compiled   update {best_c * 1000:7.1f} ms  {SAMPLES / best_c:9,.0f} samples/s  (first update "
          f"{first_c:.1f} s, eager's {first:.2f} s: the compile {payoff})")  # fmt: skip
    apart, stacked = time_network(Apart(), args.repeats), time_network(Stacked(), args.repeats)
    print(f"network forward+backward, 16 minibatches: apart {apart * 1000:.1f} ms, stacked {stacked * 1000:.1f} ms "
          f"({apart / stacked:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
