"""Connect Four by self-play (issue 35): the `connect4-selfplay` preset trained on each seed, then its final agent
against the random player and the one-step lookahead player, 1,000 deterministic games each, half in each seat.

For each seed: the `proxima train --config PRESET --seed S --torch-threads 1` process timed from its start to
its exit (one thread; `--jobs 2` trains two seeds side by side, which on two cores slows each a little), then
`proxima.run.selfplay.play_against` with each opponent, which also counts the agent's tactics against the
lookahead (the immediate wins it took and the threats it blocked). The raw Gymnasium CartPole rate is measured before and after. With `--record` the batch
goes to docs/results/data and docs/RESULTS.md is rendered again (benchmarks/records.py).

    .venv/bin/python benchmarks/selfplay_connect4.py [--seeds 1 2 3] [--preset connect4-selfplay]
        [--games 1000] [--jobs 1] [--record [DIR]] [-- extra proxima train flags]
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

import proxima
from proxima.run.selfplay import play_against

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "proxima")
TASK = "Connect Four (PettingZoo connect_four_v3), self-play"


def train(preset: str, seeds: list[int], extra: list[str]) -> dict[int, tuple[str, float]]:
    """Train ``seeds`` side by side, one process each; each seed's run directory and process wall time."""
    procs = {}
    for seed in seeds:
        run_dir = os.path.join(tempfile.mkdtemp(prefix="proxima-c4-"), "run")
        command = [BIN, "train", "--config", preset, "--seed", str(seed), "--torch-threads", "1",
                   "--run-dir", run_dir, "--quiet", "--no-report", *extra]  # fmt: skip
        procs[seed] = (run_dir, time.perf_counter(), subprocess.Popen(command))
    done = {}
    for seed, (run_dir, start, proc) in procs.items():
        if proc.wait():
            raise subprocess.CalledProcessError(proc.returncode, proc.args)
        done[seed] = run_dir, time.perf_counter() - start
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--preset", default="connect4-selfplay")
    parser.add_argument("--games", type=int, default=1000, help="games against each opponent")
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained side by side (one thread each)")
    parser.add_argument("extra", nargs="*", help="extra flags for proxima train, after --")
    records.add_record_flag(parser)
    args = parser.parse_args()
    batch = records.Batch("selfplay", out_dir=args.record, software=("proxima", "torch", "pettingzoo"))
    print(f"raw Gymnasium CartPole-v1 reference before: {batch.reference['before']:,.0f} steps/s", flush=True)
    print(
        "| seed | steps | wall s | win vs random | win vs lookahead (first / second seat) | wins taken | blocked |"
    )
    print("|---|---|---|---|---|---|---|")
    runs = {}
    for i in range(0, len(args.seeds), args.jobs):
        runs.update(train(args.preset, args.seeds[i : i + args.jobs], args.extra))
    for seed, (run_dir, wall) in runs.items():
        agent = proxima.load(run_dir)
        steps = json.load(open(os.path.join(run_dir, "agent.json")))["global_step"]
        _, random = play_against(agent, "random", args.games, seed=seed, deterministic=True)
        _, lookahead = play_against(agent, "lookahead", args.games, seed=seed, deterministic=True)
        tactics, seats = lookahead["tactics"], lookahead["by_seat"]
        batch.add(task=TASK, preset=args.preset, settings=shlex.join(args.extra) or None, seed=seed,
                  steps=steps, wall_s=round(wall, 1), games=args.games,
                  win_random=random["win_rate"], win_lookahead=lookahead["win_rate"],
                  win_lookahead_first=seats["first"]["win_rate"], win_lookahead_second=seats["second"]["win_rate"],
                  wins_taken=tactics["win_taken_rate"], blocked=tactics["blocked_rate"],
                  command=shlex.join(["proxima", "train", "--config", args.preset, "--seed", str(seed),
                                      "--torch-threads", "1", *args.extra]))  # fmt: skip
        print(f"| {seed} | {steps:,} | {wall:.0f} | {random['win_rate']:.1%} | "
              f"{lookahead['win_rate']:.1%} ({seats['first']['win_rate']:.1%} / {seats['second']['win_rate']:.1%}) | "
              f"{tactics['win_taken_rate']:.1%} | {tactics['blocked_rate']:.1%} |", flush=True)  # fmt: skip
    path = batch.finish()
    print(f"raw Gymnasium CartPole-v1 reference after: {batch.reference['after']:,.0f} steps/s")
    if path:
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
