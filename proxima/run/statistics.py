"""Aggregate statistics of final scores over runs and tasks, with stratified bootstrap confidence intervals, as
Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021), recommend and their library
rliable computes them (``rliable/metrics.py``).

Every function takes ``scores``: one 1-D array of run scores per task (a tasks × runs array, or a list of
arrays where tasks have different numbers of runs). The point estimates are rliable's:

- ``iqm``: the interquartile mean of all runs of all tasks pooled, ``scipy.stats.trim_mean(x, 0.25)`` (the
  lowest and highest quarter cut, ``floor(n / 4)`` scores each);
- ``mean``: the mean of the task means;
- ``median``: the median of the task means; on one task, the median of its runs (the median of one task mean is
  that mean);
- ``optimality_gap``: how far the scores fall short of ``gamma`` on average, ``gamma - mean(min(x, gamma))``
  over all runs pooled (normalized scores: ``gamma`` 1, the reference score);
- ``probability_of_improvement(x, y)``: P(X > Y) of a run of X against a run of Y on the same task, ties
  counted half (the Mann-Whitney U statistic over ``n_x * n_y``), averaged over the tasks;
- ``performance_profile(scores, taus)``: the fraction of all runs pooled whose score is above each tau;
- ``iqm_over_steps(curves)``: the IQM over runs at each step of their curves (runs × steps).

The intervals are ``scipy.stats.bootstrap``'s percentile intervals (rliable's default method) of the data given
as one sample per task: SciPy resamples each sample on its own, so each resample keeps every task's number of
runs. That is the stratified bootstrap of the paper (its section 4, "Stratified Bootstrap CIs"). A task with one
run has no spread to resample: its estimates have no interval. SciPy is the ``stats`` extra; ``scipy_stats``
says so in one line where it is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from proxima.base.errors import UserError

CONFIDENCE = 0.95
RESAMPLES = 9999  # SciPy's default
# the values a statistic computes per batch of resamples, at most: a probability of improvement's n_x * n_y
# comparisons, a performance profile's runs × taus, an IQM over steps' runs × steps, each per resample
PAIRS_PER_BATCH = 2_000_000
NAMES = ("iqm", "median", "mean", "optimality_gap")


def scipy_stats():
    """``scipy.stats``, or a one-line ``UserError`` naming the extra that installs it."""
    try:
        import scipy.stats
    except ImportError:
        raise UserError(
            "the statistics need SciPy, which the stats extra installs: pip install 'proxima[stats]'"
        ) from None
    return scipy.stats


@dataclass(frozen=True)
class Estimate:
    """A statistic's value and its confidence interval (None where a task has a single run)."""

    value: float
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high}


def _tasks(scores) -> list[np.ndarray]:
    tasks = [np.asarray(task, dtype=np.float64).ravel() for task in scores]
    if not tasks or any(len(task) == 0 for task in tasks):
        raise ValueError("scores needs at least one task, each with at least one run")
    if not all(np.isfinite(task).all() for task in tasks):
        raise ValueError("scores must be finite numbers")
    return tasks


# The statistics of the samples (one per task) along their last axis: SciPy's bootstrap hands each statistic a
# batch of resamples at once, each sample of shape (batch, runs of its task).
def _iqm(*tasks: np.ndarray, axis: int = -1) -> np.ndarray:
    return scipy_stats().trim_mean(np.concatenate(tasks, axis=axis), 0.25, axis=axis)


def _mean(*tasks: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean([t.mean(axis=axis) for t in tasks], axis=0)


def _median(*tasks: np.ndarray, axis: int = -1) -> np.ndarray:
    if len(tasks) == 1:
        return np.median(tasks[0], axis=axis)
    return np.median([t.mean(axis=axis) for t in tasks], axis=0)


def _optimality_gap(*tasks: np.ndarray, axis: int = -1, gamma: float = 1.0) -> np.ndarray:
    return gamma - np.minimum(np.concatenate(tasks, axis=axis), gamma).mean(axis=axis)


def _improvement(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(X > Y) averaged over the tasks: ``samples`` are X's tasks, then Y's, in the same order."""
    k = len(samples) // 2
    per_task = []
    for x, y in zip(samples[:k], samples[k:], strict=True):
        x, y = np.moveaxis(x, axis, -1)[..., :, None], np.moveaxis(y, axis, -1)[..., None, :]
        per_task.append((x > y).mean(axis=(-2, -1)) + 0.5 * (x == y).mean(axis=(-2, -1)))
    return np.mean(per_task, axis=0)


STATISTICS = {"iqm": _iqm, "median": _median, "mean": _mean, "optimality_gap": _optimality_gap}


def iqm(scores) -> float:
    """The interquartile mean of all runs of all tasks: the mean of the middle half of the pooled scores."""
    return float(_iqm(*_tasks(scores)))


def mean(scores) -> float:
    """The mean of the task means."""
    return float(_mean(*_tasks(scores)))


def median(scores) -> float:
    """The median of the task means; on one task, the median of its runs."""
    return float(_median(*_tasks(scores)))


def optimality_gap(scores, gamma: float = 1.0) -> float:
    """``gamma`` less the mean of the pooled scores, each cut to at most ``gamma``."""
    return float(_optimality_gap(*_tasks(scores), gamma=gamma))


def probability_of_improvement(x, y) -> float:
    """P(X > Y), ties half, of a run of X against a run of Y on the same task, averaged over the tasks (``x``
    and ``y``: the scores of the same tasks, in the same order)."""
    xs, ys = _tasks(x), _tasks(y)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y {len(ys)}: give the scores of the same tasks")
    return float(_improvement(*xs, *ys))


def _bootstrap(
    samples: list[np.ndarray], statistic, seed: int, confidence: float, resamples: int, batch=None
) -> Estimate:
    """The statistic on ``samples`` and its stratified bootstrap interval (None where a sample has one run)."""
    value, low, high = _bootstrap_arrays(samples, statistic, seed, confidence, resamples, batch)
    if low is None or high is None:
        return Estimate(float(value))
    return Estimate(float(value), float(low), float(high))


def _bootstrap_arrays(
    samples: list[np.ndarray], statistic, seed: int, confidence: float, resamples: int, batch=None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``_bootstrap`` of a statistic of several values (the samples' leading axes, or the statistic's own
    leading axis): its values and their intervals' ends, each an array (no interval where a sample has one
    run). SciPy computes every value's interval from the same resamples."""
    value = np.asarray(statistic(*samples, axis=-1), dtype=np.float64)
    if min(s.shape[-1] for s in samples) < 2:
        return value, None, None
    result = scipy_stats().bootstrap(
        samples,
        statistic,
        n_resamples=resamples,
        batch=batch,
        vectorized=True,
        axis=-1,
        paired=False,  # each task's runs resampled on their own: stratified
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = (np.asarray(v, dtype=np.float64) for v in result.confidence_interval)
    return value, low, high


def interval(
    name: str,
    scores,
    *,
    gamma: float = 1.0,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> Estimate:
    """The statistic ``name`` (one of ``NAMES``) of ``scores`` with its stratified bootstrap interval; ``gamma``:
    the optimality gap's target; ``seed``: the resampling's, so that the same scores give the same interval."""
    if name not in STATISTICS:
        raise ValueError(f"unknown statistic {name!r}; accepted: {', '.join(NAMES)}")
    statistic = STATISTICS[name]
    if name == "optimality_gap":

        def statistic(*tasks, axis=-1):
            return _optimality_gap(*tasks, axis=axis, gamma=gamma)

    return _bootstrap(_tasks(scores), statistic, seed, confidence, resamples)


def estimates(scores, *, gamma: float | None = 1.0, seed: int = 0, **kwargs) -> dict[str, Estimate]:
    """Every statistic of ``NAMES`` of ``scores`` with its interval; no optimality gap where ``gamma`` is None
    (raw scores with no reference)."""
    names = [n for n in NAMES if gamma is not None or n != "optimality_gap"]
    return {n: interval(n, scores, gamma=1.0 if gamma is None else gamma, seed=seed, **kwargs) for n in names}


def improvement(
    x, y, *, seed: int = 0, confidence: float = CONFIDENCE, resamples: int = RESAMPLES
) -> Estimate:
    """``probability_of_improvement(x, y)`` with its stratified bootstrap interval: every task's runs of X and of
    Y resampled on their own."""
    xs, ys = _tasks(x), _tasks(y)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y {len(ys)}: give the scores of the same tasks")
    pairs = sum(len(a) * len(b) for a, b in zip(xs, ys, strict=True))
    batch = max(1, min(resamples, PAIRS_PER_BATCH // pairs))
    return _bootstrap([*xs, *ys], _improvement, seed, confidence, resamples, batch)


def _above(*tasks: np.ndarray, taus: np.ndarray, axis: int = -1) -> np.ndarray:
    """The fraction of the runs of every task pooled whose score is above each of ``taus``: the taus first,
    then the batch of resamples, as SciPy's bootstrap wants a statistic of several values."""
    pooled = np.moveaxis(np.concatenate(tasks, axis=axis), axis, -1)
    return (pooled[None] > taus.reshape(-1, *[1] * pooled.ndim)).mean(axis=-1)


def performance_profile(
    scores, taus, *, seed: int = 0, confidence: float = CONFIDENCE, resamples: int = RESAMPLES
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The paper's performance profile (its section 5, rliable's ``run_score_distribution``): the fraction of
    the runs of every task pooled whose score is above each ``tau`` of ``taus``, with each fraction's stratified
    bootstrap interval. ``(fractions, lows, highs)``, one value per tau; no interval (None) where a task has one
    run."""
    tasks, taus = _tasks(scores), np.asarray(taus, dtype=np.float64).ravel()
    batch = max(1, min(resamples, PAIRS_PER_BATCH // (sum(len(t) for t in tasks) * len(taus))))
    return _bootstrap_arrays(tasks, partial(_above, taus=taus), seed, confidence, resamples, batch)


def iqm_over_steps(
    curves, *, seed: int = 0, confidence: float = CONFIDENCE, resamples: int = RESAMPLES
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The IQM over runs at each step of ``curves`` (runs × steps: each run's curve on one grid), with its
    bootstrap interval: the runs are resampled whole, the same runs at every step, so the band is of curves.
    ``(iqm, lows, highs)``, one value per step; NaN at a step where a run has no value (before its first
    episode); no interval (None) with one run."""
    curves = np.asarray(curves, dtype=np.float64)
    if curves.ndim != 2 or not curves.size:
        raise ValueError("curves needs at least one run and one step, as runs × steps")
    keep = np.isfinite(curves).all(axis=0)
    out = np.full((3, curves.shape[1]), np.nan)
    if not keep.any():
        return out[0], None, None
    sample = curves[:, keep].T  # steps × runs: SciPy resamples the last axis
    batch = max(1, min(resamples, PAIRS_PER_BATCH // sample.size))
    value, low, high = _bootstrap_arrays([sample], _iqm, seed, confidence, resamples, batch)
    out[0, keep] = value
    if low is None or high is None:
        return out[0], None, None
    out[1, keep], out[2, keep] = low, high
    return out[0], out[1], out[2]


def normalized(scores: Sequence[float] | np.ndarray, random: float, reference: float) -> np.ndarray:
    """``(score - random) / (reference - random)``: 0 is the random policy's score, 1 the reference's."""
    if not (math.isfinite(reference - random) and reference > random):
        raise ValueError(f"a task's reference score ({reference}) must be above its random score ({random})")
    return (np.asarray(scores, dtype=np.float64) - random) / (reference - random)
