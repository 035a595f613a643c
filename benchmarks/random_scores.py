"""The random scores of proxima's reference table (proxima/run/reference_scores.json, docs/STATISTICS.md): each
task's mean return over episodes of uniformly random actions on Gymnasium's own env.

    .venv/bin/python benchmarks/random_scores.py            # prints each task's random score
    .venv/bin/python benchmarks/random_scores.py --write    # and writes them, with how they were measured

One env per task; its first episode is reset with ``--seed``, the next ones continue its random generator, and
its action space draws the actions from a generator seeded with ``--seed`` too. A task whose env cannot be made
here (no MuJoCo, no Box2D) keeps the random score the table has, and is named.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os

import gymnasium as gym
import numpy as np

TABLE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proxima", "run", "reference_scores.json"
)


def random_returns(env_id: str, episodes: int, seed: int) -> np.ndarray:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    try:
        for episode in range(episodes):
            env.reset(seed=seed if episode == 0 else None)
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return np.array(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", nargs="*", help="only these tasks of the table (default: all)")
    parser.add_argument("--write", action="store_true", help="write the scores into the table")
    args = parser.parse_args()
    with open(TABLE) as f:
        table = json.load(f)
    for env_id, task in table["tasks"].items():
        if args.tasks and env_id not in args.tasks:
            continue
        try:
            returns = random_returns(env_id, args.episodes, args.seed)
        except (gym.error.Error, ImportError) as e:
            print(f"{env_id}: not measured ({type(e).__name__}: {e}); keeps {task['random']}")
            continue
        task["random"] = round(float(returns.mean()), 2)
        print(f"{env_id}: {returns.mean():.2f} ± {returns.std():.2f} over {len(returns)} episodes")
    table["random_source"] = (
        f"the mean return of {args.episodes} episodes of uniformly random actions (the action space's sample(), "
        f"seeded {args.seed}) on Gymnasium {gym.__version__}'s env, measured by "
        f"`python benchmarks/random_scores.py --write` on {datetime.date.today().isoformat()}"
    )
    if args.write:
        with open(TABLE, "w") as f:
            f.write(json.dumps(table, indent=2) + "\n")
        print(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
