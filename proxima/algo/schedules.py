"""Settings that change during training: the value of each in force at every update.

The learning rate, the loss coefficients, the clip range and the KL target may change between updates, by a
schedule (``--anneal-lr``, ``--learning-rate-end``, ``--ent-coef-end``, ``--clip-coef-end``) or by a callback
calling ``run.set(...)``. Both are one thing here: a *line* from the value at a setting's last change to its
end value at the run's end (just after its last update). A schedule is a line from update 0; ``run.set`` starts a
new line at the current update from the value given, towards the same end (a setting without a schedule stays
at that value).
The lines are a checkpoint component, so a resumed run continues them exactly; a run continued to more steps
(``--resume RUN_DIR --total-timesteps N``) moves their end to its new last update.
"""

from __future__ import annotations

from proxima.base.errors import UserError

# The settings a callback may change with run.set(...), in the order the docs list them.
ADJUSTABLE = ("learning_rate", "ent_coef", "clip_coef", "vf_coef", "max_grad_norm", "target_kl")
# The critic's own learning rate (--value-learning-rate) has a line of its own, which run.set(learning_rate=x)
# moves too, keeping the two rates' ratio.
VALUE_LR = "value_learning_rate"


def check_setting(name: str, value) -> None:
    """A ``UserError`` unless ``value`` is a value ``name`` may take during training."""
    if name not in ADJUSTABLE:
        raise UserError(f"run.set cannot change {name!r}; accepted: {', '.join(ADJUSTABLE)}")
    if name == "target_kl" and value is None:
        return  # no early stopping
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not value >= 0 or (name in ("clip_coef", "target_kl") and not value > 0):
        what = "positive" if name in ("clip_coef", "target_kl") else "non-negative"
        also = " or None (no early stopping)" if name == "target_kl" else ""
        raise UserError(f"run.set: {name} must be a {what} number{also}, got {value!r}")


class Schedules:
    """The lines of the settings that change: ``lines[name] = [start, end, from_update]``; the value at update
    ``u`` is ``start`` at ``from_update``, ``end`` at ``num_updates`` and linear in between, or ``start`` for
    good where ``end`` is None (a value set without a schedule). Settings without a line keep their value
    from the run's settings."""

    def __init__(self, num_updates: int, lines: dict[str, list] | None = None):
        self.num_updates = num_updates
        self.lines = dict(lines or {})

    @classmethod
    def from_args(cls, args) -> Schedules:
        """The schedules a run's settings ask for (``PPOArgs``): ``--learning-rate-end`` (``--anneal-lr``
        alone is ``--learning-rate-end 0``, detail 4 in docs/SEEDS.md), ``--ent-coef-end`` and
        ``--clip-coef-end``."""
        lines, algo = {}, args.algorithm
        lr_end = algo.learning_rate_end
        if lr_end is None and algo.anneal_lr:
            lr_end = 0.0
        if lr_end is not None:
            lines["learning_rate"] = [algo.learning_rate, lr_end, 0]
            if algo.value_learning_rate is not None:
                ratio = algo.value_learning_rate / algo.learning_rate
                lines[VALUE_LR] = [algo.value_learning_rate, lr_end * ratio, 0]
        for name in ("ent_coef", "clip_coef"):
            end = getattr(algo, f"{name}_end")
            if end is not None:
                lines[name] = [getattr(algo, name), end, 0]
        return cls(args.num_updates, lines)

    def value(self, name: str, update: int):
        start, end, first = self.lines[name]
        if end is None or start == end:
            return start
        span = self.num_updates - first
        # the closed form (detail 4): no rounding accumulated on the way, and exactly `end` at update
        # num_updates, the value after the last update (the last one trains a step short of it, as the reference's)
        frac = (min(update, self.num_updates) - first) / span if span > 0 else 1.0
        return (1.0 - frac) * start + frac * end

    def at(self, update: int) -> dict:
        """The values in force at ``update`` of every setting that has a line."""
        return {name: self.value(name, update) for name in self.lines}

    def set(self, update: int, values: dict, value_lr_ratio: float | None = None) -> None:
        """New lines from ``update`` on, from the values given (checked) to each line's end; a setting
        without a schedule stays at its new value (its line has no end). ``value_lr_ratio``: the critic's rate over the policy's,
        for a run with ``--value-learning-rate``."""
        for name, value in values.items():
            check_setting(name, value)
        for name, value in values.items():
            end = self.lines[name][1] if name in self.lines else None
            self.lines[name] = [value, end, update]
            if name == "learning_rate" and value_lr_ratio is not None:
                value_end = None if end is None else end * value_lr_ratio
                self.lines[VALUE_LR] = [value * value_lr_ratio, value_end, update]

    def state_dict(self) -> dict:
        return {"lines": {name: list(line) for name, line in self.lines.items()}}

    def load_state_dict(self, state: dict) -> None:
        """The lines only: ``num_updates`` is the run's own, so a run continued to more steps stretches them."""
        self.lines = {name: list(line) for name, line in state["lines"].items()}
