"""Where an env step's time goes, at CleanRL's default settings on CartPole (4 envs x 128 steps, 4 epochs of 4
minibatches, a 64-64 tanh MLP: proxima's defaults), on the native and the Gymnasium backend.

    .venv/bin/python benchmarks/step_cost.py [--updates 300] [--warmup 4] [--backends native gymnasium]
                                             [--ops] [-- TRAIN FLAGS, such as --torch-threads 1]

(about a minute for both backends; it sets ``--total-timesteps`` itself: the run stops after the updates measured,
with the learning rate annealed over a far longer run, which costs the same). The agent learns as it is measured,
so its episodes lengthen and fewer steps reset an env: the numbers are those of a run's first 150k steps.

It runs ``proxima train`` in this process with nothing added to the loop: each phase is timed by wrapping, from
outside, the function that does it (``time.perf_counter`` at its entry and exit), and a phase's own time is its
time less that of the phases inside it. A wrapper costs about a microsecond, so small phases read a little high.
Printed per env step (over the updates after ``--warmup``), in microseconds and as a share of the loop:

- rollout: the env's step, the policy's forward pass, its sampling (the noise drawn, the actions and their
  log-probs; ``act``'s own row is the glue between them), the values of truncated episodes' final observations,
  and the collector's own time (storage: the buffer's writes, the episode statistics, the bootstrap added to
  the rewards);
- the rollout's NaN check, and GAE;
- update: each minibatch's forward pass and loss, backward, gradient clipping, the optimizer (zero_grad and
  step), the minibatches' indexing, and its own time (the value normalization, the debug variables);
- record: what the callbacks get of an update (``Run.result``: explained variance, the episodes' statistics);
  logging (the ``Logging`` callback), and each other callback by name;
- loop: what is left of ``Run.iterate`` and of the loop between updates.

``--ops`` counts instead the torch operators each phase dispatches per env step (a ``TorchDispatchMode``: the
operators that reach the kernels, a composite one such as ``linear`` as its parts; it slows the run, so no time
is printed). The wrappers only time and count: the run computes what it computes without them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import sys
import tempfile
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proxima.algo import optim, storage, update  # noqa: E402
from proxima.commands import main as proxima_main  # noqa: E402
from proxima.policy import distributions, networks  # noqa: E402
from proxima.run import callbacks, loop, rollout  # noqa: E402
from proxima.version import __version__  # noqa: E402

# The order rows are printed in (a row's children follow it)
ORDER = [
    "rollout", "env step", "act", "forward", "sampling", "final values", "NaN check", "GAE", "update",
    "forward + loss", "backward", "clipping", "optimizer", "minibatch indexing", "record", "logging", "loop",
]  # fmt: skip


class Phases:
    """Own time and op counts per path of nested phases, counted from the start of update ``warmup`` (from 0)
    to the end of update ``last``'s callbacks."""

    def __init__(self, warmup: int, last: int):
        self.warmup, self.last = warmup, last
        self.stack: list[str] = []
        self.inner: list[float] = [0.0]  # per open phase: the time of the phases inside it
        self.own: collections.Counter[tuple[str, ...]] = collections.Counter()  # seconds
        self.ops: collections.Counter[tuple[str, ...]] = collections.Counter()
        self.began: float | None = None
        self.ended = 0.0
        self.updates = 0
        self.batch_size = self.num_envs = 0
        self.originals: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, label: str) -> None:
        """Time ``owner.name`` as the phase ``label`` (under the phases open when it is called)."""
        original = getattr(owner, name)
        self.originals.append((owner, name, vars(owner).get(name, original)))

        @functools.wraps(original)
        def timed(*args, **kwargs):
            self.stack.append(label)
            self.inner.append(0.0)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                inner = self.inner.pop()
                if self.began is not None:
                    self.own[tuple(self.stack)] += spent - inner
                    self.ops[tuple(self.stack)] += 0  # listed, even where it dispatches nothing itself
                self.inner[-1] += spent
                self.stack.pop()
                if not self.stack:
                    self.ended = time.perf_counter()

        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self.originals):
            setattr(owner, name, original)

    def start_update(self, run) -> None:
        if self.updates == self.last:
            raise _Measured
        if self.updates == self.warmup:
            self.own.clear()
            self.ops.clear()
            self.batch_size, self.num_envs = run.args.batch_size, run.args.env.num_envs
            self.began = time.perf_counter()
        self.updates += 1


class OpCounter(TorchDispatchMode):
    """Counts the operators dispatched while a phase is open, by the phase's path."""

    def __init__(self, phases: Phases):
        super().__init__()
        self.phases = phases

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.phases.began is not None and self.phases.stack:
            self.phases.ops[tuple(self.phases.stack)] += 1
        return func(*args, **(kwargs or {}))


class _EnvStep:
    """The collector steps its envs through ``rollout.env_call``: a step's call of it is routed here."""

    env_call = staticmethod(rollout.env_call)

    @staticmethod
    def step(method, *args, **kwargs):
        return _EnvStep.env_call(method, *args, **kwargs)


def _env_call(method, *args, **kwargs):
    if getattr(method, "__name__", "") == "step":
        return _EnvStep.step(method, *args, **kwargs)
    return _EnvStep.env_call(method, *args, **kwargs)


def instrument(phases: Phases) -> None:
    """Wrap the functions of each phase: their classes' attributes, or the module names the loop calls them by."""
    wrap = phases.wrap
    wrap(loop.Run, "iterate", "loop")
    iterate = loop.Run.iterate

    def counted(run):
        phases.start_update(run)
        return iterate(run)

    phases.originals.append((loop.Run, "iterate", vars(loop.Run)["iterate"]))
    loop.Run.iterate = counted  # type: ignore[method-assign]
    wrap(rollout.RolloutCollector, "collect", "rollout")
    phases.originals.append((rollout, "env_call", rollout.env_call))
    rollout.env_call = _env_call  # type: ignore[assignment]
    wrap(_EnvStep, "step", "env step")
    wrap(rollout.RolloutCollector, "_act", "act")
    wrap(rollout.RolloutCollector, "_final_values", "final values")
    wrap(networks.ActorCritic, "forward", "forward")
    wrap(distributions.CategoricalHead, "noise", "sampling")
    wrap(distributions.CategoricalHead, "sample", "sampling")
    wrap(loop, "check_rollout", "NaN check")
    wrap(storage.RolloutBuffer, "advantages", "GAE")
    wrap(loop, "update", "update")
    wrap(update.Solo, "loss", "forward + loss")
    wrap(torch.Tensor, "backward", "backward")
    wrap(update.Solo, "clip", "clipping")
    wrap(update.Solo, "step", "optimizer")
    wrap(optim.Adam, "zero_grad", "optimizer")
    wrap(storage.Batch, "__getitem__", "minibatch indexing")
    wrap(loop.Run, "result", "record")
    found, todo = [], [callbacks.Callback]
    while todo:  # every callback class with an on_update_end of its own
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "on_update_end" in vars(cls) and cls is not callbacks.Callback:
            found.append(cls)
    for cls in found:
        wrap(cls, "on_update_end", "logging" if cls is callbacks.Logging else f"callback {cls.__name__}")


class _Measured(Exception):
    """Raised as the update after the last measured one starts: the run stops there."""


def measure(backend: str, updates: int, warmup: int, count_ops: bool, flags: list[str]) -> None:
    phases = Phases(warmup, warmup + updates)
    instrument(phases)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["train", "--env-id", "CartPole-v1", "--env-backend", backend, "--seed", "1", "--quiet"]
            argv += ["--no-plot", "--no-report", "--run-dir", os.path.join(tmp, "run"), *flags]
            # more steps than are measured, whatever the batch's size: the run is stopped after the last
            argv += ["--total-timesteps", str(10**12)]
            with OpCounter(phases) if count_ops else contextlib.nullcontext():
                code = proxima_main(argv)
            sys.exit(f"proxima {' '.join(argv)} ended before the measured updates did ({code})")
    except _Measured:
        pass
    finally:
        phases.restore()
    show(backend, phases, updates, count_ops, flags)


def show(backend: str, phases: Phases, updates: int, count_ops: bool, flags: list[str]) -> None:
    table = phases.ops if count_ops else phases.own
    steps = updates * phases.batch_size
    assert phases.began is not None
    total = sum(table.values()) if count_ops else phases.ended - phases.began
    if not count_ops:  # the loop's own time between the phases
        table[("loop",)] += total - sum(table.values())
    unit, scale = ("ops", 1.0) if count_ops else ("us", 1e6)
    print(f"\n{backend} CartPole-v1, {' '.join(flags) or 'defaults'}: {updates} updates of {phases.batch_size} env "
          f"steps ({phases.num_envs} envs) measured, {torch.get_num_threads()} torch threads")  # fmt: skip
    print(f"{'phase':40s} {unit + ' per env step':>16s} {'per vector step':>16s} {'share':>7s}")
    shown = lambda path: path[1:] if path[0] == "loop" and len(path) > 1 else path  # noqa: E731
    rank = lambda path: [ORDER.index(p) if p in ORDER else len(ORDER) for p in shown(path)]  # noqa: E731
    for path in sorted(table, key=rank):
        name = "  " * (len(shown(path)) - 1) + (path[-1] if path != ("loop",) else "loop (its own)")
        per_step = scale * table[path] / steps
        print(f"{name:40s} {per_step:16.2f} {per_step * phases.num_envs:16.2f} {table[path] / total:7.1%}")
    print(f"{'total':40s} {scale * total / steps:16.2f} {scale * total / steps * phases.num_envs:16.2f}")
    if not count_ops:
        print(f"env steps per second: {steps / total:,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--updates", type=int, default=300, help="updates measured, per backend")
    parser.add_argument("--warmup", type=int, default=4, help="updates run before measuring")
    parser.add_argument("--backends", nargs="+", default=["native", "gymnasium"])
    parser.add_argument(
        "--ops", action="store_true", help="count torch operators per phase instead of timing"
    )
    parser.add_argument("flags", nargs="*", help="train flags for every run, after --")
    options = parser.parse_args()
    print(f"proxima {__version__}, torch {torch.__version__}")
    for backend in options.backends:
        measure(backend, options.updates, options.warmup, options.ops, options.flags)


if __name__ == "__main__":
    main()
