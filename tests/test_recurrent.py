"""Recurrent PPO (``--recurrent lstm``): the memory is carried, zeroed at episode starts, replayed whole in the
update, bootstrapped under the right state, saved and resumed; the memory probe tells an LSTM from an MLP."""

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.algo.storage import SequenceBatch
from proxima.algo.update import UpdateSettings
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.envs import make_vec_env
from proxima.envs.partial import make_cartpole_no_velocity
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.run.config import PPOArgs
from proxima.run.rollout import RecurrentCollector

LSTM = dict(recurrent="lstm", lstm_hidden_size=16, plot=False, quiet=True, torch_threads=1)
if "test/CartPoleNoVelocity5-v1" not in gym.registry:  # truncated after 5 steps: bootstraps in every rollout
    gym.register("test/CartPoleNoVelocity5-v1", entry_point=make_cartpole_no_velocity, max_episode_steps=5)


def _model(obs_dim=2, layers=1, seed=0):
    torch.manual_seed(seed)
    spec = NetworkSpec(
        2,
        (obs_dim,),
        NetworkSettings(recurrent="lstm", lstm_hidden_size=8, lstm_layers=layers, norm_value=False),
    )
    return ActorCritic(spec, make_head(gym.spaces.Discrete(2)))


@pytest.mark.parametrize("layers", [1, 2])
def test_a_sequence_in_pieces_equals_the_steps_one_by_one_with_resets(layers):
    model = _model(layers=layers)
    steps, envs = 12, 3
    obs = torch.randn(steps, envs, 2)
    starts = torch.zeros(steps, envs)
    starts[0, 1] = starts[4, 0] = starts[4, 2] = starts[9, 1] = 1
    memory = tuple(torch.randn(layers, envs, 8) for _ in range(2))
    logits, values, (h, c) = model.forward_sequence(obs, starts, memory)
    # the reference: one step at a time, the memory zeroed by hand where an episode starts
    ref_h, ref_c = memory
    for t in range(steps):
        keep = 1 - starts[t].view(1, -1, 1)
        out, (ref_h, ref_c) = model.lstm(model.encoder(obs[t]).unsqueeze(0), (ref_h * keep, ref_c * keep))
        torch.testing.assert_close(logits[t], model.actor(out[0]))
        torch.testing.assert_close(values[t], model._value(out[0], obs[t]))
    torch.testing.assert_close((h, c), (ref_h, ref_c))
    # a start erases everything before it: env 1 from step 9 on does not depend on its earlier observations
    changed = obs.clone()
    changed[:9, 1] += 5.0
    again, _, _ = model.forward_sequence(changed, starts, memory)
    torch.testing.assert_close(again[9:, 1], logits[9:, 1])
    assert not torch.allclose(again[:9, 1], logits[:9, 1])


def test_the_update_replays_the_rollout_exactly_and_bootstraps_truncations_under_the_episodes_memory():
    """Log-probs and values recomputed from the stored start-of-rollout memory equal the rollout's own, and a
    time-limit truncation adds gamma * V(final obs) under the memory of the episode that ended."""
    model = _model()
    envs = make_vec_env("test/CartPoleNoVelocity5-v1", 4, seed=0)
    steps_seen = []
    step = envs.step
    envs.step = lambda actions: steps_seen.append(step(actions)) or steps_seen[-1]
    collector = RecurrentCollector(envs, 16, 0.9, model, seed=3)
    for _ in range(2):  # the second rollout starts from a memory that is not zero
        steps_seen.clear()
        collector.collect(model)
    buf = collector.buffer
    assert buf.memory[0].abs().sum() > 0
    batch = buf.sequences(torch.zeros(16, 4), torch.zeros(16, 4))
    with torch.no_grad():
        logprobs, _, values = model.evaluate(batch.obs, batch.actions, batch.sequences)
        torch.testing.assert_close(logprobs, buf.logprobs, rtol=0, atol=1e-6)
        torch.testing.assert_close(values, buf.values, rtol=0, atol=1e-6)
        # replay every env to get its memory after each step, then V(final obs) where an episode was truncated
        memory = buf.memory
        for t, s in enumerate(steps_seen):
            _, _, memory = model.forward_sequence(buf.obs[t : t + 1], buf.dones[t : t + 1], memory)
            rows = s.truncated.nonzero().flatten()
            if len(rows):
                final = model.value_after(s.final_obs[rows], tuple(m[:, rows] for m in memory))
                torch.testing.assert_close(
                    buf.rewards[t, rows], s.reward[rows] + 0.9 * final, rtol=0, atol=1e-6
                )
    assert any(s.truncated.any() for s in steps_seen)
    envs.close()


def test_minibatches_are_whole_env_sequences():
    args = PPOArgs.of(recurrent="lstm", num_envs=8, num_minibatches=4).validate()
    assert UpdateSettings.from_args(args).num_minibatches == 4 and args.samples_per_minibatch == 2 * 128
    batch = SequenceBatch(
        *(torch.arange(24.0).view(3, 8) for _ in range(7)), memory=(torch.zeros(1, 8, 4),) * 2
    )
    mb = batch[torch.tensor([5, 2])]
    assert (
        len(batch) == 8
        and mb.obs.tolist() == [[5, 2], [13, 10], [21, 18]]
        and mb.memory[0].shape == (1, 2, 4)
    )
    with pytest.raises(UserError, match="does not divide num_envs=6"):
        PPOArgs.of(recurrent="lstm", num_envs=6, num_minibatches=4, num_steps=128).validate()
    with pytest.raises(UserError, match="--recurrent runs its envs in this process"):
        PPOArgs.of(recurrent="lstm", rollout_workers=2).validate()


def test_predict_carries_the_state_and_eval_and_load_work(tmp_path):
    run_dir = tmp_path / "run"
    agent = proxima.train(env_id="proxima/ProbeMemory-v0", total_timesteps=1024, num_envs=4, run_dir=str(run_dir),
                          num_steps=64, **LSTM)  # fmt: skip
    loaded = proxima.load(str(run_dir))
    obs = np.array([[1.0], [-1.0]], dtype=np.float32)
    actions, state = loaded.predict(obs, deterministic=True)
    assert actions.shape == (2,) and [s.shape for s in state] == [(1, 2, 16), (1, 2, 16)]
    again, state2 = loaded.predict(np.zeros((2, 1), dtype=np.float32), state, episode_start=np.array([0, 1]))
    assert np.abs(state2[0] - state[0]).sum() > 0
    same, _ = agent.predict(obs, deterministic=True)
    np.testing.assert_array_equal(actions, same)
    single, single_state = loaded.predict(np.array([1.0], dtype=np.float32), deterministic=True)
    assert single == actions[0] and single_state[0].shape == (1, 1, 16)
    assert main(["eval", str(run_dir), "--episodes", "4"]) == 0
    assert json.loads((run_dir / "agent.json").read_text())["network"]["network"]["recurrent"] == "lstm"


@pytest.mark.slow
def test_the_memory_probe_passes_for_an_lstm_and_fails_for_an_mlp(tmp_path, capsys):
    flags = ["--probes", "memory", "--total-timesteps", "20000", "--num-envs", "4", "--num-steps", "128"]
    assert main(["probe", *flags, "--recurrent", "lstm", "--torch-threads", "1"]) == 0
    assert "memory" in capsys.readouterr().out
    assert main(["probe", *flags, "--torch-threads", "1"]) == 1  # at chance without memory
    out = capsys.readouterr().out
    assert "FAIL" in out and "LSTM" in out


@pytest.mark.slow
def test_a_recurrent_run_resumes_exactly_after_sigkill(tmp_path):
    """Native envs and the LSTM's memory are both in the checkpoint: the resumed run equals an uninterrupted one."""
    flags = ["--env-id", "proxima/CartPoleNoVelocity-v1", "--recurrent", "lstm", "--lstm-hidden-size", "16",
             "--num-envs", "8", "--num-steps", "64", "--num-minibatches", "2", "--total-timesteps", "8192",
             "--checkpoint-every", "1", "--seed", "2", "--torch-threads", "1", "--quiet", "--no-plot"]  # fmt: skip
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(["train", *flags, "--run-dir", str(whole)]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", "train", *flags, "--run-dir", str(cut)],
                            stderr=subprocess.DEVNULL)  # fmt: skip
    metrics = cut / "metrics.jsonl"
    while proc.poll() is None and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
        pass
    proc.kill()
    proc.wait()
    assert len(metrics.read_text().splitlines()) < 16, "the run ended before it was killed"
    assert main(["train", "--resume", str(cut), "--quiet"]) == 0

    def records(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(x).items() if k not in ("time_s", "sps")} for x in lines]

    assert records(cut) == records(whole)
    assert (cut / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_the_lstm_preset_balances_partially_observed_cartpole_where_an_mlp_cannot(tmp_path):
    """A reduced budget of the cartpole-lstm preset (the full one is a benchmark: docs/journal/benchmarks.md)."""
    budget = dict(total_timesteps=40_960, eval_every=0, stop_return=None, seed=1, plot=False, quiet=True)
    lstm = proxima.train(config="cartpole-lstm", run_dir=str(tmp_path / "lstm"), torch_threads=1, **budget)
    mlp = proxima.train(config="cartpole-lstm", run_dir=str(tmp_path / "mlp"), torch_threads=1, recurrent=None,
                        **budget)  # fmt: skip
    lstm_return = proxima.evaluate(lstm, episodes=20, deterministic=True).mean()
    mlp_return = proxima.evaluate(mlp, episodes=20, deterministic=True).mean()
    assert lstm_return >= 150 and mlp_return < 100, (lstm_return, mlp_return)
    assert os.path.exists(tmp_path / "lstm" / "model.safetensors")


def test_the_image_probes_run_through_the_lstm(capsys):
    """A recurrent image agent's probes go through its memory (its heads take the LSTM's outputs)."""
    code = main(["probe", "--probes", "image-value", "--recurrent", "lstm", "--total-timesteps", "512",
                 "--num-envs", "4", "--num-steps", "64", "--num-minibatches", "2", "--torch-threads", "1"])  # fmt: skip
    assert code in (0, 1) and "image-value" in capsys.readouterr().out
    model = _model()
    with pytest.raises(RuntimeError, match="take its memory"):
        model.value(torch.zeros(1, 2))
