"""Stable-Baselines3 PPO with the rl-baselines3-zoo's tuned hyperparameters: the peer of
benchmarks/solve_suite.py.

For each (task, seed): train as the zoo's `train.py --algo ppo --env TASK --seed SEED` would (n_envs copies
in a DummyVecEnv from make_vec_env, VecNormalize with the algorithm's gamma where the zoo says `normalize`,
`lin_X` as linear schedules, policy_kwargs evaluated, the zoo's n_timesteps as the budget), but at the first
PPO update past every --eval-every env steps evaluate the deterministic policy on 20 episodes of a separate
env (the training VecNormalize statistics, frozen; raw rewards) and stop once that mean reaches the task's
threshold, like proxima's --stop-return (--no-stop: no evaluations, the whole budget; --max-seconds: a cap
on process time). Then score the final model on 100 deterministic episodes of Gymnasium's env and print one
markdown row: steps trained, process wall time from start to the end of training, peak RSS, the 100-episode
mean ± std, solved or not.

Each (task, seed) runs in its own process, so that its wall time (imports included, as for `proxima train`)
and its peak RSS are its own. Runs in the peers' venv (benchmarks/peers/sb3_zoo.sh), never in proxima's. With
`--record`, the batch goes to docs/results/data as the peer's rows of the solve table (benchmarks/records.py,
standard library only, so it runs here too).

    PEERS/sb3/venv/bin/python benchmarks/peers/sb3_zoo_solve.py [--tasks CartPole-v1 ...] [--seeds 1 2 3 4 5]
        [--timesteps N] [--eval-every N] [--no-stop] [--max-seconds 600] [--record [DIR]]
"""

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks import records  # noqa: E402

# Copied from rl-baselines3-zoo hyperparams/ppo.yml at commit 22e3ff2450fd92033f7f032915e1f64894a09584
# (2026-04-23, "Update SB3 version, add pandas to plot requires (#511)"), values as the zoo writes them.
ZOO_COMMIT = "22e3ff2450fd92033f7f032915e1f64894a09584"
HYPERPARAMS = {
    "CartPole-v1": dict(
        n_envs=8, n_timesteps=1e5, policy="MlpPolicy", n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
        n_epochs=20, ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2",
    ),
    "Acrobot-v1": dict(
        normalize=True, n_envs=16, n_timesteps=1e6, policy="MlpPolicy", n_steps=256, gae_lambda=0.94,
        gamma=0.99, n_epochs=4, ent_coef=0.0,
    ),
    "MountainCar-v0": dict(
        normalize=True, n_envs=16, n_timesteps=1e6, policy="MlpPolicy", n_steps=16, gae_lambda=0.98,
        gamma=0.99, n_epochs=4, ent_coef=0.0,
    ),
    "MountainCarContinuous-v0": dict(
        normalize=True, n_envs=1, n_timesteps=20000, policy="MlpPolicy", batch_size=256, n_steps=8,
        gamma=0.9999, learning_rate=7.77e-05, ent_coef=0.00429, clip_range=0.1, n_epochs=10, gae_lambda=0.9,
        max_grad_norm=5, vf_coef=0.19, use_sde=True,
        policy_kwargs="dict(log_std_init=-3.29, ortho_init=False)",
    ),
    "Pendulum-v1": dict(
        n_envs=4, n_timesteps=1e5, policy="MlpPolicy", n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
        ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4,
    ),
    "LunarLander-v3": dict(
        n_envs=16, n_timesteps=1e6, policy="MlpPolicy", n_steps=1024, batch_size=64, gae_lambda=0.98,
        gamma=0.999, n_epochs=4, ent_coef=0.01,
    ),
    "BipedalWalker-v3": dict(
        normalize=True, n_envs=32, n_timesteps=5e6, policy="MlpPolicy", n_steps=2048, batch_size=64,
        gae_lambda=0.95, gamma=0.999, n_epochs=10, ent_coef=0.0, learning_rate=3e-4, clip_range=0.18,
    ),
}  # fmt: skip
THRESHOLDS = {"CartPole-v1": 475, "Acrobot-v1": -100, "MountainCar-v0": -110, "MountainCarContinuous-v0": 90,
              "Pendulum-v1": -200, "LunarLander-v3": 200, "BipedalWalker-v3": 300}  # fmt: skip
EVAL_EPISODES, FINAL_EPISODES = 20, 100
PEER = "SB3 (zoo settings)"


def linear(initial):
    """The zoo's SimpleLinearSchedule: initial value down to 0 over the budget."""
    return lambda progress_remaining: progress_remaining * initial


def zoo_setup(task):
    """(PPO kwargs, n_envs, budget, VecNormalize kwargs or None), preprocessed as rl_zoo3's ExperimentManager
    does."""
    params = dict(HYPERPARAMS[task])
    for key in ("learning_rate", "clip_range", "clip_range_vf"):
        if isinstance(params.get(key), str):  # "lin_X"
            params[key] = linear(float(params[key].split("_")[1]))
    normalize = params.pop("normalize", False)
    if isinstance(normalize, str):  # e.g. "dict(norm_obs=True, norm_reward=False)"
        normalize = eval(normalize)
    norm_kwargs = None
    if normalize:
        norm_kwargs = dict(normalize) if isinstance(normalize, dict) else {}
        if "gamma" in params:
            norm_kwargs["gamma"] = params["gamma"]
    if isinstance(params.get("policy_kwargs"), str):
        params["policy_kwargs"] = eval(params["policy_kwargs"], {"nn": nn, "dict": dict})
    n_envs, budget = params.pop("n_envs", 1), int(params.pop("n_timesteps"))
    return params, n_envs, budget, norm_kwargs


def evaluate(model, task, norm, episodes, first_seed):
    """Returns of ``episodes`` deterministic episodes of Gymnasium's env, run side by side; observations
    normalized with ``norm``'s current statistics (not updated), rewards raw."""
    envs = [gym.make(task) for _ in range(episodes)]
    obs = [env.reset(seed=first_seed + i)[0] for i, env in enumerate(envs)]
    totals = np.zeros(episodes)
    active = list(range(episodes))
    while active:
        batch = np.stack([obs[i] for i in active])
        if norm is not None:
            batch = norm.normalize_obs(batch)
        actions, _ = model.predict(batch, deterministic=True)
        still = []
        for i, action in zip(active, actions, strict=True):
            obs[i], reward, terminated, truncated, _ = envs[i].step(action)
            totals[i] += reward
            if not (terminated or truncated):
                still.append(i)
        active = still
    for env in envs:
        env.close()
    return totals


class StopWhenSolved(BaseCallback):
    """After the first update past every ``every`` env steps: 20 deterministic episodes, stop training once
    their mean reaches ``threshold`` (None: no evaluations); stop at ``max_seconds`` of process time in any
    case."""

    def __init__(self, task, every, threshold, max_seconds):
        super().__init__()
        self.task, self.every, self.threshold, self.max_seconds = task, every, threshold, max_seconds
        self.next_eval, self.ended_by, self.solved_at, self.evals = every, "budget", None, []

    def _on_rollout_start(self) -> None:
        """The policy has just been updated: evaluate it here, not mid-rollout."""
        if self.threshold is None or self.num_timesteps < self.next_eval:
            return
        while self.next_eval <= self.num_timesteps:
            self.next_eval += self.every
        norm = self.model.get_vec_normalize_env()
        score = float(evaluate(self.model, self.task, norm, EVAL_EPISODES, 10_000).mean())
        self.evals.append((self.num_timesteps, round(score, 1)))
        print(f"  {self.task} eval at {self.num_timesteps:,} steps: {score:.1f} "
              f"({time.perf_counter() - START:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip
        if score >= self.threshold:
            self.ended_by, self.solved_at = "threshold", self.num_timesteps

    def _on_step(self) -> bool:
        """SB3 can only be stopped from here: at the first env step after the evaluation."""
        if self.ended_by == "threshold":
            return False
        if time.perf_counter() - START >= self.max_seconds:
            self.ended_by = "time cap"
            return False
        return True


HEADER = ("| task (SB3 PPO, zoo hyperparameters) | seed | steps trained | wall s (process) | peak RSS MB "
          "| 100 episodes, Gymnasium env | solved |\n|---|---|---|---|---|---|---|")  # fmt: skip


def run(task, seed, args):
    params, n_envs, budget, norm_kwargs = zoo_setup(task)
    if args.timesteps:
        budget = args.timesteps
    every = args.eval_every or max(budget // 10, 10_000)
    env = make_vec_env(task, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)
    if norm_kwargs is not None:
        env = VecNormalize(env, **norm_kwargs)
    model = PPO(env=env, seed=seed, device="cpu", verbose=0, **params)
    print(f"{task} seed {seed}: {n_envs} envs, budget {budget:,}, "
          f"{'no evaluations' if args.no_stop else f'evaluation every {every:,} steps'}, VecNormalize "
          f"{norm_kwargs}, torch threads {torch.get_num_threads()}", file=sys.stderr, flush=True)  # fmt: skip
    callback = StopWhenSolved(task, every, None if args.no_stop else THRESHOLDS[task], args.max_seconds)
    model.learn(budget, callback=callback)
    wall = time.perf_counter() - START
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    norm = model.get_vec_normalize_env()
    if norm is not None:
        norm.training = False  # frozen statistics
    returns = evaluate(model, task, norm, FINAL_EPISODES, 1_000_000 + 1_000 * seed)
    note = {"threshold": "", "budget": " (budget)", "time cap": f" (time cap {args.max_seconds:g} s)"}
    solved = returns.mean() >= THRESHOLDS[task]
    steps = callback.solved_at if callback.solved_at is not None else model.num_timesteps
    print(
        f"| {task} | {seed} | {steps:,}{note[callback.ended_by]} | {wall:.1f} | {rss:.0f} | "
        f"{returns.mean():.1f} ± {returns.std():.1f} (det.) | {'yes' if solved else 'NO'} |",
        flush=True,
    )
    return dict(task=task, seed=seed, steps=int(steps), wall=wall, rss=rss, mean=float(returns.mean()),
                std=float(returns.std()), ended_by=callback.ended_by)  # fmt: skip


def child_flags(args):
    """The options a (task, seed) child gets, as given here."""
    return ["--timesteps", str(args.timesteps), "--eval-every", str(args.eval_every),
            "--max-seconds", str(args.max_seconds), *(["--no-stop"] if args.no_stop else [])]  # fmt: skip


def add_row(batch, r, args):
    settings = [f"rl-baselines3-zoo ppo.yml @ {ZOO_COMMIT[:7]}"]
    settings += [f"--timesteps {args.timesteps}"] if args.timesteps else []
    settings += ["--no-stop"] if args.no_stop else []
    command = ["python", "benchmarks/peers/sb3_zoo_solve.py", "--tasks", r["task"], "--seeds", str(r["seed"])]
    batch.add(task=r["task"], settings=", ".join(settings), seed=r["seed"],
              score=records.score(r["mean"], r["std"], FINAL_EPISODES), threshold=THRESHOLDS[r["task"]],
              steps=r["steps"], wall_s=round(r["wall"], 2), peak_rss_mb=round(r["rss"]), ended_by=r["ended_by"],
              command=shlex.join(command + child_flags(args)))  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(HYPERPARAMS), choices=list(HYPERPARAMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument(
        "--timesteps", type=int, default=0, help="override the zoo's n_timesteps (smoke tests)"
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="env steps between evaluations, each at the first update past a multiple "
        "(default: max(budget // 10, 10,000))",
    )
    parser.add_argument("--no-stop", action="store_true", help="train the full budget, no evaluations")
    parser.add_argument(
        "--max-seconds", type=float, default=600.0, help="stop training after this much process time"
    )
    parser.add_argument("--row-only", action="store_true", help=argparse.SUPPRESS)
    records.add_record_flag(parser)
    args = parser.parse_args()
    runs = [(task, seed) for task in args.tasks for seed in args.seeds]
    if args.row_only:  # a child: the row, then the result for the parent's record
        result = run(*runs[0], args)
        print("RESULT " + json.dumps(result), flush=True)
        return
    batch = records.Batch("solve", out_dir=args.record, peer=PEER,
                          software=("stable-baselines3", "torch", "gymnasium"))  # fmt: skip
    print(f"SB3 PPO, rl-baselines3-zoo hyperparams/ppo.yml @ {ZOO_COMMIT[:7]}", flush=True)
    print(HEADER, flush=True)
    for task, seed in runs:  # one process each: its own wall time from process start, its own peak RSS
        cmd = [
            sys.executable,
            __file__,
            "--tasks",
            task,
            "--seeds",
            str(seed),
            "--row-only",
            *child_flags(args),
        ]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("RESULT "):
                add_row(batch, json.loads(line[len("RESULT ") :]), args)
            else:
                print(line, flush=True)
    path = batch.finish()
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
