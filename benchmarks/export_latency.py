"""Single-observation latency of an exported CartPole policy: onnxruntime and TorchScript against ``agent.predict``.

Trains a small CartPole MLP agent (64x64 tanh, ``--norm-obs``), exports it to both formats, and times one call
per observation, from a numpy observation to a numpy action, over 2,000 observations of the env after a
warm-up. The three are interleaved in rounds, so that a load that comes and goes on the machine touches all of
them alike. torch and onnxruntime each use one thread (a batch of one observation gains nothing from more).
Prints a markdown table: median and 90th percentile in microseconds, with the date and this command; with
`--record`, the rows go to docs/results/data (topic "export-latency", benchmarks/records.py) and docs/RESULTS.md
is rendered again.

    .venv/bin/python benchmarks/export_latency.py [--record [DIR]]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
import warnings

import gymnasium as gym
import numpy as np
import torch

import proxima

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

CALLS, ROUNDS, WARMUP = 2000, 5, 200


def observations(n: int) -> np.ndarray:
    env, out = gym.make("CartPole-v1"), []
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(out)


def main() -> None:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    records.add_record_flag(parser)
    args = parser.parse_args()
    batch = records.Batch("export-latency", out_dir=args.record, software=("proxima", "torch", "onnxruntime"))

    torch.set_num_threads(1)
    warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.load
    run_dir = tempfile.mkdtemp(prefix="export-latency-")
    agent = proxima.train(env_id="CartPole-v1", total_timesteps=8192, norm_obs=True, run_dir=run_dir,
                          quiet=True, plot=False, report=False, torch_threads=1)  # fmt: skip
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(proxima.export(agent, "onnx", f"{run_dir}/policy.onnx"), options)
    module = torch.jit.load(proxima.export(agent, "torchscript", f"{run_dir}/policy.pt"))
    calls = {
        "agent.predict": lambda o: agent.predict(o, deterministic=True),
        "onnxruntime": lambda o: session.run(None, {"obs": o[None]})[0][0],
        "TorchScript": lambda o: module(torch.from_numpy(o[None])).numpy()[0],
    }
    obs = observations(CALLS)
    for o in obs[:WARMUP]:
        actions = {name: int(call(o)) for name, call in calls.items()}
        assert len(set(actions.values())) == 1, actions  # the same policy
    times: dict[str, list[float]] = {name: [] for name in calls}
    per_round = CALLS // ROUNDS
    for r in range(ROUNDS):
        for name, call in calls.items():
            for o in obs[r * per_round : (r + 1) * per_round]:
                start = time.perf_counter_ns()
                call(o)
                times[name].append((time.perf_counter_ns() - start) / 1e3)
    date = datetime.date.today().isoformat()
    command = "python " + " ".join(sys.argv)
    print("| policy | median µs | p90 µs | calls | date | command |")
    print("|---|---|---|---|---|---|")
    for name, t in times.items():
        median, p90 = np.percentile(t, [50, 90])
        print(f"| {name} | {median:.0f} | {p90:.0f} | {len(t)} | {date} | `{command}` |")
        batch.add(task="CartPole-v1", settings=name, median_us=round(float(median), 1), p90_us=round(float(p90), 1),
                  calls=len(t), command=command)  # fmt: skip
    batch.finish()


if __name__ == "__main__":
    main()
