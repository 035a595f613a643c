"""What a batch's last live seed costs an update, computed directly (``batched._alone``) and through vmap.

    .venv/bin/python benchmarks/last_seed.py PRESET UPDATES

4 seeds of PRESET (seeds 1-4) without evaluations; a callback stops seeds 2-4 after the first update, so seed 1
trains alone from then on. Prints seed 1's thread CPU time per update (its rollout included), skipping the first
two, for the direct path and for vmap over one seed, alternated twice. Measures a ratio: run it on an idle machine
for absolute times.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from torch.func import vmap

import proxima
from proxima.run.callbacks import Callback
from proxima.scale import batched


class StopOthers(Callback):
    def on_update_end(self, run, result) -> bool:
        return run.args.run.seed != 1 and run.updates_done == 1


class Clock(Callback):
    """Seed 1's thread CPU time between the ends of its updates."""

    def __init__(self):
        self.times, self.last = [], None

    def on_update_end(self, run, result) -> bool:
        if run.args.run.seed == 1:
            now = time.thread_time()
            if self.last is not None:
                self.times.append(now - self.last)
            self.last = now
        return False


def through_vmap(loss_of):
    def call(params, buffers, fields, scale):
        return vmap(loss_of, in_dims=(0, 0, 0, None if scale is None else 0))(params, buffers, fields, scale)

    return call


def main() -> None:
    preset, updates = sys.argv[1], int(sys.argv[2])
    settings = json.load(open(os.path.join(os.path.dirname(proxima.__file__), "presets", f"{preset}.json")))
    direct = batched._alone
    for way in ("direct", "vmap", "direct", "vmap"):
        batched._alone = direct if way == "direct" else through_vmap
        clock = Clock()
        with tempfile.TemporaryDirectory() as tmp:
            proxima.train(config=preset, num_seeds=4, seed=1, run_dir=os.path.join(tmp, "run"),
                          callbacks=[StopOthers(), clock], eval_every=0, stop_return=None, rescore_best=0,
                          save_best=False, quiet=True, plot=False, report=False, torch_threads=1,
                          total_timesteps=settings["num_envs"] * settings["num_steps"] * (updates + 1))  # fmt: skip
        times = clock.times[2:]
        print(f"{way}: {1000 * sum(times) / len(times):.1f} ms an update over {len(times)} updates")
    batched._alone = direct


if __name__ == "__main__":
    main()
