"""Helpers the commands share: a flag's value, the train flags composed with a command's own, the results of a sweep."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import typing
from typing import TYPE_CHECKING, Annotated, Any

import tyro

from proxima.base import files, trust
from proxima.base.errors import TrainingInterrupted, UserError
from proxima.commands.argv import field_docs, parse

if TYPE_CHECKING:  # imported lazily at run time: the CLI starts fast
    from proxima.run.config import PPOArgs


def with_module_functions(argv: list[str]) -> list[str]:
    """``argv`` with ``--algo MODULE``, a module of your functions named as the PPO tutorial's (not a name of the
    algorithm table, nor MODULE:NAME), as the flags it stands for: ``--algo ppo`` and ``--advantages
    MODULE:compute_advantages`` and so on for each function the module has that no flag typed names
    (``proxima.algo.algorithms.given_algorithm``; docs/ALGORITHMS.md)."""
    algo = flag_value(argv, "--algo")
    if algo is None or ":" in algo:
        return argv
    from proxima.algo.algorithms import given_algorithm
    from proxima.algo.custom import FUNCTIONS

    flags = {name: "--" + name.replace("_", "-") for name in FUNCTIONS}
    given = {"algo": algo, **{name: flag_value(argv, flag) for name, flag in flags.items()}}
    values = given_algorithm(given)
    if values["algo"] == algo:
        return argv
    kept, skip = [], False
    for arg in argv:  # every --algo (the last one won), then the flags it stands for
        if skip:
            skip = False
        elif arg == "--algo":
            skip = True
        elif not arg.startswith("--algo="):
            kept.append(arg)
    added = [
        x
        for name, flag in flags.items()
        if given[name] is None and values.get(name)
        for x in (flag, values[name])
    ]
    return [*kept, "--algo", values["algo"], *added]


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
        "--env-id, --env-factory, --encoder and --actor-critic named again, to import the code its files name "
        "(docs/SECURITY.md)",
    ),
}


# --help's sections, in order: (title, what it holds, the settings by their flat names). First the settings of the
# three source documents (docs/SEEDS.md), which a learner types: the PPO tutorial's PPOArgs and CleanRL ppo.py's
# Args beside it, its algorithm's settings before its run's as CleanRL orders them, with the homework's --algo; then
# the rest by topic. The command's own flags follow the first section. The flags are the same in any section: the
# sections are the help's and the parser's, and parse_command puts each setting back into its PPOArgs group.
SECTIONS: tuple[tuple[str, str, list[str]], ...] = (
    (
        "core",
        "the settings of the source documents (docs/SEEDS.md): the PPO tutorial's and CleanRL's ppo.py's, and "
        "the policy-gradient homework's --algo",
        "env_id algo total_timesteps learning_rate num_envs num_steps anneal_lr gamma gae_lambda num_minibatches "
        "update_epochs norm_adv clip_coef clip_vloss ent_coef vf_coef max_grad_norm target_kl seed "
        "torch_deterministic cuda track wandb_project_name wandb_entity capture_video exp_name".split(),
    ),
    (
        "env",
        "how the environment is made and stepped (docs/ENVS.md)",
        "env_kwargs env_factory env_backend async_envs".split(),
    ),
    (
        "network",
        "the networks (docs/NETWORKS.md)",
        "encoder actor_critic hidden_sizes activation critic_hidden_sizes critic_activation layer_norm init shared_network "
        "recurrent lstm_hidden_size lstm_layers action_dist precision".split(),
    ),
    (
        "normalization",
        "the running normalization of observations, rewards and value targets",
        "norm_obs norm_reward norm_value value_norm_horizon clip_obs clip_reward".split(),
    ),
    (
        "optimization",
        "the optimizer and the advantage estimator, beyond the core settings",
        "value_learning_rate adam_eps advantage".split(),
    ),
    (
        "your_functions",
        "your own functions in the loop, written to the PPO tutorial's signatures, in place of proxima's: "
        "MODULE:FUNCTION each, or --algo MODULE for a module's functions of the tutorial's names (docs/ALGORITHMS.md)",
        "advantages policy_loss value_loss entropy_loss".split(),
    ),
    (
        "schedules",
        "settings changed linearly over the run (docs/TRAINING.md)",
        "learning_rate_end clip_coef_end ent_coef_end action_std_end".split(),
    ),
    (
        "evaluation",
        "evaluation during training, stopping early and keeping the best agent",
        "eval_every eval_episodes stop_return save_best rescore_best rescore_episodes".split(),
    ),
    (
        "output",
        "the run directory: where it is, what it starts from, what is written there and to the console",
        "run_dir init_from checkpoint_every plot report log_info quiet".split(),
    ),
    (
        "scale",
        "scaling out: seeds batched in one process, threads, Ray rollout workers, one run on many processes "
        "(docs/SCALING.md)",
        "num_seeds torch_threads rollout_workers distributed".split(),
    ),
    (
        "multi_agent",
        "many agents (docs/MULTIAGENT.md)",
        "team_reward centralized_critic share_params actor_agent_index critic_agent_index".split(),
    ),
    (
        "self_play",
        "self-play in two-player selfplay: games (docs/MULTIAGENT.md)",
        "self_play_every self_play_pool self_play_latest self_play_random_moves".split(),
    ),
)


@functools.cache
def section_classes() -> tuple[type, ...]:
    """A frozen dataclass per section of ``SECTIONS``, its fields those of PPOArgs' groups (their types, tyro's
    markers, docs and defaults), in the section's order; a setting no section names is kept in a last one,
    ``other``, so that it stays a flag. The settings' constraints are left out: they are checked once, when the
    PPOArgs is made (``parse``)."""
    from proxima.run.config import GROUPS, Must

    settings = {}
    for cls in GROUPS.values():
        hints, docs = typing.get_type_hints(cls, include_extras=True), field_docs(cls)
        for f in dataclasses.fields(cls):
            hint, markers = hints[f.name], []
            if typing.get_origin(hint) is Annotated:
                hint, *markers = typing.get_args(hint)
            markers = [m for m in markers if not isinstance(m, Must)]
            kept = Annotated[(hint, *markers, tyro.conf.arg(help=docs.get(f.name)))]  # type: ignore[valid-type]
            settings[f.name] = (
                f.name,
                kept,
                dataclasses.field(default=f.default, default_factory=f.default_factory),
            )
    named = {name for *_, names in SECTIONS for name in names}
    rest = [name for name in settings if name not in named]
    layout = (*SECTIONS, *([("other", "the settings no section above names", rest)] if rest else []))
    classes = []
    for title, about, names in layout:
        made = dataclasses.make_dataclass(title, [settings[n] for n in names], frozen=True)
        made.__doc__ = about
        classes.append(made)
    return tuple(classes)


def command_flags(defaults: PPOArgs, instructions: dict[str, str | None], own: type | None = None):
    """A dataclass of ``SECTIONS``, the command's own flags (``own``, a dataclass named after the command) and
    the ``instructions``: one ``--help`` section each, titled by its docstring, with ``defaults`` as the
    settings' defaults, so that ``--help`` shows the values a run would get. The flags are flat (``--env-id``):
    ``parse`` puts the dataclass under ``OmitArgPrefixes``."""
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
    values = defaults.flat()
    sections = [
        (
            cls.__name__,
            cls,
            dataclasses.field(default=cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})),
        )
        for cls in section_classes()
    ]
    mine = [(own_name(own), own)] if own is not None else []
    return dataclasses.make_dataclass(
        "flags",
        [
            *sections[:1],
            *mine,
            *sections[1:],
            ("instructions", made, dataclasses.field(default_factory=made)),
        ],
        kw_only=True,  # the command's own flags may have no default (solve's ENV_ID), and follow the first section
    )


def own_name(own: type) -> str:
    return own.__name__.lower().removesuffix("flags")


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

    argv = with_module_functions(argv)
    given = {name: flag_value(argv, "--" + name) for name in instructions}
    algo = flag_value(argv, "--algo")
    config = given.get("config") or preset
    named = {name: flag_value(argv, "--" + name.replace("_", "-")) for name in trust.SETTINGS}  # typed again
    for setting, name in named.items():  # typed by the user: the settings may name them
        trust.remember(setting, name)
    chosen: dict[str, Any] = {"algo": algo} if algo is not None else {}
    defaults = resolve_args(config=config, named=named, **chosen)
    parsed = parse(command_flags(defaults, given, own), argv, prog, description, hidden)
    sections = [getattr(parsed, cls.__name__) for cls in section_classes()]
    values = {f.name: getattr(s, f.name) for s in sections for f in dataclasses.fields(s)}
    args = PPOArgs(
        **{g: cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)}) for g, cls in GROUPS.items()}
    )
    return (getattr(parsed, own_name(own)) if own is not None else None), args


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
