import copy
import math
import subprocess
import sys

import gymnasium as gym
import pytest
import torch
from torch.distributions import Categorical

from proxima.algo.optim import make_adam
from proxima.algo.schedules import Schedules
from proxima.algo.storage import minibatches
from proxima.base.errors import UserError
from proxima.policy.distributions import CategoricalHead, make_head
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec, layer_init


def test_categorical_head_matches_torch_distributions():
    torch.manual_seed(0)
    logits, actions = torch.randn(64, 5), torch.randint(0, 5, (64,))
    head = CategoricalHead(5)
    logprob, entropy = head.log_prob_entropy(logits, actions)
    ref = Categorical(logits=logits)
    torch.testing.assert_close(logprob, ref.log_prob(actions))
    torch.testing.assert_close(entropy, ref.entropy())


def test_categorical_head_samples_with_the_right_frequencies():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.7])
    logits = probs.log().expand(200_000, 3)
    head = CategoricalHead(3)
    actions, logprobs = head.sample(logits, head.noise(logits))
    freq = torch.bincount(actions, minlength=3).float() / len(actions)
    torch.testing.assert_close(freq, probs, atol=5e-3, rtol=0)
    torch.testing.assert_close(logprobs, probs.log()[actions])


def test_make_head_rejects_unsupported_spaces():
    for space in (gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), gym.spaces.MultiDiscrete([[2, 3], [4, 5]])):
        with pytest.raises(UserError, match="is not supported; proxima accepts Discrete, MultiDiscrete"):
            make_head(space)


@pytest.mark.parametrize("shape,norm", [((64, 4), math.sqrt(2)), ((64, 64), math.sqrt(2)), ((2, 64), 0.01)])
def test_layer_init_orthogonal_with_norm(shape, norm):
    layer = layer_init(torch.nn.Linear(shape[1], shape[0]), norm)
    w = layer.weight.detach()
    # Orthogonal: the smaller Gram matrix is norm^2 * I (rows have norm `norm` whenever out <= in).
    gram = w @ w.T if shape[0] <= shape[1] else w.T @ w
    torch.testing.assert_close(gram, norm**2 * torch.eye(min(shape)), atol=1e-5, rtol=1e-4)
    assert torch.all(layer.bias == 0)


def test_actor_critic_structure_and_init():
    model = ActorCritic(NetworkSpec(2, (4,), NetworkSettings(norm_value=False)), CategoricalHead(2))
    linears = [m for m in model.actor if isinstance(m, torch.nn.Linear)]
    assert [tuple(m.weight.shape) for m in linears] == [(64, 4), (64, 64), (2, 64)]
    assert isinstance(model.actor[1], torch.nn.Tanh)
    torch.testing.assert_close(linears[-1].weight.norm(dim=1), torch.full((2,), 0.01))
    critic_out = [m for m in model.critic if isinstance(m, torch.nn.Linear)][-1]
    assert critic_out.weight.norm().item() == pytest.approx(1.0, abs=1e-5)
    logits, values = model(torch.randn(7, 4))
    assert logits.shape == (7, 2) and values.shape == (7,)


def test_shared_trunk_option():
    model = ActorCritic(
        NetworkSpec(3, (4,), NetworkSettings(shared_network=True, norm_value=False)), CategoricalHead(3)
    )
    assert isinstance(model.actor, torch.nn.Linear) and isinstance(model.critic, torch.nn.Linear)
    logits, values = model(torch.randn(5, 4))
    assert logits.shape == (5, 3) and values.shape == (5,)


def test_adam_eps_and_linear_schedule_reaches_end_exactly():
    params = [torch.nn.Parameter(torch.zeros(3))]
    opt = make_adam(params, lr=2.5e-4)
    assert opt.param_groups[0]["eps"] == 1e-5
    sched = Schedules(7, {"learning_rate": [2.5e-4, 1e-5, 0]})
    rates = [sched.value("learning_rate", u) for u in range(10)]
    assert rates[0] == 2.5e-4
    assert rates[7] == 1e-5 and rates[9] == 1e-5  # exactly, and it stays there
    assert rates[3] == pytest.approx(2.5e-4 + 3 / 7 * (1e-5 - 2.5e-4))
    assert all(a > b for a, b in zip(rates[:7], rates[1:8], strict=True))


@pytest.mark.parametrize("groups", [1, 2])
def test_adam_steps_bit_for_bit_like_torch_adam_and_saves_the_same_state(groups):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    twin = copy.deepcopy(net)

    def param_groups(model):
        params = list(model.parameters())
        return (
            [{"params": params}]
            if groups == 1
            else [{"params": params[:2]}, {"params": params[2:], "lr": 1e-3}]
        )

    ours = make_adam(param_groups(net), lr=2.5e-4)
    theirs = torch.optim.Adam(param_groups(twin), lr=2.5e-4, eps=1e-5, fused=True)
    for _ in range(6):
        x = torch.randn(16, 3)
        for model, opt in ((net, ours), (twin, theirs)):
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            opt.step()
            opt.param_groups[0]["lr"] *= 0.9  # as a schedule would
    for a, b in zip(net.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)
    mine, torchs = ours.state_dict(), theirs.state_dict()
    assert mine["state"].keys() == torchs["state"].keys()
    for i, state in mine["state"].items():
        assert state.keys() == torchs["state"][i].keys()
        assert all(torch.equal(state[k], torchs["state"][i][k]) for k in state)
    assert [g["params"] for g in mine["param_groups"]] == [g["params"] for g in torchs["param_groups"]]
    assert [g["lr"] for g in mine["param_groups"]] == [g["lr"] for g in torchs["param_groups"]]
    # and a fresh optimizer loaded from it continues identically
    again = make_adam(param_groups(copy.deepcopy(net)), lr=0.0)
    again.load_state_dict(mine)
    assert again.param_groups[0]["lr"] == ours.param_groups[0]["lr"] and again.param_groups[0]["betas"] == (
        0.9,
        0.999,
    )


def test_adam_counts_the_steps_of_each_parameter_as_torch_does_when_some_have_no_gradient():
    """A parameter without a gradient (a layer a minibatch did not use) neither steps nor counts the step, in
    torch's Adam; a group none of whose parameters has one (or an empty group) is left as it is. proxima's Adam
    must keep all that through loads of its state, into the same optimizer mid-run and into a fresh one."""
    torch.manual_seed(0)
    nets = [torch.nn.ModuleList([torch.nn.Linear(3, 2) for _ in range(3)]) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())

    def groups(net):  # the third layer never gets a gradient
        return [{"params": list(net[:2].parameters())}, {"params": list(net[2].parameters())}, {"params": []}]

    ours = make_adam(groups(nets[0]), lr=1e-2)
    theirs = torch.optim.Adam(groups(nets[1]), lr=1e-2, eps=1e-5, fused=True)
    for step in range(9):
        x = torch.randn(8, 3)
        if step == 2:  # loaded into itself, mid-run
            ours.load_state_dict(ours.state_dict())
        if step == 5:  # a fresh optimizer from the saved state goes on as the first would
            saved = ours.state_dict()
            ours = make_adam(groups(nets[0]), lr=1e-2)
            ours.load_state_dict(saved)
        for net, opt in zip(nets, (ours, theirs), strict=True):
            if step == 6:  # the state dropped (as a user may, to restart Adam): the counts start again
                opt.state.clear()
            opt.zero_grad()
            used = net[:2] if step % 3 else net[:1]  # every third step the second layer gets no gradient
            sum(layer(x).pow(2).sum() for layer in used).backward()
            opt.step()
    for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        assert torch.equal(a, b)
    counts = [ours.state_dict()["state"][i]["step"].item() for i in range(4)]
    assert counts == [3, 3, 2, 2] == [theirs.state_dict()["state"][i]["step"].item() for i in range(4)]
    assert 4 not in ours.state_dict()["state"]  # the third layer was never stepped


def test_building_the_optimizer_does_not_import_dynamo():
    """torch.optim optimizers import torch._dynamo when built (a slow import); proxima's must not."""
    code = (
        "import sys, torch; from proxima.algo.optim import make_adam; "
        "p = [torch.nn.Parameter(torch.ones(2))]; o = make_adam(p, 1e-3); "
        "p[0].sum().backward(); o.step(); o.zero_grad(); o.state_dict(); "
        "assert 'torch._dynamo' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_minibatches_use_every_sample_once():
    parts = minibatches(512, 4, torch.Generator())
    assert len(parts) == 4 and all(len(p) == 128 for p in parts)
    assert sorted(torch.cat(parts).tolist()) == list(range(512))
