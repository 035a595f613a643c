"""MPE simple_spread against the MAPPO paper (issue 35): record a finished `simple-spread-mappo` run.

The preset's 20M game steps take hours here, so this script trains nothing: it reads a run directory that
`proxima train --config simple-spread-mappo --seed S` wrote (resumed or not) and records

- the mean agent return of the training episodes over the run's last 21 updates, as the paper's curves show
  training returns, and the same on the paper's scale: the team's return as marlbenchmark/on-policy logs it,
  6m - 75 for a mean agent return m over 25-step episodes (docs/journal/benchmarks.md, "Many agents: first
  measurements", has the conversion);
- the final agent's deterministic play over ``--episodes`` agent episodes (its score; a game is 3 of them).

The wall time is the run's own training time, which the run logs; where it trained beside other work it is not
a timing, and the table says what the run was, not how fast. With `--record` the row goes to
docs/results/data and docs/RESULTS.md is rendered again (benchmarks/records.py).

    .venv/bin/python benchmarks/mpe_spread.py RUN_DIR [--episodes 1000] [--record [DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

import proxima

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

LAST_UPDATES = 21
PAPER_STEPS = 20_000_000


def paper_scale(mean_agent_return: float) -> float:
    """The team's episode return as the MAPPO paper's code logs it, from the mean agent return of an episode of
    MPE simple_spread (3 agents, 25 steps): 6m - 75."""
    return 6.0 * mean_agent_return - 75.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a finished run of the simple-spread-mappo preset")
    parser.add_argument("--episodes", type=int, default=1000, help="agent episodes of the final agent")
    records.add_record_flag(parser)
    args = parser.parse_args()
    config = json.load(open(os.path.join(args.run_dir, "config.json")))
    with open(os.path.join(args.run_dir, "metrics.jsonl")) as f:
        metrics = [json.loads(line) for line in f]
    last = [m["episodic_return"] for m in metrics[-LAST_UPDATES:] if m.get("episodic_return") is not None]
    train_return = float(np.mean(last))
    steps, wall = metrics[-1]["global_step"], metrics[-1]["time_s"]
    seed = config["run"]["seed"]
    returns = proxima.evaluate(
        proxima.load(args.run_dir), episodes=args.episodes, deterministic=True, seed=seed
    )
    sessions = json.load(open(os.path.join(args.run_dir, "machine.json")))["sessions"]

    batch = records.Batch("mpe", out_dir=args.record, software=("proxima", "torch", "pettingzoo"))
    print(f"raw Gymnasium CartPole-v1 reference: {batch.reference['before']:,.0f} steps/s", flush=True)
    batch.add(task=config["env"]["env_id"], preset="simple-spread-mappo", seed=seed, steps=steps,
              wall_s=round(wall, 1), score=records.score(np.mean(returns), np.std(returns), len(returns)),
              train_return=train_return, paper_scale=paper_scale(train_return),
              eval_paper_scale=paper_scale(float(np.mean(returns))), paper_steps=PAPER_STEPS,
              torch_threads=sessions[-1]["torch_threads"], resumed=len(sessions) - 1,
              command=f"proxima train --config simple-spread-mappo --seed {seed}"
              + (" --torch-threads 1" if sessions[-1]["torch_threads"] == 1 else ""))  # fmt: skip
    print(f"{steps:,} steps, {wall:,.0f} s of training over {len(sessions)} session(s)")
    print(
        f"training return, last {LAST_UPDATES} updates: {train_return:.3f} (paper's scale {paper_scale(train_return):.1f})"
    )
    print(f"deterministic, {len(returns)} agent episodes: {np.mean(returns):.3f} ± {np.std(returns):.3f}")
    path = batch.finish()
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
