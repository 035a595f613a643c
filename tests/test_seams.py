"""The seams new kinds of env, observation and algorithm plug into: each is an addition in one place."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.algo.algorithms import ALGORITHMS
from proxima.base.errors import UserError
from proxima.base.spaces import ObsLayout
from proxima.envs import make_vec_env, register_backend
from proxima.envs.native import CartPole
from proxima.policy.encoders import ENCODERS, FlattenEncoder, encoder_for


class CountingCartPole(CartPole):
    """A backend's envs written outside proxima: native CartPole that counts its steps."""

    steps = 0

    def step(self, actions):
        CountingCartPole.steps += self.num_envs
        return super().step(actions)


def make_counting(env_id, num_envs, *, seed=None, device="cpu", **unused):
    return CountingCartPole(num_envs, seed=seed, device=device)


def test_a_backend_registered_from_outside_the_package_trains(tmp_path):
    register_backend("counting", make_counting, handles={"CountingCartPole-v0"})
    CountingCartPole.steps = 0
    agent = proxima.train(
        env_id="CountingCartPole-v0", env_backend="counting", total_timesteps=1024, run_dir=str(tmp_path / "a"),
        plot=False, quiet=True,
    )  # fmt: skip
    assert CountingCartPole.steps == 1024 and agent.env_id == "CountingCartPole-v0"
    # `auto` picks it too, for the ids it handles; other ids go elsewhere
    proxima.train(
        env_id="CountingCartPole-v0", total_timesteps=512, run_dir=str(tmp_path / "b"), plot=False, quiet=True
    )
    assert CountingCartPole.steps == 1024 + 512
    assert type(make_vec_env("CartPole-v1", 2)).__name__ == "CartPole"


def test_unknown_backends_and_ids_a_backend_lacks_are_one_line_errors():
    with pytest.raises(UserError, match="unknown env backend 'nope'; accepted: auto, gymnasium, ale, native"):
        make_vec_env("CartPole-v1", 2, backend="nope")
    with pytest.raises(UserError, match="unknown env backend"):
        proxima.PPOArgs.of(env_backend="nope").validate()
    with pytest.raises(UserError, match="the native backend cannot do --async-envs"):
        make_vec_env("CartPole-v1", 2, backend="native", asynchronous=True)
    # only the backends that run the id are named (not pettingzoo's or vmas's)
    with pytest.raises(UserError, match="cannot do --env-kwargs; it needs the gymnasium backend$"):
        make_vec_env("CartPole-v1", 2, backend="native", env_kwargs={"sutton_barto_reward": True})


def test_auto_never_passes_an_exclusive_backends_id_on_and_refuses_what_it_lacks_by_name(monkeypatch):
    from proxima.envs import registry

    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))  # the test's backend stays here
    register_backend("mine", make_counting, handles=lambda env_id: env_id.startswith("mine:"),
                     features=("env_kwargs",), exclusive=True, instead={"asynchronous": "try --other"})  # fmt: skip
    assert registry.resolve_backend("mine:pole", env_kwargs=True) == "mine"
    # gymnasium, which does all three, handles every id too, but cannot run mine: ids
    with pytest.raises(UserError) as error:
        registry.resolve_backend("mine:pole", asynchronous=True, video=True)
    assert str(error.value) == (
        "the mine backend cannot do --async-envs, and it is the only one that runs 'mine:pole'; drop --async-envs, "
        "or try --other"
    )
    with pytest.raises(UserError) as error:
        make_vec_env("mine:pole", 2, video_dir="videos")
    assert str(error.value) == (
        "the mine backend cannot do --capture-video, and it is the only one that runs 'mine:pole'; drop "
        "--capture-video"
    )
    # a backend that is not exclusive still hands what it cannot do to one that can run the id
    assert registry.resolve_backend("CartPole-v1", asynchronous=True) == "gymnasium"
    with pytest.raises(ValueError, match="unknown backend features"):
        register_backend("bad", make_counting, instead={"processes": "no"})


class _Uint8Env(gym.Env):
    """CartPole-sized observations quantized to bytes, as a camera or a board game gives them."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, shape=(4,), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.integers(0, 256, 4, dtype=np.uint8), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.integers(0, 256, 4, dtype=np.uint8)
        return obs, float(obs[int(action)] > 127), False, self.t >= 20, {}


if "Uint8Obs-v0" not in gym.registry:
    gym.register("Uint8Obs-v0", entry_point=_Uint8Env)


def test_the_buffer_keeps_the_observation_spaces_dtype_until_the_encoder(tmp_path):
    seen = []

    class Spy(proxima.run.callbacks.Callback):
        def on_update_end(self, run, result):
            seen.append(run.collector.buffer.obs.dtype)

    agent = proxima.train(
        env_id="Uint8Obs-v0",
        total_timesteps=512,
        run_dir=str(tmp_path / "u8"),
        plot=False,
        quiet=True,
        callbacks=[Spy()],
    )
    assert seen == [torch.uint8]
    obs = np.array([0, 255, 3, 200], dtype=np.uint8)
    assert agent.predict(obs, deterministic=True) in (0, 1)
    loaded = proxima.load(str(tmp_path / "u8"))
    assert loaded.observation_space.dtype == np.uint8 and loaded.model.spec.network.encoder == "flatten-mlp"
    assert loaded.predict(obs, deterministic=True) == agent.predict(obs, deterministic=True)
    # with observation normalization the buffer holds the normalized floats
    proxima.train(
        env_id="Uint8Obs-v0", total_timesteps=512, run_dir=str(tmp_path / "n"), plot=False, quiet=True, norm_obs=True,
        callbacks=[Spy()],
    )  # fmt: skip
    assert seen[-1] == torch.float32


def test_the_encoder_comes_from_the_observation_space():
    assert encoder_for(ObsLayout(gym.spaces.Box(-1, 1, (3,)))) == "flatten-mlp"
    assert (
        encoder_for(ObsLayout(gym.spaces.Box(0, 1, (5, 5), dtype=np.float32))) == "flatten-mlp"
    )  # flattened
    assert encoder_for(ObsLayout(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))) == "multi-input"
    with pytest.raises(
        UserError, match=r"observation space Text\(.*\) is not supported; proxima accepts Box"
    ):
        ObsLayout(gym.spaces.Text(5))
    encoder = FlattenEncoder((3,))
    x = torch.tensor([[1, 2, 3]], dtype=torch.uint8)
    assert encoder.features_dim == 3 and encoder(x).dtype == torch.float32
    flat = torch.randn(5, 3)
    assert encoder(flat) is flat  # classic control pays nothing for the seam


class HalvedEncoder(torch.nn.Module):
    """An encoder written outside proxima, as docs/ARCHITECTURE.md shows: its class takes the layout alone."""

    def __init__(self, layout):
        super().__init__()
        self.features_dim = int(np.prod(layout.shape))

    def forward(self, obs):
        return obs.flatten(1).to(torch.float32) / 2


def test_an_encoder_registered_from_outside_the_package_trains(monkeypatch, tmp_path):
    from proxima.policy.encoders import EncoderType, register_encoder

    monkeypatch.setitem(ENCODERS, "halved", None)  # removed again after the test
    register_encoder(EncoderType("halved", HalvedEncoder, supports=lambda layout: True, accepts="anything"))
    # auto keeps the built-in for a Box vector; --encoder picks the registered one by its name
    assert encoder_for(ObsLayout(gym.spaces.Box(-1, 1, (4,)))) == "flatten-mlp"
    agent = proxima.train(total_timesteps=512, run_dir=str(tmp_path / "run"), plot=False, quiet=True,
                          precision="auto", encoder="halved")  # fmt: skip
    assert agent.model.spec.network.encoder == "halved" and isinstance(agent.model.encoder, HalvedEncoder)
    assert agent.model.spec.network.precision == "float32"  # auto: no CNN, no bf16
    assert proxima.load(str(tmp_path / "run")).model.spec.network.encoder == "halved"


def test_each_algorithm_is_one_row_of_the_table():
    assert set(ALGORITHMS) == {"ppo", "vpg", "reinforce", "ippo", "mappo"}
    assert [a.has_critic for a in ALGORITHMS.values()] == [True, True, False, True, True]
    assert proxima.run.config.resolve_args(algo="mappo").network.centralized_critic
    assert (
        proxima.run.config.resolve_args(algo="vpg").algorithm.update_epochs
        == ALGORITHMS["vpg"].defaults["update_epochs"]
        == 1
    )


def test_every_setting_has_one_flat_name_and_reaches_its_group():
    from proxima.run.config import GROUP_OF, GROUPS

    grouped = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(grouped) == len(set(grouped)) == len(GROUP_OF)  # a flag, keyword or preset key names one field
    assert not set(GROUPS) & set(grouped)  # and never a group
    assert [f.name for f in dataclasses.fields(proxima.PPOArgs)] == list(GROUPS)
    args = proxima.PPOArgs.of(env_id="Acrobot-v1", hidden_sizes=[32], learning_rate=1e-3, seed=4)
    assert (args.env.env_id, args.network.hidden_sizes, args.algorithm.learning_rate, args.run.seed) == (
        "Acrobot-v1", (32,), 1e-3, 4)  # fmt: skip
    assert proxima.PPOArgs.from_json(args.to_json()) == args and args.flat()["hidden_sizes"] == (32,)


def test_a_network_option_reaches_the_network_without_copying():
    """NetworkSpec holds the run's NetworkSettings itself: a new option is one field of NetworkSettings."""
    from proxima.envs import make_vec_env
    from proxima.run.loop import network_spec

    args = proxima.PPOArgs.of(layer_norm=True, critic_activation="relu", lstm_layers=2)
    envs = make_vec_env("CartPole-v1", 2)
    try:
        spec = network_spec(args, envs)
    finally:
        envs.close()
    assert spec.network == dataclasses.replace(args.network, encoder="flatten-mlp")  # auto, made concrete
    assert (spec.logits_dim, spec.obs_shape, spec.has_critic) == (2, (4,), True)
