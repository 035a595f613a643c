"""How many CPU threads torch uses for a run.

The count changes the order of float sums, so results depend on it: a run always sets it explicitly (never
inheriting what an earlier run in the same process left), a resumed run restores the saved count, and the
checkpoint records it. ``--torch-threads N`` always wins.

Automatic (``--torch-threads 0``): 1 thread for minibatches under 512 samples, where threads cost more than
they save, and torch's default (one per core) above. But OpenMP threads spin while they wait for each other,
so two runs with 2 threads each on 2 busy cores take turns spinning: measured here, two such runs at once
took 44 s where one alone took 6-7 s (docs/BENCHMARKS.md, "Runs side by side"). So the automatic count is
also capped by the cores that other processes leave free when the run starts, sampled over 50 ms from
``/proc/stat``. That makes the count, and so the results, depend on the load at the start; the console says
so whenever the cap applies, with the flag that reproduces the run.
"""

from __future__ import annotations

import os
import time

import torch

DEFAULT_THREADS = (
    torch.get_num_threads()
)  # torch's own choice for this machine, read before any run changes it
SMALL_MINIBATCH = 512  # measured on 2 cores: CartPole defaults (minibatch 128) run at 10.0k steps/s with 1
# thread, 8.3k with 2; a 512-sample minibatch step takes 2.04 ms with 1 thread, 1.71 ms with 2
SAMPLE_S = 0.05


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is no such file."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(sample_s: float = SAMPLE_S) -> float | None:
    """How many cores other processes kept busy over ``sample_s`` seconds (None: unknown on this system)."""
    before, own_before = _cpu_times(), time.process_time()
    if before is None:
        return None
    time.sleep(sample_s)
    after, own = _cpu_times(), time.process_time() - own_before
    total = after[1] - before[1]
    if total <= 0:
        return None
    cores = os.cpu_count() or 1
    return max(0.0, (after[0] - before[0]) / total * cores - own / sample_s)


def choose_threads(requested: int, minibatch_size: int, saved: int | None = None) -> tuple[int, str | None]:
    """The thread count for a run, and a note for the console when the load lowered it."""
    if requested:
        return requested, None
    if saved is not None:  # a resumed run: the same numbers as before the interruption
        return saved, None
    wanted = 1 if minibatch_size < SMALL_MINIBATCH else DEFAULT_THREADS
    if wanted == 1:
        return 1, None
    busy = busy_cores()
    if busy is None:
        return wanted, None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    free = max(1, int(usable - busy + 0.3))  # a core counts as free when at least 70% idle
    if free >= wanted:
        return wanted, None
    return free, (
        f"note: other processes keep {busy:.1f} of {usable} cores busy, so torch uses {free} thread(s) instead of "
        f"{wanted}; results depend on the thread count: --torch-threads {free} reproduces this run"
    )
