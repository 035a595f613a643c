"""What a `proxima` process pays before and around its work: the time to `import proxima.commands` in a fresh
process, and the cyclic garbage collector's passes during a short training run, with and without the objects
of the imports frozen (`gc.freeze()`, which the `proxima` command does in `commands.console`).

    .venv/bin/python benchmarks/import_time.py [--base REV] [--repeats 12]

The import is timed in `--repeats` fresh processes, alternating with the checkout at REV (exported with
`git archive`) where one is given, and reported as medians with the collector's passes per generation. The
run is `cartpole-fast --seed 1 --torch-threads 1` in this process, once as `main` leaves the collector and
once after `gc.freeze()`; the collector's time is summed through `gc.callbacks`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORT = (
    "import gc, json, time, importlib, pkgutil; t = time.perf_counter(); import proxima; "  # a --base before
    "importlib.import_module('proxima.commands' if pkgutil.get_loader('proxima.commands') else 'proxima.cli'); "  # commands/
    "print(json.dumps([time.perf_counter() - t, [s['collections'] for s in gc.get_stats()]]))"
)


def export(rev: str) -> str:
    """The tree of ``rev`` in a temporary directory, as benchmarks/compare_commits.py exports it."""
    out = tempfile.mkdtemp(prefix="proxima-import-")
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", out], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(out, "proxima")], check=True)
    return out


def import_once(tree: str) -> tuple[float, list[int]]:
    env = {**os.environ, "PYTHONPATH": tree}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", IMPORT], env=env, check=True, capture_output=True, text=True)
    seconds, passes = json.loads(out.stdout)
    return seconds, passes


def run_with_collector_timed(freeze: bool) -> tuple[float, dict[int, list[float]]]:
    """The run in this process (a fresh one per call: see ``main``): its wall time and, per generation, the
    collector's passes and seconds."""
    import proxima.commands

    spent: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    started = [0.0]

    def timer(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[info["generation"]][0] += 1
            spent[info["generation"]][1] += time.perf_counter() - started[0]

    gc.callbacks.append(timer)
    if freeze:
        gc.freeze()
    run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-gc-"), "run")
    start = time.perf_counter()
    flags = ["--config", "cartpole-fast", "--seed", "1", "--torch-threads", "1", "--run-dir", run_dir]
    proxima.commands.main(["train", *flags, "--quiet", "--no-report", "--no-plot"])
    return time.perf_counter() - start, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a commit to time the import of beside this checkout")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--child", choices=["plain", "frozen"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one run, in a process of its own, so that neither run warms the other's caches
        print(json.dumps(run_with_collector_timed(args.child == "frozen")))
        return
    trees = {"this checkout": ROOT, **({args.base: export(args.base)} if args.base else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    passes: dict[str, list[int]] = {}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            seconds, passes[name] = import_once(tree)
            times[name].append(seconds)
    for name in trees:
        print(f"import proxima.commands, {name}: median {statistics.median(times[name]):.3f} s over {args.repeats} "
              f"processes (min {min(times[name]):.3f}); collector passes by generation {passes[name]}")  # fmt: skip
    for child in ("plain", "frozen", "plain", "frozen"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", child], check=True, capture_output=True, text=True
        )
        wall, spent = json.loads(out.stdout.splitlines()[-1])
        by_generation = ", ".join(f"gen {g}: {n} in {s * 1e3:.0f} ms" for g, (n, s) in spent.items())
        print(f"cartpole-fast seed 1, {'after gc.freeze()' if child == 'frozen' else 'the collector as it is'}: "
              f"{wall:.2f} s; collector {by_generation}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
