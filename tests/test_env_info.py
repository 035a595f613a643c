"""What an env reports, and curriculum: --log-info, the episode infos callbacks ask for, and VecEnv.call /
set_attr, on the Gymnasium backend, native envs (no info, no env objects: said in one line) and Ray workers.

``tests/fixtures/info_envs.py``'s InfoEnv-v0 has known answers: episodes of 4 steps paying ``level`` each,
and an info that counts only at the step that ends an episode.
"""

import json
import os
import re

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import proxima
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.envs import make_vec_env
from proxima.envs.interface import merge_info_keys, per_env_values
from proxima.run.callbacks import Callback, wanted_infos
from proxima.run.logger import info_number
from proxima.run.report import find_runs, report_data
from proxima.scale.executors import ray_available

ENV = "tests.fixtures.info_envs:InfoEnv-v0"
# 2 envs x 16 steps: each rollout holds exactly 4 whole episodes per env (8 per update), 4 updates
RUN = dict(env_id=ENV, env_backend="gymnasium", num_envs=2, num_steps=16, num_minibatches=2,
           total_timesteps=128, plot=False, report=False, quiet=True, torch_threads=1)  # fmt: skip


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


class Recorder(Callback):
    """Keeps each update's episode infos and returns."""

    def __init__(self, info_keys=()):
        self.info_keys = info_keys
        self.infos, self.returns = [], []

    def on_update_end(self, run, result):
        self.infos.append(result.episode_infos)
        self.returns.append(result.episode_returns)


def test_log_info_logs_the_mean_at_episode_ends_to_metrics_tensorboard_and_the_report(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    keys = ("success", "steps", "pos", "level", "tag", "where", "missing")
    proxima.train(**{**RUN, "quiet": False, "report": True}, log_info=keys, run_dir=run_dir)
    metrics = _metrics(run_dir)
    assert len(metrics) == 4
    for m in metrics:
        # the ending step's info only: the steps before it say success False and level -1
        assert (m["info/success"], m["info/steps"], m["info/pos"], m["info/level"]) == (1.0, 4.0, 0.5, 0.0)
        assert m["info/tag"] is None and m["info/missing"] is None  # a string, and a key no episode had
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if "--log-info" in line]
    assert said == [
        "warning: --log-info tag: info['tag'] is str 'done', not a number; info/tag averages only the numbers "
        "(a bool counts as 0 or 1)",
        # a long value is shortened to 40 characters
        "warning: --log-info where: info['where'] is str 'the episode ended at /home/user/leve..., not a number; "
        "info/where averages only the numbers (a bool counts as 0 or 1)",
        "note: --log-info missing: none of the 8 episodes that ended in update 1 had info['missing'] (of the keys "
        "asked for, they had 'level', 'pos', 'steps', 'success', 'tag', 'where'; proxima check-env lists the env's "
        "keys); "
        "info/missing stays empty until one does",
    ]
    events = EventAccumulator(run_dir)
    events.Reload()
    assert [s.value for s in events.Scalars("charts/info/steps")] == [4.0] * 4
    assert [s.step for s in events.Scalars("charts/info/success")] == [32, 64, 96, 128]
    assert "charts/info/tag" not in events.Tags()["scalars"]
    charts = {c["key"] for c in report_data(*find_runs([run_dir]))["charts"]}
    assert {"info/success", "info/steps", "info/pos", "info/level"} <= charts
    assert "info/tag" not in charts and "info/missing" not in charts
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["run"]["log_info"] == list(keys)


def test_log_info_on_the_command_line(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    argv = ["train", "--env-id", ENV, "--env-backend", "gymnasium", "--num-envs", "2", "--num-steps", "16",
            "--total-timesteps", "64", "--no-plot", "--no-report", "--quiet", "--run-dir", run_dir,
            "--log-info", "success", "steps"]  # fmt: skip
    assert main(argv) == 0
    assert [(m["info/success"], m["info/steps"]) for m in _metrics(run_dir)] == [(1.0, 4.0), (1.0, 4.0)]


def test_native_envs_report_no_info_and_say_so_once(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    proxima.train(env_id="CartPole-v1", env_backend="native", num_envs=4, total_timesteps=4096, plot=False,
                  report=False, log_info=("success",), run_dir=run_dir, torch_threads=1)  # fmt: skip
    assert all(m["info/success"] is None for m in _metrics(run_dir))
    said = [line for line in capsys.readouterr().out.splitlines() if "--log-info" in line]
    assert len(said) == 1 and "info['success']" in said[0] and "this env backend reports no info" in said[0]


def test_a_callback_gets_the_keys_it_asks_for_or_all_of_the_info(tmp_path):
    some = Recorder(("level", "nope"))  # and --log-info steps: the infos hold the keys anyone asked for
    proxima.train(**RUN, log_info=("steps",), run_dir=str(tmp_path / "some"), callbacks=[some])
    for infos, returns in zip(some.infos, some.returns, strict=True):
        assert len(infos) == len(returns) == 8 and infos == [{"level": 0, "steps": 4}] * 8
    every = Recorder("all")
    proxima.train(**RUN, run_dir=str(tmp_path / "every"), callbacks=[Recorder(("level",)), every])
    for infos in every.infos:
        where = "the episode ended at /home/user/levels/level-0.json"
        assert infos == [{"level": 0, "success": True, "steps": 4, "tag": "done", "pos": np.float32(0.5),
                          "where": where}] * 8  # fmt: skip


def test_nobody_asks_so_the_envs_carry_no_info(tmp_path):
    seen = []

    class Looks(Recorder):
        def on_update_end(self, run, result):
            super().on_update_end(run, result)
            seen.append(run.envs.envs.call("get_wrapper_attr", "info_keys"))

    looks = Looks()
    proxima.train(**RUN, run_dir=str(tmp_path / "run"), callbacks=[looks])
    assert looks.infos == [[]] * 4 and len(looks.returns[0]) == 8
    assert seen and all(keys is None for envs in seen for keys in envs)  # _Tidy keeps no info


class Curriculum(Callback):
    """Level 3 for every env after update 1; after update 2 each env one level up by ``call``, then levels
    (0, 5) by env through a list; records what ``call`` returned, and the episodes' returns and levels."""

    info_keys = ("level",)

    def __init__(self):
        self.called, self.returns, self.levels = None, [], []

    def on_update_end(self, run, result):
        self.returns.append(sorted(set(result.episode_returns)))
        self.levels.append(sorted({info["level"] for info in result.episode_infos}))
        if run.updates_done == 1:
            run.envs.set_attr("level", 3)
        if run.updates_done == 2:
            self.called = (run.envs.call("harder", by=1), run.envs.call("level"))
            run.envs.set_attr("level", [0, 5])
            self.after = run.envs.call("level")


@pytest.mark.parametrize("async_envs", [False, True])
def test_a_curriculum_callback_changes_the_envs_between_updates(tmp_path, async_envs):
    curriculum = Curriculum()
    proxima.train(**RUN, async_envs=async_envs, log_info=("level",), run_dir=str(tmp_path / "run"),
                  callbacks=[curriculum])  # fmt: skip
    # episodes of 4 steps paying the level each: every rollout's episodes began after the change
    assert curriculum.returns == [[0.0], [12.0], [0.0, 20.0], [0.0, 20.0]]
    assert curriculum.levels == [[0], [3], [0, 5], [0, 5]]
    assert curriculum.called == ((4, 4), (4, 4)) and curriculum.after == (0, 5)
    metrics = _metrics(str(tmp_path / "run"))
    assert [m["info/level"] for m in metrics] == [0.0, 3.0, 2.5, 2.5]


def test_call_and_set_attr_refuse_in_one_line_what_they_cannot_do():
    envs = make_vec_env(ENV, 2, backend="gymnasium")
    try:
        with pytest.raises(UserError, match=r"^the env has no attribute 'levl'; call and set_attr reach"):
            envs.set_attr("levl", 1)  # Gymnasium would make a new attribute on the outer wrapper
        with pytest.raises(UserError, match="set_attr got 3 values for 2 envs"):
            envs.set_attr("level", [1, 2, 3])
    finally:
        envs.close()
    native = make_vec_env("CartPole-v1", 2, backend="native")
    for method in (lambda: native.call("reset"), lambda: native.set_attr("gravity", 5.0)):
        with pytest.raises(UserError, match=r"^native envs are batched tensors with no per-env objects") as e:
            method()
        assert "\n" not in str(e.value) and "--env-backend gymnasium" in str(e.value)


@pytest.mark.parametrize(
    "env_id, package, says",
    [
        ("vmas:navigation", "vmas", "VMAS simulates its envs as one batch of tensors with no per-env"),
        ("ALE/Pong-v5", "ale_py", "the ale backend's games run inside ale-py's C++ vector env"),
    ],
)
def test_vmas_and_ale_refuse_call_and_set_attr_in_their_own_words(env_id, package, says):
    pytest.importorskip(package)
    envs = make_vec_env(env_id, 2)
    try:
        for method in (lambda: envs.call("reset"), lambda: envs.set_attr("gravity", 5.0)):
            with pytest.raises(UserError, match="^" + re.escape(says)) as e:
                method()
            assert "\n" not in str(e.value)
    finally:
        envs.close()


def test_a_native_run_whose_callback_sets_an_env_attribute_stops_in_one_line(tmp_path):
    class Sets(Callback):
        def on_update_end(self, run, result):
            run.envs.set_attr("gravity", 5.0)

    with pytest.raises(UserError, match=r"^native envs are batched tensors"):
        proxima.train(env_id="CartPole-v1", env_backend="native", total_timesteps=512, plot=False, report=False,
                      quiet=True, run_dir=str(tmp_path / "run"), callbacks=[Sets()])  # fmt: skip


def test_the_pieces_known_answers(tmp_path):
    assert merge_info_keys((), ("a", "b"), ("b", "c")) == ("a", "b", "c")
    assert merge_info_keys(("a",), "all") == "all" and merge_info_keys((), ()) is None
    assert per_env_values(7, 3) == [7, 7, 7] and per_env_values((1, 2), 2) == [1, 2]
    numbers = [True, False, 3, 2.5, np.float32(0.5), np.int64(2), np.array([1.5]), np.bool_(True)]
    assert [info_number(x) for x in numbers] == [1.0, 0.0, 3.0, 2.5, 0.5, 2.0, 1.5, 1.0]
    assert [info_number(x) for x in ("1", None, [1], np.zeros(2), {"a": 1})] == [None] * 5
    with pytest.raises(
        UserError, match=r"^Recorder.info_keys is 'level'; give a tuple of info keys, or \"all\""
    ):
        wanted_infos([Recorder("level")])
    with pytest.raises(UserError, match="log_info must be a tuple of info keys"):
        proxima.train(**RUN, log_info="success", run_dir=str(tmp_path / "run"))


needs_ray = pytest.mark.skipif(not ray_available(), reason="the ray extra is not installed")


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
@needs_ray
def test_rollout_workers_bring_the_infos_back_and_forward_call_and_set_attr(tmp_path):
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:

        class ByEnv(Recorder):
            def on_update_end(self, run, result):
                super().on_update_end(run, result)
                if run.updates_done == 1:
                    run.envs.set_attr("level", [0, 1, 2, 3])  # env i, on worker i // 2, gets level i
                    self.levels = run.envs.call("level")

        by_env = ByEnv("all")
        run_dir = str(tmp_path / "run")
        proxima.train(**{**RUN, "num_envs": 4, "total_timesteps": 128}, rollout_workers=2, log_info=("level",),
                      run_dir=run_dir, callbacks=[by_env])  # fmt: skip
    finally:
        ray.shutdown()
    assert by_env.levels == (0, 1, 2, 3)
    # update 2's episodes, in time order then env order: each env's return is 4 x its level, its info says so
    assert by_env.returns[1] == [0.0, 4.0, 8.0, 12.0] * 4
    assert [info["level"] for info in by_env.infos[1]] == [0, 1, 2, 3] * 4
    assert [m["info/level"] for m in _metrics(run_dir)] == [0.0, 1.5]


def test_check_env_lists_the_info_keys_of_an_episodes_end(capsys):
    """What --log-info can ask for: the keys of the ending steps' infos (InfoEnv adds steps, pos, tag and where
    there), none where the backend reports no info."""
    assert main(["check-env", "tests.fixtures.info_envs:InfoEnv-v0"]) == 0
    assert (
        "info keys at an episode's end: level, pos, steps, success, tag, where\n" in capsys.readouterr().out
    )
    assert main(["check-env", "CartPole-v1"]) == 0  # the native backend: no line
    assert "info keys" not in capsys.readouterr().out
