"""Every space of issue 15 on its small task (tests/fixtures/space_envs.py), seeds 1-3: the greedy return of
the trained agent over 200 episodes of Gymnasium's env, against the best possible. The masking probes raise on
any masked action they receive, so a finished run also shows that none was sent.

    .venv/bin/python benchmarks/spaces.py [--steps 16384] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, ".")
import proxima  # noqa: E402
from tests.fixtures import space_envs  # noqa: E402, F401  (registers the envs)

TASKS = {  # env: (what it exercises, the best mean return)
    "DiscreteObs-v0": ("Discrete(3, start=5) observation, Discrete(3, start=1) action", 1.0),
    "MultiDiscreteAction-v0": ("MultiDiscrete([3, 2]) action", 1.0),
    "MultiBinaryAction-v0": ("MultiBinary(3) action", 1.0),
    "DictObs-v0": ("Dict of Box, Discrete, MultiBinary", 1.0),
    "TupleObs-v0": ("Tuple of Box, Discrete", 1.0),
    "DictImage-v0": ("Dict of a 1x36x36 image and a Box", 1.0),
    "MaskInfo-v0": ("mask in info; 0 pays 1, 1 pays 0.5, 0 masked half the time", 8 * (0.5 * 1 + 0.5 * 0.5)),
    "MaskDict-v0": ("mask as a Dict key; the same probe", 8 * (0.5 * 1 + 0.5 * 0.5)),
    "MaskMultiDiscrete-v0": ("MultiDiscrete([3, 2]) with per-dimension masks", 8 * (0.5 * 1.25 + 0.5 * 0.5)),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=16_384)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    print(
        f"| env | exercises | best | greedy return, seeds {', '.join(map(str, args.seeds))} | wall s per run |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as out:
        for env, (what, best) in TASKS.items():
            scores, walls = [], []
            for seed in args.seeds:
                start = time.perf_counter()
                agent = proxima.train(
                    env_id="tests.fixtures.space_envs:" + env, total_timesteps=args.steps, seed=seed,
                    run_dir=f"{out}/{env}-{seed}", num_envs=8, num_steps=64, learning_rate=1e-3, plot=False,
                    quiet=True, torch_threads=1,
                )  # fmt: skip
                walls.append(time.perf_counter() - start)
                scores.append(float(np.mean(proxima.evaluate(agent, episodes=200, deterministic=True))))
            shown = ", ".join(f"{s:.3f}" for s in scores)
            print(f"| {env} | {what} | {best:g} | {shown} | {np.mean(walls):.1f} |", flush=True)


if __name__ == "__main__":
    main()
