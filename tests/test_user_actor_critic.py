"""Your own actor and critic: the PPO tutorial's ``Agent`` trained in proxima's loop (``actor_critic=Agent``,
``--actor-critic module:Agent``; docs/NETWORKS.md)."""

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import proxima
from proxima.base import trust
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.policy.distributions import make_head
from proxima.policy.networks import NetworkSettings, NetworkSpec, make_policy
from proxima.policy.user import EnvSpaces, UserActorCritic
from proxima.run.callbacks import Callback
from tests.fixtures.student_agent import ActorFirst, Agent, GaussianAgent, layer_init

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = "tests.fixtures.student_agent:Agent"
FAST = dict(env_id="CartPole-v1", num_envs=2, num_steps=64, plot=False, report=False, quiet=True)
OBS = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)


class WeightsAtStart(Callback):
    def on_train_start(self, run):
        self.before = {k: v.clone() for k, v in run.model.state_dict().items()}


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_the_tutorials_agent_trains_in_proximas_loop_and_comes_back_with_the_agent(tmp_path):
    start, run_dir = WeightsAtStart(), tmp_path / "run"
    agent = proxima.train(
        actor_critic=Agent, total_timesteps=512, run_dir=str(run_dir), callbacks=[start], **FAST
    )
    model = agent.model
    assert isinstance(model, UserActorCritic) and type(model.actor) is nn.Sequential
    # the tutorial's layers are the network's, under proxima's names: actor.0.weight ... critic.4.bias
    layers = [
        f"{role}.{i}.{kind}" for role in ("actor", "critic") for i in (0, 2, 4) for kind in ("weight", "bias")
    ]
    assert sorted(k for k in start.before if k.startswith(("actor", "critic"))) == sorted(layers)
    for name in layers:  # every weight and bias moved: the updates reached both networks
        assert not torch.equal(model.state_dict()[name], start.before[name]), name
    # the tutorial's row norms at the start (proxima's orthogonal init did not touch them)
    torch.testing.assert_close(torch.linalg.svdvals(start.before["actor.4.weight"]), torch.full((2,), 0.01))
    torch.testing.assert_close(torch.linalg.svdvals(start.before["critic.4.weight"]), torch.ones(1))
    assert json.loads((run_dir / "config.json").read_text())["network"]["actor_critic"] == PATH
    assert json.loads((run_dir / "agent.json").read_text())["network"]["network"]["actor_critic"] == PATH
    loaded = proxima.load(str(run_dir), actor_critic=Agent)
    assert isinstance(loaded.model, UserActorCritic)
    for name, value in loaded.model.state_dict().items():
        torch.testing.assert_close(value, model.state_dict()[name], rtol=0, atol=0)
    np.testing.assert_array_equal(
        loaded.predict(OBS, deterministic=True), agent.predict(OBS, deterministic=True)
    )
    draws = [a.predict(OBS, generator=torch.Generator().manual_seed(1)) for a in (loaded, agent)]
    np.testing.assert_array_equal(*draws)
    assert loaded.predict(OBS[0], deterministic=True) in (0, 1)  # one observation, a batch of 1 inside
    assert len(proxima.evaluate(loaded, 2)) == 2
    exported = torch.jit.load(proxima.export(loaded, "torchscript", str(tmp_path / "policy.pt")))
    np.testing.assert_array_equal(
        exported(torch.from_numpy(OBS)).numpy(), agent.predict(OBS, deterministic=True)
    )


def _run_files(run_dir) -> dict[str, bytes]:
    """What compare_commits compares: the metrics without their times, the episodes, the final weights."""
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for row in metrics:
        row.pop("time_s", None), row.pop("sps", None)
    files = {name: (run_dir / name).read_bytes() for name in ("episodes.jsonl", "model.safetensors")}
    return {**files, "metrics": json.dumps(metrics).encode()}


def test_made_in_proximas_order_it_trains_byte_identically_to_the_default_network(tmp_path):
    """The tutorial's layers with proxima's init, the actor's first (proxima makes its MLPs in that order) and
    nothing else drawing in between: the same weights at the start, then the same run to the last bit."""
    runs = {}
    for label, extra in (("default", {}), ("tutorial", {"actor_critic": ActorFirst})):
        run_dir = tmp_path / label
        proxima.train(total_timesteps=1024, seed=3, run_dir=str(run_dir), torch_threads=1, **FAST, **extra)
        runs[label] = _run_files(run_dir)
    assert runs["tutorial"] == runs["default"]


class TorchDefault(nn.Module):
    """Layers left as nn.Linear starts them, without the tutorial's orthogonal init."""

    def __init__(self, envs):
        super().__init__()
        n = int(np.prod(envs.single_observation_space.shape))
        self.actor = nn.Sequential(nn.Linear(n, 8), nn.ReLU(), nn.Linear(8, envs.single_action_space.n))
        self.critic = nn.Sequential(nn.Linear(n, 8), nn.ReLU(), nn.Linear(8, 1))


def _model(cls, **settings):
    spaces = EnvSpaces(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3), num_envs=8)
    network = NetworkSettings(
        actor_critic=f"{cls.__module__}:{cls.__qualname__}", encoder="flatten-mlp", **settings
    )
    spec = NetworkSpec(logits_dim=3, obs_shape=(4,), network=network)
    return make_policy(spec, make_head(spaces.single_action_space), spaces), spaces


def test_its_layers_keep_the_init_it_gave_them_and_it_sees_the_envs_spaces():
    torch.manual_seed(0)
    model, spaces = _model(TorchDefault)
    torch.manual_seed(0)
    expected = TorchDefault(spaces)
    for name, value in expected.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0)
    assert model.logits(torch.zeros(5, 4)).shape == (5, 3) and model.value(torch.zeros(5, 4)).shape == (5,)


def test_the_action_space_chooses_the_head_and_reinforce_leaves_the_critic_out(tmp_path):
    agent = proxima.train(**{**FAST, "env_id": "Pendulum-v1"}, actor_critic=GaussianAgent, total_timesteps=256,
                          run_dir=str(tmp_path / "box"))  # fmt: skip
    assert type(agent.model.head).__name__ == "DiagGaussianHead" and agent.predict(np.zeros(3)).shape == (1,)
    agent = proxima.train(actor_critic=Agent, algo="reinforce", total_timesteps=256, run_dir=str(tmp_path / "rf"),
                          **FAST)  # fmt: skip
    assert agent.model.critic is None and not any(k.startswith("critic") for k in agent.model.state_dict())


class FlatValue(nn.Module):
    """A critic that gives (B,), not (B, 1), and ends in no nn.Linear."""

    def __init__(self, envs):
        super().__init__()
        self.actor = nn.Sequential(layer_init(nn.Linear(4, 2), row_norm=0.01))
        self.critic = nn.Sequential(layer_init(nn.Linear(4, 1), row_norm=1.0), nn.Flatten(0))


def test_a_critic_of_flat_values_trains_without_value_normalization(tmp_path):
    with pytest.raises(UserError, match=r"--norm-value \(the default\) rescales the critic's output layer .* ends "
                                        r"in Flatten: end it in nn.Linear\(..., 1\), or give --no-norm-value"):  # fmt: skip
        proxima.train(actor_critic=FlatValue, total_timesteps=128, run_dir=str(tmp_path / "a"), **FAST)
    agent = proxima.train(actor_critic=FlatValue, norm_value=False, total_timesteps=256, run_dir=str(tmp_path / "b"),
                          **FAST)  # fmt: skip
    assert agent.model.value(torch.zeros(1, 4)).shape == (1,)  # a batch of one stays a batch
    assert agent.predict(OBS[0], deterministic=True) in (0, 1)


class WideCritic(Agent):
    def __init__(self, envs):
        super().__init__(envs)
        self.critic = nn.Sequential(nn.Linear(4, 2))


class WrongActor(Agent):
    def __init__(self, envs):
        super().__init__(envs)
        self.actor = nn.Sequential(nn.Linear(4, 5))


class NoCritic(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.actor = nn.Linear(4, 2)


class ExtraWeights(Agent):
    def __init__(self, envs):
        super().__init__(envs)
        self.body = nn.Linear(4, 4)


class Shared(nn.Module):
    def __init__(self, envs):
        super().__init__()
        body = nn.Linear(4, 8)
        self.actor, self.critic = nn.Sequential(body, nn.Linear(8, 2)), nn.Sequential(body, nn.Linear(8, 1))


@pytest.mark.parametrize(
    "cls, settings, message",
    [
        (WideCritic, {}, r"^actor_critic .*:WideCritic: its critic returned shape \(2, 2\) for a batch of 2 "
                         r"observations; it must return \(2, 1\) or \(2,\)$"),
        (WrongActor, {}, r"its actor returned shape \(2, 5\) .* it must return \(2, 2\) \(one logit per action\)$"),
        (NoCritic, {}, r"NoCritic has no critic module \(got NoneType\): as the PPO tutorial's Agent, its __init__ "
                       r"sets self.actor"),
        (ExtraWeights, {}, r"has weights outside its actor and critic \(body.weight, body.bias\)"),
        (Shared, {}, r"its actor and critic share weights"),
        (Agent, {"env_id": "Pendulum-v1"}, r"^actor_critic tests.fixtures.student_agent:Agent\(EnvSpaces\) failed "
                                           r"\(AttributeError: 'Box' object has no attribute 'n'\)"),
        (Agent, {"hidden_sizes": (32,)}, r"^--actor-critic gives the whole actor and critic, so --hidden-sizes"),
        (Agent, {"recurrent": "lstm"}, r"^--actor-critic takes a separate actor and critic on the observations, "
                                       r"without an LSTM \(--recurrent\)"),
        (Agent, {"shared_network": True}, r"without a shared trunk \(--shared-network\)"),
        (Agent, {"encoder": "nature-cnn"}, r"so --encoder nature-cnn would be ignored"),
        (Agent, {"env_id": "proxima/ProbeCoordination-v0", "algo": "mappo"}, r"without a centralized critic"),
        (Agent, {"env_id": "proxima/ProbeCoordination-v0", "algo": "ippo"}, r"trains one agent per env; this env "
                                                                            r"has several agents"),
        (Agent, {"env_id": "tests.fixtures.space_envs:DictObs-v0"}, r"takes Box observations, flattened into a "
                                                                   r"vector; this env's go through the multi-input"),
        (int, {}, r"^actor_critic must be an nn.Module class with actor and critic attributes, or its "
                  r"module:ClassName, got <class 'int'>$"),
    ],
)  # fmt: skip
def test_what_it_cannot_be_is_refused_in_one_line(cls, settings, message, tmp_path):
    with pytest.raises(UserError, match=message) as e:
        proxima.train(**{**FAST, "total_timesteps": 128, "run_dir": str(tmp_path / "run"), **settings},
                      actor_critic=cls)  # fmt: skip
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


def _as_another_process(monkeypatch):
    """This process forgets the names the user gave it, as a new one would start."""
    monkeypatch.setattr(trust, "_GIVEN", {setting: set() for setting in trust.SETTINGS})


def test_the_command_line_trains_it_and_a_copy_of_the_run_needs_it_named_again(tmp_path, monkeypatch, capsys):
    run = str(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": ROOT}
    argv = [sys.executable, "-m", "proxima", "train", "--actor-critic", PATH, "--env-id", "CartPole-v1",
            "--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64", "--run-dir", run, "--quiet",
            "--no-plot", "--no-report"]  # fmt: skip
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    refused = subprocess.run([sys.executable, "-m", "proxima", "eval", run, "--episodes", "1"], env=env,
                             cwd=str(tmp_path), capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    module = "the module 'tests.fixtures.student_agent'"
    assert f"names the actor-critic class {PATH!r}, which would import {module}" in refused.stderr
    assert "name it yourself with --actor-critic MODULE:CLASS (Python: `actor_critic=...`)" in refused.stderr
    _as_another_process(monkeypatch)  # the rest in this process, as new ones
    with pytest.raises(UserError, match=f"names the actor-critic class '{PATH}'"):
        proxima.load(run)
    assert main(["train", "--resume", run, "--total-timesteps", "384"]) == 2
    assert "--actor-critic MODULE:CLASS" in capsys.readouterr().err
    assert (
        main(["train", "--resume", run, "--total-timesteps", "384", "--actor-critic", PATH, "--quiet"]) == 0
    )
    _as_another_process(monkeypatch)
    assert main(["eval", run, "--episodes", "1", "--actor-critic", PATH]) == 0
    assert "episodes=1" in capsys.readouterr().out
    assert proxima.load(run, actor_critic=Agent).model.spec.network.actor_critic == PATH


def test_a_class_no_other_process_can_import_trains_warns_and_is_refused_there(monkeypatch, tmp_path):
    from proxima.policy import encoders

    class Local(Agent):  # as a class in the script run as __main__: its path leads nowhere
        pass

    agent = proxima.train(actor_critic=Local, total_timesteps=128, run_dir=str(tmp_path / "run"), **FAST)
    path = agent.model.spec.network.actor_critic
    assert encoders.encoder_note(path, "actor_critic")[0].startswith(
        f"note: the actor_critic {path} cannot be"
    )
    assert type(proxima.load(str(tmp_path / "run")).model) is UserActorCritic  # this process still has it
    monkeypatch.setattr(encoders, "_UNIMPORTABLE", {})  # as another process, which never saw the class
    with pytest.raises(UserError, match=r"^actor_critic .*<locals>.Local was defined in the script run as __main__ "
                                        r"or inside a function, so no other process can import it: move the class "
                                        r".*\"network\" -> \"network\" -> \"actor_critic\""):  # fmt: skip
        proxima.load(str(tmp_path / "run"))
