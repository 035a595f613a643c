"""One seed per env row (``VecEnv.reset``): a VecEnv that holds the envs of several runs, each run's envs seeded
as that run's own VecEnv seeds them, steps exactly as those VecEnvs side by side. This is what lets N seeds
train as one batch and each still see the envs of its solo run."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from proxima.base.errors import UserError
from proxima.envs import make_envs, make_vec_env

E = 3  # envs per run
SEEDS = (7, 1000)  # the runs' seeds
STEPS = 300


def _actions(space: gym.Space, num_envs: int, steps: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if isinstance(space, gym.spaces.Discrete):
        return torch.randint(int(space.n), (steps, num_envs), generator=g)
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    return low + (high - low) * torch.rand(steps, num_envs, *space.shape, generator=g)


def _trajectory(envs, actions: torch.Tensor) -> dict[str, torch.Tensor]:
    """The first observations, then every step's fields, each stacked as (steps, num_envs, ...)."""
    first = envs.reset()
    steps = [envs.step(a) for a in actions]
    envs.close()
    fields = ("obs", "reward", "terminated", "truncated", "final_obs")
    out = {name: torch.stack([getattr(s, name) for s in steps]) for name in fields}
    out["first"] = first
    return out


def _side_by_side(solo: list[dict], dim: int) -> dict[str, torch.Tensor]:
    return {name: torch.cat([t[name] for t in solo], dim=0 if name == "first" else dim) for name in solo[0]}


@pytest.mark.parametrize(
    "env_id, backend", [("CartPole-v1", "native"), ("Pendulum-v1", "native"), ("CartPole-v1", "gymnasium")]
)
def test_a_vecenv_of_two_runs_seeded_per_row_steps_as_the_two_runs_alone(env_id, backend):
    batched = make_envs(env_id, 2 * E, backend=backend, seed=[s + k for s in SEEDS for k in range(E)])
    actions = _actions(batched.single_action_space, 2 * E, STEPS)
    together = _trajectory(batched, actions)
    alone = [
        _trajectory(make_envs(env_id, E, backend=backend, seed=s), actions[:, j * E : (j + 1) * E])
        for j, s in enumerate(SEEDS)
    ]
    expected = _side_by_side(alone, dim=1)
    for name, value in expected.items():
        assert torch.equal(together[name], value), name
    # through episode ends: CartPole's random play terminates within tens of steps, Pendulum truncates at 200
    ended = (together["terminated"] | together["truncated"]).sum(0)
    assert (ended >= 1).all(), ended
    # and the two runs' envs differ from each other
    assert not torch.equal(together["first"][:E], together["first"][E:])


@pytest.mark.parametrize("backend", ["native", "gymnasium"])
def test_an_int_seed_is_the_list_of_seed_plus_i_and_reset_takes_either(backend):
    env_id, n = "CartPole-v1", 4
    actions = _actions(gym.spaces.Discrete(2), n, 60)
    by_int = _trajectory(make_envs(env_id, n, backend=backend, seed=5), actions)
    by_list = _trajectory(make_envs(env_id, n, backend=backend, seed=[5, 6, 7, 8]), actions)
    for name in by_int:
        assert torch.equal(by_int[name], by_list[name]), name
    envs = make_envs(env_id, n, backend=backend, seed=0)
    assert torch.equal(envs.reset(seed=np.array([5, 6, 7, 8])), by_int["first"])
    assert torch.equal(envs.reset(seed=(9, 6, 10, 8))[1::2], by_int["first"][1::2])
    envs.close()


def test_native_int_seeds_keep_their_known_first_states():
    # as before seeds could be lists: env i's stream is keyed by hash(hash(seed + i) ^ 0x9E3779B9)
    cartpole = make_vec_env("CartPole-v1", 2, backend="native", seed=0).reset()
    assert cartpole.tolist() == [
        [0.018138885498046875, 0.011125320568680763, 0.012892520055174828, -0.03595273941755295],
        [0.004015803337097168, 0.039388179779052734, -0.030396992340683937, 0.03389359265565872],
    ]
    pendulum = make_vec_env("Pendulum-v1", 2, backend="native", seed=12345).reset()
    assert pendulum.tolist() == [
        [0.6897713541984558, -0.7240272760391235, 0.5918610095977783],
        [0.8521702885627747, 0.5232645869255066, 0.3267554044723511],
    ]
    assert torch.equal(make_vec_env("CartPole-v1", 1, backend="native", seed=1).reset(), cartpole[1:])


@pytest.mark.parametrize("backend", ["native", "gymnasium"])
def test_a_seed_list_of_the_wrong_length_or_kind_is_refused_in_one_line(backend):
    with pytest.raises(UserError, match=r"one int per env: 3 envs, got 2 seeds") as e:
        make_envs("CartPole-v1", 3, backend=backend, seed=[1, 2])
    assert "\n" not in str(e.value)
    envs = make_envs("CartPole-v1", 3, backend=backend, seed=0)
    with pytest.raises(UserError, match=r"3 envs, got 4 seeds"):
        envs.reset(seed=[1, 2, 3, 4])
    with pytest.raises(UserError, match=r"ints only"):
        envs.reset(seed=[1, 2.5, 3])
    with pytest.raises(UserError, match=r"an int or a sequence"):
        envs.reset(seed="123")
    envs.close()


def test_a_multiagent_backend_refuses_a_seed_list_in_one_line():
    with pytest.raises(
        UserError, match=r"^the native multi-agent backend takes one int seed for all its envs"
    ):
        make_vec_env("proxima/ProbeCoordination-v0", 2, seed=[1, 2, 3, 4])
    envs = make_vec_env("proxima/ProbeCoordination-v0", 2, seed=1)
    with pytest.raises(UserError, match=r"one int seed"):
        envs.reset(seed=[1, 2, 3, 4])


def test_ale_games_seeded_per_row_play_as_the_runs_alone():
    pytest.importorskip("ale_py")
    env_id, steps = "PongNoFrameskip-v4", 40
    batched = make_vec_env(env_id, 2, backend="ale", seed=[3, 11])
    actions = _actions(batched.single_action_space, 2, steps)
    together = _trajectory(batched, actions)
    alone = [_trajectory(make_vec_env(env_id, 1, backend="ale", seed=s), actions[:, j : j + 1])
             for j, s in enumerate((3, 11))]  # fmt: skip
    for name, value in _side_by_side(alone, dim=1).items():
        assert torch.equal(together[name], value), name
