"""BenchMARL's MAPPO or IPPO on a VMAS task, at BenchMARL's published VMAS settings: the peer of proxima's
multi-agent benchmark (issue 35). Runs in the venv of benchmarks/peers/benchmarl.sh, never in proxima's.

    PEER=/work/peers/benchmarl/venv/bin/python
    $PEER benchmarks/peers/benchmarl_vmas.py --task navigation --algo mappo --seeds 0 1 2 --json out.json
    # a check that it runs (two iterations of a small batch; not a benchmark):
    $PEER benchmarks/peers/benchmarl_vmas.py --task balance --algo ippo --seeds 0 --tiny

The settings are BenchMARL's ``fine_tuned/vmas/conf/config.yaml`` (the config of its published VMAS
benchmark, at facebookresearch/BenchMARL 179a956), on top of its ``base_experiment.yaml`` and the task,
algorithm and MLP yamls that the package ships; only the devices (cpu, not cuda) and the loggers (csv, not
wandb) differ. Flags change the budget and the batch; everything else stays as published. What they are, for
running proxima at the same settings:
- batch: 60,000 frames per iteration = 600 VMAS envs x 100 steps (max_steps 100: one episode per env), 10M
  frames in all (166 iterations);
- update: 45 passes over the batch, each cut into minibatches of 4,096 frames (15 a pass, the last 2,656), so
  675 gradient steps per iteration; a frame holds every agent of one env step. Adam, lr 5e-5, eps 1e-6, one
  optimizer for the actor and one for the critic; gradient norm clipped at 5 (each separately);
- PPO: clip 0.2, entropy 0, value loss the plain squared error (coefficient 1, no value clipping), gamma 0.9,
  GAE lambda 0.9 over the whole batch before the update, no advantage normalization, no value normalization;
- networks: MLPs of 256, 256 with tanh, for the actor and the critic; the actor shared by the agents (no agent
  index given), continuous actions from a tanh-squashed Normal whose scale is biased_softplus(1.0) of the
  network's output; IPPO's critic: one shared MLP on each agent's own observation; MAPPO's: one MLP on all the
  agents' observations side by side, whose single output is every agent's value;
- evaluation every 120,000 frames (and after the first iteration) on 200 episodes with deterministic actions.
Tasks (BenchMARL's task yamls): navigation 3 agents, collisions, agents_with_same_goal 1, split_goals False,
observe_all_goals False, shared_rew False, lidar_range 0.35, agent_radius 0.1; balance 4 agents,
random_package_pos_on_line True, package_mass 5; sampling 3 agents, shared_rew False, n_gaussians 3, lidar_range
0.2, cov 0.05, collisions True, spawn_same_pos False.

What is printed (one JSON line per seed, and the whole list in ``--json``):
- ``collection_return``: the mean episode return of the last iteration's training episodes (stochastic
  actions), as BenchMARL logs it: each episode's return is the mean over the agents of each agent's summed
  reward (``collection/reward/episode_reward_mean``);
- ``eval_return``: the same at the last evaluation (``evaluation_episodes`` episodes, deterministic actions);
- ``wall_s``: the seconds of ``Experiment(...)`` and ``run()`` together, as a user waits for them;
  ``total_time_s``, ``collection_time_s``, ``training_time_s``, ``evaluation_time_s``: BenchMARL's own timers,
  summed over the iterations (its total includes the evaluations).
A frame is one step of one VMAS env (all its agents at once): ``frames`` counts env steps, not agent steps.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

# fine_tuned/vmas/conf/config.yaml's experiment section, less what is only for off-policy algorithms.
PUBLISHED = {
    "share_policy_params": True,
    "prefer_continuous_actions": True,
    "gamma": 0.9,
    "lr": 0.00005,
    "clip_grad_norm": True,
    "clip_grad_val": 5,
    "max_n_iters": None,
    "max_n_frames": 10_000_000,
    "on_policy_collected_frames_per_batch": 60_000,
    "on_policy_n_envs_per_worker": 600,
    "on_policy_n_minibatch_iters": 45,
    "on_policy_minibatch_size": 4096,
    "evaluation": True,
    "render": True,
    "evaluation_interval": 120_000,
    "evaluation_episodes": 200,
    "create_json": True,
    "checkpoint_interval": 0,
}
# What differs from the published run: this machine has no GPU, and wandb would need an account.
LOCAL = {
    "sampling_device": "cpu",
    "train_device": "cpu",
    "buffer_device": "cpu",
    "loggers": ["csv"],
    "render": False,
    "checkpoint_at_end": False,
}
# --tiny: two iterations of 10 envs x 100 steps, 2 passes of 2 minibatches, evaluated on 2 episodes.
TINY = {
    "max_n_frames": 2_000,
    "on_policy_collected_frames_per_batch": 1_000,
    "on_policy_n_envs_per_worker": 10,
    "on_policy_n_minibatch_iters": 2,
    "on_policy_minibatch_size": 500,
    "evaluation_interval": 1_000,
    "evaluation_episodes": 2,
}
TASKS = ("navigation", "balance", "sampling")


def _scalars(folder: Path) -> dict[str, list[float]]:
    """Every scalar the csv logger wrote under ``folder``: name -> the values in step order."""
    out = {}
    for path in folder.rglob("scalars/*.csv"):
        with open(path) as f:
            rows = [row for row in csv.reader(f) if row]
        out[path.stem] = [float(value) for _, value in rows]
    return out


def _last(scalars: dict[str, list[float]], name: str) -> float | None:
    values = scalars.get(name)
    return values[-1] if values else None


def _sum(scalars: dict[str, list[float]], name: str) -> float | None:
    values = scalars.get(name)
    return sum(values) if values else None


def run_one(task_name: str, algo: str, seed: int, settings: dict, out_dir: Path) -> dict:
    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.environments import VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    config = ExperimentConfig.get_from_yaml()
    for key, value in settings.items():
        setattr(config, key, value)
    folder = out_dir / f"{task_name}-{algo}-seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    config.save_folder = str(folder)
    task = getattr(VmasTask, task_name.upper()).get_from_yaml()
    algorithm = {"mappo": MappoConfig, "ippo": IppoConfig}[algo].get_from_yaml()
    start = time.perf_counter()
    experiment = Experiment(
        task=task,
        algorithm_config=algorithm,
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=seed,
        config=config,
    )
    experiment.run()
    wall = time.perf_counter() - start
    scalars = _scalars(folder)
    return {
        "peer": "benchmarl",
        "task": f"vmas/{task_name}",
        "algo": algo,
        "seed": seed,
        "frames": experiment.total_frames,
        "iterations": experiment.n_iters_performed,
        "collection_return": _last(scalars, "collection_reward_episode_reward_mean"),
        "eval_return": _last(scalars, "eval_reward_episode_reward_mean"),
        "wall_s": round(wall, 2),
        "total_time_s": _last(scalars, "timers_total_time"),
        "collection_time_s": _sum(scalars, "timers_collection_time"),
        "training_time_s": _sum(scalars, "timers_training_time"),
        "evaluation_time_s": _sum(scalars, "timers_evaluation_time"),
        "task_config": dict(task.config),
        "algorithm_config": {k: v for k, v in vars(algorithm).items() if not k.startswith("_")},
        "experiment_config": {k: settings[k] for k in sorted(settings)},
        "torch_threads": torch.get_num_threads(),
        "versions": _versions(),
        "machine": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "run_dir": str(experiment.folder_name),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("benchmarl", "torchrl", "tensordict", "vmas", "torch")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--algo", choices=("mappo", "ippo"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--frames", type=int, help="env steps in all (default: the published 10,000,000)")
    parser.add_argument("--frames-per-batch", type=int, help="env steps per iteration (published: 60,000)")
    parser.add_argument("--envs", type=int, help="VMAS envs stepped together (published: 600)")
    parser.add_argument("--eval-interval", type=int, help="frames between evaluations (published: 120,000)")
    parser.add_argument(
        "--no-eval", action="store_true", help="no evaluation (its time is in BenchMARL's total)"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="two small iterations: checks the set-up, no more"
    )
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--out", help="where BenchMARL writes its runs (default: a temporary directory)")
    parser.add_argument("--json", help="write the results (a list, one per seed) to this file")
    args = parser.parse_args()

    settings = {**PUBLISHED, **LOCAL, **(TINY if args.tiny else {})}
    for flag, key in (
        ("frames", "max_n_frames"),
        ("frames_per_batch", "on_policy_collected_frames_per_batch"),
        ("envs", "on_policy_n_envs_per_worker"),
        ("eval_interval", "evaluation_interval"),
    ):
        if getattr(args, flag) is not None:
            settings[key] = getattr(args, flag)
    if args.no_eval:
        settings["evaluation"] = False
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="benchmarl-") as tmp:
        out_dir = Path(args.out or tmp)
        results = []
        for seed in args.seeds:
            result = run_one(args.task, args.algo, seed, settings, out_dir)
            if not args.out:  # deleted on exit
                result["run_dir"] = None
            print(json.dumps({k: v for k, v in result.items() if not k.endswith("_config")}), flush=True)
            results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
