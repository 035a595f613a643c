"""Atari throughput: env stepping per backend, and proxima's full loop with its time split into env, rollout
inference and update, beside the day's raw CartPole rate (benchmarks/reference.py).

    .venv/bin/python benchmarks/atari_throughput.py envs              # ale, gymnasium wrappers, envpool if installed
    .venv/bin/python benchmarks/atari_throughput.py loop [--steps N] [--threads T] [--cuda] [-- TRAIN FLAGS]
    .venv/bin/python benchmarks/atari_throughput.py minibatch [--threads T]   # one update step, by --precision

CleanRL's ppo_atari.py is run separately (benchmarks/peers/cleanrl_atari.sh), back to back with `loop`.
Run one measurement at a time: two at once share the two cores.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, ".")
from benchmarks.reference import raw_cartpole_sps  # noqa: E402

GAME = "BreakoutNoFrameskip-v4"


def env_rates(num_envs: int = 8, steps: int = 4000) -> dict[str, float]:
    from proxima.envs import make_vec_env

    rates = {}
    for backend in ("ale", "gymnasium"):
        envs = make_vec_env(GAME, num_envs, backend=backend, seed=0)
        envs.reset()
        actions = torch.randint(
            0, 4, (steps // num_envs, num_envs), generator=torch.Generator().manual_seed(0)
        )
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        rates[backend] = steps / (time.perf_counter() - start)
        envs.close()
    try:
        import envpool
    except ImportError:
        return rates
    envs = envpool.make_gymnasium("Breakout-v5", num_envs=num_envs, episodic_life=False, reward_clip=False,
                                  repeat_action_probability=0.0)  # fmt: skip
    envs.reset()
    actions = np.random.default_rng(0).integers(0, 4, (steps // num_envs, num_envs))
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    rates["envpool"] = steps / (time.perf_counter() - start)
    envs.close()
    return rates


def loop(steps: int, threads: int, flags: list[str], cuda: bool = False) -> dict[str, float]:
    """One `--config atari` run of ``steps`` env steps, timed by phase: env.step, the rest of the rollout
    (the policy's forward passes and the buffer writes), and the update (GAE included). On a GPU the phases
    end where the CPU waits for it, so each phase's time includes the GPU work it started."""
    import proxima.run.loop
    import proxima.run.rollout
    import proxima.scale.trainer
    from proxima.envs.interface import env_call as original_env_call

    spent = {"env": 0.0, "rollout": 0.0, "update": 0.0}

    def timed_env_call(method, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original_env_call(method, *args, **kwargs)
        finally:
            spent["env"] += time.perf_counter() - start

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        return wrapper

    proxima.run.rollout.env_call = timed_env_call
    collect = proxima.run.rollout.RolloutCollector.collect
    proxima.run.rollout.RolloutCollector.collect = timed("rollout", collect)
    proxima.run.loop.update = timed("update", proxima.run.loop.update)
    from proxima.scale.trainer import train

    start = time.perf_counter()
    train(config="atari", total_timesteps=steps, torch_threads=threads, cuda=cuda, quiet=True, plot=False,
          run_dir=f"/tmp/proxima-atari-bench-{time.time_ns()}", **_overrides(flags))  # fmt: skip
    wall = time.perf_counter() - start
    spent["rollout"] -= spent["env"]
    return {"sps": steps / wall, "wall_s": wall, **spent}


def _overrides(flags: list[str]) -> dict:
    out = {}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        key = flag.lstrip("-").replace("-", "_")
        out[key] = type(__import__("proxima.run.config").config.PPOArgs().flat()[key])(value)
    return out


def minibatch_variants(threads: int, repeats: int = 12) -> None:
    """Forward, backward and Adam on one 256-sample minibatch of 4x84x84 uint8 stacks through the Nature CNN
    (proxima's own forward: channels-last, the input path of proxima.policy.encoders) and linear heads, in each
    --precision. The variants take turns, step by step, so that a change in the machine's speed hits all of
    them; the median of ``repeats`` steps is printed."""
    import statistics

    from torch import nn

    from proxima.policy.encoders import PRECISIONS, NatureCNN

    torch.set_num_threads(threads or 2)
    obs = torch.randint(
        0, 255, (256, 4, 84, 84), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )

    def make_step(precision):
        torch.manual_seed(0)
        cnn, actor, critic = NatureCNN((4, 84, 84), precision), nn.Linear(512, 4), nn.Linear(512, 1)
        params = [*cnn.parameters(), *actor.parameters(), *critic.parameters()]
        optimizer = torch.optim.Adam(params, lr=2.5e-4, eps=1e-5)

        def step():
            features = cnn(obs)
            loss = actor(features).logsumexp(-1).mean() + critic(features).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return step

    steps = {precision: make_step(precision) for precision in PRECISIONS}
    times = {precision: [] for precision in PRECISIONS}
    for step in steps.values():
        step(), step()  # warm-up
    for _ in range(repeats):
        for precision, step in steps.items():
            start = time.perf_counter()
            step()
            times[precision].append(time.perf_counter() - start)
    for precision, spent in times.items():
        print(f"--precision {precision}: {statistics.median(spent) * 1000:.0f} ms per 256-sample minibatch step "
              f"(median of {repeats}; fastest {min(spent) * 1000:.0f} ms)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["envs", "loop", "minibatch"])
    parser.add_argument("--steps", type=int, default=20_480)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--cuda", action="store_true", help="train on the GPU (benchmarks/gpu.sh)")
    args, rest = parser.parse_known_args()
    rest = [r for r in rest if r != "--"]
    print(
        f"raw Gymnasium CartPole-v1 (SyncVectorEnv of 4, random actions): {raw_cartpole_sps():,.0f} steps/s"
    )
    if args.what == "minibatch":
        minibatch_variants(args.threads)
    elif args.what == "envs":
        for name, rate in env_rates().items():
            print(f"{GAME} env only, 8 envs, random actions, {name}: {rate:,.0f} steps/s")
    else:
        r = loop(args.steps, args.threads, rest, args.cuda)
        print(f"proxima --config atari {'--cuda ' * args.cuda}{' '.join(rest)} ({args.steps} steps, threads={args.threads or 'auto'}): "
              f"{r['sps']:.0f} steps/s; env {r['env']:.1f} s, rollout inference {r['rollout']:.1f} s, "
              f"update {r['update']:.1f} s of {r['wall_s']:.1f} s")  # fmt: skip
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
