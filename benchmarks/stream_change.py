"""Did learning get worse when the random streams changed (issue 64: a run owns its randomness)? Train a fast
preset on seeds 1-10 at two trees (a commit before the change, exported or checked out, and this checkout),
one run at a time, and compare the distributions: steps until the preset stopped (its ``stop_return``
reached), whether it did, and its best evaluation; a two-sided Mann-Whitney U test says whether the steps moved.

Each run is ``proxima train --config PRESET --seed S --torch-threads T --run-dir DIR --quiet`` with
``PYTHONPATH`` set to the tree; the preset file is this checkout's, for both. Results are appended to
``--out`` (JSON lines) as each run ends, so that a cut-short batch keeps what it measured; ``--table`` prints
the table from that file alone.

    .venv/bin/python benchmarks/stream_change.py --base-tree /tmp/rng-base --presets cartpole-fast \\
        --seeds 1 2 3 4 5 6 7 8 9 10 --threads 1 2 --out /tmp/stream_change.jsonl
    .venv/bin/python benchmarks/stream_change.py --table --out /tmp/stream_change.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from scipy.stats import mannwhitneyu  # the stats extra

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(tree: str, preset: str, seed: int, threads: int) -> dict:
    """One run of ``preset`` with ``tree``'s proxima; its steps, whether it stopped early, its evaluations."""
    config = os.path.join(ROOT, "proxima", "presets", preset + ".json")
    with open(config) as f:
        settings = json.load(f)
    run_dir = os.path.join(tempfile.mkdtemp(prefix="stream-change-"), "run")
    cmd = [sys.executable, "-m", "proxima", "train", "--config", config, "--seed", str(seed),
           "--torch-threads", str(threads), "--run-dir", run_dir, "--quiet"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": tree}, check=True, capture_output=True)
    wall = time.perf_counter() - start
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    evals = [r["eval_return"] for r in records if r.get("eval_return") is not None]
    steps = records[-1]["global_step"]
    return {"steps": steps, "stopped": steps < settings["total_timesteps"], "best_eval": max(evals, default=None),
            "last_eval": evals[-1] if evals else None, "wall_s": round(wall, 1)}  # fmt: skip


def table(rows: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["preset"], row["threads"], row["tree"]), []).append(row)
    print(f"{'preset':16} {'threads':>7} {'tree':6} {'runs':>4} {'stopped':>7} {'median steps':>12} "
          f"{'mean steps':>10} {'mean best eval':>14}  steps by seed")  # fmt: skip
    for (preset, threads, tree), runs in sorted(groups.items()):
        runs.sort(key=lambda r: r["seed"])
        steps = [r["steps"] for r in runs]
        best = [r["best_eval"] for r in runs if r["best_eval"] is not None]
        print(f"{preset:16} {threads:>7} {tree:6} {len(runs):>4} {sum(r['stopped'] for r in runs):>7} "
              f"{statistics.median(steps):>12.0f} {statistics.mean(steps):>10.0f} "
              f"{statistics.mean(best) if best else float('nan'):>14.1f}  "
              + " ".join(f"{r['seed']}:{r['steps']}" for r in runs))  # fmt: skip
    for preset, threads in sorted({(p, t) for p, t, _ in groups}):
        before, after = (
            [r["steps"] for r in groups.get((preset, threads, tree), [])] for tree in ("before", "after")
        )
        if before and after:  # two-sided: did the steps until the stop move either way?
            p = mannwhitneyu(before, after, alternative="two-sided").pvalue
            print(
                f"{preset} with {threads} thread(s): Mann-Whitney U p = {p:.2f} ({len(before)} vs {len(after)} runs)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-tree", help="a tree of the commit before the change")
    parser.add_argument("--tree", default=ROOT, help="a tree of the commit after it (default: this checkout)")
    parser.add_argument("--presets", nargs="+", default=["cartpole-fast"])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--out", required=True, help="JSON lines, appended to")
    parser.add_argument("--table", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    if not args.table:
        for preset in args.presets:
            for threads in args.threads:
                for seed in args.seeds:  # before and after side by side, so that a cut-short batch is paired
                    for label, tree in (("before", args.base_tree), ("after", args.tree)):
                        row = {"preset": preset, "threads": threads, "seed": seed, "tree": label,
                               **train(tree, preset, seed, threads)}  # fmt: skip
                        with open(args.out, "a") as f:
                            f.write(json.dumps(row) + "\n")
                        print(json.dumps(row), flush=True)
    with open(args.out) as f:
        table([json.loads(line) for line in f])


if __name__ == "__main__":
    main()
