"""PPOArgs by flat names, as a CleanRL script writes its ``Args`` (``PPOArgs(env_id=..., clip_coef=...)``,
``args.env_id``), beside the groups; and the names of other libraries refused with proxima's, in Python as on the
command line, from the one table (``proxima.run.config.FOREIGN``)."""

import dataclasses
import re

import pytest

import proxima
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.policy.networks import NetworkSettings
from proxima.run.config import FOREIGN, GROUP_OF, GROUPS, AlgoSettings, EnvSettings, PPOArgs, RunSettings


def test_flat_construction_equals_grouped_construction():
    flat = PPOArgs(env_id="Acrobot-v1", num_envs=8, clip_coef=0.1, hidden_sizes=[32, 32], seed=3)
    grouped = PPOArgs(
        env=EnvSettings(env_id="Acrobot-v1", num_envs=8),
        network=NetworkSettings(hidden_sizes=(32, 32)),
        algorithm=AlgoSettings(clip_coef=0.1),
        run=RunSettings(seed=3),
    )
    assert (
        flat
        == grouped
        == PPOArgs.of(env_id="Acrobot-v1", num_envs=8, clip_coef=0.1, hidden_sizes=(32, 32), seed=3)
    )
    assert flat.network.hidden_sizes == (32, 32)  # the list became the field's tuple, as replace makes it
    assert flat != PPOArgs()
    # a group given whole beside flat names of the other groups
    assert PPOArgs(env=EnvSettings(env_id="Acrobot-v1"), clip_coef=0.1) == PPOArgs.of(
        env_id="Acrobot-v1", clip_coef=0.1
    )
    assert PPOArgs() == PPOArgs.of() and dataclasses.replace(flat, run=flat.run) == flat


def test_flat_names_read_the_groups_values():
    args = PPOArgs(env_id="Acrobot-v1", num_envs=8, num_steps=64, num_minibatches=4, gamma=0.9)
    assert (args.env_id, args.num_envs, args.gamma, args.hidden_sizes) == ("Acrobot-v1", 8, 0.9, (64, 64))
    assert args.env_id == args.env.env_id and args.gamma == args.algorithm.gamma
    # CleanRL's minibatch_size is proxima's samples_per_minibatch: 8 x 64 / 4
    assert args.minibatch_size == args.samples_per_minibatch == 128
    with pytest.raises(AttributeError, match="'PPOArgs' object has no attribute 'env_idd'"):
        args.env_idd  # noqa: B018


def test_a_flat_name_is_never_assigned():
    args = PPOArgs(env_id="Acrobot-v1")
    with pytest.raises(UserError) as e:
        args.env_id = "CartPole-v1"
    assert str(e.value) == (
        "PPOArgs.env_id cannot be assigned: settings are fixed once made; make new ones with args.replace(env_id=...)"
    )
    with pytest.raises(
        UserError, match=r"PPOArgs.env cannot be assigned: .*dataclasses.replace\(args, env=...\)"
    ):
        args.env = EnvSettings()
    with pytest.raises(
        UserError, match=r"PPOArgs.learning_rate cannot be .*with run.set\(learning_rate=...\)$"
    ):
        args.learning_rate = 1e-3  # the group's words, as args.algorithm.learning_rate = 1e-3 says them
    assert args.env_id == "Acrobot-v1" and args.replace(env_id="CartPole-v1").env_id == "CartPole-v1"


@pytest.mark.parametrize(
    "given,message",
    [
        (dict(env=EnvSettings(), env_id="x"),
         "PPOArgs got env_id beside env=EnvSettings(...), which holds it: give it inside the group "
         "(EnvSettings(env_id=...)) or drop env= and give every setting by its flat name"),
        (dict(algorithm=AlgoSettings(), seed=2, clip_coef=0.1), "PPOArgs got clip_coef beside algorithm=AlgoSettings(...)"),
        (dict(num_envz=2), "unknown settings ['num_envz']; did you mean num_envs?"),
        (dict(n_steps=64), "unknown settings ['n_steps']; in proxima: num_steps"),
        (dict(minibatch_size=64),
         "unknown settings ['minibatch_size']; in proxima: num_minibatches (a minibatch is num_envs x num_steps / "
         "num_minibatches samples); read it as args.minibatch_size or args.samples_per_minibatch"),
        (dict(batch_size=64), "unknown settings ['batch_size']; in proxima: num_minibatches (a minibatch is"),
        (dict(device="cpu"), "unknown settings ['device']; in proxima: cuda=True or cuda=False"),
        (dict(verbose=0), "unknown settings ['verbose']; in proxima: quiet=True (the console output is on by default)"),
        (dict(n_envs=2, zzz=1),
         "unknown settings ['n_envs', 'zzz']; n_envs: in proxima: num_envs; the accepted names are the fields of "
         "proxima.PPOArgs' groups"),
        (dict(num_envs=0), "num_envs must be a positive integer, got 0"),
    ],
)  # fmt: skip
def test_a_wrong_flat_name_is_refused_in_one_line(given, message):
    with pytest.raises(UserError) as e:
        PPOArgs(**given)
    said = str(e.value)
    assert "\n" not in said and said.startswith(message), said
    if not set(given) & set(GROUPS):  # replace takes flat names only: the same words
        with pytest.raises(UserError) as e:
            PPOArgs().replace(**given)
        assert str(e.value) == said


def test_replace_and_the_constructor_say_the_same_for_an_unknown_name():
    said = []
    for make in (
        lambda: PPOArgs(n_steps=64),
        lambda: PPOArgs().replace(n_steps=64),
        lambda: PPOArgs.of(n_steps=64),
    ):
        with pytest.raises(UserError) as e:
            make()
        said.append(str(e.value))
    assert said == ["unknown settings ['n_steps']; in proxima: num_steps"] * 3


def test_train_names_the_proxima_setting_of_an_sb3_keyword(tmp_path):
    with pytest.raises(UserError) as e:
        proxima.train(env_id="CartPole-v1", n_steps=64, total_timesteps=256, run_dir=str(tmp_path / "r"))
    assert str(e.value) == "unknown settings ['n_steps']; in proxima: num_steps"
    assert not (tmp_path / "r").exists()


def test_every_foreign_name_points_at_a_setting():
    for flag, words in FOREIGN.items():
        targets = [name.replace("-", "_") for name in re.findall(r"--(?:no-)?([a-z][a-z-]*)", words)]
        assert targets and set(targets) <= set(GROUP_OF), (flag, words)
        assert flag.removeprefix("--").replace("-", "_") not in GROUP_OF  # never a name proxima has itself


def test_the_cli_says_the_same_table_in_flags(tmp_path, capsys):
    # the CLI words every setting named in the table as its flag (argv.in_flags), its notes too
    run_dir = str(tmp_path / "run")
    assert main(["train", "--n-steps", "64", "--run-dir", run_dir]) == 2
    assert capsys.readouterr().err.strip() == (
        "proxima train: error: unrecognized flag '--n-steps'; in proxima: --num-steps "
        "(see proxima train --help for the accepted flags)"
    )
    assert main(["train", "--minibatch-size", "64", "--run-dir", run_dir]) == 2
    assert capsys.readouterr().err.strip() == (
        "proxima train: error: unrecognized flag '--minibatch-size'; in proxima: --num-minibatches (a minibatch is "
        "--num-envs x --num-steps / --num-minibatches samples) (see proxima train --help for the accepted flags)"
    )
    assert not (tmp_path / "run").exists()
