"""Which env backend is faster, native or Gymnasium's, for each native env and env count: the measurement
behind ``--env-backend auto``'s choice (``proxima.envs.native.NATIVE_FROM``).

Each cell is the full training loop's steady steps/s (PPO defaults otherwise: 128 steps per env, 4 epochs
of 4 minibatches) over ``--updates`` updates after the first 5, the median of ``--repeats`` runs, in this
process.

    .venv/bin/python benchmarks/backend_choice.py [--envs 1 2 4 8 16] [--ids Acrobot-v1 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import proxima
from proxima.envs.native import NATIVE_ENVS
from proxima.envs.registry import resolve_backend

sys.path.insert(0, ".")
from benchmarks.reference import raw_cartpole_sps  # noqa: E402

WARMUP = 5
CLASSIC = [env_id for env_id in NATIVE_ENVS if not env_id.startswith("proxima/Probe")]


def loop_sps(env_id: str, num_envs: int, backend: str, updates: int) -> float:
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-backend-"), "run")
    proxima.train(env_id=env_id, num_envs=num_envs, env_backend=backend, total_timesteps=num_envs * 128 * updates,
                  run_dir=run_dir, quiet=True, plot=False, checkpoint_every=0)  # fmt: skip
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    first, last = rows[WARMUP - 1], rows[-1]  # steady state: the first updates pay one-off costs
    return (last["global_step"] - first["global_step"]) / (last["time_s"] - first["time_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--ids", nargs="+", default=CLASSIC)
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"raw Gymnasium CartPole-v1 reference: {raw_cartpole_sps():,.0f} steps/s")
    print("| env | envs | native steps/s | gymnasium steps/s | native / gymnasium | auto picks |")
    print("|---|---|---|---|---|---|")
    for env_id in args.ids:
        for n in args.envs:
            sps = {
                b: statistics.median(loop_sps(env_id, n, b, args.updates) for _ in range(args.repeats))
                for b in ("native", "gymnasium")
            }
            print(f"| {env_id} | {n} | {sps['native']:,.0f} | {sps['gymnasium']:,.0f} | "
                  f"{sps['native'] / sps['gymnasium']:.2f} | {resolve_backend(env_id, num_envs=n)} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
