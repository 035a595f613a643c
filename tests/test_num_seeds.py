"""``--num-seeds N``: N seeds trained as one batched computation (``proxima.scale.batched``), each as its solo run."""

from __future__ import annotations

import copy
import json
import struct
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch.func import stack_module_state

import proxima
from proxima.algo.optim import Adam
from proxima.base.errors import UserError
from proxima.base.files import CHECKPOINT
from proxima.commands import main
from proxima.policy.distributions import (
    BernoulliHead,
    BetaHead,
    BoundedHead,
    CategoricalHead,
    DiagGaussianHead,
    MultiCategoricalHead,
    TanhGaussianHead,
)
from proxima.policy.normalization import Normalization
from proxima.policy.stacked import StackedModels, StackedNormalizations
from proxima.run import checkpoint
from proxima.run.callbacks import Callback
from proxima.scale.batched import SeedModel

SMALL = dict(num_envs=8, num_steps=32, num_minibatches=4, update_epochs=2, torch_threads=1, quiet=True,
             plot=False, report=False, checkpoint_every=0)  # fmt: skip
COMPARED = (
    "value_loss",
    "policy_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "explained_variance",
    "grad_norm",
)


def records(run_dir) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in ("time_s", "sps")} for x in lines]


def assert_close(batched: list[dict], solo: list[dict], updates: int, rel: float) -> None:
    assert len(batched) >= updates and len(solo) >= updates
    for b, s in zip(batched[:updates], solo[:updates], strict=True):
        assert b["global_step"] == s["global_step"]
        for key in ("episodic_return", "eval_return", *COMPARED):
            if s.get(key) is None:  # no episode ended, or no evaluation
                assert b.get(key) is None
                continue
            assert b[key] == pytest.approx(s[key], rel=rel, abs=1e-6), (key, b[key], s[key])


@pytest.mark.parametrize(
    "env, options, updates",
    [
        # with evaluations, and the rescoring of the best ones: played for all seeds at once
        (
            "CartPole-v1",
            dict(eval_every=2, eval_episodes=8, save_best=True, rescore_best=2, rescore_episodes=10),
            4,
        ),
        # a Gaussian's log-std is a parameter of each seed: every seed samples with its own
        ("Pendulum-v1", dict(norm_obs=True, norm_reward=True, norm_value=True, clip_vloss=True), 4),
        # an LSTM, through vmap as nn.LSTM's equations step by step: rollouts, sequence minibatches,
        # evaluations and rescoring
        (
            "CartPole-v1",
            dict(
                recurrent="lstm",
                lstm_hidden_size=16,
                norm_obs=True,
                eval_every=2,
                eval_episodes=8,
                save_best=True,
                rescore_best=2,
                rescore_episodes=10,
            ),
            4,
        ),  # fmt: skip
    ],
)
def test_each_seed_follows_its_solo_run(tmp_path, env, options, updates):
    """Seed i of a batched run draws the same env seeds, actions and minibatch orders as `--seed i` alone: the
    first updates' debug variables agree within float tolerance (the batched kernels round differently; a
    discrete policy's episodes stay identical while no sampled action flips)."""
    budget = dict(env_id=env, total_timesteps=8 * 32 * 4, **SMALL, **options)
    group = tmp_path / "group"
    proxima.train(num_seeds=3, seed=4, run_dir=str(group), **budget)
    for seed in (4, 5, 6):
        solo = tmp_path / f"solo{seed}"
        proxima.train(seed=seed, run_dir=str(solo), **budget)
        assert_close(records(group / f"seed{seed}"), records(solo), updates, 1e-3)
        if options.get("rescore_best"):  # every candidate's rescore, and the one kept
            best = [
                json.loads((d / "best" / "agent.json").read_text()) for d in (group / f"seed{seed}", solo)
            ]
            assert best[0]["rescored"] == best[1]["rescored"]


def test_one_gaussian_sample_with_each_seeds_log_std_on_its_rows_gives_each_seed_its_solo_draws():
    """A Gaussian head's log-std is a seed's own parameter: given one row of it per row, one ``sample`` of all
    seeds' rows draws what each seed's own head draws, bit for bit (one action component: no sum to round)."""
    heads = [DiagGaussianHead(1) for _ in range(3)]
    for j, head in enumerate(heads):
        torch.nn.init.constant_(head.log_std, -0.5 * j)
    mean = torch.randn(3, 5, 1)
    solo = [head.sample(mean[j], head.noise(mean[j], _generator(j + 1))) for j, head in enumerate(heads)]
    noise = torch.cat([heads[0].noise(mean[j], _generator(j + 1)) for j in range(3)])
    log_std = torch.stack([h.log_std.detach() for h in heads]).repeat_interleave(5, 0)
    actions, logprobs = heads[0].sample(mean.flatten(0, 1), noise, log_std=log_std)
    assert torch.equal(actions, torch.cat([a for a, _ in solo]))
    assert torch.equal(logprobs, torch.cat([lp for _, lp in solo]))


@pytest.mark.parametrize("width", [1, 3])  # one number a sample (and the return): a variance of other shape
def test_the_seeds_normalization_at_once_is_each_seeds_own_and_a_finished_seeds_stays(width):
    """Observation and reward normalization of all seeds in one computation on their stacked statistics gives
    each seed's rows what its own ``Normalization`` gives them, updates included, bit for bit; a finished
    seed's statistics stop changing."""
    norms = [Normalization((width,), norm_obs=True, norm_reward=True) for _ in range(4)]
    alone = copy.deepcopy(norms)
    holders = [_Holder(n) for n in norms]
    _, buffers = stack_module_state(holders)
    for j, holder in enumerate(
        holders
    ):  # each seed's statistics become views of the stack, as StackedModels does
        for name, b in holder.named_buffers():
            b.data = buffers[name][j]
    frozen: set[int] = set()
    together = StackedNormalizations(norms, buffers, 8, lambda: frozen)
    for step in range(60):
        frozen |= {2} if step == 5 else set()
        obs, reward, ret = torch.randn(32, width) * 3 + 1, torch.randn(32), torch.randn(32) * 5
        parts = [slice(8 * j, 8 * (j + 1)) for j in range(4)]
        expected_obs = torch.cat(
            [n.obs(obs[p], update=j not in frozen) for j, (n, p) in enumerate(zip(alone, parts, strict=True))]
        )
        expected_reward = torch.cat(
            [
                n.reward(reward[p], ret[p], update=j not in frozen)
                for j, (n, p) in enumerate(zip(alone, parts, strict=True))
            ]
        )
        assert torch.equal(together.obs(obs, update=True), expected_obs)
        assert torch.equal(together.reward(reward, ret, update=True), expected_reward)
    for mine, own in zip(norms, alone, strict=True):
        for key, value in own.state_dict().items():  # every statistic, bit for bit
            assert torch.equal(mine.state_dict()[key], value), key
    assert norms[2].obs_rms.count < norms[0].obs_rms.count


class _Holder(torch.nn.Module):
    """A ``Normalization`` where the stacked buffers name it (``model.normalization``)."""

    def __init__(self, normalization: Normalization):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.normalization = normalization


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(
    "head",
    [CategoricalHead(3), MultiCategoricalHead([2, 3]), BernoulliHead((4,)), DiagGaussianHead(2),
     BetaHead([-1.0, 0.0], [1.0, 2.0]), TanhGaussianHead([-1.0, 0.0], [1.0, 2.0])],
)  # fmt: skip
def test_draws_from_each_seeds_generator_then_one_sample_give_each_seed_its_solo_draws(head):
    """Drawn from each seed's own generator (``Head.noise``) and handed to one ``sample`` of all seeds' rows,
    every row gets the action of its seed's solo draw (a bounded head's up to rounding: its float64 transcendentals
    round by where a row falls in a vectorized kernel), and its log-prob up to rounding (a sum over components
    may round otherwise in a bigger batch)."""
    logits = torch.randn(3, 5, head.logits_dim)
    solo = [head.sample(logits[j], head.noise(logits[j], _generator(j + 1))) for j in range(3)]
    noise = torch.cat([head.noise(logits[j], _generator(j + 1)) for j in range(3)])
    actions, logprobs = head.sample(logits.flatten(0, 1), noise)
    expected = torch.cat([a for a, _ in solo])
    if isinstance(head, BoundedHead):
        torch.testing.assert_close(actions, expected)
    else:
        assert torch.equal(actions, expected)
    torch.testing.assert_close(logprobs, torch.cat([lp for _, lp in solo]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_each_gaussian_seed_follows_its_solo_run_with_its_own_normalization(tmp_path):
    """On the GPU too, a Gaussian seed's draws come from its own CUDA generator with its own log-std, and its
    observations and rewards are normalized with its own statistics."""
    budget = dict(env_id="Pendulum-v1", total_timesteps=8 * 32 * 4, cuda=True, norm_obs=True, norm_reward=True,
                  **SMALL)  # fmt: skip
    proxima.train(num_seeds=3, seed=4, run_dir=str(tmp_path / "group"), **budget)
    for seed in (4, 5, 6):
        proxima.train(seed=seed, run_dir=str(tmp_path / f"solo{seed}"), **budget)
        assert_close(records(tmp_path / "group" / f"seed{seed}"), records(tmp_path / f"solo{seed}"), 4, 1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_each_seed_follows_its_solo_run_and_resumes_exactly(tmp_path):
    budget = dict(env_id="CartPole-v1", seed=1, total_timesteps=8 * 32 * 4, cuda=True,
                  **{**SMALL, "checkpoint_every": 1})  # fmt: skip
    whole, run = tmp_path / "whole", tmp_path / "run"
    proxima.train(run_dir=str(whole), num_seeds=2, callbacks=[StopSeed(seed=2, update=1)], **budget)
    proxima.train(run_dir=str(tmp_path / "solo1"), **budget)
    assert_close(records(whole / "seed1"), records(tmp_path / "solo1"), 4, 1e-3)
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(
            run_dir=str(run), num_seeds=2, callbacks=[StopSeed(seed=2, update=1), Fail(3)], **budget
        )
    proxima.resume(str(run), quiet=True)  # seed 2's stale CUDA state must not be seed 1's
    assert records(run / "seed1") == records(whole / "seed1")


class MaskedChoice(gym.Env):
    """A Dict observation with an action mask; reward 1 for the action that x points at (always a valid one)."""

    observation_space = gym.spaces.Dict(
        {"x": gym.spaces.Box(-1, 1, (3,)), "action_mask": gym.spaces.MultiBinary(3)}
    )
    action_space = gym.spaces.Discrete(3)

    def _obs(self):
        self.target = int(self.np_random.integers(3))
        mask = self.np_random.integers(0, 2, 3).astype(np.int8)
        mask[self.target] = 1
        x = np.full(3, -1.0, dtype=np.float32)
        x[self.target] = 1.0
        return {"x": x, "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.target)
        self.t += 1
        return self._obs(), reward, False, self.t >= 10, {}


class TwoDials(gym.Env):
    """MultiDiscrete actions: reward for each dial set to the value the observation shows."""

    observation_space = gym.spaces.Box(0, 2, (2,))
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.want = 0, self.np_random.integers([0, 0], [3, 2])
        return self.want.astype(np.float32), {}

    def step(self, action):
        reward = float((np.asarray(action) == self.want).sum())
        self.t, self.want = self.t + 1, self.np_random.integers([0, 0], [3, 2])
        return self.want.astype(np.float32), reward, self.t >= 8, False, {}


class Switches(gym.Env):
    """MultiBinary actions (the Bernoulli head): reward for each switch set as the observation shows."""

    observation_space = gym.spaces.Box(0, 1, (3,))
    action_space = gym.spaces.MultiBinary(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.want = 0, self.np_random.integers(0, 2, 3)
        return self.want.astype(np.float32), {}

    def step(self, action):
        reward = float((np.asarray(action) == self.want).sum())
        self.t, self.want = self.t + 1, self.np_random.integers(0, 2, 3)
        return self.want.astype(np.float32), reward, False, self.t >= 8, {}


class DropBoard(gym.Env):
    """A board of pieces dropped into columns, as PettingZoo's Connect Four gives it (6 x 7 cells, a 0/1 plane
    per player, planes last, row 0 at the top), with the columns not full as the mask: reward 1 for a move into
    a column where the player's own piece lies on top."""

    observation_space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(0, 1, (6, 7, 2), np.int8), "action_mask": gym.spaces.MultiBinary(7)}
    )
    action_space = gym.spaces.Discrete(7)

    def _obs(self):
        heights = self.np_random.integers(0, 7, 7)
        heights[self.np_random.integers(7)] = 0  # never a full board
        board = np.zeros((6, 7, 2), np.int8)
        for column, height in enumerate(heights):
            for row in range(6 - height, 6):
                board[row, column, self.np_random.integers(2)] = 1
        self.top = [board[6 - h, c, 0] if h else 0 for c, h in enumerate(heights)]
        return {"observation": board, "action_mask": (heights < 6).astype(np.int8)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(self.top[int(action)])
        self.t += 1
        return self._obs(), reward, False, self.t >= 10, {}


@pytest.mark.parametrize(
    "env, options",
    [
        ("Pendulum-v1", dict(action_dist="beta", norm_obs=True)),
        ("Pendulum-v1", dict(action_dist="tanh-gaussian")),
        ("proxima/ProbeImagePolicy-v0", dict(total_timesteps=8 * 32 * 2)),  # a CNN, on Gymnasium's envs
        (MaskedChoice, {}),
        (TwoDials, dict(shared_network=True)),
        (Switches, {}),
        (DropBoard, dict(encoder="board-cnn")),
        (DropBoard, dict(encoder="drop-columns")),
        ("CartPole-v1", dict(encoder="tests.fixtures.user_encoders:VectorEncoder")),
        ("CartPole-v1", dict(layer_norm=True)),
        ("CartPole-v1", dict(algo="reinforce")),
        ("CartPole-v1", dict(algo="vpg")),
    ],
    ids=[
        "beta",
        "tanh-gaussian",
        "cnn",
        "dict-mask",
        "multidiscrete-shared",
        "bernoulli",
        "board-cnn",
        "drop-columns",
        "user-encoder",
        "layer-norm",
        "reinforce",
        "vpg",
    ],  # fmt: skip
)
def test_every_head_and_encoder_batches(tmp_path, env, options):
    """The first update of each seed agrees with its solo run's, whatever the policy head, the encoder, the
    observation space or the env's backend (an env class goes through Gymnasium's vector envs)."""
    budget = {**dict(total_timesteps=8 * 32, **SMALL), **options}
    where = {"env": env} if not isinstance(env, str) else {"env_id": env}
    proxima.train(num_seeds=2, seed=1, run_dir=str(tmp_path / "group"), **where, **budget)
    for seed in (1, 2):
        proxima.train(seed=seed, run_dir=str(tmp_path / f"solo{seed}"), **where, **budget)
        assert_close(records(tmp_path / "group" / f"seed{seed}"), records(tmp_path / f"solo{seed}"), 1, 1e-3)


class StopSeed(Callback):
    """Stops one seed after a given update, as --stop-return would."""

    def __init__(self, seed: int, update: int):
        self.seed, self.update, self.weights = seed, update, None

    def on_update_end(self, run, result) -> bool:
        if run.args.run.seed == self.seed and run.updates_done == self.update:
            self.weights = {k: v.clone() for k, v in run.model.state_dict().items()}
            return True
        return False


def test_seeds_that_stop_leave_the_group_and_the_others_go_on(tmp_path, monkeypatch):
    budget = dict(env_id="CartPole-v1", total_timesteps=8 * 32 * 5, **SMALL)
    stop, later = StopSeed(seed=2, update=2), StopSeed(seed=1, update=3)
    forwards, actions = [], []  # each rollout step's seeds in its forward pass, and its actions to the envs
    call, act = StackedModels.call, SeedModel.act

    def counted_call(self, method, obs, *rest, **options):
        if method == "forward":
            forwards.append(obs.shape[0])
        return call(self, method, obs, *rest, **options)

    def recorded_act(self, obs, noise=None):
        out = act(self, obs)
        actions.append(out[0])
        return out

    monkeypatch.setattr(StackedModels, "call", counted_call)
    monkeypatch.setattr(SeedModel, "act", recorded_act)
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    agents = proxima.train(num_seeds=3, seed=1, run_dir=str(stopped), callbacks=[stop, later], **budget)
    monkeypatch.undo()
    # Seed 2 stops after its 2nd update (of 32 steps), seed 1 after its 3rd: they leave the rollout's forward
    # passes and draws, and their envs (rows 8-15, then rows 0-7 too) are given CartPole's action 0, the mode of
    # uniform logits. Seed 3 alone goes through twice (one matrix would take a kernel that rounds differently).
    assert forwards == [3] * 64 + [2] * 32 + [2] * 64
    assert all(a[8:16].any() for a in actions[:64]) and not any(a[8:16].any() for a in actions[64:])
    assert all(a[0:8].any() for a in actions[:96]) and not any(a[0:8].any() for a in actions[96:])
    proxima.train(num_seeds=3, seed=1, run_dir=str(whole), **budget)
    assert [len(records(stopped / f"seed{s}")) for s in (1, 2, 3)] == [3, 2, 5]
    # nothing of the stopped seeds reaches the others: seed 1's records are the whole run's, and so are seed 3's
    # while it trains beside seed 1; alone, its loss goes through its solo run's kernels, not vmap's, and rounds
    # as they do (batched._alone)
    ours = records(stopped / "seed1")
    assert ours == records(whole / "seed1")[: len(ours)]
    ours, theirs = records(stopped / "seed3"), records(whole / "seed3")
    assert ours[:3] == theirs[:3] and len(ours) == len(theirs) == 5
    assert_close(ours[3:], theirs[3:], 2, 1e-3)
    proxima.train(seed=3, run_dir=str(tmp_path / "solo3"), **budget)  # which still follow their solo runs
    assert_close(records(stopped / "seed3"), records(tmp_path / "solo3"), 5, 1e-3)
    # seed 2's weights stayed as they were when it stopped, while the group's went on updating
    saved = proxima.load(str(stopped / "seed2")).model.state_dict()
    assert all(torch.equal(saved[k], v) for k, v in stop.weights.items())
    assert all(torch.equal(agents[1].model.state_dict()[k], v) for k, v in stop.weights.items())
    rows = json.loads((stopped / "results.json").read_text())["seeds"]
    assert [r["stopped_early"] for r in rows] == [True, True, False]
    # the group checkpoint keeps seed 2 as it stopped, as its own checkpoint does (envs, Adam moments and all)
    group, own = (load_file(d / "checkpoint.safetensors") for d in (stopped, stopped / "seed2"))
    assert all(torch.equal(group[f"seed2/{key}"], t) for key, t in own.items())


def test_stop_return_stops_each_seed_at_its_own_evaluation_as_its_solo_run_stops(tmp_path):
    """--stop-return and --eval-every act per seed: each seed ends at the first evaluation that reaches the
    threshold, the step at which its solo run ends, while the others go on."""
    budget = dict(env_id="CartPole-v1", total_timesteps=8 * 32 * 12, eval_every=1, eval_episodes=4,
                  stop_return=60, **SMALL)  # fmt: skip
    proxima.train(num_seeds=3, seed=1, run_dir=str(tmp_path / "group"), **budget)
    ends = []
    for seed in (1, 2, 3):
        ours = records(tmp_path / "group" / f"seed{seed}")
        proxima.train(seed=seed, run_dir=str(tmp_path / f"solo{seed}"), **budget)
        theirs = records(tmp_path / f"solo{seed}")
        assert [r["eval_return"] >= 60 for r in ours] == [False] * (len(ours) - 1) + [True]
        assert [r["eval_return"] for r in ours] == pytest.approx([r["eval_return"] for r in theirs])
        ends.append(ours[-1]["global_step"])
    assert len(set(ends)) > 1 and max(ends) < 8 * 32 * 12  # the seeds stopped apart, each before the budget
    rows = json.loads((tmp_path / "group" / "results.json").read_text())["seeds"]
    assert [r["stopped_early"] for r in rows] == [True] * 3


@pytest.mark.parametrize(
    "options",
    [
        dict(env_id="Pendulum-v1", norm_obs=True, norm_reward=True, norm_value=True, clip_vloss=True),
        dict(env_id="CartPole-v1", recurrent="lstm", lstm_hidden_size=16, norm_value=True),
    ],
    ids=["gaussian-normalized", "lstm"],
)
def test_the_last_seed_alone_computes_what_vmap_computes(tmp_path, monkeypatch, options):
    """A batch's last training seed computes its loss on its own tensors (``batched._alone``) rather than
    through vmap over one seed: the same losses and diagnostics, each minibatch (the value scale of
    --norm-value and an LSTM's sequence memory included)."""
    from torch.func import vmap

    from proxima.scale import batched

    direct, compared = batched._alone, []

    def checked(loss_of):
        alone = direct(loss_of)

        def call(params, buffers, fields, scale):
            in_dims = (0, 0, 0, None if scale is None else 0)
            expected = vmap(loss_of, in_dims=in_dims)(params, buffers, fields, scale)
            got = alone(params, buffers, fields, scale)
            for a, b in zip(
                (*expected[:4], *expected[4].values()), (*got[:4], *got[4].values()), strict=True
            ):
                torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
            compared.append(len(got[0]))
            return got

        return call

    class StopOthers(Callback):
        def on_update_end(self, run, result) -> bool:
            return run.args.run.seed != 1 and run.updates_done == 1

    monkeypatch.setattr(batched, "_alone", checked)
    budget = {**SMALL, "total_timesteps": 8 * 32 * 3, "eval_every": 0, **options}
    proxima.train(num_seeds=3, seed=1, run_dir=str(tmp_path / "group"), callbacks=[StopOthers()], **budget)
    assert compared and set(compared) == {1}


def test_a_recurrent_seeds_checkpoint_holds_its_own_memory_and_continues_alone(tmp_path):
    budget = dict(
        env_id="CartPole-v1", recurrent="lstm", lstm_hidden_size=16, **{**SMALL, "checkpoint_every": 1}
    )
    group, solo = tmp_path / "group", tmp_path / "solo"
    proxima.train(num_seeds=2, seed=1, run_dir=str(group), total_timesteps=8 * 32 * 2, **budget)
    memory = load_file(group / "seed2" / "checkpoint.safetensors")["collector/memory_h"]
    assert memory.shape == (1, 8, 16)  # (layers, the seed's envs, hidden)
    proxima.resume(str(group / "seed2"), total_timesteps=8 * 32 * 4, quiet=True)
    proxima.train(seed=2, run_dir=str(solo), total_timesteps=8 * 32 * 2, **budget)  # the same schedules
    proxima.resume(str(solo), total_timesteps=8 * 32 * 4, quiet=True)
    assert_close(records(group / "seed2"), records(solo), 4, 1e-5)


def test_target_kl_stops_each_seeds_epochs_as_its_solo_run_does(tmp_path, monkeypatch):
    """A seed whose KL passed --target-kl stops its epochs and the others go on; each seed's Adam counts its
    own steps, so its bias correction is its solo run's."""
    budget = dict(env_id="CartPole-v1", total_timesteps=8 * 32 * 4, target_kl=0.005, learning_rate=0.003,
                  **{**SMALL, "update_epochs": 4, "checkpoint_every": 1})  # fmt: skip
    stepped, step = [], Adam.step

    def recorded_step(self, seeds=None, finished=()):
        stepped.append(tuple(seeds))
        return step(self, seeds, finished)

    monkeypatch.setattr(Adam, "step", recorded_step)
    group = tmp_path / "group"
    proxima.train(num_seeds=3, seed=4, run_dir=str(group), **budget)
    monkeypatch.undo()
    assert len(set(stepped)) > 2, "the seeds stopped their epochs together: the test shows nothing"
    counts = []
    for seed in (4, 5, 6):
        solo = tmp_path / f"solo{seed}"
        proxima.train(seed=seed, run_dir=str(solo), **budget)
        assert_close(records(group / f"seed{seed}"), records(solo), 4, 1e-3)
        steps = [
            load_file(d / "checkpoint.safetensors")["optimizer/state/0/step"]
            for d in (group / f"seed{seed}", solo)
        ]
        assert steps[0].item() == steps[1].item()
        counts.append(steps[1].item())
    assert len(set(counts)) > 1  # the seeds took different numbers of steps


def test_a_batched_run_killed_with_sigkill_resumes_exactly(tmp_path):
    flags = ["--env-id", "CartPole-v1", "--num-envs", "8", "--num-steps", "32", "--num-minibatches", "4",
             "--total-timesteps", str(8 * 32 * 14), "--checkpoint-every", "1", "--seed", "3", "--num-seeds", "2",
             "--torch-threads", "1", "--quiet", "--no-plot", "--no-report"]  # fmt: skip
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(["train", *flags, "--run-dir", str(whole)]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "proxima.commands", "train", *flags, "--run-dir", str(cut)],
                            stderr=subprocess.DEVNULL)  # fmt: skip
    metrics = cut / "seed4" / "metrics.jsonl"
    while proc.poll() is None and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
        pass
    proc.kill()
    proc.wait()
    assert len(metrics.read_text().splitlines()) < 14, "the run ended before it was killed"
    assert main(["train", "--resume", str(cut), "--quiet"]) == 0
    for seed in ("seed3", "seed4"):
        assert records(cut / seed) == records(whole / seed)
        assert (cut / seed / "model.safetensors").read_bytes() == (
            whole / seed / "model.safetensors"
        ).read_bytes()


def test_each_seed_directory_is_an_ordinary_run(tmp_path, capsys):
    """eval and resume take a seed's directory as they take any run's; the group's page and plot show every
    seed."""
    group = tmp_path / "group"
    assert main(["train", "--env-id", "CartPole-v1", "--num-seeds", "2", "--num-envs", "4", "--num-steps", "32",
                 "--total-timesteps", "256", "--quiet", "--run-dir", str(group)]) == 0  # fmt: skip
    assert sorted(p.name for p in group.iterdir()) == [
        "checkpoint.safetensors",
        "learning_curves.png",
        "report.html",
        "results.json",
        "results.md",
        "seed1",
        "seed2",
        "seeds.json",
    ]
    page = (group / "report.html").read_text()
    assert "seed1" in page and "seed2" in page
    from tests.test_report import page_data

    data = page_data(group / "report.html")  # with the seeds' statistics, profile and IQM over steps
    assert data["statistics"]["tables"][0]["rows"][0][:3] == ["ppo on CartPole-v1", "CartPole-v1", "2"]
    assert {"performance_profile", "iqm_return"} <= {c["key"] for c in data["charts"]}
    config = json.loads((group / "seed2" / "config.json").read_text())
    assert config["run"]["seed"] == 2 and config["run"]["num_seeds"] == 1
    own = {"agent.json", "checkpoint.safetensors", "config.json", "episodes.jsonl", "metrics.jsonl",
           "model.safetensors", "report.html"}  # fmt: skip
    for seed in ("seed1", "seed2"):
        assert own <= {p.name for p in (group / seed).iterdir()}
        episodes = [json.loads(line) for line in open(group / seed / "episodes.jsonl")]
        assert episodes and all(e["return"] > 0 for e in episodes)
    assert main(["report", str(group / "seed2"), "--output", str(tmp_path / "seed2.html")]) == 0
    assert "seed2" in (tmp_path / "seed2.html").read_text()
    assert main(["plot", str(group / "seed2"), "--output", str(tmp_path / "seed2.png")]) == 0
    assert main(["eval", str(group / "seed2"), "--episodes", "2"]) == 0
    assert main(["plot", str(group), "--output", str(tmp_path / "curves.png")]) == 0  # the seeds' band
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert main(["train", "--resume", str(group / "seed1"), "--total-timesteps", "512", "--quiet"]) == 0
    assert records(group / "seed1")[-1]["global_step"] == 512


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--rollout-workers", "2"], "--rollout-workers"),
        (["--num-seeds", "0"], "--num-seeds must be a positive number"),
        (["--env-id", "proxima/ProbeCoordination-v0"], "not one seed per env (as --num-seeds gives them)"),
        (["--env-id", "selfplay:pettingzoo.classic.connect_four_v3"], "a self-play env"),
        (
            ["--env-id", "pettingzoo:mpe2.simple_spread_v3"],
            "not one seed per env (as --num-seeds gives them)",
        ),
        (["--env-id", "vmas:navigation"], "not one seed per env (as --num-seeds gives them)"),
    ],
)
def test_what_cannot_be_batched_is_refused_in_one_line(tmp_path, capsys, flags, named):
    args = ["train", "--env-id", "CartPole-v1", "--num-seeds", "2", *flags, "--total-timesteps", "1024",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_vector_env_object_is_refused_as_it_holds_one_seeds_envs(tmp_path):
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    with pytest.raises(UserError, match="a VectorEnv instance"):
        proxima.train(env=envs, num_seeds=2, total_timesteps=1024, run_dir=str(tmp_path / "run"), quiet=True)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, named",
    [
        (["solve", "CartPole-v1", "--num-seeds", "2"], "proxima solve trains and scores one seed"),
        (["tune", "--env-id", "CartPole-v1", "--space", "learning_rate=loguniform:1e-4:1e-3", "--num-seeds", "2"],
         "drop --num-seeds"),
    ],
)  # fmt: skip
def test_commands_of_one_seed_a_run_refuse_num_seeds(tmp_path, capsys, monkeypatch, argv, named):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_an_env_that_crashes_ends_the_batch_in_one_line_that_says_how_to_resume(tmp_path, capsys):
    run = tmp_path / "run"  # an env written as others write them (tests/fixtures/wild_envs.py)
    assert main(["train", "--env-id", "tests.fixtures.wild_envs:WildCrashAfter1000-v0", "--num-seeds", "2", "--num-envs", "1",
                 "--num-steps", "128", "--total-timesteps", "1536", "--checkpoint-every", "2", "--quiet",
                 "--no-plot", "--no-report", "--run-dir", str(run)]) == 1  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "simulator crashed" in err and f"--resume {run}" in err


class Fail(Callback):
    """Raises after update ``update``: a job that its scheduler ends (its group checkpoint of the update before
    is the last one)."""

    def __init__(self, update: int):
        self.update = update

    def on_update_end(self, run, result):
        if run.updates_done == self.update:
            raise RuntimeError("the job ends here")


class Count(Callback):
    def __init__(self):
        self.updates = 0

    def on_update_end(self, run, result):
        self.updates += 1


def test_resume_if_exists_starts_continues_and_returns_a_batched_run(tmp_path, capsys):
    budget = dict(env_id="CartPole-v1", seed=5, num_seeds=2, total_timesteps=8 * 32 * 6, **SMALL)
    budget["checkpoint_every"] = 1
    whole, run = tmp_path / "whole", tmp_path / "run"
    proxima.train(run_dir=str(whole), **budget)
    # what a job killed before its first checkpoint left, and a scheduler's log, which stays
    run.mkdir()
    (run / "seeds.json").write_text("{}")
    (run / "seed5").mkdir()
    (run / "job.log").write_text("started\n")
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(run_dir=str(run), resume_if_exists=True, callbacks=[Fail(3)], **budget)
    assert (run / "job.log").read_text() == "started\n"
    assert len(records(run / "seed6")) == 2  # user callbacks run before the logging of their update
    # started again: it resumes from its checkpoint (of update 2), exactly (native envs)
    counted = Count()
    agents = proxima.train(run_dir=str(run), resume_if_exists=True, callbacks=[counted], **budget)
    assert counted.updates == 2 * 4  # each seed's updates 3-6
    for seed in ("seed5", "seed6"):
        assert records(run / seed) == records(whole / seed)
    # and once more, finished: nothing to train, the seeds' agents
    capsys.readouterr()
    again = proxima.train(run_dir=str(run), resume_if_exists=True, **{**budget, "quiet": False})
    assert "the run already finished" in capsys.readouterr().out
    assert len(records(run / "seed5")) == 6
    for agent, previous in zip(again, agents, strict=True):
        saved, trained = agent.model.state_dict(), previous.model.state_dict()
        assert all(torch.equal(saved[k], trained[k]) for k in trained)


@pytest.mark.parametrize(
    "options",
    [
        {},
        dict(eval_every=1, eval_episodes=4, save_best=True, rescore_best=2, rescore_episodes=6),
        dict(target_kl=0.005, learning_rate=0.003),  # each seed's own count of Adam steps, restored
        dict(recurrent="lstm", lstm_hidden_size=16),  # and its envs' LSTM memory
        dict(
            norm_obs=True, norm_reward=True
        ),  # and its observation and return statistics, and returns so far
    ],
)
def test_a_batched_run_resumes_after_one_of_its_seeds_finished(tmp_path, options):
    budget = dict(env_id="CartPole-v1", seed=1, num_seeds=2, total_timesteps=8 * 32 * 4, **SMALL, **options)
    budget["checkpoint_every"] = 1
    whole, run = tmp_path / "whole", tmp_path / "run"
    proxima.train(run_dir=str(whole), callbacks=[StopSeed(seed=1, update=1)], **budget)
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(run_dir=str(run), callbacks=[StopSeed(seed=1, update=1), Fail(3)], **budget)
    proxima.resume(str(run), quiet=True)  # seed 1 finished in its checkpoint: it stays as it was
    for seed in ("seed1", "seed2"):
        assert records(run / seed) == records(whole / seed)
    assert len(records(run / "seed1")) == 1 and len(records(run / "seed2")) == 4
    rows = json.loads((run / "results.json").read_text())["seeds"]
    assert rows == json.loads((whole / "results.json").read_text())["seeds"]
    assert [r["stopped_early"] for r in rows] == [True, False]


def test_a_batched_run_resumes_with_its_own_thread_count_or_one_given(tmp_path):
    budget = dict(env_id="CartPole-v1", seed=1, num_seeds=2, total_timesteps=8 * 32 * 6, **SMALL)
    budget["checkpoint_every"] = 1
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(run_dir=str(run), callbacks=[Fail(2)], **budget)
    threads = lambda: {m["torch_threads"] for m, _ in checkpoint.read_group(str(run / CHECKPOINT)).values()}  # noqa: E731
    assert threads() == {1}
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.resume(str(run), quiet=True, callbacks=[Fail(4)], torch_threads=2)
    assert threads() == {2} and json.loads((run / "seeds.json").read_text())["run"]["torch_threads"] == 2
    agents = proxima.resume(str(run), quiet=True)  # keeps the count it was last given
    assert threads() == {2} and len(agents) == 2 and len(records(run / "seed2")) == 6


def test_resume_if_exists_goes_by_the_kind_of_run_in_the_directory(tmp_path, capsys):
    """The command of a job may change between its starts: a run there, batched or not, is continued as it is
    (a --num-seeds of the other kind is one more setting ignored); one that never checkpointed starts again as
    the command says, without the other kind's files."""
    budget = dict(env_id="CartPole-v1", seed=5, total_timesteps=8 * 32 * 2, **SMALL)
    group, solo = tmp_path / "group", tmp_path / "solo"
    proxima.train(run_dir=str(group), num_seeds=2, **budget)
    proxima.train(run_dir=str(solo), **budget)
    capsys.readouterr()
    agents = proxima.train(run_dir=str(group), resume_if_exists=True, **{**budget, "quiet": False})
    assert "the run already finished" in capsys.readouterr().out and len(agents) == 2
    agent = proxima.train(run_dir=str(solo), resume_if_exists=True, num_seeds=2, **{**budget, "quiet": False})
    assert "the run already finished" in capsys.readouterr().out and isinstance(agent, proxima.Agent)
    # a batched run killed before its first checkpoint, started again as one seed's run
    killed = tmp_path / "killed"
    (killed / "seed5").mkdir(parents=True)
    (killed / "seeds.json").write_text("{}")
    proxima.train(run_dir=str(killed), resume_if_exists=True, **budget)
    assert not (killed / "seeds.json").exists() and not (killed / "seed5").exists()
    assert len(records(killed)) == 2


def test_resume_if_exists_leaves_a_directory_of_other_files_alone(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "seed1").mkdir()  # a seed's directory, but no seeds.json: not a batched run that proxima started
    args = ["train", "--env-id", "CartPole-v1", "--num-seeds", "2", "--total-timesteps", "1024", "--quiet",
            "--resume-if-exists", "--run-dir", str(run)]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "holds seed1 but no seeds.json" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in run.iterdir()) == ["seed1"]


def test_each_seed_starts_from_the_init_from_agent_as_its_solo_run_does(tmp_path):
    budget = dict(env_id="CartPole-v1", total_timesteps=8 * 32 * 2, **SMALL)
    source = tmp_path / "source"
    proxima.train(seed=9, run_dir=str(source), **budget)
    group = tmp_path / "group"
    proxima.train(num_seeds=2, seed=1, init_from=str(source), run_dir=str(group), **budget)
    for seed in (1, 2):
        solo = tmp_path / f"solo{seed}"
        proxima.train(seed=seed, init_from=str(source), run_dir=str(solo), **budget)
        assert_close(records(group / f"seed{seed}"), records(solo), 2, 1e-3)
        assert json.loads((group / f"seed{seed}" / "config.json").read_text())["run"]["init_from"] == str(
            source
        )
    # a batched run's own directory holds no one agent: its seeds' directories are named
    with pytest.raises(UserError, match=f"give one of its seeds' directories, such as {group / 'seed1'}"):
        proxima.train(init_from=str(group), run_dir=str(tmp_path / "from-group"), **budget)
    # and not from their own initialization: the first update's value loss is the trained critic's
    fresh = tmp_path / "fresh"
    proxima.train(num_seeds=2, seed=1, run_dir=str(fresh), **budget)
    assert records(fresh / "seed1")[0]["value_loss"] != pytest.approx(
        records(group / "seed1")[0]["value_loss"], rel=1e-2
    )


def test_each_seed_runs_on_the_backend_of_its_solo_run(tmp_path):
    """auto chooses a backend by the env count (native Acrobot from 16 envs): the batch's 2 x 8 envs are of the
    backend of one seed's 8, Gymnasium's, or the episodes would not be the solo run's."""
    budget = dict(env_id="Acrobot-v1", total_timesteps=8 * 32 * 2, **SMALL)
    group = tmp_path / "group"
    proxima.train(num_seeds=2, seed=1, run_dir=str(group), **budget)
    for seed in (1, 2):
        solo = tmp_path / f"solo{seed}"
        proxima.train(seed=seed, run_dir=str(solo), **budget)
        assert_close(records(group / f"seed{seed}"), records(solo), 2, 1e-3)


def videos(run_dir) -> dict[str, bytes]:
    """Every video a run recorded (a resumed part's in its own folder), by path in ``RUN_DIR/videos``."""
    found = sorted((run_dir / "videos").rglob("*.mp4"))
    return {str(p.relative_to(run_dir / "videos")): p.read_bytes() for p in found}


def tensorboard_videos(run_dir) -> list:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return EventAccumulator(str(run_dir), size_guidance={"images": 0}).Reload().Images("videos/episode")


def test_capture_video_records_each_seed_as_its_solo_run_does(tmp_path):
    """Each seed's first env records into the seed's own directory the videos of its solo run's env 0, byte for
    byte, and logs them to its TensorBoard at the same steps; a seed that stops ends its video there, as its
    solo run's envs close, though its envs step on with the others'."""
    budget = dict(env_id="CartPole-v1", capture_video=True,
                  **{**SMALL, "num_envs": 2, "num_steps": 64, "total_timesteps": 2 * 64 * 6})  # fmt: skip
    group = tmp_path / "group"
    proxima.train(num_seeds=2, seed=1, run_dir=str(group), callbacks=[StopSeed(seed=2, update=2)], **budget)
    proxima.train(seed=1, run_dir=str(tmp_path / "solo1"), **budget)
    proxima.train(seed=2, run_dir=str(tmp_path / "solo2"), callbacks=[StopSeed(seed=2, update=2)], **budget)
    for seed in (1, 2):
        ours, solo = group / f"seed{seed}", tmp_path / f"solo{seed}"
        assert videos(ours) == videos(solo)
        logged = [[e.step for e in tensorboard_videos(d)] for d in (ours, solo)]
        assert logged[0] == logged[1] and len(logged[0]) == len(videos(solo))
    # Gymnasium's schedule records episodes 0, 1, 8, ...: seed 2 stopped before its episode 8
    assert list(videos(group / "seed1")) == [
        "rl-video-episode-0.mp4",
        "rl-video-episode-1.mp4",
        "rl-video-episode-8.mp4",
    ]
    assert list(videos(group / "seed2")) == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    # resumed, a seed records into a folder of its own part; a seed that had finished records nothing more
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(num_seeds=2, seed=1, run_dir=str(run), callbacks=[StopSeed(seed=2, update=2), Fail(3)],
                      **{**budget, "checkpoint_every": 1})  # fmt: skip
    before = {seed: videos(run / seed) for seed in ("seed1", "seed2")}
    proxima.resume(str(run), quiet=True)
    assert videos(run / "seed2") == before["seed2"]
    resumed = {k: v for k, v in videos(run / "seed1").items() if k not in before["seed1"]}
    assert resumed and all(k.startswith("resumed-after-update-2/") for k in resumed)


def test_capture_video_of_a_batch_that_never_starts_leaves_nothing(tmp_path, capsys):
    """The recorders make each seed's videos folder as the envs are built: a run refused after that removes
    them, as a solo run does."""
    run = tmp_path / "run"
    args = ["train", "--env-id", "CartPole-v1", "--num-seeds", "2", "--capture-video", "--encoder", "nature-cnn",
            "--total-timesteps", "1024", "--run-dir", str(run)]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "encoder 'nature-cnn' does not support" in err and len(err.splitlines()) == 1
    assert not run.exists()


def wandb_records(path) -> list:
    """The records of a W&B data file (an offline run's ``run-ID.wandb``): protobuf records in LevelDB's log
    format, a 7-byte file header and then blocks of 32 KiB, each record in chunks with a 7-byte header
    (checksum, length, type: 1 a whole record, 2 3 4 its first, middle and last parts)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block, pos, part, found = path.read_bytes(), 32 * 1024, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's end too short for a chunk header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        part, pos = part + data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            found.append(Record.FromString(part))
            part = b""
    return found


def test_track_gives_each_seed_its_own_wandb_run_which_a_resume_continues(tmp_path, monkeypatch):
    """--track: each seed its own W&B run (offline here), named after the seed and in the batch's group, with
    its metrics against global_step as its metrics.jsonl has them and its videos as its TensorBoard has them; a
    resumed batch continues each seed's W&B run. (W&B's start-up costs seconds a run: one test of 2 seeds.)"""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    budget = dict(env_id="CartPole-v1", track=True, capture_video=True,
                  **{**SMALL, "num_envs": 2, "num_steps": 32, "total_timesteps": 2 * 32 * 4, "checkpoint_every": 1})  # fmt: skip
    batch = tmp_path / "batch"
    with pytest.raises(RuntimeError, match="the job ends here"):
        proxima.train(num_seeds=2, seed=1, run_dir=str(batch), callbacks=[Fail(3)], **budget)
    proxima.resume(str(batch), quiet=True)
    wandb.teardown()  # W&B's service may write a run's data file after its finish() returned: now all of it
    ids = set()
    for seed in ("seed1", "seed2"):
        parts = sorted((batch / seed / "wandb").glob("offline-run-*/run-*.wandb"))  # by start time
        assert len(parts) == 2
        found = [wandb_records(p) for p in parts]
        runs = {
            (r.run.run_id, r.run.display_name, r.run.run_group)
            for rs in found
            for r in rs
            if r.HasField("run")
        }
        assert len(runs) == 1 and next(iter(runs))[1:] == (seed, "batch")
        ids.add(next(iter(runs))[0])
        rows = [
            {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
            for rs in found
            for r in rs
            if r.HasField("history")
        ]
        logged = [
            (row["global_step"], row["losses/value_loss"], row.get("charts/episodic_return"))
            for row in rows
            if "losses/value_loss" in row
        ]
        ours = [(m["global_step"], m["value_loss"], m["episodic_return"]) for m in records(batch / seed)]
        assert logged == ours and len(ours) == 4  # 2 updates before the resume, 2 after
        # and --capture-video's episodes, as TensorBoard has them
        shown = [row["global_step"] for row in rows if row.get("videos/episode/_type") == "video-file"]
        assert shown and shown == [e.step for e in tensorboard_videos(batch / seed)]
    assert len(ids) == 2


def test_a_batch_on_gymnasium_envs_resumes_each_seeds_episodes_as_its_solo_resume_does(tmp_path):
    """Gymnasium's envs cannot be saved: a resumed run starts new episodes from its seed and step. Each seed of
    a resumed batch starts those of its own resumed solo run, not the first seed's."""
    budget = dict(env_id="CartPole-v1", env_backend="gymnasium", total_timesteps=8 * 32 * 4,
                  **{**SMALL, "checkpoint_every": 1})  # fmt: skip
    runs = {"group": dict(num_seeds=2, seed=1), "solo1": dict(seed=1), "solo2": dict(seed=2)}
    for name, which in runs.items():
        with pytest.raises(RuntimeError, match="the job ends here"):
            proxima.train(run_dir=str(tmp_path / name), callbacks=[Fail(3)], **which, **budget)
        proxima.resume(str(tmp_path / name), quiet=True)
    for seed in (1, 2):
        assert_close(records(tmp_path / "group" / f"seed{seed}"), records(tmp_path / f"solo{seed}"), 4, 1e-3)


def test_the_console_counts_one_seeds_steps_as_total_timesteps_does(tmp_path, capsys):
    proxima.train(env_id="CartPole-v1", num_seeds=2, num_envs=4, num_steps=128, total_timesteps=1024,
                  run_dir=str(tmp_path / "run"), plot=False, report=False)  # fmt: skip
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("global_step=")]
    assert lines[-1].startswith("global_step=1024 per seed (2 seeds) episodic_return=")
    assert lines[-1].endswith(" (all seeds)")
