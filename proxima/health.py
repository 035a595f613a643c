"""Training health: stop on non-finite numbers, warn on the debug variables that usually mean trouble.

Seed 000's lesson is that RL code fails silently: a run with a bug still runs, it just learns badly. These
checks turn the debug variables (detail #12) into messages a user can act on. ``docs/HEALTH.md`` explains
each one: what it usually means and what to try.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from proxima.storage import RolloutBuffer

KL_LIMIT = 0.05  # CleanRL-style runs that learn well sit around 0.01-0.02
CLIPFRAC_LIMIT = 0.3  # many samples clipped: the policy moves further than the trust region allows
ENTROPY_EARLY = 0.25  # "early": within the first quarter of the updates
ENTROPY_FRACTION = 0.1  # discrete: entropy below a tenth of its first value
NEGATIVE_EV_UPDATES = 20  # explained variance below 0 for this many updates in a row


def first_non_finite_in_rollout(buf: RolloutBuffer) -> str | None:
    """``"observations"`` or ``"rewards"`` if the rollout holds a NaN or infinity there, else None."""
    finite = torch.stack([torch.isfinite(buf.obs).all(), torch.isfinite(buf.rewards).all()])
    if bool(finite.all()):  # one sync for both in the common case
        return None
    return "observations" if not bool(finite[0]) else "rewards"


class HealthWarning(NamedTuple):
    kind: str  # approx_kl, clipfrac, entropy or explained_variance: the section of docs/HEALTH.md
    text: str


class HealthMonitor:
    """Watches each update's record and says, once per kind, when a debug variable looks unhealthy.

    ``check`` returns the new warnings (the first occurrence of each kind); ``summary`` counts every
    occurrence at the end of the run.
    """

    def __init__(self, num_updates: int, discrete: bool, action_dim: int, has_critic: bool):
        self.num_updates = num_updates
        self.discrete = discrete
        self.action_dim = action_dim
        self.has_critic = has_critic
        self.first_entropy: float | None = None
        self.negative_ev_streak = 0
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

    def check(self, update: int, record: dict) -> list[HealthWarning]:
        found = []
        kl, clipfrac, entropy, ev = (
            record.get(k) for k in ("approx_kl", "clipfrac", "entropy", "explained_variance")
        )
        if kl is not None and kl > KL_LIMIT:
            found.append(
                HealthWarning(
                    "approx_kl",
                    f"approx_kl {kl:.3f} is above {KL_LIMIT}: the policy changed a lot in one update",
                )
            )
        if clipfrac is not None and clipfrac > CLIPFRAC_LIMIT:
            found.append(
                HealthWarning(
                    "clipfrac",
                    f"clipfrac {clipfrac:.2f} is above {CLIPFRAC_LIMIT}: many samples hit the clip",
                )
            )
        if entropy is not None and self._entropy_collapsed(update, entropy):
            found.append(
                HealthWarning(
                    "entropy",
                    f"entropy fell from {self.first_entropy:.3f} to {entropy:.3f} in the first quarter of the run",
                )
            )
        if self.has_critic and ev is not None:
            self.negative_ev_streak = self.negative_ev_streak + 1 if ev < 0 else 0
            if self.negative_ev_streak >= NEGATIVE_EV_UPDATES:
                found.append(
                    HealthWarning(
                        "explained_variance",
                        f"explained variance below 0 for {self.negative_ev_streak} updates in a row",
                    )
                )
        new = []
        for w in found:
            self.counts[w.kind] = self.counts.get(w.kind, 0) + 1
            if w.kind not in self.first_update:
                self.first_update[w.kind] = update
                new.append(w)
        return new

    def summary(self, updates: int) -> list[str]:
        return [
            f"{kind}: unhealthy in {count} of {updates} updates, first at update {self.first_update[kind]}"
            for kind, count in self.counts.items()
        ]
