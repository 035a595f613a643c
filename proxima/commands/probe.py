"""``proxima probe``: train the agent on the probe envs and name the component a failure points to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import tyro

from proxima.base.errors import UserError
from proxima.commands.common import flag_value, parse_command

if TYPE_CHECKING:  # imported lazily at run time: the CLI starts fast
    from proxima.run.config import PPOArgs


@dataclass(frozen=True)
class ProbeFlags:
    """which probes; every other flag is a `proxima train` flag (proxima train --help), --total-timesteps and --run-dir as below"""

    probes: Annotated[tuple[str, ...], tyro.conf.arg(metavar="NAME [NAME ...]")] = ()
    """which probes to run (none given: those that apply: the image probes for an agent whose env gives images, as --config atari's; the coordination and central-critic probes for a multi-agent one, as --algo ippo or mappo; the others for any other agent, and the memory probe for a recurrent one)"""


PROBE_ABOUT = """Trains the agent that `proxima train` would build with the same flags (--algo, --config,
--learning-rate, ...) on each probe env, prints what each one expects and what was learned, and names the
component a failure points to. Exit status 1 if a probe fails.

--total-timesteps gives every probe one budget (default: each probe's own, set for the PPO tutorial's 16 gradient
steps per 512 samples; vpg and reinforce take 1 and need more); --run-dir DIR keeps each probe's run in
DIR/probe-NAME (default: deleted). Every other flag is a `proxima train` flag: see proxima train --help."""


def run(argv: list[str]) -> int:
    from proxima.scale.probe import PROBE_NAMES, print_table, run_probes

    flags, args = parse_command(argv, "proxima probe", ProbeFlags, description=PROBE_ABOUT)
    names = list(flags.probes) or None
    unknown = [n for n in names or () if n not in PROBE_NAMES]
    if unknown:
        raise UserError(f"unknown probe {unknown[0]!r}; accepted: {', '.join(PROBE_NAMES)}")
    if flag_value(argv, "--env-id") is not None:
        raise UserError("proxima probe chooses the envs itself; drop --env-id")
    timesteps = args.algorithm.total_timesteps if flag_value(argv, "--total-timesteps") is not None else None
    results = run_probes(
        args, names, timesteps, run_dir=args.run.run_dir, norm_value=_asked_norm_value(args, argv)
    )
    print_table(results, args)
    return 1 if any(r.passed is False for r in results) else 0


def _asked_norm_value(args: PPOArgs, argv: list[str]) -> bool | None:
    """``args.network.norm_value`` where the flags or the preset set it, else None: ``PPOArgs``' default is not a
    choice of the user's, and ``run_probes`` trains seed 000's critic unless asked."""
    from proxima.run.config import load_preset

    config = flag_value(argv, "--config")
    asked = any(a.split("=")[0] in ("--norm-value", "--no-norm-value") for a in argv)
    return args.network.norm_value if asked or (config and "norm_value" in load_preset(config)) else None
