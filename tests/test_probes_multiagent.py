"""The multi-agent probes (issue 35): their envs' rows, rewards and seeding, what `proxima probe` checks on them,
and the learning tests that train on them.

The learning tests marked ``NEEDS_MULTIAGENT_ALGOS`` train with ``--algo ippo`` and ``--algo mappo``: they are
skipped until the trainer has those algorithms."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima.scale.probe
from proxima.base.errors import UserError
from proxima.envs import make_vec_env, native
from proxima.envs.interface import AgentSpec, agent_spec
from proxima.envs.native import ProbeCentralCritic, ProbeCoordination
from proxima.policy.distributions import CategoricalHead
from proxima.policy.normalization import Normalization
from proxima.run.config import PPOArgs
from proxima.scale.probe import MULTIAGENT_PROBES, PROBE_NAMES, VALUE_LAGS, probes_for, run_probes
from tests.test_probe import _probe


def _has_multiagent_algos() -> bool:
    try:
        PPOArgs.of(algo="mappo").validate()
        PPOArgs.of(algo="ippo").validate()
    except (UserError, TypeError, ValueError):
        return False
    return True


NEEDS_MULTIAGENT_ALGOS = pytest.mark.skipif(
    not _has_multiagent_algos(), reason="the trainer has no --algo ippo / mappo yet"
)
COORDINATION, CENTRAL = "proxima/ProbeCoordination-v0", "proxima/ProbeCentralCritic-v0"


# --- the envs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [COORDINATION, CENTRAL])
def test_a_probe_is_a_multiagent_vecenv_of_two_agents_per_game(env_id):
    envs = make_vec_env(env_id, 3, seed=0)  # auto: the native backend serves them
    assert type(envs).__name__ == env_id.split("/")[1].removesuffix("-v0")
    assert agent_spec(envs) == AgentSpec(("agent_0", "agent_1"), (0, 0), 3)
    assert envs.num_envs == 6
    space = envs.single_observation_space
    assert isinstance(space, gym.spaces.Dict) and list(space.spaces) == ["obs", "agent", "state"]
    assert space["agent"] == gym.spaces.Discrete(2) and space["state"].shape == (2,)
    layout = envs.obs_layout
    assert [(p.path, p.kind, p.offset, p.size) for p in layout.parts] == [
        (("obs",), "box", 0, 1),
        (("agent",), "discrete", 1, 1),
        (("state",), "box", 2, 2),
    ]
    obs = envs.reset()
    assert obs.shape == (6, 4) and obs.dtype == torch.float32
    for row in range(6):  # each packed row is ObsLayout's packing of that agent's Dict observation
        game, agent = divmod(row, 2)
        state = obs[2 * game : 2 * game + 2, 0].numpy()
        expected = {"obs": state[agent : agent + 1], "agent": agent, "state": state}
        assert np.array_equal(layout.pack(expected), obs[row].numpy())


def test_coordination_pays_both_agents_one_only_for_the_same_action():
    envs = ProbeCoordination(4, seed=0)
    obs = envs.reset()
    assert torch.equal(obs[:, [0, 2, 3]], torch.zeros(8, 3))  # nothing to observe but the agent's index
    assert obs[:, 1].tolist() == [0, 1] * 4
    step = envs.step(torch.tensor([0, 0, 0, 1, 1, 0, 1, 1]))  # games: same, differ, differ, same
    assert step.reward.tolist() == [1, 1, 0, 0, 0, 0, 1, 1]
    assert step.terminated.all() and not step.truncated.any() and step.alive is None
    assert torch.equal(step.final_obs, obs) and torch.equal(step.obs, obs)


def test_central_critic_pays_both_agents_the_sum_of_the_two_bits_each_sees_its_own():
    envs = ProbeCentralCritic(2000, seed=3)
    obs = envs.reset()
    bits = obs[:, 0].reshape(2000, 2)
    assert torch.equal(obs[:, 2:].reshape(2000, 2, 2)[:, 0], bits)  # the state: both bits, for both rows
    assert torch.equal(obs[:, 2:].reshape(2000, 2, 2)[:, 1], bits)
    games = torch.bincount((2 * bits[:, 0] + bits[:, 1]).long(), minlength=4) / 2000
    assert ((games - 0.25).abs() < 0.04).all(), games  # the four kinds of game, equally likely
    step = envs.step(torch.zeros(4000, dtype=torch.long))
    assert torch.equal(step.reward, bits.sum(dim=1).repeat_interleave(2))
    assert torch.equal(step.final_obs, obs)  # the observation the reward was paid for
    assert step.terminated.all() and not step.truncated.any()
    assert not torch.equal(step.obs, obs)  # the next games drew new bits
    # An agent's own bit says nothing of the other's: the reward's mean given one bit is that bit + 0.5.
    own, reward = obs[:, 0], step.reward
    for bit in (0.0, 1.0):
        assert abs(float(reward[own == bit].mean()) - (bit + 0.5)) < 0.05


def test_a_game_draws_from_its_own_seeded_stream_and_resumes_exactly():
    def bits(envs, steps):
        out = [envs.reset(seed=7)[:, 0]]
        out += [envs.step(torch.zeros(envs.num_envs, dtype=torch.long)).obs[:, 0] for _ in range(steps)]
        return torch.stack(out)

    alone, beside = bits(ProbeCentralCritic(1), 5), bits(ProbeCentralCritic(4), 5)
    assert torch.equal(alone, beside[:, :2])  # game 0's episodes whatever runs beside it
    assert not torch.equal(beside[:, :2], beside[:, 2:4])
    envs = ProbeCentralCritic(4)
    envs.reset(seed=7)
    envs.step(torch.zeros(8, dtype=torch.long))
    saved = {k: v.clone() for k, v in envs.state_dict().items()}
    later = [envs.step(torch.zeros(8, dtype=torch.long)).obs for _ in range(3)]
    other = ProbeCentralCritic(4, seed=99)
    other.reset()
    other.load_state_dict(saved)
    assert all(torch.equal(other.step(torch.zeros(8, dtype=torch.long)).obs, x) for x in later)


def test_the_probes_have_no_env_objects_to_call():
    with pytest.raises(UserError, match="no per-env objects"):
        ProbeCoordination(1).call("render")


# --- what `proxima probe` checks --------------------------------------------------------------------------------


class StubAgent:
    """A model whose answers are set by hand: V(row) = value(row), pi(. | row) = probs(row)."""

    lstm = None
    critic = object()
    head = CategoricalHead(2)

    def __init__(self, value, probs=None):
        self.normalization = Normalization((4,))  # off: the checks' rows reach the model as they are
        self._value, self._probs = value, probs

    def value(self, x):
        return self._value(x)

    def logits(self, x):
        return self._probs(x).log() if self._probs is not None else torch.zeros(x.shape[0], 1)


def _args():
    return PPOArgs.of(total_timesteps=512).validate()


def _check(name, model, centralized, monkeypatch):
    monkeypatch.setattr(proxima.scale.probe, "_centralized_critic", lambda args: centralized)
    probe = next(p for p in MULTIAGENT_PROBES if p.name == name)
    return probe.check(model, _args())


STATE_SUM = lambda x: x[:, 2:].sum(dim=1)  # noqa: E731  (what a critic that reads the state learns)
OWN_VIEW = lambda x: x[:, 0] + 0.5  # noqa: E731  (what a critic that reads only its agent's bit learns)


def test_the_central_critic_check_wants_the_states_value_from_mappo_and_the_mean_from_ippo(monkeypatch):
    assert _check("central-critic", StubAgent(STATE_SUM), True, monkeypatch)[2] is True
    assert (
        _check("central-critic", StubAgent(OWN_VIEW), True, monkeypatch)[2] is False
    )  # MAPPO blind to the state
    assert _check("central-critic", StubAgent(OWN_VIEW), False, monkeypatch)[2] is True
    assert (
        _check("central-critic", StubAgent(STATE_SUM), False, monkeypatch)[2] is False
    )  # the state leaks into IPPO
    expected, learned, _, _ = _check("central-critic", StubAgent(OWN_VIEW), True, monkeypatch)
    assert "0, 1, 1, 2" in expected and "squared error 0.2500" in learned
    off = StubAgent(lambda x: STATE_SUM(x) + 0.06)  # just out of tolerance
    assert _check("central-critic", off, True, monkeypatch)[2] is False
    off = StubAgent(lambda x: STATE_SUM(x) + 0.04)
    assert _check("central-critic", off, True, monkeypatch)[2] is True


def _policy(p0_agent0, p0_agent1):
    def probs(x):
        p0 = torch.where(x[:, 1] == 0, p0_agent0, p0_agent1)
        return torch.stack((p0, 1 - p0), dim=1)

    return probs


@pytest.mark.parametrize("centralized", [True, False])
def test_the_coordination_check_wants_both_agents_on_one_action(centralized, monkeypatch):
    one = lambda x: torch.ones(x.shape[0])  # noqa: E731
    agreed = StubAgent(one, _policy(0.995, 0.995))
    assert _check("coordination", agreed, centralized, monkeypatch)[2] is True
    assert _check("coordination", StubAgent(one, _policy(0.005, 0.005)), centralized, monkeypatch)[2] is True
    # Each agent sure of its action, but not the same one; or neither sure of anything.
    assert _check("coordination", StubAgent(one, _policy(0.995, 0.005)), centralized, monkeypatch)[2] is False
    assert _check("coordination", StubAgent(one, _policy(0.5, 0.5)), centralized, monkeypatch)[2] is False
    wrong_value = StubAgent(lambda x: torch.full((x.shape[0],), 0.5), _policy(0.995, 0.995))
    assert _check("coordination", wrong_value, centralized, monkeypatch)[2:] == (False, VALUE_LAGS)  # agreed
    both_wrong = StubAgent(lambda x: torch.full((x.shape[0],), 0.5), _policy(0.5, 0.5))
    assert _check("coordination", both_wrong, centralized, monkeypatch)[2:] == (
        False,
        None,
    )  # the probe's own


def test_proxima_probe_names_and_chooses_the_multiagent_probes():
    assert {"coordination", "central-critic"} <= set(PROBE_NAMES)
    args = PPOArgs.of(env_id=COORDINATION).validate()
    assert probes_for(args) == MULTIAGENT_PROBES  # a multi-agent env
    assert "coordination" not in [p.name for p in probes_for(PPOArgs.of().validate())]


def test_the_multiagent_probes_run_on_the_native_backend_whatever_the_agents_backend(monkeypatch):
    class Trained(Exception):
        pass

    def train(args):
        raise Trained(args.env.env_backend)

    monkeypatch.setattr("proxima.scale.trainer.train", train)
    with pytest.raises(Trained, match="^native$"):
        run_probes(PPOArgs.of(env_backend="gymnasium", quiet=True).validate(), names=["coordination"])


# --- learning: the probes solved --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_default_agent_solves_coordination(capsys):
    code, out, rows = _probe(capsys, "--probes", "coordination")
    assert code == 0 and "│ pass" in rows["coordination"], out


class BlindCentralCritic(ProbeCentralCritic):
    """The central-critic probe with the state zeroed: whatever reads the state learns nothing from it."""

    def observe(self, own):
        rows = super().observe(own)
        rows[:, 2:] = 0
        return rows


@pytest.mark.slow
def test_a_critic_blind_to_the_state_fails_the_mappo_check_and_passes_the_ippo_one(capsys, monkeypatch):
    monkeypatch.setitem(native.NATIVE_ENVS, CENTRAL, BlindCentralCritic)
    monkeypatch.setattr(proxima.scale.probe, "_centralized_critic", lambda args: True)
    code, out, rows = _probe(capsys, "--probes", "central-critic")
    assert code == 1 and "│ FAIL" in rows["central-critic"], out
    assert "first failure: probe central-critic, which points to the critic's input" in out.replace("\n", " ")
    monkeypatch.setattr(proxima.scale.probe, "_centralized_critic", lambda args: False)
    code, out, rows = _probe(capsys, "--probes", "central-critic")
    assert code == 0 and "│ pass" in rows["central-critic"], out


@NEEDS_MULTIAGENT_ALGOS
@pytest.mark.slow
@pytest.mark.parametrize(
    "flags", [["--algo", "ippo"], ["--algo", "mappo"], ["--algo", "mappo", "--no-critic-agent-index"]]
)
def test_ippo_and_mappo_pass_both_multiagent_probes(capsys, flags):
    # both probes pay a game's agents alike: a value per game (--no-critic-agent-index) can be exact
    code, out, rows = _probe(capsys, *flags)  # no --probes: the multi-agent ones are chosen
    assert code == 0, out
    assert set(rows) == {"coordination", "central-critic"}, out
    assert all("│ pass" in row for row in rows.values()), out


@NEEDS_MULTIAGENT_ALGOS
@pytest.mark.slow
@pytest.mark.parametrize(("trained", "checked_as"), [("ippo", True), ("mappo", False)])
def test_the_central_critic_probe_tells_ippos_critic_from_mappos(capsys, monkeypatch, trained, checked_as):
    """IPPO's critic, checked as MAPPO's, lacks the state; MAPPO's, checked as IPPO's, has what IPPO's must not."""
    monkeypatch.setattr(proxima.scale.probe, "_centralized_critic", lambda args: checked_as)
    code, out, rows = _probe(capsys, "--algo", trained, "--probes", "central-critic")
    assert code == 1 and "│ FAIL" in rows["central-critic"], out
