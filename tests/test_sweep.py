"""Sweeps: every (setting, seed) as an ordinary run, on Ray Tune or one after another; a failed run is
reported and the others go on; a sweep killed with SIGKILL finishes on --resume; two Ray nodes share one."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

import proxima
from proxima.base.files import read_checkpoint
from proxima.commands import main
from proxima.run.callbacks import Callback
from proxima.run.config import PPOArgs
from proxima.scale import executors
from proxima.scale.sweeps import grid_settings, parse_seeds

# Ray tests share the machine's Ray processes: one xdist worker runs all of them, in turn (`--dist loadgroup`
# in the Makefile). The two-node cluster test runs after the others, alone (`serial`).
pytestmark = pytest.mark.xdist_group("ray")

# native CartPole, 4 updates of 4 envs x 128 steps; 1e30 turns the loss into NaN in the first update
SMALL = ["--env-id", "CartPole-v1", "--total-timesteps", "2048", "--no-plot"]
NAN = "NaN or infinity in the loss at update 1; training stopped; no checkpoint had been written yet"
TIMES = {"time_s", "sps"}


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


def _json(path) -> dict:
    with open(path) as f:
        return json.load(f)


def test_seeds_and_grids_expand_in_order():
    assert parse_seeds("1-4") == [1, 2, 3, 4]
    assert parse_seeds("1,3,5") == [1, 3, 5]
    assert parse_seeds("2-3,7,2") == [2, 3, 7]
    # a bare number counts seeds, as --seeds of compare and tune and --num-seeds of train do
    assert parse_seeds("4") == [1, 2, 3, 4]
    assert parse_seeds("4-4") == [4] and parse_seeds("0-0") == [0] and parse_seeds("0,1") == [0, 1]
    for text in ("0", "-2", "4,", "x"):
        with pytest.raises(proxima.UserError, match="--seeds expects"):
            parse_seeds(text)
    grid = grid_settings({"learning_rate": [3e-4, 1e-3], "ent_coef": [0.0, 0.01]})
    assert [label for label, _ in grid] == [
        "learning_rate=0.0003,ent_coef=0.0",
        "learning_rate=0.0003,ent_coef=0.01",
        "learning_rate=0.001,ent_coef=0.0",
        "learning_rate=0.001,ent_coef=0.01",
    ]
    assert grid[3][1] == {"learning_rate": 1e-3, "ent_coef": 0.01}
    assert grid_settings({}) == [("base", {})]


RESUME = "resume"


@pytest.mark.parametrize(
    "argv,match",
    [
        (
            ["--seeds", "1-x"],
            "--seeds expects a count (5: seeds 1-5) or ranges and lists like 1-10 or 1,3,5, got '1-x'",
        ),
        (["--grid", "learning_rate"], "--grid expects NAME=V1,V2,..., got 'learning_rate'"),
        (["--grid", "bogus=1,2"], "--grid: 'bogus' is not a setting a sweep can vary"),
        (["--grid", "seed=1,2"], "--grid: 'seed' is not a setting a sweep can vary"),
        (["--grid", "learning_rate=fast"], "--learning-rate expects a number, got 'fast'"),
        (["--grid", "ent_coef=0", "--grid", "ent_coef=1"], "--grid names a setting twice"),
        (["--seed", "3"], "proxima sweep sets --seed of each run; give --seeds instead"),
        (["--cpus-per-trial", "0"], "--cpus-per-trial must be a positive integer, got 0"),
        (["--gpus-per-trial=-1"], "--gpus-per-trial must be non-negative, got -1.0"),
        (
            ["--gpus-per-trial", "1"],
            "--gpus-per-trial reserves GPUs for Ray trials; a local sweep's runs use a GPU",
        ),
        (
            ["--gpus-per-trial", "1", "--no-cuda", "--executor", "ray"],
            "--gpus-per-trial gives each run a GPU to train on; drop --no-cuda or --gpus-per-trial",
        ),
        (["--executor", "dask"], "unknown executor 'dask'; accepted: local, ray"),
        (["--num-envs", "0"], "--num-envs must be a positive integer, got 0"),
        ([RESUME, "--resume", "nowhere"], "sweep directory 'nowhere' does not exist"),
        (
            [RESUME, "--resume", "x", "--seeds", "1"],
            "with --resume, only --executor, --address, --max-concurrent and --trust-code",
        ),
        ([RESUME, "--resume", "x", "--env-id", "Acrobot-v1"], "may be given, not --env-id"),
    ],
)
def test_bad_sweep_input_is_one_line_exit_2_and_writes_nothing(argv, match, tmp_path, capsys):
    out = tmp_path / "sweep"
    if argv[0] == RESUME:
        argv = ["sweep", *argv[1:]]
    else:
        argv = ["sweep", *SMALL, "--executor", "local", "--output-dir", str(out), *argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("proxima sweep: error: ") and match in err and err.count("\n") == 1, err
    assert not out.exists()


def test_without_ray_a_sweep_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(executors, "ray_available", lambda: False)
    assert main(["sweep", *SMALL, "--output-dir", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert (
        "a sweep on Ray needs Ray: pip install 'proxima[ray]' (make installs it), or give --executor local"
        in err
    )
    assert not (tmp_path / "s").exists()


def test_a_local_sweep_tabulates_every_setting_and_goes_on_past_a_failed_run(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", *SMALL, "--executor", "local", "--seeds", "1-2", "--output-dir", str(out),
            "--grid", "learning_rate=2.5e-4,1e30", "--grid", "hidden_sizes=64 64,16"]  # fmt: skip
    assert main(argv) == 1  # a run failed
    captured = capsys.readouterr()
    assert "proxima sweep: of 8 runs, 4 failed (see " in captured.err
    assert f"learning_rate=1e30__hidden_sizes=16__seed2: failed: {NAN}" in captured.out
    results = _json(out / "results.json")
    assert [s["setting"] for s in results["settings"]] == [
        "learning_rate=2.5e-4,hidden_sizes=64 64",
        "learning_rate=2.5e-4,hidden_sizes=16",
        "learning_rate=1e30,hidden_sizes=64 64",
        "learning_rate=1e30,hidden_sizes=16",
    ]
    good, small, bad, _ = results["settings"]
    assert good["finished"] == 2 and bad["finished"] == 0 and bad["final_return_mean"] is None
    # each run is an ordinary run with its setting and seed; the table's numbers are its episodes'
    for trial in results["trials"]:
        config = _json(os.path.join(trial["run_dir"], "config.json"))
        assert config["run"]["seed"] == trial["seed"]
        assert config["algorithm"]["learning_rate"] == (1e30 if "1e30" in trial["setting"] else 2.5e-4)
        assert config["network"]["hidden_sizes"] == ([16] if trial["setting"].endswith("=16") else [64, 64])
        if trial["status"] == "finished":
            returns = [
                json.loads(line)["return"] for line in open(os.path.join(trial["run_dir"], "episodes.jsonl"))
            ]
            assert trial["final_return"] == pytest.approx(sum(returns[-20:]) / len(returns[-20:]))
            proxima.load(trial["run_dir"])  # evaluable as any run
        else:
            assert trial["error"] == NAN
    finals = [t["final_return"] for t in results["trials"] if t["setting"] == good["setting"]]
    assert good["final_return_mean"] == pytest.approx(sum(finals) / 2)
    assert good["final_return_min"] == min(finals) and good["final_return_max"] == max(finals)
    table = (out / "results.md").read_text()
    assert f"| learning_rate=2.5e-4,hidden_sizes=64 64 | 2/2 | {good['final_return_mean']:.1f} ± " in table
    assert "| learning_rate=1e30,hidden_sizes=16 | 0/2 | – | – | failed, failed |" in table
    assert (
        f"- learning_rate=1e30__hidden_sizes=64x64__seed1: {NAN}" in table
    )  # run directories have no spaces
    assert (out / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    from tests.test_report import page_data

    page = page_data(out / "report.html")  # every run that logged an update, failed ones marked
    assert page["groups"] == [s["setting"] for s in results["settings"]]
    statuses = {r["label"]: r["status"] for r in page["runs"]}
    assert statuses["learning_rate=2.5e-4__hidden_sizes=16__seed2"] == "finished"
    assert statuses["learning_rate=1e30__hidden_sizes=16__seed2"] == "failed"
    # and --resume of a finished sweep runs nothing again
    before = {
        t["run_dir"]: os.stat(os.path.join(t["run_dir"], "trial.json")).st_mtime_ns for t in results["trials"]
    }
    assert main(["sweep", "--resume", str(out), "--executor", "local"]) == 1
    after = {
        t["run_dir"]: os.stat(os.path.join(t["run_dir"], "trial.json")).st_mtime_ns for t in results["trials"]
    }
    assert before == after
    # a sweep directory moved elsewhere (mailed, archived) still makes its page
    moved = tmp_path / "moved"
    os.rename(out, moved)
    assert main(["report", str(moved)]) == 0
    again = page_data(moved / "report.html")
    assert again["groups"] == page["groups"] and len(again["runs"]) == len(page["runs"])
    assert all(r["run_dir"].startswith(str(moved)) for r in again["runs"])


class StopAt(Callback):
    """Raises KeyboardInterrupt after update ``at``, before that update is logged or checkpointed: the run's
    directory is then as a SIGKILL after update ``at - 1``'s checkpoint leaves it."""

    def __init__(self, at: int):
        self.at = at

    def on_update_end(self, run, result):
        if run.updates_done == self.at:
            raise KeyboardInterrupt


def test_a_moved_sweep_resumes_where_it_lies_and_reruns_nothing_finished(tmp_path, capsys):
    out, moved = tmp_path / "sweep", tmp_path / "elsewhere" / "sweep"
    proxima.sweep(env_id="CartPole-v1", total_timesteps=1024, num_envs=2, num_steps=64, checkpoint_every=1,
                  plot=False, report=False, seeds=[1, 2], executor="local", output_dir=str(out))  # fmt: skip
    plan = (out / "sweep.json").read_text()
    assert str(tmp_path) not in plan
    assert [t["config"]["run"]["run_dir"] for t in json.loads(plan)["trials"]] == [
        "base__seed1",
        "base__seed2",
    ]
    # seed 2 interrupted after its second update's checkpoint: no trial.json, a checkpoint to resume from
    first, second = out / "base__seed1", out / "base__seed2"
    whole, config = _metrics(second), _json(second / "config.json")
    shutil.rmtree(second)
    with pytest.raises(KeyboardInterrupt):
        proxima.train(PPOArgs.from_json(config), callbacks=[StopAt(3)])
    assert len(_metrics(second)) == 2 and not (second / "trial.json").exists()
    done_before = (first / "trial.json").read_bytes(), os.stat(first / "metrics.jsonl").st_mtime_ns
    os.makedirs(moved.parent)
    shutil.move(out, moved)
    capsys.readouterr()
    assert main(["sweep", "--resume", str(moved), "--executor", "local"]) == 0
    assert "base__seed1" not in capsys.readouterr().out  # not run again: only seed 2 says it finished
    first, second = moved / "base__seed1", moved / "base__seed2"
    assert ((first / "trial.json").read_bytes(), os.stat(first / "metrics.jsonl").st_mtime_ns) == done_before
    assert _json(second / "trial.json")["status"] == "finished"
    assert _metrics(second) == whole  # resumed from its checkpoint, where it lies now: the same run
    assert not out.exists()
    results = _json(moved / "results.json")
    assert [t["run_dir"] for t in results["trials"]] == [str(first), str(second)]
    # a plan of an older version is refused, not converted
    older = json.loads(plan) | {"version": 2}
    (moved / "sweep.json").write_text(json.dumps(older))
    assert main(["sweep", "--resume", str(moved), "--executor", "local"]) == 2
    err = capsys.readouterr().err
    assert "has sweep plan version 2; this proxima reads version 4 only" in err and err.count("\n") == 1, err


needs_ray = pytest.mark.skipif(not executors.ray_available(), reason="the ray extra is not installed")


@pytest.mark.slow
@needs_ray
def test_more_cpus_or_gpus_per_trial_than_a_node_has_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    gpus = torch.cuda.device_count() + 1  # 1 on a machine without a GPU
    for flags, said in [
        (["--cpus-per-trial", "64"], "--cpus-per-trial 64 is more than any Ray node has"),
        (["--gpus-per-trial", str(gpus)], f"--gpus-per-trial {gpus} is more than any Ray node has"),
    ]:
        out = tmp_path / "sweep"
        assert main(["sweep", *SMALL, *flags, "--output-dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
        assert not out.exists()


@pytest.mark.slow
@needs_ray
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_trial_with_a_gpu_trains_on_it(tmp_path):
    results = proxima.sweep(
        env_id="CartPole-v1", total_timesteps=1024, num_envs=2, num_steps=64, plot=False, report=False,
        seeds=[1, 2], gpus_per_trial=0.5, output_dir=str(tmp_path / "s"),
    )  # fmt: skip
    assert [t["status"] for t in results.trials] == ["finished", "finished"]
    for trial in results.trials:
        sessions = _json(os.path.join(trial["run_dir"], "machine.json"))["sessions"]
        assert [s["device"].split(":")[0] for s in sessions] == ["cuda"]


def _on_ray_with_two_cpus(argvs: list[list[str]], timeout: float = 300) -> list[tuple[int, str]]:
    """``proxima sweep`` with each of ``argvs``, in one process that starts a local Ray instance of exactly two
    CPUs first (whatever the machine has), so that a trial that asked for one CPU too few would wait forever:
    here, until ``timeout`` kills it. Returns each call's exit status and stderr."""
    script = (
        "import contextlib, io, json, sys, ray\n"
        "from proxima.commands import main\n"
        "ray.init(address='local', num_cpus=2, include_dashboard=False, logging_level='ERROR', log_to_driver=False)\n"
        "said = []\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        said.append((main(['sweep', *argv]), err.getvalue()))\n"
        "print(json.dumps(said))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, json.dumps(argvs)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = None
    finally:
        _kill_session(proc.pid)
    assert out is not None, "the sweep waited for CPUs that its trials never had"
    return [tuple(row) for row in json.loads(out.strip().splitlines()[-1])]


@pytest.mark.slow
@needs_ray
def test_rollout_workers_in_ray_trials_run_on_cpus_reserved_with_the_trial(tmp_path):
    out, too_many = tmp_path / "sweep", tmp_path / "too-many"
    run = ["--env-id", "CartPole-v1", "--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "64",
           "--no-plot", "--no-report"]  # fmt: skip
    # two CPUs: a trial's own and its actor's. Two seeds, so that the second trial starts once the first
    # has given back both.
    said = _on_ray_with_two_cpus(
        [[*run, "--rollout-workers", "2", "--output-dir", str(too_many)],
         [*run, "--rollout-workers", "1", "--seeds", "1-2", "--output-dir", str(out)]]
    )  # fmt: skip
    (refused, err), (status, _) = said
    assert refused == 2 and err.count("\n") == 1, err
    assert (
        "a trial needs 3 CPUs (1 of its own, 2 for its rollout workers' actors), more than the 2 of the Ray"
        in err
    )
    assert not too_many.exists()
    assert status == 0
    results = _json(out / "results.json")
    assert [t["status"] for t in results["trials"]] == ["finished", "finished"]
    for trial in results["trials"]:
        assert _json(os.path.join(trial["run_dir"], "config.json"))["env"]["rollout_workers"] == 1
        assert [r["global_step"] for r in _metrics(trial["run_dir"])] == [128 * k for k in range(1, 9)]


@pytest.mark.slow
@pytest.mark.serial
@needs_ray
def test_a_ray_sweep_spreads_over_a_two_node_cluster_and_reports_each_update_to_tune(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        results = proxima.sweep(
            env_id="CartPole-v1", total_timesteps=2048, plot=False, seeds=[1, 2],
            grid={"learning_rate": [2.5e-4, 1e30]}, address=cluster.address, output_dir=str(tmp_path / "s"),
        )  # fmt: skip
        nodes = {node.node_id for node in cluster.list_all_nodes()}
    finally:
        cluster.shutdown()
    assert [t["status"] for t in results.trials] == ["finished", "finished", "failed", "failed"]
    assert {t["error"] for t in results.trials[2:]} == {NAN}
    # one CPU per node and one per trial: Tune ran trials on both nodes
    assert {t["node"] for t in results.trials} == nodes and len(nodes) == 2
    for trial in results.trials[:2]:
        assert (
            _json(os.path.join(trial["run_dir"], "config.json"))["run"]["torch_threads"] == 1
        )  # its one CPU
        tune_rows = [
            json.loads(line) for line in open(tmp_path / "s" / "tune-1" / trial["name"] / "result.json")
        ]
        assert [r["global_step"] for r in tune_rows] == [512, 1024, 1536, 2048]
        assert [r["global_step"] for r in _metrics(trial["run_dir"])] == [512, 1024, 1536, 2048]


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` and wait until they are gone. Not only the process group: Ray
    puts each worker in a group of its own, and a trial's worker that survived its sweep would keep training
    and reach for the ports that the resumed sweep's Ray takes (it crashed that Ray node, now and then)."""

    def members() -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if entry.isdigit() and int(fields[3]) == sid and fields[0] != "Z":  # field 6: the session
                pids.append(int(entry))
        return pids

    deadline = time.monotonic() + 30
    while (pids := members()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    assert not members(), "processes of the killed sweep are still alive"


@pytest.mark.slow
@needs_ray
def test_a_sweep_killed_with_sigkill_finishes_on_resume_and_reruns_nothing_finished(tmp_path):
    out = tmp_path / "sweep"
    # 24 updates per run and a checkpoint after each: the kill lands in seed 2 after seed 1 finished
    argv = ["--env-id", "CartPole-v1", "--total-timesteps", "6144", "--num-envs", "4", "--num-steps", "64",
            "--checkpoint-every", "1", "--no-plot", "--seeds", "1-2", "--max-concurrent", "1", "--output-dir", str(out)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", "sweep", *argv], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    first, second = out / "base__seed1", out / "base__seed2"
    deadline = time.monotonic() + 240
    try:
        while not ((first / "trial.json").exists() and (second / "checkpoint.safetensors").exists()):
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it was killed"
            time.sleep(0.01)
    finally:
        _kill_session(proc.pid)  # the sweep, Ray and its trial processes, as a crash would
        proc.wait()
    assert not (second / "trial.json").exists()
    done_before = (first / "trial.json").read_bytes(), os.stat(first / "metrics.jsonl").st_mtime_ns
    assert main(["sweep", "--resume", str(out)]) == 0
    assert ((first / "trial.json").read_bytes(), os.stat(first / "metrics.jsonl").st_mtime_ns) == done_before
    assert _json(second / "trial.json")["status"] == "finished"
    # the interrupted run resumed from its checkpoint: exactly the run it would have been
    config = _json(second / "config.json")
    proxima.train(PPOArgs.from_json(config).replace(run_dir=str(tmp_path / "whole")))
    assert _metrics(second) == _metrics(tmp_path / "whole")
    assert len(_metrics(second)) == 24


@pytest.mark.slow
@pytest.mark.serial
@needs_ray
def test_sigterm_stops_every_trial_of_a_ray_sweep_after_its_update_with_a_checkpoint_and_exit_143(tmp_path):
    out = tmp_path / "sweep"
    # 128 updates per run, checkpoints only at the end or on a signal; two CPUs: seeds 1 and 2 train while 3 waits
    argv = ["--env-id", "CartPole-v1", "--total-timesteps", "16384", "--num-envs", "2", "--num-steps", "64",
            "--checkpoint-every", "0", "--no-plot", "--no-report", "--seeds", "1-3", "--max-concurrent", "2",
            "--output-dir", str(out)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", "sweep", *argv], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    started = [out / f"base__seed{k}" for k in (1, 2)]
    deadline = time.monotonic() + 240
    try:
        while not all((run / "metrics.jsonl").exists() for run in started):
            assert proc.poll() is None and time.monotonic() < deadline, (
                "the sweep ended before it was stopped"
            )
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        _kill_session(proc.pid)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == (
        "proxima sweep: stopped by SIGTERM; each run that was training saved a checkpoint after its update; "
        f"finish the sweep with: proxima sweep --resume {out}"
    )
    for run in started:  # stopped after an update, logged and checkpointed: nothing to redo, nothing lost
        meta = read_checkpoint(str(run / "checkpoint.safetensors"))[1]
        assert not meta["finished"] and 1 <= meta["update"] == len(_metrics(run)) < 128
        assert not (run / "trial.json").exists()
    assert not (out / "base__seed3").exists()  # it had not started: it starts on --resume
    assert not (out / "stop.json").exists()
    assert main(["sweep", "--resume", str(out)]) == 0
    for k in (1, 2, 3):
        run = out / f"base__seed{k}"
        assert _json(run / "trial.json")["status"] == "finished"
        assert [r["global_step"] for r in _metrics(run)] == [128 * i for i in range(1, 129)]


@needs_ray
def test_without_an_address_ray_starts_here_and_never_joins_the_cluster_its_file_names(monkeypatch):
    """ray.init(address=None) would join the cluster in /tmp/ray/ray_current_cluster (the last `ray start`'s, or
    a ray.cluster_utils.Cluster's, even a dying one: it SIGTERMed the nodes of sweeps beside such a test)."""
    import ray

    from proxima.base.errors import UserError
    from proxima.scale.rollout_workers import WorkerPool

    asked = []

    def init(**kwargs):
        asked.append(kwargs["address"])
        raise ConnectionError("not started in this test")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    sweep = dict(storage="/tmp", cpus_per_trial=1, max_concurrent=None)
    for address in (None, "auto"):
        with pytest.raises(UserError):
            executors.run_ray(None, [], None, address=address, **sweep)
    with pytest.raises(ConnectionError):
        WorkerPool(PPOArgs.of(rollout_workers=2))
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")  # as for Ray's own tools
    with pytest.raises(UserError):
        executors.run_ray(None, [], None, address=None, **sweep)
    with pytest.raises(ConnectionError):
        WorkerPool(PPOArgs.of(rollout_workers=2))
    assert asked == ["local", "auto", "local", "ray://head:10001", "ray://head:10001"]


@needs_ray
@pytest.mark.parametrize("command", ["sweep", "tune"])
def test_sweep_and_tune_say_that_ray_starts_before_it_does_unless_quiet(
    command, tmp_path, monkeypatch, capsys
):
    """Ray says nothing while it starts (issue 65: a minute of silence on two cores looked like a hang)."""
    import ray

    said = []

    def init(**kwargs):  # the line is out before Ray is asked
        said.append(capsys.readouterr().out)
        raise ConnectionError("not started in this test")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    space = ["--space", "ent_coef=uniform:0:0.1"] if command == "tune" else []
    for k, extra in enumerate(([], ["--address", "auto"], ["--quiet"])):
        argv = [command, *SMALL, *space, "--output-dir", str(tmp_path / str(k)), *extra]
        assert main(argv) == 2
        assert "cannot reach Ray" in capsys.readouterr().err
        assert not (tmp_path / str(k)).exists()  # refused before anything ran: nothing written
    cpus = f", {int(ray._private.utils.get_num_cpus())} CPUs"
    assert said == [f"starting Ray (local{cpus})...\n", "joining Ray at auto...\n", ""]


def test_a_trial_killed_from_outside_says_so_in_its_row():
    from proxima.scale.executors import error_line

    assert (
        error_line(RuntimeError("Traceback ...\n  File x\nValueError: bad value\n"))
        == "ValueError: bad value"
    )
    assert (
        error_line(None)
        == "the trial's process ended without an error (killed from outside, or out of memory)"
    )
