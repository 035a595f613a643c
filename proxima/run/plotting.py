"""Learning curves from run directories: return against env steps, one run or the spread over seeds.

A run's curve is the mean return of the last ``window`` episodes at each episode it finished (read from its
``episodes.jsonl``), from its first to its last, as ``proxima report`` draws it: a shorter run's curve ends
where the run does.
"""

from __future__ import annotations

import os

import numpy as np

from proxima.base.errors import UserError
from proxima.base.files import EPISODES, output_directory, read_jsonl, replacing


def read_episodes(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """``(global_step, return)`` of every finished episode of a run, in order."""
    path = os.path.join(run_dir, EPISODES)
    if not os.path.isfile(path):
        raise UserError(f"{run_dir!r} is not a proxima run directory (no readable episodes.jsonl)")
    rows = read_jsonl(path)
    return (
        np.array([r["global_step"] for r in rows], dtype=np.int64),
        np.array([r["return"] for r in rows], dtype=np.float64),
    )


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


def on_grid(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The curve ``(x, y)`` (``x`` in order) at the steps of ``grid``: linear between its points, NaN outside the
    range of its finite points, so that no curve is drawn flat past its run's last step."""
    out = np.full(len(grid), np.nan)
    keep = np.isfinite(y)
    if keep.any():
        inside = (grid >= x[keep].min()) & (grid <= x[keep].max())
        out[inside] = np.interp(grid[inside], x[keep], y[keep])
    return out


def seeds_curve(runs: list[str], points: int = 200, window: int = 20) -> tuple[np.ndarray, ...]:
    """``(grid, mean, lowest, highest)`` of the runs' curves, on ``points`` steps from 0 to the last run's end and
    on each run's end (so a run's curve reaches its own last step, not the grid step before). A seed that ended
    before the others keeps its last value to the group's end: the seeds of one setting differ in length because
    some stopped early (``--stop-return``) at the performance they had, and a mean over only the seeds still
    running would jump where one ends, by which seeds it counts rather than by what they learned. NaN before a
    run's first episode."""
    episodes = [read_episodes(run) for run in runs]
    ends = [s.max(initial=0) for s, _ in episodes]
    grid = np.union1d(np.linspace(0.0, max(ends), points), ends)
    curves = np.stack([held(on_grid(s, mean_of_last(s, r, s, window), grid)) for s, r in episodes])
    return grid, curves.mean(0), curves.min(0), curves.max(0)  # NaN where any run's is


def held(curve: np.ndarray) -> np.ndarray:
    """``curve`` with its last finite value carried to the end: a seed that stopped early, in its group's mean
    and band (``seeds_curve``, and the report's bands)."""
    finite = np.flatnonzero(np.isfinite(curve))
    if finite.size:
        curve[finite[-1] + 1 :] = curve[finite[-1]]
    return curve


def final_return(run_dir: str, window: int = 20) -> float:
    """Mean return of the run's last ``window`` episodes (NaN if none finished)."""
    returns = read_episodes(run_dir)[1][-window:]
    return float(returns.mean()) if len(returns) else float("nan")


def pyplot():
    """matplotlib's pyplot, drawing to files only (Agg: never needs a display), or a one-line ``UserError``
    naming the extra that installs it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'proxima[plot]'") from None
    return plt


def _save(fig, output: str) -> None:
    plt = pyplot()
    try:
        with replacing(output) as (fd, tmp):
            os.close(fd)  # matplotlib writes to a path, in the format of output's name (tmp's may be cut)
            fig.savefig(tmp, format=os.path.splitext(output)[1][1:] or None)
    finally:
        plt.close(fig)


def plot_runs(groups: dict[str, list[str]], output: str, title: str = "", points: int = 200) -> None:
    """One line per group (the mean over its runs) with a band from the lowest to the highest run."""
    plt = pyplot()
    output_directory(output)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, runs in groups.items():
        grid, mean, low, high = seeds_curve(runs, points)  # each group on its own steps, up to its own end
        (line,) = ax.plot(grid, mean, label=f"{label} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episodic return (mean of last 20 episodes)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save(fig, output)


def plot_statistics(profiles: list[dict], curves: list[dict], output: str) -> None:
    """``proxima stats --plot``: a panel per performance profile (``scores.profiles``) and per task's IQM over
    steps (``scores.iqm_curves``), each setting's line with its 95% band, one colour per setting throughout."""
    plt = pyplot()
    output_directory(output)
    panels = [("profile", p) for p in profiles] + [("curve", c) for c in curves]
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), dpi=120, squeeze=False)
    settings = list(dict.fromkeys(line["setting"] for _, p in panels for line in p["settings"]))
    colours = {s: f"C{i % 10}" for i, s in enumerate(settings)}
    for ax, (kind, panel) in zip(axes.flat, panels, strict=False):
        task = "every task" if panel["task"] is None else panel["task"]
        for line in panel["settings"]:
            x = panel["taus"] if kind == "profile" else line["steps"]
            y = line["fraction"] if kind == "profile" else line["iqm"]
            colour = colours[line["setting"]]
            ax.plot(x, y, color=colour, label=f"{line['setting']} (n={line['runs']})")
            if line["low"] is not None:
                ax.fill_between(x, line["low"], line["high"], color=colour, alpha=0.2, linewidth=0)
        if kind == "profile":
            ax.set_xlabel(
                "normalized score τ (0: random, 1: reference)" if panel["normalized"] else "score τ"
            )
            ax.set_ylabel("fraction of runs with score > τ")
            ax.set_title(f"performance profile, {task}")
        else:
            ax.set_xlabel("environment steps")
            ax.set_ylabel("IQM of the return (mean of last 20 episodes)")
            ax.set_title(f"IQM over seeds, {task}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("bands: 95% confidence intervals (stratified bootstrap)", fontsize="small")
    fig.tight_layout()
    _save(fig, output)
