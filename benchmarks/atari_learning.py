"""Atari learning runs, summarized: the mean score of the last 20 whole games along the run, and the curves.

The runs themselves are ordinary runs (about 50 minutes per 1M steps alone on this 2-core machine):

    proxima train --config atari --env-id BreakoutNoFrameskip-v4 --total-timesteps 1000000 --seed 1 \\
        --run-dir runs/atari/breakout-s1
    .venv/bin/python benchmarks/atari_learning.py runs/atari/* --output docs/images/atari_1m.png

Each row of ``episodes.jsonl`` of an Atari run is one whole game (every life) with its raw score.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, ".")
from proxima.base.files import read_json  # noqa: E402
from proxima.run.plotting import learning_curve, plot_runs, read_episodes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--output", default="atari_learning.png")
    parser.add_argument("--every", type=int, default=200_000)
    args = parser.parse_args()
    groups: dict[str, list[str]] = {}
    marks = None
    for run in args.runs:
        config = read_json(os.path.join(run, "config.json"))
        steps, scores = read_episodes(run)
        marks = np.arange(args.every, config["algorithm"]["total_timesteps"] + 1, args.every)
        curve = learning_curve(run, marks)
        along = ", ".join(f"{m // 1000}k: {c:.1f}" for m, c in zip(marks, curve, strict=True))
        print(f"{config['env_id']} seed {config['seed']}: {len(scores)} games, last 20 games {scores[-20:].mean():.1f}"
              f" (last 20 by {along})")  # fmt: skip
        groups.setdefault(config["env"]["env_id"], []).append(run)
    plot_runs(groups, args.output, title="--config atari, 1M steps: mean score of the last 20 whole games")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
