"""The ``proxima`` command and its subcommands (``USAGE``).

Every command's flags are a dataclass parsed by ``proxima.argv.parse`` (tyro): ``EvalArgs``,
``ExportArgs``, ... and, for the commands that train (train, probe, solve, sweep), the command's own flags
composed with ``PPOArgs``' groups by ``parse_command``. So ``--help`` is their field docs, and every user error
becomes one line on stderr and exit status 2 (``PROXIMA_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import dataclasses
import difflib
import errno
import gc
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import tyro

from proxima import files, trust
from proxima.argv import debug, field_docs, helping, in_flags, parse
from proxima.errors import (
    DiskFullError,
    EnvError,
    FileAccessError,
    NonFiniteError,
    TrainingInterrupted,
    UserError,
)

if TYPE_CHECKING:  # imported lazily at run time: the CLI starts fast
    from proxima.config import PPOArgs

STARTED = time.perf_counter()  # where the process's own start time cannot be read


def _process_seconds() -> float:
    """Seconds since this process started (Linux: from /proc, so the interpreter's and torch's start-up count,
    as in benchmarks/solve_suite.py); elsewhere since this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - STARTED


USAGE = """usage: proxima COMMAND [FLAGS]

commands:
  train   train an agent (proxima train --help lists every flag)
  eval    evaluate a trained agent on Gymnasium's own env (proxima eval --help)
  compare train several algorithms over several seeds and plot their learning curves (proxima compare --help)
  sweep   train every combination of settings and seeds, on Ray Tune by default (proxima sweep --help)
  tune    search settings on Ray Tune: random or Optuna search, ASHA or PBT (proxima tune --help)
  plot    overlay the learning curves of runs: proxima plot RUN_DIR... --output FILE.png
  probe   train the agent on the probe envs and name the component a failure points to (proxima probe --help)
  solve   train ENV_ID with its fast preset until solved, then score it on Gymnasium's env (proxima solve --help)
  report  one self-contained HTML page of runs, a sweep or a comparison: proxima report RUN_DIR... (--help)
  presets list the presets that `proxima train --config NAME` accepts; `proxima presets NAME` shows one
  export  write a trained agent's deterministic policy as one ONNX or TorchScript file (proxima export --help)
  check-env  check that proxima will train on ENV_ID (or module:ID) and say what it will make of it

proxima --version prints the version.
"""


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in ``argv`` (the last one wins), else None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.partition("=")[2]
    return value


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
    """record env 0's episodes as MP4 into RUN_DIR/eval-videos, replacing the last evaluation's (needs the
    video extra)"""
    video_episodes: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """with --video: record N episodes, running the evaluation on fewer envs so that env 0 plays them (without
    it: env 0's share of --episodes over up to 16 envs); fewer envs play other episodes, so the returns differ
    from those without it"""
    env_id: str | None = None
    """evaluate on this env instead of the run's: an id, or module:EnvName-v0 to import module first (the run's
    env kwargs still apply unless --env-kwargs is given)"""
    env_kwargs: Annotated[str | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON, instead of the run's: --env-kwargs '{"size": 8}'"""
    opponent: Annotated[str | None, tyro.conf.arg(metavar="random|lookahead")] = None
    """a self-play agent (selfplay: ids): play the episodes against this fixed player, half of them in each
    seat, and print the win, draw and loss rates (docs/MULTIAGENT.md)"""
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    """evaluate on the env this class or function makes (the run's env kwargs still apply): the run's own
    factory named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this encoder class: the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    trust_code: bool = False
    """import the code that the run's files name (an env factory, a module:ID env id, an encoder class) without its being named again; only for files you trust (docs/SECURITY.md)"""


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
        "thread count, which rounds differently) may be given with it",
    ),
}


def _command_flags(
    defaults: PPOArgs,
    instructions: dict[str, str | None],
    own: type | None = None,
    hidden: tuple[str, ...] = (),
):
    """A dataclass of a command's own flags (``own``, a dataclass named after the command), of ``PPOArgs``'
    groups and of the ``instructions``: one ``--help`` section each, titled by its docstring, with
    ``defaults`` as the settings' defaults, so that ``--help`` shows the values a run would get. The flags are
    flat (``--env-id``): ``parse`` puts the dataclass under ``OmitArgPrefixes``. ``hidden``: settings that the
    command sets itself, left out of its flags and its help."""
    from proxima.config import GROUPS

    instruction_fields = [
        (n, Annotated[str | None, tyro.conf.arg(metavar=INSTRUCTION_FLAGS[n][0], help=INSTRUCTION_FLAGS[n][1])],
         dataclasses.field(default=value))
        for n, value in instructions.items()
    ]  # fmt: skip
    made = dataclasses.make_dataclass("instructions", instruction_fields, frozen=True)
    made.__doc__ = "what to start from, rather than settings"
    sections = {group: _with_help(cls, getattr(defaults, group), hidden) for group, cls in GROUPS.items()}
    groups = [(group, cls, dataclasses.field(default_factory=cls)) for group, cls in sections.items()]
    mine = [(own.__name__.lower().removesuffix("flags"), own)] if own is not None else []
    return dataclasses.make_dataclass(
        "flags", [*mine, *groups, ("instructions", made, dataclasses.field(default_factory=made))]
    )


def _with_help(cls, defaults, hidden: tuple[str, ...] = ()):
    """``cls`` again with ``defaults`` as its defaults and each field's docstring on one line as its help
    (tyro keeps a docstring's line breaks, which the help's columns then break again); ``hidden`` fields are
    kept out of the flags."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    fields_ = []
    for f in dataclasses.fields(cls):
        value = getattr(defaults, f.name)
        default = dataclasses.field(default_factory=lambda v=value: v) if isinstance(value, dict) else (
            dataclasses.field(default=value))  # fmt: skip
        hint = Annotated[hints[f.name], tyro.conf.arg(help=docs.get(f.name))]
        fields_.append((f.name, Annotated[hint, tyro.conf.Suppress] if f.name in hidden else hint, default))
    made = dataclasses.make_dataclass(cls.__name__, fields_, frozen=True)
    made.__doc__ = cls.__doc__
    return made


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
    ``hidden``, the settings the command sets itself (``_command_flags``)."""
    from proxima.config import GROUPS, PPOArgs, resolve_args

    given = {name: _flag_value(argv, "--" + name) for name in instructions}
    algo = _flag_value(argv, "--algo")
    config = given.get("config") or preset
    named = {name: _flag_value(argv, "--" + name.replace("_", "-")) for name in trust.SETTINGS}  # typed again
    defaults = resolve_args(config=config, named=named, **({"algo": algo} if algo is not None else {}))
    parsed = parse(_command_flags(defaults, given, own, hidden), argv, prog, description)
    args = PPOArgs(**{g: cls(**vars(getattr(parsed, g))) for g, cls in GROUPS.items()})
    return (getattr(parsed, dataclasses.fields(parsed)[0].name) if own is not None else None), args


def parse_train_args(
    argv: list[str], prog: str = "proxima train", instructions: tuple[str, ...] = ("config", "resume")
) -> PPOArgs:
    """``PPOArgs`` from ``proxima train``'s flags (``parse_command`` without flags of its own)."""
    return parse_command(argv, prog, instructions=instructions)[1]


@dataclass
class ResumeArgs:
    resume: str
    """the run directory to continue from its last checkpoint"""
    quiet: bool = False
    """no console output"""
    total_timesteps: int | None = None
    """continue the run, finished or not, to this many steps"""
    torch_threads: int | None = None
    """train on with this many torch threads (default: the run's own count; another count rounds differently)"""
    trust_code: bool = False
    """import the code that the run's files name (an env factory, a module:ID env id, an encoder class) without its being named again; only for files you trust (docs/SECURITY.md)"""
    env_id: str | None = None
    """the run's env id named again (the same as its config.json's), where it names a module to import"""
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    """the run's env factory named again (the same as its config.json's)"""
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """the run's encoder class named again (the same as its config.json's)"""


@dataclass(frozen=True)
class TrainFlags:
    """for jobs that a scheduler may start again (docs/SCALING.md)"""

    resume_if_exists: bool = False
    """start the run in --run-dir, or continue it from its checkpoint there if it has one (with its config.json's settings; given settings that differ are named and ignored), or do nothing if it finished; the same command line for every start of a SLURM or Kubernetes job"""


# the flags that name code again, or trust it, which a resume takes beside its own (docs/SECURITY.md)
_NAMING_FLAGS = (trust.TRUST_FLAG, "--no-trust-code", "--env-id", "--env-factory", "--encoder")


def cmd_train(argv: list[str]) -> int:
    from proxima.loop import run_to_end
    from proxima.trainer import resuming, train

    if _flag_value(argv, "--resume") is not None and not helping(argv):  # train's help lists --resume too
        others = [
            a
            for a in argv
            if a.startswith("-")
            and a.split("=")[0]
            not in (
                "--resume",
                "--quiet",
                "--no-quiet",
                "--total-timesteps",
                "--torch-threads",
                *_NAMING_FLAGS,
            )
        ]
        if others:
            raise UserError(
                f"with --resume, only --quiet, --total-timesteps, --torch-threads, {trust.TRUST_FLAG} and the "
                f"run's own --env-id, --env-factory and --encoder may be given (the run's config.json holds its "
                f"settings), not {others[0]} (see proxima train --help)"
            )
        args = parse(ResumeArgs, argv, "proxima train")
        named = {name: getattr(args, name) for name in trust.SETTINGS if getattr(args, name) is not None}
        run_to_end(resuming(
            args.resume, quiet=args.quiet, total_timesteps=args.total_timesteps, torch_threads=args.torch_threads,
            trust_code=args.trust_code, named=named,
        ))  # fmt: skip
    else:
        flags, args = parse_command(argv, "proxima train", TrainFlags, instructions=("config", "resume"))
        train(args, resume_if_exists=flags.resume_if_exists)
    return 0


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


def cmd_probe(argv: list[str]) -> int:
    from proxima.probe import PROBE_NAMES, print_table, run_probes

    flags, args = parse_command(argv, "proxima probe", ProbeFlags, description=PROBE_ABOUT)
    names = list(flags.probes) or None
    unknown = [n for n in names or () if n not in PROBE_NAMES]
    if unknown:
        raise UserError(f"unknown probe {unknown[0]!r}; accepted: {', '.join(PROBE_NAMES)}")
    if _flag_value(argv, "--env-id") is not None:
        raise UserError("proxima probe chooses the envs itself; drop --env-id")
    timesteps = args.algorithm.total_timesteps if _flag_value(argv, "--total-timesteps") is not None else None
    results = run_probes(
        args, names, timesteps, run_dir=args.run.run_dir, norm_value=_asked_norm_value(args, argv)
    )
    print_table(results, args)
    return 1 if any(r.passed is False for r in results) else 0


def _asked_norm_value(args: PPOArgs, argv: list[str]) -> bool | None:
    """``args.network.norm_value`` where the flags or the preset set it, else None: ``PPOArgs``' default is not a
    choice of the user's, and ``run_probes`` trains seed 000's critic unless asked."""
    from proxima.config import load_preset

    config = _flag_value(argv, "--config")
    asked = any(a.split("=")[0] in ("--norm-value", "--no-norm-value") for a in argv)
    return args.network.norm_value if asked or (config and "norm_value" in load_preset(config)) else None


def cmd_presets(argv: list[str]) -> int:
    from proxima.config import load_preset, preset_names, read_preset

    if helping(argv):
        print(
            "usage: proxima presets [NAME]\n\nWithout NAME: every preset, with what it is for. With NAME: that "
            "preset's settings, as the train flags it stands for (proxima train --config NAME takes them; any "
            "flag given beside it wins)."
        )
        return 0
    if len(argv) > 1:
        raise UserError(f"unexpected argument {argv[1]!r}; proxima presets takes one preset NAME or none")
    if argv and argv[0] not in preset_names():
        raise UserError(f"unknown preset {argv[0]!r}; accepted: {', '.join(preset_names())}")
    if argv:  # one preset in full, as the flags it stands for
        for key, value in load_preset(argv[0]).items():
            value = " ".join(map(str, value)) if isinstance(value, list) else value
            print(f"--{key.replace('_', '-')} {value}")
        return 0
    for name in preset_names():
        print(f"{name:30s} {read_preset(name).get('description', '')}")
    return 0


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


def cmd_solve(argv: list[str]) -> int:
    from proxima.config import read_preset, solve_presets
    from proxima.evaluate import evaluate, save_evaluation
    from proxima.files import read_json
    from proxima.loop import default_run_dir
    from proxima.trainer import train

    presets = solve_presets()
    tasks = {env_id: read_preset(name) | {"name": name} for env_id, name in presets.items()}
    rows = [f"  {e:26s} {t['name']:28s} {t['solve']['threshold']:g}" for e, t in tasks.items()]
    about = SOLVE_ABOUT.format(episodes=SOLVE_EPISODES, tasks="\n".join(rows))
    env_id = argv[0] if argv and not argv[0].startswith("-") else None
    if env_id is not None and env_id not in tasks:
        raise UserError(f"no solve preset for {env_id!r}; accepted: {', '.join(tasks)}")
    for flag in ("--config", "--env-id", "--env-factory", "--resume"):
        if _flag_value(argv, flag) is not None:
            raise UserError(
                f"proxima solve sets {flag} itself (from ENV_ID); give it to proxima train instead"
            )
    preset = tasks[env_id]["name"] if env_id is not None else None
    flags, args = parse_command(
        argv,
        "proxima solve",
        SolveFlags,
        instructions=(),
        preset=preset,
        description=about,
        hidden=("env_id", "env_factory"),
    )
    if flags.task != env_id:  # the preset is read before the flags: the task comes first
        raise UserError(f"give ENV_ID first: proxima solve {flags.task} [TRAIN FLAGS]")
    task = tasks[env_id]
    if args.run.num_seeds > 1:
        raise UserError(
            "proxima solve trains and scores one seed; for many, proxima train --config PRESET --num-seeds N"
        )
    args = args.replace(run_dir=args.run.run_dir or default_run_dir(args))
    agent = train(args)
    trained = _process_seconds()
    steps = read_json(os.path.join(args.run.run_dir, files.AGENT_JSON))["global_step"]
    scored = ""
    best = os.path.join(args.run.run_dir, files.BEST)
    if args.run.save_best and os.path.isdir(
        best
    ):  # PPO's policy can get worse late in a run: score the best one
        from proxima.agent import load

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
        f"({_process_seconds():.1f} s with the evaluation); run directory: {args.run.run_dir}",
        flush=True,
    )  # before eval.json, whose write may fail
    save_evaluation(args.run.run_dir, returns, deterministic=deterministic, seed=args.run.seed, threshold=threshold,
                    solved=bool(solved))  # fmt: skip
    return 0 if solved else 1


SOLVE_EPISODES = 100


def cmd_eval(argv: list[str]) -> int:
    from proxima.agent import load
    from proxima.config import parse_env_kwargs
    from proxima.envs.registry import FEATURES
    from proxima.envs.selfplay import is_selfplay_id
    from proxima.evaluate import evaluate, save_evaluation

    args = parse(EvalArgs, argv, "proxima eval")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    if args.env_factory is not None and args.env_id is not None:
        raise UserError("give the env once: --env-id or --env-factory, not both")
    trust.remember("env_id", args.env_id)  # typed: the user's own
    trust.remember("env_factory", args.env_factory)
    agent = load(args.run_dir, encoder=args.encoder, trust_code=args.trust_code)
    if args.env_factory is not None and args.env_factory != agent.env_source.get("env_factory"):
        from proxima.envs.user import load_env_factory

        env = load_env_factory(args.env_factory, "--env-factory")  # another env: its own kwargs only
    else:
        env = None
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
            agent, args.episodes, deterministic=args.deterministic, seed=args.seed, video_dir=video_dir,
            video_episodes=args.video_episodes, env_id=args.env_id, env_kwargs=env_kwargs, env=env,
        )  # fmt: skip
    except BaseException as e:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, UserError):  # a backend that cannot record names train's flag; eval's is --video
            raise UserError(str(e).replace(FEATURES["video"], "--video")) from None
        raise
    if staging is not None:
        recorded, video_dir = video_dir, os.path.join(args.run_dir, files.EVAL_VIDEOS)
        shutil.rmtree(video_dir, ignore_errors=True)
        os.makedirs(recorded, exist_ok=True)  # a recorder that makes its folder with its first video only
        os.rename(recorded, video_dir)
        os.rmdir(staging)
    videos = sorted(f for f in os.listdir(video_dir) if f.endswith(".mp4")) if video_dir else []
    # the score first: a run directory that takes no eval.json (read-only, full) loses nothing of it
    print(
        f"{args.env_id or agent.env_id}: mean_return={returns.mean():.2f} std_return={returns.std():.2f} "
        f"episodes={len(returns)} deterministic={args.deterministic}",
        flush=True,
    )
    if videos:
        print(f"videos: {', '.join(os.path.join(video_dir, f) for f in videos)}", flush=True)
    # on another env than the run's, eval.json says which, and the report shows it beside the score
    other = {"env_id": args.env_id} if args.env_id not in (None, agent.env_id) else {}
    other |= {"env_kwargs": env_kwargs} if env_kwargs else {}
    save_evaluation(args.run_dir, returns, deterministic=args.deterministic, seed=args.seed,
                    videos=[os.path.join(files.EVAL_VIDEOS, f) for f in videos], **other)  # fmt: skip
    return 0


def _eval_against(agent, args: EvalArgs) -> int:
    from proxima.evaluate import save_evaluation
    from proxima.selfplay import play_against

    if args.video or args.env_id or args.env_kwargs:
        raise UserError("--opponent plays the agent's own game: drop --video, --env-id and --env-kwargs")
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


@dataclass
class ExportArgs:
    run_dir: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """the run directory written by `proxima train`"""
    format: Annotated[str, tyro.conf.arg(metavar="onnx|torchscript")] = "onnx"
    """onnx (run by onnxruntime, from any language; needs the export extra) or torchscript (torch.jit.load)"""
    output: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """the file to write, and FILE.json beside it (default: RUN_DIR/policy.onnx or RUN_DIR/policy.pt)"""
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this encoder class: the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    trust_code: bool = False
    """import the code that the run's files name (an env factory, a module:ID env id, an encoder class) without its being named again; only for files you trust (docs/SECURITY.md)"""


def cmd_export(argv: list[str]) -> int:
    from proxima.export import export

    args = parse(ExportArgs, argv, "proxima export")
    path = export(args.run_dir, args.format, args.output, encoder=args.encoder, trust_code=args.trust_code)
    print(f"wrote {path} and {path}.json")
    return 0


@dataclass
class CheckEnvArgs:
    env_id: Annotated[str | None, tyro.conf.Positional, tyro.conf.arg(metavar="ENV_ID")] = None
    """a registered id, or module:EnvName-v0 to import module (from the working directory too) first; --env-id
    ENV_ID, as train takes it, too"""
    env_factory: Annotated[str | None, tyro.conf.arg(metavar="MODULE:NAME")] = None
    """instead of ENV_ID: the class or function that makes one env, as `proxima train --env-factory` takes it
    (a gymnasium.Env, or a PettingZoo ParallelEnv)"""
    env_kwargs: Annotated[str | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON: --env-kwargs '{"size": 8}'"""
    num_envs: int = 4
    """the env count at which to choose the backend and take the random steps"""


def cmd_check_env(argv: list[str]) -> int:
    """Exit status 0 when proxima will train on the env, 2 when it will not (each problem on one line)."""
    from proxima.checkenv import check_env
    from proxima.config import parse_env_kwargs
    from proxima.envs.user import load_env_factory

    env_id = _flag_value(argv, "--env-id")  # train's spelling of ENV_ID: a user checks what they will train
    if env_id is not None:
        at = next(i for i, a in enumerate(argv) if a.split("=")[0] == "--env-id")
        argv = [*argv[:at], env_id, *argv[at + (1 if "=" in argv[at] else 2) :]]
    args = parse(CheckEnvArgs, argv, "proxima check-env")
    if args.num_envs < 1:
        raise UserError(f"--num-envs expects a positive integer, got '{args.num_envs}'")
    if (args.env_id is None) == (args.env_factory is None):
        raise UserError("give the env to check: an ENV_ID, or --env-factory MODULE:NAME (not both)")
    source = args.env_id or load_env_factory(args.env_factory, "--env-factory")
    name = args.env_id or args.env_factory
    report, warnings, problems = check_env(source, parse_env_kwargs(args.env_kwargs), args.num_envs)
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
        flag += f" --env-kwargs {shlex.quote(args.env_kwargs)}"
    print(f"proxima will train on {name} (proxima train {flag})")
    return 0


@dataclass
class PlotArgs:
    run_dirs: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="RUN_DIR [RUN_DIR ...]", help_behavior_hint="(required)"),
    ]
    """one or more run directories written by `proxima train`"""
    output: str = files.LEARNING_CURVES
    """the PNG to write"""


def cmd_plot(argv: list[str]) -> int:
    from proxima.files import distinct_dirs, seed_run_dirs
    from proxima.plotting import plot_runs

    args = parse(PlotArgs, argv, "proxima plot")
    if not args.run_dirs:
        raise UserError("give at least one run directory")
    if not args.output.endswith(".png"):
        raise UserError(f"--output must be a .png file, got {args.output!r}")
    run_dirs = distinct_dirs(list(args.run_dirs))
    labels = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    if len(set(labels)) < len(labels):  # same last component: label by the whole path
        labels = run_dirs
    # a batched run's directory is its seeds': one line, with a band over them
    groups = {label: seed_run_dirs(d) or [d] for label, d in zip(labels, run_dirs, strict=True)}
    plot_runs(groups, args.output)
    print(f"wrote {args.output}")
    return 0


@dataclass
class ReportArgs:
    paths: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="DIR [DIR ...]", help_behavior_hint="(required)"),
    ]
    """run directories (`proxima train`'s), sweep or compare directories, or a directory of runs (as `proxima
    probe --run-dir` writes): the runs that differ only in their seed form a group, with its mean and band"""
    output: str | None = None
    """the HTML file to write (default: DIR/report.html for one directory, else report.html here)"""


def cmd_report(argv: list[str]) -> int:
    from proxima.report import write_report

    args = parse(ReportArgs, argv, "proxima report")
    if not args.paths:
        raise UserError("give at least one run, sweep or compare directory")
    output = args.output or (
        os.path.join(args.paths[0], files.REPORT) if len(args.paths) == 1 else files.REPORT
    )
    print(f"wrote {write_report(list(args.paths), output)}")
    return 0


COMPARE_ABOUT = """Trains every algorithm of --algos with every seed on one env, each as an ordinary `proxima train`
run in its own directory under the output directory (a sweep over the algorithms: Ray Tune trials where Ray is
installed), then writes a table of the final returns over seeds per algorithm (results.md), the learning curves
with bands (learning_curves.png) and results.json. Exit status 1 if a run failed or did not run."""


def cmd_compare(argv: list[str]) -> int:
    from proxima.compare import TOTAL_TIMESTEPS, CompareFlags, check_algos, compare
    from proxima.sweeps import default_output_dir

    flags, _ = parse_command(argv, "proxima compare", CompareFlags, description=COMPARE_ABOUT)
    for flag, instead in (("--algo", "--algos"), ("--seed", "--seeds"), ("--run-dir", "--output-dir")):
        if _flag_value(argv, flag) is not None:
            raise UserError(f"proxima compare sets {flag} of each run; give {instead} instead")
    check_algos(flags.algos)
    train_argv = _without_own_flags(argv, CompareFlags)
    if _flag_value(argv, "--total-timesteps") is None and _flag_value(argv, "--config") is None:
        train_argv = ["--total-timesteps", str(TOTAL_TIMESTEPS), *train_argv]
    settings = [
        (
            algo,
            parse_train_args([*train_argv, "--algo", algo], prog="proxima compare", instructions=("config",)),
        )
        for algo in flags.algos
    ]
    out = flags.output_dir or default_output_dir(settings[0][1].env.env_id, "compare")
    try:
        return _print_results(compare(flags, settings, out), "compare")
    except TrainingInterrupted as e:  # a comparison is a sweep: it finishes as one
        return _sweep_interrupted(e, out, "compare")


def _print_results(results, command: str) -> int:
    """The table and where it is; exit status 1 if a run failed (each failure was said as it happened)."""
    out = results.output_dir
    print(f"\n{results}", end="")
    written = [f"{out}/{f}" for f in (files.RESULTS_MD, files.RESULTS_JSON, files.LEARNING_CURVES, files.REPORT)
               if os.path.exists(f"{out}/{f}")]  # fmt: skip
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


@dataclass(frozen=True)
class SweepFlags:
    """the sweep; every other flag is a `proxima train` flag (proxima train --help)"""

    seeds: str = "3"
    """the seeds of every setting: a count (5: seeds 1-5), a range (1-10; 4-4: seed 4 alone) or a list (1,3,5)"""
    batched: bool = False
    """train each setting's seeds as one batched run (--num-seeds), one trial, instead of one trial each; the seeds must be consecutive (1-10)"""
    grid: Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=V1,V2,...")] = ()
    """one setting and its values, repeatable: --grid learning_rate=3e-4,1e-3 --grid ent_coef=0,0.01 (a train flag's name; a value of several numbers, as for hidden_sizes, has them apart by spaces: --grid "hidden_sizes=64 64,256 256")"""
    executor: Annotated[str, tyro.conf.arg(metavar="ray|local")] = "ray"
    """ray: each run a Ray Tune trial (needs the ray extra); local: one after another in this process"""
    cpus_per_trial: int = 1
    """CPUs Ray gives each run; a run's torch threads equal them"""
    gpus_per_trial: float = 0
    """GPUs Ray gives each run, which then trains on CUDA (0.5: two runs share a GPU)"""
    max_concurrent: int | None = None
    """at most N runs at once (default: as many as the CPUs allow)"""
    address: str | None = None
    """join a running Ray cluster: auto, or ray://HOST:10001 (default: the one RAY_ADDRESS names, else a new local Ray instance); every node must see the sweep directory"""
    output_dir: str | None = None
    """the sweep directory (default: runs/sweep__{env}__{unix time})"""
    resume: Annotated[str | None, tyro.conf.arg(metavar="SWEEP_DIR")] = None
    """finish a sweep that was stopped: finished and failed runs are kept, interrupted ones resume from their checkpoints, the others start; only --executor, --address, --max-concurrent and --trust-code may be given with it"""
    trust_code: bool = False
    """with --resume: import the code that sweep.json and its runs' files name (an env factory, a module:ID env id, an encoder class); only for files you trust (docs/SECURITY.md)"""


SWEEP_ABOUT = """Trains every combination of the --grid values with every seed, each as an ordinary `proxima train` run
in its own directory under the sweep directory (as a Ray Tune trial, by default), then writes a table of the final
returns over seeds per setting (results.md), the learning curves with bands (learning_curves.png) and
results.json. Every run can be evaluated, plotted or resumed on its own. Exit status 1 if a run failed (a NaN, a
crashed env: its reason is in results.md, and the other runs go on; --resume keeps it failed) or did not run. A run
that crashed on anything else (a bug) runs again on --resume."""

# What `proxima sweep --resume SWEEP_DIR` accepts beside it: where the rest runs, not what it is
_SWEEP_RESUME_FLAGS = ("--resume", "--executor", "--address", "--max-concurrent", trust.TRUST_FLAG)


def cmd_sweep(argv: list[str]) -> int:
    from proxima.sweeps import default_output_dir, parse_seeds, resume_sweep, sweep

    flags, _ = parse_command(argv, "proxima sweep", SweepFlags, description=SWEEP_ABOUT)
    for name in ("cpus_per_trial", "max_concurrent"):
        value = getattr(flags, name)
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')} expects a positive integer, got '{value}'")
    if not flags.gpus_per_trial >= 0:
        raise UserError(f"--gpus-per-trial expects a non-negative number, got '{flags.gpus_per_trial:g}'")
    if flags.resume is not None:
        extra = [
            a.split("=")[0] for a in argv if a.startswith("-") and a.split("=")[0] not in _SWEEP_RESUME_FLAGS
        ]
        if extra:
            raise UserError(f"with --resume, only --executor, --address, --max-concurrent and --trust-code may be given, not "
                            f"{extra[0]} (the sweep's sweep.json holds the rest)")  # fmt: skip
        executor = flags.executor if _flag_value(argv, "--executor") is not None else None
        try:
            results = resume_sweep(
                flags.resume, executor, flags.address, flags.max_concurrent, flags.trust_code
            )
        except TrainingInterrupted as e:
            return _sweep_interrupted(e, flags.resume)
        return _print_results(results, "sweep")
    for flag in ("--seed", "--run-dir"):
        if _flag_value(argv, flag) is not None:
            raise UserError(f"proxima sweep sets {flag} of each run; give --seeds and --output-dir instead")
    settings = _grid_settings(argv, list(flags.grid))
    out = flags.output_dir or default_output_dir(settings[0][1].env.env_id)
    try:
        results = sweep(
            seeds=parse_seeds(flags.seeds),
            settings=settings,
            executor=flags.executor,
            cpus_per_trial=flags.cpus_per_trial,
            gpus_per_trial=flags.gpus_per_trial,
            max_concurrent=flags.max_concurrent,
            address=flags.address,
            output_dir=out,
            batched=flags.batched,
        )
    except TrainingInterrupted as e:
        return _sweep_interrupted(e, out)
    return _print_results(results, "sweep")


def _sweep_interrupted(e: TrainingInterrupted, out: str, command: str = "sweep") -> int:
    """Ctrl-C or SIGTERM in a local sweep's run, or SIGTERM to a Ray sweep (each running trial checkpointed):
    how to finish the sweep (not a run alone), and exit status 130 or 143."""
    print(f"proxima {command}: {e}; finish the {command} with: proxima sweep --resume {out}", file=sys.stderr)
    return e.exit_status


def _grid_settings(argv: list[str], grid: list[str]):
    """Each combination of the ``--grid`` values (``sweeps.grid_settings``) as ``(label, PPOArgs)``: what
    ``proxima train`` would make of the train flags with that combination's flags added, so that values are
    read, checked and layered (an algo's defaults, a preset) exactly as on its command line."""
    from proxima.config import GROUP_OF
    from proxima.sweeps import grid_settings

    axes: dict[str, list[str]] = {}
    for item in grid:
        name, equals, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not values.strip():
            raise UserError(f"--grid expects NAME=V1,V2,..., got {item!r}")
        if name not in GROUP_OF or name in ("seed", "run_dir"):
            raise UserError(f"--grid: {name!r} is not a setting a sweep can vary; accepted: the names of the "
                            "train flags (proxima train --help), such as learning_rate, apart from seed and run_dir")  # fmt: skip
        if name in axes:
            raise UserError("--grid names a setting twice; give all its values in one --grid NAME=V1,V2")
        axes[name] = [value.strip() for value in values.split(",")]
    train_argv = _without_own_flags(argv, SweepFlags)
    settings = []
    for label, setting in grid_settings(axes):
        flags = [
            token
            for name, value in setting.items()
            for token in ("--" + name.replace("_", "-"), *value.split())
        ]
        settings.append(
            (label, parse_train_args(train_argv + flags, prog="proxima sweep", instructions=("config",)))
        )
    return settings


def _without_own_flags(argv: list[str], own: type) -> list[str]:
    """``argv`` without the flags of ``own`` (a dataclass of a command's own flags, each taking one value, but
    its booleans (``--name`` or ``--no-name``) and its tuples that are not given once per value, which take
    the values up to the next flag)."""
    hints = typing.get_type_hints(own, include_extras=True)
    fields = dataclasses.fields(own)
    flag = {f.name: "--" + f.name.replace("_", "-") for f in fields}
    switches = {f"--{no}{flag[f.name][2:]}" for f in fields if hints[f.name] is bool for no in ("", "no-")}
    many = {
        flag[f.name] for f in fields
        if typing.get_origin(typing.get_args(hints[f.name])[0] if typing.get_origin(hints[f.name]) is Annotated
                             else hints[f.name]) is tuple
        and tyro.conf.UseAppendAction not in getattr(hints[f.name], "__metadata__", ())
    }  # fmt: skip
    names = set(flag.values()) - switches
    out, i = [], 0
    while i < len(argv):
        name = argv[i].split("=")[0]
        if name in switches or (name in names and "=" in argv[i]):
            i += 1
        elif name in many:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
        elif name in names:
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


@dataclass(frozen=True)
class TuneFlags:
    """the search; every other flag is a `proxima train` flag (proxima train --help), the base of every sample"""

    space: Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=KIND:...")] = ()
    """one setting and its distribution, repeatable: --space learning_rate=loguniform:1e-5:1e-2 --space ent_coef=uniform:0:0.05 --space num_minibatches=choice:4,8,16 (also randint:LOW:HIGH, both ends included); values are read as the train flag reads them"""
    search: Annotated[str, tyro.conf.arg(metavar="random|optuna")] = "random"
    """random: Tune's random search; optuna: Tune's Optuna searcher (TPE)"""
    num_samples: int = 8
    """how many settings to draw"""
    metric: Annotated[str, tyro.conf.arg(metavar="return|eval_return")] = "return"
    """return: mean return of the last 20 episodes; eval_return: the last deterministic evaluation (needs --eval-every)"""
    mode: Annotated[str, tyro.conf.arg(metavar="max|min")] = "max"
    """whether a higher or a lower metric is better"""
    seeds: int = 1
    """seeds per sample (from --seed on), trained in lockstep; a sample's score is their mean"""
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
ranked, mean ± std over seeds), results.json, report.html and best.json, the best settings as a preset for
`proxima train --config TUNE_DIR/best.json`. Exit status 1 if no sample finished."""


def cmd_tune(argv: list[str]) -> int:
    from proxima.sweeps import default_output_dir
    from proxima.tuning import parse_space_item, resume_tune, tune

    flags, base = parse_command(argv, "proxima tune", TuneFlags, description=TUNE_ABOUT)
    if flags.resume is not None:
        extra = [
            a.split("=")[0]
            for a in argv
            if a.startswith("-") and a.split("=")[0] not in ("--resume", "--address", trust.TRUST_FLAG)
        ]
        if extra:
            raise UserError(
                f"with --resume, only --address and --trust-code may be given, not {extra[0]} (tune.json holds "
                "the rest)"
            )
        try:
            return _tune_done(resume_tune(flags.resume, flags.address, trust_code=flags.trust_code))
        except TrainingInterrupted as e:
            return _tune_interrupted(e, flags.resume)
    for flag in ("--run-dir",):
        if _flag_value(argv, flag) is not None:
            raise UserError(f"proxima tune sets {flag} of each run; give --output-dir instead")
    train_argv = _without_own_flags(argv, TuneFlags)

    def read(name: str, text: str):
        flag = "--" + name.replace("_", "-")
        return parse_train_args(
            train_argv + [flag, *text.split()], prog="proxima tune", instructions=("config",)
        ).flat()[name]

    space = dict(parse_space_item(item, read) for item in flags.space)
    if len(space) < len(flags.space):
        raise UserError("--space names a setting twice; give each setting once")
    out = flags.output_dir or default_output_dir(base.env.env_id, "tune")
    try:
        results = tune(
            base, space={n: ":".join(map(str, spec)) if spec[0] != "choice" else spec[1] for n, spec in space.items()},
            search=flags.search, num_samples=flags.num_samples, metric=flags.metric, mode=flags.mode,
            seeds=flags.seeds, scheduler=flags.scheduler, perturbation_interval=flags.perturbation_interval,
            cpus_per_trial=flags.cpus_per_trial, gpus_per_trial=flags.gpus_per_trial,
            max_concurrent=flags.max_concurrent, address=flags.address, output_dir=out,
        )  # fmt: skip
    except TrainingInterrupted as e:
        return _tune_interrupted(e, out)
    return _tune_done(results)


def _tune_interrupted(e: TrainingInterrupted, out: str) -> int:
    """SIGTERM (or Ctrl-C) in a search: every sample that was training checkpointed; how to finish it."""
    print(f"proxima tune: {e}; finish the search with: proxima tune --resume {out}", file=sys.stderr)
    return e.exit_status


def _tune_done(results) -> int:
    out = results.output_dir
    print(f"\n{results}", end="")
    if results.best_preset is None:
        print(f"proxima tune: no sample finished (see {out}/results.md)", file=sys.stderr)
        return 1
    print(f"wrote {out}/results.md, {out}/results.json, {out}/report.html; the best settings: {results.best_preset} "
          f"(proxima train --config {results.best_preset})")  # fmt: skip
    return 0


COMMANDS = {
    "train": cmd_train,
    "eval": cmd_eval,
    "presets": cmd_presets,
    "solve": cmd_solve,
    "compare": cmd_compare,
    "plot": cmd_plot,
    "probe": cmd_probe,
    "report": cmd_report,
    "sweep": cmd_sweep,
    "tune": cmd_tune,
    "export": cmd_export,
    "check-env": cmd_check_env,
}


def _working_directory_on_path(command: str, rest: list[str], own_process: bool) -> None:
    """A command whose settings the user types (``train``, not ``--resume``; ``check-env``; a new sweep or
    search) imports ``module:Env-v0``'s module from the working directory, as ``python -m`` would (and not under
    ``-P``/PYTHONSAFEPATH). Every other command reads a run's files, and finds no module there: the working
    directory is taken off the path where ``python -m proxima`` put it, in a process of the command's own
    (``own_process``: a caller of ``main``, a test or a notebook, keeps its path as it is)."""
    cwd = os.getcwd()
    typed = command in ("train", "check-env", "sweep", "tune") and _flag_value(rest, "--resume") is None
    if typed and not sys.flags.safe_path:
        if "" not in sys.path and cwd not in sys.path:
            sys.path.insert(0, cwd)
    elif not typed and own_process and sys.path and sys.path[0] in ("", cwd):
        del sys.path[0]  # Python's own entry for `python -m`; one that PYTHONPATH names comes after it


def console() -> int:
    """The ``proxima`` command (the installed script and ``python -m proxima``): ``main`` in a process of its own.

    The command owns its process, and what its imports made lives until it exits: frozen, those objects are
    left out of the cyclic collector's later passes, which would walk them again and again during a run. A
    caller of ``main`` in its own process (a test, a notebook) keeps its collector as it is."""
    gc.freeze()
    return main(own_process=True)


def main(argv: list[str] | None = None, own_process: bool = False) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if argv[0] in ("-V", "--version"):
        from proxima.version import __version__

        print(f"proxima {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    _working_directory_on_path(command, rest, own_process)
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, COMMANDS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(
            f"proxima: error: unknown command {command!r}{hint} (accepted: {', '.join(COMMANDS)})",
            file=sys.stderr,
        )
        return 2
    try:
        return COMMANDS[command](rest)
    except SystemExit as e:  # --help, printed in full
        return e.code if isinstance(e.code, int) else 0
    except BrokenPipeError:  # `proxima presets | head`: the reader has all it wants
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # Python's advice: no second error at exit
        return 0
    except (UserError, EnvError, NonFiniteError, DiskFullError) as e:
        if debug():  # where it was raised, and what raised the env's exception (its cause)
            traceback.print_exc()
        # one line, whatever the message holds: numpy writes a 2-D space's bounds over several lines
        line = " ".join(part.strip() for part in str(e).splitlines())
        if isinstance(e, UserError) and not isinstance(e, FileAccessError):  # whose paths are not flags
            from proxima.config import PPOArgs

            # sweep's --grid and tune's --space name settings as Python does: only the flags typed are flags
            by_name = command in ("sweep", "tune")
            settings = EvalArgs if command == "eval" else PPOArgs  # eval's settings are its own
            line = in_flags(line, settings, {a.split("=")[0] for a in rest} if by_name else None)
        print(f"proxima {command}: error: {line}", file=sys.stderr)
        return 2 if isinstance(e, UserError) else getattr(e, "exit_status", 1)
    except OSError as e:  # one that no proxima code around it said in its own words (a library's write)
        cannot = files.refused(e, verb="write" if e.errno == errno.EROFS else "access")
        if cannot is None and e.errno not in files.FULL_DISK:
            raise
        if debug():
            traceback.print_exc()
        print(
            f"proxima {command}: error: {cannot or f'{os.strerror(e.errno).lower()} writing {e.filename}'}",
            file=sys.stderr,
        )
        return 2 if cannot is not None else DiskFullError.exit_status
    except TrainingInterrupted as e:
        print(
            f"proxima {command}: {e}; continue it with: proxima train --resume {e.run_dir}", file=sys.stderr
        )
        return e.exit_status
    except KeyboardInterrupt:  # a second Ctrl-C, which stops at once, even while the first one's checkpoint
        # is being written (written whole or not at all)
        if debug():
            traceback.print_exc()
        print(
            f"proxima {command}: stopped at once by a second interrupt; a run keeps its last checkpoint "
            "(proxima train --resume RUN_DIR continues from it)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main(own_process=True))
