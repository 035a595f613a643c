"""PureJaxRL's PPO on gymnax's classic-control tasks, a peer of benchmarks/solve_suite.py.

For each (task, seed): build PureJaxRL's own `make_train(config)` (discrete tasks: purejaxrl/ppo.py; continuous:
purejaxrl/ppo_continuous_action.py, patched by benchmarks/peers/purejaxrl.sh to build gymnax envs), with the config
of that script's `__main__` read from its source (ENV_NAME set to the task, TOTAL_TIMESTEPS from --timesteps, DEBUG
off: its per-episode host callback is logging only), jit it for ONE seed (no vmap over seeds), compile, train,
then score the final policy on 100 deterministic episodes (argmax / mean action) of gymnax's env, vmapped and
jitted, observations normalized with the final running statistics where the config normalizes. Prints one markdown
row: env steps trained, wall time from process start to the end of training (jax import and jit compile included),
the import / compile / train split, peak RSS, the 100-episode mean ± std, solved or not.

Each (task, seed) runs in its own process, so its wall time (imports and compile included) and peak RSS are its
own. Runs in the peers' venv (benchmarks/peers/purejaxrl.sh), never in proxima's. With `--record`, the batch goes
to docs/results/data as the peer's rows of the solve table (benchmarks/records.py, standard library only; the raw
CartPole rate is measured with proxima's .venv, since this venv has no Gymnasium).

    PEERS/purejaxrl/venv/bin/python benchmarks/peers/purejaxrl_solve.py [--tasks CartPole-v1 ...] [--seeds 1 2 3]
        [--timesteps N] [--src PEERS/purejaxrl/src] [--set KEY=VALUE ...] [--record [DIR]]

--timesteps default: 5e5 for the discrete tasks (ppo.py's own TOTAL_TIMESTEPS); 1e6 for the continuous ones
(ppo_continuous_action.py's own 5e7 is sized for Brax hopper on an accelerator). --set overrides a config key for
every task, e.g. --set NUM_ENVS=64 (the rows then no longer use PureJaxRL's defaults: say so when reporting).
"""

import time

START = time.perf_counter()

import argparse  # noqa: E402
import ast  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks import records  # noqa: E402

DISCRETE = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
CONTINUOUS = ("MountainCarContinuous-v0", "Pendulum-v1")
THRESHOLDS = {"CartPole-v1": 475, "Acrobot-v1": -100, "MountainCar-v0": -110, "MountainCarContinuous-v0": 90,
              "Pendulum-v1": -200}  # fmt: skip
DEFAULT_TIMESTEPS = {"discrete": None, "continuous": 1_000_000}  # None: the script's own TOTAL_TIMESTEPS
EPISODES = 100
DEFAULT_SRC = os.environ.get("PUREJAXRL_SRC", "/work/peers/purejaxrl/src")
PEER = "PureJaxRL (defaults)"


def script_config(path):
    """The `config = {...}` literal under the script's `if __name__ == "__main__":`."""
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "config":
                    return ast.literal_eval(stmt.value)
    raise SystemExit(f"no default config found in {path}")


def scoring_episode(module, task, config):
    """One deterministic episode (argmax / mean action) of gymnax's env, as a function of (params, stats, key) that
    returns its return; stats: ``obs_stats``. Params and stats are arguments, not constants, so that one compile
    scores any number of agents (benchmarks/peers/purejaxrl_vmap.py vmaps it over seeds)."""
    import gymnax
    import jax
    import jax.numpy as jnp

    continuous = task in CONTINUOUS
    env, env_params = gymnax.make(task)
    space = env.action_space(env_params)
    network = module.ActorCritic(space.shape[0] if continuous else space.n, activation=config["ACTIVATION"])

    def norm(obs, stats):
        if stats:
            mean, var = stats
            return (obs - mean) / jnp.sqrt(var + 1e-8)
        return obs.reshape(-1)  # ppo.py's FlattenObservationWrapper

    def episode(params, stats, key):
        key, reset_key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)

        def step(carry, _):
            obs, state, key, total, alive = carry
            pi, _ = network.apply(params, norm(obs, stats))
            action = pi.mode()  # Categorical: argmax; MultivariateNormalDiag: mean
            if continuous:
                action = jnp.clip(action, space.low, space.high)
            key, step_key = jax.random.split(key)
            obs, state, reward, done, _ = env.step(step_key, state, action, env_params)
            return (obs, state, key, total + reward * alive, alive & ~done), None

        carry = (obs, state, key, jnp.float32(0.0), jnp.bool_(True))
        carry, _ = jax.lax.scan(step, carry, None, length=env_params.max_steps_in_episode)
        return carry[3]

    return episode


def obs_stats(env_state, task, config):
    """The final running observation mean and variance (NormalizeVecReward(NormalizeVecObservation(...))'s state)
    where the config normalizes observations, else ()."""
    if task in CONTINUOUS and config["NORMALIZE_ENV"]:
        return env_state.env_state.mean[0], env_state.env_state.var[0]
    return ()


def run_one(task, seed, timesteps, src, overrides):
    """Train and score one (task, seed) in this process; returns a dict of results."""
    sys.path.insert(0, src)
    import jax

    continuous = task in CONTINUOUS
    name = "ppo_continuous_action" if continuous else "ppo"
    module = importlib.import_module(name)
    config = script_config(os.path.join(src, name + ".py"))
    default_budget = (
        DEFAULT_TIMESTEPS["continuous" if continuous else "discrete"] or config["TOTAL_TIMESTEPS"]
    )
    config.update(ENV_NAME=task, DEBUG=False, TOTAL_TIMESTEPS=int(timesteps or default_budget))
    config.update(overrides)
    shown = dict(config)
    imported = time.perf_counter()

    train = jax.jit(module.make_train(config))  # make_train adds NUM_UPDATES, MINIBATCH_SIZE to config
    rng = jax.random.PRNGKey(seed)
    compiled = train.lower(rng).compile()
    compiled_at = time.perf_counter()
    out = jax.block_until_ready(compiled(rng))
    trained_at = time.perf_counter()
    steps = int(config["NUM_UPDATES"]) * config["NUM_STEPS"] * config["NUM_ENVS"]

    train_state, env_state = out["runner_state"][0], out["runner_state"][1]
    episode = scoring_episode(module, task, config)
    keys = jax.random.split(jax.random.PRNGKey(10_000 + seed), EPISODES)
    stats = obs_stats(env_state, task, config)
    returns = jax.device_get(
        jax.jit(jax.vmap(episode, in_axes=(None, None, 0)))(train_state.params, stats, keys)
    )
    return dict(
        task=task,
        seed=seed,
        steps=steps,
        wall=trained_at - START,
        imports=imported - START,
        compile=compiled_at - imported,
        train=trained_at - compiled_at,
        eval=time.perf_counter() - trained_at,
        mean=float(returns.mean()),
        std=float(returns.std()),
        rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        jax=jax.__version__,
        config=shown,
    )


def parse_set(items):
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", nargs="+", default=list(DISCRETE + CONTINUOUS), choices=DISCRETE + CONTINUOUS
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument(
        "--timesteps", type=float, default=None, help="env steps per run (default: see above)"
    )
    parser.add_argument("--src", default=DEFAULT_SRC, help="the patched PureJaxRL files (purejaxrl.sh)")
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides, all tasks"
    )
    parser.add_argument("--one", nargs=2, metavar=("TASK", "SEED"), help=argparse.SUPPRESS)
    records.add_record_flag(parser)
    args = parser.parse_args()
    overrides = parse_set(args.set)

    if args.one:  # child: one (task, seed), result as one JSON line
        result = run_one(args.one[0], int(args.one[1]), args.timesteps, args.src, overrides)
        print("RESULT " + json.dumps(result), flush=True)
        return

    batch = records.Batch(
        "solve", out_dir=args.record, peer=PEER, software=("jax", "flax", "optax", "gymnax")
    )
    settings = ["the scripts' own configs"]
    settings += [f"--timesteps {args.timesteps:g}"] if args.timesteps else []
    settings = ", ".join(settings + args.set)
    print(
        "| task | seed | env steps | wall s (process start → end of training) | import s | compile s | train s "
        "| peak RSS MB | 100 deterministic episodes (mean ± std) | solved |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    configs = {}
    for task in args.tasks:
        for seed in args.seeds:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", task, str(seed), "--src", args.src]
            if args.timesteps:
                cmd += ["--timesteps", str(args.timesteps)]
            if args.set:
                cmd += ["--set", *args.set]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode or not lines:
                print(f"| {task} | {seed} | failed (exit {proc.returncode}) | | | | | | | |", flush=True)
                continue
            r = json.loads(lines[-1][len("RESULT ") :])
            configs[task] = r["config"]
            solved = "yes" if r["mean"] >= THRESHOLDS[task] else "no"
            command = ["python", "benchmarks/peers/purejaxrl_solve.py", "--tasks", task, "--seeds", str(seed)]
            command += ["--timesteps", f"{args.timesteps:g}"] if args.timesteps else []
            command += ["--set", *args.set] if args.set else []
            batch.add(task=task, settings=settings, seed=seed, score=records.score(r["mean"], r["std"], EPISODES),
                      threshold=THRESHOLDS[task], steps=r["steps"], wall_s=round(r["wall"], 2),
                      peak_rss_mb=round(r["rss_mb"]), compile_s=round(r["compile"], 2), config=r["config"],
                      command=shlex.join(command))  # fmt: skip
            print(
                f"| {task} | {seed} | {r['steps']} | {r['wall']:.1f} | {r['imports']:.1f} | {r['compile']:.1f} "
                f"| {r['train']:.1f} | {r['rss_mb']:.0f} | {r['mean']:.1f} ± {r['std']:.1f} | {solved} |",
                flush=True,
            )
    for task, config in configs.items():
        print(f"\n<!-- {task}: PureJaxRL config {json.dumps(config)} -->")
    path = batch.finish()
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
