"""``proxima solve ENV_ID``: train with the task's fast preset, then score it on Gymnasium's env."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import files
from proxima.base.errors import UserError
from proxima.commands import process_seconds
from proxima.commands.common import flag_value, parse_command


@dataclass(frozen=True)
class SolveFlags:
    """the task; every other flag is a `proxima train` flag, over the task's preset (`proxima presets NAME` shows it)"""

    task: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="ENV_ID")]
    """the env to solve: one of the tasks above"""


SOLVE_ABOUT = """Train ENV_ID with its fast preset, which stops once the deterministic policy reaches the task's score
on proxima's evaluation envs; then play {episodes} episodes of Gymnasium's own ENV_ID and print the time, the steps
and the score. Exit status 0 when that score reaches the task's threshold, 1 when it does not.

tasks (preset, threshold):
{tasks}"""


def run(argv: list[str]) -> int:
    from proxima.base.files import read_json
    from proxima.run.config import read_preset, solve_presets
    from proxima.run.evaluate import evaluate, save_evaluation
    from proxima.run.loop import default_run_dir
    from proxima.scale.trainer import train

    presets = solve_presets()
    tasks = {env_id: read_preset(name) | {"name": name} for env_id, name in presets.items()}
    rows = [f"  {e:26s} {t['name']:28s} {t['solve']['threshold']:g}" for e, t in tasks.items()]
    about = SOLVE_ABOUT.format(episodes=SOLVE_EPISODES, tasks="\n".join(rows))
    env_id = argv[0] if argv and not argv[0].startswith("-") else None
    if env_id is not None and env_id not in tasks:
        raise UserError(f"no solve preset for {env_id!r}; accepted: {', '.join(tasks)}")
    for flag in ("--config", "--env-id", "--env-factory", "--resume"):
        if flag_value(argv, flag) is not None:
            raise UserError(
                f"proxima solve sets {flag} itself (from ENV_ID); give it to proxima train instead"
            )
    preset = tasks[env_id]["name"] if env_id is not None else None
    hidden = ("env_id", "env_factory")
    flags, args = parse_command(
        argv, "proxima solve", SolveFlags, instructions=(), preset=preset, description=about, hidden=hidden
    )
    if flags.task != env_id:  # the preset is read before the flags: the task comes first
        raise UserError(f"give ENV_ID first: proxima solve {flags.task} [TRAIN FLAGS]")
    task = tasks[flags.task]
    if args.run.num_seeds > 1:
        raise UserError(
            "proxima solve trains and scores one seed; for many, proxima train --config PRESET --num-seeds N"
        )
    args = args.replace(run_dir=args.run.run_dir or default_run_dir(args))
    agent = train(args)
    assert not isinstance(agent, list), "one seed: refused above"
    trained = process_seconds()
    steps = read_json(os.path.join(args.run.run_dir, files.AGENT_JSON))["global_step"]
    scored = ""
    best = os.path.join(args.run.run_dir, files.BEST)
    if args.run.save_best and os.path.isdir(best):  # PPO's policy can get worse late in a run: score the best
        from proxima.run.agent import load

        agent, meta = load(best), read_json(os.path.join(best, files.AGENT_JSON))
        chosen = "the best of the evaluations during training"
        if "rescore_return" in meta:
            chosen = f"the highest of the {len(meta['rescored'])} best evaluations rescored on {meta['rescore_episodes']} episodes"
        scored = f" (scored: {best}, {chosen}, from step {meta['global_step']:,})"
    deterministic = task["solve"].get("deterministic", True)
    returns = evaluate(agent, SOLVE_EPISODES, deterministic=deterministic, seed=args.run.seed)
    threshold = task["solve"]["threshold"]
    solved = returns.mean() >= threshold
    print(
        f"{env_id} {'solved' if solved else 'NOT solved'}: {returns.mean():.1f} ± {returns.std():.1f} over "
        f"{SOLVE_EPISODES} {'deterministic' if deterministic else 'sampled'} episodes of Gymnasium's env "
        f"(threshold {threshold:g}), after {steps:,} steps{scored}; trained in {trained:.1f} s from process start "
        f"({process_seconds():.1f} s with the evaluation); run directory: {args.run.run_dir}",
        flush=True,
    )  # before solve.json, whose write may fail
    save_evaluation(
        args.run.run_dir,
        returns,
        deterministic=deterministic,
        seed=args.run.seed,
        into=files.SOLVE_JSON,  # a later proxima eval, of a few episodes maybe, keeps to eval.json
        threshold=threshold,
        solved=bool(solved),
    )
    return 0 if solved else 1


SOLVE_EPISODES = 100
