"""What a search found, measured: train `proxima tune`'s best settings (TUNE_DIR/best.json) longer, on several
seeds, and score each agent on 100 deterministic episodes of Gymnasium's env; beside it, the same for the
settings the search started from (the defaults, or a preset), so the table says what the search bought.

    .venv/bin/python benchmarks/tuned_preset.py TUNE_DIR [--steps 1000000] [--seeds 1 2 3] [--jobs 2]
        [--baseline lunarlander-fast ...] [--record [DIR]]

A baseline is `defaults` (proxima's defaults on the task) or a preset name, trained on the tuned task (`--config
PRESET --env-id TASK`: a search that started from a preset's settings on another task names that preset). Each run is `proxima train ... --total-timesteps STEPS --seed S` timed from its
process start; the search's own CPU time (all samples' processes) and its sample count come from the tune
directory's results.json. Runs go `--jobs` at a time, so their wall times are not timings beside one another.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")


def train_and_score(flags: list[str], seed: int, steps: int) -> dict:
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-tuned-"), "run")
    command = [BIN, "train", *flags, "--total-timesteps", str(steps), "--seed", str(seed), "--run-dir", run_dir,
               "--quiet", "--no-plot", "--no-report"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - start
    subprocess.run([BIN, "eval", run_dir, "--episodes", "100", "--deterministic", "--seed", "1"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    with open(os.path.join(run_dir, "eval.json")) as f:
        result = json.load(f)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        trained = json.loads(f.readlines()[-1])["global_step"]  # whole updates: at most the steps asked for
    return {"run_dir": run_dir, "wall_s": wall, "mean": result["mean"], "std": result["std"], "steps": trained,
            "command": shlex.join(["proxima", *command[1:]])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tune_dir")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--baseline", nargs="*", default=["defaults"])
    records.add_record_flag(parser)
    args = parser.parse_args()
    with open(os.path.join(args.tune_dir, "tune.json")) as f:
        plan = json.load(f)
    with open(os.path.join(args.tune_dir, "results.json")) as f:
        samples = json.load(f)["samples"]
    env_id = plan["base"]["env"]["env_id"]
    search = {"search_cpu_s": round(sum(s.get("cpu_s") or 0.0 for s in samples), 1), "samples": len(samples),
              "search_steps_per_sample": plan["total_timesteps"], "search_seeds": len(plan["seeds"]),
              "search": f"{plan['search']} + {plan['scheduler']}"}  # fmt: skip
    batch = records.Batch(
        "tuned", out_dir=args.record, software=("proxima", "torch", "gymnasium", "ray", "optuna")
    )
    print(f"raw Gymnasium CartPole-v1 reference before: {batch.reference['before']:,.0f} steps/s", flush=True)
    best = os.path.join(args.tune_dir, "best.json")
    settings = [("tuned", ["--config", best])]
    for name in args.baseline:
        settings.append(
            (name, ["--env-id", env_id] if name == "defaults" else ["--config", name, "--env-id", env_id])
        )
    jobs = [(label, flags, seed) for label, flags in settings for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: train_and_score(job[1], job[2], args.steps), jobs))
    print("| settings | seed | steps | 100 episodes | wall s |\n|---|---|---|---|---|")
    for (label, _, seed), r in zip(jobs, results, strict=True):
        print(f"| {label} | {seed} | {r['steps']:,} | {r['mean']:.1f} ± {r['std']:.1f} | {r['wall_s']:.0f} |")
        batch.add(task=env_id, preset=label, seed=seed, steps=r["steps"], wall_s=r["wall_s"],
                  score=records.score(r["mean"], r["std"], 100), command=r["command"],
                  **(search if label == "tuned" else {}))  # fmt: skip
    print(f"the search: {search}")
    path = batch.finish()
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
