"""Recurrent PPO on partially observed CartPole (issue 15): the ``cartpole-lstm`` preset against the same agent
without its LSTM, and against sb3-contrib's RecurrentPPO with the zoo's settings, back to back.

For each seed: the process wall time and the env steps until the first evaluation (20 deterministic episodes of
Gymnasium's env) reaches 475, or the 500k budget; the MLP runs the whole budget if it never gets there. The
day's raw Gymnasium CartPole rate (benchmarks/reference.py) is measured before and after.

    .venv/bin/python benchmarks/recurrent.py [--seeds 1 2 3] [--peer-python /work/peers/sb3/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, ".")
from benchmarks.reference import raw_cartpole_sps  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROXIMA = os.path.join(ROOT, ".venv", "bin", "proxima")


def proxima_run(seed: int, recurrent: bool, out: str) -> dict:
    run_dir = os.path.join(out, f"{'lstm' if recurrent else 'mlp'}-{seed}")
    flags = ["train", "--config", "cartpole-lstm", "--seed", str(seed), "--torch-threads", "1", "--quiet",
             "--run-dir", run_dir, "--no-plot"] + ([] if recurrent else ["--recurrent", "None"])  # fmt: skip
    start = time.perf_counter()
    subprocess.run([PROXIMA, *flags], check=True)
    wall = time.perf_counter() - start
    evals = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("eval_return") is not None:
                evals.append([record["global_step"], record["eval_return"]])
    solved = next((step for step, score in evals if score >= 475), None)
    name = "proxima cartpole-lstm" if recurrent else "proxima, same agent without the LSTM"
    return {"peer": name, "seed": seed, "solved_at": solved, "wall_s": round(wall, 1), "evals": evals}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--peer-python", default=None, help="the sb3-contrib venv's python (peers/sb3_contrib.sh)"
    )
    parser.add_argument("--skip-mlp", action="store_true")
    args = parser.parse_args()
    print(f"raw Gymnasium CartPole (SyncVectorEnv of 4): {raw_cartpole_sps():,.0f} steps/s", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as out:
        for seed in args.seeds:
            results.append(proxima_run(seed, True, out))
            print(json.dumps(results[-1]), flush=True)
            if not args.skip_mlp:
                results.append(proxima_run(seed, False, out))
                print(json.dumps(results[-1]), flush=True)
            if args.peer_python:
                peer = os.path.join(ROOT, "benchmarks", "peers", "sb3_recurrent_cartpole.py")
                line = subprocess.run([args.peer_python, peer, "--seed", str(seed)], check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1]  # fmt: skip
                results.append(json.loads(line))
                print(line, flush=True)
    print(f"raw Gymnasium CartPole (SyncVectorEnv of 4): {raw_cartpole_sps():,.0f} steps/s", flush=True)
    print("\n| run | seed | steps to 475 | wall s |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['peer']} | {r['seed']} | {r['solved_at'] or 'not in 500k'} | {r['wall_s']} |")


if __name__ == "__main__":
    main()
