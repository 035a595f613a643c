"""Ablation: how time-limit handling, the entropy bonus and the critic's scale interact on CartPole-v1.

proxima bootstraps a time-limit truncation from V(final_obs), as it must. CleanRL's ppo.py instead treats
truncation as termination. This script trains the same seeds several ways, on the Gymnasium backend (the
only one whose ``step`` it can wrap), and reports the final policy and how much its critic's values vary:

- ``bootstrap``: CleanRL's PPO settings, proxima's default flags with ``--no-norm-value``;
- ``as-termination``: the same, with the env's truncation flag turned into a termination (CleanRL's
  behaviour) by wrapping the vector env's ``step``; only for this measurement, never in the library;
- ``bootstrap-ent0``: ``bootstrap`` with ``ent_coef=0``;
- ``bootstrap-norm-value``: proxima as shipped (default flags: value normalization on).

"critic V std" is the std of the final critic's values over 3000 states of random-policy CartPole episodes
(their returns differ a lot); near 0, the critic predicts the same value everywhere.

    .venv/bin/python benchmarks/truncation_ablation.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile

import gymnasium as gym
import numpy as np
import torch

import proxima
from proxima.envs import Step
from proxima.envs.gymnasium_backend import GymnasiumVecEnv

VARIANTS = ("bootstrap", "as-termination", "bootstrap-ent0", "bootstrap-norm-value")


def critic_value_std(agent) -> float:
    env = gym.make("CartPole-v1")
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    states = []
    for _ in range(3000):
        states.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    with torch.no_grad():
        return float(agent.model.value(torch.as_tensor(np.array(states), dtype=torch.float32)).std())


def run(variant: str, seed: int) -> str:
    original = GymnasiumVecEnv.step

    def as_termination(self, actions):
        s = original(self, actions)
        return Step(s.obs, s.reward, s.terminated | s.truncated, s.truncated & False, s.final_obs)

    overrides = {"env_backend": "gymnasium", "norm_value": variant == "bootstrap-norm-value"}
    if variant == "bootstrap-ent0":
        overrides["ent_coef"] = 0.0
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-ablation-"), "run")
    if variant == "as-termination":
        GymnasiumVecEnv.step = as_termination
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            agent = proxima.train(seed=seed, run_dir=run_dir, **overrides)
    finally:
        GymnasiumVecEnv.step = original
    returns = [json.loads(line)["return"] for line in open(os.path.join(run_dir, "episodes.jsonl"))]
    final = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))][-1]
    evaluation = proxima.evaluate(agent, 100, deterministic=True)
    return (
        f"| {variant} | {seed} | {np.mean(returns[-20:]):.1f} | {evaluation.mean():.1f} ± {evaluation.std():.1f} "
        f"| {final['entropy']:.3f} | {critic_value_std(agent):.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    print(
        "| variant | seed | last-20 mean at 500k | eval, 100 ep, deterministic | entropy at end | critic V std |"
    )
    print("|---|---|---|---|---|---|")
    for variant in args.variants:
        for seed in args.seeds:
            print(run(variant, seed), flush=True)


if __name__ == "__main__":
    main()
