"""``proxima train``: train an agent, or continue one (``--resume``, ``--resume-if-exists``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import trust
from proxima.commands.argv import helping, parse
from proxima.commands.common import flag_value, parse_command, refuse_beside_resume, with_module_functions


@dataclass
class ResumeArgs:  # their help is train's: the settings' own, and --resume's
    resume: str
    quiet: bool = False
    total_timesteps: int | None = None
    torch_threads: int | None = None
    trust_code: bool = False
    env_id: str | None = None
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    actor_critic: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    algo: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    advantages: Annotated[str | None, tyro.conf.arg(metavar="MODULE:FUNCTION")] = None
    policy_loss: Annotated[str | None, tyro.conf.arg(metavar="MODULE:FUNCTION")] = None
    value_loss: Annotated[str | None, tyro.conf.arg(metavar="MODULE:FUNCTION")] = None
    entropy_loss: Annotated[str | None, tyro.conf.arg(metavar="MODULE:FUNCTION")] = None


@dataclass(frozen=True)
class TrainFlags:
    """for jobs that a scheduler may start again (docs/SCALING.md)"""

    resume_if_exists: bool = False
    """start the run in --run-dir, or continue it from its checkpoint there if it has one (with its config.json's settings; given settings that differ are named and ignored), or do nothing if it finished; the same command line for every start of a SLURM or Kubernetes job"""


# the flags that name code again, or trust it, which a resume takes beside its own (docs/SECURITY.md)
_NAMING_FLAGS = (
    trust.TRUST_FLAG,
    "--no-trust-code",
    *("--" + name.replace("_", "-") for name in trust.SETTINGS),
)


def run(argv: list[str]) -> int:
    from proxima.run.loop import run_to_end
    from proxima.scale.distributed import refuse_unasked
    from proxima.scale.trainer import resuming, train

    if flag_value(argv, "--resume") is not None and not helping(argv):  # train's help lists --resume too
        refuse_beside_resume(
            argv,
            "proxima train",
            ("--quiet", "--no-quiet", "--total-timesteps", "--torch-threads", *_NAMING_FLAGS),
            f"--quiet, --total-timesteps, --torch-threads, {trust.TRUST_FLAG} and the run's own --env-id, "
            "--env-factory, --encoder, --actor-critic, --algo and functions (--advantages, --policy-loss, "
            "--value-loss, --entropy-loss)",
            "the run's config.json holds its settings",
        )
        args = parse(ResumeArgs, with_module_functions(argv), "proxima train")
        named = {name: getattr(args, name) for name in trust.SETTINGS if getattr(args, name) is not None}
        run_to_end(
            resuming(
                args.resume,
                quiet=args.quiet,
                total_timesteps=args.total_timesteps,
                torch_threads=args.torch_threads,
                trust_code=args.trust_code,
                named=named,
            )
        )
    else:
        flags, args = parse_command(argv, "proxima train", TrainFlags, instructions=("config", "resume"))
        refuse_unasked(args)
        train(args, resume_if_exists=flags.resume_if_exists)
    return 0
