"""Ablation: how time-limit handling and the entropy bonus interact on CartPole-v1 at the seed's defaults.

proxima bootstraps a time-limit truncation from V(final_obs), as it must. CleanRL's ppo.py instead treats
truncation as termination. This script trains the same seeds three ways and reports the final policy:

- ``bootstrap``: proxima as shipped (default flags);
- ``as-termination``: the env's truncation flag is turned into a termination (CleanRL's behaviour),
  by wrapping the vector env's ``step``; only for this measurement, never in the library;
- ``bootstrap-ent0``: proxima as shipped with ``ent_coef=0``.

    .venv/bin/python benchmarks/truncation_ablation.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile

import numpy as np

import proxima
from proxima.envs.vector import GymnasiumVecEnv, Step

VARIANTS = ("bootstrap", "as-termination", "bootstrap-ent0")


def run(variant: str, seed: int) -> str:
    original = GymnasiumVecEnv.step

    def as_termination(self, actions):
        s = original(self, actions)
        return Step(s.obs, s.reward, s.terminated | s.truncated, s.truncated & False, s.final_obs)

    overrides = {"ent_coef": 0.0} if variant == "bootstrap-ent0" else {}
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
        f"| {final['entropy']:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    print("| variant | seed | last-20 mean at 500k | eval, 100 ep, deterministic | entropy at end |")
    print("|---|---|---|---|---|")
    for variant in args.variants:
        for seed in args.seeds:
            print(run(variant, seed), flush=True)


if __name__ == "__main__":
    main()
