"""Your network: an encoder by name or by class, layer norm, and any torch.nn activation (docs/NETWORKS.md)."""

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import proxima
from proxima.base.errors import UserError
from proxima.commands.common import parse_train_args
from proxima.policy import encoders
from proxima.policy.distributions import make_head
from proxima.policy.encoders import ENCODERS, EncoderType, class_path, encoder_note, register_encoder
from proxima.policy.networks import ACTIVATIONS, ActorCritic, NetworkSettings, NetworkSpec, hidden_gain
from proxima.run.callbacks import Callback
from tests.fixtures.user_encoders import NoFeatures, TinyCNN, VectorEncoder

FAST = dict(num_envs=2, num_steps=64, plot=False, report=False, quiet=True)


class EncoderAtStart(Callback):
    """The encoder's parameters before the first update, and whether the optimizer holds every one of them."""

    def on_train_start(self, run):
        self.before = {k: v.clone() for k, v in run.model.encoder.state_dict().items()}
        held = {id(p) for group in run.optimizer.param_groups for p in group["params"]}
        self.optimized = all(id(p) in held for p in run.model.encoder.parameters())


def _trains_through(encoder_cls, env_id, run_dir, obs):
    start = EncoderAtStart()
    agent = proxima.train(env_id=env_id, encoder=encoder_cls, total_timesteps=512, run_dir=str(run_dir),
                          callbacks=[start], **FAST)  # fmt: skip
    path = f"tests.fixtures.user_encoders:{encoder_cls.__name__}"
    assert isinstance(agent.model.encoder, encoder_cls) and start.optimized and start.before
    after = agent.model.encoder.state_dict()
    assert set(after) == set(start.before)
    for name, value in after.items():  # every weight and bias of the encoder moved: the updates reached it
        assert not torch.equal(value, start.before[name]), name
    assert json.loads((run_dir / "config.json").read_text())["network"]["encoder"] == path
    assert json.loads((run_dir / "agent.json").read_text())["network"]["network"]["encoder"] == path
    loaded = proxima.load(str(run_dir))
    assert type(loaded.model.encoder) is encoder_cls
    for name, value in loaded.model.encoder.state_dict().items():
        torch.testing.assert_close(value, after[name], rtol=0, atol=0)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True), agent.predict(obs, deterministic=True)
    )
    return agent


def test_a_users_encoder_class_learns_on_box_vectors_and_comes_back_with_the_agent(tmp_path):
    obs = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    _trains_through(VectorEncoder, "CartPole-v1", tmp_path / "run", obs)


def test_a_users_encoder_class_learns_on_pixels_and_gets_the_precision(tmp_path):
    obs = np.random.default_rng(0).integers(0, 256, size=(20, 1, 36, 36), dtype=np.uint8)
    agent = _trains_through(TinyCNN, "proxima/ProbeImagePolicy-v0", tmp_path / "run", obs)
    assert agent.model.encoder.precision == "float32"


def test_the_command_line_takes_an_encoder_class_by_its_import_path(tmp_path):
    args = parse_train_args(["--encoder", "tests.fixtures.user_encoders:VectorEncoder", "--total-timesteps", "128",
                             "--num-envs", "2", "--num-steps", "64", "--run-dir", str(tmp_path / "run"),
                             "--quiet", "--no-plot", "--no-report"])  # fmt: skip
    agent = proxima.train(args)
    assert isinstance(agent.model.encoder, VectorEncoder)


class Doubled(nn.Module):
    def __init__(self, layout):
        super().__init__()
        self.features_dim = int(np.prod(layout.shape))

    def forward(self, obs):
        return obs.flatten(1).to(torch.float32) * 2


@pytest.fixture
def doubled(monkeypatch):
    monkeypatch.setitem(ENCODERS, "doubled", None)  # removed again after the test
    register_encoder(
        EncoderType("doubled", Doubled, supports=lambda layout: not layout.packed, accepts="Boxes")
    )
    return "doubled"


def test_a_registered_encoder_is_chosen_by_name_from_python_and_the_command_line(doubled, tmp_path):
    assert parse_train_args(["--encoder", doubled]).network.encoder == "doubled"
    assert parse_train_args([]).network.encoder == "auto"
    agent = proxima.train(encoder="doubled", total_timesteps=128, run_dir=str(tmp_path / "a"), **FAST)
    assert isinstance(agent.model.encoder, Doubled) and agent.model.spec.network.encoder == "doubled"
    args = parse_train_args(["--encoder", "doubled", "--total-timesteps", "128", "--num-envs", "2", "--num-steps",
                             "64", "--run-dir", str(tmp_path / "b"), "--quiet", "--no-plot", "--no-report"])  # fmt: skip
    assert isinstance(proxima.train(args).model.encoder, Doubled)
    # auto keeps the built-in, registered first
    auto = proxima.train(total_timesteps=128, run_dir=str(tmp_path / "c"), **FAST)
    assert auto.model.spec.network.encoder == "flatten-mlp"
    assert json.loads((tmp_path / "c" / "config.json").read_text())["network"]["encoder"] == "auto"


def test_an_encoder_that_is_not_there_or_does_not_fit_is_one_line(doubled, tmp_path):
    with pytest.raises(UserError, match=r"^unknown encoder 'nope'; accepted: auto, flatten-mlp, nature-cnn, "
                                        r"multi-input, board-cnn, drop-columns, doubled \(register_encoder adds one\)") as e:  # fmt: skip
        proxima.train(encoder="nope", total_timesteps=128, run_dir=str(tmp_path / "a"), **FAST)
    assert "\n" not in str(e.value) and not (tmp_path / "a").exists()
    with pytest.raises(UserError, match=r"^encoder 'nature-cnn' does not support Box\(4,\) float32 observations "
                                        r"\(it takes images .*\); accepted for this env: auto, flatten-mlp, doubled$"):  # fmt: skip
        proxima.train(encoder="nature-cnn", total_timesteps=128, run_dir=str(tmp_path / "b"), **FAST)
    with pytest.raises(UserError, match=r"^encoder 'doubled' does not support Dict observations .* accepted for "
                                        r"this env: auto, multi-input$"):  # fmt: skip
        proxima.train(env_id="tests.fixtures.space_envs:DictObs-v0", encoder="doubled", total_timesteps=128,
                      run_dir=str(tmp_path / "c"), **FAST)  # fmt: skip
    with pytest.raises(
        UserError, match=r"^encoder tests.fixtures.user_encoders:NoFeatures has no features_dim"
    ):
        proxima.train(encoder=NoFeatures, total_timesteps=128, run_dir=str(tmp_path / "d"), **FAST)
    with pytest.raises(
        UserError, match=r"^encoder must be an nn.Module class or an encoder's name, got <class 'int'>"
    ):
        proxima.train(encoder=int, total_timesteps=128, run_dir=str(tmp_path / "e"), **FAST)
    with pytest.raises(
        UserError, match=r"^encoder must be auto, .* or an nn.Module class, got VectorEncoder\("
    ):
        proxima.train(encoder=VectorEncoder(gym.spaces.Box(-1, 1, (4,))), total_timesteps=128, **FAST)
    with pytest.raises(
        UserError, match=r"module 'tests.fixtures.user_encoders' has no nn.Module class 'Nope'"
    ):
        proxima.train(encoder="tests.fixtures.user_encoders:Nope", total_timesteps=128, **FAST)


def test_an_agent_whose_encoder_module_is_missing_says_which_and_how_to_fix_it(tmp_path):
    run_dir = tmp_path / "run"
    proxima.train(encoder=VectorEncoder, total_timesteps=128, run_dir=str(run_dir), **FAST)
    meta = json.loads((run_dir / "agent.json").read_text())
    meta["network"]["network"]["encoder"] = "my_lab.encoders:VectorEncoder"
    (run_dir / "agent.json").write_text(json.dumps(meta))
    with pytest.raises(
        UserError, match="names the encoder 'my_lab.encoders:VectorEncoder', which would import"
    ):
        proxima.load(str(run_dir))  # a run's files name no code that is imported (docs/SECURITY.md)
    with pytest.raises(UserError) as e:
        proxima.load(str(run_dir), trust_code=True)
    assert str(e.value) == (
        "encoder my_lab.encoders:VectorEncoder: module 'my_lab.encoders' cannot be imported; put the directory "
        "that holds it on PYTHONPATH (PYTHONPATH=DIR proxima ...) or install the package that has it"
    )
    assert proxima.commands.main(["eval", str(run_dir), "--episodes", "1"]) == 2


def test_a_class_no_other_process_can_import_trains_warns_and_is_refused_there(monkeypatch, tmp_path):
    class Local(VectorEncoder):  # as a class in the script run as __main__: its path leads nowhere
        pass

    path = class_path(Local)
    assert (
        path
        == f"{__name__}:test_a_class_no_other_process_can_import_trains_warns_and_is_refused_there.<locals>.Local"
    )
    assert encoder_note(path)[0].startswith(f"note: the encoder {path} cannot be imported by its path")
    assert encoder_note("tests.fixtures.user_encoders:VectorEncoder") == []
    agent = proxima.train(encoder=Local, total_timesteps=128, run_dir=str(tmp_path / "run"), **FAST)
    assert type(proxima.load(str(tmp_path / "run")).model.encoder) is Local  # this process still has it
    monkeypatch.setattr(encoders, "_UNIMPORTABLE", {})  # as another process, which never saw the class
    with pytest.raises(UserError, match=r"^encoder .*<locals>.Local was defined in the script run as __main__ or "
                                        r"inside a function, so no other process can import it: move the class"):  # fmt: skip
        proxima.load(str(tmp_path / "run"))
    assert isinstance(agent.model.encoder, Local)


def _model(**spec) -> ActorCritic:
    spec = NetworkSpec(logits_dim=2, obs_shape=(4,), network=NetworkSettings(norm_value=False, **spec))
    return ActorCritic(spec, make_head(gym.spaces.Discrete(2)))


@pytest.mark.parametrize("shared", [False, True])
def test_init_torch_leaves_every_linear_layer_as_nn_linear_starts_it(shared, tmp_path):
    torch.manual_seed(0)
    model = _model(init="torch", shared_network=shared)
    torch.manual_seed(0)  # the same draws, in the order the model makes its layers
    sizes = [(4, 64), (64, 64)] if shared else [(4, 64), (64, 64), (64, 2), (4, 64), (64, 64), (64, 1)]
    expected = [nn.Linear(a, b) for a, b in sizes] + ([nn.Linear(64, 2), nn.Linear(64, 1)] if shared else [])
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert len(layers) == len(expected)
    for layer, want in zip(layers, expected, strict=True):
        torch.testing.assert_close(layer.weight, want.weight, rtol=0, atol=0)
        torch.testing.assert_close(layer.bias, want.bias, rtol=0, atol=0)
    # the default is detail 2's: orthogonal, scaled by sqrt(2) (0.01 for the actor's output), zero biases
    ortho = _model(shared_network=shared)
    first, out = ortho.trunk[0] if shared else ortho.actor[0], ortho.actor if shared else ortho.actor[-1]
    torch.testing.assert_close(torch.linalg.svdvals(first.weight), torch.full((4,), math.sqrt(2)))
    torch.testing.assert_close(torch.linalg.svdvals(out.weight), torch.full((2,), 0.01))
    assert not first.bias.any() and not out.bias.any()
    agent = proxima.train(init="torch", total_timesteps=256, run_dir=str(tmp_path / "run"), **FAST)
    assert proxima.load(str(tmp_path / "run")).model.spec.network.init == "torch"
    assert (
        parse_train_args(["--init", "torch"]).network.init == "torch"
        and agent.model.spec.network.init == "torch"
    )
    with pytest.raises(UserError, match="init must be orthogonal or torch, got 'xavier'"):
        NetworkSettings(init="xavier").validate()


def test_layer_norm_sits_between_each_hidden_layer_and_its_activation_and_draws_nothing(tmp_path):
    torch.manual_seed(0)
    plain = _model()
    torch.manual_seed(0)
    normed = _model(layer_norm=True)
    kinds = [type(m) for m in normed.actor]
    assert kinds == [nn.Linear, nn.LayerNorm, nn.Tanh, nn.Linear, nn.LayerNorm, nn.Tanh, nn.Linear]
    assert [type(m) for m in normed.critic] == kinds
    # the same Linear weights: the LayerNorms consume no random numbers
    linear = {
        k: v for k, v in normed.state_dict().items() if k.endswith((".0.weight", ".3.weight", ".6.weight"))
    }
    renamed = {"actor.0.weight": "actor.0.weight", "actor.3.weight": "actor.2.weight", "actor.6.weight": "actor.4.weight",
               "critic.0.weight": "critic.0.weight", "critic.3.weight": "critic.2.weight",
               "critic.6.weight": "critic.4.weight"}  # fmt: skip
    for k, v in linear.items():
        torch.testing.assert_close(v, plain.state_dict()[renamed[k]], rtol=0, atol=0)
    shared = _model(layer_norm=True, shared_network=True)
    assert [type(m) for m in shared.trunk] == [
        nn.Linear,
        nn.LayerNorm,
        nn.Tanh,
        nn.Linear,
        nn.LayerNorm,
        nn.Tanh,
    ]
    x = torch.randn(5, 4) * 100
    hidden = normed.actor[1](normed.actor[0](x))  # normalized over the 64 units of each row
    torch.testing.assert_close(hidden.mean(1), torch.zeros(5), rtol=0, atol=1e-5)
    assert (
        plain.spec.to_json()["network"]["layer_norm"] is False
        and normed.spec.to_json()["network"]["layer_norm"] is True
    )
    agent = proxima.train(layer_norm=True, total_timesteps=256, run_dir=str(tmp_path / "run"), **FAST)
    assert sum(isinstance(m, nn.LayerNorm) for m in agent.model.modules()) == 4
    loaded = proxima.load(str(tmp_path / "run"))
    assert loaded.model.spec.network.layer_norm and str(loaded.model) == str(agent.model)
    obs = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True), agent.predict(obs, deterministic=True)
    )


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_torch_activation_builds_and_computes(name):
    torch.manual_seed(0)
    model = _model(activation=name, critic_activation=name, hidden_sizes=(8,))
    assert isinstance(model.actor[1], ACTIVATIONS[name]) and isinstance(model.critic[1], ACTIVATIONS[name])
    logits, values = model(torch.randn(3, 4))
    assert logits.shape == (3, 2) and values.shape == (3,) and torch.isfinite(logits).all()
    # orthogonal, scaled by the gain (detail 2 in docs/SEEDS.md)
    scales = torch.linalg.svdvals(model.actor[0].weight)
    torch.testing.assert_close(scales, torch.full_like(scales, hidden_gain(name)))


def test_the_hidden_gains_keep_tanh_and_relu_and_follow_torch_elsewhere():
    assert hidden_gain("tanh") == hidden_gain("relu") == math.sqrt(2)  # detail 2, not torch's 5/3 for tanh
    assert hidden_gain("selu") == 0.75 and hidden_gain("sigmoid") == 1
    assert hidden_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01**2))
    assert hidden_gain("gelu") == hidden_gain("elu") == math.sqrt(2)
    assert isinstance(_model(activation="LeakyReLU").actor[1], nn.LeakyReLU)  # case and underscores aside


def test_an_unknown_activation_is_refused_in_one_line_naming_the_accepted(tmp_path, capsys):
    for flag in ("--activation", "--critic-activation"):
        assert proxima.commands.main(["train", flag, "swish", "--run-dir", str(tmp_path / "cli")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith(
            f"proxima train: error: {flag} 'swish' is not a torch.nn activation; accepted: celu"
        )
        assert not (tmp_path / "cli").exists()
    with pytest.raises(UserError, match=r"^activation 'swish' is not a torch.nn activation; accepted: celu, elu, "
                                        r"gelu, .*leaky_relu, .*, tanh, tanhshrink$"):  # fmt: skip
        proxima.train(activation="swish", total_timesteps=128, **FAST)
    with pytest.raises(UserError, match=r"^critic_activation 'softmax' is not a torch.nn activation"):
        parse_train_args(["--critic-activation", "softmax"]).validate()
    agent = proxima.train(activation="gelu", critic_activation="silu", total_timesteps=128,
                          run_dir=str(tmp_path / "run"), **FAST)  # fmt: skip
    assert isinstance(agent.model.actor[1], nn.GELU) and isinstance(agent.model.critic[1], nn.SiLU)
    assert isinstance(proxima.load(str(tmp_path / "run")).model.critic[1], nn.SiLU)
