"""``proxima check-env ENV_ID``: check that proxima will train on an env, and say what it makes of it."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base.errors import UserError
from proxima.commands.argv import parse
from proxima.commands.common import flag_value
from proxima.run.config import POSITIVE_INT


@dataclass
class CheckEnvArgs:
    env_id: Annotated[str | None, tyro.conf.Positional, tyro.conf.arg(metavar="ENV_ID")] = None
    """a registered id, or module:EnvName-v0 to import module (from the working directory too) first; --env-id
    ENV_ID, as train takes it, too"""
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    """instead of ENV_ID: the class or function that makes one env, as `proxima train --env-factory` takes it
    (a gymnasium.Env, or a PettingZoo ParallelEnv)"""
    env_kwargs: Annotated[dict | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON: --env-kwargs '{"size": 8}'"""
    num_envs: Annotated[int, POSITIVE_INT] = 4
    """the env count at which to choose the backend and take the random steps"""


def run(argv: list[str]) -> int:
    """Exit status 0 when proxima will train on the env, 2 when it will not (each problem on one line)."""
    from proxima.envs.user import load_env_factory
    from proxima.run.checkenv import check_env

    env_id = flag_value(argv, "--env-id")  # train's spelling of ENV_ID: a user checks what they will train
    if env_id is not None:
        at = next(i for i, a in enumerate(argv) if a.split("=")[0] == "--env-id")
        argv = [*argv[:at], env_id, *argv[at + (1 if "=" in argv[at] else 2) :]]
    args = parse(CheckEnvArgs, argv, "proxima check-env")
    if (args.env_id is None) == (args.env_factory is None):
        raise UserError("give the env to check: an ENV_ID, or --env-factory MODULE:NAME (not both)")
    source = args.env_id or load_env_factory(args.env_factory, "--env-factory")
    name = args.env_id or args.env_factory
    report, warnings, problems = check_env(source, args.env_kwargs, args.num_envs)
    print(f"{name}:")
    for line in report:
        print(f"  {line}")
    for line in warnings:
        print(f"warning: {line}")
    for line in problems:
        print(f"proxima check-env: error: {line}", file=sys.stderr)
    if problems:
        return 2
    flag = f"--env-id {name}" if args.env_id else f"--env-factory {name}"
    if args.env_kwargs:
        flag += f" --env-kwargs {shlex.quote(json.dumps(args.env_kwargs))}"
    print(f"proxima will train on {name} (proxima train {flag})")
    return 0
