"""Helpers the commands share: a flag's value, the train flags composed with a command's own, the results of a sweep."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import tyro

from proxima.base import files, trust
from proxima.base.errors import TrainingInterrupted, UserError
from proxima.commands.argv import parse

if TYPE_CHECKING:  # imported lazily at run time: the CLI starts fast
    from proxima.run.config import PPOArgs


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in ``argv`` (the last one wins), else None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.partition("=")[2]
    return value


# The flags that say what a run starts from rather than set anything (not PPOArgs' fields): (metavar, help).
INSTRUCTION_FLAGS = {
    "config": (
        "NAME|FILE",
        "a preset (`proxima presets` lists them), a JSON file of settings, or a run's config.json (all its "
        "settings but its run directory): its values replace the defaults shown here, and the other flags "
        "override them",
    ),
    "resume": (
        "RUN_DIR",
        "continue the interrupted run in RUN_DIR from its last checkpoint, with its saved settings; only "
        "--quiet, --total-timesteps N (continue it, finished or not, to N steps) and --torch-threads N (another "
        "thread count, which rounds differently) may be given with it, and --trust-code or the run's own "
        "--env-id, --env-factory and --encoder named again, to import the code its files name (docs/SECURITY.md)",
    ),
}


def command_flags(defaults: PPOArgs, instructions: dict[str, str | None], own: type | None = None):
    """A dataclass of a command's own flags (``own``, a dataclass named after the command), of ``PPOArgs``'
    groups and of the ``instructions``: one ``--help`` section each, titled by its docstring, with
    ``defaults`` as the settings' defaults, so that ``--help`` shows the values a run would get. The flags are
    flat (``--env-id``): ``parse`` puts the dataclass under ``OmitArgPrefixes``."""
    from proxima.run.config import GROUPS

    instruction_fields = [
        (
            n,
            Annotated[
                str | None, tyro.conf.arg(metavar=INSTRUCTION_FLAGS[n][0], help=INSTRUCTION_FLAGS[n][1])
            ],
            dataclasses.field(default=value),
        )
        for n, value in instructions.items()
    ]
    made = dataclasses.make_dataclass("instructions", instruction_fields, frozen=True)
    made.__doc__ = "what to start from, rather than settings"
    groups = [(g, cls, dataclasses.field(default=getattr(defaults, g))) for g, cls in GROUPS.items()]
    mine = [(own.__name__.lower().removesuffix("flags"), own)] if own is not None else []
    return dataclasses.make_dataclass(
        "flags", [*mine, *groups, ("instructions", made, dataclasses.field(default_factory=made))]
    )


def parse_command(
    argv: list[str],
    prog: str,
    own: type | None = None,
    instructions: tuple[str, ...] = ("config",),
    preset: str | None = None,
    description: str | None = None,
    hidden: tuple[str, ...] = (),
):
    """``(own flags, PPOArgs)`` of a command that takes the train flags beside its own (``own``: a dataclass,
    or None), through ``parse``. The settings are layered on the ``--algo`` defaults and the ``--config``
    preset (else ``preset``), read first, so that the preset's values become the defaults ``--help`` shows
    and explicit flags override them. ``instructions`` are the instruction flags accepted beside the settings;
    ``hidden``, the settings the command sets itself (``parse``)."""
    from proxima.run.config import GROUPS, PPOArgs, resolve_args

    given = {name: flag_value(argv, "--" + name) for name in instructions}
    algo = flag_value(argv, "--algo")
    config = given.get("config") or preset
    named = {name: flag_value(argv, "--" + name.replace("_", "-")) for name in trust.SETTINGS}  # typed again
    chosen: dict[str, Any] = {"algo": algo} if algo is not None else {}
    defaults = resolve_args(config=config, named=named, **chosen)
    parsed = parse(command_flags(defaults, given, own), argv, prog, description, hidden)
    args = PPOArgs(**{g: getattr(parsed, g) for g in GROUPS})
    return (getattr(parsed, dataclasses.fields(parsed)[0].name) if own is not None else None), args


def parse_train_args(argv: list[str]) -> PPOArgs:
    """``PPOArgs`` from ``proxima train``'s flags (``parse_command`` without flags of its own)."""
    return parse_command(argv, "proxima train", instructions=("config", "resume"))[1]


def refuse_beside_resume(
    argv: list[str], prog: str, accepted: tuple[str, ...], said: str, holds: str
) -> None:
    """A ``UserError`` for the first flag beside ``--resume`` that is not ``accepted`` (``said``: those flags in
    words): what resumes keeps its settings, which its file holds (``holds``)."""
    extra = [
        a.split("=")[0] for a in argv if a.startswith("-") and a.split("=")[0] not in ("--resume", *accepted)
    ]
    if extra:
        raise UserError(
            f"with --resume, only {said} may be given, not {extra[0]}: {holds} (see {prog} --help)"
        )


def print_results(results, command: str) -> int:
    """The table and where it is; exit status 1 if a run failed (each failure was said as it happened)."""
    out = results.output_dir
    print(f"\n{results}", end="")
    written = [
        f"{out}/{f}"
        for f in (files.RESULTS_MD, files.RESULTS_JSON, files.LEARNING_CURVES, files.REPORT)
        if os.path.exists(f"{out}/{f}")
    ]
    print(f"wrote {', '.join(written)}")
    failed = sum(t["status"] == "failed" for t in results.trials)
    missing = sum(t["status"] == "not run" for t in results.trials)
    if failed or missing:
        said = ", ".join(f"{n} {what}" for n, what in ((failed, "failed"), (missing, "did not run")) if n)
        print(
            f"proxima {command}: of {len(results.trials)} runs, {said} (see {out}/results.md)",
            file=sys.stderr,
        )
    return 1 if failed or missing else 0


def sets_itself(argv: list[str], command: str, instead: dict[str, str]) -> None:
    """A ``UserError`` where ``argv`` gives a flag that ``proxima COMMAND`` sets for each of its runs (``instead``:
    each such flag and the command's own flag to give instead)."""
    for flag, own in instead.items():
        if flag_value(argv, flag) is not None:
            raise UserError(f"proxima {command} sets {flag} of each run; give {own} instead")


# What finishes a sweep, a comparison (a sweep over algorithms) or a search that was stopped, and what it is called
_FINISHED_BY = {"sweep": ("sweep", "sweep"), "compare": ("sweep", "compare"), "tune": ("tune", "search")}


def interrupted(e: TrainingInterrupted, command: str, out: str) -> int:
    """Ctrl-C or SIGTERM in a sweep's, a comparison's or a search's run (each running trial checkpointed): how to
    finish the whole (not a run alone), and exit status 130 or 143."""
    by, what = _FINISHED_BY[command]
    print(f"proxima {command}: {e}; finish the {what} with: proxima {by} --resume {out}", file=sys.stderr)
    return e.exit_status
