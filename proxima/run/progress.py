"""What a training run shows on the console.

On a terminal: a rich progress bar with steps, steps/s, the mean return of the last 20 episodes and the time
left. Anywhere else (CI logs, files, pipes): one plain line every 5% of the run, so logs stay clean. With
``quiet``: nothing; the run directory holds everything either way. A batched run (``--num-seeds N``) shows the
steps of one seed, which ``--total-timesteps`` counts, and the steps per second of all seeds together.
"""

from __future__ import annotations

import sys
from collections import deque

import numpy as np


class ProgressReport:
    def __init__(self, total_steps: int, num_updates: int, quiet: bool = False, stream=None, seeds: int = 1):
        self.stream = stream or sys.stdout
        self.each = f" per seed ({seeds} seeds)" if seeds > 1 else ""
        self.all = " (all seeds)" if seeds > 1 else ""
        self.quiet = quiet
        self.every = max(1, num_updates // 20)
        self.num_updates = num_updates
        self.recent: deque[float] = deque(maxlen=20)
        self.bar = None
        if not quiet and self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            fields = f"steps{self.each} · {{task.fields[sps]}} steps/s{self.all} · mean return {{task.fields[ret]}}"
            self.bar = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(fields),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
            )
            self.task = self.bar.add_task("training", total=total_steps, sps="-", ret="-")
            self.bar.start()

    def update(self, update: int, record: dict, episode_returns: list[float], force: bool = False) -> bool:
        """Show the update; True if it is on screen now (the bar, or a line printed for it)."""
        self.recent.extend(episode_returns)
        if self.bar is not None:
            ret = f"{np.mean(self.recent):.1f}" if self.recent else "-"
            self.bar.update(self.task, completed=record["global_step"], sps=f"{record['sps']:.0f}", ret=ret)
            return True
        if self.quiet:
            return True
        if update % self.every == 0 or update == self.num_updates or force:
            ret = "n/a" if record["episodic_return"] is None else f"{record['episodic_return']:.1f}"
            line = f"global_step={record['global_step']}{self.each} episodic_return={ret} "
            line += f"SPS={record['sps']:.0f}{self.all}"
            if "eval_return" in record:
                line += f" eval_return={record['eval_return']:.1f}"
            print(line, file=self.stream, flush=True)
            return True
        return False

    def message(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text)
        elif not self.quiet:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
