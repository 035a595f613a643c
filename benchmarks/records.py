"""Results records: one JSON file per measurement batch, from which benchmarks/render_results.py writes the tables.

Standard library only, so that the peers' scripts, which run in the peers' own venvs (no proxima, maybe no torch
or Gymnasium), write the same records as proxima's. A batch is one invocation of a benchmark script: it records
where and when it ran (git commit, UTC time, the machine, the raw Gymnasium CartPole rate before and after, from
benchmarks/reference.py) and one row per measurement. The file is rewritten after every row, so a batch that
stops halfway keeps what it measured.

    batch = records.Batch("solve", software=("proxima", "torch", "gymnasium"), out_dir=args.record)
    batch.add(task="CartPole-v1", preset="cartpole-fast", seed=1, score=records.score(500.0, 0.0, 100),
              steps=40_960, wall_s=4.2, command="proxima train --config cartpole-fast --seed 1")
    batch.finish()                      # measures the raw rate again, writes the file, renders the tables

With ``out_dir=None`` (a script run without ``--record``) nothing is written: the batch only holds the rows and
the raw rates that the script prints.

A file (FORMAT names the layout; a reader refuses any other):

    {"format": "proxima-results/1", "topic": "solve", "date": "2026-11-24T19:00:00Z", "commit": "bb7196f...",
     "dirty": false, "command": "python benchmarks/solve_suite.py --record", "machine": {...},
     "software": {"proxima": "0.1.0", ...}, "reference_sps": {"before": 95000.0, "after": 97000.0},
     "rows": [{"task": ..., "preset": ..., "settings": ..., "peer": null, "seed": 1,
               "score": {"mean": ..., "std": ..., "episodes": 100, "deterministic": true},
               "threshold": 475, "solved": true, "steps": 40960, "wall_s": 4.2, "command": ..., "extra": {...}}]}

Scripts record only when asked (`--record`): a smoke run (one task, one seed) would otherwise become the
newest row of its task and hide the full batch.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from typing import Any

# The processes a benchmark starts run as an installed package does: with the modules' compiled bytecode, written
# on their first import and read after. A shell that sets PYTHONDONTWRITEBYTECODE (some containers and CI images
# do) would have every timed process compile proxima's modules from source, which the peers, installed with
# their bytecode, never pay.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

FORMAT = "proxima-results/1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(ROOT, "docs", "results", "data")


def score(mean: float, std: float, episodes: int, deterministic: bool = True) -> dict:
    """A score row field: the mean and std of the returns of ``episodes`` evaluation episodes."""
    return {"mean": float(mean), "std": float(std), "episodes": int(episodes), "deterministic": deterministic}


def gpus() -> list[str]:
    """The names of the machine's NVIDIA GPUs (nvidia-smi's), or none: a CUDA run's row must say what it ran on."""
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in names.splitlines() if line.strip()]


def machine() -> dict:
    """Where this runs: CPU model, cores, memory, GPUs, OS, Python, and the load when the batch started."""
    cpu, memory_gb = platform.processor() or platform.machine(), None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        memory_gb = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass  # not Linux: platform's answer stays
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "gpus": gpus(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def git_commit() -> tuple[str | None, bool]:
    """The checkout's commit and whether its tracked files differ from it (None where git cannot say). The pages
    that render_results.py writes do not count: an earlier batch of the same session rewrites them."""
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        rendered = [":(exclude)README.md", ":(exclude)docs/RESULTS.md", ":(exclude)docs/results",
                    ":(exclude)docs/journal/results-history.md"]  # fmt: skip
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *rendered], capture_output=True, text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None, False
    return head.stdout.strip(), bool(dirty.stdout.strip())


def versions(packages: tuple[str, ...]) -> dict:
    """Installed versions of ``packages`` in this interpreter (None for one that is not installed)."""
    out = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def reference_sps() -> float | None:
    """The raw Gymnasium CartPole rate (benchmarks/reference.py), in this interpreter where it has Gymnasium,
    else with proxima's .venv (a peer's venv may lack it); None where neither can run it."""
    try:
        sys.path.insert(0, ROOT)
        from benchmarks.reference import raw_cartpole_sps
    except ImportError:
        python = os.path.join(ROOT, ".venv", "bin", "python")
        if not os.path.exists(python):
            return None
        script = os.path.join(ROOT, "benchmarks", "reference.py")
        out = subprocess.run([python, script], capture_output=True, text=True, cwd=ROOT)
        match = re.search(r"([\d,]+) steps/s", out.stdout)
        return float(match.group(1).replace(",", "")) if match else None
    return raw_cartpole_sps()


def this_command() -> str:
    """The command line that started this process, as it can be typed again from the repository root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT) if sys.argv and sys.argv[0] else "python"
    return shlex.join(["python", script, *sys.argv[1:]])


class Batch:
    """One measurement batch: its rows go to ``OUT_DIR/DATE-TOPIC[-PEER].json``, rewritten after each ``add``
    (nowhere when ``out_dir`` is None). ``reference``: measure the raw CartPole rate at the start and in
    ``finish``."""

    def __init__(self, topic: str, *, out_dir: str | None, peer: str | None = None, software: tuple[str, ...] = (),
                 command: str | None = None, reference: bool = True) -> None:  # fmt: skip
        now = datetime.datetime.now(datetime.timezone.utc)
        commit, dirty = git_commit()
        self.out_dir, self.peer, self.measure_reference = out_dir, peer, reference
        self.record: dict[str, Any] = {
            "format": FORMAT,
            "topic": topic,
            "date": now.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "commit": commit,
            "dirty": dirty,
            "command": command or this_command(),
            "machine": machine(),
            "software": versions(software),
            "reference_sps": {"before": reference_sps() if reference else None, "after": None},
            "rows": [],
        }
        slug = re.sub(r"[^a-z0-9]+", "-", f"{topic} {peer or ''}".lower()).strip("-")
        name = f"{now.strftime('%Y-%m-%dT%H%M%S.%fZ')}-{slug}.json"  # two batches in one second stay apart
        self.path = os.path.join(out_dir, name) if out_dir else None

    @property
    def reference(self) -> dict:
        """The raw Gymnasium CartPole rate, steps/s: {"before": ..., "after": ...} (None: not measured)."""
        return self.record["reference_sps"]

    def add(self, *, task: str, wall_s: float | None = None, steps: int | None = None, score: dict | None = None,
            preset: str | None = None, settings: str | None = None, seed: int | None = None,
            threshold: float | None = None, command: str | None = None, peer: str | None = None,
            **extra: Any) -> dict:  # fmt: skip
        """Add one measurement; ``extra`` holds the topic's own numbers (steps/s, latency, peak RSS...)."""
        row = {
            "task": task,
            "preset": preset,
            "settings": settings,
            "peer": peer if peer is not None else self.peer,
            "seed": seed,
            "score": score,
            "threshold": threshold,
            "solved": None if score is None or threshold is None else score["mean"] >= threshold,
            "steps": steps,
            "wall_s": wall_s,
            "command": command,
            "extra": extra,
        }
        self.record["rows"].append(row)
        self.write()
        return row

    def write(self) -> str | None:
        if self.path is None:
            return None
        os.makedirs(self.out_dir, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.record, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)
        return self.path

    def finish(self, render: bool | None = None) -> str | None:
        """Measure the raw rate again, write the file, and (by default, where the batch went to the docs' data
        folder) render docs/RESULTS.md, its history page and the README's table from every record there."""
        if self.measure_reference:
            self.record["reference_sps"]["after"] = reference_sps()
        if not self.record["rows"]:
            return None  # nothing was measured: no file
        path = self.write()
        if path is None:
            return None
        if render is None:
            render = os.path.abspath(self.out_dir) == os.path.abspath(DATA_DIR)
        if render:
            sys.path.insert(0, ROOT)
            from benchmarks.render_results import render_all

            render_all()
        return path


def load(data_dir: str = DATA_DIR) -> list[dict]:
    """Every batch in ``data_dir``, oldest first; a file of another format is refused in one line."""
    batches = []
    for name in sorted(os.listdir(data_dir)) if os.path.isdir(data_dir) else []:
        if not name.endswith(".json"):
            continue
        with open(os.path.join(data_dir, name)) as f:
            batch = json.load(f)
        if batch.get("format") != FORMAT:
            raise SystemExit(f"{name}: format {batch.get('format')!r}, this reader takes {FORMAT!r}")
        batches.append(batch)
    return sorted(batches, key=lambda b: b["date"])


def add_record_flag(parser: Any) -> None:
    """``--record [DIR]`` on an argparse parser: the same flag and help in every benchmark script."""
    parser.add_argument(
        "--record", nargs="?", const=DATA_DIR, default=None, metavar="DIR",
        help="write this batch's results record (JSON) to DIR (default docs/results/data, which also re-renders "
        "docs/RESULTS.md and the README's table); without it nothing is recorded",
    )  # fmt: skip
