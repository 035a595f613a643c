"""Many seeds in one process against many processes (issue 36): for each preset and each N, N seeds trained

  batched:   in one process as one batched computation, `proxima train --config P --seed 1 --num-seeds N`;
  sweep:     as the N runs of `proxima sweep --config P --seeds 1-N` on Ray, each run a trial process of its
             own, --jobs at a time;
  processes: as N plain `proxima train --config P --seed S` processes, --jobs at a time (a sweep without Ray);
  purejaxrl: with --peers, PureJaxRL's ppo.py vmapped over N seeds with its own defaults, on the preset's task
             (benchmarks/peers/purejaxrl_vmap.py, in the peers' venv; CartPole-v1, Acrobot-v1, MountainCar-v0).

Wall time: from the first process's start to the last one's exit (imports, Ray's start-up, the sweep's summary and
jit compile count). steps/s: the env steps of all N seeds together (each run's last global_step in
metrics.jsonl) over that wall time. Solved: a proxima seed whose run stopped early because an evaluation during
training reached its preset's stop_return; a PureJaxRL seed whose final policy scores the task's threshold on
100 deterministic episodes (benchmarks/peers/purejaxrl_solve.py's criterion; it never stops early). The raw
Gymnasium CartPole rate is measured before and after (benchmarks/records.py); with `--record`, the batch goes to
docs/results/data (topic num_seeds) and docs/RESULTS.md is rendered again.

    .venv/bin/python benchmarks/num_seeds.py [--presets cartpole-fast ...] [--num-seeds 1 4 16 64]
        [--ways batched sweep processes] [--jobs 2] [--peers] [--total-timesteps N] [--record [DIR]] [-- FLAGS]

FLAGS go to every proxima command (e.g. `-- --torch-threads 2`). --total-timesteps caps every run's steps (and
PureJaxRL's, per seed): for smoke tests; the rows then say so.
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

from proxima.base.files import CONFIG_JSON, METRICS, read_json, read_jsonl
from proxima.run.config import resolve_args

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")
# where proxima runs from a checkout on PYTHONPATH (a lent GPU machine, benchmarks/gpu.sh), there is no script
PROXIMA = [BIN] if os.path.exists(BIN) else [sys.executable, "-m", "proxima"]
ROOT = records.ROOT
PEER = "PureJaxRL (defaults)"
PEER_TASKS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")  # ppo.py's discrete tasks (purejaxrl_vmap.py)
PEER_PYTHON = os.environ.get("PUREJAXRL_PYTHON", "/work/peers/purejaxrl/venv/bin/python")
WAYS = ("batched", "sweep", "processes")
SOFTWARE = ("proxima", "torch", "gymnasium", "ray")


def how(way: str, jobs: int) -> str:
    """A way's description in the records' settings; the same for every N, so that a table groups its Ns."""
    return {"batched": "one process (--num-seeds)", "sweep": f"proxima sweep, Ray trials, {jobs} at a time",
            "processes": f"separate processes, {jobs} at a time",
            "purejaxrl": "one process (jax.vmap over seeds)"}[way]  # fmt: skip


def run_dirs(parent: str) -> list[str]:
    """The run directories under ``parent`` (a batched run's seedS/, a sweep's base__seedS/), in name order;
    ``parent`` itself where it is one (`--num-seeds 1` is a plain run)."""
    if os.path.exists(os.path.join(parent, METRICS)):
        return [parent]
    names = sorted(os.listdir(parent)) if os.path.isdir(parent) else []
    return [os.path.join(parent, n) for n in names if os.path.exists(os.path.join(parent, n, METRICS))]


def stopped_on_return(run_dir: str) -> bool | None:
    """Whether the run stopped early on its stop_return: an evaluation during training reached it (None: the run
    has no stop_return)."""
    stop = read_json(os.path.join(run_dir, CONFIG_JSON))["run"]["stop_return"]
    if stop is None:
        return None
    evals = [m["eval_return"] for m in read_jsonl(os.path.join(run_dir, METRICS)) if "eval_return" in m]
    return any(value >= stop for value in evals)


def outcome(parent: str, num_seeds: int) -> dict:
    """The env steps of all runs under ``parent`` together and how many of them were solved."""
    dirs = run_dirs(parent)
    if len(dirs) != num_seeds:
        raise SystemExit(f"{parent}: {len(dirs)} run directories, expected {num_seeds}")
    steps = [read_jsonl(os.path.join(d, METRICS))[-1]["global_step"] for d in dirs]
    solved = [stopped_on_return(d) for d in dirs]
    return {"steps": sum(steps), "solved": None if None in solved else sum(solved)}


def timed(command: list[str], log: str) -> tuple[float, float]:
    """Run ``command`` (output to ``log``); its wall time from start to exit and its own peak RSS in MB."""
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        with open(log) as f:
            tail = f.read().strip().splitlines()[-3:]
        raise RuntimeError(f"exit {os.waitstatus_to_exitcode(status)}: {' / '.join(tail)}")
    return wall, usage.ru_maxrss / 1024


def shown(command: list[str], out: str) -> str:
    """``command`` as the records show it: proxima's, with its output directory as DIR."""
    return shlex.join(["proxima", *("DIR" if part == out else part for part in command)])


def batched(preset: str, n: int, seed: int, jobs: int, flags: list[str], out: str) -> dict:
    command = ["train", "--config", preset, "--seed", str(seed), "--num-seeds", str(n), "--run-dir", out,
               "--quiet", "--no-plot", "--no-report", *flags]  # fmt: skip
    wall, rss = timed([*PROXIMA, *command], out + ".log")
    return {"wall_s": wall, "peak_rss_mb": round(rss), **outcome(out, n), "command": shown(command, out)}


def sweep(preset: str, n: int, seed: int, jobs: int, flags: list[str], out: str) -> dict:
    command = ["sweep", "--config", preset, "--seeds", f"{seed}-{seed + n - 1}", "--executor", "ray",
               "--max-concurrent", str(jobs), "--cpus-per-trial", "1", "--output-dir", out, "--no-plot",
               "--no-report", *flags]  # fmt: skip
    wall, _ = timed([*PROXIMA, *command], out + ".log")
    return {"wall_s": wall, **outcome(out, n), "command": shown(command, out)}


def processes(preset: str, n: int, seed: int, jobs: int, flags: list[str], out: str) -> dict:
    os.makedirs(out)
    seeds = range(seed, seed + n)

    def one(s: int) -> None:
        timed([*PROXIMA, "train", "--config", preset, "--seed", str(s), "--run-dir", os.path.join(out, f"seed{s}"),
               "--quiet", "--no-plot", "--no-report", *flags], os.path.join(out, f"seed{s}.log"))  # fmt: skip

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, seeds))
    wall = time.perf_counter() - start
    command = ["train", "--config", preset, "--seed", "S", "--quiet", "--no-plot", "--no-report", *flags]
    return {"wall_s": wall, **outcome(out, n),
            "command": f"{shown(command, out)}  # S = {seed}..{seed + n - 1}, {jobs} at a time"}  # fmt: skip


def purejaxrl(task: str, n: int, seed: int, timesteps: int | None) -> dict:
    script = os.path.join(ROOT, "benchmarks", "peers", "purejaxrl_vmap.py")
    command = [script, "--task", task, "--num-seeds", str(n), "--seed", str(seed)]
    command += ["--timesteps", str(timesteps)] if timesteps else []
    proc = subprocess.run([PEER_PYTHON, *command], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {' / '.join(proc.stderr.strip().splitlines()[-3:])}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    typed = ["python", "benchmarks/peers/purejaxrl_vmap.py", *command[1:]]
    return {"wall_s": r["wall_s"], "steps": r["steps"], "solved": r["solved"], "peak_rss_mb": r["peak_rss_mb"],
            "compile_s": r["compile_s"], "jax": r["jax"], "command": shlex.join(typed)}  # fmt: skip


RUNNERS = {"batched": batched, "sweep": sweep, "processes": processes}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["cartpole-fast"])
    parser.add_argument("--num-seeds", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time for the sweep and the processes")
    parser.add_argument(
        "--seed", type=int, default=1, help="the first seed (PureJaxRL: the key split N ways)"
    )
    parser.add_argument("--peers", action="store_true", help="PureJaxRL's ppo.py vmapped over the seeds too")
    parser.add_argument("--total-timesteps", type=int, default=None, help="cap every run (smoke tests)")
    parser.add_argument("flags", nargs="*", help="extra flags for every proxima command, after --")
    records.add_record_flag(parser)
    args = parser.parse_args()
    if min(args.num_seeds) < 1 or args.jobs < 1:
        parser.error("--num-seeds and --jobs take positive integers")
    flags = [*args.flags, *(["--total-timesteps", str(args.total_timesteps)] if args.total_timesteps else [])]
    settings_tail = f", {shlex.join(flags)}" if flags else ""
    tasks = {preset: resolve_args(config=preset).env.env_id for preset in args.presets}
    if args.peers and not os.path.exists(PEER_PYTHON):  # before any run, not after an hour of them
        sys.exit(
            f"no PureJaxRL venv at {PEER_PYTHON} (benchmarks/peers/purejaxrl.sh makes it; or drop --peers)"
        )

    batch = records.Batch("num_seeds", out_dir=args.record, software=SOFTWARE)
    print(f"raw Gymnasium CartPole-v1 reference before: {batch.reference['before']:,.0f} steps/s", flush=True)
    work = tempfile.mkdtemp(prefix="proxima-num-seeds-")
    print(f"runs in {work}")
    print("| task | preset | seeds | how | wall s | × 1 seed | env steps | steps/s | solved | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    plan = [(preset, way) for preset in args.presets for way in args.ways]
    if args.peers:
        plan += [(task, "purejaxrl") for task in dict.fromkeys(tasks.values()) if task in PEER_TASKS]
    failed = False
    for name, way in plan:
        task = name if way == "purejaxrl" else tasks[name]
        one_seed = None
        for n in args.num_seeds:
            out = os.path.join(work, f"{name}-{way}-{n}")
            try:
                if way == "purejaxrl":
                    r = purejaxrl(task, n, args.seed, args.total_timesteps)
                else:
                    r = RUNNERS[way](name, n, args.seed, args.jobs, flags, out)
            except (RuntimeError, SystemExit) as e:
                print(
                    f"| {task} | {name} | {n} | {how(way, args.jobs)} | failed: {e} | | | | | |", flush=True
                )
                failed = True
                continue
            one_seed = r["wall_s"] if n == 1 else one_seed
            ratio = f"{r['wall_s'] / one_seed:.1f}" if one_seed else ""
            solved = "" if r["solved"] is None else f"{r['solved']}/{n}"
            sps = r["steps"] / r["wall_s"]
            print(f"| {task} | {'' if way == 'purejaxrl' else name} | {n} | {how(way, args.jobs)} | {r['wall_s']:.1f} "
                  f"| {ratio} | {r['steps']:,} | {sps:,.0f} | {solved} | {r.get('peak_rss_mb', '')} |", flush=True)  # fmt: skip
            peer = way == "purejaxrl"
            tail = f", --timesteps {args.total_timesteps}" if peer and args.total_timesteps else ""
            extra = {k: r[k] for k in ("peak_rss_mb", "compile_s", "jax") if k in r}
            batch.add(task=task, preset=None if peer else name, settings=how(way, args.jobs) + (tail if peer else settings_tail),
                      peer=PEER if peer else None, seed=args.seed, steps=r["steps"], wall_s=round(r["wall_s"], 2),
                      command=r["command"], way=way, num_seeds=n, seeds_solved=r["solved"], sps=round(sps),
                      **({} if way == "batched" or peer else {"jobs": args.jobs}), **extra)  # fmt: skip
    path = batch.finish()
    print(f"raw Gymnasium CartPole-v1 reference after: {batch.reference['after']:,.0f} steps/s")
    if path:
        print(f"recorded in {path}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
