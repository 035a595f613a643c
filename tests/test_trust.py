"""A run directory is data, never code (docs/SECURITY.md): tampered copies of real runs, sweeps and searches name
a module that would leave a mark if imported, and no command imports it unless the user names it again or
passes --trust-code."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import proxima
from proxima.base import trust
from proxima.base.errors import UserError
from proxima.run.config import PPOArgs

TINY = dict(env_id="CartPole-v1", total_timesteps=256, num_envs=2, num_steps=64, quiet=True, plot=False,
            report=False)  # fmt: skip
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACTORY = "tests.fixtures.wild_envs:Float64Obs"

# Importing this module leaves MARKER beside it: every test below checks that no command made it.
PROBE = """
import os, pathlib
pathlib.Path(os.path.join(os.path.dirname(__file__), "MARKER")).write_text("imported")
make = lambda **kwargs: None
class Encoder:
    pass
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run = tmp_path_factory.mktemp("finished") / "run"
    proxima.train(run_dir=str(run), checkpoint_every=1, **TINY)
    return run


@pytest.fixture
def probe(tmp_path):
    """A directory holding the module ``mark_on_import``, and the MARKER that importing it would write."""
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "mark_on_import.py").write_text(PROBE)
    return folder, folder / "MARKER"


def _copy(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _proxima(argv, folder, cwd=None):
    """``python -m proxima`` with ``folder`` on PYTHONPATH, so that the probe would import if asked for."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), ROOT])}
    return subprocess.run([sys.executable, "-m", "proxima", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, stdin=subprocess.DEVNULL)  # fmt: skip


def _refused(done, what):
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"names the {what}" in done.stderr and "--trust-code" in done.stderr, done.stderr


def _agent_factory(data):
    data["env_source"] = {"env_factory": "mark_on_import:make", "env_kwargs": {"args": ["true"]}}


def _agent_encoder(data):
    data["network"]["network"]["encoder"] = "mark_on_import:Encoder"


def _config_factory(data):
    data["env"]["env_factory"] = "mark_on_import:make"


def _config_env_id(data):
    data["env"]["env_id"] = "mark_on_import:Marked-v0"


@pytest.mark.parametrize(
    "command, file, change, what",
    [
        (["eval", "{run}", "--episodes", "1"], "agent.json", _agent_factory, "env factory"),
        (["eval", "{run}", "--episodes", "1"], "agent.json", _agent_encoder, "encoder"),
        (["export", "{run}", "--format", "torchscript"], "agent.json", _agent_encoder, "encoder"),
        (["train", "--resume", "{run}", "--total-timesteps", "512"], "config.json", _config_factory, "env factory"),
        (["train", "--resume", "{run}", "--total-timesteps", "512"], "config.json", _config_env_id, "env id"),
        (["train", "--run-dir", "{run}", "--resume-if-exists", "--total-timesteps", "512"], "config.json",
         _config_factory, "env factory"),
        (["train", "--config", "{run}/config.json", "--run-dir", "{run}/again"], "config.json", _config_factory,
         "env factory"),
    ],
)  # fmt: skip
def test_a_tampered_run_runs_no_code_and_changes_nothing(
    finished, tmp_path, probe, command, file, change, what
):
    folder, marker = probe
    copy = _copy(finished, tmp_path)
    # an unfinished run for the resumes: the checkpoint says so, as one that was stopped
    if "--resume" in command:
        from proxima.base.files import read_checkpoint, write_checkpoint

        tensors, meta = read_checkpoint(str(copy / "checkpoint.safetensors"))
        write_checkpoint(str(copy / "checkpoint.safetensors"), tensors, meta | {"finished": False})
    _edit(copy / file, change)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    done = _proxima([a.format(run=copy) for a in command], folder)
    if "--config" in command:  # a settings file offers no switch: the user names the factory on the line
        assert done.returncode == 2 and "names the env factory" in done.stderr, done.stderr
        assert "--trust-code" not in done.stderr
    else:
        _refused(done, what)
    assert not marker.exists()
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before


def test_trust_code_imports_what_the_run_names(finished, tmp_path, probe):
    folder, marker = probe
    copy = _copy(finished, tmp_path)
    _edit(copy / "agent.json", _agent_encoder)
    done = _proxima(["eval", str(copy), "--episodes", "1", "--trust-code"], folder)
    assert marker.exists()  # the switch does what it says: the run's module was imported
    assert done.returncode == 2 and "no nn.Module class 'Encoder'" in done.stderr, done.stderr


def test_this_module_is_not_imported_to_see_whether_it_holds_an_encoder(finished, tmp_path):
    """``import this`` prints the Zen of Python: the import itself is the side effect."""
    copy = _copy(finished, tmp_path)
    _edit(copy / "agent.json", lambda d: d["network"]["network"].update(encoder="this:X"))
    done = subprocess.run(
        [sys.executable, "-m", "proxima", "eval", str(copy)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Beautiful is better" not in done.stdout + done.stderr
    with pytest.raises(UserError, match="names the encoder 'this:X'"):
        proxima.load(str(copy))
    assert "this" not in sys.modules


def test_a_factory_named_again_is_made_and_a_registered_id_needs_nothing(tmp_path):
    run = tmp_path / "run"
    # trained in another process, so that this one was given nothing
    env = {**os.environ, "PYTHONPATH": ROOT}
    argv = [sys.executable, "-m", "proxima", "train", "--env-factory", FACTORY, "--run-dir", str(run),
            "--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64", "--quiet", "--no-plot",
            "--no-report"]  # fmt: skip
    subprocess.run(argv, check=True, env=env, cwd=str(tmp_path))
    evaluate = [sys.executable, "-m", "proxima", "eval", str(run), "--episodes", "2"]
    refused = subprocess.run(evaluate, capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert refused.returncode == 2 and f"names the env factory {FACTORY!r}" in refused.stderr, refused.stderr
    named = subprocess.run([*evaluate, "--env-factory", FACTORY], capture_output=True, text=True, env=env)
    assert named.returncode == 0 and "episodes=2" in named.stdout, named.stderr
    resume = [sys.executable, "-m", "proxima", "train", "--resume", str(run), "--quiet", "--total-timesteps"]
    refused = subprocess.run([*resume, "512"], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "names the env factory" in refused.stderr, refused.stderr
    ok = subprocess.run([*resume, "512", "--env-factory", FACTORY], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    other = "tests.fixtures.wild_envs:IntReward"  # not the run's: a resume keeps its settings
    done = subprocess.run([*resume, "1024", "--env-factory", other], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and f"has the env factory {FACTORY!r}, and {other!r} was given" in done.stderr
    done = subprocess.run(
        [*resume, "1024", "--env-id", "Acrobot-v1"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2 and "a resumed run keeps its settings" in done.stderr, done.stderr


def test_what_this_process_was_given_needs_no_switch(tmp_path):
    """A notebook that trains on its own encoder class, then loads the run, names the class itself."""
    from tests.fixtures.user_encoders import VectorEncoder

    run = str(tmp_path / "run")
    proxima.train(encoder=VectorEncoder, run_dir=run, **TINY)
    agent = proxima.load(run)
    assert agent.model.spec.network.encoder == "tests.fixtures.user_encoders:VectorEncoder"


def test_module_of_each_kind_of_id():
    assert trust.module_of("env_id", "CartPole-v1") is None
    assert trust.module_of("env_id", "ALE/Pong-v5") is None
    assert trust.module_of("env_id", "vmas:balance") is None
    assert trust.module_of("env_id", "object:mine.Env") is None
    assert trust.module_of("env_id", "lab.envs:Maze-v0") == "lab.envs"
    assert trust.module_of("env_id", "pettingzoo:lab.game") == "lab.game"
    assert (
        trust.module_of("env_id", "selfplay:pettingzoo.classic.connect_four_v3")
        == "pettingzoo.classic.connect_four_v3"
    )
    assert trust.module_of("env_factory", "<lambda>") is None
    assert trust.module_of("encoder", "nature-cnn") is None
    # a known package's own envs pass; the same prefix on another module does not
    trust.check("f", {"env_id": "selfplay:pettingzoo.classic.connect_four_v3"})
    with pytest.raises(UserError, match="would import the module 'subprocess'"):
        trust.check("f", {"env_id": "pettingzoo:subprocess"})
    with pytest.raises(
        UserError, match="would import the module 'gymnasium'"
    ):  # called with the file's kwargs
        trust.check("f", {"env_factory": "gymnasium:make"})


def test_a_tampered_sweep_plan_runs_no_code(tmp_path, probe, capsys):
    folder, marker = probe
    out = tmp_path / "sweep"
    proxima.sweep(seeds=[1], executor="local", output_dir=str(out), **TINY)
    for trial in ("base__seed1",):
        shutil.rmtree(out / trial)  # to run again on --resume
    _edit(
        out / "sweep.json",
        lambda d: d["trials"][0]["config"]["env"].update(env_factory="mark_on_import:make"),
    )
    done = _proxima(["sweep", "--resume", str(out), "--executor", "local"], folder)
    _refused(done, "env factory")
    assert not marker.exists() and not (out / "base__seed1").exists()


def test_a_tampered_search_plan_runs_no_code(tmp_path, probe):
    from proxima.base.files import write_json
    from proxima.scale import tuning

    folder, marker = probe
    out = tmp_path / "tune"
    out.mkdir()
    base = PPOArgs.of(**TINY)
    spec = {"learning_rate": tuning.spec_of("learning_rate", "loguniform:1e-4:1e-3")}
    plan = tuning._plan(base, spec, "random", 2, "return", "max", 1, "fifo",
                        None, 1, None)  # fmt: skip
    plan["samples"] = [{"name": "s0", "settings": {"encoder": "mark_on_import:Encoder"}}]
    write_json(str(out / "tune.json"), plan)
    done = _proxima(["tune", "--resume", str(out)], folder)
    _refused(done, "encoder")
    assert not marker.exists()


def test_a_module_beside_the_run_is_not_on_evals_path(finished, tmp_path):
    """``proxima eval .`` inside a downloaded run: a .py file that came with it is no module to import, even
    with --trust-code, since the working directory is not on the path of a command that reads a run."""
    copy = _copy(finished, tmp_path)
    (copy / "mark_on_import.py").write_text(PROBE)
    _edit(copy / "agent.json", _agent_encoder)
    done = subprocess.run([sys.executable, "-m", "proxima", "eval", ".", "--trust-code"], capture_output=True,
                          text=True, cwd=str(copy), env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # fmt: skip
    assert done.returncode == 2 and "cannot be imported" in done.stderr, done.stderr
    assert not (copy / "MARKER").exists()
