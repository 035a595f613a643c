"""A batched run's action draws per rollout step (issue 36): each seed's ``head.sample`` under its own stream
(``SeedStreams.each``, the path of a head whose draws depend on its logits, the Beta's) against one
``head.sample`` of all rows on the noise each seed drew from its own generator, with each seed's parameters
(a Gaussian's log-std) on its rows (``SeedModel``'s path for the other heads).

    .venv/bin/python benchmarks/seed_draws.py [--seeds 16 64] [--envs 64] [--head categorical|gaussian]
        [--actions 2] [--cuda]

Prints milliseconds per step for each, best of 3 rounds of 300 steps, with 1 torch thread.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from proxima.batched import SeedStreams
from proxima.distributions import CategoricalHead, DiagGaussianHead


def per_step_ms(step, steps: int = 300, rounds: int = 3) -> float:
    for _ in range(20):
        step()
    best = float("inf")
    for _ in range(rounds):
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        best = min(best, (time.perf_counter() - start) / steps * 1e3)
    return best


def each_seed(heads: list, logits: torch.Tensor, streams: SeedStreams) -> list[torch.Tensor]:
    drawn = streams.each(lambda j: heads[j].sample(logits[j]))
    return [torch.cat(parts) for parts in zip(*drawn, strict=True)]


def one_sample(heads: list, logits: torch.Tensor, streams: SeedStreams) -> tuple[torch.Tensor, torch.Tensor]:
    own = streams.generators(logits.device)
    noise = torch.cat([heads[0].noise(logits[j], own[j]) for j in range(len(logits))])
    stacked = {
        name: torch.stack([dict(h.named_parameters())[name] for h in heads])
        for name, _ in heads[0].named_parameters()
    }
    rows = {name: p.repeat_interleave(logits.shape[1], 0) for name, p in stacked.items()}
    return heads[0].sample(logits.flatten(0, 1), noise=noise, **rows)


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[16, 64])
    parser.add_argument("--envs", type=int, default=64, help="envs a seed")
    parser.add_argument("--head", choices=["categorical", "gaussian"], default="categorical")
    parser.add_argument(
        "--actions", type=int, default=2, help="actions (categorical) or components (gaussian)"
    )
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device("cuda" if args.cuda else "cpu")
    for n in args.seeds:
        make = CategoricalHead if args.head == "categorical" else DiagGaussianHead
        heads = [make(args.actions).to(device) for _ in range(n)]
        logits = torch.randn(n, args.envs, args.actions, device=device)
        cuda = [torch.cuda.get_rng_state(device)] * n if args.cuda else None
        streams = SeedStreams([torch.get_rng_state()] * n, cuda, device)

        print(
            f"{n} seeds x {args.envs} envs on {device.type}: each seed's sample "
            f"{per_step_ms(partial(each_seed, heads, logits, streams)):.3f} ms, "
            f"one sample {per_step_ms(partial(one_sample, heads, logits, streams)):.3f} ms a step"
        )


if __name__ == "__main__":
    main()
