"""One run directory, one writer: a run, a batched run, a sweep and a search each hold an exclusive lock on their
directory (``RUN_DIR/.lock``, ``fcntl.flock``) from before their first write to their end, so that a second
process is refused in one line naming the first one's PID, and a lock left by a killed process never blocks.

The races are run between processes, started together at a barrier, many times: without the lock, two
``proxima train`` into one new directory both pass its emptiness check and both train into it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import proxima
import proxima.scale.sweeps
import proxima.scale.trainer
import proxima.scale.tuning
from proxima.base.files import CHECKPOINT, LOCK, read_checkpoint
from proxima.commands import main
from proxima.run.callbacks import Callback

# 8 updates of 4 native CartPole envs x 128 steps, a checkpoint after each
RUN = [
    "--env-id", "CartPole-v1", "--total-timesteps", "4096", "--num-envs", "4", "--num-steps", "128",
    "--checkpoint-every", "1", "--torch-threads", "1", "--no-cuda", "--no-plot", "--no-report", "--quiet",
]  # fmt: skip
UPDATES, BATCH = 8, 512

# Each racer imports proxima once, then for each round waits at a barrier for the other racer and runs its
# command line; it writes its PID and each round's exit status and stderr as JSON.
RACER = textwrap.dedent("""
    import contextlib, io, json, os, sys, time
    from proxima.commands import main
    spec = json.load(open(sys.argv[1]))
    me, barrier, results = spec["me"], spec["barrier"], []
    for i, argv in enumerate(spec["rounds"]):
        open(os.path.join(barrier, f"{i}.{me}"), "w").close()
        while not os.path.exists(os.path.join(barrier, f"{i}.{1 - me}")):
            time.sleep(0.0005)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        results.append({"code": code, "err": err.getvalue()})
    json.dump({"pid": os.getpid(), "results": results}, open(spec["out"], "w"))
""")

# A process that trains a run and hangs in its update 2's callbacks (checkpointed after update 1), as a run
# that is still training; with "term", it sends itself SIGTERM after 2 s, as a scheduler ending the job does:
# it then ends update 2, checkpoints and exits 143 (its grace period).
HOLDER = textwrap.dedent("""
    import os, signal, sys, time
    import proxima, proxima.base.errors
    from proxima.run.callbacks import Callback
    run_dir, how, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class Hang(Callback):
        def on_update_end(self, run, result):
            if run.updates_done == 2 and run.args.run.seed == 1:
                print("hanging", flush=True)
                time.sleep(600 if how == "hang" else 2)
                os.kill(os.getpid(), signal.SIGTERM)

    try:
        proxima.train(env_id="CartPole-v1", run_dir=run_dir, total_timesteps=4096, num_envs=4, num_steps=128,
                      checkpoint_every=1, torch_threads=1, cuda=False, plot=False, report=False, quiet=True,
                      seed=1, num_seeds=seeds, callbacks=[Hang()])
    except proxima.base.errors.TrainingInterrupted as e:
        sys.exit(e.exit_status)
""")


def _racers(tmp_path, rounds: list[list[list[str]]]) -> list[dict]:
    """Run two racers, each through its command lines (``rounds[k]``), round by round at a barrier."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs, outs = [], []
    for k in (0, 1):
        spec, out = tmp_path / f"racer{k}.json", tmp_path / f"results{k}.json"
        spec.write_text(json.dumps({"me": k, "barrier": str(barrier), "rounds": rounds[k], "out": str(out)}))
        procs.append(subprocess.Popen([sys.executable, "-c", RACER, str(spec)], cwd=os.getcwd()))
        outs.append(out)
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    return [json.loads(out.read_text()) for out in outs]


def _in_use(
    directory, pid: int, what: str = "run directory", then: str = " or give another --run-dir"
) -> str:
    return f"{what} {directory} is in use by another proxima process (PID {pid}); wait for it to finish{then}"


def _lines(run_dir, name: str = "metrics.jsonl") -> list[dict]:
    with open(os.path.join(run_dir, name)) as f:
        return [json.loads(line) for line in f]  # a torn line would not parse


def _one_run_of_its_updates(run_dir, seed: int, updates: int = UPDATES) -> None:
    """The run in ``run_dir`` is one run of ``seed``: each update logged once, every file its own."""
    assert json.load(open(os.path.join(run_dir, "config.json")))["run"]["seed"] == seed
    assert [m["global_step"] for m in _lines(run_dir)] == [BATCH * (u + 1) for u in range(updates)]
    meta = read_checkpoint(os.path.join(run_dir, CHECKPOINT))[1]
    assert meta["finished"] and meta["global_step"] == updates * BATCH
    left = [n for n in os.listdir(run_dir) if n == LOCK or n.startswith(".tmp-")]
    assert left == [], left


@pytest.mark.slow
def test_two_trains_racing_into_one_new_directory_make_one_run_and_refuse_the_other(tmp_path):
    tries, updates = 10, 4
    dirs = [str(tmp_path / f"run{i}") for i in range(tries)]
    run = [*RUN, "--total-timesteps", str(updates * BATCH)]
    rounds = [[["train", "--run-dir", d, "--seed", str(k + 1), *run] for d in dirs] for k in (0, 1)]
    racers = _racers(tmp_path, rounds)
    refused_by_pid = 0
    for i, run_dir in enumerate(dirs):
        codes = [r["results"][i]["code"] for r in racers]
        assert sorted(codes) == [0, 2], (i, codes, [r["results"][i]["err"] for r in racers])
        winner = codes.index(0)
        err = racers[1 - winner]["results"][i]["err"].strip().splitlines()
        assert len(err) == 1, err
        # the other one is refused while the first trains (or, started late, finds its finished run)
        in_use = f"proxima train: error: {_in_use(run_dir, racers[winner]['pid'])}"
        assert err[0] in (in_use, f"proxima train: error: run directory {run_dir!r} already exists and is "
                                  "not empty; give a new --run-dir"), err[0]  # fmt: skip
        refused_by_pid += err[0] == in_use
        _one_run_of_its_updates(run_dir, seed=winner + 1, updates=updates)
    assert refused_by_pid >= tries // 2


def _stopped_run(run_dir: str, monkeypatch, at: int = 3) -> None:
    """A run stopped by SIGTERM after update ``at``, with its checkpoint there (exit status 143)."""

    class SigtermAt(Callback):
        def on_update_end(self, run, result) -> None:
            if run.updates_done == at:
                os.kill(os.getpid(), signal.SIGTERM)

    made = proxima.scale.trainer.default_callbacks
    with monkeypatch.context() as m:
        m.setattr(
            proxima.scale.trainer, "default_callbacks", lambda run, user=(): made(run, [*user, SigtermAt()])
        )
        assert main(["train", "--run-dir", run_dir, "--seed", "1", *RUN]) == 143


@pytest.mark.slow
def test_two_resumes_of_one_stopped_run_train_each_update_once(tmp_path, monkeypatch, capsys):
    stopped = str(tmp_path / "stopped")
    _stopped_run(stopped, monkeypatch)
    capsys.readouterr()
    tries = 4
    dirs = [str(tmp_path / f"run{i}") for i in range(tries)]
    for d in dirs:
        shutil.copytree(stopped, d)
    # in every other round the second racer starts as a requeued job does: the command line of the first start
    requeue = ["train", "--resume-if-exists", "--seed", "1", *RUN]
    rounds = [
        [["train", "--resume", d] for d in dirs],
        [["train", "--resume", d] if i % 2 == 0 else [*requeue, "--run-dir", d] for i, d in enumerate(dirs)],
    ]
    racers = _racers(tmp_path, rounds)
    refused_by_pid = 0
    for i, run_dir in enumerate(dirs):
        codes = [r["results"][i]["code"] for r in racers]
        errs = [r["results"][i]["err"].strip().splitlines() for r in racers]
        # two --resume: one is refused; a requeued job instead waits for the other to end, and then finds the
        # run finished and exits 0 without training
        assert sorted(codes) == [0, 2] or (i % 2 == 1 and codes == [0, 0]), (i, codes, errs)
        for k, code in enumerate(codes):
            if code == 2:
                assert len(errs[k]) == 1, errs[k]
                in_use = f"proxima train: error: {_in_use(run_dir, racers[1 - k]['pid'], then='')}"
                finished = f"proxima train: error: the run in {run_dir} already finished (update {UPDATES});"
                assert errs[k][0] == in_use or errs[k][0].startswith(finished), errs[k]  # or started late
                refused_by_pid += errs[k][0] == in_use
        _one_run_of_its_updates(run_dir, seed=1)
    assert refused_by_pid >= 1


def _holder(run_dir, how: str = "hang", seeds: int = 1) -> subprocess.Popen:
    """A process that trains into ``run_dir`` and hangs after its update 2 (see HOLDER)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir), how, str(seeds)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    assert proc.stdout.readline() == "hanging\n", "the holder ended before its update 2"
    return proc


def _holds(directory, pid: int) -> None:
    assert open(os.path.join(directory, LOCK)).read().split()[0] == str(pid)


def _one_line(capsys, command: str = "train") -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"proxima {command}: error: "), err
    return err[0][len(f"proxima {command}: error: ") :]


def test_a_run_in_training_refuses_a_resume_and_its_lock_dies_with_its_process(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    proc = _holder(run_dir)
    try:
        _holds(run_dir, proc.pid)
        before = {n: open(os.path.join(run_dir, n), "rb").read() for n in ("metrics.jsonl", CHECKPOINT)}
        assert main(["train", "--resume", run_dir]) == 2
        assert _one_line(capsys) == _in_use(run_dir, proc.pid, then="")
        assert main(["train", "--run-dir", run_dir, "--seed", "1", *RUN]) == 2
        assert _one_line(capsys) == _in_use(run_dir, proc.pid)
        with pytest.raises(proxima.UserError, match=rf"in use by another proxima process \(PID {proc.pid}\)"):
            proxima.resume(run_dir)
        assert before == {n: open(os.path.join(run_dir, n), "rb").read() for n in before}  # by the refused
    finally:
        proc.kill()  # SIGKILL: no handler runs, the lock file stays with its PID in it
        proc.wait()
    _holds(run_dir, proc.pid)
    assert main(["train", "--resume", run_dir]) == 0
    _one_run_of_its_updates(run_dir, seed=1)


def test_a_requeued_job_waits_for_the_old_one_to_end_its_grace_period(tmp_path, capsys):
    """The old job got SIGTERM: it finishes its update 2 and checkpoints, within its grace period, while the
    requeued one starts. The new one waits for it, then resumes from update 2: no update is trained twice (and
    without the lock, it resumes from update 1 as the old one logs update 2)."""
    run_dir = str(tmp_path / "run")
    proc = _holder(run_dir, how="term")
    try:
        assert (
            main(["train", "--run-dir", run_dir, "--resume-if-exists", "--seed", "1", *RUN, "--no-quiet"])
            == 0
        )
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()
        proc.wait()
    out = capsys.readouterr().out
    assert f"{run_dir} is in use by another proxima process (PID {proc.pid}); waiting for it to end" in out
    assert f"resuming {run_dir} after update 2 of 8" in out  # the old job's last checkpoint
    _one_run_of_its_updates(run_dir, seed=1)


def test_a_batched_run_holds_its_directory_and_each_seeds(tmp_path, capsys):
    parent = tmp_path / "batch"
    proc = _holder(parent, seeds=2)
    try:
        for d in (parent, parent / "seed1", parent / "seed2"):
            _holds(d, proc.pid)
        assert main(["train", "--resume", str(parent / "seed2")]) == 2  # a seed alone, from its own files
        assert _one_line(capsys) == _in_use(parent / "seed2", proc.pid, then="")
        assert main(["train", "--resume", str(parent)]) == 2
        assert _one_line(capsys) == _in_use(parent, proc.pid, then="")
    finally:
        proc.kill()
        proc.wait()


def test_a_temporary_file_left_by_a_kill_mid_write_is_removed_by_the_next_run(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    _stopped_run(str(run_dir), monkeypatch)
    outside = run_dir / "notes.json"  # the user's file (a link that leads out of the run is refused outright)
    outside.write_text("not the run's\n")
    stale = run_dir / ".tmp-0123456789abcheckpoint.safetensors"  # a checkpoint write cut by SIGKILL
    stale.write_bytes(b"\0" * 1000)
    (run_dir / "best").mkdir()
    stale_best = run_dir / "best" / ".tmp-00000000000fmodel.safetensors"
    stale_best.write_bytes(b"\0" * 10)
    mine = run_dir / ".tmp-notes.txt"  # not a name proxima makes
    mine.write_text("the user's\n")
    link = run_dir / ".tmp-aaaaaaaaaaaaconfig.json"  # a symbolic link is not proxima's temporary file
    link.symlink_to(outside)
    assert main(["train", "--resume", str(run_dir)]) == 0
    assert not stale.exists() and not stale_best.exists()
    assert (
        mine.read_text() == "the user's\n" and link.is_symlink() and outside.read_text() == "not the run's\n"
    )
    assert [m["global_step"] for m in _lines(run_dir)] == [BATCH * (u + 1) for u in range(UPDATES)]


# A sweep (or a search) whose first trial hangs: its process holds the sweep's directory
SWEEP_HOLDER = textwrap.dedent("""
    import sys, time
    import proxima, proxima.scale.sweeps, proxima.scale.tuning

    def hang(*args, **kwargs):
        print("hanging", flush=True)
        time.sleep(600)

    out, kind = sys.argv[1], sys.argv[2]
    settings = dict(env_id="CartPole-v1", total_timesteps=512, num_envs=4, num_steps=128, cuda=False,
                    torch_threads=1, plot=False, report=False, output_dir=out)
    if kind == "sweep":
        proxima.scale.sweeps.train = hang
        proxima.sweep(executor="local", seeds=1, **settings)
    else:
        proxima.scale.tuning._run = hang
        proxima.tune(space={"learning_rate": [1e-3, 3e-4]}, num_samples=1, **settings)
""")


@pytest.mark.parametrize("kind", ["sweep", "tune"])
def test_a_sweep_or_search_directory_has_one_writer(kind, tmp_path, monkeypatch, capsys):
    if kind == "tune":
        pytest.importorskip("ray")  # proxima tune searches on Ray Tune
    out = tmp_path / kind
    proc = subprocess.Popen([sys.executable, "-c", SWEEP_HOLDER, str(out), kind], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())  # fmt: skip
    module = proxima.scale.sweeps if kind == "sweep" else proxima.scale.tuning
    real = module._run

    def refused_first(*args, **kwargs):
        raise AssertionError(f"{kind} --resume went on into a directory that another process writes")

    try:
        assert proc.stdout.readline() == "hanging\n"
        _holds(out, proc.pid)
        monkeypatch.setattr(module, "_run", refused_first)
        assert main([kind, "--resume", str(out)]) == 2
        what = "sweep directory" if kind == "sweep" else "tune directory"
        assert _one_line(capsys, kind) == _in_use(out, proc.pid, what, then="")
    finally:
        proc.kill()
        proc.wait()
    if kind == "sweep":  # killed, it blocks nothing: its resume runs the trial
        monkeypatch.setattr(module, "_run", real)
        assert main(["sweep", "--resume", str(out), "--executor", "local"]) == 0
        assert json.load(open(out / "results.json"))["trials"][0]["status"] == "finished"
        assert not (out / LOCK).exists()


# A process that holds a directory's lock and sleeps; with "fork", after forking a worker that sleeps too, as
# --async-envs' workers are forked while a run holds its directory
LOCKER = textwrap.dedent("""
    import multiprocessing, sys, time
    from proxima.base.files import lock_directory
    with lock_directory(sys.argv[1]):
        if sys.argv[2:] == ["fork"]:
            worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
            worker.start()
            print(worker.pid, flush=True)
        print("held", flush=True)
        time.sleep(600)
""")


def test_a_lock_ends_with_its_process_not_with_the_workers_it_forked(tmp_path):
    from proxima.base.files import lock_directory

    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(run_dir), "fork"], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())  # fmt: skip
    worker = int(proc.stdout.readline())
    try:
        assert proc.stdout.readline() == "held\n"
        proc.kill()
        proc.wait()
        with lock_directory(str(run_dir)):  # its worker lives on, and holds nothing
            _holds(run_dir, os.getpid())
    finally:
        proc.kill()
        os.kill(worker, signal.SIGKILL)


def test_eval_reads_a_run_that_another_process_holds(tmp_path, capsys):
    """``proxima eval`` is a reader: it takes no lock, so it scores a run (or its best/) while another process
    trains it, and a read-only copy too; its eval.json is replaced atomically."""
    run_dir = tmp_path / "run"
    assert main(["train", "--run-dir", str(run_dir), "--seed", "1", *RUN, "--total-timesteps", "512"]) == 0
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(run_dir)], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd())  # fmt: skip
    try:
        assert proc.stdout.readline() == "held\n"
        assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
        assert json.load(open(run_dir / "eval.json"))["episodes"] == 2
        assert main(["train", "--resume", str(run_dir), "--total-timesteps", "1024"]) == 2
        assert "in use by another proxima process" in capsys.readouterr().err
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_is_reentrant_in_its_thread_and_refused_to_another(tmp_path):
    import threading

    from proxima.base.files import lock_directory

    d = tmp_path / "d"
    with lock_directory(str(d)):
        with lock_directory(str(d)):  # a sweep's trial, then its run: one holder
            _holds(d, os.getpid())
        shutil.rmtree(d)  # a trial that clears its directory: the lock is taken again
        with lock_directory(str(d)):
            _holds(d, os.getpid())
        errors = []

        def other():
            try:
                with lock_directory(str(d)):
                    pass
            except proxima.UserError as e:
                errors.append(str(e))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert errors and "in use by another run of this process" in errors[0], errors
        _holds(d, os.getpid())
    assert not d.exists()  # made for the lock and left empty: removed with it
