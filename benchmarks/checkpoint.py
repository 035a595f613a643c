"""What a checkpoint costs: write time and file size against the time of one update, per configuration.

    .venv/bin/python benchmarks/checkpoint.py [--configs NAME ...] [--writes N]

"(defaults)" is `proxima train` with no flags. Each configuration builds a real run (envs, model, optimizer),
does one warm-up update, then times N checkpoint writes and one more update.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from proxima.run.callbacks import default_callbacks
from proxima.run.config import resolve_args
from proxima.run.loop import Run, make_run_envs, setup, thread_notes


def measure(config: str | None, writes: int) -> dict:
    args = resolve_args(**({"config": config} if config else {}))
    run_dir = tempfile.mkdtemp()
    device, _ = setup(args)
    envs = make_run_envs(args, run_dir, device)
    try:
        thread_notes(args, envs)
        run = Run(args, envs, run_dir, device)
        run.callbacks = default_callbacks(run)
        for callback in run.callbacks:  # what a checkpoint holds: the logs' offsets too
            callback.on_train_start(run)
        run.iterate()
        start = time.perf_counter()
        for _ in range(writes):
            run.save_checkpoint()
        write_s = (time.perf_counter() - start) / writes
        start = time.perf_counter()
        run.iterate()
        update_s = time.perf_counter() - start
        size = os.path.getsize(os.path.join(run_dir, "checkpoint.safetensors"))
    finally:
        for callback in run.callbacks:
            callback.close(run)
        envs.close()
    return {"write_ms": write_s * 1e3, "update_ms": update_s * 1e3, "size_kb": size / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", nargs="*", default=["", "cartpole-fast", "pendulum"])
    parser.add_argument("--writes", type=int, default=50)
    opts = parser.parse_args()
    print("| config | checkpoint write ms | one update ms | write / update | file KB |")
    print("|---|---|---|---|---|")
    for config in opts.configs:
        r = measure(config or None, opts.writes)
        print(
            f"| {config or '(defaults)'} | {r['write_ms']:.2f} | {r['update_ms']:.1f} | "
            f"{r['write_ms'] / r['update_ms']:.1%} | {r['size_kb']:.0f} |"
        )


if __name__ == "__main__":
    main()
