import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import proxima
from proxima.commands import main
from proxima.run.config import PPOArgs

TINY = [
    "--total-timesteps",
    "256",
    "--num-envs",
    "2",
    "--num-steps",
    "64",
    "--num-minibatches",
    "2",
    "--update-epochs",
    "1",
]

METRIC_KEYS = {
    "global_step", "time_s", "sps", "learning_rate", "value_loss", "policy_loss", "entropy", "old_approx_kl",
    "approx_kl", "clipfrac", "explained_variance", "episodic_return", "episodic_length", "grad_norm",
}  # fmt: skip
TB_TAGS = {
    "charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/old_approx_kl",
    "losses/approx_kl", "losses/clipfrac", "losses/explained_variance", "charts/SPS", "charts/episodic_return",
    "charts/episodic_length",
}  # fmt: skip


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("runs") / "cartpole")
    assert main(["train", "--run-dir", run_dir, "--total-timesteps", "2048", "--seed", "3"]) == 0
    return run_dir


def test_train_writes_every_output(trained_run):
    names = set(os.listdir(trained_run))
    assert {
        "config.json", "metrics.jsonl", "episodes.jsonl", "model.safetensors", "agent.json", "checkpoint.safetensors",
        "learning_curve.png",
    } <= names  # fmt: skip
    assert not any(n.endswith(".pkl") or n.endswith(".pt") for n in names)
    records = [json.loads(line) for line in open(os.path.join(trained_run, "metrics.jsonl"))]
    assert len(records) == 2048 // 512
    assert all(set(r) == METRIC_KEYS for r in records)
    assert [r["global_step"] for r in records] == [512, 1024, 1536, 2048]
    assert records[0]["learning_rate"] == 2.5e-4 and records[-1]["learning_rate"] < 2.5e-4
    assert all(r["episodic_return"] is None or r["episodic_return"] > 0 for r in records)
    config = json.load(open(os.path.join(trained_run, "config.json")))
    assert config["run"]["seed"] == 3 and config["env"]["env_id"] == "CartPole-v1"


def test_tensorboard_has_every_debug_variable(trained_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(trained_run)
    events.Reload()
    assert TB_TAGS <= set(events.Tags()["scalars"])


def test_tensorboard_says_that_the_value_loss_is_normalized_where_it_is(trained_run, tmp_path):
    """The scalar keeps its tag, losses/value_loss; a text beside it says what it is measured in, written once
    by a run with norm_value (the default) and not by one without it or without a critic."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from proxima.run.logger import VALUE_LOSS_TAG

    def texts(run_dir):  # tag -> its texts; torch's add_text files a text under TAG/text_summary
        events = EventAccumulator(run_dir)
        events.Reload()
        tags = events.Tags()["tensors"]
        return {t.removesuffix("/text_summary"): [e.tensor_proto.string_val[0].decode() for e in events.Tensors(t)] for t in tags}  # fmt: skip

    note = texts(trained_run)[VALUE_LOSS_TAG]
    assert len(note) == 1 and note[0].startswith("value_loss is normalized (norm_value)")
    assert "standard deviations of its value targets" in note[0]
    for flags in (["--no-norm-value"], ["--algo", "reinforce"]):
        run_dir = str(tmp_path / flags[-1])
        assert main(["train", "--run-dir", run_dir, *TINY, *flags, "--no-plot", "--no-report"]) == 0
        assert "hyperparameters" in texts(run_dir) and VALUE_LOSS_TAG not in texts(run_dir), flags


def test_load_predict_single_and_batch(trained_run):
    agent = proxima.load(trained_run)
    obs = np.zeros(4, dtype=np.float32)
    single = agent.predict(obs, deterministic=True)
    assert single.shape == () and single in (0, 1)
    batch = agent.predict(np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32), deterministic=True)
    assert batch.shape == (5,) and batch.dtype == np.int64
    assert agent.predict(np.zeros((3, 4))).shape == (3,)


def test_round_trip_gives_identical_weights_and_predictions(trained_run, tmp_path):
    agent = proxima.load(trained_run)
    agent.save(str(tmp_path))
    again = proxima.load(str(tmp_path))
    for (k, a), (_, b) in zip(
        agent.model.state_dict().items(), again.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k
    obs = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    np.testing.assert_array_equal(agent.predict(obs, True), again.predict(obs, True))


def test_eval_prints_mean_and_std(trained_run, capsys):
    assert main(["eval", trained_run, "--episodes", "3", "--deterministic"]) == 0
    out = capsys.readouterr().out
    assert "mean_return=" in out and "std_return=" in out and "episodes=3" in out


def test_evaluate_counts_exact_episodes(trained_run):
    returns = proxima.evaluate(proxima.load(trained_run), episodes=21, deterministic=True)
    assert returns.shape == (21,) and np.all(returns >= 8)  # CartPole episodes last at least 8 steps


def test_seeded_stochastic_eval_repeats_and_leaves_the_global_generator_alone(trained_run):
    agent, state = proxima.load(trained_run), torch.get_rng_state()
    first = proxima.evaluate(agent, episodes=8, seed=5)
    np.testing.assert_array_equal(first, proxima.evaluate(agent, episodes=8, seed=5))
    assert torch.equal(torch.get_rng_state(), state)
    obs = np.random.default_rng(2).normal(size=(256, 4)).astype(np.float32)
    drawn = [agent.predict(obs, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    np.testing.assert_array_equal(*drawn)
    assert torch.equal(torch.get_rng_state(), state)


def _run_main(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr()


@pytest.mark.parametrize(
    "flags,match",
    [
        (["--env-id", "NoSuchEnv-v0"], "unknown env id"),
        (["--env-id", "tests.fixtures.user_envs:TextObservations-v0"], "observation space Text"),
        (["--env-id", "tests.fixtures.user_envs:DictActions-v0"], "action space Dict"),
        (["--env-id", "tests.fixtures.user_envs:TupleActions-v0"], "action space Tuple"),
        (["--num-minibatches", "3"], "does not divide"),
        (["--learning-rate", "0"], "--learning-rate must be positive"),
        (["--learning-rate", "-1e-3"], "--learning-rate must be positive"),
        (["--total-timesteps", "0"], "--total-timesteps must be a positive integer"),
        (["--num-envs", "0"], "--num-envs must be a positive integer"),
        (["--num-envs", "-2"], "--num-envs must be a positive integer"),
        (["--num-steps", "0"], "--num-steps must be a positive integer"),
        (["--gamma", "0"], r"--gamma must be in \(0, 1\]"),
        (["--gamma", "1.01"], r"--gamma must be in \(0, 1\]"),
        (["--gae-lambda", "-0.5"], r"--gae-lambda must be in \(0, 1\]"),
        (["--gae-lambda", "2"], r"--gae-lambda must be in \(0, 1\]"),
        (["--seed", "abc"], "--seed expects an integer, got 'abc'"),
        (["--no-such-flag", "1"], "unrecognized flag '--no-such-flag'"),
    ],
)
def test_bad_train_input_is_one_line_exit_2_and_leaves_nothing(flags, match, capsys, tmp_path):
    run_dir = tmp_path / "run"
    code, captured = _run_main(["train", "--run-dir", str(run_dir), *flags], capsys)
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proxima train: error:")
    assert __import__("re").search(match, lines[0])
    assert not run_dir.exists()


@pytest.mark.parametrize("setup", ["missing", "empty", "corrupt_json", "corrupt_weights", "wrong_shapes"])
def test_bad_eval_directory(setup, trained_run, tmp_path, capsys):
    import shutil

    run_dir = tmp_path / "run"
    if setup != "missing":
        run_dir.mkdir()
    if setup in ("corrupt_json", "corrupt_weights", "wrong_shapes"):
        shutil.copy(os.path.join(trained_run, "agent.json"), run_dir)
        shutil.copy(os.path.join(trained_run, "model.safetensors"), run_dir)
    if setup == "corrupt_json":
        (run_dir / "agent.json").write_text("{not json")
    if setup == "corrupt_weights":
        data = (run_dir / "model.safetensors").read_bytes()
        (run_dir / "model.safetensors").write_bytes(data[: len(data) // 2])
    if setup == "wrong_shapes":
        meta = json.loads((run_dir / "agent.json").read_text())
        meta["network"]["network"]["hidden_sizes"] = [32, 32]
        (run_dir / "agent.json").write_text(json.dumps(meta))
    code, captured = _run_main(["eval", str(run_dir)], capsys)
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proxima eval: error:"), captured.err


def test_eval_refuses_an_env_with_other_actions(trained_run):
    import gymnasium as gym

    agent = proxima.load(trained_run)
    agent.action_space = gym.spaces.Discrete(3)  # as if trained on an env with three actions
    with pytest.raises(proxima.UserError, match="has actions Discrete"):
        proxima.evaluate(agent, 1)


def test_existing_run_dir_is_refused(trained_run, capsys):
    code, captured = _run_main(["train", "--run-dir", trained_run, *TINY], capsys)
    assert code == 2 and "already exists" in captured.err


def test_help_documents_every_flag(capsys):
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    from proxima.run.config import GROUP_OF

    for name in GROUP_OF:
        assert "--" + name.replace("_", "-") in out, name
    for flag in ["--exp-name", "--torch-deterministic", "--cuda", "--track", "--wandb-project-name", "--wandb-entity",
                 "--capture-video", "--env-id", "--total-timesteps", "--learning-rate", "--num-envs", "--num-steps",
                 "--gamma", "--gae-lambda", "--num-minibatches", "--update-epochs", "--clip-coef", "--ent-coef",
                 "--vf-coef", "--max-grad-norm", "--run-dir", "--clip-vloss", "--norm-adv", "--anneal-lr",
                 "--target-kl"]:  # fmt: skip
        assert flag in out


def test_seed_style_boolean_values_are_accepted():
    from proxima.commands.argv import bool_flags_as_tyro

    argv = [
        "--cuda",
        "False",
        "--torch-deterministic=true",
        "--track",
        "--seed",
        "0",
        "--capture-video",
        "no",
    ]
    assert bool_flags_as_tyro(PPOArgs, argv) == ["--no-cuda", "--torch-deterministic", "--track", "--seed", "0",
                                                  "--no-capture-video"]  # fmt: skip


def test_defaults_match_the_seed():
    a = PPOArgs()
    assert (
        a.run.seed,
        a.run.torch_deterministic,
        a.run.cuda,
        a.run.track,
        a.env.capture_video,
        a.env.env_id,
    ) == (
        1,
        True,
        True,
        False,
        False,
        "CartPole-v1",
    )
    assert (
        a.algorithm.total_timesteps,
        a.algorithm.learning_rate,
        a.env.num_envs,
        a.algorithm.num_steps,
        a.algorithm.gamma,
        a.algorithm.gae_lambda,
    ) == (
        500000,
        2.5e-4,
        4,
        128,
        0.99,
        0.95,
    )
    assert (
        a.algorithm.num_minibatches,
        a.algorithm.update_epochs,
        a.algorithm.clip_coef,
        a.algorithm.ent_coef,
        a.algorithm.vf_coef,
        a.algorithm.max_grad_norm,
    ) == (
        4,
        4,
        0.2,
        0.01,
        0.5,
        0.5,
    )
    assert (a.batch_size, a.samples_per_minibatch, a.num_updates) == (512, 128, 976)


def test_console_script_error_has_no_traceback(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "proxima")
    result = subprocess.run([exe, "train", "--env-id", "NoSuchEnv-v0", "--run-dir", str(tmp_path / "r")],
                            capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() and not (tmp_path / "runs").exists()


def test_python_api_rejects_unknown_settings():
    with pytest.raises(proxima.UserError, match="PPOArgs"):
        proxima.train(no_such_setting=1)


def test_capture_video_records_env_0(tmp_path):
    run_dir = tmp_path / "run"
    proxima.train(total_timesteps=1024, run_dir=str(run_dir), capture_video=True)
    videos = sorted(p.name for p in (run_dir / "videos").iterdir())
    assert "rl-video-episode-0.mp4" in videos
    assert (run_dir / "videos" / "rl-video-episode-0.mp4").stat().st_size > 1000


def test_capture_video_logs_the_episodes_to_tensorboard_as_its_reader_shows_them(tmp_path):
    import io

    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from proxima.run.video_summary import read_mp4

    run_dir = tmp_path / "run"
    proxima.train(total_timesteps=2048, run_dir=str(run_dir), capture_video=True, quiet=True)
    events = EventAccumulator(str(run_dir), size_guidance={"images": 0}).Reload()
    logged = events.Images("videos/episode")
    recorded = sorted((run_dir / "videos").iterdir(), key=lambda p: p.stat().st_mtime)
    assert len(logged) == len(recorded) >= 2  # every episode env 0 recorded: 0, 1, ...
    assert all(0 < e.step <= 2048 for e in logged) and [e.step for e in logged] == sorted(
        e.step for e in logged
    )
    frames, fps = read_mp4(str(recorded[0]))
    gif = Image.open(io.BytesIO(logged[0].encoded_image_string))
    assert (logged[0].width, logged[0].height) == gif.size == (240, 160)  # 600x400 frames, scaled down
    assert gif.n_frames > 1 and gif.info["duration"] == round(1000 / fps)
    # the first frame is the MP4's, scaled down (CartPole's cart and pole survive the GIF's palette)
    expected = np.asarray(Image.fromarray(frames[0]).resize(gif.size, Image.Resampling.BOX), dtype=np.float64)
    got = np.asarray(gif.convert("RGB"), dtype=np.float64)
    assert np.abs(got - expected).mean() < 3 and (got < 128).any()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_eval_video_writes_an_mp4_per_episode(env_id, tmp_path, capsys):
    run_dir = tmp_path / "run"
    proxima.train(env_id=env_id, total_timesteps=1024, quiet=True, run_dir=str(run_dir))
    assert main(["eval", str(run_dir), "--episodes", "3", "--video"]) == 0
    videos = sorted(p.name for p in (run_dir / "eval-videos").iterdir())
    assert videos == [f"rl-video-episode-{i}.mp4" for i in range(3)]  # every episode: on one env, in turn
    assert all((run_dir / "eval-videos" / v).stat().st_size > 1000 for v in videos)
    assert "eval-videos/rl-video-episode-2.mp4" in capsys.readouterr().out
    assert len(json.loads((run_dir / "eval.json").read_text())["returns"]) == 3


def test_eval_video_episodes_records_that_many_and_each_evaluation_replaces_the_last(tmp_path, capsys):
    run_dir = tmp_path / "run"
    proxima.train(env_id="CartPole-v1", total_timesteps=1024, quiet=True, run_dir=str(run_dir))

    def recorded() -> tuple[list[str], list[str]]:
        on_disk = sorted(p.name for p in (run_dir / "eval-videos").iterdir())
        listed = json.loads((run_dir / "eval.json").read_text())["videos"]
        return on_disk, sorted(os.path.basename(v) for v in listed)

    # 6 episodes, 3 filmed: 2 envs, so that env 0 plays 3
    assert main(["eval", str(run_dir), "--episodes", "6", "--video", "--video-episodes", "3"]) == 0
    films = [f"rl-video-episode-{i}.mp4" for i in range(3)]
    assert recorded() == (films, films)
    assert len(json.loads((run_dir / "eval.json").read_text())["returns"]) == 6
    # a later evaluation's videos replace these: none of the 3 is taken for one of its own
    assert main(["eval", str(run_dir), "--episodes", "2", "--video"]) == 0
    assert recorded() == (films[:2], films[:2])
    capsys.readouterr()
    # refused in one line, and the last evaluation's videos stay, with nothing half-recorded beside them
    for argv, error in [
        (
            ["--episodes", "2", "--video", "--video-episodes", "3"],
            "--video-episodes must be from 1 to the 2 episodes",
        ),
        (
            ["--episodes", "2", "--video-episodes", "1"],
            "--video-episodes says how many episodes --video records",
        ),
    ]:
        assert main(["eval", str(run_dir), *argv]) == 2
        assert error in capsys.readouterr().err
        assert recorded() == (films[:2], films[:2])
        assert not [p for p in run_dir.iterdir() if p.name.startswith(".eval-videos")]
