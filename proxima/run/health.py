"""Training health: stop on non-finite numbers, warn on the debug variables that usually mean trouble.

RL code fails silently (the PPO tutorial's lesson, docs/SEEDS.md): a run with a bug still runs, it just learns
badly. These checks turn the debug variables (detail 12) into messages a user can act on. ``docs/HEALTH.md``
explains each one: what it usually means and what to try.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from proxima.algo.storage import RolloutBuffer
from proxima.base.errors import NonFiniteError

KL_LIMIT = 0.05  # CleanRL-style runs that learn well sit around 0.01-0.02
CLIPFRAC_LIMIT = 0.3  # many samples clipped: the policy moves further than the trust region allows
SPIKE_UPDATES = 3  # approx_kl and clipfrac must stay above their limits this many updates in a row: one
# spike is common in healthy runs (the tuned Pendulum preset has one approx_kl of 0.052 in 195 updates)
ENTROPY_EARLY = 0.25  # "early": within the first quarter of the updates
ENTROPY_FRACTION = 0.1  # discrete: entropy below a tenth of its first value
# Explained variance clearly below 0, for many updates in a row: a critic at chance level hovers around 0
# (-0.02 to 0.02 in the policy-gradient homework's set-ups), and one that lags fast-rising returns dips for a
# while.
EV_LIMIT = -0.1
NEGATIVE_EV_UPDATES = 20
# Below this spread of the value targets (std / mean |target|) there is nothing left to explain: a solved
# CartPole's bootstrapped returns are all about 100, and explained variance is then noise around any value.
FLAT_RETURNS = 0.01
# A critic whose predictions across a batch vary less than this fraction of its targets' std, for many updates
# in a row, predicts about the same value everywhere: its hidden units have usually saturated (an unnormalized
# critic on CartPole's bootstrapped returns of about 100 ends at 0.004). One that is merely still learning
# starts from its random initialization, whose outputs vary far more than that.
FLAT_VALUES = 0.02
FLAT_VALUE_UPDATES = 20

# What healthy looks like, one line per chart of `proxima report`. The same lines stand in docs/HEALTH.md's
# "What healthy looks like" (tests/test_report.py keeps the two in step).
HEALTHY = {
    "episodic_return": "rises, then levels off near the task's best score; a long flat start means sparse rewards "
    "or a bug (run proxima probe)",
    "eval_return": "follows the training return, often above it when the evaluation is deterministic",
    "episodic_length": "follows the return where reward comes per step (CartPole); elsewhere it says how games end",
    "value_loss": "falls early and may rise again as the returns grow, but never grows without bound",
    "policy_loss": "small and noisy around 0 (advantages are normalized); its trend says little",
    "entropy": "falls slowly as the policy grows sure; a collapse in the first quarter of the run is premature",
    "approx_kl": "about 0.01 to 0.02; above 0.05 for several updates means steps that are too large",
    "old_approx_kl": "close to approx_kl: an older, less exact estimate of the same divergence",
    "clipfrac": "about 0.05 to 0.2; above 0.3 for several updates means the policy leaves the trust region",
    "explained_variance": "rises towards 1 as the critic learns; clearly below 0 for many updates means a critic worse "
    "than the targets' mean, except once the returns barely vary (a solved task), where it is noise around any value",
    "learning_rate": "falls linearly to 0 with --anneal-lr (to --learning-rate-end when given), flat without",
    "ent_coef": "with --ent-coef-end or a callback's run.set: the entropy coefficient each update used",
    "clip_coef": "with --clip-coef-end or a callback's run.set: the clipping coefficient each update used",
    "action_std_cap": "with --action-std-end: falls from 1 to that std, evenly in log std; the policy's std stays under it",
    "grad_norm": "steady, with clipping at --max-grad-norm taking the peaks; growing spikes mean instability",
    "sps": "flat after the first updates; dips are evaluations, checkpoints or other processes on the cores",
}


def check_rollout(buf: RolloutBuffer, update: int) -> None:
    """Stop the run (``NonFiniteError``) where update ``update``'s rollout holds a NaN or infinity in its
    observations or rewards (named in that order), before it reaches the advantages and the weights."""
    finite = torch.stack([torch.isfinite(buf.obs).all(), torch.isfinite(buf.rewards).all()])
    if not bool(finite.all()):  # one sync for both in the common case
        bad = "observations" if not bool(finite[0]) else "rewards"
        raise NonFiniteError(f"NaN or infinity in the {bad} at update {update}; training stopped")


def spreads(values: Tensor, returns: Tensor) -> tuple[float, float]:
    """``(return_spread, value_spread)`` of a batch, for ``HealthMonitor.check``: the spread of the value targets
    around their size (std / mean |target|), and of the critic's predictions against its targets' (std / std)."""
    target_std = returns.std()
    return (
        float(target_std / returns.abs().mean().clamp_min(1e-8)),
        float(values.std() / target_std.clamp_min(1e-8)),
    )


class HealthWarning(NamedTuple):
    # approx_kl, clipfrac, entropy, explained_variance or flat_critic: the section of docs/HEALTH.md
    kind: str
    text: str


class HealthMonitor:
    """Watches each update's record and says, once per kind, when a debug variable looks unhealthy.

    A cue must last: ``streaks`` counts the updates in a row that show it, and a warning fires when the
    streak reaches the cue's length. The critic's cues say nothing about updates whose value targets are
    flat (``FLAT_RETURNS``): those neither extend nor break a streak. ``check`` returns the new warnings
    (the first of each kind); ``summary`` counts every unhealthy update at the end of the run.
    """

    def __init__(self, num_updates: int, discrete: bool, action_dim: int, has_critic: bool):
        self.num_updates, self.discrete = num_updates, discrete
        self.action_dim, self.has_critic = action_dim, has_critic
        self.first_entropy: float | None = None
        self.streaks: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.first_update: dict[str, int] = {}

    def _entropy_collapsed(self, update: int, entropy: float) -> bool:
        if self.first_entropy is None:
            self.first_entropy = entropy
            return False
        if update > ENTROPY_EARLY * self.num_updates:
            return False
        if self.discrete:
            return entropy < ENTROPY_FRACTION * self.first_entropy
        # A Gaussian's entropy is log(std) plus a constant per dimension: a drop of ln(10) per dimension
        # means the standard deviations shrank tenfold on average.
        return self.first_entropy - entropy > math.log(10) * self.action_dim

    def check(
        self, update: int, record: dict, return_spread: float | None = None, value_spread: float | None = None
    ) -> list[HealthWarning]:
        """``return_spread``: std / mean |value target| of the update's batch; ``value_spread``: std of the
        batch's predicted values / std of its targets (None: unknown)."""
        names = ("approx_kl", "clipfrac", "entropy", "explained_variance")
        kl, clipfrac, entropy, ev = map(record.get, names)
        flat = return_spread is not None and return_spread < FLAT_RETURNS
        critic = None if flat else self.has_critic  # None: no evidence either way
        cues = {  # kind: (unhealthy now, or None for no evidence; updates in a row needed; message)
            "approx_kl": (
                kl is not None and kl > KL_LIMIT,
                SPIKE_UPDATES,
                f"approx_kl above {KL_LIMIT} for {SPIKE_UPDATES} updates in a row (now {kl or 0:.3f}): the "
                "policy changes a lot in each update",
            ),
            "clipfrac": (
                clipfrac is not None and clipfrac > CLIPFRAC_LIMIT,
                SPIKE_UPDATES,
                f"clipfrac above {CLIPFRAC_LIMIT} for {SPIKE_UPDATES} updates in a row (now {clipfrac or 0:.2f}): "
                "many samples hit the clip",
            ),
            "entropy": (
                entropy is not None and self._entropy_collapsed(update, entropy),
                1,
                f"entropy fell from {self.first_entropy or 0:.3f} to {entropy or 0:.3f} in the first quarter of the run",
            ),
            "explained_variance": (
                critic and ev is not None and ev < EV_LIMIT,
                NEGATIVE_EV_UPDATES,
                f"explained variance below {EV_LIMIT} for {NEGATIVE_EV_UPDATES} updates in a row (now {ev or 0:.2f}) "
                "while the value targets vary: the critic predicts them worse than their mean would",
            ),
            "flat_critic": (
                critic and value_spread is not None and value_spread < FLAT_VALUES,
                FLAT_VALUE_UPDATES,
                f"the critic's values varied less than {FLAT_VALUES:.0%} as much as their targets for "
                f"{FLAT_VALUE_UPDATES} updates in a row (now {value_spread or 0:.1%}): it predicts about the "
                "same value everywhere",
            ),
        }
        new = []
        for kind, (unhealthy, needed, text) in cues.items():
            if unhealthy is None:
                continue
            self.streaks[kind] = self.streaks.get(kind, 0) + 1 if unhealthy else 0
            if self.streaks[kind] < needed:
                continue
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if kind not in self.first_update:
                self.first_update[kind] = update
                new.append(HealthWarning(kind, text))
        return new

    _STATE = ("first_entropy", "streaks", "counts", "first_update")

    def state_dict(self) -> dict:
        """What the next checks depend on (the settings come from the run's config)."""
        return {name: getattr(self, name) for name in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        self.first_entropy = state["first_entropy"]
        self.streaks, self.counts, self.first_update = (dict(state[k]) for k in self._STATE[1:])

    def summary(self, updates: int) -> list[str]:
        return [
            f"{kind}: unhealthy in {count} of {updates} updates, first at update {self.first_update[kind]}"
            for kind, count in self.counts.items()
        ]
