"""Rollouts on Ray actors (--rollout-workers N): the same numbers with 1, 2 or 4 workers (games of many agents
too, whose agents that leave stay masked), an actor killed mid-run replaced with nothing lost or counted twice,
exact resume, and one line where Ray is missing."""

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from safetensors.torch import load_file

import proxima
import proxima.run.loop
from proxima.base.files import read_checkpoint
from proxima.commands import main
from proxima.run.callbacks import Callback
from proxima.scale.executors import ray_available

# Ray tests share the machine's Ray processes (a cluster test stops its nodes, a killed sweep leaves a
# dying instance): one xdist worker runs all of them, in turn (`--dist loadgroup` in the Makefile).
pytestmark = pytest.mark.xdist_group("ray")

TIMES = {"time_s", "sps"}
# 8 updates of 4 envs x 128 steps; one torch thread, so that the learner's arithmetic is the same every time
RUN = dict(env_id="CartPole-v1", total_timesteps=4096, num_envs=4, torch_threads=1, plot=False, quiet=True)
needs_ray = pytest.mark.skipif(not ray_available(), reason="the ray extra is not installed")


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMES} for line in f]


def _same_weights(a, b) -> bool:
    wa, wb = load_file(os.path.join(a, "model.safetensors")), load_file(os.path.join(b, "model.safetensors"))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module: the runs join it instead of starting their own."""
    import ray

    # address="local": a new instance, never one another test's process happens to have running (test_sweep's
    # two-node cluster, on another pytest-xdist worker)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


class KillWorker(Callback):
    """Kills rollout worker ``k``'s actor after update ``at``, at once (the next rollout finds it dead) or
    ``delay`` seconds later from another thread (most likely while it collects the next rollout)."""

    def __init__(self, k: int, at: int, delay: float = 0.0):
        self.k, self.at, self.delay = k, at, delay

    def on_update_end(self, run, result):
        if run.updates_done == self.at:
            import ray

            actor = run.collector.pool.actors[self.k]
            if self.delay:
                threading.Timer(self.delay, ray.kill, [actor]).start()
            else:
                ray.kill(actor)


@pytest.mark.slow
@needs_ray
@pytest.mark.parametrize("backend", ["native", "gymnasium"])
def test_one_two_or_four_workers_give_the_same_run(backend, ray_instance, tmp_path):
    counts = (1, 2, 4) if backend == "native" else (1, 2)
    for n in counts:
        proxima.train(**RUN, env_backend=backend, rollout_workers=n, run_dir=str(tmp_path / f"w{n}"))
    first = _metrics(tmp_path / "w1")
    assert len(first) == 8 and first[-1]["global_step"] == 4096
    for n in counts[1:]:
        assert _metrics(tmp_path / f"w{n}") == first, n
        assert _same_weights(tmp_path / "w1", tmp_path / f"w{n}")
    # its envs sampled from their own streams: not the local path's numbers, which use torch's generator
    proxima.train(**RUN, env_backend=backend, run_dir=str(tmp_path / "local"))
    assert _metrics(tmp_path / "local") != first


@pytest.mark.slow
@needs_ray
def test_dict_observations_with_a_mask_on_workers_give_the_same_run_as_one_worker(ray_instance, tmp_path):
    """Packed observations (proxima.base.spaces) travel from the actors like any tensor; masks hold on workers too
    (the masking probe raises on a masked action)."""
    run = dict(env_id="tests.fixtures.space_envs:MaskDict-v0", num_envs=4, num_steps=64, total_timesteps=1024,
               seed=1, plot=False, quiet=True, torch_threads=1)  # fmt: skip
    for n in (1, 2):
        proxima.train(**run, rollout_workers=n, run_dir=str(tmp_path / f"w{n}"))
    assert _metrics(tmp_path / "w2") == _metrics(tmp_path / "w1")
    assert _same_weights(tmp_path / "w1", tmp_path / "w2")


@pytest.mark.slow
@needs_ray
@pytest.mark.parametrize("dist", ["beta", "tanh-gaussian"])
def test_a_bounded_policy_on_one_or_two_workers_gives_the_same_run(ray_instance, tmp_path, dist):
    """A bounded head's draws come from each env's own uniforms on workers (the Beta's through
    proxima.policy.distributions.gamma_from_uniforms)."""
    run = dict(env_id="Pendulum-v1", env_backend="native", action_dist=dist, num_envs=4, num_steps=64,
               total_timesteps=1024, seed=1, plot=False, quiet=True, torch_threads=1)  # fmt: skip
    for n in (1, 2):
        proxima.train(**run, rollout_workers=n, run_dir=str(tmp_path / f"w{n}"))
    assert len(_metrics(tmp_path / "w1")) == 4
    assert _metrics(tmp_path / "w2") == _metrics(tmp_path / "w1")
    assert _same_weights(tmp_path / "w1", tmp_path / "w2")


class KeepRollouts(Callback):
    """Keeps each rollout's valid steps, rewards and dones (the buffer the learner updated from)."""

    def __init__(self):
        self.valid, self.rewards, self.dones = [], [], []

    def on_update_end(self, run, result):
        buf = run.collector.buffer
        self.valid.append(buf.valid.clone())
        self.rewards.append(buf.rewards.clone())
        self.dones.append(buf.dones.clone())


@pytest.mark.slow
@needs_ray
def test_games_of_two_agents_on_one_or_two_workers_give_the_same_mappo_run(ray_instance, tmp_path):
    """Each actor owns whole games (2 of 4, their 4 rows), seeded by the game's index: the run is the one
    worker's, and the learner builds MAPPO's network for all games' agents."""
    run = dict(env_id="proxima/ProbeCoordination-v0", algo="mappo", num_envs=4, num_steps=32,
               total_timesteps=256, seed=1, plot=False, quiet=True, report=False, torch_threads=1)  # fmt: skip
    for n in (1, 2):
        agent = proxima.train(**run, rollout_workers=n, run_dir=str(tmp_path / f"w{n}"))
        assert agent.model.spec.agents == {"names": ["agent_0", "agent_1"], "kinds": [0, 0], "num_envs": 4}
    first = _metrics(tmp_path / "w1")
    assert [r["global_step"] for r in first] == [128, 256]  # game steps: 4 games x 32
    assert "episodic_return/agent_1" in first[-1]
    assert _metrics(tmp_path / "w2") == first
    assert _same_weights(tmp_path / "w1", tmp_path / "w2")


@pytest.mark.slow
@needs_ray
def test_an_agent_that_leaves_on_workers_is_masked_and_its_team_reward_shared(
    ray_instance, tmp_path, monkeypatch
):
    """tests.test_pettingzoo_backend's Chase: the scout leaves after 2 steps of up to 8. Its rows' missing steps
    reach the learner as not valid, and only the present agents' steps are samples; --team-reward gives every
    present agent of a game the same reward; and 1 or 2 workers (a game each) give the same run."""
    from tests.test_pettingzoo_backend import Chase

    sizes, update = [], proxima.run.loop.update
    monkeypatch.setattr(
        proxima.run.loop,
        "update",
        lambda model, opt, batch, s, g: sizes.append(len(batch)) or update(model, opt, batch, s, g),
    )
    run = dict(env=functools.partial(Chase, max_cycles=8, scout_steps=2), algo="mappo", team_reward=True,
               norm_obs=True, norm_reward=True, num_envs=2, num_steps=16, total_timesteps=96, seed=1, plot=False,
               quiet=True, report=False, torch_threads=1)  # fmt: skip
    kept = {}
    for n in (1, 2):
        kept[n] = KeepRollouts()
        proxima.train(**run, rollout_workers=n, run_dir=str(tmp_path / f"w{n}"), callbacks=[kept[n]])
    assert _metrics(tmp_path / "w2") == _metrics(tmp_path / "w1")
    assert _same_weights(tmp_path / "w1", tmp_path / "w2")
    valid = torch.stack(kept[2].valid)  # (updates, steps, 2 games x 3 agents: runner_0, runner_1, scout)
    assert torch.equal(valid, torch.stack(kept[1].valid))
    assert sizes[3:] == sizes[:3] == valid.sum((1, 2)).tolist() and all(size < 16 * 6 for size in sizes)
    assert valid[..., 2::3].float().mean() <= 0.5 < valid[..., 0::3].float().mean()
    # the learner merges the workers' statistics of the agents present only, as one process does
    weights = load_file(os.path.join(tmp_path / "w2", "model.safetensors"))
    counts = [float(weights[k]) for k in weights if k.endswith(("obs_rms.count", "return_rms.count"))]
    assert counts == pytest.approx([float(valid.sum())] * 2, abs=1e-3)
    # a team's reward: within a game, every present agent's is the same, except at a truncation (whose
    # bootstrap is each agent's own): at the steps after which no agent of the game is done
    # (dones[t + 1]: an agent's episode ended at step t), so the last step of each rollout is left out
    rewards, dones = torch.stack(kept[2].rewards), torch.stack(kept[2].dones).bool()
    r, present = rewards[:, :-1].unflatten(-1, (2, 3)), valid[:, :-1].unflatten(-1, (2, 3))
    compared = present & ~dones[:, 1:].unflatten(-1, (2, 3)).any(-1, keepdim=True)
    assert compared[..., 2].any()  # the scout while it is there
    spread = torch.where(compared, r, -torch.inf).amax(-1) - torch.where(compared, r, torch.inf).amin(-1)
    assert torch.allclose(spread[compared.sum(-1) > 1], torch.tensor(0.0))


@pytest.mark.slow
@needs_ray
def test_a_killed_actor_is_replaced_and_native_envs_continue_exactly(ray_instance, tmp_path, capsys):
    proxima.train(**RUN, rollout_workers=2, run_dir=str(tmp_path / "whole"))
    capsys.readouterr()
    proxima.train(**{**RUN, "quiet": False}, rollout_workers=2, run_dir=str(tmp_path / "killed"),
                  callbacks=[KillWorker(1, at=3)])  # fmt: skip
    said = capsys.readouterr()
    assert ("note: rollout worker 1 died; a new actor collects its slice again, from the state its envs had at "
            "the start of this rollout") in said.out + said.err  # fmt: skip
    assert _metrics(tmp_path / "killed") == _metrics(tmp_path / "whole")
    assert _same_weights(tmp_path / "killed", tmp_path / "whole")


@pytest.mark.slow
@needs_ray
def test_a_killed_actor_of_gymnasium_envs_starts_fresh_episodes_and_no_step_is_lost(
    ray_instance, tmp_path, capsys
):
    run_dir = tmp_path / "killed"
    proxima.train(**{**RUN, "quiet": False}, env_backend="gymnasium", rollout_workers=2, run_dir=str(run_dir),
                  callbacks=[KillWorker(0, at=2, delay=0.05)])  # fmt: skip
    said = capsys.readouterr()
    assert (
        "note: rollout worker 0 died; a new actor collects its slice again, from fresh episodes"
        in said.out + said.err
    )
    rows = _metrics(run_dir)
    assert [r["global_step"] for r in rows] == [512 * (i + 1) for i in range(8)]
    # every episode counted once: the lengths of the episodes logged add up to no more than the steps taken
    with open(run_dir / "episodes.jsonl") as f:
        episodes = [json.loads(line) for line in f]
    assert episodes and sum(e["length"] for e in episodes) <= 4096


@pytest.mark.slow
@needs_ray
def test_a_run_with_workers_resumes_exactly_after_ctrl_c(ray_instance, tmp_path):
    class CtrlC(Callback):
        def on_update_end(self, run, result):
            if run.updates_done == 3:
                os.kill(os.getpid(), signal.SIGINT)  # the checkpointing callback takes it after this update

    proxima.train(**RUN, rollout_workers=2, run_dir=str(tmp_path / "whole"))
    with pytest.raises(proxima.base.errors.TrainingInterrupted):
        proxima.train(**RUN, rollout_workers=2, run_dir=str(tmp_path / "cut"), callbacks=[CtrlC()])
    assert len(_metrics(tmp_path / "cut")) == 3
    proxima.resume(str(tmp_path / "cut"), quiet=True)
    assert _metrics(tmp_path / "cut") == _metrics(tmp_path / "whole")
    assert _same_weights(tmp_path / "cut", tmp_path / "whole")


@pytest.mark.slow
@needs_ray
def test_sigterm_to_a_run_with_workers_checkpoints_says_how_to_resume_and_exits_143(tmp_path):
    """The Ray actors get no signal: the learner finishes its update, checkpoints, and ends them."""
    run_dir = str(tmp_path / "run")
    flags = ["--env-id", "CartPole-v1", "--total-timesteps", "8192", "--num-envs", "2", "--num-steps", "64",
             "--rollout-workers", "1", "--checkpoint-every", "0", "--torch-threads", "1", "--quiet", "--no-plot",
             "--no-report"]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", "train", "--run-dir", run_dir, *flags],
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    metrics, deadline = os.path.join(run_dir, "metrics.jsonl"), time.monotonic() + 180
    try:
        while not (os.path.exists(metrics) and sum(1 for _ in open(metrics)) >= 1):  # past its start
            assert proc.poll() is None and time.monotonic() < deadline, (
                "the run ended before it could be stopped"
            )
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "stopped by SIGTERM after update" in last and f"proxima train --resume {run_dir}" in last
    meta = read_checkpoint(os.path.join(run_dir, "checkpoint.safetensors"))[1]
    assert not meta["finished"] and 1 <= meta["update"] == len(_metrics(run_dir)) < 64
    assert main(["train", "--resume", run_dir, "--quiet"]) == 0
    assert len(_metrics(run_dir)) == 64


@pytest.mark.slow
@needs_ray
@pytest.mark.parametrize(
    "env,message",
    [
        ("WildConstructorRaises-v0", "WildConstructorRaises-v0's constructor raised RuntimeError: cannot find the simulator's assets in /opt/sim"),
        ("WildCrashAfter1000-v0", "the env raised RuntimeError: simulator crashed in update 8"),
    ],
)  # fmt: skip
def test_an_env_that_fails_on_a_worker_is_one_line_as_in_this_process(
    env, message, ray_instance, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", "tests.fixtures.wild_envs:" + env, "--num-envs", "2", "--rollout-workers", "2",
            "--total-timesteps", "5000", "--run-dir", str(run_dir), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("proxima train: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--rollout-workers", "3"], "--rollout-workers must be 0 (envs in this process) or a positive divisor of --num-envs 4, got 3"),
        (["--rollout-workers", "2", "--capture-video"], "--capture-video records envs of this process; drop it or --rollout-workers"),
    ],
)  # fmt: skip
def test_bad_rollout_workers_are_one_line_exit_2(argv, match, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--total-timesteps", "512", "--run-dir", str(run_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1, err
    assert not run_dir.exists()


def test_without_ray_rollout_workers_say_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    run_dir = tmp_path / "run"
    assert (
        main(["train", "--rollout-workers", "2", "--total-timesteps", "512", "--run-dir", str(run_dir)]) == 2
    )
    err = capsys.readouterr().err
    assert (
        err
        == "proxima train: error: --rollout-workers needs Ray: pip install 'proxima[ray]' (make installs it)\n"
    )
    assert not run_dir.exists()


@needs_ray
def test_workers_run_the_backend_auto_picks_for_the_whole_run(ray_instance):
    """auto's choice depends on the env count (Acrobot: native from 16 envs). Two workers of 8 envs each
    run what one process of 16 would, so that the run does not depend on how it is split."""
    from proxima.run.config import PPOArgs
    from proxima.scale.rollout_workers import WorkerPool

    pool = WorkerPool(PPOArgs.of(env_id="Acrobot-v1", num_envs=16, rollout_workers=2))
    try:
        assert pool.args.env.env_backend == "native"
    finally:
        pool.close()
