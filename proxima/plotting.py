"""Learning curves from run directories: return against env steps, one run or the spread over seeds.

A run's curve at step x is the mean return of the last ``window`` episodes finished by step x (read from its
``episodes.jsonl``), so curves of runs with different episode counts line up on a common step grid.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from proxima.errors import UserError
from proxima.files import EPISODES, read_jsonl, writing


def read_episodes(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """``(global_step, return)`` of every finished episode of a run, in order."""
    path = os.path.join(run_dir, EPISODES)
    if not os.path.isfile(path):
        raise UserError(f"{run_dir!r} is not a proxima run directory (no readable episodes.jsonl)")
    rows = read_jsonl(path)
    steps = np.array([r["global_step"] for r in rows], dtype=np.int64)
    returns = np.array([r["return"] for r in rows], dtype=np.float64)
    return steps, returns


def learning_curve(run_dir: str, grid: np.ndarray, window: int = 20) -> np.ndarray:
    """Mean return of the last ``window`` episodes finished by each step of ``grid`` (NaN before the first)."""
    return mean_of_last(*read_episodes(run_dir), grid, window)


def mean_of_last(steps: np.ndarray, returns: np.ndarray, grid: np.ndarray, window: int = 20) -> np.ndarray:
    """``learning_curve`` of episodes finished at ``steps`` (in order) with ``returns``."""
    csum = np.concatenate([[0.0], np.cumsum(returns)])
    count = np.searchsorted(steps, grid, side="right")  # episodes finished by each grid step
    first = np.maximum(count - window, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (csum[count] - csum[first]) / (count - first), np.nan)


def final_return(run_dir: str, window: int = 20) -> float:
    """Mean return of the run's last ``window`` episodes (NaN if none finished)."""
    returns = read_episodes(run_dir)[1][-window:]
    return float(returns.mean()) if len(returns) else float("nan")


def plot_runs(groups: dict[str, list[str]], output: str, title: str = "", points: int = 200) -> None:
    """One line per group (the mean over its runs) with a band from the lowest to the highest run."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'proxima[plot]'") from None
    last = max(read_episodes(run)[0].max(initial=0) for runs in groups.values() for run in runs)
    grid = np.linspace(0, max(last, 1), points)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, runs in groups.items():
        curves = np.stack([learning_curve(run, grid) for run in runs])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before any episode ends
            mean, low, high = np.nanmean(curves, 0), np.nanmin(curves, 0), np.nanmax(curves, 0)
        (line,) = ax.plot(grid, mean, label=f"{label} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episodic return (mean of last 20 episodes)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = output + ".tmp.png"
    try:
        with writing(output, None):
            fig.savefig(tmp)
        os.replace(tmp, output)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
