"""The ``proxima`` command: ``proxima train`` and ``proxima eval``.

Flags come from the typed dataclasses (``PPOArgs``, ``EvalArgs``) through tyro, so ``--help`` is their field
docs. Every user error becomes one line on stderr and exit status 2 (``PROXIMA_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import sys
import time
import traceback
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import tyro

from proxima.argv import check, field_docs, fields
from proxima.errors import EnvError, NonFiniteError, TrainingInterrupted, UserError

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
  plot    overlay the learning curves of runs: proxima plot RUN_DIR... --output FILE.png
  probe   train the agent on the probe envs and name the component a failure points to (proxima probe --help)
  solve   train ENV_ID with its fast preset until solved, then score it on Gymnasium's env (proxima solve --help)
  report  one self-contained HTML page of runs, a sweep or a comparison: proxima report RUN_DIR... (--help)
  presets list the presets that `proxima train --config NAME` accepts; `proxima presets NAME` shows one
  export  write a trained agent's deterministic policy as one ONNX or TorchScript file (proxima export --help)
  check-env  check that proxima will train on ENV_ID (or module:ID) and say what it will make of it
"""

_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def _debug() -> bool:
    return os.environ.get("PROXIMA_DEBUG", "") not in ("", "0")


def _bool_flags_as_tyro(cls, argv: list[str]) -> list[str]:
    """Accept the seed's ``--cuda False`` / ``--cuda=true`` spelling beside tyro's ``--cuda`` / ``--no-cuda``."""
    flags = {f.flag for f in fields(cls) if f.hint is bool and not f.positional}
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        name, _, inline = arg.partition("=")
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
        if name in flags and value.lower() in _TRUE | _FALSE:
            out.append(name if value.lower() in _TRUE else "--no-" + name[2:])
            i += 1 if inline else 2
            continue
        out.append(arg)
        i += 1
    return out


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in ``argv`` (the last one wins), else None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.partition("=")[2]
    return value


def _parse(cls, argv: list[str], prog: str):
    """``tyro.cli``, after ``proxima.argv.check`` has turned any mistake into one line (help prints in full)."""
    argv = _bool_flags_as_tyro(cls, argv)
    if "-h" in argv or "--help" in argv:
        # straight to the terminal, so it keeps its formatting; without the other flags, which tyro would
        # parse first, so that a mistake in them does not hide the help
        with _REGISTRY:
            return tyro.cli(tyro.conf.OmitArgPrefixes[cls], args=["--help"], prog=prog)
    check(cls, argv, prog)
    _constructor_errors.clear()
    try:
        with contextlib.ExitStack() as stack:
            if not _debug():
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
                stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
            with _REGISTRY:
                return tyro.cli(tyro.conf.OmitArgPrefixes[cls], args=argv, prog=prog)
    except SystemExit:
        if _constructor_errors:  # a value tyro could not make, with our own line for it
            raise _constructor_errors.pop() from None
        # A mistake the check does not know of. tyro's wording and layout change between its releases, so
        # its text is not read here; PROXIMA_DEBUG=1 lets it through.
        raise UserError(
            f"cannot parse the arguments {' '.join(argv)!r} (see {prog} --help for the accepted flags, or set "
            "PROXIMA_DEBUG=1 for the parser's own message)"
        ) from None


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
    """record env 0's episodes as MP4 into RUN_DIR/eval-videos (needs the video extra)"""
    env_id: str | None = None
    """evaluate on this env instead of the run's: an id, or module:EnvName-v0 to import module first (the run's
    env kwargs still apply unless --env-kwargs is given)"""
    env_kwargs: Annotated[str | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON, instead of the run's: --env-kwargs '{"size": 8}'"""


# Instructions are not settings (not PPOArgs fields), but --help lists them with the flags: (metavar, help).
INSTRUCTIONS = {
    "config": (
        "NAME|FILE",
        "a preset (`proxima presets` lists them) or a JSON file of settings: its values replace the defaults "
        "shown here, and the other flags override them",
    ),
    "resume": (
        "RUN_DIR",
        "continue the interrupted run in RUN_DIR from its last checkpoint, with its saved settings; only "
        "--quiet and --total-timesteps N (continue it, finished or not, to N steps) may be given with it",
    ),
}


def _train_flags(defaults: PPOArgs, instructions: dict[str, str | None]):
    """A dataclass of ``PPOArgs``' groups (one ``--help`` section each, titled by the group's docstring) and
    of the ``instructions``, with ``defaults`` as its defaults, so that ``--help`` shows the values a run would
    get; the flags are flat (``--env-id``) under ``OmitArgPrefixes``."""
    from proxima.config import GROUPS

    instruction_fields = [
        (n, Annotated[str | None, tyro.conf.arg(metavar=INSTRUCTIONS[n][0], help=INSTRUCTIONS[n][1])],
         dataclasses.field(default=value))
        for n, value in instructions.items()
    ]  # fmt: skip
    made = dataclasses.make_dataclass("instructions", instruction_fields, frozen=True)
    made.__doc__ = "what to start from, rather than settings"
    sections = {group: _with_help(cls, getattr(defaults, group)) for group, cls in GROUPS.items()}
    groups = [(group, cls, dataclasses.field(default_factory=cls)) for group, cls in sections.items()]
    return dataclasses.make_dataclass(
        "train", [*groups, ("instructions", made, dataclasses.field(default=made()))]
    )


def _with_help(cls, defaults):
    """``cls`` again with ``defaults`` as its defaults and each field's docstring on one line as its help
    (tyro keeps a docstring's line breaks, which the help's columns then break again)."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    fields_ = []
    for f in dataclasses.fields(cls):
        value = getattr(defaults, f.name)
        default = dataclasses.field(default_factory=lambda v=value: v) if isinstance(value, dict) else (
            dataclasses.field(default=value))  # fmt: skip
        fields_.append((f.name, Annotated[hints[f.name], tyro.conf.arg(help=docs.get(f.name))], default))
    made = dataclasses.make_dataclass(cls.__name__, fields_, frozen=True)
    made.__doc__ = cls.__doc__
    return made


def _json_object(values: list[str]) -> dict | None:
    """``--env-kwargs``' JSON text as a dict; a ``UserError`` kept for ``_parse``, which tyro would turn into
    a box of text."""
    from proxima.config import parse_env_kwargs

    try:
        return parse_env_kwargs(values[0])
    except UserError as e:
        _constructor_errors.append(e)
        raise


_constructor_errors: list[UserError] = []
# PPOArgs' dict settings (env_kwargs) are one JSON object on the command line
_REGISTRY = tyro.constructors.ConstructorRegistry()


@_REGISTRY.primitive_rule
def _dict_as_json(info: tyro.constructors.PrimitiveTypeInfo):
    if info.type is not dict:
        return None
    return tyro.constructors.PrimitiveConstructorSpec(
        nargs=1,
        metavar="JSON",
        instance_from_str=_json_object,
        is_instance=lambda value: isinstance(value, dict),
        str_from_instance=lambda value: [json.dumps(value)],
    )


def parse_train_args(
    argv: list[str], prog: str = "proxima train", instructions: tuple[str, ...] = ("config", "resume")
) -> PPOArgs:
    """``PPOArgs`` from command-line flags, on top of the ``--algo`` defaults and the ``--config`` preset.

    The two are read first, so that the preset's values become the defaults ``--help`` shows and explicit
    flags override them. ``instructions`` are the instruction flags accepted beside ``PPOArgs``' fields.
    """
    from proxima.config import GROUPS, PPOArgs, resolve_args

    given = {name: _flag_value(argv, "--" + name) for name in instructions}
    if not {"-h", "--help"} & set(argv):  # --config's and --algo's values are read below: check them first
        check(_train_flags(PPOArgs(), given), _bool_flags_as_tyro(PPOArgs, argv), prog)
    algo = _flag_value(argv, "--algo")
    defaults = resolve_args(config=given.get("config"), **({"algo": algo} if algo is not None else {}))
    parsed = _parse(_train_flags(defaults, given), argv, prog)
    return PPOArgs(**{g: cls(**vars(getattr(parsed, g))) for g, cls in GROUPS.items()})


@dataclass
class ResumeArgs:
    resume: str
    """the run directory to continue from its last checkpoint"""
    quiet: bool = False
    """no console output"""
    total_timesteps: int | None = None
    """continue the run, finished or not, to this many steps"""


def cmd_train(argv: list[str]) -> int:
    from proxima.trainer import resume, train

    helping = "-h" in argv or "--help" in argv  # train's help lists --resume too
    if _flag_value(argv, "--resume") is not None and not helping:
        others = [
            a
            for a in argv
            if a.startswith("-")
            and a.split("=")[0] not in ("--resume", "--quiet", "--no-quiet", "--total-timesteps")
        ]
        if others:
            raise UserError(
                f"with --resume, only --quiet and --total-timesteps may be given (the run's config.json holds its "
                f"settings), not {others[0]} (see proxima train --help)"
            )
        args = _parse(ResumeArgs, argv, "proxima train")
        resume(args.resume, quiet=args.quiet, total_timesteps=args.total_timesteps)
    else:
        train(parse_train_args(argv))
    return 0


def _pop_flag(argv: list[str], flag: str) -> tuple[list[str], list[str] | None]:
    """Remove the first ``--flag V1 V2 ...`` (its values run up to the next flag) or ``--flag=V`` from argv;
    return the rest and its values (None: the flag is not there)."""
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            return argv[:i] + argv[i + 1 :], [arg.partition("=")[2]]
    if flag not in argv:
        return argv, None
    i = j = argv.index(flag)
    j += 1
    while j < len(argv) and not argv[j].startswith("--"):
        j += 1
    return argv[:i] + argv[j:], argv[i + 1 : j]


def cmd_probe(argv: list[str]) -> int:
    from proxima.probe import PROBE_NAMES, print_table, run_probes

    if "-h" in argv or "--help" in argv:
        print(
            "usage: proxima probe [--probes NAME...] [TRAIN FLAGS]\n\n"
            "Trains the agent that `proxima train` would build with the same flags (--algo, --config, "
            "--learning-rate, ...) on each probe env, prints what each one expects and what was learned, and "
            "names the component a failure points to. Exit status 1 if a probe fails.\n\n"
            f"  --probes NAME...     which probes to run, of {' '.join(PROBE_NAMES)} (default: those that apply:\n"
            "                       the image probes for an agent whose env gives images, as --config atari's;\n"
            "                       the others for any other agent, and the memory probe for a recurrent one)\n"
            "  --total-timesteps N  one budget for every probe (default: each probe's own, set for seed 000's PPO's\n"
            "                       16 gradient steps per 512 samples; vpg and reinforce take 1 and need more)\n"
            "  --run-dir DIR        keep each probe's run in DIR/probe-NAME (default: deleted)\n"
            "Every other flag is a `proxima train` flag: see proxima train --help."
        )
        return 0
    argv, names = _pop_flag(argv, "--probes")
    if names is not None:
        unknown = [n for n in names if n not in PROBE_NAMES] or ([] if names else ["(none)"])
        if unknown:
            raise UserError(f"unknown probe {unknown[0]!r}; accepted: {', '.join(PROBE_NAMES)}")
    if _flag_value(argv, "--env-id") is not None:
        raise UserError("proxima probe chooses the envs itself; drop --env-id")
    args = parse_train_args(argv, prog="proxima probe", instructions=("config",))
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


SOLVE_USAGE = """usage: proxima solve ENV_ID [--seed S] [TRAIN FLAGS]

Train ENV_ID with its fast preset, which stops once the deterministic policy reaches the task's score on
proxima's evaluation envs; then play {episodes} episodes of Gymnasium's own ENV_ID and print the time, the
steps and the score. Exit status 0 when that score reaches the task's threshold, 1 when it does not. Any
`proxima train` flag overrides the preset's value (`proxima presets NAME` shows them).

tasks (preset, threshold):
{tasks}
"""


def cmd_solve(argv: list[str]) -> int:
    from proxima.config import read_preset, solve_presets
    from proxima.evaluate import evaluate, save_evaluation
    from proxima.files import read_json
    from proxima.trainer import default_run_dir, train

    presets = solve_presets()
    tasks = {env_id: read_preset(name) | {"name": name} for env_id, name in presets.items()}
    if not argv or argv[0] in ("-h", "--help"):
        rows = [f"  {e:26s} {t['name']:28s} {t['solve']['threshold']:g}" for e, t in tasks.items()]
        print(SOLVE_USAGE.format(episodes=SOLVE_EPISODES, tasks="\n".join(rows)), end="")
        return 0
    env_id, rest = argv[0], argv[1:]
    if env_id not in tasks:
        raise UserError(f"no solve preset for {env_id!r}; accepted: {', '.join(tasks)}")
    for flag in ("--config", "--env-id", "--resume"):
        if _flag_value(rest, flag) is not None:
            raise UserError(
                f"proxima solve sets {flag} itself (from ENV_ID); give it to proxima train instead"
            )
    task = tasks[env_id]
    args = parse_train_args(["--config", task["name"], *rest], prog="proxima solve", instructions=("config",))
    args = args.replace(run_dir=args.run.run_dir or default_run_dir(args))
    agent = train(args)
    trained = _process_seconds()
    steps = read_json(os.path.join(args.run.run_dir, "agent.json"))["global_step"]
    scored = ""
    best = os.path.join(args.run.run_dir, "best")
    if args.run.save_best and os.path.isdir(
        best
    ):  # PPO's policy can get worse late in a run: score the best one
        from proxima.agent import load

        agent, meta = load(best), read_json(os.path.join(best, "agent.json"))
        chosen = "the best of the evaluations during training"
        if "rescore_return" in meta:
            chosen = f"the highest of the {len(meta['rescored'])} best evaluations rescored on {meta['rescore_episodes']} episodes"
        scored = f" (scored: {best}, {chosen}, from step {meta['global_step']:,})"
    deterministic = task["solve"].get("deterministic", True)
    returns = evaluate(agent, SOLVE_EPISODES, deterministic=deterministic, seed=args.run.seed)
    threshold = task["solve"]["threshold"]
    solved = returns.mean() >= threshold
    save_evaluation(args.run.run_dir, returns, deterministic=deterministic, seed=args.run.seed, threshold=threshold,
                    solved=bool(solved))  # fmt: skip
    print(
        f"{env_id} {'solved' if solved else 'NOT solved'}: {returns.mean():.1f} ± {returns.std():.1f} over "
        f"{SOLVE_EPISODES} {'deterministic' if deterministic else 'sampled'} episodes of Gymnasium's env "
        f"(threshold {threshold:g}), after {steps:,} steps{scored}; trained in {trained:.1f} s from process start "
        f"({_process_seconds():.1f} s with the evaluation); run directory: {args.run.run_dir}"
    )
    return 0 if solved else 1


SOLVE_EPISODES = 100


def cmd_eval(argv: list[str]) -> int:
    from proxima.agent import load
    from proxima.config import parse_env_kwargs
    from proxima.evaluate import evaluate, save_evaluation

    args = _parse(EvalArgs, argv, "proxima eval")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    agent = load(args.run_dir)
    video_dir = os.path.join(args.run_dir, "eval-videos") if args.video else None
    returns = evaluate(
        agent, args.episodes, deterministic=args.deterministic, seed=args.seed, video_dir=video_dir,
        env_id=args.env_id, env_kwargs=env_kwargs,
    )  # fmt: skip
    videos = sorted(f for f in os.listdir(video_dir) if f.endswith(".mp4")) if video_dir else []
    save_evaluation(args.run_dir, returns, deterministic=args.deterministic, seed=args.seed,
                    videos=[os.path.join("eval-videos", f) for f in videos])  # fmt: skip
    print(
        f"{args.env_id or agent.env_id}: mean_return={returns.mean():.2f} std_return={returns.std():.2f} "
        f"episodes={len(returns)} deterministic={args.deterministic}"
    )
    if videos:
        print(f"videos: {', '.join(os.path.join(video_dir, f) for f in videos)}")
    return 0


@dataclass
class ExportArgs:
    run_dir: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """the run directory written by `proxima train`"""
    format: Annotated[str, tyro.conf.arg(metavar="onnx|torchscript")] = "onnx"
    """onnx (run by onnxruntime, from any language; needs the export extra) or torchscript (torch.jit.load)"""
    output: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """the file to write, and FILE.json beside it (default: RUN_DIR/policy.onnx or RUN_DIR/policy.pt)"""


def cmd_export(argv: list[str]) -> int:
    from proxima.export import export

    args = _parse(ExportArgs, argv, "proxima export")
    path = export(args.run_dir, args.format, args.output)
    print(f"wrote {path} and {path}.json")
    return 0


@dataclass
class CheckEnvArgs:
    env_id: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="ENV_ID")]
    """a registered id, or module:EnvName-v0 to import module (from the working directory too) first"""
    env_kwargs: Annotated[str | None, tyro.conf.arg(metavar="JSON")] = None
    """keyword arguments of the env's constructor, as JSON: --env-kwargs '{"size": 8}'"""
    num_envs: int = 4
    """the env count at which to choose the backend and take the random steps"""


def cmd_check_env(argv: list[str]) -> int:
    """Exit status 0 when proxima will train on the env, 2 when it will not (each problem on one line)."""
    from proxima.checkenv import check_env
    from proxima.config import parse_env_kwargs

    args = _parse(CheckEnvArgs, argv, "proxima check-env")
    report, warnings, problems = check_env(args.env_id, parse_env_kwargs(args.env_kwargs), args.num_envs)
    print(f"{args.env_id}:")
    for line in report:
        print(f"  {line}")
    for line in warnings:
        print(f"warning: {line}")
    for line in problems:
        print(f"proxima check-env: error: {line}", file=sys.stderr)
    if problems:
        return 2
    print(f"proxima will train on {args.env_id}")
    return 0


@dataclass
class PlotArgs:
    run_dirs: Annotated[tuple[str, ...], tyro.conf.Positional]
    """one or more run directories written by `proxima train`"""
    output: str = "learning_curves.png"
    """the PNG to write"""


def cmd_plot(argv: list[str]) -> int:
    from proxima.plotting import plot_runs

    args = _parse(PlotArgs, argv, "proxima plot")
    if not args.run_dirs:
        raise UserError("give at least one run directory")
    if not args.output.endswith(".png"):
        raise UserError(f"--output must be a .png file, got {args.output!r}")
    labels = [os.path.basename(os.path.normpath(d)) for d in args.run_dirs]
    if len(set(labels)) < len(labels):  # same last component: label by the whole path
        labels = list(args.run_dirs)
    plot_runs({label: [d] for label, d in zip(labels, args.run_dirs, strict=True)}, args.output)
    print(f"wrote {args.output}")
    return 0


@dataclass
class ReportArgs:
    paths: Annotated[tuple[str, ...], tyro.conf.Positional]
    """run directories (`proxima train`'s), sweep or compare directories, or a directory of runs (as `proxima
    probe --run-dir` writes): the runs that differ only in their seed form a group, with its mean and band"""
    output: str | None = None
    """the HTML file to write (default: DIR/report.html for one directory, else report.html here)"""


def cmd_report(argv: list[str]) -> int:
    from proxima.report import write_report

    args = _parse(ReportArgs, argv, "proxima report")
    if not args.paths:
        raise UserError("give at least one run, sweep or compare directory")
    output = args.output or (
        os.path.join(args.paths[0], "report.html") if len(args.paths) == 1 else "report.html"
    )
    print(f"wrote {write_report(list(args.paths), output)}")
    return 0


def cmd_compare(argv: list[str]) -> int:
    from proxima.compare import CompareArgs, compare

    return _print_results(compare(_parse(CompareArgs, argv, "proxima compare")), "compare")


def _print_results(results, command: str) -> int:
    """The table and where it is; exit status 1 if a run failed (each failure was said as it happened)."""
    out = results.output_dir
    print(f"\n{results}", end="")
    written = [f"{out}/{f}" for f in ("results.md", "results.json", "learning_curves.png", "report.html")
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


SWEEP_HELP = """usage: proxima sweep [SWEEP FLAGS] [TRAIN FLAGS]
       proxima sweep --resume SWEEP_DIR [--executor E] [--address A] [--max-concurrent N]

Trains every combination of the --grid values with every seed, each as an ordinary `proxima train` run in
its own directory under the sweep directory (as a Ray Tune trial, by default), then writes a table of the
final returns over seeds per setting (results.md), the learning curves with bands (learning_curves.png)
and results.json. Every run can be evaluated, plotted or resumed on its own.

  --seeds SEEDS          the seeds of every setting: 1-10, 1,3,5 or 4 (default: 1-3)
  --grid NAME=V1,V2...   one setting and its values, repeatable: --grid learning_rate=3e-4,1e-3 --grid
                         ent_coef=0,0.01 (a train flag's name; a value of several numbers, as for
                         hidden_sizes, has them separated by spaces: --grid "hidden_sizes=64 64,256 256")
  --executor ray|local   ray: each run a Ray Tune trial (needs the ray extra); local: one after another in this
                         process (default: ray)
  --cpus-per-trial N     CPUs Ray gives each run; a run's torch threads equal them (default: 1)
  --max-concurrent N     at most N runs at once (default: as many as the CPUs allow)
  --address A            join a running Ray cluster: auto, or ray://HOST:10001 (default: the one RAY_ADDRESS
                         names, else a new local Ray instance); every node must see the sweep directory
  --output-dir DIR       the sweep directory (default: runs/sweep__{env}__{unix time})
  --resume SWEEP_DIR     finish a sweep that was stopped: finished and failed runs are kept, interrupted ones
                         resume from their checkpoints, the others start
Every other flag is a `proxima train` flag (--config, --env-id, --total-timesteps, ...): see proxima train --help.
Exit status 1 if a run failed (a NaN, a crashed env: its reason is in results.md, and the other runs go on;
--resume keeps it failed) or did not run. A run that crashed on anything else (a bug) runs again on --resume.
"""

_SWEEP_FLAGS = ("--seeds", "--grid", "--executor", "--cpus-per-trial", "--max-concurrent", "--address",
                "--output-dir", "--resume")  # fmt: skip


def cmd_sweep(argv: list[str]) -> int:
    from proxima.sweeps import default_output_dir, parse_seeds, resume_sweep, sweep

    if "-h" in argv or "--help" in argv:
        print(SWEEP_HELP, end="")
        return 0
    given: dict[str, list[list[str]]] = {}
    for flag in _SWEEP_FLAGS:
        while True:
            argv, values = _pop_flag(argv, flag)
            if values is None:
                break
            if len(values) != 1:
                raise UserError(f"{flag} takes one value, got {len(values)}: {' '.join(values) or '(none)'} "
                                "(see proxima sweep --help)")  # fmt: skip
            given.setdefault(flag, []).append(values)
    one = {flag: values[-1][0] for flag, values in given.items()}
    max_concurrent = _positive(one, "--max-concurrent")
    if "--resume" in one:
        extra = sorted(set(one) - {"--resume", "--executor", "--address", "--max-concurrent"}) + argv[:1]
        if extra:
            raise UserError(f"with --resume, only --executor, --address and --max-concurrent may be given, not "
                            f"{extra[0]} (the sweep's sweep.json holds the rest)")  # fmt: skip
        try:
            results = resume_sweep(
                one["--resume"], one.get("--executor"), one.get("--address"), max_concurrent
            )
        except TrainingInterrupted as e:
            return _sweep_interrupted(e, one["--resume"])
        return _print_results(results, "sweep")
    for flag in ("--seed", "--run-dir"):
        if _flag_value(argv, flag) is not None:
            raise UserError(f"proxima sweep sets {flag} of each run; give --seeds and --output-dir instead")
    settings = _grid_settings(argv, [values[0] for values in given.get("--grid", [])])
    out = one.get("--output-dir") or default_output_dir(settings[0][1].env.env_id)
    try:
        results = sweep(
            seeds=parse_seeds(one.get("--seeds", "1-3")),
            settings=settings,
            executor=one.get("--executor", "ray"),
            cpus_per_trial=_positive(one, "--cpus-per-trial") or 1,
            max_concurrent=max_concurrent,
            address=one.get("--address"),
            output_dir=out,
        )
    except TrainingInterrupted as e:
        return _sweep_interrupted(e, out)
    return _print_results(results, "sweep")


def _sweep_interrupted(e: TrainingInterrupted, out: str) -> int:
    """Ctrl-C or SIGTERM in a local sweep's run: how to finish the sweep (not the run alone), and exit status
    130 or 143."""
    print(f"proxima sweep: {e}; finish the sweep with: proxima sweep --resume {out}", file=sys.stderr)
    return e.exit_status


def _positive(given: dict[str, str], flag: str) -> int | None:
    if flag not in given:
        return None
    value = given[flag]
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"{flag} expects a positive integer, got {value!r}")
    return int(value)


def _grid_settings(argv: list[str], grid: list[str]):
    """Each combination of the ``--grid`` values as ``(label, PPOArgs)``: what ``proxima train`` would make
    of the train flags with that combination's flags added, so that values are read, checked and layered
    (an algo's defaults, a preset) exactly as on its command line."""
    import itertools

    from proxima.config import GROUP_OF

    names = set(GROUP_OF)
    axes = []
    for item in grid:
        name, equals, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not values.strip():
            raise UserError(f"--grid expects NAME=V1,V2,..., got {item!r}")
        if name not in names or name in ("seed", "run_dir"):
            raise UserError(f"--grid: {name!r} is not a setting a sweep can vary; accepted: the names of the "
                            "train flags (proxima train --help), such as learning_rate, apart from seed and run_dir")  # fmt: skip
        axes.append([(name, value.strip()) for value in values.split(",")])
    if len({axis[0][0] for axis in axes}) < len(axes):
        raise UserError("--grid names a setting twice; give all its values in one --grid NAME=V1,V2")
    settings = []
    for combination in itertools.product(*axes):
        flags = [
            token for name, value in combination for token in ("--" + name.replace("_", "-"), *value.split())
        ]
        label = ",".join(f"{name}={value}" for name, value in combination) or "base"
        settings.append(
            (label, parse_train_args(argv + flags, prog="proxima sweep", instructions=("config",)))
        )
    return settings


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
    "export": cmd_export,
    "check-env": cmd_check_env,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    command, rest = argv[0], argv[1:]
    # `module:Env-v0` imports module from the working directory, as under `python -m` (docs/ENVS.md)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, "")
    if command not in COMMANDS:
        print(
            f"proxima: error: unknown command {command!r}; accepted: {', '.join(COMMANDS)}", file=sys.stderr
        )
        return 2
    try:
        return COMMANDS[command](rest)
    except BrokenPipeError:  # `proxima presets | head`: the reader has all it wants
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # Python's advice: no second error at exit
        return 0
    except (UserError, EnvError, NonFiniteError) as e:
        if _debug():  # where it was raised, and what raised the env's exception (its cause)
            traceback.print_exc()
        print(f"proxima {command}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, UserError) else 1
    except TrainingInterrupted as e:
        print(
            f"proxima {command}: {e}; continue it with: proxima train --resume {e.run_dir}", file=sys.stderr
        )
        return e.exit_status


if __name__ == "__main__":
    sys.exit(main())
