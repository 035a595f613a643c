"""Many agents as rows (docs/MULTIAGENT.md): what the actor and the critic see, one network per group, and the
steps of agents that left kept out of the update. The backends and the probes have their own test files."""

import functools
import json
import os
import signal
import types

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
import proxima.algo.update
import proxima.commands
import proxima.run.loop
from proxima.algo.algorithms import get_algorithm
from proxima.algo.optim import Adam
from proxima.algo.storage import minibatches
from proxima.algo.update import UpdateSettings, update
from proxima.base.errors import UserError
from proxima.base.spaces import ObsLayout
from proxima.envs.interface import AgentSpec
from proxima.policy.distributions import make_head
from proxima.policy.multiagent import Grouped, MultiAgentActorCritic
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec, make_policy
from proxima.run.multiagent import GameBatch, MultiAgentBuffer, MultiAgentCollector

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
AGENTS = 3
SPACE = gym.spaces.Dict(
    {
        "obs": gym.spaces.Box(-1, 1, (4,)),
        "agent": gym.spaces.Discrete(AGENTS),
        "state": gym.spaces.Box(-1, 1, (6,)),
    }
)
LAYOUT = ObsLayout(SPACE)


def _model(kinds=(0, 0, 0), **network) -> MultiAgentActorCritic:
    spec = NetworkSpec(
        logits_dim=2,
        obs_shape=LAYOUT.shape,
        network=NetworkSettings(**network),
        obs_layout=LAYOUT.to_json(),
        agents={"names": [f"a{i}" for i in range(AGENTS)], "kinds": list(kinds), "num_envs": 1},
    )
    torch.manual_seed(0)
    model = make_policy(spec, make_head(gym.spaces.Discrete(2)))
    assert isinstance(model, MultiAgentActorCritic)  # make_policy's choice for rows of agents
    return model


MULTI_AGENT_TERMS = ("actor_index", "critic_index", "critic_encoder", "action_dims_mask", "group_of_agent",
                     "agents_per_game", "agent_column", "log_std_per_group", "_actor_input", "_through",
                     "_head_rows")  # fmt: skip


def test_a_single_agent_policy_holds_no_multi_agent_term_and_a_game_gets_its_own_class():
    spec = NetworkSpec(2, (4,), NetworkSettings(centralized_critic=True))
    single = make_policy(spec, make_head(gym.spaces.Discrete(2)))
    assert type(single) is ActorCritic
    assert not [name for name in MULTI_AGENT_TERMS if hasattr(single, name)]
    assert all(hasattr(_model(centralized_critic=True), name) for name in MULTI_AGENT_TERMS)


def _rows(n=6) -> torch.Tensor:
    torch.manual_seed(1)
    obs, state = torch.randn(n, 4), torch.randn(n, 6)
    agent = (torch.arange(n) % AGENTS).float().unsqueeze(1)
    return torch.cat([agent, obs, state], dim=1)  # ObsLayout's order


def test_the_packed_row_is_agent_then_obs_then_state():
    assert [(p.path, p.offset, p.size) for p in LAYOUT.parts] == [
        (("agent",), 0, 1),
        (("obs",), 1, 4),
        (("state",), 5, 6),
    ]
    sub, index = LAYOUT.select(("agent", "state"))
    assert index.tolist() == [0, *range(5, 11)] and [p.path for p in sub.parts] == [("agent",), ("state",)]


@pytest.mark.parametrize("centralized", [False, True])
def test_the_actor_never_sees_the_state_and_only_a_centralized_critic_does(centralized):
    model, rows = _model(centralized_critic=centralized), _rows()
    changed = rows.clone()
    changed[:, 5:] += 3.0  # another global state
    logits, values = model(rows)
    logits2, values2 = model(changed)
    torch.testing.assert_close(logits, logits2)  # the actor: its own observation and index only
    assert torch.equal(values, values2) != centralized
    own = rows.clone()
    own[:, 1:5] += 3.0  # another own observation: a centralized critic does not see it
    assert torch.equal(model(own)[1], values) == centralized


def test_shared_params_tell_agents_apart_by_index_and_no_share_params_gives_each_its_network():
    shared, separate = _model(), _model(share_params=False)
    assert not isinstance(shared.actor, Grouped) and isinstance(separate.actor, Grouped)
    assert len(separate.actor.nets) == len(separate.critic.nets) == AGENTS
    rows = _rows()
    logits, values = separate(rows)
    # row i goes through agent i's own networks, on the same features
    features = separate.encoder(rows[:, separate.actor_index])
    for i in range(len(rows)):
        net = i % AGENTS
        torch.testing.assert_close(logits[i], separate.actor.nets[net](features[i : i + 1])[0])
        torch.testing.assert_close(values[i], separate.critic.nets[net](features[i : i + 1])[0, 0])


@pytest.mark.parametrize("centralized", [False, True])
def test_no_actor_agent_index_hides_the_index_from_the_actor_and_from_an_ippo_critic(centralized):
    rows = _rows()
    other = rows.clone()
    other[:, 0] = (other[:, 0] + 1) % AGENTS  # the same observations, told they are other agents
    for seen in (True, False):
        model = _model(centralized_critic=centralized, actor_agent_index=seen)
        (logits, values), (logits2, values2) = model(rows), model(other)
        assert torch.equal(logits, logits2) != seen
        # an IPPO critic works on the actor's features; MAPPO's takes the index with the state either way
        assert torch.equal(values, values2) == (not seen and not centralized)
    hidden = _model(actor_agent_index=False)
    assert hidden.actor[0].in_features == 4 and _model().actor[0].in_features == 4 + AGENTS


def test_no_critic_agent_index_gives_a_games_agents_one_value_computed_once_per_game():
    model = _model(centralized_critic=True, critic_agent_index=False)
    assert model.critic_encoder.features_dim == 6 and model.agents_per_game == AGENTS  # the state alone
    rows = _rows(4 * AGENTS)
    rows[:, 5:] = rows[::AGENTS, 5:].repeat_interleave(AGENTS, 0)  # 4 games: each game's agents see one state
    actions = torch.randint(0, 2, (len(rows),))
    critic_rows, forward = [], model.critic[0].forward  # the critic's first layer, counting its rows
    model.critic[0].forward = lambda x: critic_rows.append(len(x)) or forward(x)
    per_row, per_game = model.evaluate(rows, actions), model.evaluate(rows, actions, whole_games=True)
    assert critic_rows == [4 * AGENTS, 4]  # once per agent row, then once per game
    values = per_row[2].view(4, AGENTS)
    assert torch.equal(values, values[:, :1].expand(-1, AGENTS))  # a game's agents share its value
    for a, b in zip(per_row, per_game, strict=True):
        torch.testing.assert_close(a, b)
    grads = []
    for out in (per_row, per_game):  # the same gradients: the shared value's is the sum over its agents'
        model.zero_grad()
        (out[2].square().mean() - out[0].mean()).backward()
        grads.append([p.grad.clone() for p in model.critic.parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    # with one critic per agent (--no-share-params) each agent keeps its own value, computed per row
    assert (
        _model(centralized_critic=True, critic_agent_index=False, share_params=False).agents_per_game is None
    )


def test_the_update_runs_a_shared_critic_once_per_game_unless_an_agent_left():
    model = _model(centralized_critic=True, critic_agent_index=False)  # --norm-value, the default, too
    optimizer = Adam(model.parameters(), lr=1e-3)
    settings = UpdateSettings(get_algorithm("mappo").policy_loss, update_epochs=1, num_minibatches=2)
    critic_rows, forward = [], model.critic[0].forward
    model.critic[0].forward = lambda x: critic_rows.append(len(x)) or forward(x)
    for left in (False, True):
        agents = AgentSpec(tuple(f"agent_{a}" for a in range(AGENTS)), (0,) * AGENTS, 2)
        shapes = (4, 2 * AGENTS, LAYOUT.shape, torch.float32, (), torch.long, torch.device("cpu"))
        buf = MultiAgentBuffer(*shapes, agents=agents, whole_games=True)
        buf.obs[:] = _rows(4 * 2 * AGENTS).view(4, 2 * AGENTS, -1)
        buf.valid[1, 2] = not left  # game 0's agent 2 left after step 0
        returns = torch.randn(4, 2 * AGENTS)
        batch = buf.flatten(returns, returns)
        assert (batch.agents if isinstance(batch, GameBatch) else None) == (None if left else AGENTS)
        critic_rows.clear()
        update(model, optimizer, batch, settings, torch.Generator())
        assert critic_rows == ([12, 11] if left else [4, 4])  # 24 rows: 8 games in 2 minibatches


def test_a_rollout_is_taken_in_whole_games_only_by_a_model_whose_agents_of_a_game_share_a_value():
    envs = types.SimpleNamespace(
        agents=AgentSpec(tuple(f"agent_{a}" for a in range(AGENTS)), (0,) * AGENTS, 2)
    )
    shapes = (4, 2 * AGENTS, LAYOUT.shape, torch.float32, (), torch.long, torch.device("cpu"))
    returns = torch.zeros(4, 2 * AGENTS)
    for critic_agent_index, whole in ((False, True), (True, False)):
        model = _model(centralized_critic=True, critic_agent_index=critic_agent_index)
        batch = MultiAgentCollector.new_buffer(envs, model, *shapes).flatten(returns, returns)
        assert isinstance(batch, GameBatch) == whole


def test_game_minibatches_hold_whole_games_each_once():
    rows = torch.zeros(5 * AGENTS * 4)
    parts = GameBatch(rows, rows, rows, rows, rows, rows, agents=AGENTS).minibatches(4, torch.Generator())
    assert [len(p) for p in parts] == [5 * AGENTS] * 4
    rows = torch.cat(parts)
    assert sorted(rows.tolist()) == list(range(5 * AGENTS * 4))
    games = rows.view(-1, AGENTS)
    assert torch.equal(games - games[:, :1], torch.arange(AGENTS).expand_as(games))  # a game's rows, in order
    assert games[:, 0].remainder(AGENTS).eq(0).all()


def test_agents_of_different_kinds_never_share_a_network():
    model = _model(kinds=(0, 1, 1))
    assert isinstance(model.actor, Grouped) and len(model.actor.nets) == 2
    assert model.group_of_agent.tolist() == [0, 1, 1]


def test_the_steps_of_an_agent_that_left_are_not_samples():
    agents = AgentSpec(("a", "b", "c"), (0, 0, 0), 1)
    buf = MultiAgentBuffer(4, 3, (2,), torch.float32, (), torch.long, torch.device("cpu"), agents=agents)
    buf.obs[:] = torch.arange(12.0).view(4, 3, 1)
    buf.valid[1:3, 2] = False  # row 2's agent left after step 0, until its game reset at step 3
    advantages = torch.arange(12.0).view(4, 3)
    batch = buf.flatten(advantages, advantages)
    assert len(batch) == 10 and 5.0 not in batch.advantages.tolist() and 8.0 not in batch.advantages.tolist()
    buf.memory = (
        torch.zeros(1, 3, 8),
        torch.zeros(1, 3, 8),
    )  # a recurrent agent's: whole sequences, same samples
    sequences = buf.sequences(advantages, advantages)
    assert len(sequences) == 3 and torch.equal(sequences.samples()[0].advantages, batch.advantages)
    assert sequences[torch.tensor([2])].valid[:, 0].tolist() == [True, False, False, True]
    parts = minibatches(len(batch), 4, torch.Generator())  # 10 samples in 4 minibatches: sizes 3, 3, 2, 2
    assert sorted(torch.cat(parts).tolist()) == list(range(10)) and sorted(map(len, parts)) == [2, 2, 3, 3]
    # where the count divides the batch, the minibatches are those of a single-agent run, draw for draw
    even = minibatches(12, 4, torch.Generator().manual_seed(3))
    alone = torch.randperm(12, generator=torch.Generator().manual_seed(3)).split(3)
    assert all(torch.equal(a, b) for a, b in zip(even, alone, strict=True))


def test_multi_agent_settings_are_refused_on_a_single_agent_env(tmp_path):
    for settings in (
        {"algo": "mappo"},
        {"algo": "ippo"},
        {"centralized_critic": True},
        {"team_reward": True},
        {"critic_agent_index": False},
    ):
        with pytest.raises(UserError, match="single-agent env"):
            proxima.train(
                env_id="CartPole-v1", total_timesteps=512, run_dir=str(tmp_path / "r"), quiet=True, **settings
            )
    with pytest.raises(UserError, match="shared-network"):
        NetworkSettings(centralized_critic=True, shared_network=True).validate()
    with pytest.raises(UserError, match="need a network each: drop --shared-network"):
        proxima.train(env_id="proxima/ProbeCoordination-v0", algo="ippo", share_params=False, shared_network=True,
                      total_timesteps=512, run_dir=str(tmp_path / "s"), quiet=True)  # fmt: skip
    with pytest.raises(UserError, match="IPPO critic works on the actor's features") as refused:
        proxima.train(env_id="proxima/ProbeCoordination-v0", algo="ippo", critic_agent_index=False,
                      total_timesteps=512, run_dir=str(tmp_path / "t"), quiet=True)  # fmt: skip
    # a preset may have set it (vmas-benchmarl does): the line names the flag that undoes it
    assert "a preset's" in str(refused.value) and "give --critic-agent-index" in str(refused.value)
    with pytest.raises(UserError, match="each player needs its own"):
        proxima.train(env_id="pettingzoo:pettingzoo.classic.connect_four_v3", algo="mappo", critic_agent_index=False,
                      total_timesteps=512, run_dir=str(tmp_path / "u"), quiet=True)  # fmt: skip
    assert not any((tmp_path / name).exists() for name in "rstu")


@pytest.mark.parametrize(
    "env_id, flag, instead",
    [
        ("pettingzoo:mpe2.simple_spread_v3", "--async-envs", ", or give --rollout-workers N to run the games in N Ray processes"),
        ("vmas:navigation", "--async-envs", ", or give --rollout-workers N to run the games in N Ray processes"),
        ("selfplay:pettingzoo.classic.connect_four_v3", "--async-envs", ""),
        ("selfplay:pettingzoo.classic.connect_four_v3", "--capture-video", ""),
        ("proxima/ProbeCoordination-v0", "--capture-video", ""),  # native: Gymnasium has no multi-agent probes
    ],
)  # fmt: skip
def test_a_flag_a_many_agent_backend_cannot_do_is_refused_by_name_not_as_an_unknown_gymnasium_id(
    env_id, flag, instead, tmp_path, capsys
):
    backend = env_id.split(":")[0] if ":" in env_id else "native"
    argv = ["train", "--env-id", env_id, flag, "--num-envs", "2", "--num-steps", "100", "--total-timesteps",
            "1000", "--no-plot", "--no-report", "--quiet", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert proxima.commands.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"proxima train: error: the {backend} backend cannot do {flag}, and it is the only one that runs "
        f"{env_id!r}; drop {flag}{instead}"
    ]
    assert not out and not os.path.exists(tmp_path / "run")


def test_a_refusal_names_the_flag_of_its_command_and_suggests_only_what_the_run_lacks(tmp_path, capsys):
    # with --rollout-workers the games already run in Ray processes: the refusal of --async-envs says drop it
    argv = ["train", "--env-id", "vmas:navigation", "--async-envs", "--rollout-workers", "2", "--num-envs", "4",
            "--num-steps", "10", "--total-timesteps", "1000", "--quiet", "--run-dir", str(tmp_path / "w")]  # fmt: skip
    assert proxima.commands.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "proxima train: error: the vmas backend cannot do --async-envs, and it is the only one that runs "
        "'vmas:navigation'; drop --async-envs"
    ]
    # proxima eval records video with --video, not --capture-video
    run_dir = tmp_path / "run"
    proxima.train(env_id="proxima/ProbeCoordination-v0", algo="ippo", num_envs=2, num_steps=10, total_timesteps=20,
                  run_dir=str(run_dir), quiet=True, report=False, plot=False)  # fmt: skip
    assert proxima.commands.main(["eval", str(run_dir), "--video", "--episodes", "2"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "proxima eval: error: the native backend cannot do --video, and it is the only one that runs "
        "'proxima/ProbeCoordination-v0'; drop --video"
    ]
    assert not (run_dir / "eval-videos").exists()


def test_vmas_games_record_video_in_training_and_in_proxima_eval(tmp_path, capsys):
    pytest.importorskip("moviepy")
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", "vmas:navigation", "--env-kwargs", '{"max_steps": 5}', "--num-envs", "2",
            "--num-steps", "10", "--total-timesteps", "20", "--capture-video", "--no-plot", "--no-report",
            "--quiet", "--run-dir", str(run_dir)]  # fmt: skip
    assert proxima.commands.main(argv) == 0
    # game 0's episodes 0 and 1 (Gymnasium's schedule: 0, 1, 8, ...), each from its reset to its end
    assert sorted(os.listdir(run_dir / "videos")) == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    # 4 episodes of 3 agents' rows: 2 games, which --video plays in turn on one env, each filmed whole
    assert proxima.commands.main(["eval", str(run_dir), "--video", "--episodes", "4"]) == 0
    films = ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    assert sorted(os.listdir(run_dir / "eval-videos")) == films
    said = ", ".join(str(run_dir / "eval-videos" / f) for f in films)
    assert f"videos: {said}" in capsys.readouterr().out


def test_a_team_reward_is_the_mean_over_the_agents_present():
    from proxima.run.multiagent import team_reward_of

    reward = torch.tensor([1.0, 2.0, 0.0, 3.0, 5.0, 7.0])  # two games of three agents
    present = torch.tensor([True, True, False, True, True, True])  # game 0's third agent has left
    assert team_reward_of(reward, present, 3).tolist() == [1.5, 1.5, 0.0, 5.0, 5.0, 5.0]


def test_each_kind_of_agent_gets_its_own_debug_variables():
    from proxima.algo.storage import Batch
    from proxima.run.multiagent import group_diagnostics

    model, rows = _model(kinds=(0, 1, 1)), _rows(12)
    actions = torch.randint(0, 2, (12,))
    logprobs, _, values = model.evaluate(rows, actions)
    returns = values + torch.randn(12)
    batch = Batch(rows, actions, logprobs.detach(), values.detach(), returns, returns)
    names = AgentSpec(("adversary_0", "agent_0", "agent_1"), (0, 1, 1), 4).kind_names()
    assert names == ["adversary", "agent"]
    stats = group_diagnostics(model, batch, [0, 1, 1], names)
    assert stats["adversary/approx_kl"] == pytest.approx(0.0, abs=1e-7)  # the rollout's own policy
    adversary = torch.arange(12) % AGENTS == 0
    expected = 0.5 * (values[adversary] - returns[adversary]).pow(2).mean().item()
    assert stats["adversary/value_loss"] == pytest.approx(expected, rel=1e-5)
    assert set(stats) == {
        f"{k}/{v}" for k in names for v in ("entropy", "approx_kl", "value_loss", "explained_variance")
    }


def test_no_share_params_gives_each_agents_network_its_own_debug_variables(tmp_path):
    proxima.train(env_id="proxima/ProbeCoordination-v0", algo="ippo", share_params=False, num_envs=4, num_steps=16,
                  total_timesteps=128, run_dir=str(tmp_path / "run"), quiet=True, report=False, plot=False)  # fmt: skip
    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    each = {f"{a}/{v}" for a in ("agent_0", "agent_1") for v in ("entropy", "approx_kl", "value_loss")}
    assert all(each <= set(m) for m in metrics)


class _Valid(proxima.run.callbacks.Callback):
    """Keeps each rollout's valid steps."""

    def __init__(self):
        self.valid = []

    def on_update_end(self, run, result):
        self.valid.append(run.collector.buffer.valid.clone())


def test_mappo_trains_on_a_pettingzoo_env_whose_agents_leave_and_are_of_two_kinds(tmp_path, monkeypatch):
    from tests.test_pettingzoo_backend import Chase

    sizes, update = [], proxima.run.loop.update
    monkeypatch.setattr(
        proxima.run.loop,
        "update",
        lambda model, opt, batch, s, g: sizes.append(len(batch)) or update(model, opt, batch, s, g),
    )
    seen = _Valid()
    agent = proxima.train(env=functools.partial(Chase, max_cycles=8, scout_steps=2), algo="mappo", num_envs=2,
                          num_steps=16, total_timesteps=96, run_dir=str(tmp_path / "run"), quiet=True,
                          plot=False, callbacks=[seen])  # fmt: skip
    assert agent.model.spec.agents["kinds"] == [0, 0, 1] and len(agent.model.actor.nets) == 2
    valid = torch.stack(
        seen.valid
    )  # (updates, steps, games * agents): the scout leaves after 2 of up to 8 steps
    assert sizes == valid.sum((1, 2)).tolist() and all(
        size < 16 * 6 for size in sizes
    )  # only the agents present
    assert valid[..., 2::3].float().mean() <= 0.5 < valid[..., 0::3].float().mean()
    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    groups = {
        "runner/entropy",
        "scout/entropy",
        "runner/approx_kl",
        "scout/value_loss",
        "episodic_return/scout",
    }
    assert groups <= set(metrics[-1])
    # each kind's debug variables reach TensorBoard and get a chart of their own on the run's page
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.test_report import page_data

    events = EventAccumulator(str(tmp_path / "run"))
    events.Reload()
    assert {f"charts/{key}" for key in groups} <= set(events.Tags()["scalars"])
    assert groups <= {chart["key"] for chart in page_data(tmp_path / "run" / "report.html")["charts"]}


def test_normalization_statistics_take_in_only_the_agents_present(tmp_path, monkeypatch):
    """--norm-obs, --norm-reward and --norm-value: the rows of an agent that left (zeros, padded) are not
    observations, returns or value targets."""
    from proxima.policy.normalization import Normalization, RunningMeanStd
    from tests.test_pettingzoo_backend import Chase

    merged, real = {"obs": [], "return": []}, RunningMeanStd.update

    def recorded(self, x, horizon=0, rows=None):
        if rows is not None:
            merged["obs" if self.mean.dim() else "return"].append((x.clone(), rows.clone()))
        return real(self, x, horizon, rows)

    targets, update_value = [], Normalization.update_value
    monkeypatch.setattr(RunningMeanStd, "update", recorded)
    monkeypatch.setattr(
        Normalization, "update_value", lambda self, x, h=0: targets.append(len(x)) or update_value(self, x, h)
    )
    seen = _Valid()
    agent = proxima.train(env=functools.partial(Chase, max_cycles=8, scout_steps=2), algo="mappo", num_envs=2,
                          num_steps=16, total_timesteps=96, norm_obs=True, norm_reward=True, norm_value=True,
                          run_dir=str(tmp_path / "run"), quiet=True, report=False, plot=False,
                          callbacks=[seen])  # fmt: skip
    # --norm-value: one set of statistics over the value targets of the agents present
    assert targets == [int(v.sum()) for v in seen.valid] and all(t < 16 * 6 for t in targets)
    norm = agent.model.normalization
    for kind, rms in (("obs", norm.obs_rms), ("return", norm.return_rms)):
        x = torch.cat([x for x, _ in merged[kind]]).double()
        rows = torch.cat([rows for _, rows in merged[kind]])
        assert (
            len(merged[kind]) == 96 // 2 and 0 < (~rows).sum() < len(rows) / 2
        )  # every step; the scout left
        present = x[rows]
        assert float(rms.count) == pytest.approx(len(present), abs=1e-3)
        # apart from the statistics' prior (mean 0, variance 1) of weight 1e-4 samples
        torch.testing.assert_close(rms.mean, present.mean(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rms.var, present.var(0, unbiased=False), rtol=1e-4, atol=1e-5)
    everyone = torch.cat([x for x, _ in merged["obs"]]).double().mean(0)
    assert (everyone - norm.obs_rms.mean).abs().max() > 0.1  # counting the absent rows would have shown


def test_health_warnings_watch_a_game_of_many_agents(tmp_path, capsys):
    """A learning rate 200x the default: the agents' shared policy turns deterministic within a few updates."""
    run_dir = tmp_path / "run"
    argv = ["train", "--env-id", "proxima/ProbeCoordination-v0", "--algo", "mappo", "--learning-rate", "0.05",
            "--total-timesteps", "16384", "--run-dir", str(run_dir)]  # fmt: skip
    assert proxima.commands.main(argv) == 0
    out = capsys.readouterr().out
    assert "warning: entropy fell from" in out and "health: entropy: unhealthy in" in out
    warned = [json.loads(line).get("warnings") for line in open(run_dir / "metrics.jsonl")]
    assert [w[0]["kind"] for w in warned if w] == ["entropy"]


def test_a_mappo_agent_evaluates_on_its_games_and_exports_the_shared_actor_without_the_state(tmp_path):
    run_dir = str(tmp_path / "run")
    agent = proxima.train(env_id="pettingzoo:mpe2.simple_spread_v3", algo="mappo", env_kwargs={"max_cycles": 5},
                          num_envs=2, num_steps=10, total_timesteps=40, run_dir=run_dir, quiet=True, report=False,
                          plot=False)  # fmt: skip
    returns = proxima.evaluate(agent, episodes=6, deterministic=True)
    assert len(returns) == 6 and np.isfinite(returns).all()  # 2 games x 3 agents, one episode each
    path = proxima.export(run_dir, "torchscript")
    ports = json.load(open(path + ".json"))["inputs"]
    assert [p["name"] for p in ports] == ["obs/obs", "obs/agent"]  # the file never takes the global state
    envs = proxima.envs.make_envs("pettingzoo:mpe2.simple_spread_v3", 2, env_kwargs={"max_cycles": 5}, seed=3)
    rows = envs.reset()
    layout = envs.obs_layout
    agent_col, own = (next(p.span for p in layout.parts if p.path == (k,)) for k in ("agent", "obs"))
    exported = torch.jit.load(path)(rows[:, own], rows[:, agent_col].long().squeeze(1))
    assert torch.equal(exported, agent.model.predict(rows, deterministic=True))


@pytest.mark.parametrize("share_params", [True, False], ids=["one-net-per-kind", "one-net-per-agent"])
def test_an_agent_of_two_kinds_exports_each_kinds_actor_to_onnx_and_torchscript(tmp_path, share_params):
    """tests.test_pettingzoo_backend's Chase: runners (3 moves, a mask) and a scout (2 moves). The exported
    file takes the agent's own observation, its index and its mask, and picks the trained policy's actions."""
    ort = pytest.importorskip("onnxruntime")
    from tests.test_pettingzoo_backend import Chase

    game = functools.partial(Chase, max_cycles=8, scout_steps=2)
    run_dir = str(tmp_path / "run")
    agent = proxima.train(env=game, algo="mappo", num_envs=2, num_steps=16, total_timesteps=64, run_dir=run_dir,
                          share_params=share_params, quiet=True, report=False, plot=False)  # fmt: skip
    envs = proxima.envs.make_envs(game, 4, seed=3)
    rows = envs.reset()
    spans = {p.path[0]: p.span for p in envs.obs_layout.parts}
    inputs = (
        rows[:, spans["obs"]],
        rows[:, spans["agent"]].long().squeeze(1),
        rows[:, spans["action_mask"]].bool(),
    )
    expected = agent.model.predict(rows, deterministic=True)
    assert set(expected[2::3].tolist()) <= {0, 1}  # the scout's rows: its own 2 moves
    onnx_path, script_path = proxima.export(run_dir, "onnx"), proxima.export(run_dir, "torchscript")
    assert [p["name"] for p in json.load(open(onnx_path + ".json"))["inputs"]] == ["obs/obs", "obs/agent",
                                                                                  "action_mask"]  # fmt: skip
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    from_onnx = session.run(None, dict(zip(names, (x.numpy() for x in inputs), strict=True)))[0]
    assert from_onnx.tolist() == expected.tolist()
    assert torch.equal(torch.jit.load(script_path)(*inputs), expected)


def test_check_env_says_what_a_game_of_many_agents_becomes():
    from proxima.run.checkenv import check_env

    report, warnings, problems = check_env("pettingzoo:mpe2.simple_spread_v3", {"max_cycles": 5}, num_envs=2)
    assert problems == [] and warnings == []
    assert (
        "3 agents a game (agent_0, agent_1, agent_2), 1 kind(s)" in report[0]
        and "2 games are 6 rows" in report[0]
    )
    assert "global state of 54" in report[1]


def test_a_recurrent_mappo_agent_replays_whole_sequences_but_learns_from_the_agents_present(
    tmp_path, monkeypatch
):
    from tests.test_pettingzoo_backend import Chase

    seen, update, samples, loss = [], proxima.run.loop.update, [], proxima.algo.update.minibatch_loss
    present = []  # each update's steps of agents present (the buffer's tensors are reused by the next rollout)
    monkeypatch.setattr(
        proxima.run.loop,
        "update",
        lambda model, opt, batch, s, g: (
            seen.append(batch) or present.append(int(batch.valid.sum())) or update(model, opt, batch, s, g)
        ),
    )
    monkeypatch.setattr(  # what each minibatch's loss is taken over
        proxima.algo.update,
        "minibatch_loss",
        lambda logprobs, *rest: samples.append(len(logprobs)) or loss(logprobs, *rest),
    )
    agent = proxima.train(env=functools.partial(Chase, max_cycles=8, scout_steps=2), algo="mappo",
                          recurrent="lstm", lstm_hidden_size=16, num_envs=2, num_minibatches=2, num_steps=16,
                          total_timesteps=64, update_epochs=3, run_dir=str(tmp_path / "run"), quiet=True,
                          report=False, plot=False)  # fmt: skip
    assert all(len(b) == 6 and b.valid is not None and not bool(b.valid[:, 2::3].all()) for b in seen)
    # each epoch's two minibatches of 3 sequences take the loss over the present agents' steps alone
    per_update = [sum(samples[i : i + 6]) for i in range(0, len(samples), 6)]
    assert len(samples) == 6 * len(seen) and per_update == [3 * n for n in present]
    # the actor remembers; MAPPO's critic, which sees the global state, stays feedforward
    assert any(isinstance(m, torch.nn.LSTM) for m in agent.model.modules())
    assert not any(isinstance(m, torch.nn.LSTM) for m in agent.model.critic.modules())
    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert all(np.isfinite(m["value_loss"]) and np.isfinite(m["scout/entropy"]) for m in metrics)


def test_a_sweep_compares_ippo_and_mappo_on_a_game_of_many_agents(tmp_path):
    proxima.sweep(env_id="proxima/ProbeCentralCritic-v0", grid={"algo": ["ippo", "mappo"]}, seeds=[1],
                            executor="local", total_timesteps=4096, num_envs=8, num_steps=16,
                            output_dir=str(tmp_path / "sweep"), quiet=True, report=False, plot=False)  # fmt: skip
    trials = {t["setting"]: t for t in json.load(open(tmp_path / "sweep" / "results.json"))["trials"]}
    assert {t["status"] for t in trials.values()} == {"finished"}
    ev = {s: json.loads(open(os.path.join(t["run_dir"], "metrics.jsonl")).readlines()[-1])["explained_variance"]
          for s, t in trials.items()}  # fmt: skip
    # the team's reward is the sum of both agents' bits: IPPO's critic sees one of them (half the variance)
    assert ev["algo=mappo"] > 0.9 and 0.15 < ev["algo=ippo"] < 0.75


@pytest.mark.parametrize("preset", ["vmas-benchmarl", "vmas-fast"])
@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_the_vmas_presets_train_any_task_with_either_algorithm(preset, algo, tmp_path):
    small = ["--num-envs", "6", "--num-steps", "10", "--update-epochs", "2", "--total-timesteps", "120"]
    argv = ["train", "--config", preset, "--env-id", "vmas:balance", "--algo", algo, *small,
            "--no-plot", "--no-report", "--quiet", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert proxima.commands.main(argv) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["algorithm"]["algo"] == algo and config["env"]["env_id"] == "vmas:balance"
    assert config["network"]["init"] == "torch" and config["network"]["actor_agent_index"] is False
    assert config["network"]["critic_agent_index"] is False
    assert config["algorithm"]["update_epochs"] == 2 and config["algorithm"]["num_minibatches"] == 15
    model = proxima.load(str(tmp_path / "run")).model
    assert model.actor[0].in_features == model.spec.layout().select(("obs",))[0].shape[0]  # no index
    assert model.agents_per_game == (4 if algo == "mappo" else None)  # balance: MAPPO's value is one a game


def test_vmas_fast_is_benchmarls_settings_with_a_third_of_the_epochs():
    from proxima.run.config import load_preset

    same, fast = load_preset("vmas-benchmarl"), load_preset("vmas-fast")
    assert fast.pop("update_epochs") * 3 == same.pop("update_epochs")
    assert fast.pop("learning_rate") == pytest.approx(6 * same.pop("learning_rate"))
    assert fast == same


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_mappo_on_vmas_killed_with_sigkill_resumes_exactly(device, tmp_path):
    from tests.test_resume import _assert_same_run, _cli, _wait_for_updates

    run = ["--env-id", "vmas:navigation", "--algo", "mappo", "--num-envs", "4", "--num-steps", "16",
           "--total-timesteps", "1024", "--checkpoint-every", "2", "--seed", "3", "--quiet", "--no-plot", "--no-report",
           "--torch-threads", "1", "--cuda" if device == "cuda" else "--no-cuda"]  # fmt: skip
    whole, killed = str(tmp_path / "whole"), str(tmp_path / "killed")
    assert proxima.commands.main(["train", "--run-dir", whole, *run]) == 0
    proc = _cli("train", "--run-dir", killed, *run)
    _wait_for_updates(killed, 5, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(open(os.path.join(killed, "metrics.jsonl")).readlines()) < 16
    assert proxima.commands.main(["train", "--resume", killed, "--quiet"]) == 0
    _assert_same_run(
        whole, killed
    )  # the same weights, metrics and episodes: VMAS's state is in the checkpoint


@pytest.mark.parametrize("action_dist", ["gaussian", "beta", "tanh-gaussian"])
def test_box_kinds_of_two_sizes_have_their_own_std_and_count_only_their_own_components(tmp_path, action_dist):
    """Reach's arm acts in 2 dims and its slider in 1 of the rows' Box(2): the slider's second component is
    drawn but never sent, so it must weigh in no log-prob, entropy or gradient; each kind's Gaussian explores
    at its own scale."""
    pytest.importorskip("pettingzoo")
    from proxima.policy.distributions import DiagGaussianHead
    from tests.test_pettingzoo_backend import Reach

    agent = proxima.train(env=Reach, num_envs=2, num_steps=16, total_timesteps=128, update_epochs=2,
                          ent_coef=0.01, action_dist=action_dist, run_dir=str(tmp_path / "run"), quiet=True,
                          plot=False, seed=3)  # fmt: skip
    model = agent.model
    assert model.spec.agents["action_dims"] == [2, 1]
    obs = torch.tensor([[0.5, -0.5, 0.0], [0.5, -0.5, 1.0]])  # obs, then the agent index: arm, slider
    obs = torch.cat([obs, torch.zeros(2, model.spec.obs_shape[0] - 3)], 1)
    logits = model.logits(obs)
    actions = torch.tensor([[0.3, -0.2], [0.1, -0.9]])
    other = actions.clone()
    other[1, 1] = 0.4  # the slider's unused component: no part of its action
    logp, entropy, _ = model.evaluate(obs, actions)
    logp_other, entropy_other, _ = model.evaluate(obs, other)
    assert logp[1] == logp_other[1] and entropy[1] == entropy_other[1]
    assert logp[0] != logp_other[0] or actions[0].equal(other[0])
    # the slider's numbers are those of its one component alone
    one = make_head(gym.spaces.Box(-1, 1, (1,)), action_dist)
    if isinstance(model.head, DiagGaussianHead):
        assert model.head.log_std.shape == (2, 2)  # one row per kind
        one.log_std.data = model.head.log_std[1, :1].detach().clone()
        slider = logits[1:, :1]
    else:
        slider = logits[1:, [0, 2]]  # the first component's two parameters
    one_logp, one_entropy = one.log_prob_entropy(slider, actions[1:, :1])
    torch.testing.assert_close(logp[1:], one_logp)
    torch.testing.assert_close(entropy[1:], one_entropy)
    # sampled rows agree with evaluated ones, each row with its own kind's std
    drawn, drawn_logp, _ = model.act(obs)
    torch.testing.assert_close(model.evaluate(obs, drawn)[0], drawn_logp)
    if isinstance(model.head, DiagGaussianHead):
        # trained: the kinds' stds moved apart, and the slider's unused one never had a gradient (Adam left it)
        log_std = model.head.log_std.detach()
        assert log_std[1, 1] == 0.0 and (log_std[0] != 0).all() and log_std[1, 0] != 0
        assert not torch.equal(log_std[0, 0], log_std[1, 0])
    # the saved agent loads and acts with the same head
    loaded = proxima.Agent.load(str(tmp_path / "run"))
    torch.testing.assert_close(loaded.model.evaluate(obs, actions)[0], logp)


def test_agents_with_their_own_actors_have_their_own_gaussian_std(tmp_path):
    """--no-share-params on agents of one kind: each agent's actor gives its mean, and its own log-std goes
    with it; shared actors keep one log-std, as a single agent's."""
    pytest.importorskip("pettingzoo")
    from tests.test_pettingzoo_backend import Reach

    same = functools.partial(Reach, slider_action=gym.spaces.Box(-1, 1, (2,), np.float32))
    for share, shape in ((True, (2,)), (False, (2, 2))):
        agent = proxima.train(env=same, num_envs=2, num_steps=8, total_timesteps=32, share_params=share,
                              run_dir=str(tmp_path / str(share)), quiet=True, plot=False)  # fmt: skip
        assert "action_dims" not in agent.model.spec.agents
        assert agent.model.head.log_std.shape == shape
