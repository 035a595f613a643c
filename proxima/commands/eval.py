"""``proxima eval RUN_DIR``: evaluate a trained agent on Gymnasium's own env, or against a fixed player."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.base import files, trust
from proxima.base.errors import UserError
from proxima.commands.argv import parse


@dataclass
class EvalArgs:
    run_dir: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """the run directory written by `proxima train`"""
    episodes: int = 10
    """how many complete episodes to run"""
    deterministic: bool = False
    """take the most probable action instead of sampling"""
    seed: int = 0
    """seed of the evaluation envs"""
    video: bool = False
    """record every episode as an MP4 into RUN_DIR/eval-videos, replacing the last evaluation's (needs the video
    extra); the episodes then run one after another on one env, which plays other episodes than 16 envs would,
    so the returns differ from those without it"""
    video_episodes: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """with --video: record N of the episodes, running the evaluation on fewer envs so that env 0 plays N
    (default: all of them, on one env)"""
    env_id: str | None = None
    """evaluate on this env instead of the run's: an id, or module:EnvName-v0 to import module first (the run's
    env kwargs still apply unless --env-kwargs is given)"""
    env_kwargs: Annotated[dict | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON, instead of the run's: --env-kwargs '{"size": 8}'"""
    opponent: Annotated[str | None, tyro.conf.arg(metavar="random|lookahead")] = None
    """a self-play agent (selfplay: ids): play the episodes against this fixed player, half of them in each
    seat, and print the win, draw and loss rates (docs/MULTIAGENT.md)"""
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    """evaluate on the env this class or function makes (the run's env kwargs still apply): the run's own
    factory named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this encoder class: the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    actor_critic: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this actor-critic class (--actor-critic): the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    trust_code: bool = False
    """import the code that the run's files name (an env factory, a module:ID env id, an encoder or actor-critic class) without its being named again; only for files you trust (docs/SECURITY.md)"""


def run(argv: list[str]) -> int:
    from proxima.envs.registry import FEATURES
    from proxima.envs.selfplay import is_selfplay_id
    from proxima.run.agent import load
    from proxima.run.evaluate import evaluate, save_evaluation

    args = parse(EvalArgs, argv, "proxima eval")
    if args.env_factory is not None and args.env_id is not None:
        raise UserError("give the env once: --env-id or --env-factory, not both")
    trust.remember("env_id", args.env_id)  # typed: the user's own
    trust.remember("env_factory", args.env_factory)
    agent = load(
        args.run_dir, encoder=args.encoder, actor_critic=args.actor_critic, trust_code=args.trust_code
    )
    env = None
    if args.env_factory is not None and args.env_factory != agent.env_source.get("env_factory"):
        from proxima.envs.user import load_env_factory

        env = load_env_factory(args.env_factory, "--env-factory")  # another env: its own kwargs only
    if args.opponent is not None:
        return _eval_against(agent, args)
    if is_selfplay_id(agent.env_id) and args.env_id is None:
        raise UserError(f"{agent.env_id} is played against an opponent: give --opponent random|lookahead")
    if args.video_episodes is not None and not args.video:
        raise UserError("--video-episodes says how many episodes --video records: give --video too")
    # recorded apart, then put in the place of the last evaluation's videos: none of those, and no part of an
    # evaluation that failed, are taken for this one's
    staging = None
    if args.video:  # checked before the episodes are played: a run directory that takes no videos
        with files.writing(os.path.join(args.run_dir, files.EVAL_VIDEOS), None):
            staging = tempfile.mkdtemp(prefix=f".{files.EVAL_VIDEOS}-", dir=args.run_dir)
    # a folder that does not exist yet: Gymnasium's recorder warns of one that does
    video_dir = os.path.join(staging, files.EVAL_VIDEOS) if staging else None
    try:
        returns = evaluate(
            agent,
            args.episodes,
            deterministic=args.deterministic,
            seed=args.seed,
            video_dir=video_dir,
            # every episode by default: --video --episodes 5 films 5, not env 0's share of 5 envs' (one)
            video_episodes=args.episodes
            if args.video and args.video_episodes is None
            else args.video_episodes,
            env_id=args.env_id,
            env_kwargs=args.env_kwargs,
            env=env,
        )
    except BaseException as e:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, UserError):  # a backend that cannot record names train's flag; eval's is --video
            raise UserError(str(e).replace(FEATURES["video"], "--video")) from None
        raise
    if staging is not None:
        recorded = os.path.join(staging, files.EVAL_VIDEOS)
        video_dir = os.path.join(args.run_dir, files.EVAL_VIDEOS)
        shutil.rmtree(video_dir, ignore_errors=True)
        os.makedirs(recorded, exist_ok=True)  # a recorder that makes its folder with its first video only
        os.rename(recorded, video_dir)
        os.rmdir(staging)
    videos = sorted(f for f in os.listdir(video_dir) if f.endswith(".mp4")) if video_dir else []
    shown = [os.path.join(video_dir, f) for f in videos] if video_dir else []
    # the score first: a run directory that takes no eval.json (read-only, full) loses nothing of it
    print(
        f"{args.env_id or agent.env_id}: mean_return={returns.mean():.2f} std_return={returns.std():.2f} "
        f"episodes={len(returns)} deterministic={args.deterministic}",
        flush=True,
    )
    if videos:
        print(f"videos: {', '.join(shown)}", flush=True)
    # on another env than the run's, eval.json says which, and the report shows it beside the score
    other = {"env_id": args.env_id} if args.env_id not in (None, agent.env_id) else {}
    other |= {"env_kwargs": args.env_kwargs} if args.env_kwargs else {}
    save_evaluation(
        args.run_dir,
        returns,
        deterministic=args.deterministic,
        seed=args.seed,
        videos=[os.path.join(files.EVAL_VIDEOS, f) for f in videos],
        **other,
    )
    return 0


def _eval_against(agent, args: EvalArgs) -> int:
    from proxima.run.evaluate import save_evaluation
    from proxima.run.selfplay import play_against

    if args.video or args.env_id or args.env_kwargs is not None:
        raise UserError("--opponent plays the agent's own game: drop --video, --env-id and --env-kwargs")
    assert args.opponent is not None  # run() calls this with --opponent only
    returns, summary = play_against(
        agent, args.opponent, args.episodes, seed=args.seed, deterministic=args.deterministic
    )
    seats = ", ".join(
        f"{name} seat {s['win_rate']:.1%} of {s['games']}" for name, s in summary["by_seat"].items()
    )
    print(
        f"{agent.env_id} against {args.opponent}: win_rate={summary['win_rate']:.3f} "
        f"draw_rate={summary['draw_rate']:.3f} loss_rate={summary['loss_rate']:.3f} episodes={len(returns)} "
        f"deterministic={args.deterministic} (wins: {seats})"
    )
    tactics = summary.get("tactics")
    if tactics:
        print(
            f"immediate wins taken: {tactics['win_taken_rate']:.1%} of {tactics['wins']}; the opponent's immediate "
            f"wins blocked (where it had none): {tactics['blocked_rate']:.1%} of {tactics['threats']}"
        )
    sys.stdout.flush()  # the score is out before eval.json is written, which may fail
    save_evaluation(args.run_dir, returns, deterministic=args.deterministic, seed=args.seed, **summary)
    return 0
