"""A run, sweep or search directory may come from a stranger (docs/SECURITY.md): the paths its files name stay
inside it, no symbolic link in it leads out, nothing is removed that is not proxima's own, and the report embeds
only the videos proxima wrote there. Each test tampers with a copy of a real (tiny) run, sweep or search and
checks that a directory beside it, made with tmp_path, is exactly as it was."""

import base64
import json
import os
import shutil

import pytest

import proxima
from proxima.base.files import CHECKPOINT, read_checkpoint, write_checkpoint
from proxima.commands import main
from proxima.run.config import resolve_args
from proxima.scale.tuning import _plan, run_sample

# native CartPole, 4 updates of 2 envs x 64 steps
TINY = dict(env_id="CartPole-v1", total_timesteps=512, num_envs=2, num_steps=64, torch_threads=1, cuda=False,
            plot=False, report=False, quiet=True)  # fmt: skip
TINY_ARGV = ["--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "64", "--torch-threads", "1",
             "--no-cuda", "--no-plot", "--no-report", "--quiet"]  # fmt: skip


def _victim(tmp_path):
    """A directory of the user's beside the tampered one, and what it holds."""
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "notes.txt").write_text("the user's own notes\n")
    (victim / "inner" / "data.bin").write_bytes(b"\x00\x01 the user's data")
    return victim, _tree(victim)


def _tree(path) -> dict:
    """Every file under ``path`` with its bytes, and every directory."""
    found = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            found[os.path.relpath(os.path.join(root, d), path)] = None
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                found[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    return found


def _one_line_exit_2(argv, capsys, match) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _json(path) -> dict:
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> str:
    """A real sweep of one setting and one seed, finished, with checkpoints after every update."""
    out = tmp_path_factory.mktemp("made") / "sweep"
    proxima.sweep(**TINY, checkpoint_every=1, seeds=[1], executor="local", output_dir=str(out))
    return str(out)


def _sweep_copy(finished_sweep, tmp_path):
    out = tmp_path / "sweep"
    shutil.copytree(finished_sweep, out, symlinks=True)
    return out


def _edit_trial(out, **changes) -> None:
    plan = _json(out / "sweep.json")
    trial = plan["trials"][0]
    trial["name"] = changes.get("name", trial["name"])
    trial["config"]["run"]["run_dir"] = changes.get("run_dir", trial["config"]["run"]["run_dir"])
    (out / "sweep.json").write_text(json.dumps(plan))


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_sweep_whose_trial_names_a_directory_outside_is_refused_and_deletes_nothing(
    finished_sweep, tmp_path, capsys, where
):
    out = _sweep_copy(finished_sweep, tmp_path)
    victim, held = _victim(tmp_path)
    named = "../victim" if where == "relative" else str(victim)
    _edit_trial(out, run_dir=named)  # no trial.json there: a resume would train it, removing it first
    _one_line_exit_2(
        ["sweep", "--resume", str(out), "--executor", "local"],
        capsys,
        f"sweep.json names the path {named!r}, which does not lie inside {out}",
    )
    assert _tree(victim) == held


def test_a_sweep_whose_trial_directory_is_a_link_outside_is_refused_and_writes_nothing_there(
    finished_sweep, tmp_path, capsys
):
    out = _sweep_copy(finished_sweep, tmp_path)
    victim, held = _victim(tmp_path)
    shutil.rmtree(out / "base__seed1")
    os.symlink(victim, out / "base__seed1")
    _one_line_exit_2(
        ["sweep", "--resume", str(out), "--executor", "local"],
        capsys,
        "'base__seed1', which does not lie inside",
    )
    assert _tree(victim) == held


def test_a_sweep_trial_in_a_directory_it_did_not_create_removes_nothing_of_it(
    finished_sweep, tmp_path, capsys
):
    out = _sweep_copy(finished_sweep, tmp_path)
    (out / "mine").mkdir()
    (out / "mine" / "notes.txt").write_text("not proxima's\n")
    _edit_trial(out, run_dir="mine")
    assert main(["sweep", "--resume", str(out), "--executor", "local"]) == 1  # the trial fails, saying why
    assert (out / "mine" / "notes.txt").read_text() == "not proxima's\n"
    assert "already exists and is not empty" in _json(out / "mine" / "trial.json")["error"]


def _stopped_before_its_first_checkpoint(run_dir) -> None:
    for name in ("trial.json", CHECKPOINT, "model.safetensors", "agent.json"):
        os.remove(run_dir / name)


def test_a_sweep_trial_stopped_before_its_first_checkpoint_starts_again(finished_sweep, tmp_path):
    out = _sweep_copy(finished_sweep, tmp_path)
    _stopped_before_its_first_checkpoint(out / "base__seed1")
    assert main(["sweep", "--resume", str(out), "--executor", "local"]) == 0
    assert _json(out / "base__seed1" / "trial.json")["status"] == "finished"


def test_a_sweep_whose_trial_holds_a_link_outside_is_refused(finished_sweep, tmp_path, capsys):
    out = _sweep_copy(finished_sweep, tmp_path)
    _stopped_before_its_first_checkpoint(out / "base__seed1")
    victim, held = _victim(tmp_path)
    os.symlink(victim, out / "base__seed1" / "videos")
    _one_line_exit_2(
        ["sweep", "--resume", str(out), "--executor", "local"], capsys, "videos is a symbolic link to"
    )
    assert _tree(victim) == held and os.path.islink(out / "base__seed1" / "videos")


def test_the_report_of_a_sweep_whose_trial_names_a_run_outside_is_refused(finished_sweep, tmp_path, capsys):
    out = _sweep_copy(finished_sweep, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(out / "base__seed1", elsewhere)  # someone else's run, with a video
    (elsewhere / "videos").mkdir()
    (elsewhere / "videos" / "rl-video-episode-0.mp4").write_bytes(b"someone else's episode")
    _edit_trial(out, name="../elsewhere")
    page = (out / "report.html").read_bytes()  # the sweep's own, as it finished
    _one_line_exit_2(["report", str(out)], capsys, "sweep.json names the path '../elsewhere'")
    assert (out / "report.html").read_bytes() == page


def _tiny_search(tmp_path):
    """A real search's directory of one sample and one seed, run here (``run_sample``, as Ray's trial runs it)."""
    base = resolve_args(**TINY)
    plan = _plan(base, {"learning_rate": ["choice", [1e-3]]}, "random", 1, "return", "max", 1, "fifo", None, 1,
                 None)  # fmt: skip
    out = tmp_path / "tune"
    out.mkdir()
    assert run_sample(str(out), plan, "s001", {"learning_rate": 1e-3})["status"] == "finished"
    plan["samples"] = [{"name": "s001", "settings": {"learning_rate": 1e-3}}]
    (out / "tune.json").write_text(json.dumps(plan))
    return out, plan


def test_a_search_whose_seeds_name_a_directory_outside_is_refused_on_resume_and_deletes_nothing(
    tmp_path, capsys
):
    out, plan = _tiny_search(tmp_path)
    victim, held = _victim(tmp_path)
    plan["seeds"] = ["1/../../victim"]  # s001__seed1/../../victim: no trial.json there, so a resume trains it
    (out / "tune.json").write_text(json.dumps(plan))
    _one_line_exit_2(
        ["tune", "--resume", str(out)],
        capsys,
        "tune.json names the path 's001__seed1/../../victim', which does not",
    )
    with pytest.raises(proxima.UserError, match="does not lie inside"):  # the trial itself checks it too
        run_sample(str(out), plan, "s001", {"learning_rate": 1e-3})
    plan["seeds"], plan["samples"][0]["name"] = [1], "../victim"  # Ray refuses a '/' in its folder name too
    (out / "tune.json").write_text(json.dumps(plan))
    _one_line_exit_2(
        ["tune", "--resume", str(out)], capsys, "tune.json names the path '../victim', which does not"
    )
    assert _tree(victim) == held


def test_a_search_sample_in_a_directory_it_did_not_create_removes_nothing_of_it(tmp_path):
    out, plan = _tiny_search(tmp_path)
    (out / "s002__seed1").mkdir()
    (out / "s002__seed1" / "notes.txt").write_text("not proxima's\n")
    assert run_sample(str(out), plan, "s002", {"learning_rate": 1e-3})["status"] == "failed"
    assert (out / "s002__seed1" / "notes.txt").read_text() == "not proxima's\n"


@pytest.fixture
def finished_run(tmp_path) -> str:
    run_dir = str(tmp_path / "run")
    proxima.train(**TINY, run_dir=run_dir)
    return run_dir


def test_a_resume_through_a_log_that_links_outside_is_refused_and_changes_nothing_there(
    finished_run, tmp_path, capsys
):
    victim, held = _victim(tmp_path)
    shutil.move(os.path.join(finished_run, "metrics.jsonl"), victim / "metrics.jsonl")  # offsets still fit
    os.symlink(victim / "metrics.jsonl", os.path.join(finished_run, "metrics.jsonl"))
    held = _tree(victim)
    _one_line_exit_2(
        ["train", "--resume", finished_run, "--total-timesteps", "1024"],
        capsys,
        "metrics.jsonl is a symbolic link",
    )
    assert _tree(victim) == held


def test_a_checkpoints_rescoring_candidate_cannot_name_a_directory_to_remove(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    proxima.train(**TINY, run_dir=run_dir, eval_every=1, eval_episodes=2, save_best=True, rescore_best=1,
                  rescore_episodes=2)  # fmt: skip
    victim, held = _victim(tmp_path)
    path = os.path.join(run_dir, CHECKPOINT)
    tensors, meta = read_checkpoint(path)
    # candidates/step-x/../../../victim: the first evaluation after the resume pushes it out, removing it
    meta["components"]["evaluation"]["candidates"] = [[-1e9, "x/../../../victim"]]
    write_checkpoint(path, tensors, meta)
    _one_line_exit_2(
        ["train", "--resume", run_dir, "--total-timesteps", "1024"], capsys, "the checkpoint is corrupt"
    )
    assert _tree(victim) == held


def test_a_requeued_run_stopped_before_its_checkpoint_unlinks_a_link_and_keeps_what_it_points_to(
    tmp_path, capsys
):
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir), "--resume-if-exists", *TINY_ARGV, "--total-timesteps", "512"]
    assert main(argv) == 0
    os.remove(run_dir / CHECKPOINT)  # as if it had been killed before its first checkpoint
    victim, held = _victim(tmp_path)
    os.symlink(victim, run_dir / "videos")
    assert main(argv) == 0
    assert read_checkpoint(str(run_dir / CHECKPOINT))[1]["finished"]
    assert _tree(victim) == held


def test_the_report_embeds_only_the_videos_proxima_wrote_in_the_run(finished_run, tmp_path, capsys):
    secret = tmp_path / "secret.mp4"
    secret.write_bytes(b"the user's secret, which must never reach a page meant to be shared")
    own = os.path.join(finished_run, "eval-videos", "rl-video-episode-0.mp4")
    os.makedirs(os.path.dirname(own))
    with open(own, "wb") as f:
        f.write(b"an episode that proxima eval recorded")
    os.makedirs(os.path.join(finished_run, "videos"))
    os.symlink(secret, os.path.join(finished_run, "videos", "rl-video-episode-1.mp4"))
    listed = ["eval-videos/rl-video-episode-0.mp4", "/etc/passwd", "../secret.mp4", "eval-videos/../../secret.mp4",
              str(secret), "config.json"]  # fmt: skip
    with open(os.path.join(finished_run, "eval.json"), "w") as f:
        json.dump({"mean": 1.0, "std": 0.0, "episodes": 1, "videos": listed}, f)
    capsys.readouterr()
    assert main(["report", finished_run]) == 0
    err = capsys.readouterr().err
    page = open(os.path.join(finished_run, "report.html")).read()
    assert base64.b64encode(b"an episode that proxima eval recorded").decode() in page
    assert base64.b64encode(secret.read_bytes()).decode() not in page
    with open(os.path.join(finished_run, "config.json"), "rb") as f:
        assert base64.b64encode(f.read()).decode() not in page
    if os.access("/etc/passwd", os.R_OK):
        with open("/etc/passwd", "rb") as f:
            assert base64.b64encode(f.read()).decode() not in page
    assert page.count("data:video/mp4;base64,") == 1
    assert err == (
        f"note: {finished_run}/eval.json lists '/etc/passwd' and 4 more, not a video that proxima wrote in "
        f"{finished_run}/eval-videos: not embedded\n"
    )
