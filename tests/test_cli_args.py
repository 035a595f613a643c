"""The CLI's arguments: the check before tyro, the grouped --help of every command that trains, and how errors end a command."""

import dataclasses
import json
import re
import sys

import pytest

import proxima
import proxima.commands
import proxima.commands.sweep
import proxima.run.config
import proxima.scale.trainer
from proxima.base.errors import EnvError, NonFiniteError, UserError
from proxima.commands import main
from proxima.commands.common import SECTIONS, parse_train_args
from proxima.run.config import GROUPS, PPOArgs, resolve_args


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--seed", "abc"], "--seed expects an integer, got 'abc'"),
        (["train", "--learning-rate=fast"], "--learning-rate expects a number, got 'fast'"),
        (["train", "--num-envs"], "--num-envs needs a value: an integer"),
        (["train", "--seed", "--cuda"], "--seed needs a value: an integer"),
        (["train", "--target-kl", "x"], "--target-kl expects a number or None, got 'x'"),
        (["train", "--hidden-sizes"], "--hidden-sizes needs a value: one or more integers"),
        (["train", "--hidden-sizes", "64", "wide"], "--hidden-sizes expects one or more integers, got 'wide'"),
        (["train", "--critic-hidden-sizes", "None", "64"], "--critic-hidden-sizes expects one or more integers or None, got 'None'"),
        (["train", "--cuda=maybe"], "--cuda takes no value, or true or false, got 'maybe'"),
        (["train", "--cuda", "maybe"], "unexpected argument 'maybe' after --cuda, which takes no value"),
        (["train", "--seeds", "3"], "unrecognized flag '--seeds'; did you mean --seed?"),
        (["train", "--config"], "--config needs a value: NAME|FILE"),
        (["train", "--resume"], "--resume needs a value: RUN_DIR"),
        (["train", "--resume", "r", "--seed", "3"], "with --resume, only --quiet, --total-timesteps, --torch-threads, --trust-code and the run's own --env-id"),
        (["probe", "--resume", "r"], "unrecognized flag '--resume'"),
        (["eval"], "missing RUN_DIR: the run directory written by `proxima train`"),
        (["eval", "a", "b"], "unexpected argument 'b'"),
        (["eval", "run", "--episodes", "many"], "--episodes expects an integer, got 'many'"),
        (["plot"], "missing RUN_DIR [RUN_DIR ...]: one or more run directories"),
        (["plot", "a", "--output", "x.png", "b"], "unexpected argument 'b'"),
        (["compare", "--executor", "dask"], "--executor expects one of auto, local, ray, got 'dask'"),
        (["compare", "--algos"], "--algos needs a value: one or more strings"),
    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_naming_the_flag_and_what_is_accepted(argv, message, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"proxima {argv[0]}: error: {message}"), lines[0]
    assert f"(see proxima {argv[0]} --help" in lines[0]


def test_values_tyro_accepts_pass_the_check():
    args = parse_train_args(
        ["--learning-rate", "1e-3", "--stop-return", "-3", "--target-kl", "None", "--critic-hidden-sizes", "16",
         "--critic-activation", "relu", "--hidden-sizes=8", "--run-dir", "None", "--torch-deterministic=false"]
    )  # fmt: skip  # a negative number is a value, not a flag
    assert (
        args.algorithm.learning_rate,
        args.run.stop_return,
        args.algorithm.target_kl,
        args.run.run_dir,
    ) == (
        1e-3,
        -3,
        None,
        None,
    )
    assert (args.network.hidden_sizes, args.network.critic_hidden_sizes, args.network.critic_activation) == (
        (8,),
        (16,),
        "relu",
    )
    assert args.run.torch_deterministic is False


def test_a_parser_failure_the_check_misses_is_one_generic_line(monkeypatch, capsys):
    def boxed(*args, **kwargs):  # whatever a tyro release prints, it is not read
        print("╭─ Parsing error ─╮\n│ bad: thing │")
        print("╰───────╯", file=sys.stderr)
        raise SystemExit(2)

    monkeypatch.setattr(proxima.commands.argv.tyro, "cli", boxed)
    assert main(["eval", "run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("proxima eval: error: cannot parse the arguments 'run' (see proxima eval --help")


def help_sections(out: str, names: list[str]) -> dict[str, str]:
    """``--help``'s text of each section titled ``NAME options``, which must stand in the order of ``names``."""
    starts = [out.index(f"{name.replace('_', '-')} options") for name in names]
    assert starts == sorted(starts), (names, starts)
    ends = [*starts[1:], len(out)]
    return {name: out[a:b] for name, a, b in zip(names, starts, ends, strict=True)}


def help_flags(text: str) -> list[str]:
    """The flags that open a row of ``--help``'s ``text`` (a help text wrapped onto its own row stands indented)."""
    return re.findall(r"^.{1,2}(--[a-z][a-z0-9-]*)", text, re.MULTILINE)


def test_train_help_lists_the_documents_flags_first_and_then_the_rest_by_topic(capsys):
    assert main(["train", "--config", "pendulum", "--help"]) == 0
    out = capsys.readouterr().out
    titles = [title for title, _, _ in SECTIONS]
    sections = help_sections(out, [titles[0], "train", *titles[1:], "instructions"])
    # the first section is the PPO tutorial's PPOArgs and CleanRL ppo.py's flags (docs/SEEDS.md), nothing else
    documents = ["--env-id", "--algo", "--total-timesteps", "--learning-rate", "--num-envs", "--num-steps",
                 "--anneal-lr", "--gamma", "--gae-lambda", "--num-minibatches", "--update-epochs", "--norm-adv",
                 "--clip-coef", "--clip-vloss", "--ent-coef", "--vf-coef", "--max-grad-norm", "--target-kl", "--seed",
                 "--torch-deterministic", "--cuda", "--track", "--wandb-project-name", "--wandb-entity",
                 "--capture-video", "--exp-name"]  # fmt: skip
    assert help_flags(sections["core"]) == documents
    assert "the settings of the source documents (docs/SEEDS.md)" in sections["core"]
    later = help_flags(out[out.index("train options") :])
    assert {"--resume-if-exists", "--self-play-every", "--team-reward", "--rollout-workers"} <= set(later)
    # every setting is a flag of exactly one section, and each section says what it holds
    settings = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    placed = [name for _, _, names in SECTIONS for name in names]
    assert sorted(placed) == sorted(settings) and "other options" not in out
    rows = help_flags(out)
    for title, about, names in SECTIONS:
        assert " ".join(about.split()[:4]) in sections[title], title
        assert help_flags(sections[title]) == ["--" + name.replace("_", "-") for name in names], title
    assert sorted(rows) == sorted([*(f"--{n.replace('_', '-')}" for n in placed), "--resume-if-exists",
                                   "--config", "--resume"])  # fmt: skip
    assert "--config NAME|FILE" in sections["instructions"] and "--resume RUN_DIR" in sections["instructions"]
    assert "--env.env-id" not in out and "--core.env-id" not in out
    assert (
        "Pendulum-v1" in sections["core"] and "CartPole-v1" not in out
    )  # the preset's default, not PPOArgs'


@pytest.mark.parametrize("preset", sorted(proxima.run.config.preset_names()))
def test_every_presets_help_prints_with_its_own_defaults(preset, capsys):
    # A preset's whole-number value for a float setting (cartpole-fast's "stop_return": 498) once crashed --help.
    assert main(["train", "--config", preset, "--help"]) == 0
    out = capsys.readouterr().out
    env_id = proxima.run.config.read_preset(preset).get("env_id")
    assert env_id is None or env_id in out, (preset, env_id)


def test_flags_on_a_preset_give_the_layered_settings(monkeypatch):
    seen = []
    monkeypatch.setattr(proxima.scale.trainer, "train", lambda args, **_: seen.append(args))
    argv = [
        "--config",
        "pendulum",
        "--seed",
        "3",
        "--hidden-sizes",
        "32",
        "32",
        "--no-anneal-lr",
        "--cuda",
        "False",
    ]
    assert main(["train", *argv]) == 0
    expected = resolve_args(config="pendulum", seed=3, hidden_sizes=(32, 32), anneal_lr=False, cuda=False)
    assert seen == [expected] and type(seen[0]) is PPOArgs
    assert (expected.env.env_id, expected.env.num_envs, expected.algorithm.anneal_lr, expected.run.cuda) == (
        "Pendulum-v1",
        8,
        False,
        False,
    )
    assert parse_train_args([]) == resolve_args() and parse_train_args(["--algo", "vpg"]) == resolve_args(
        algo="vpg"
    )
    assert dataclasses.fields(parse_train_args([])) == dataclasses.fields(PPOArgs)


@pytest.mark.parametrize("error,code", [(EnvError, 1), (NonFiniteError, 1), (UserError, 2)])
def test_errors_are_one_line_and_proxima_debug_adds_the_traceback(error, code, monkeypatch, capsys):
    message = "env 'Broken-v0' raised ValueError: boom; continue it with: proxima train --resume runs/x"

    def train(args, **_):
        try:
            raise ValueError("boom")
        except ValueError as cause:
            raise error(message) from cause

    monkeypatch.setattr(proxima.scale.trainer, "train", train)
    monkeypatch.delenv("PROXIMA_DEBUG", raising=False)
    assert main(["train"]) == code
    out, err = capsys.readouterr()
    assert out == "" and err == f"proxima train: error: {message}\n"
    monkeypatch.setenv("PROXIMA_DEBUG", "1")
    assert main(["train"]) == code
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ValueError: boom" in err and "direct cause" in err, err
    assert err.strip().splitlines()[-1] == f"proxima train: error: {message}"


def test_output_piped_into_a_reader_that_stops_early_gives_no_traceback():
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m proxima.commands presets | head -1", shell=True, capture_output=True, text=True
    )
    assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "command, own",
    [(["sweep"], ["--seeds", "--grid NAME=V1,V2,...", "--executor", "--resume SWEEP_DIR"]),
     (["probe"], ["--probes NAME"]),
     (["solve"], ["ENV_ID", "CartPole-v1"])],
)  # fmt: skip
def test_the_commands_that_train_show_their_own_flags_and_every_train_flag(command, own, capsys):
    """sweep, probe and solve parse as train does: their own dataclass beside the settings' sections."""
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert all(flag in out for flag in own), out
    titles = [title for title, _, _ in SECTIONS]
    own_section = [command[0]] if command != ["solve"] else []  # solve's own flag is its positional ENV_ID
    help_sections(out, [titles[0], *own_section, *titles[1:]])
    assert "--learning-rate" in out and "--hidden-sizes" in out and "--env.env-id" not in out


def test_a_sweep_grid_is_expanded_once_and_parsed_as_train_flags():
    settings = proxima.commands.sweep._grid_settings(
        ["--num-envs", "2", "--grid", "learning_rate=1e-3,1e-4"],
        ["learning_rate=1e-3,1e-4", "hidden_sizes=64 64,16"],
    )
    assert [label for label, _ in settings] == [
        "learning_rate=1e-3,hidden_sizes=64 64", "learning_rate=1e-3,hidden_sizes=16",
        "learning_rate=1e-4,hidden_sizes=64 64", "learning_rate=1e-4,hidden_sizes=16",
    ]  # fmt: skip
    assert [(a.algorithm.learning_rate, a.network.hidden_sizes, a.env.num_envs) for _, a in settings] == [
        (1e-3, (64, 64), 2), (1e-3, (16,), 2), (1e-4, (64, 64), 2), (1e-4, (16,), 2)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--batch-size", "64"], "unrecognized flag '--batch-size'; in proxima: --num-minibatches"),
        (["train", "--normalize"], "unrecognized flag '--normalize'; in proxima: --norm-obs and --norm-reward"),
        (["train", "--n_epochs", "4"], "unrecognized flag '--n_epochs'; in proxima: --update-epochs"),
        (["train", "--seed=-1"], "--seed must be an integer from 0 to 2**32 - 1 (4294967295), got -1"),
        (["train", "--seed", "4294967295", "--num-seeds", "2"], "--seed must be an integer from 0 to 2**32 - 1 (4294967295), got seeds 4294967295 to 4294967296"),
        (["check-env", "CartPole-v1", "--num-envs", "0"], "--num-envs must be a positive integer, got 0"),
        (["check-env", "CartPole-v1", "--env-kwargs", '{"render_mode": "rgb_array"}'],
         "CartPole-v1: --env-kwargs cannot set render_mode; proxima asks the env for rgb_array frames"),
        (["train", "--env-id", "Acrobot-v1", "--env-kwargs", '{"render_mode": "human"}'],
         "Acrobot-v1: --env-kwargs cannot set render_mode"),
        (["presets", "cartpole-fast", "extra"], "unexpected argument 'extra'"),
    ],
)  # fmt: skip
def test_what_sb3_and_cleanrl_users_type_first_is_one_line(argv, message, tmp_path, capsys):
    if argv[0] == "train":
        argv = [*argv, "--run-dir", str(tmp_path / "run"), "--total-timesteps", "512"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"proxima {argv[0]}: error: {message}"), err
    assert not (tmp_path / "run").exists()


def test_presets_help_says_what_the_command_does(capsys):
    for flag in ("--help", "-h"):
        assert main(["presets", flag]) == 0
        assert capsys.readouterr().out.startswith("usage: proxima presets [NAME]")


def test_a_run_without_its_agent_says_why_and_what_to_do(tmp_path, capsys, monkeypatch):
    from proxima.run.callbacks import Callback

    class Stop(Callback):
        def on_update_end(self, run, result):
            if run.updates_done == 2:
                raise KeyboardInterrupt

    run_dir = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        proxima.train(total_timesteps=2048, checkpoint_every=1, run_dir=run_dir, quiet=True, callbacks=[Stop()],
                      torch_threads=1, plot=False, report=False)  # fmt: skip
    for command in (["eval", run_dir], ["export", run_dir]):
        assert main(command) == 2
        assert f"has not finished, so it has no agent yet; continue it to its end first: proxima train --resume " \
            f"{run_dir}" in capsys.readouterr().err  # fmt: skip
    # --track without a W&B login: one line, and the directory it left says what to do on the next start. In
    # a process of its own: W&B keeps the settings it read (the mode, the home) for the rest of a process.
    import os
    import subprocess

    env = {**os.environ, "HOME": str(tmp_path), "WANDB_API_KEY": ""}
    env.pop("WANDB_MODE", None)
    tracked = str(tmp_path / "tracked")
    argv = [sys.executable, "-m", "proxima", "train", "--total-timesteps", "512", "--run-dir", tracked, "--track",
            "--quiet", "--torch-threads", "1"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--track could not start Weights & Biases" in done.stderr
    assert main(["train", "--total-timesteps", "512", "--run-dir", tracked, "--quiet"]) == 2
    assert "holds a run that stopped before its first checkpoint; remove it, or give --resume-if-exists" in (
        capsys.readouterr().err
    )
    assert main(["eval", tracked]) == 2
    assert "stopped before its first checkpoint, so train it again" in capsys.readouterr().err


def test_a_second_ctrl_c_stops_at_once_in_one_line(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what the checkpointing callback raises at a second Ctrl-C

    monkeypatch.setattr(proxima.scale.trainer, "train", interrupted)
    assert main(["train", "--total-timesteps", "512"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "proxima train: stopped at once by a second interrupt; a run keeps its last checkpoint (proxima train "
        "--resume RUN_DIR continues from it)"
    ]


def test_check_env_gives_the_train_command_with_the_kwargs_it_checked_and_resume_refuses_a_file(
    tmp_path, capsys
):
    kwargs = ["--env-kwargs", '{"sutton_barto_reward": true}']
    # train's --env-id spelling of ENV_ID is taken too, in either form
    for env_id in (["CartPole-v1"], ["--env-id", "CartPole-v1"], ["--env-id=CartPole-v1"]):
        assert main(["check-env", *env_id, *kwargs]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last == (
            "proxima will train on CartPole-v1 (proxima train --env-id CartPole-v1 --env-kwargs "
            """'{"sutton_barto_reward": true}')"""
        )
    (tmp_path / "config.json").write_text("{}")
    assert main(["train", "--resume", str(tmp_path / "config.json")]) == 2
    assert "config.json' is a file; give a directory written by `proxima train`" in capsys.readouterr().err


def test_the_version_and_a_mistyped_command(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"proxima {proxima.__version__}\n"
    assert main(["trian"]) == 2
    assert capsys.readouterr().err.startswith("proxima: error: unknown command 'trian'; did you mean train?")


def test_settings_errors_name_flags_on_the_command_line_and_fields_in_python():
    from proxima.commands.argv import in_flags
    from proxima.run.config import PPOArgs

    said = in_flags(
        "num_minibatches=3 does not divide num_envs x num_steps; 'num_envs' in config.json", PPOArgs
    )
    assert said == "--num-minibatches 3 does not divide --num-envs x --num-steps; 'num_envs' in config.json"
    # a one-word field is a flag only where it opens the message: elsewhere it is prose
    assert in_flags("gamma must be in (0, 1]", PPOArgs) == "--gamma must be in (0, 1]"
    assert in_flags("the encoder's features and the seed", PPOArgs) == "the encoder's features and the seed"
    assert in_flags("max_cycles must be positive", PPOArgs) == "max_cycles must be positive"  # not a setting
    # sweep and tune name settings as Python does (--grid num_envs=4,8): only the flags typed become flags
    said = in_flags("num_envs must be positive; clip_coef too", PPOArgs, typed={"--grid", "--clip-coef"})
    assert said == "num_envs must be positive; --clip-coef too"
    with pytest.raises(proxima.UserError, match="^num_envs must be a positive integer"):
        proxima.train(env_id="CartPole-v1", num_envs=0)


@pytest.mark.parametrize("command, metavar", [("plot", "RUN_DIR [RUN_DIR ...]"), ("report", "DIR [DIR ...]")])
def test_the_directories_plot_and_report_need_show_as_required(command, metavar, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"proxima {command} [-h] {metavar} [--output" in out and "(required)" in out and "[[" not in out
    assert main([command]) == 2
    assert f"missing {metavar}" in capsys.readouterr().err


def test_a_count_written_as_a_whole_float_is_that_integer(capsys):
    """SB3's and rl-zoo's configs write total_timesteps as 1e6; a count that is not whole stays refused."""
    args = parse_train_args(["--total-timesteps", "1e5", "--num-envs=8e0", "--hidden-sizes", "6.4e1", "32"])
    assert (args.algorithm.total_timesteps, args.env.num_envs, args.network.hidden_sizes) == (
        100_000,
        8,
        (64, 32),
    )
    for value in ("1.5", "1e400", "nan"):
        assert main(["train", "--total-timesteps", value]) == 2
        assert f"--total-timesteps expects an integer, got '{value}'" in capsys.readouterr().err


def test_a_runs_config_json_is_a_config_for_another_run(tmp_path):
    first = tmp_path / "a"
    assert main(["train", "--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "128",
                 "--hidden-sizes", "8", "--ent-coef", "0.02", "--run-dir", str(first), "--quiet", "--no-plot",
                 "--no-report"]) == 0  # fmt: skip
    args = parse_train_args(["--config", str(first / "config.json"), "--seed", "7"])
    again = proxima.run.config.PPOArgs.from_json(json.loads((first / "config.json").read_text()))
    assert args.run.seed == 7 and args.run.run_dir is None  # a run directory of its own
    assert args.replace(seed=again.run.seed, run_dir=str(first)) == again


@pytest.mark.parametrize(
    "name, value, said",
    [("num_envs", 0, "num_envs must be a positive integer, got 0"),
     ("gamma", 2.0, "gamma must be in (0, 1], got 2.0"),
     ("target_kl", -1.0, "target_kl must be positive when given, got -1.0"),
     ("seed", -1, "seed must be an integer from 0 to 2**32 - 1 (4294967295), got -1")],
)  # fmt: skip
def test_a_bad_value_is_said_alike_from_flags_a_config_file_keywords_and_the_settings_class(
    name, value, said, tmp_path, capsys
):
    """One check, declared beside the setting (config.Must): the CLI only writes the setting as its flag."""
    flag = "--" + name.replace("_", "-")
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({name: value}))
    for argv in (["train", flag, str(value)], ["train", "--config", str(config)]):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"proxima train: error: {said.replace(name, flag, 1)}\n"
    group = proxima.run.config.GROUP_OF[name]
    made = {group: dataclasses.replace(getattr(PPOArgs(), group), **{name: value})}
    for make in (
        lambda: PPOArgs.of(**{name: value}),
        lambda: PPOArgs(**made),
        lambda: proxima.train(**{name: value}),
    ):
        with pytest.raises(UserError) as e:
            make()
        assert str(e.value) == said
