"""What a run directory's files say is checked, and what the file system refuses is said in one line (issue 63,
section 5): a read-only disk, a permission, a name too long; weights whose shapes, dtypes or values are not
the network's; a config.json or checkpoint that lacks what a resume needs; and the commands agree on whether
a run has finished, so that the command a message gives works."""

import errno
import json
import os
import re
import shutil
import signal
import subprocess

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import proxima
import proxima.base.files
import proxima.run.agent
import proxima.scale.trainer
from proxima.base.errors import FileAccessError
from proxima.base.files import (
    AGENT_JSON,
    CHECKPOINT,
    CONFIG_JSON,
    EVAL_JSON,
    METRICS,
    WEIGHTS,
    read_checkpoint,
    write_checkpoint,
)
from proxima.commands import main
from proxima.run.callbacks import Callback, Checkpointing

# 4 updates of 2 native CartPole envs x 128 steps, a checkpoint every 2; one thread (see test_resume.py)
RUN = [
    "--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128", "--seed", "3", "--torch-threads", "1",
    "--no-cuda", "--no-plot", "--no-report", "--quiet", "--checkpoint-every", "2",
]  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> str:
    """A finished run, never changed: copy it (``run_copy``) to change it."""
    run_dir = str(tmp_path_factory.mktemp("untrusted") / "run")
    assert main(["train", "--run-dir", run_dir, *RUN]) == 0
    return run_dir


@pytest.fixture
def run_copy(finished, tmp_path) -> str:
    copy = str(tmp_path / "copy")
    shutil.copytree(finished, copy)
    return copy


def _one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"proxima {command}: error: "), err
    return err[0][len(f"proxima {command}: error: ") :]


# --- a. what the file system refuses: one line, exit status 2 ---------------------------------------------------


@pytest.fixture
def read_only(finished, tmp_path):
    """A tmpfs holding a copy of the finished run, mounted read-only (mounting needs root, as the tests run)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        shutil.copytree(finished, mount / "run")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield str(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


READ_ONLY_COMMANDS = {
    "eval": (["eval", "{ro}/run", "--episodes", "2"], "{ro}/run/eval.json"),
    "eval-video": (["eval", "{ro}/run", "--episodes", "2", "--video"], "{ro}/run/eval-videos"),
    "export": (["export", "{ro}/run", "--format", "torchscript"], "{ro}/run/policy.pt"),
    "report": (["report", "{ro}/run"], "{ro}/run/report.html"),
    "resume": (["train", "--resume", "{ro}/run", "--total-timesteps", "2048"], "{ro}/run"),  # its lock
    "train": (["train", "--run-dir", "{ro}/new", *RUN], "{ro}/new"),
    "sweep": (
        ["sweep", "--executor", "local", "--output-dir", "{ro}/sweep", "--seeds", "1", *RUN[:6]],
        "{ro}/sweep",
    ),
    "tune": (
        ["tune", "--output-dir", "{ro}/tune", "--space", "learning_rate=choice:0.001", *RUN[:6]],
        "{ro}/tune",
    ),
}


@pytest.mark.parametrize("case", READ_ONLY_COMMANDS, ids=list(READ_ONLY_COMMANDS))
def test_a_read_only_disk_is_one_line_that_names_the_file(case, read_only, capsys):
    argv, path = READ_ONLY_COMMANDS[case]
    assert main([a.format(ro=read_only) for a in argv]) == 2
    assert _one_line(capsys, argv[0]) == f"cannot write {path.format(ro=read_only)}: read-only file system"


def test_eval_prints_the_score_before_it_writes_eval_json(read_only, capsys):
    assert main(["eval", f"{read_only}/run", "--episodes", "2", "--deterministic"]) == 2
    out, err = capsys.readouterr()
    assert re.fullmatch(
        r"CartPole-v1: mean_return=[\d.]+ std_return=[\d.]+ episodes=2 deterministic=True\n", out
    )
    assert err == f"proxima eval: error: cannot write {read_only}/run/eval.json: read-only file system\n"


LONG = "x" * 300  # a name longer than any file system takes (ENAMETOOLONG, whoever runs it)


def test_a_name_too_long_is_one_line(finished, tmp_path, capsys):
    for argv, path in [
        (["train", "--run-dir", str(tmp_path / LONG), *RUN], tmp_path / LONG),
        (
            ["export", finished, "--format", "torchscript", "--output", str(tmp_path / f"{LONG}.pt")],
            tmp_path / f"{LONG}.pt",
        ),
        (["report", finished, "--output", str(tmp_path / f"{LONG}.html")], tmp_path / f"{LONG}.html"),
    ]:
        assert main(argv) == 2
        assert _one_line(capsys, argv[0]) == (
            f"cannot write {path}: file name too long (the file system takes names of up to 255 bytes, on most)"
        )
    assert os.listdir(tmp_path) == []
    with pytest.raises(FileAccessError, match="file name too long"):  # the Python API: a UserError
        proxima.train(run_dir=str(tmp_path / LONG), total_timesteps=512, num_envs=2, quiet=True)


def test_a_name_the_file_system_takes_is_written_atomically_whatever_its_length(finished, tmp_path):
    """The temporary file of an atomic write is named after its file, and cut to the longest name allowed."""
    path = str(
        tmp_path / ("y" * 245 + ".pt")
    )  # 248 bytes, and 253 with .json: their temporary files 265, 270
    assert proxima.export(finished, "torchscript", path) == path
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(path), os.path.basename(path) + ".json"])


def _refused_at(monkeypatch, name: str, nth: int, code: int) -> None:
    """The ``nth`` atomic write of ``name`` (a file's name, or the end of its path) is refused with ``code``
    where its temporary file is made."""
    made, seen = proxima.base.files.temporary_beside, []

    def refuse(path: str):
        if os.path.basename(path) == name or path.endswith(os.sep + name):
            seen.append(path)
            if len(seen) == nth:
                raise OSError(code, os.strerror(code), path)
        return made(path)

    monkeypatch.setattr(proxima.base.files, "temporary_beside", refuse)


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (errno.EACCES, "permission denied"),
        (errno.EPERM, "operation not permitted"),
        (errno.EROFS, "read-only file system"),
    ],
    ids=["EACCES", "EPERM", "EROFS"],
)
def test_a_write_refused_during_training_keeps_the_checkpoint_and_the_command_it_gives_works(
    code, said, tmp_path, monkeypatch, capsys
):
    """Root may write where file modes forbid it, so the refusal is made up here (the read-only disk above is
    real): the second checkpoint's write is refused."""
    run_dir = str(tmp_path / "run")
    with monkeypatch.context() as m:
        _refused_at(m, CHECKPOINT, 2, code)
        assert main(["train", "--run-dir", run_dir, *RUN]) == 2
    line = _one_line(capsys, "train")
    checkpoint = os.path.join(run_dir, CHECKPOINT)
    assert line == (
        f"cannot write {checkpoint}: {said}; the last good checkpoint, from update 2, is {checkpoint}; make "
        f"{run_dir} writable, then continue with: proxima train --resume {run_dir}"
    )
    assert not [n for n in os.listdir(run_dir) if n.startswith(".tmp-")]
    assert main(["train", "--resume", run_dir]) == 0  # the command the line gives
    assert read_checkpoint(checkpoint)[1]["finished"]


@pytest.mark.parametrize(
    ("code", "status", "said"),
    [(errno.EACCES, 2, "cannot access /elsewhere/page.html: permission denied"),
     (errno.EROFS, 2, "cannot write /elsewhere/page.html: read-only file system"),
     (errno.ENOSPC, 75, "no space left on device writing /elsewhere/page.html")],
    ids=["EACCES", "EROFS", "ENOSPC"],
)  # fmt: skip
def test_a_library_s_own_refused_write_is_one_line_too(code, status, said, finished, monkeypatch, capsys):
    """A write that no proxima code wraps (a library's: TensorBoard's, a video encoder's) reaches the CLI as an
    OSError, which it says in one line too."""
    import proxima.run.report

    def refused(*args, **kwargs):
        raise OSError(code, os.strerror(code), "/elsewhere/page.html")

    monkeypatch.setattr(proxima.run.report, "write_report", refused)
    assert main(["report", finished]) == status
    assert _one_line(capsys, "report") == said


# --- f. a multi-agent agent's predict takes what its exported actor takes -----------------------------------------


def test_a_mappo_agent_predicts_without_the_global_state_that_only_its_critic_reads(tmp_path):
    agent = proxima.train(env_id="proxima/ProbeCentralCritic-v0", algo="mappo", num_envs=2, num_steps=16,
                          total_timesteps=64, run_dir=str(tmp_path / "run"), quiet=True, report=False, plot=False)  # fmt: skip
    rng = np.random.default_rng(0)
    own = {"obs": rng.random((6, 1), dtype=np.float32), "agent": np.array([0, 1, 0, 1, 1, 0])}
    state = rng.random((6, 2), dtype=np.float32)
    expected = agent.predict({**own, "state": state}, deterministic=True)
    assert np.array_equal(agent.predict(own, deterministic=True), expected)  # the actor never reads it
    one = agent.predict({"obs": own["obs"][1], "agent": 1}, deterministic=True)
    assert np.ndim(one) == 0 and one == expected[1]
    with pytest.raises(
        proxima.UserError, match=r"predict takes an observation of Dict\(.*got dict \['agent'\]"
    ):
        agent.predict({"agent": 1})


# --- c. an agent's files checked on load, before anything is allocated ------------------------------------------


def _edit_json(path: str, edit) -> None:
    with open(path) as f:
        data = json.load(f)
    edit(data)
    with open(path, "w") as f:
        json.dump(data, f)


def _edit_weights(path: str, edit) -> None:
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)


def _never_built(monkeypatch, module, name: str) -> None:
    """``module.name`` (a network's or a run's class) raises if it is made: what a refused file must not get to."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"{name} was built for a file that should have been refused")

    monkeypatch.setattr(module, name, refuse)


def _hidden(sizes):
    return lambda agent: agent["network"]["network"].update(hidden_sizes=sizes)


AGENT_EDITS = {
    # 10^10 weights per MLP: 40 GB, had the network been built
    "huge": (AGENT_JSON, _hidden([100_000, 100_000]), r"model\.safetensors does not match the network that "
             r".*agent\.json describes: its actor\.0\.weight is of shape \(64, 4\), the network's \(100000, 4\)"),
    "missing-setting": (AGENT_JSON, lambda a: a["network"]["network"].pop("activation"),
                        r"agent\.json is missing or has a bad field \('activation' is missing\)"),
    "observation-space": (AGENT_JSON, lambda a: a["observation_space"].update(shape=[2], low=[0, 0], high=[1, 1]),
                          r"agent\.json's observation_space, Box\(0\.0, 1\.0, \(2,\), float32\), is not what its "
                          r"network takes \(observations of shape \(4,\)\)"),
    "action-space": (AGENT_JSON, lambda a: a["action_space"].update(n=3),
                     r"agent\.json's action_space, Discrete\(3\), needs 3 logits; its network gives 2"),
    "integer-weights": (WEIGHTS, lambda w: w.update({"actor.0.weight": w["actor.0.weight"].to(torch.int64)}),
                        r"model\.safetensors holds actor\.0\.weight as int64; the network holds it as float32"),
    "float64-weights": (WEIGHTS, lambda w: w.update({"critic.4.bias": w["critic.4.bias"].double()}),
                        r"model\.safetensors holds critic\.4\.bias as float64; the network holds it as float32"),
    "nan": (WEIGHTS, lambda w: w["actor.2.weight"].view(-1)[:3].fill_(float("nan")),
            r"model\.safetensors holds 3 non-finite values \(NaN or infinity\) in actor\.2\.weight"),
    "inf-statistics": (WEIGHTS, lambda w: w["normalization.obs_rms.var"].fill_(float("inf")),
                       r"model\.safetensors holds 4 non-finite values \(NaN or infinity\) in normalization\.obs_rms\.var"),
    "missing-tensor": (WEIGHTS, lambda w: w.pop("critic.4.bias"),
                       r"model\.safetensors does not match the network .* it lacks critic\.4\.bias"),
}  # fmt: skip


@pytest.mark.parametrize("case", AGENT_EDITS, ids=list(AGENT_EDITS))
def test_an_agent_whose_files_do_not_go_together_is_refused_before_its_network_is_built(
    case, run_copy, monkeypatch, capsys
):
    name, edit, said = AGENT_EDITS[case]
    path = os.path.join(run_copy, name)
    (_edit_json if name == AGENT_JSON else _edit_weights)(path, edit)
    _never_built(monkeypatch, proxima.run.agent, "make_policy")  # what builds the network
    for argv in (["eval", run_copy, "--episodes", "1"], ["export", run_copy, "--format", "torchscript"]):
        assert main(argv) == 2
        assert re.search(said, _one_line(capsys, argv[0])), said
    with pytest.raises(proxima.UserError, match=said):
        proxima.load(run_copy)
    assert not os.path.exists(os.path.join(run_copy, EVAL_JSON))


# --- d. a resume checks config.json and the checkpoint's header before it trusts them -----------------------------


TENSORS = "checkpoint's tensors"  # the cases below that edit them, not its header


def _edit_header(path: str, edit) -> None:
    tensors, meta = read_checkpoint(path)
    edit(meta)
    write_checkpoint(path, tensors, meta)


RESUME_EDITS = {
    "missing-setting": (CONFIG_JSON, lambda c: c["algorithm"].pop("gamma"),
                        r"config\.json lacks the setting algorithm\.gamma: a run's config\.json holds every setting, "
                        r"and one that is missing is not filled with today's default"),
    "missing-group": (CONFIG_JSON, lambda c: c.pop("network"), r"config\.json lacks the setting network\.encoder"),
    "huge-network": (CONFIG_JSON, lambda c: c["network"].update(hidden_sizes=[100_000, 100_000]),
                     r"checkpoint\.safetensors does not match the network that .*config\.json describes: its "
                     r"actor\.0\.weight is of shape \(64, 4\), the network's \(100000, 4\)"),
    "negative-update": (CHECKPOINT, lambda m: m.update(update=-3, global_step=-768),
                        r"checkpoint\.safetensors says update -3 at step -768; the run of its config\.json has 4 "
                        r"updates of 256 steps"),
    "update-past-the-total": (CHECKPOINT, lambda m: m.update(update=1000, global_step=256_000),
                              r"checkpoint\.safetensors says update 1000 at step 256000"),
    "steps-not-the-updates": (CHECKPOINT, lambda m: m.update(global_step=5), r"says update 2 at step 5"),
    "no-components": (CHECKPOINT, lambda m: m.pop("components"),
                      r"checkpoint\.safetensors's header lacks its model component; the checkpoint is corrupt"),
    "no-optimizer": (CHECKPOINT, lambda m: m["components"].pop("optimizer"), r"header lacks its optimizer component"),
    "finished-not-a-bool": (CHECKPOINT, lambda m: m.update(finished="no"),
                            r"checkpoint\.safetensors's header has finished 'no', not True or False"),
    "no-counter": (CHECKPOINT, lambda m: m.pop("global_step"), r"header has global_step missing, not a number"),
    "negative-log-end": (CHECKPOINT, lambda m: m["components"]["logging"]["offsets"].update({METRICS: -5}),
                         r"checkpoint\.safetensors has state that does not fit this run \(ValueError: the logs' ends "
                         r"are .*, not byte counts\)"),
    "nan-weights": (TENSORS, lambda t: t["model/actor.0.weight"].view(-1)[:1].fill_(float("nan")),
                    r"checkpoint\.safetensors holds 1 non-finite value \(NaN or infinity\) in actor\.0\.weight"),
    "nan-moment": (TENSORS, lambda t: t["optimizer/state/3/exp_avg_sq"].fill_(float("inf")),
                   r"holds 64 non-finite values \(NaN or infinity\) in optimizer/state/3/exp_avg_sq"),
    # checked as the run is restored, after it is built
    "moment-shape": (TENSORS, lambda t: t.update({"optimizer/state/0/exp_avg": torch.zeros(3)}),
                     r"has state that does not fit this run \(ValueError: the saved state 0 is not of its "
                     r"parameter's shape \(64, 4\) and dtype\)"),
    "rate-not-a-number": (CHECKPOINT, lambda m: m["components"]["optimizer"]["param_groups"][0].update(lr="fast"),
                          r"the saved parameter group \{.*'lr': 'fast'.*\} is not Adam's"),
}  # fmt: skip
RESTORED = ("negative-log-end", "moment-shape", "rate-not-a-number")  # refused as the run built is restored


class _StopAt(Callback):
    """Stops the run after update ``at`` as SIGTERM would: a checkpoint, then exit status 143."""

    def __init__(self, at: int):
        self.at = at

    def on_update_end(self, run, result) -> None:
        if run.updates_done == self.at:
            next(c for c in run.callbacks if isinstance(c, Checkpointing)).interrupt(signal.SIGTERM)


@pytest.fixture(scope="module")
def stopped_once(tmp_path_factory) -> str:
    """A run stopped after update 2 of 4, as --resume finds it."""
    run_dir = str(tmp_path_factory.mktemp("stopped") / "run")
    made = proxima.scale.trainer.default_callbacks
    with pytest.MonkeyPatch.context() as m:
        m.setattr(
            proxima.scale.trainer, "default_callbacks", lambda run, user=(): made(run, [*user, _StopAt(2)])
        )
        assert main(["train", "--run-dir", run_dir, *RUN]) == 143
    return run_dir


@pytest.fixture
def stopped(stopped_once, tmp_path) -> str:
    copy = str(tmp_path / "stopped")
    shutil.copytree(stopped_once, copy)
    return copy


@pytest.mark.parametrize("case", RESUME_EDITS, ids=list(RESUME_EDITS))
def test_a_resume_refuses_what_config_json_or_the_checkpoint_lacks_before_it_builds_the_run(
    case, stopped, monkeypatch, capsys
):
    capsys.readouterr()
    name, edit, said = RESUME_EDITS[case]
    path = os.path.join(stopped, name)
    if name == TENSORS:
        path = os.path.join(stopped, CHECKPOINT)
        tensors, meta = read_checkpoint(path)
        edit(tensors)
        write_checkpoint(path, tensors, meta)
    else:
        (_edit_json if name == CONFIG_JSON else _edit_header)(path, edit)
    before = {
        n: open(os.path.join(stopped, n), "rb").read() for n in os.listdir(stopped) if n != "report.html"
    }
    if case not in RESTORED:
        _never_built(monkeypatch, proxima.scale.trainer, "Run")
    for argv in (["train", "--resume", stopped], ["train", "--run-dir", stopped, "--resume-if-exists", *RUN]):
        assert main(argv) == 2
        assert re.fullmatch(f".*{said}.*", _one_line(capsys, "train")), said
    assert {n: open(os.path.join(stopped, n), "rb").read() for n in before} == before  # nothing rewritten


def test_a_resume_of_the_untouched_stopped_run_works(stopped):
    """The known answer the cases above are refused beside."""
    assert main(["train", "--resume", stopped]) == 0
    assert read_checkpoint(os.path.join(stopped, CHECKPOINT))[1]["update"] == 4


# --- e. the commands agree on whether a run has finished, and the command a message gives works --------------------


def test_a_finished_run_that_lost_its_agent_says_the_same_to_eval_resume_and_requeue(run_copy, capsys):
    os.remove(os.path.join(run_copy, AGENT_JSON))
    assert main(["eval", run_copy]) == 2
    line = _one_line(capsys, "eval")
    command = f"proxima train --resume {run_copy} --total-timesteps 1024"
    assert line == (
        f"the run in {run_copy} finished, but its agent ({AGENT_JSON}) is missing: its files were changed since; "
        f"save it again from the final checkpoint with: {command}"
    )
    assert (
        main(["train", "--run-dir", run_copy, "--resume-if-exists", *RUN]) == 2
    )  # finished: it loads the agent
    assert _one_line(capsys, "train") == line
    assert main(["train", "--resume", run_copy]) == 2
    assert _one_line(capsys, "train").startswith(f"the run in {run_copy} already finished (update 4)")
    metrics = open(os.path.join(run_copy, METRICS)).read()
    assert main(command.split()[1:]) == 0  # the command eval gave: no update, the agent saved again
    assert open(os.path.join(run_copy, METRICS)).read() == metrics
    assert main(["eval", run_copy, "--episodes", "1"]) == 0


def test_a_seed_of_an_unfinished_batched_run_is_continued_by_its_group(tmp_path, monkeypatch, capsys):
    parent = str(tmp_path / "group")
    argv = ["train", "--run-dir", parent, "--num-seeds", "2", *RUN]
    with monkeypatch.context() as m:
        _refused_at(
            m, CHECKPOINT, 4, errno.EACCES
        )  # update 2: each seed's, then the group's; update 4: seed 3's
        assert main(argv) == 2
    checkpoint = os.path.join(parent, CHECKPOINT)
    assert _one_line(capsys, "train") == (
        f"cannot write {parent}/seed3/{CHECKPOINT}: permission denied; the last checkpoint of every seed is "
        f"{checkpoint}; make {parent} writable, then continue with: proxima train --resume {parent}"
    )
    seed = os.path.join(parent, "seed3")
    assert main(["eval", seed]) == 2
    assert _one_line(capsys, "eval") == (
        f"the batched run in {parent} has not finished, so {seed} has no agent yet; continue it to its end first: "
        f"proxima train --resume {parent}"
    )
    assert main(["train", "--resume", parent]) == 0  # the command both lines gave
    assert main(["eval", seed, "--episodes", "1"]) == 0
    capsys.readouterr()
    assert main([*(a for a in argv if a != "--quiet"), "--resume-if-exists"]) == 0
    said = (
        capsys.readouterr().out
    )  # a batched run trains no further than it started for: no --total-timesteps
    assert said == f"{parent}: the run already finished (1024+1024 steps); nothing to train\n"


def test_a_batched_run_whose_last_page_is_refused_says_it_finished(tmp_path, monkeypatch, capsys):
    parent = str(tmp_path / "group")
    with monkeypatch.context() as m:
        _refused_at(m, os.path.join("group", "report.html"), 1, errno.EROFS)  # the group's, after its end
        report = [a.replace("--no-report", "--report") for a in RUN]
        assert main(["train", "--run-dir", parent, "--num-seeds", "2", *report]) == 2
    assert _one_line(capsys, "train") == (
        f"cannot write {parent}/report.html: read-only file system; every seed had finished: their agents and the "
        f"final checkpoint, {parent}/{CHECKPOINT}, are saved"
    )
    assert main(["eval", os.path.join(parent, "seed4"), "--episodes", "1"]) == 0
