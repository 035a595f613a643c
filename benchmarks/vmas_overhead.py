"""What the VMAS backend (``proxima.envs.vmas_backend``) costs on top of VMAS itself: random-action env steps/s
of one scenario through the backend (packed rows, per-row flags, same-step resets) and through VMAS's own
``step`` (with the same resets), in alternating blocks in this process; the medians.

    .venv/bin/python benchmarks/vmas_overhead.py [--scenario navigation] [--envs 1024] [--agents 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import vmas

from proxima.envs import make_vec_env
from proxima.envs.vmas_backend import TASK_DEFAULTS


def timed(step, actions: list, steps: int) -> float:
    start = time.perf_counter()
    for t in range(steps):
        step(actions[t % len(actions)])
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="steps per block (max_steps 100: one reset)")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)

    kwargs = {**TASK_DEFAULTS.get(args.scenario, {}), "n_agents": args.agents}
    envs = make_vec_env(f"vmas:{args.scenario}", args.envs, seed=0, env_kwargs=kwargs)
    envs.reset()
    raw = vmas.make_env(args.scenario, num_envs=args.envs, seed=0, terminated_truncated=True, **kwargs)
    space = envs.single_action_space
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    generator = torch.Generator().manual_seed(0)
    rows = [
        low + (high - low) * torch.rand(envs.num_envs, space.shape[0], generator=generator) for _ in range(8)
    ]
    per_agent = [list(a.view(args.envs, args.agents, -1).unbind(1)) for a in rows]

    def raw_step(actions: list) -> None:
        _, _, terminated, truncated, _ = raw.step(actions)
        done = terminated | truncated
        if done.all():
            raw.reset()
        elif done.any():
            for i in done.nonzero().flatten().tolist():
                raw.reset_at(i)

    timed(envs.step, rows, 20)  # warm-up
    timed(raw_step, per_agent, 20)
    backend, own = [], []
    for _ in range(args.blocks):
        backend.append(timed(envs.step, rows, args.steps))
        own.append(timed(raw_step, per_agent, args.steps))
    b, r = statistics.median(backend), statistics.median(own)
    threads = torch.get_num_threads()
    print(
        f"{args.scenario}, {args.envs} envs x {args.agents} agents, {threads} torch threads, medians of {args.blocks}"
    )
    print(f"VMAS itself:      {r:8.1f} steps/s = {r * args.envs:10.0f} env steps/s")
    print(f"through proxima:  {b:8.1f} steps/s = {b * args.envs:10.0f} env steps/s  ({b / r:.3f}x)")


if __name__ == "__main__":
    main()
