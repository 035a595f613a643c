"""PureJaxRL's PPO trained for N seeds at once, as PureJaxRL does it: `jax.jit(jax.vmap(make_train(config)))` on
`jax.random.split(rng, N)`. The peer of `proxima train --num-seeds N` in benchmarks/num_seeds.py.

For each N, in a process of its own (so that its wall time counts jax's import and the jit compile, as
benchmarks/peers/purejaxrl_solve.py's does): purejaxrl/ppo.py's own config (its `__main__`'s, ENV_NAME the task,
DEBUG off), N seeds split from PRNGKey(--seed) and trained as one vmapped program. Then every seed's final policy
is scored as purejaxrl_solve.py scores one (100 deterministic episodes of gymnax's env; solved where their mean
reaches the task's threshold, CartPole-v1: 475), all seeds in one vmapped call. PureJaxRL never stops early:
every seed trains TOTAL_TIMESTEPS steps.

Prints one JSON line per N: num_seeds, steps (all seeds together), wall_s (process start to the end of training),
imports_s, compile_s, train_s, sps (steps / wall_s), solved (seeds), means (each seed's 100-episode mean),
peak_rss_mb, jax, config. Runs in the peers' venv (benchmarks/peers/purejaxrl.sh), never in proxima's.

    PEERS/purejaxrl/venv/bin/python benchmarks/peers/purejaxrl_vmap.py [--num-seeds 1 4 16 64]
        [--task CartPole-v1] [--seed 1] [--timesteps N] [--src PEERS/purejaxrl/src] [--set KEY=VALUE ...]

--timesteps: env steps per seed (default: ppo.py's own TOTAL_TIMESTEPS, 5e5). --set overrides a config key (the
results then no longer use PureJaxRL's defaults: say so when reporting).
"""

import time

START = time.perf_counter()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.peers.purejaxrl_solve import (  # noqa: E402
    DEFAULT_SRC,
    DISCRETE,
    EPISODES,
    THRESHOLDS,
    obs_stats,
    parse_set,
    scoring_episode,
    script_config,
)

NUM_SEEDS = (1, 4, 16, 64)


def sequential_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """jax's orthogonal initializer (flax's `orthogonal`), drawn one seed after another under vmap: the same QR of
    the same matrix for each seed. Vmapped, jaxlib 0.10.2's CPU LAPACK QR splits the batch over XLA's thread pool
    from inside that pool (ParallelBatchMap), and with 2 cores ppo.py's concurrent initializers can take both pool
    threads and wait on each other for ever (seen with 4 seeds)."""
    import jax

    inner = jax.nn.initializers.orthogonal(scale, column_axis, dtype)

    def init(key, shape, dtype=dtype):
        return jax.custom_batching.sequential_vmap(lambda k: inner(k, shape, dtype))(key)

    return init


def run_many(task, num_seeds, seed, timesteps, src, overrides):
    """Train ``num_seeds`` seeds of ``task`` as one vmapped program in this process, score each; a dict of results."""
    sys.path.insert(0, src)
    import jax
    import jax.numpy as jnp

    module = importlib.import_module("ppo")
    module.orthogonal = (
        sequential_orthogonal  # ActorCritic looks the name up at init, inside the vmapped train
    )
    config = script_config(os.path.join(src, "ppo.py"))
    config.update(ENV_NAME=task, DEBUG=False, TOTAL_TIMESTEPS=int(timesteps or config["TOTAL_TIMESTEPS"]))
    config.update(overrides)
    shown = dict(config)
    imported = time.perf_counter()

    train = jax.jit(jax.vmap(module.make_train(config)))  # make_train adds NUM_UPDATES to config
    rngs = jax.random.split(jax.random.PRNGKey(seed), num_seeds)
    compiled = train.lower(rngs).compile()
    compiled_at = time.perf_counter()
    out = jax.block_until_ready(compiled(rngs))
    trained_at = time.perf_counter()
    steps = num_seeds * int(config["NUM_UPDATES"]) * config["NUM_STEPS"] * config["NUM_ENVS"]

    train_state, env_state = out["runner_state"][0], out["runner_state"][1]
    episodes = jax.vmap(
        scoring_episode(module, task, config), in_axes=(None, None, 0)
    )  # one agent's episodes
    # seed i's episodes: as purejaxrl_solve.py's for --seeds i, from PRNGKey(10_000 + i)
    seeds = seed + jnp.arange(num_seeds)
    keys = jax.vmap(lambda s: jax.random.split(jax.random.PRNGKey(10_000 + s), EPISODES))(seeds)
    stats = jax.vmap(lambda e: obs_stats(e, task, config))(env_state)
    returns = jax.device_get(jax.jit(jax.vmap(episodes))(train_state.params, stats, keys))
    means = [float(m) for m in returns.mean(axis=1)]
    wall = trained_at - START
    return dict(
        task=task,
        num_seeds=num_seeds,
        seed=seed,
        steps=steps,
        wall_s=round(wall, 3),
        imports_s=round(imported - START, 3),
        compile_s=round(compiled_at - imported, 3),
        train_s=round(trained_at - compiled_at, 3),
        sps=round(steps / wall),
        solved=sum(m >= THRESHOLDS[task] for m in means),
        threshold=THRESHOLDS[task],
        means=[round(m, 1) for m in means],
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        jax=jax.__version__,
        config=shown,
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-seeds", nargs="+", type=int, default=list(NUM_SEEDS))
    parser.add_argument("--task", default="CartPole-v1", choices=DISCRETE)
    parser.add_argument("--seed", type=int, default=1, help="the key that the N seeds' keys are split from")
    parser.add_argument(
        "--timesteps", type=float, default=None, help="env steps per seed (default: ppo.py's)"
    )
    parser.add_argument("--src", default=DEFAULT_SRC, help="the patched PureJaxRL files (purejaxrl.sh)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--one", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.num_seeds) < 1:
        parser.error("--num-seeds takes positive integers")

    if args.one:  # child: one N, its result as one JSON line
        result = run_many(args.task, args.one, args.seed, args.timesteps, args.src, parse_set(args.set))
        print("RESULT " + json.dumps(result), flush=True)
        return

    failed = False
    for n in args.num_seeds:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(n), "--task", args.task, "--seed",
               str(args.seed), "--src", args.src]  # fmt: skip
        cmd += ["--timesteps", str(args.timesteps)] if args.timesteps else []
        cmd += ["--set", *args.set] if args.set else []
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode or not lines:
            print(f"{args.task} with {n} seeds failed (exit {proc.returncode})", file=sys.stderr, flush=True)
            failed = True
            continue
        print(lines[-1][len("RESULT ") :], flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
