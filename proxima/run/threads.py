"""How many CPU threads torch uses for a run.

The count changes the order of float sums, so results depend on it: a run always sets it explicitly (never
inheriting what an earlier run in the same process left), a resumed run restores the saved count, and the
checkpoint records it. ``--torch-threads N`` always wins.

Automatic (``--torch-threads 0``): 1 thread for minibatches under 512 samples, where threads cost more than
they save, and torch's default (one per core) above. But OpenMP threads spin while they wait for each other,
so two runs with 2 threads each on 2 busy cores take turns spinning, and each then takes several times as
long as alone (benchmarks/concurrent_runs.py measures it). So the automatic count is
also capped by the cores that other processes leave free. They are measured over the process's own
start-up (from the import of proxima to the run's set-up, about a second of imports and env construction),
not over a moment: two runs started together are in lockstep, and a short sample taken while both wait
would find the machine idle. That makes the count, and so the results, depend on the load at the start;
the console says so whenever the cap applies, with the flag that reproduces the run.
"""

from __future__ import annotations

import os
import time


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is no such file."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _mark() -> tuple[tuple[float, float] | None, float, float]:
    return _cpu_times(), time.process_time(), time.monotonic()


_since = _mark()  # before torch's import (proxima/__init__.py imports this module first)

import torch  # noqa: E402

# torch's own choice for this machine, read before any run changes it
DEFAULT_THREADS = torch.get_num_threads()
# Below this many samples a minibatch step is too small to split: a second thread costs more than it saves
# (benchmarks/throughput.py with -- --torch-threads 1, then 2, measures it on a machine).
SMALL_MINIBATCH = 512
SAMPLE_S = 0.05
MIN_WINDOW_S, MAX_WINDOW_S = 0.2, 10.0  # a start-up window outside these is resampled


def busy_cores(sample_s: float = SAMPLE_S) -> float | None:
    """How many cores other processes kept busy since the last call (at first, since proxima's import), or
    over a fresh ``sample_s`` seconds when that window is too short or too old to say (None: unknown)."""
    global _since
    (before, own_before, wall_before), now = _since, _mark()
    if before is None or now[0] is None:
        return None
    if not MIN_WINDOW_S <= now[2] - wall_before <= MAX_WINDOW_S:
        time.sleep(sample_s)
        (before, own_before, wall_before), now = now, _mark()
    _since = now
    cpu, own, wall = now
    if before is None or cpu is None:  # /proc/stat became unreadable since the last look
        return None
    busy, total = cpu
    if total <= before[1]:
        return None
    cores = os.cpu_count() or 1
    others = (busy - before[0]) / (total - before[1]) * cores - (own - own_before) / (now[2] - wall_before)
    return max(0.0, others)


def choose_threads(
    requested: int, minibatch_size: int, saved: int | None = None, images: bool = False
) -> tuple[int, str | None]:
    """The thread count for a run, and a note for the console when the load lowered it. ``images``: the
    encoder is a CNN, whose minibatches are large convolutions at any sample count, so more threads pay off
    there (benchmarks/atari_throughput.py minibatch --threads T)."""
    if requested:
        return requested, None
    if saved is not None:  # a resumed run: the same numbers as before the interruption
        return saved, None
    wanted = 1 if minibatch_size < SMALL_MINIBATCH and not images else DEFAULT_THREADS
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


def ray_worker_priority() -> None:
    """Ray starts its workers at nice 15, so that its own processes stay responsive; but the workers are where
    proxima trains, and at nice 15 a trial crawls beside any other work on the machine. A local Ray instance
    started here runs them at the caller's priority (Ray's job submission does the same); a cluster keeps its
    own setting, and RAY_worker_niceness set by the user wins."""
    os.environ.setdefault("RAY_worker_niceness", "0")
