"""Expensive envs three ways, back to back: local sync envs, --async-envs (Gymnasium's AsyncVectorEnv), and
--rollout-workers 2 (Ray actors), with the per-update cost split, beside the day's raw CartPole rate.

    .venv/bin/python benchmarks/rollout_workers.py [--updates N] [--only hopper|atari] [--two-nodes]

Steps/s are steady-state: from the end of the first update to the end of the last (metrics.jsonl's
time_s), so Ray's and the actors' start-up, paid once per run, is left out and reported apart.
Run one measurement at a time: two at once share the two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, ".")
from benchmarks.reference import raw_cartpole_sps  # noqa: E402

CASES = {
    # CleanRL's MuJoCo settings (the halfcheetah preset) on Hopper-v5, with 8 envs x 256 steps
    "hopper": dict(config="halfcheetah", env_id="Hopper-v5", num_envs=8, num_steps=256),
    "atari": dict(config="atari", env_id="BreakoutNoFrameskip-v4"),
}
MODES = {
    "local sync": {},
    "--async-envs": {"async_envs": True},
    "--rollout-workers 2": {"rollout_workers": 2},
}


def measure(case: dict, mode: dict, updates: int) -> dict:
    import proxima
    import proxima.run.loop
    import proxima.scale.trainer

    spent = {"collect": 0.0, "update": 0.0}
    collectors = []
    original_update, original_run = proxima.run.loop.update, proxima.scale.trainer.Run

    def timed_update(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original_update(*args, **kwargs)
        finally:
            spent["update"] += time.perf_counter() - start

    class TimedRun(original_run):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            collectors.append(self.collector)

    proxima.run.loop.update, proxima.scale.trainer.Run = timed_update, TimedRun
    run_dir = tempfile.mkdtemp(prefix="proxima-workers-bench-")
    batch = case.get("num_envs", 8) * case.get("num_steps", 128)
    start = time.perf_counter()
    try:
        proxima.train(**case, **mode, total_timesteps=updates * batch, cuda=False, quiet=True, plot=False,
                      checkpoint_every=0, run_dir=os.path.join(run_dir, "run"))  # fmt: skip
    finally:
        proxima.run.loop.update, proxima.scale.trainer.Run = original_update, original_run
    wall = time.perf_counter() - start
    with open(os.path.join(run_dir, "run", "metrics.jsonl")) as f:
        times = [json.loads(line)["time_s"] for line in f]
    steady = (updates - 1) * batch / (times[-1] - times[0])
    out = {"steady_sps": steady, "wall_s": wall, "first_update_s": times[0], "update_s": spent["update"]}
    timings = getattr(collectors[0], "timings", None)
    if timings is not None:
        out |= timings | {f"{k}_bytes": v for k, v in collectors[0].bytes.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--only", choices=list(CASES))
    parser.add_argument(
        "--two-nodes", action="store_true", help="also run the workers on a 2-node Ray cluster"
    )
    args = parser.parse_args()
    import ray

    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)  # once, outside the timings
    print(
        f"raw Gymnasium CartPole-v1 (SyncVectorEnv of 4, random actions): {raw_cartpole_sps():,.0f} steps/s"
    )
    for name, case in CASES.items():
        if args.only and name != args.only:
            continue
        for label, mode in MODES.items():
            r = measure(case, mode, args.updates)
            split = "".join(
                f", {k} {r[k]:.2f} s" for k in ("weights_out", "rollout", "transfer_back", "join") if k in r
            )
            if "weights_bytes" in r:
                split += f"; per update {r['weights_bytes']:,} B of weights out, {r['slices_bytes']:,} B of slices back"
            print(f"{name} {label}: {r['steady_sps']:,.0f} steps/s steady; first update {r['first_update_s']:.1f} s "
                  f"(start-up included); learner update {r['update_s']:.1f} s of {r['wall_s']:.1f} s{split}", flush=True)  # fmt: skip
    ray.shutdown()
    if args.two_nodes:  # the measured point of docs/SCALING.md: the actors on two Ray nodes of this machine
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        for name, case in CASES.items():
            if not args.only or name == args.only:
                r = measure(case, {"rollout_workers": 2}, args.updates)
                print(f"{name} --rollout-workers 2 on 2 nodes: {r['steady_sps']:,.0f} steps/s steady; "
                      f"rollout {r['rollout']:.2f} s, transfer back {r['transfer_back']:.2f} s, "
                      f"weights out {r['weights_out']:.2f} s", flush=True)  # fmt: skip
        ray.shutdown()
        cluster.shutdown()
    print(f"raw Gymnasium CartPole-v1 again: {raw_cartpole_sps():,.0f} steps/s")


if __name__ == "__main__":
    main()
