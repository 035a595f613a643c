"""IPPO and MAPPO on VMAS tasks, proxima against BenchMARL, back to back on this machine (issue 35's section 4).

    .venv/bin/python benchmarks/vmas_side_by_side.py [--tasks navigation balance sampling] [--algos ippo mappo]
        [--seeds 0 1 2] [--frames 180000] [--precisions float32 bfloat16] [--config PRESET] [--torch-threads N]
        [--no-peer] [--record [DIR]] [-- FLAGS]

For each task, algorithm and seed: BenchMARL's run at its published VMAS settings
(benchmarks/peers/benchmarl_vmas.py, in the peer's venv: BENCHMARL_PYTHON, default
/work/peers/benchmarl/venv/bin/python), then proxima's at the same settings as far as its flags go
(``--config``: the ``vmas-benchmarl`` preset; proxima's VMAS backend defaults each task to BenchMARL's task
settings), once per ``--precisions`` entry (``--config vmas-fast``: a third of the epochs instead); where the
machine has a GPU, proxima trains on it (``--cuda``'s default) and its rows say "on the GPU". Both from
process start to exit. The return is the mean agent return of the last iteration's training episodes in both
(BenchMARL's collection/reward/episode_reward_mean; proxima's episodic_return of its last update), so both sample
their actions. The raw Gymnasium CartPole rate is measured
before and after; with ``--record`` the rows go to docs/results/data (the "multiagent" table of RESULTS.md).
FLAGS go to proxima's runs and into their rows' settings (e.g. ``-- --action-dist beta``).
Run it with nothing else on the machine: each run is seconds to minutes of both cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

ROOT = records.ROOT
PEER_PYTHON = os.environ.get("BENCHMARL_PYTHON", "/work/peers/benchmarl/venv/bin/python")
PEER_SCRIPT = os.path.join(ROOT, "benchmarks", "peers", "benchmarl_vmas.py")
# BenchMARL's published VMAS settings (benchmarks/peers/benchmarl_vmas.py says what each is), as far as proxima's
# flags express them: the vmas-benchmarl preset; the journal's side by side lists what they cannot express
SAME_SETTINGS = "vmas-benchmarl"


def run_peer(task: str, algo: str, seed: int, frames: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "peer.json")
        command = [PEER_PYTHON, PEER_SCRIPT, "--task", task, "--algo", algo, "--seeds", str(seed), "--frames",
                   str(frames), "--no-eval", "--json", out]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
        wall = time.perf_counter() - start
        result = json.load(open(out))[0]
    shown = [os.path.relpath(PEER_SCRIPT, ROOT), *command[2:-2]]
    return {"wall_s": wall, "return": result.get("collection_return"), "command": " ".join(shown)}


def run_proxima(
    task: str, algo: str, seed: int, frames: int, precision: str, threads: int, config: str, extra: list[str]
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        flags = ["train", "--env-id", f"vmas:{task}", "--algo", algo, "--seed", str(seed), "--total-timesteps",
                 str(frames), "--precision", precision, "--torch-threads", str(threads),
                 "--config", config, *extra, "--no-plot", "--no-report", "--quiet"]  # fmt: skip
        command = [sys.executable, "-m", "proxima", *flags, "--run-dir", os.path.join(tmp, "run")]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT)
        wall = time.perf_counter() - start
        lines = open(os.path.join(tmp, "run", "metrics.jsonl")).read().splitlines()
    last = json.loads(lines[-1])
    return {"wall_s": wall, "return": last.get("episodic_return"), "command": "proxima " + " ".join(flags)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["navigation", "balance", "sampling"])
    parser.add_argument("--algos", nargs="+", default=["ippo", "mappo"], choices=["ippo", "mappo"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--frames", type=int, default=180_000, help="env steps a run (published: 10,000,000)")
    parser.add_argument("--precisions", nargs="*", default=["float32", "bfloat16"], choices=["float32", "bfloat16"],
                        help="proxima's runs (none: BenchMARL's alone)")  # fmt: skip
    parser.add_argument(
        "--config", default=SAME_SETTINGS, help="proxima's preset (default: BenchMARL's settings)"
    )
    parser.add_argument("--no-peer", action="store_true", help="proxima only")
    # fixed, not proxima's automatic count, which leaves busy cores alone: a run's return then depends on the load
    # at its start (torch's thread count changes float sums)
    parser.add_argument("--torch-threads", type=int, default=os.cpu_count() or 1,
                        help="proxima's torch threads (default: every core, as BenchMARL's torch takes)")  # fmt: skip
    parser.add_argument("--record", nargs="?", const=records.DATA_DIR, default=None, metavar="DIR")
    parser.add_argument("flags", nargs="*", help="proxima's extra train flags, after --")
    args = parser.parse_args()
    if not args.no_peer and not os.path.exists(PEER_PYTHON):
        sys.exit(f"no BenchMARL venv at {PEER_PYTHON} (benchmarks/peers/benchmarl.sh makes it; or --no-peer)")
    batch = records.Batch("multiagent", out_dir=args.record, software=("proxima", "torch", "vmas"))
    print(f"raw Gymnasium CartPole-v1 before: {batch.reference['before']:,.0f} steps/s", flush=True)
    # where the machine has a GPU, proxima trains there (--cuda's default)
    on_gpu = " on the GPU" if records.gpus() else ""
    for task in args.tasks:
        for algo in args.algos:
            for seed in args.seeds:
                ways = ([] if args.no_peer else [None]) + args.precisions  # None: BenchMARL
                for precision in ways:
                    if precision is None:
                        peer, settings = "BenchMARL", algo
                        result = run_peer(task, algo, seed, args.frames)
                    else:
                        peer, settings = None, f"{algo} {precision}" + on_gpu
                        if args.config != SAME_SETTINGS or args.flags:
                            settings = f"{' '.join([args.config, *args.flags])}: {settings}"
                        result = run_proxima(
                            task,
                            algo,
                            seed,
                            args.frames,
                            precision,
                            args.torch_threads,
                            args.config,
                            args.flags,
                        )
                    batch.add(task=f"vmas/{task}", settings=settings, peer=peer, seed=seed, steps=args.frames,
                              wall_s=result["wall_s"], command=result["command"],
                              mean_return=result["return"])  # fmt: skip
                    print(f"{task} {settings} {peer or 'proxima'} seed {seed}: {result['wall_s']:.1f} s, "
                          f"return {result['return']}", flush=True)  # fmt: skip
    batch.finish()
    print(f"raw Gymnasium CartPole-v1 after: {batch.reference['after']:,.0f} steps/s")


if __name__ == "__main__":
    main()
