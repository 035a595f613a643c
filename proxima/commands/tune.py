"""``proxima tune``: search settings on Ray Tune (random or Optuna search, ASHA or PBT)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import trust
from proxima.base.errors import TrainingInterrupted, UserError
from proxima.commands.common import interrupted, parse_command, refuse_beside_resume, sets_itself


@dataclass(frozen=True)
class TuneFlags:
    """the search; every other flag is a `proxima train` flag (proxima train --help), the base of every sample"""

    space: Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=KIND:...")] = ()
    """one setting and its distribution, repeatable: --space learning_rate=loguniform:1e-5:1e-2 --space ent_coef=uniform:0:0.05 --space num_minibatches=choice:4,8,16 (also randint:LOW:HIGH, both ends included); values are read as the train flag reads them"""
    search: Annotated[str, tyro.conf.arg(metavar="random|optuna")] = "random"
    """random: Tune's random search; optuna: Tune's Optuna searcher (TPE)"""
    num_samples: int = 8
    """how many settings to draw"""
    metric: Annotated[str, tyro.conf.arg(metavar="final_eval|return|eval_return")] = "final_eval"
    """final_eval: the deterministic policy on --eval-episodes episodes at the final budget (and at each ASHA rung or PBT interval); return: mean return of the last 20 episodes; eval_return: the last evaluation of --eval-every"""
    mode: Annotated[str, tyro.conf.arg(metavar="max|min")] = "max"
    """whether a higher or a lower metric is better"""
    seeds: int = 1
    """seeds per sample (from --seed on), trained in lockstep; a sample's score is their interquartile mean (IQM: the mean for up to 3 seeds)"""
    scheduler: Annotated[str, tyro.conf.arg(metavar="fifo|asha|pbt")] = "fifo"
    """fifo: every sample to its end; asha: stop samples behind at ASHA's rungs; pbt: population-based training (perturbs learning_rate, ent_coef, clip_coef)"""
    perturbation_interval: int | None = None
    """pbt: updates between perturbations (default: an eighth of the run)"""
    cpus_per_trial: int = 1
    """CPUs Ray gives each sample; its torch threads equal them"""
    gpus_per_trial: float = 0
    """GPUs Ray gives each sample (a fraction shares one); with any, its runs train on CUDA"""
    max_concurrent: int | None = None
    """at most N samples at once (default: as many as the CPUs allow)"""
    address: str | None = None
    """join a running Ray cluster: auto, or ray://HOST:10001 (default: a new local Ray instance); every node must see the tune directory"""
    output_dir: str | None = None
    """the tune directory (default: runs/tune__{env}__{unix time})"""
    resume: Annotated[str | None, tyro.conf.arg(metavar="TUNE_DIR")] = None
    """finish a search that was stopped: ended samples are kept, interrupted ones resume from their checkpoints, the rest are drawn; only --address and --trust-code may be given with it"""
    trust_code: bool = False
    """with --resume: import the code that tune.json names (an env factory, a module:ID env id, an encoder class); only for files you trust (docs/SECURITY.md)"""


TUNE_ABOUT = """Searches the --space for the settings that score best: each sample is one Ray Tune trial that trains
--seeds seeds of it as ordinary `proxima train` runs under the tune directory. Writes results.md (the samples
ranked by the IQM of their seeds' scores, each with its 95% CI), results.json, report.html and best.json, the
best settings as a preset for `proxima train --config TUNE_DIR/best.json`. Exit status 1 if no sample finished."""


def run(argv: list[str]) -> int:
    from proxima.scale.sweeps import default_output_dir
    from proxima.scale.tuning import parse_space_item, resume_tune, tune

    flags, base = parse_command(argv, "proxima tune", TuneFlags, description=TUNE_ABOUT)
    if flags.resume is not None:
        said = "--address and --trust-code"
        refuse_beside_resume(
            argv, "proxima tune", ("--address", trust.TRUST_FLAG), said, "tune.json holds the rest"
        )
        try:
            return _tune_done(resume_tune(flags.resume, flags.address, trust_code=flags.trust_code))
        except TrainingInterrupted as e:
            return interrupted(e, "tune", flags.resume)
    sets_itself(argv, "tune", {"--run-dir": "--output-dir"})

    def read(name: str, text: str):  # as the train flag reads it, on the command line's other settings
        flag = "--" + name.replace("_", "-")
        return parse_command([*argv, flag, *text.split()], "proxima tune", TuneFlags)[1].flat()[name]

    space = dict(parse_space_item(item, read) for item in flags.space)
    if len(space) < len(flags.space):
        raise UserError("--space names a setting twice; give each setting once")
    out = flags.output_dir or default_output_dir(base.env.env_id, "tune")
    try:
        results = tune(
            base,
            space={
                n: ":".join(map(str, spec)) if spec[0] != "choice" else spec[1] for n, spec in space.items()
            },
            search=flags.search,
            num_samples=flags.num_samples,
            metric=flags.metric,
            mode=flags.mode,
            seeds=flags.seeds,
            scheduler=flags.scheduler,
            perturbation_interval=flags.perturbation_interval,
            cpus_per_trial=flags.cpus_per_trial,
            gpus_per_trial=flags.gpus_per_trial,
            max_concurrent=flags.max_concurrent,
            address=flags.address,
            output_dir=out,
        )
    except TrainingInterrupted as e:
        return interrupted(e, "tune", out)
    return _tune_done(results)


def _tune_done(results) -> int:
    out = results.output_dir
    print(f"\n{results}", end="")
    if results.best_preset is None:
        print(f"proxima tune: no sample finished (see {out}/results.md)", file=sys.stderr)
        return 1
    print(
        f"wrote {out}/results.md, {out}/results.json, {out}/report.html; the best settings: {results.best_preset} "
        f"(proxima train --config {results.best_preset})"
    )
    return 0
