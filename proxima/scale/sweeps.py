"""Sweeps: one ordinary run per (setting, seed), on an executor (Ray Tune trials, or one after another in
this process), then one summary: a table over seeds per setting, the learning curves with bands, and
``results.json``. ``proxima compare`` is a sweep whose settings are algorithms.

The run directories are the sweep's memory. ``sweep.json`` lists the trials; a trial's ``trial.json`` says
it finished or failed (and why); a trial with a checkpoint and no ``trial.json`` was interrupted and resumes
from the checkpoint. So after any kill, ``proxima sweep --resume DIR`` runs only what is left.

A batched sweep (``batched=True``) trains each setting's seeds as one trial, a batched run (``--num-seeds``) in
the setting's directory, whose seeds' run directories (``seedS``) are the plan's per-seed runs.
"""

from __future__ import annotations

import copy
import itertools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from proxima.base import files, trust
from proxima.base.errors import EnvError, NonFiniteError, UserError
from proxima.run import checkpoint
from proxima.run.callbacks import Callback, Checkpointing
from proxima.run.config import PPOArgs, resolve_args, show_value
from proxima.run.loop import run_to_end
from proxima.run.plotting import final_return, plot_runs
from proxima.run.report import write_report
from proxima.run.scores import results_statistics
from proxima.scale import executors
from proxima.scale.rollout_workers import TRIAL_ACTOR_CPUS
from proxima.scale.seedgroup import check_seeds
from proxima.scale.trainer import resuming, train

# each trial's "config" is its config.json, but with its run_dir relative to the sweep directory, so that a
# sweep moved elsewhere resumes where it lies; a batched sweep's "groups" are its trials, one per setting
FORMAT, VERSION = "proxima-sweep", 4


@dataclass
class SweepResults:
    """What ``sweep`` returns: one row per trial and one summary per setting (as in ``results.json``)."""

    output_dir: str
    trials: list[dict]
    settings: list[dict]

    def __str__(self) -> str:
        return results_table(self.settings, self.trials, "")


def parse_seeds(text: str) -> list[int]:
    """The seeds ``--seeds`` names: a count (``"5"``: seeds 1 to 5, as ``--seeds 5`` of ``proxima tune`` and
    ``--num-seeds 5`` of ``proxima train`` mean five seeds), a range (``"1-10"``, ``"4-4"``: seed 4 alone), a
    list (``"1,3,5"``) or a mix (``"1-3,7"``); in order, each once."""
    parts = [part.strip() for part in text.split(",")]
    count = len(parts) == 1 and "-" not in parts[0]
    try:
        seeds: list[int] = []
        for part in parts:
            first, dash, last = part.partition("-")
            seeds += range(int(first), int(last) + 1) if dash else [int(first)]
    except ValueError:
        raise UserError(
            f"--seeds expects a count (5: seeds 1-5) or ranges and lists like 1-10 or 1,3,5, got {text!r}"
        ) from None
    if count:
        if seeds[0] < 1:
            raise UserError(
                f"--seeds expects a positive count of seeds (5: seeds 1-5), or ranges and lists like "
                f"0-0 or 0,1; got {text!r}"
            )
        return list(range(1, seeds[0] + 1))
    if not seeds or min(seeds) < 0:
        raise UserError(f"--seeds expects non-negative integers and ranges like 1-10 or 1,3,5, got {text!r}")
    return list(dict.fromkeys(seeds))


def refuse_objects(overrides: dict, command: str) -> None:
    """``env=`` and ``callbacks=`` are ``proxima.train``'s: a sweep's or a search's runs are trials of their
    own, which take their settings as JSON (and resume from it), not Python objects."""
    if "env" in overrides:
        raise UserError(
            f"{command} takes its env by name, as each run is a trial of its own that resumes from JSON: give "
            "env_factory='module:function' (an importable function or class that returns the env) or a "
            "registered env_id; env= objects are for proxima.train"
        )
    if "callbacks" in overrides:
        raise UserError(
            f"{command} takes no callbacks, as each run is a trial of its own: read each run's metrics.jsonl "
            "(or its Tune results) after it, or train the runs with proxima.train(callbacks=...)"
        )


def grid_settings(grid: dict[str, list]) -> list[tuple[str, dict]]:
    """Every combination of the grid's values, in order, each with its label (``"learning_rate=0.001,
    ent_coef=0"``); an empty grid is one setting, the base one."""
    names = list(grid)
    return [
        (
            ",".join(f"{n}={show_value(v)}" for n, v in zip(names, values, strict=True)) or "base",
            dict(zip(names, values, strict=True)),
        )
        for values in itertools.product(*(grid[n] for n in names))
    ]


def sweep(
    args: PPOArgs | None = None,
    *,
    config: str | None = None,
    seeds: int | str | Iterable[int] = 3,
    grid: dict[str, list] | None = None,
    executor: str = "ray",
    cpus_per_trial: int = 1,
    gpus_per_trial: float = 0,
    max_concurrent: int | None = None,
    address: str | None = None,
    output_dir: str | None = None,
    settings: list[tuple[str, PPOArgs]] | None = None,
    batched: bool = False,
    **overrides,
) -> SweepResults:
    """Train every combination of ``grid``'s values (``{"learning_rate": [3e-4, 1e-3]}``) with every seed;
    return the results, also written to ``output_dir``. ``seeds``: a count (3: seeds 1 to 3), the seeds
    themselves (``range(1, 11)``, ``[1, 3, 5]``) or ``--seeds``' text (``"1-10"``).

    Each combination's settings are layered as for ``train``: ``config`` and ``overrides``, then the grid's
    values (an ``algo`` in the grid brings that algorithm's defaults), or ``args`` with the grid's values on
    top. ``executor``: ``"ray"`` (each run a Ray Tune trial with ``cpus_per_trial`` CPUs and as many torch
    threads, ``gpus_per_trial`` GPUs (a fraction shares one; with any, the run trains on it), and a CPU for
    each of its rollout workers; ``address`` joins a cluster) or ``"local"`` (one after another here).
    ``settings``: labelled settings instead of a grid (``proxima compare`` passes one per algorithm, the CLI
    the parsed flags). ``batched``: each setting's seeds, which must then be consecutive, train as one
    batched run (``num_seeds``), one trial, instead of one trial each.
    """
    executors.check_executor(executor, "a sweep")
    refuse_objects(overrides, "proxima.sweep")
    check_trial_resources(executor, cpus_per_trial, gpus_per_trial, max_concurrent)
    seed_list = _seed_list(seeds, batched)
    if settings is None:
        if args is not None and "algo" in (grid or {}):
            raise UserError(
                "an algo in the grid needs its defaults: give config and overrides, not a PPOArgs"
            )
        settings = [
            (
                label,
                resolve_args(args, **setting)
                if args is not None
                else resolve_args(config=config, **{**overrides, **setting}),
            )
            for label, setting in grid_settings(grid or {})
        ]
    if any(base.run.num_seeds != 1 for _, base in settings):
        raise UserError(
            "a sweep trains the seeds that --seeds names; for one batched run of them per setting give "
            "--batched, not --num-seeds"
        )
    if gpus_per_trial and not all(base.run.cuda for _, base in settings):
        raise UserError(
            "--gpus-per-trial gives each run a GPU to train on; drop --no-cuda or --gpus-per-trial"
        )
    out = os.path.abspath(output_dir or default_output_dir(settings[0][1].env.env_id))
    check_output_dir_free(out)
    threads = {"torch_threads": cpus_per_trial} if executor == "ray" else {}
    trials, groups = _plan_trials(settings, seed_list, out, threads, batched)
    plan = {
        "format": FORMAT,
        "version": VERSION,
        "title": run_title(settings[0][1]),
        "cpus_per_trial": cpus_per_trial,
        "gpus_per_trial": gpus_per_trial,
        "max_concurrent": max_concurrent,
        "executor": executor,
        "batched": batched,
        "trials": trials,
        **({"groups": groups} if batched else {}),
    }
    with files.lock_directory(
        out, "sweep directory", "--output-dir"
    ):  # removed again where made and left empty
        check_output_dir_free(out)  # again, held: of two sweeps started into it, the second finds it taken
        files.write_json(os.path.join(out, files.SWEEP_JSON), plan)
        try:
            # --quiet (every setting's) quiets what the sweep says of itself too
            loud = not all(base.run.quiet for _, base in settings)
            return _run(out, _located(plan, out), executor, address, max_concurrent, loud)
        except UserError:  # Ray was out of reach or has no node for a trial: refused before any trial ran
            os.remove(os.path.join(out, files.SWEEP_JSON))
            raise


def check_trial_resources(
    executor: str, cpus_per_trial: int, gpus_per_trial: float, max_concurrent: int | None
) -> None:
    """``sweep``'s CPUs, GPUs and concurrency per trial, refused in one line where they cannot be."""
    if cpus_per_trial < 1:
        raise UserError(f"cpus_per_trial must be a positive integer, got {cpus_per_trial}")
    if not gpus_per_trial >= 0:
        raise UserError(f"gpus_per_trial must be a non-negative number, got {gpus_per_trial}")
    if gpus_per_trial and executor != "ray":
        raise UserError(
            "--gpus-per-trial reserves GPUs for Ray trials; a local sweep's runs use a GPU where --cuda "
            "says so: drop --gpus-per-trial or give --executor ray"
        )
    if max_concurrent is not None and max_concurrent < 1:
        raise UserError(f"max_concurrent must be a positive integer or None (no limit), got {max_concurrent}")


def _seed_list(seeds: int | str | Iterable[int], batched: bool) -> list[int]:
    """``sweep``'s ``seeds`` as the seeds themselves: at least one, and consecutive where ``batched``."""
    if isinstance(seeds, int) and seeds < 1:
        raise UserError(
            f"seeds must be a positive count, or the seeds themselves (range(1, 11)), got {seeds}"
        )
    listed = (
        list(range(1, seeds + 1))
        if isinstance(seeds, int)
        else parse_seeds(seeds)
        if isinstance(seeds, str)
        else list(seeds)
    )
    if not listed:
        raise UserError("give at least one seed")
    if batched and listed != list(range(listed[0], listed[0] + len(listed))):
        raise UserError(
            f"--batched trains each setting's seeds S to S+N-1 as one run: give consecutive seeds in "
            f"order, such as {listed[0]}-{listed[0] + len(listed) - 1}, not {','.join(map(str, listed))}"
        )
    return listed


def _plan_trials(
    settings: list[tuple[str, PPOArgs]], seeds: list[int], out: str, threads: dict[str, Any], batched: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``sweep.json``'s trials (one per setting and seed) and, where ``batched``, its groups (one batched run per
    setting), each with its checked config. Every configuration is checked before the first run, so that bad
    input fails in a second, not after an hour, and leaves nothing behind."""
    trials: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    for label, base in settings:
        for seed in seeds:
            name = f"{_dir_name(label)}/seed{seed}" if batched else f"{_dir_name(label)}__seed{seed}"
            run = resolve_args(base, **threads, seed=seed, run_dir=os.path.join(out, name), quiet=True)
            config = run.validate().to_json()
            config["run"]["run_dir"] = name
            trials.append({"name": name, "setting": label, "seed": seed, "config": config})
        if batched:  # one seed is an ordinary run, in its seedS directory as a batched run's seeds are
            name = _dir_name(label) if len(seeds) > 1 else trials[-1]["name"]
            run = resolve_args(
                base,
                **threads,
                seed=seeds[0],
                num_seeds=len(seeds),
                run_dir=os.path.join(out, name),
                quiet=True,
            ).validate()
            check_seeds(run, None)
            config = run.to_json()
            config["run"]["run_dir"] = name
            groups.append({"name": name, "setting": label, "config": config})
    if len({t["name"] for t in trials}) < len(trials):
        raise UserError("two settings give the same run directory name; give each setting its own values")
    return trials, groups


def check_output_dir_free(out: str) -> None:
    """Refuse a sweep's or a search's ``out`` that holds anything but its lock."""
    if os.path.exists(out) and (not os.path.isdir(out) or set(os.listdir(out)) - {files.LOCK}):
        raise UserError(f"output directory {out!r} already exists and is not empty; give a new --output-dir")


def resume_sweep(
    output_dir: str,
    executor: str | None = None,
    address: str | None = None,
    max_concurrent: int | None = None,
    trust_code: bool = False,
) -> SweepResults:
    """Finish the sweep in ``output_dir``: trials that finished or failed are not run again, interrupted
    ones resume from their checkpoints, the others start. sweep.json's settings name no code that is imported
    unless ``trust_code`` (docs/SECURITY.md): registered env ids and proxima's own encoders need no switch."""
    path = os.path.join(output_dir, files.SWEEP_JSON)
    if not os.path.isdir(output_dir):
        raise UserError(
            f"sweep directory {output_dir!r} does not exist; give a directory written by proxima sweep"
        )
    with files.lock_directory(output_dir, "sweep directory", None):  # before the plan is read
        plan = read_plan(
            path, "sweep", VERSION, "run the sweep again, or finish it with the proxima that started it"
        )
        for trial in plan.get("trials", []) + plan.get("groups", []):
            trust.check_settings(path, PPOArgs.from_json(trial.get("config") or {}, path), trusted=trust_code)
        executor = executor or plan["executor"]
        executors.check_executor(executor, "this sweep")
        out = os.path.abspath(output_dir)
        return _run(out, _located(plan, out), executor, address, max_concurrent or plan["max_concurrent"])


def read_plan(path: str, kind: str, version: int, again: str) -> dict:
    """The plan in ``path`` (a sweep's, a search's), of this proxima's ``version``: before 1.0 a plan of another
    version is refused, not converted (``again``: what to do instead)."""
    plan = files.read_json(path)
    if plan.get("format") != f"proxima-{kind}":
        raise UserError(f"{path} is not a proxima {kind} plan")
    if plan.get("version") != version:
        raise UserError(
            f"{path} has {kind} plan version {plan.get('version')}; this proxima reads version {version} only ({again})"
        )
    return plan


def _located(plan: dict, out: str) -> dict:
    """``plan`` with each trial's run directory under ``out``, where the sweep lies now. A resume removes and
    writes what the plan names, and the report reads it: each name and run directory must lie inside ``out``,
    and no symbolic link in a run directory may lead out of it."""
    located = copy.deepcopy(plan)
    what = os.path.join(out, files.SWEEP_JSON)
    for trial in located["trials"] + located.get("groups", []):
        files.inside(out, trial["name"], what)  # the report's and Tune's folder names
        run = trial["config"]["run"]
        run["run_dir"] = files.inside(out, run["run_dir"], what)
        if os.path.isdir(run["run_dir"]):
            files.links_inside(run["run_dir"])
    return located


def _run(
    out: str,
    plan: dict,
    executor: str,
    address: str | None,
    max_concurrent: int | None,
    announce: bool = True,
) -> SweepResults:
    units = plan["groups"] if plan["batched"] else plan["trials"]
    todo = [t["config"] for t in units if trial_row(t["config"]["run"]["run_dir"]) is None]
    names = {t["config"]["run"]["run_dir"]: t["name"] for t in plan["trials"]}
    errors: dict[str, str] = {}

    def trial_name(trial) -> str:
        """A batched sweep's Tune trial's name and folder: a single seed's run directory (``setting/seedS``) is
        not named by its last component alone."""
        run_dir = trial.config["config"]["run"]["run_dir"]
        return next(u["name"] for u in units if u["config"]["run"]["run_dir"] == run_dir).replace("/", "__")

    def on_done(config: dict, error: str | None) -> None:
        for run_dir in _seed_dirs(config):
            if error is not None:
                errors[run_dir] = error
            row = trial_row(run_dir)
            if row is None and error is None:  # stopped by SIGTERM, with its checkpoint: --resume finishes it
                return
            row = row or {"status": "failed", "error": error}
            final = row.get("final_return")
            said = (
                f"failed: {row['error']}"
                if row["status"] == "failed"
                else "finished, final return "
                + ("none (no episode finished)" if final is None else f"{final:.1f}")
            )
            print(f"{names[run_dir]}: {said}", flush=True)

    if todo and executor == "ray":
        executors.run_ray(
            run_trial,
            todo,
            on_done,
            storage=out,
            cpus_per_trial=plan["cpus_per_trial"],
            max_concurrent=max_concurrent,
            address=address,
            gpus_per_trial=plan["gpus_per_trial"],
            worker_cpus=lambda config: config["env"]["rollout_workers"] * TRIAL_ACTOR_CPUS,
            name_of=trial_name if plan["batched"] else None,
            announce=announce,
        )
    elif todo:
        executors.run_local(run_trial, todo, on_done)
    return summarize(out, plan, errors)


def run_trial(
    config: dict,
    report: Callable[[dict], None] | None = None,
    node: str | None = None,
    stop: Callable[[], int | None] | None = None,
) -> dict:
    """Train, resume or skip one trial by what its run directory holds; return its row, also written to
    its ``trial.json``. proxima's own errors (a NaN, a crashed env) fail the trial with their one line.
    ``stop``: polled after each update; a signal number stops the run as that signal would (a checkpoint,
    then ``TrainingInterrupted``, and no ``trial.json``). A batched run's trial (``num_seeds`` > 1) writes
    each seed's row to the seed's ``trial.json`` too, and returns its own.

    The trial holds its run's directory from start to end; it waits a while for another holder to let go (a
    trial of the sweep killed before, whose Ray worker is not yet stopped) and, refused, writes no row: the
    sweep's ``--resume`` runs it again."""
    run_dir = config["run"]["run_dir"]
    with files.lock_directory(run_dir, instead=None, wait_s=files.WRITER_WAIT_S):
        row = trial_row(run_dir)
        if row is not None:
            return row
        batched = config["run"]["num_seeds"] > 1
        callbacks: list[Callback] = [MetricsToTune(report, batched)] if report is not None else []
        callbacks += [StopWhenAsked(stop)] if stop is not None else []
        ckpt = os.path.join(run_dir, files.CHECKPOINT)
        try:
            if os.path.exists(ckpt) and not checkpoint.finished(run_dir):
                # config.json names only what the plan does, which the user gave or --resume checked (docs/SECURITY.md)
                named = trust.names_of(PPOArgs.from_json(config))
                run_to_end(resuming(run_dir, quiet=True, callbacks=callbacks, named=named))
            elif not os.path.exists(ckpt):  # stopped before its first checkpoint: start again
                files.remove_stopped_run(run_dir, batched)
                train(PPOArgs.from_json(config), callbacks=callbacks)
            row = {"status": "finished"}
        except (NonFiniteError, EnvError, UserError) as e:
            row = {"status": "failed", "error": str(e)}
        seed_dirs = _seed_dirs(config)
        for seed_dir in seed_dirs:  # the group's row last: a kill before it leaves the trial to run again
            own = {"final_return": final_return(seed_dir)} if row["status"] == "finished" else {}
            os.makedirs(seed_dir, exist_ok=True)
            files.write_json(
                os.path.join(seed_dir, files.TRIAL_JSON),
                _finite({**row, **own, "wall_s": _elapsed(seed_dir), "node": node}),
            )
        if batched:
            files.write_json(
                os.path.join(run_dir, files.TRIAL_JSON),
                _finite({**row, "wall_s": _elapsed(seed_dirs[0]), "node": node}),
            )
        written = trial_row(run_dir)
        assert written is not None  # the row written just now
        return written


def _seed_dirs(config: dict) -> list[str]:
    """The run directories of a trial's seeds: its own, or a batched run's ``seedS``."""
    run = config["run"]
    if run["num_seeds"] == 1:
        return [run["run_dir"]]
    return [
        os.path.join(run["run_dir"], f"seed{s}") for s in range(run["seed"], run["seed"] + run["num_seeds"])
    ]


class MetricsToTune(Callback):
    """Hands each update's numbers to Ray Tune (``report``: the ``ray.tune.report`` that the Ray executor
    passes; the local executor passes none). A batched run reports each seed's in turn, with its ``seed``."""

    def __init__(self, report: Callable[[dict], None], batched: bool = False):
        self.report, self.batched = report, batched

    def on_update_end(self, run, result) -> None:
        numbers = {k: v for k, v in result.record.items() if isinstance(v, (int, float)) and v is not None}
        self.report({"seed": run.args.run.seed, **numbers} if self.batched else numbers)


class StopWhenAsked(Callback):
    """Stops the run after an update where ``stop()`` gives a signal number, as that signal would stop a plain
    run (``Checkpointing``): a Ray trial's process gets no signal of its own when its sweep is stopped."""

    def __init__(self, stop: Callable[[], int | None]):
        self.stop = stop

    def on_update_end(self, run, result) -> None:
        signum = self.stop()
        if signum is not None:
            next(c for c in run.callbacks if isinstance(c, Checkpointing)).interrupt(signum)


def summarize(out: str, plan: dict, errors: dict[str, str] | None = None) -> SweepResults:
    """Read every trial's ``trial.json``; write ``results.json``, ``results.md``, ``learning_curves.png`` and
    ``report.html`` (``proxima report``'s page of every run)."""
    rows = []
    for trial in plan["trials"]:
        run_dir = trial["config"]["run"]["run_dir"]
        status = trial_row(run_dir) or (
            {"status": "failed", "error": errors[run_dir]}
            if errors and run_dir in errors
            else {"status": "not run"}
        )
        rows.append(
            {
                "name": trial["name"],
                "setting": trial["setting"],
                "seed": trial["seed"],
                "run_dir": run_dir,
                **status,
            }
        )
    labels = list(dict.fromkeys(t["setting"] for t in plan["trials"]))
    settings = [_summary(label, [r for r in rows if r["setting"] == label]) for label in labels]
    finished = [r for r in rows if r["status"] == "finished"]
    groups = {label: [r["run_dir"] for r in finished if r["setting"] == label] for label in labels}
    groups = {label: runs for label, runs in groups.items() if runs}
    table = results_table(settings, rows, plan["title"])
    results = {"title": plan["title"], "settings": settings, "trials": rows}
    found, said = results_statistics(groups)
    if found is not None:
        results["statistics"] = found
    write_results(out, results, f"{table}\n{said}", bool(groups))
    if groups:
        try:
            plot_runs(groups, os.path.join(out, files.LEARNING_CURVES), title=plan["title"])
        except UserError as e:  # no matplotlib: the table and results.json are what matter
            print(f"note: no learning_curves.png: {e}", flush=True)
    return SweepResults(out, rows, settings)


def write_results(out: str, results: dict, table: str, trained: bool) -> None:
    """A sweep's or a search's ``results.json`` (NaN as null) and ``results.md``; where it trained any run,
    ``report.html`` (``proxima report``'s page of every run), a view of the runs: the tables are the result."""
    files.write_json(os.path.join(out, files.RESULTS_JSON), _finite(results))
    files.write_text(os.path.join(out, files.RESULTS_MD), table)
    if trained:
        try:
            write_report([out], os.path.join(out, files.REPORT))
        except (UserError, OSError) as e:
            print(f"note: no report.html: {e}", flush=True)


def _summary(label: str, rows: list[dict]) -> dict:
    finals = np.array([r["final_return"] for r in rows if r["status"] == "finished"], dtype=np.float64)
    finals = finals[np.isfinite(finals)]
    walls = [r["wall_s"] for r in rows if r.get("wall_s") is not None]
    return {
        "setting": label,
        "seeds": len(rows),
        "finished": sum(r["status"] == "finished" for r in rows),
        **{
            f"final_return_{name}": float(f(finals)) if len(finals) else None
            for name, f in (("mean", np.mean), ("std", np.std), ("min", np.min), ("max", np.max))
        },
        "wall_s_mean": float(np.mean(walls)) if walls else None,
    }


def results_table(settings: list[dict], rows: list[dict], title: str) -> str:
    lines = [
        *([title, ""] if title else []),
        "final return = mean return of a run's last 20 episodes; over the seeds that finished",
        "",
        "| setting | finished | final return, mean ± std | min – max | per seed | wall s per run (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for s in settings:
        per_seed = ", ".join(
            f"{r['final_return']:.1f}"
            if r["status"] == "finished" and r["final_return"] is not None
            else r["status"]
            for r in rows
            if r["setting"] == s["setting"]
        )
        if s["final_return_mean"] is None:
            stats = "–", "–"
        else:
            stats = (
                f"{s['final_return_mean']:.1f} ± {s['final_return_std']:.1f}",
                f"{s['final_return_min']:.1f} – {s['final_return_max']:.1f}",
            )
        wall = "–" if s["wall_s_mean"] is None else f"{s['wall_s_mean']:.1f}"
        lines.append(
            f"| {s['setting']} | {s['finished']}/{s['seeds']} | {stats[0]} | {stats[1]} | {per_seed} | {wall} |"
        )
    failed = [r for r in rows if r["status"] == "failed"]
    if failed:
        lines += ["", "Failed:", *(f"- {r['name']}: {r['error']}" for r in failed)]
    return "\n".join(lines) + "\n"


def default_output_dir(env_id: str, kind: str = "sweep") -> str:
    return os.path.join("runs", f"{kind}__{env_id.replace('/', '_').replace(':', '_')}__{int(time.time())}")


def trial_row(run_dir: str) -> dict | None:
    """A trial's ``trial.json`` (a sweep's: finished or failed; a search's: stopped too), or None if it has not
    ended."""
    path = os.path.join(run_dir, files.TRIAL_JSON)
    return files.read_json(path) if os.path.exists(path) else None


def _elapsed(run_dir: str) -> float | None:
    """Training time over every part of the run (a resumed run's clock goes on), from ``metrics.jsonl``."""
    try:
        lines = files.read_jsonl(os.path.join(run_dir, files.METRICS))
        return lines[-1]["time_s"] if lines else None
    except (UserError, KeyError):
        return None


def _finite(data):
    """NaN (a run with no finished episode) as JSON's null."""
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_finite(v) for v in data]
    return None if isinstance(data, float) and not np.isfinite(data) else data


def _dir_name(label: str) -> str:
    return label.replace("/", "_").replace(" ", "x").replace(",", "__")  # hidden_sizes=64 64: 64x64


def run_title(base: PPOArgs) -> str:
    return f"{base.env.env_id}, {base.algorithm.total_timesteps} env steps per run"
