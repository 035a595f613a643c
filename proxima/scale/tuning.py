"""``proxima tune``: search for good settings on Ray Tune, with random or Optuna search, and ASHA early stopping
or population-based training (PBT).

A *sample* is one draw of the search space. It is one Tune trial, which trains the sample's ``seeds`` seeds
(``seed`` … ``seed + seeds - 1``) in lockstep, one update of each in turn (a ``Sample``, which ``loop.steps``
drives), and reports the interquartile mean (IQM) of their scores after each round, so that the searcher and the scheduler
judge a setting and not a lucky seed. Each seed's run is an ordinary run directory (``OUT/s003__seed2``) that draws from random
generators of its own (``seeding.RunStreams``), so it computes exactly what ``proxima train --seed 2`` with the
sample's settings computes alone.

A trial ASHA stops raises ``SystemExit`` out of ``tune.report``: its runs end where they stand and say
``"stopped"``. With PBT, a trial reports a Tune checkpoint (its seeds' checkpoints and logs) every
``perturbation_interval`` updates of the base settings; an exploiting trial copies the better trial's and goes
on from it with perturbed ``learning_rate``, ``ent_coef`` or ``clip_coef`` (``run.set``), and each of its run
directories logs that in ``perturbations.jsonl``. ASHA's and PBT's time is env steps, since samples may differ
in their batch size.

The default score (``final_eval``) is what a search is for: the deterministic policy on ``eval_episodes`` fresh
episodes at the sample's final budget, and at each ASHA rung or PBT interval on the way, since those decide
which samples go on. Training returns at a rung favour settings that learn fast and then stall or collapse.

``OUT/tune.json`` holds the plan and every sample drawn, so ``resume_tune`` finishes a killed search from the
run directories, never from Tune's own (pickled) state: interrupted samples resume from their checkpoints, and
the samples not yet drawn are drawn by a new searcher (Optuna's told the scores of the samples that ended, ASHA's stopped ones too).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from proxima.algo.schedules import ADJUSTABLE
from proxima.base import files, trust
from proxima.base.errors import EnvError, NonFiniteError, TrainingInterrupted, UserError
from proxima.run import checkpoint
from proxima.run.agent import Agent
from proxima.run.callbacks import Callback, Evaluation, UpdateResult
from proxima.run.config import GROUP_OF, PPOArgs, resolve_args, show_value
from proxima.run.loop import Run, run_to_end, steps
from proxima.run.scores import results_statistics
from proxima.scale import executors
from proxima.scale.rollout_workers import TRIAL_ACTOR_CPUS
from proxima.scale.seedgroup import checkpoint_the_rest, holding
from proxima.scale.sweeps import (
    StopWhenAsked,
    _finite,
    check_output_dir_free,
    check_trial_resources,
    default_output_dir,
    read_plan,
    refuse_objects,
    run_title,
    trial_row,
    write_results,
)
from proxima.scale.trainer import checked, new_run, resumed_run

FORMAT, VERSION = "proxima-tune", 1
SEARCHES = ("random", "optuna")
SCHEDULERS = ("fifo", "asha", "pbt")
METRICS_ = ("final_eval", "eval_return", "return")
MODES = ("max", "min")
DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice")
PBT_SETTINGS = ("learning_rate", "ent_coef", "clip_coef")  # what PBT perturbs (run.set changes them mid-run)
WINDOW = 20  # episodes in the "return" metric
REDUCTION_FACTOR = 3  # ASHA's: a third of the samples at a rung go on to the next
# Settings a preset must not carry: they belong to one run, not to the settings found
RUN_ONLY = ("seed", "run_dir", "quiet", "torch_threads", "init_from", "resume")


# ---- search spaces --------------------------------------------------------------------------------------


def parse_space_item(item: str, read: Callable[[str, str], object]) -> tuple[str, list]:
    """``"learning_rate=loguniform:1e-5:1e-2"`` as ``("learning_rate", ["loguniform", 1e-05, 0.01])``.
    ``read(name, text)``: the value of a train flag ``--name text`` (as ``proxima train`` reads it)."""
    name, equals, spec = item.partition("=")
    name = name.strip().replace("-", "_")
    kind, _, rest = spec.partition(":")
    kind = kind.strip()
    accepted = (
        "NAME=uniform:LOW:HIGH, NAME=loguniform:LOW:HIGH, NAME=randint:LOW:HIGH or NAME=choice:V1,V2,..."
    )
    if not equals or kind not in DISTRIBUTIONS or not rest.strip():
        raise UserError(f"--space expects {accepted}, got {item!r}")
    if name not in GROUP_OF or name in RUN_ONLY:
        raise UserError(
            f"--space: {name!r} is not a setting a search can vary; accepted: the names of the train "
            "flags (proxima train --help), such as learning_rate, apart from seed and run_dir"
        )
    if kind == "choice":
        return name, ["choice", [read(name, text.strip()) for text in rest.split(",")]]
    parts = rest.split(":")
    if len(parts) != 2:
        raise UserError(f"--space: {kind} takes LOW:HIGH, got {item!r}")
    low, high = (read(name, text.strip()) for text in parts)
    return name, _checked(name, [kind, low, high])


def _checked(name: str, spec: list) -> list:
    kind = spec[0]
    if kind == "choice":
        if not spec[1]:
            raise UserError(f"--space {name}: choice needs at least one value")
        return spec
    low, high = spec[1], spec[2]
    ints = all(isinstance(v, int) for v in (low, high))
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)):
        raise UserError(
            f"--space {name}: {kind} needs numbers, got {low!r} and {high!r}; use choice:V1,V2,..."
        )
    if kind == "randint" and not ints:
        raise UserError(f"--space {name}: randint is for whole-number settings; use uniform or loguniform")
    if kind != "randint" and ints and type(PPOArgs().flat()[name]) is int:
        raise UserError(f"--space {name}: {name} is a whole number; use randint:LOW:HIGH or choice:V1,V2,...")
    if not low < high:
        raise UserError(f"--space {name}: LOW must be below HIGH, got {low} and {high}")
    if kind == "loguniform" and low <= 0:
        raise UserError(f"--space {name}: loguniform needs LOW > 0, got {low}")
    return [kind, float(low), float(high)] if kind != "randint" else [kind, low, high]


def spec_of(name: str, value) -> list:
    """A space entry of ``proxima.tune(space=...)``: Tune's own distribution (``tune.loguniform(1e-5, 1e-2)``,
    ``tune.choice([...])``, ``tune.randint(4, 17)``), a list of choices, or the CLI's text."""
    if isinstance(value, str):
        return parse_space_item(f"{name}={value}", lambda _, text: _number(text))[1]
    if isinstance(value, list | tuple):
        return _checked(name, ["choice", list(value)])
    from ray.tune.search import sample

    if isinstance(value, sample.Categorical):
        return _checked(name, ["choice", list(value.categories)])
    if isinstance(value, sample.Integer):  # Tune's randint excludes its upper bound; the spec includes it
        return _checked(name, ["randint", int(value.lower), int(value.upper) - 1])
    if isinstance(value, sample.Float):
        log = isinstance(value.get_sampler(), sample.LogUniform)
        return _checked(name, ["loguniform" if log else "uniform", value.lower, value.upper])
    raise UserError(
        f"space[{name!r}]: give a Tune distribution (tune.uniform, tune.loguniform, tune.randint, "
        f"tune.choice), a list of values or text such as 'loguniform:1e-5:1e-2', got {value!r}"
    )


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def domain(spec: list):
    """A space entry as Tune's distribution."""
    from ray import tune

    kind = spec[0]
    if kind == "choice":
        return tune.choice(spec[1])
    if kind == "randint":
        return tune.randint(spec[1], spec[2] + 1)
    return (tune.loguniform if kind == "loguniform" else tune.uniform)(spec[1], spec[2])


def label(settings: dict) -> str:
    return ", ".join(
        f"{n}={v:.4g}" if isinstance(v, float) else f"{n}={show_value(v)}" for n, v in settings.items()
    )


# ---- the search -----------------------------------------------------------------------------------------


@dataclass
class TuneResults:
    """What ``tune`` returns: one row per sample, best first (as in ``results.json``), and the preset file
    of the best one."""

    output_dir: str
    samples: list[dict]
    best_preset: str | None
    plan: dict

    def __str__(self) -> str:
        return results_table(self.plan, self.samples)


def tune(
    args: PPOArgs | None = None,
    *,
    space: dict,
    config: str | None = None,
    search: str = "random",
    num_samples: int = 8,
    metric: str = "final_eval",
    mode: str = "max",
    seeds: int = 1,
    scheduler: str = "fifo",
    perturbation_interval: int | None = None,
    cpus_per_trial: int = 1,
    gpus_per_trial: float = 0,
    max_concurrent: int | None = None,
    address: str | None = None,
    output_dir: str | None = None,
    **overrides,
) -> TuneResults:
    """Search ``space`` (``{"learning_rate": tune.loguniform(1e-5, 1e-2), ...}``) for the settings that score
    best, each sample over ``seeds`` seeds; write every run, ``results.md``, ``results.json``, ``report.html``
    and the best settings as a preset (``best.json``, for ``proxima train --config``) to ``output_dir``.

    The base settings are layered as for ``train`` (``config`` and ``overrides``, or ``args``). ``search``:
    ``random`` or ``optuna`` (Tune's OptunaSearch, seeded with the base seed). ``metric``: ``final_eval`` (the
    deterministic policy on ``eval_episodes`` episodes at the final budget, and at each ASHA rung or PBT
    interval), ``return`` (mean of the last 20 episodes) or ``eval_return`` (the last evaluation of
    ``eval_every``); a sample scores the IQM of its seeds' scores. ``mode``: ``max`` or ``min``. ``scheduler``: ``fifo`` (every sample to its end), ``asha`` (stops samples
    behind at its rungs) or ``pbt`` (perturbs ``learning_rate``, ``ent_coef``, ``clip_coef`` of the space
    every ``perturbation_interval`` updates; default an eighth of the run). Each trial gets ``cpus_per_trial``
    CPUs and as many torch threads, ``gpus_per_trial`` GPUs (with any, its runs train on CUDA), and a CPU for
    each rollout worker of its seeds' runs.
    """
    refuse_objects(overrides, "proxima.tune")
    base = resolve_args(args, **overrides) if args is not None else resolve_args(config=config, **overrides)
    if not space:
        raise UserError(
            "give at least one setting to search: --space NAME=loguniform:LOW:HIGH (or space={...})"
        )
    spec = {name: spec_of(name, value) for name, value in space.items()}
    plan = _plan(
        base,
        spec,
        search,
        num_samples,
        metric,
        mode,
        seeds,
        scheduler,
        perturbation_interval,
        cpus_per_trial,
        max_concurrent,
        gpus_per_trial,
    )
    executors.check_executor("ray", "proxima tune")
    if search == "optuna":
        try:
            import optuna  # noqa: F401
        except ImportError:
            raise UserError(
                "--search optuna needs Optuna: pip install 'proxima[ray]' (make installs it)"
            ) from None
    out = os.path.abspath(output_dir or default_output_dir(base.env.env_id, "tune"))
    check_output_dir_free(out)
    with files.lock_directory(out, "tune directory", "--output-dir"):
        check_output_dir_free(out)  # again, held: of two searches started into it, the second finds it taken
        files.write_json(os.path.join(out, files.TUNE_JSON), plan)
        try:
            return _run(out, plan, address, announce=not base.run.quiet)
        except UserError:  # Ray was out of reach or has no node for a sample: refused before any sample ran
            if not plan["samples"]:
                os.remove(os.path.join(out, files.TUNE_JSON))
            raise


def _plan(
    base: PPOArgs,
    spec: dict,
    search: str,
    num_samples: int,
    metric: str,
    mode: str,
    seeds: int,
    scheduler: str,
    perturbation_interval: int | None,
    cpus_per_trial: int,
    max_concurrent: int | None,
    gpus_per_trial: float = 0,
) -> dict:
    for value, accepted, what in (
        (search, SEARCHES, "search"),
        (scheduler, SCHEDULERS, "scheduler"),
        (metric, METRICS_, "metric"),
        (mode, MODES, "mode"),
    ):
        if value not in accepted:
            raise UserError(f"unknown {what} {value!r}; accepted: {', '.join(accepted)}")
    for count, what in ((num_samples, "num_samples"), (seeds, "seeds"), (cpus_per_trial, "cpus_per_trial")):
        if not isinstance(count, int) or count < 1:
            raise UserError(f"{what} must be a positive integer, got {count!r}")
    check_trial_resources("ray", cpus_per_trial, gpus_per_trial, max_concurrent)
    if gpus_per_trial and not base.run.cuda:
        raise UserError("--gpus-per-trial reserves GPUs for runs that train on them: drop --no-cuda")
    if scheduler == "pbt" and search != "random":  # Tune's PBT explores by its own perturbations
        raise UserError("--scheduler pbt draws its own perturbations; give --search random with it")
    if base.run.num_seeds > 1:
        raise UserError(f"proxima tune scores each sample over --seeds {seeds}, run apart; drop --num-seeds")
    if metric == "eval_return" and not base.run.eval_every:
        raise UserError("metric eval_return needs evaluations during training: give --eval-every N (updates)")
    # every sample's settings are checked before the first run, so that bad input fails now and writes nothing
    for name, entry in spec.items():
        values = entry[1] if entry[0] == "choice" else entry[1:]
        for value in values:
            base.replace(**{name: _typed(name, value)}).validate()
    if scheduler == "pbt" and not set(spec) & set(PBT_SETTINGS):
        raise UserError(
            f"pbt perturbs {', '.join(PBT_SETTINGS)} during training; put at least one of them in the "
            "space (--space learning_rate=loguniform:1e-5:1e-2)"
        )
    num_updates = base.num_updates
    interval = perturbation_interval or max(1, num_updates // 8)
    if interval < 1:
        raise UserError(f"perturbation_interval must be a positive number of updates, got {interval}")
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": run_title(base),
        "base": base.replace(quiet=True, torch_threads=cpus_per_trial).to_json(),
        "space": spec,
        "search": search,
        "num_samples": num_samples,
        "metric": metric,
        "mode": mode,
        "seeds": [base.run.seed + k for k in range(seeds)],
        "scheduler": scheduler,
        "perturbation_interval": interval,
        "perturbation_steps": interval * base.batch_size,
        "total_timesteps": base.algorithm.total_timesteps,
        "num_updates": num_updates,
        "cpus_per_trial": cpus_per_trial,
        "gpus_per_trial": gpus_per_trial,
        "max_concurrent": max_concurrent,
        "samples": [],
    }


def _typed(name: str, value):
    """A value from Tune (JSON-ish: a list where a setting takes a tuple) as the setting takes it."""
    return tuple(value) if isinstance(value, list) else value


def resume_tune(output_dir: str, address: str | None = None, *, trust_code: bool = False) -> TuneResults:
    """Finish the search in ``output_dir``: samples that ended are kept, interrupted ones resume from their
    runs' checkpoints (to their end: the new scheduler knows nothing of them), and the samples not yet drawn
    are drawn anew. tune.json's settings name no code that is imported unless ``trust_code``
    (docs/SECURITY.md): registered env ids and proxima's own encoders need no switch."""
    path = os.path.join(output_dir, files.TUNE_JSON)
    if not os.path.isdir(output_dir) or not os.path.exists(path):
        raise UserError(
            f"{output_dir!r} is not a tune directory (no {files.TUNE_JSON}); give one written by proxima tune"
        )
    with files.lock_directory(output_dir, "tune directory", None):  # before the plan is read
        plan = read_plan(path, "tune", VERSION, "run the search again")
        out = os.path.abspath(output_dir)
        # before anything runs: a resume removes and writes what tune.json names
        for sample in plan["samples"]:
            files.inside(out, sample["name"], path)  # Tune's folder name
            for seed in plan["seeds"]:
                run_dir = _run_dir(out, sample["name"], seed)
                if os.path.isdir(run_dir):
                    files.links_inside(run_dir)
        if not isinstance(plan.get("base"), dict):
            raise UserError(f"{path} holds no base settings (a dict under 'base'); the plan is corrupt")
        base = PPOArgs.from_json(plan["base"], path)
        for sample in [{"settings": {}}, *plan.get("samples", [])]:
            settings = {k: _typed(k, v) for k, v in sample.get("settings", {}).items()}
            trust.check_settings(path, base.replace(_source=path, **settings), trusted=trust_code)
        executors.check_executor("ray", "proxima tune")
        return _run(out, plan, address)


def _run(out: str, plan: dict, address: str | None, announce: bool = True) -> TuneResults:
    """Run what is left of ``plan``: first the samples that were interrupted, to their end with the settings
    they had, then new ones."""
    started = {s["name"]: s for s in plan["samples"]}
    unfinished = [s for s in plan["samples"] if _sample_status(_rows(out, plan, s["name"])) is None]

    def trial(params: dict, **given) -> dict:  # given: report, node and stop, as run_sample takes them
        return run_sample(
            out, plan, params["__name"], {k: v for k, v in params.items() if k != "__name"}, **given
        )

    def on_done(config: dict, error: str | None) -> None:
        name = config["__name"]
        if error is not None:  # a crash that wrote nothing: the runs of the sample say so
            for seed in plan["seeds"]:
                run_dir = _run_dir(out, name, seed)
                if os.path.isdir(run_dir) and trial_row(run_dir) is None:
                    files.write_json(
                        os.path.join(run_dir, files.TRIAL_JSON), {"status": "failed", "error": error}
                    )
        # a trial that Tune has just stopped writes its rows as it unwinds, after Tune has told this process
        deadline = time.monotonic() + 10.0
        while not all(rows := _rows(out, plan, name)) and time.monotonic() <= deadline:
            time.sleep(0.2)
        scores = [float(r["score"]) for r in rows if r and r.get("score") is not None]
        ended = "ended" if plan["scheduler"] == "fifo" else f"stopped by {plan['scheduler'].upper()}"
        said = ", ".join(sorted({(r or {}).get("status", ended) for r in rows}))  # its rows may come later
        score = f"{sample_score(scores):.1f}" if scores else "none"
        print(f"{name}: {said}, score {score} ({label(started[name]['settings'])})", flush=True)

    # beside its CPUs, each trial reserves its GPUs and a CPU for each of its seeds' rollout workers
    workers = plan["base"]["env"]["rollout_workers"] * TRIAL_ACTOR_CPUS * len(plan["seeds"])
    run_ray = functools.partial(
        executors.run_ray,
        trial,
        on_done=on_done,
        storage=out,
        cpus_per_trial=plan["cpus_per_trial"],
        max_concurrent=plan["max_concurrent"],
        address=address,
        gpus_per_trial=plan["gpus_per_trial"],
        worker_cpus=lambda _: workers,
        announce=announce,
    )
    if unfinished:
        run_ray(
            [{"__name": s["name"], **s["settings"]} for s in unfinished],
            name_of=lambda t: t.config["config"]["__name"],
        )
    if plan["num_samples"] > len(plan["samples"]):
        done = []  # the samples whose every seed ended with a score
        for s in plan["samples"]:
            scores: list = [(r or {}).get("score") for r in _rows(out, plan, s["name"])]
            if None not in scores:
                done.append((s["settings"], sample_score(scores)))
        first = 1 + max((int(s["name"][1:]) for s in plan["samples"]), default=0)
        names: dict[str, str] = {}

        def name_of(trial) -> str:  # Tune asks as it creates a trial, and again later
            if trial.trial_id not in names:
                name = names[trial.trial_id] = f"s{first + len(names):03d}"
                started[name] = {"name": name, "settings": dict(trial.config)}
                plan["samples"].append(started[name])
                files.write_json(os.path.join(out, files.TUNE_JSON), plan)
            return names[trial.trial_id]

        space = {name: domain(spec) for name, spec in plan["space"].items()}
        run_ray(
            None,
            param_space=space,
            search_alg=make_searcher(plan, done),
            scheduler=_scheduler(plan, space),
            num_samples=plan["num_samples"] - len(plan["samples"]),
            metric="score",
            mode=plan["mode"],
            name_of=name_of,
        )
    _rows_of_stopped(out, plan)
    return summarize(out, plan)


def _rows_of_stopped(out: str, plan: dict) -> None:
    """The search has ended, so a run without its row was stopped by the scheduler, and its trial's process
    ended before the row was written: write it, with the score its logs give."""
    for sample in plan["samples"]:
        for seed in plan["seeds"]:
            run_dir = _run_dir(out, sample["name"], seed)
            if os.path.exists(os.path.join(run_dir, files.METRICS)) and trial_row(run_dir) is None:
                score = Score(plan["metric"])
                score.from_logs(run_dir)
                row = {"status": "stopped", "score": score.value, "settings": sample["settings"]}
                files.write_json(os.path.join(run_dir, files.TRIAL_JSON), _finite(row))


def make_searcher(plan: dict, done: list[tuple[dict, float]]):
    """Tune's searcher for ``plan``, seeded with its first seed; ``done``: the settings and scores of samples
    that already ended (a resumed search), which Optuna is told and random search skips past."""
    seed = plan["seeds"][0]
    if plan["search"] == "optuna":
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # proxima says one line per sample instead
        return OptunaSearch(
            metric="score",
            mode=plan["mode"],
            seed=seed,
            points_to_evaluate=[settings for settings, _ in done] or None,
            evaluated_rewards=[score for _, score in done] or None,
        )
    from ray.tune.search import BasicVariantGenerator  # random search, seeded: the same samples again

    return BasicVariantGenerator(random_state=seed + len(plan["samples"]))


def _scheduler(plan: dict, space: dict):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

    # Env steps, not Tune's iterations: a sample with bigger batches makes fewer updates of the same steps
    if plan["scheduler"] == "asha":
        grace, max_t = _asha_times(plan)
        return ASHAScheduler(
            time_attr="global_step", max_t=max_t, grace_period=grace, reduction_factor=REDUCTION_FACTOR
        )
    if plan["scheduler"] == "pbt":
        return PopulationBasedTraining(
            time_attr="global_step",
            perturbation_interval=plan["perturbation_steps"],
            hyperparam_mutations={name: space[name] for name in PBT_SETTINGS if name in space},
            require_attrs=False,  # the score is missing until a seed has one (its first episode, evaluation)
        )
    return FIFOScheduler()


# ---- one sample: a Tune trial -------------------------------------------------------------------------


def _run_dir(out: str, sample: str, seed: int) -> str:
    """The run directory of a sample's seed: inside ``out``, whatever tune.json says (``files.inside``)."""
    return files.inside(out, f"{sample}__seed{seed}", os.path.join(out, files.TUNE_JSON))


class Score(Callback):
    """A run's score after each update: its last evaluation (``eval_return``, or ``final_eval``'s, logged as
    ``tune_eval``), or the mean return of its last 20 episodes (``return``). ``final_eval`` evaluates after the
    first update at or past each of ``points`` (global steps: the scheduler's rungs) and after the last update."""

    def __init__(self, metric: str, points: tuple[int, ...] = ()):
        self.metric, self.points = metric, points
        self.value: float | None = None
        self.returns: collections.deque = collections.deque(maxlen=WINDOW)
        self.evaluation: Evaluation | None = None
        self.passed = 0  # how many of points the run has passed

    def on_train_start(self, run) -> None:
        """A resumed run (interrupted, or PBT's copy of a better one) goes on from its logs' score."""
        if run.updates_done:
            self.from_logs(run.run_dir)
        if self.metric == "final_eval":
            self.passed = sum(p <= run.global_step for p in self.points)
            # the evaluation of --eval-every: the same seed apart from training's, the same starts each time
            self.evaluation = Evaluation(1, run.args.run.eval_episodes)
            self.evaluation.open(run.args, run.device, run.env)

    def from_logs(self, run_dir: str) -> None:
        from proxima.run.plotting import read_episodes

        if self.metric in EVALUATED:
            key = EVALUATED[self.metric]
            evaluations = [r[key] for r in files.read_jsonl(os.path.join(run_dir, files.METRICS)) if key in r]
            self.value = evaluations[-1] if evaluations else None
        else:
            self.returns.extend(read_episodes(run_dir)[1][-WINDOW:].tolist())
            self.value = float(np.mean(self.returns)) if self.returns else None

    def on_update_end(self, run, result) -> None:
        self.returns.extend(result.episode_returns)
        if self.evaluation is not None:
            passed = sum(p <= run.global_step for p in self.points)
            if passed > self.passed or run.updates_done >= run.args.num_updates:
                self.passed = passed
                self.value = float(self.evaluation.evaluate(run.model).mean())
                result.record[EVALUATED["final_eval"]] = self.value
        elif self.metric == "eval_return":
            self.value = result.record.get("eval_return", self.value)
        elif self.returns:
            self.value = float(np.mean(self.returns))

    def on_train_end(self, run) -> None:
        # a run that stopped early (--stop-return) is scored at the budget it ended at
        if self.evaluation is not None and run.updates_done < run.args.num_updates:
            self.value = float(self.evaluation.evaluate(run.model).mean())

    def close(self, run) -> None:
        if self.evaluation is not None:
            self.evaluation.close(run)


# the metrics that are evaluations, by the key of metrics.jsonl that logs them
EVALUATED = {"eval_return": "eval_return", "final_eval": "tune_eval"}


def sample_score(scores: list[float]) -> float:
    """A sample's score from its seeds': their interquartile mean, the mean of all but the ``floor(n / 4)``
    lowest and highest (``proxima.run.statistics.iqm``'s, without SciPy, which a search does not need)."""
    x = np.sort(np.asarray(scores, dtype=np.float64))
    cut = len(x) // 4
    return float(x[cut : len(x) - cut].mean())


def evaluation_points(plan: dict) -> tuple[int, ...]:
    """The global steps where the scheduler judges samples: ASHA's rungs (as Tune's ``ASHAScheduler`` places
    them) or PBT's intervals; none for FIFO."""
    total = plan["total_timesteps"]
    if plan["scheduler"] == "asha":
        grace, max_t = _asha_times(plan)
        rungs = int(np.log(max_t / grace) / np.log(REDUCTION_FACTOR) + 1)
        return tuple(grace * REDUCTION_FACTOR**k for k in range(rungs))
    if plan["scheduler"] == "pbt":
        return tuple(range(plan["perturbation_steps"], total + 1, plan["perturbation_steps"]))
    return ()


def _asha_times(plan: dict) -> tuple[int, int]:
    """ASHA's grace period and ``max_t``, in env steps. ``max_t`` is past the last step: at ``max_t`` ASHA stops a
    trial, which would end a finished one as "stopped"."""
    total = plan["total_timesteps"]
    return max(1, total // 8), total + 1


class Perturb(Callback):
    """Puts a PBT-perturbed sample's settings in force as its run resumes, and logs it."""

    def __init__(self, settings: dict, origin: str | None):
        self.settings, self.origin = settings, origin

    def on_train_start(self, run) -> None:
        run.set(**self.settings)
        if self.origin is None:  # restarted from its own checkpoint: nothing changed
            return
        line = {
            "update": run.updates_done,
            "global_step": run.global_step,
            "from": self.origin,
            "settings": self.settings,
        }
        with open(os.path.join(run.run_dir, files.PERTURBATIONS), "a") as f:
            f.write(json.dumps(line) + "\n")
        run.console.message(f"PBT: continuing from {self.origin} with {label(self.settings)}")


def run_sample(out: str, plan: dict, name: str, settings: dict, report=None, node=None, stop=None) -> dict:
    """Train the sample's seeds in lockstep (``Sample``), reporting their mean score (``report``: Tune's) after
    each round; write each run's ``trial.json``; return the sample's row. ``stop``: as for a sweep's trial
    (``proxima.scale.sweeps.run_trial``): once it gives a signal, each seed checkpoints after its update, the sample
    raises ``TrainingInterrupted``, and no ``trial.json`` is written, so that ``--resume`` goes on from there.

    The sample holds its runs' directories from start to end, as a sweep's trial does (``run_trial``): it waits
    a while for another holder to let go (the trial's last process, which PBT or ASHA stopped); refused, the
    sample fails with the line that names the holder."""
    with holding([_run_dir(out, name, seed) for seed in plan["seeds"]], wait_s=files.WRITER_WAIT_S):
        exploiting = plan["scheduler"] == "pbt" and report is not None
        runs = _seed_runs(out, plan, name, settings, exploiting, stop)
        cpu_start = time.process_time()
        sample = Sample(plan, name, [score for _, score, _ in runs], report)
        status: str | None = "finished"
        error: str | None = None
        try:
            with contextlib.ExitStack() as stack:
                for k, (_, _, made) in enumerate(runs):
                    if made is not None:
                        sample.members[stack.enter_context(made)] = k
                if sample.members:
                    run_to_end(steps(sample))
        except TrainingInterrupted:  # each seed checkpointed after its update
            status = None
            raise
        except SystemExit:  # the scheduler stopped this sample (ASHA), or PBT pauses it to exploit another
            status = "stopped"
            raise
        except (NonFiniteError, EnvError, UserError) as e:
            status, error = "failed", str(e)
        finally:
            for k, (run_dir, score, _) in enumerate(runs):
                if status is not None and os.path.isdir(run_dir):
                    row = {
                        "status": status,
                        "score": score.value,
                        "settings": settings,
                        "node": node,
                        "updates": getattr(sample.last.get(k), "updates_done", None),
                        "sample_cpu_s": time.process_time() - cpu_start,
                        **({"error": error} if error else {}),
                    }
                    files.write_json(os.path.join(run_dir, files.TRIAL_JSON), _finite(row))
        return {"status": status, "error": error}


def _seed_runs(out: str, plan: dict, name: str, settings: dict, exploiting: bool, stop):
    """The sample's runs: each seed's directory, its ``Score`` and its ``Run`` to be made (a context manager of
    ``proxima.scale.trainer``; None for a run that has already ended)."""
    base = PPOArgs.from_json(plan["base"])
    typed = {k: _typed(k, v) for k, v in settings.items()}
    # the runs' config.json name only what the plan does, which the user gave or --resume checked
    named = trust.names_of(base.replace(**typed))
    exploit = _exploited(out, plan, name) if exploiting else None
    runs: list[tuple[str, Score, contextlib.AbstractContextManager[Run] | None]] = []
    for seed in plan["seeds"]:
        run_dir = _run_dir(out, name, seed)
        score = Score(plan["metric"], evaluation_points(plan))
        callbacks: list[Callback] = [score, *([StopWhenAsked(stop)] if stop is not None else [])]
        made: contextlib.AbstractContextManager[Run] | None = None
        if exploit is not None:
            origin, source = exploit
            for f in (files.CHECKPOINT, files.METRICS, files.EPISODES):
                shutil.copyfile(os.path.join(source, f"seed{seed}", f), os.path.join(run_dir, f))
            if os.path.exists(os.path.join(run_dir, files.TRIAL_JSON)):
                os.remove(os.path.join(run_dir, files.TRIAL_JSON))  # written as PBT paused it
            adjustable = {k: v for k, v in typed.items() if k in ADJUSTABLE}
            callbacks.append(Perturb(adjustable, origin if origin != name else None))
            made = resumed_run(run_dir, quiet=True, callbacks=callbacks, named=named)
        elif checkpoint.finished(run_dir):  # ended before its row was written
            score.from_logs(run_dir)
        elif os.path.exists(os.path.join(run_dir, files.CHECKPOINT)):
            made = resumed_run(run_dir, quiet=True, callbacks=callbacks, named=named)
        else:  # stopped before its first checkpoint: start again
            files.remove_stopped_run(run_dir)
            args, env = checked(base.replace(**typed, seed=seed, run_dir=run_dir))
            made = new_run(args, run_dir, callbacks, env)
        runs.append((run_dir, score, made))
    return runs


class Sample:
    """A sample's seeds' runs as one thing for ``proxima.run.loop.steps`` to drive, as a ``SeedGroup`` is: a round
    is one update of each seed's ``Run`` in turn; after it, Tune gets their mean score (``updated``). Each seam is
    its members' own, and a member that ends leaves where its run alone would: its last update done, before the
    others' next one (a resumed sample's seeds may stand at different updates)."""

    def __init__(self, plan: dict, name: str, scores: list[Score], report):
        self.plan, self.name, self.scores, self.report = plan, name, scores, report
        self.members: dict[Run, int] = {}  # each seed's run, to its index in the plan's seeds
        # the seeds' runs that have updated, by index: for their rows and Tune's checkpoints
        self.last: dict[int, Run] = {}
        self.ended: list[Run] = []
        self.at: Run | None = None  # the run whose update is under way: its failure is named by it
        self.mark: int | None = None  # the last multiple of perturbation_steps reported (updated)

    def start(self) -> list[Run]:
        # the one furthest behind first, as steps goes on while its first member has updates to do
        live = sorted(self.members, key=lambda run: run.updates_done)
        for run in live:
            run.start()
        return live

    def update(self, live: list[Run]) -> list[tuple[Run, UpdateResult]]:
        self.leave([run for run in live if run.updates_done >= run.args.num_updates])
        updated = []
        for run in live:
            if run not in self.ended:
                self.at = run
                updated.append((run, run.iterate()))
                self.last[self.members[run]] = run
        self.at = None
        return updated

    def stopping(self, member: Run, result: UpdateResult) -> None:
        member.stopping(member, result)

    def leave(self, members: list[Run]) -> None:
        for run in members:
            if run not in self.ended:
                self.ended.append(run)
                run.leave([run])
                run.end()

    def interrupt(self, live: list[Run], first: TrainingInterrupted) -> None:
        checkpoint_the_rest([run for run in live if run not in self.ended])
        raise first

    def updated(self, live: list[Run], updated: list[tuple[Run, UpdateResult]]) -> None:
        """Tune gets the seeds' mean score; under PBT, with a checkpoint of the runs as they stand (each seed's
        checkpoint, metrics and episodes, for PBT to copy) each time they pass a multiple of
        ``perturbation_steps`` (``mark``: the last multiple reported, from where the runs start, which an
        exploiting trial takes over with the checkpoint it copies)."""
        if self.report is None:
            return
        runs, plan = self.last, self.plan
        step = max(r.global_step for r in runs.values())
        mark = step // plan["perturbation_steps"]
        if self.mark is None:
            self.mark = mark
        values = [s.value for s in self.scores if s.value is not None]
        if not values:  # no score yet (no episode ended, no evaluation): Tune takes only results with one
            return
        metrics = {"global_step": step, "score": sample_score(values), "score_std": float(np.std(values))}
        # none after the last update: a trial that went on from it would have nothing left to train
        left = any(r.updates_done < r.args.num_updates for r in runs.values())
        if plan["scheduler"] != "pbt" or mark <= self.mark or not left:
            self.report(metrics)
            return
        from ray import tune

        self.mark = mark
        directory = tempfile.mkdtemp(prefix="proxima-pbt-")
        try:
            files.write_json(os.path.join(directory, "origin.json"), {"sample": self.name})
            for k, run in runs.items():
                run.save_checkpoint()
                seed_dir = os.path.join(directory, f"seed{plan['seeds'][k]}")
                os.makedirs(seed_dir)
                for f in (files.CHECKPOINT, files.METRICS, files.EPISODES):
                    shutil.copyfile(os.path.join(run.run_dir, f), os.path.join(seed_dir, f))
            self.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def end(self) -> None:
        pass

    def failed(self, e: Exception) -> Exception:
        return e if self.at is None else self.at.failed(e)

    def close(self) -> None:
        for run in self.members:
            run.close()

    def trained(self) -> list[Agent]:
        return [run.agent for run in self.members]


def _exploited(out: str, plan: dict, name: str) -> tuple[str, str] | None:
    """(the donor sample, a local copy of its checkpoint) when PBT restarted this trial from another one's
    checkpoint; None for a fresh trial."""
    from ray import tune

    found = tune.get_checkpoint()
    if found is None:
        return None
    local = found.to_directory(tempfile.mkdtemp(prefix="proxima-pbt-in-"))
    return files.read_json(os.path.join(local, "origin.json"))["sample"], local


# ---- results ----------------------------------------------------------------------------------------------


def _rows(out: str, plan: dict, name: str) -> list[dict | None]:
    """The ``trial.json`` of each seed's run of the sample (None: the run has not ended)."""
    return [trial_row(_run_dir(out, name, seed)) for seed in plan["seeds"]]


def _sample_status(rows: list[dict | None]) -> str | None:
    """``finished``, ``stopped`` or ``failed`` once every seed's run has ended; None if one has not."""
    statuses = {None if r is None else r["status"] for r in rows}
    return None if None in statuses else next((s for s in ("failed", "stopped") if s in statuses), "finished")


def summarize(out: str, plan: dict) -> TuneResults:
    """Rank the samples (best first; a stopped or failed one after the finished); write ``results.json``,
    ``results.md``, the best finished sample as ``best.json`` (a preset) and ``report.html``."""
    rows = []
    for sample in plan["samples"]:
        runs = [_run_dir(out, sample["name"], seed) for seed in plan["seeds"]]
        ended = [trial_row(run_dir) for run_dir in runs]
        scores = [(t or {}).get("score") for t in ended]
        known = [s for s in scores if s is not None]
        rows.append(
            {
                "name": sample["name"],
                "settings": sample["settings"],
                "status": _sample_status(ended) or "not run",
                "score_iqm": sample_score(known) if known else None,  # what ranks it
                "score_mean": float(np.mean(known)) if known else None,
                "score_std": float(np.std(known)) if known else None,
                "scores": scores,
                "runs": [os.path.basename(r) for r in runs],
                "cpu_s": (ended[0] or {}).get("sample_cpu_s"),
                "perturbations": sum(_count_lines(os.path.join(r, files.PERTURBATIONS)) for r in runs),
            }
        )
    sign = 1 if plan["mode"] == "max" else -1
    rows.sort(
        key=lambda r: (r["status"] != "finished", r["score_iqm"] is None, -sign * (r["score_iqm"] or 0.0))
    )
    best = next((r for r in rows if r["status"] == "finished" and r["score_iqm"] is not None), None)
    preset = None
    if best is not None:
        preset = os.path.join(out, files.BEST_PRESET)
        files.write_json(preset, best_preset(plan, best))
    trained = any(os.path.isdir(os.path.join(out, r)) for row in rows for r in row["runs"])
    results = {"title": plan["title"], "samples": rows}
    # of the samples that finished, best first: each against the best
    finished = {
        r["name"]: [os.path.join(out, d) for d in r["runs"]] for r in rows if r["status"] == "finished"
    }
    found, said = results_statistics(finished)
    if found is not None:
        results["statistics"] = found
    write_results(out, results, f"{results_table(plan, rows)}\n{said}", trained)
    return TuneResults(out, rows, preset, plan)


def best_preset(plan: dict, row: dict) -> dict:
    """The base settings that differ from the defaults, with the best sample's on top, as a preset file."""
    base = PPOArgs.from_json(plan["base"])
    algo_defaults = resolve_args(algo=base.algorithm.algo).flat()
    values = {**base.flat(), **{k: _typed(k, v) for k, v in row["settings"].items()}}
    preset: dict[str, object] = {
        "description": f"found by proxima tune ({plan['search']} search, {plan['scheduler']}, {plan['num_samples']} "
        f"samples of {len(plan['seeds'])} seed(s), metric {plan['metric']}): sample {row['name']} scored "
        f"{_score_text(row)}",
        "algo": base.algorithm.algo,
    }
    for name, value in values.items():
        if name not in (*RUN_ONLY, "algo") and (value != algo_defaults[name] or name in row["settings"]):
            preset[name] = list(value) if isinstance(value, tuple) else value
    return preset


def _count_lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def _score_text(row: dict) -> str:
    """The IQM over seeds, and their mean ± std: "412.3 (398.1 ± 40.2)"."""
    if row["score_iqm"] is None:
        return "–"
    return f"{row['score_iqm']:.1f} ({row['score_mean']:.1f} ± {row['score_std']:.1f})"


def results_table(plan: dict, rows: list[dict]) -> str:
    metric = {
        "final_eval": "deterministic evaluation at the final budget",
        "eval_return": "last evaluation",
        "return": f"mean return of the last {WINDOW} episodes",
    }[plan["metric"]]
    lines = [
        plan["title"],
        "",
        f"{plan['search']} search, {plan['scheduler']} scheduler, {len(plan['samples'])} of {plan['num_samples']} "
        f"samples, seeds {', '.join(map(str, plan['seeds']))}; score = {metric}, {plan['mode']} is best",
        "",
        f"CPU time of the samples' processes, all samples: {sum(r.get('cpu_s') or 0.0 for r in rows):.0f} s",
        "",
        "| rank | sample | settings | status | score, IQM (mean ± std) over seeds | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(rows, 1):
        score = _score_text(row)
        per_seed = ", ".join("–" if s is None else f"{s:.1f}" for s in row["scores"])
        status = row["status"] + (f" ({row['perturbations']} PBT steps)" if row.get("perturbations") else "")
        lines.append(f"| {i} | {row['name']} | {label(row['settings'])} | {status} | {score} | {per_seed} |")
    return "\n".join(lines) + "\n"
