import pytest
import torch

from proxima.algo.advantages import discounted_returns, estimate_advantages, gae, gae_by_turns, gae_vectorized


def test_gae_hand_computed_single_env():
    # gamma=0.5, lambda=0.5; an episode starts at t=2 (dones[2] = 1), so V(obs_2) is not bootstrapped into t=1.
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [2.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    next_value, next_done = torch.tensor([[4.0]]), torch.tensor([0.0])
    # deltas: d0 = 1 + .5*1 - .5 = 1; d1 = 2 + 0 - 1 = 1; d2 = 3 + .5*4 - 2 = 3
    # A2 = 3; A1 = d1 (cut) = 1; A0 = 1 + .25*1 = 1.25
    expected = torch.tensor([[1.25], [1.0], [3.0]])
    out = gae(rewards, values, dones, next_value, next_done, gamma=0.5, gae_lambda=0.5)
    torch.testing.assert_close(out, expected)


def test_gae_next_done_cuts_bootstrap():
    rewards, values = torch.ones(2, 1), torch.zeros(2, 1)
    out = gae(rewards, values, torch.zeros(2, 1), torch.tensor([100.0]), torch.tensor([1.0]), 0.9, 1.0)
    # next_done = 1: the value of the last observation belongs to a new episode and is ignored.
    torch.testing.assert_close(out, torch.tensor([[1.9], [1.0]]))


def test_gae_keyword_arguments_and_next_value_shapes():
    torch.manual_seed(0)
    r, v, d = torch.randn(5, 3), torch.randn(5, 3), (torch.rand(5, 3) < 0.3).float()
    nv, nd = torch.randn(3), torch.zeros(3)
    a = gae(rewards=r, values=v, dones=d, next_value=nv, next_done=nd, gamma=0.99, gae_lambda=0.95)
    b = gae(r, v, d, nv.reshape(1, 3), nd, 0.99, 0.95)
    assert a.shape == (5, 3)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("T,N", [(1, 1), (2, 3), (7, 1), (16, 8), (128, 4), (33, 17)])
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (1.0, 1.0), (0.5, 0.0), (0.9, 1.0)])
def test_gae_vectorized_matches_loop(T, N, gamma, lam):
    g = torch.Generator().manual_seed(T * 1000 + N)
    rewards, values = torch.randn(T, N, generator=g), torch.randn(T, N, generator=g)
    dones = (torch.rand(T, N, generator=g) < 0.2).float()
    next_value, next_done = torch.randn(1, N, generator=g), (torch.rand(N, generator=g) < 0.2).float()
    loop = gae(rewards, values, dones, next_value, next_done, gamma, lam)
    vec = gae_vectorized(rewards, values, dones, next_value, next_done, gamma, lam)
    torch.testing.assert_close(vec, loop, rtol=1e-5, atol=1e-5)


def test_discounted_returns_hand_computed():
    rewards = torch.tensor([[1.0], [1.0], [1.0], [1.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0], [0.0]])  # a new episode starts at t=2
    out = discounted_returns(rewards, dones, torch.tensor([10.0]), torch.tensor([0.0]), gamma=0.5)
    # R3 = 1 + .5*10 = 6; R2 = 1 + .5*6 = 4; R1 = 1 (episode ended); R0 = 1 + .5*1 = 1.5
    torch.testing.assert_close(out, torch.tensor([[1.5], [1.0], [4.0], [6.0]]))


def test_discounted_returns_equal_gae_with_lambda_one_and_zero_values():
    g = torch.Generator().manual_seed(3)
    r, d = torch.randn(20, 4, generator=g), (torch.rand(20, 4, generator=g) < 0.25).float()
    nv, nd = torch.randn(4, generator=g), torch.zeros(4)
    torch.testing.assert_close(
        discounted_returns(r, d, nv, nd, 0.97), gae(r, torch.zeros(20, 4), d, nv, nd, 0.97, 1.0)
    )


def test_terminated_vs_truncated_hand_computed(scripted_env, identity_critic):
    """Two envs end an episode at step 1: env 0 terminates, env 1 is truncated by a time limit.

    V(s) = s. gamma = 0.5, lambda = 0.5. Observations 1 -> 2 -> (final 4, reset to 7) -> 8.
    env 0 (terminated): deltas 1 + .5*2 - 1 = 1, 1 + 0 - 2 = -1, 1 + .5*8 - 7 = -2 -> A = [0.75, -1, -2].
    env 1 (truncated): the reward at step 1 becomes 1 + .5*V(4) = 3, so delta_1 = 3 - 2 = 1 -> A = [1.25, 1, -2].
    """
    from proxima.run.rollout import RolloutCollector

    env = scripted_env(
        [1.0, 1.0],
        [
            ([2.0, 2.0], [1.0, 1.0], [False, False], [False, False], [2.0, 2.0]),
            ([7.0, 7.0], [1.0, 1.0], [True, False], [False, True], [4.0, 4.0]),
            ([8.0, 8.0], [1.0, 1.0], [False, False], [False, False], [8.0, 8.0]),
        ],
    )
    collector = RolloutCollector(env, num_steps=3, gamma=0.5, model=identity_critic)
    next_value, next_done = collector.collect(identity_critic)
    buf = collector.buffer
    torch.testing.assert_close(buf.rewards, torch.tensor([[1.0, 1.0], [1.0, 3.0], [1.0, 1.0]]))
    torch.testing.assert_close(buf.dones, torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    adv = gae(buf.rewards, buf.values, buf.dones, next_value, next_done, gamma=0.5, gae_lambda=0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.75, 1.25], [-1.0, 1.0], [-2.0, -2.0]]))
    # Episode statistics use the env's own rewards, not the bootstrapped ones.
    assert buf.finished_episodes() == ([2.0, 2.0], [2, 2])


def test_terminated_and_truncated_together_does_not_bootstrap(scripted_env, identity_critic):
    from proxima.run.rollout import RolloutCollector

    env = scripted_env([1.0], [([5.0], [1.0], [True], [True], [9.0])])
    collector = RolloutCollector(env, num_steps=1, gamma=0.5, model=identity_critic)
    collector.collect(identity_critic)
    assert collector.buffer.rewards.item() == 1.0  # terminal: no 0.5 * V(9) added


def _one_row(*columns):
    return [torch.tensor(c, dtype=torch.float32).reshape(-1, 1) for c in columns]


def test_gae_by_turns_runs_from_each_move_to_the_players_next_with_the_rewards_between():
    """One player who moves at steps 0 and 2 and waits at 1 and 3 (gamma 0.5, lambda 1): its first move's
    transition ends at its second, with the reward the other player's move paid it at step 1 and no discount for
    that step; the second bootstraps from next_value, with step 3's -1. Waiting steps' values are never read."""
    rewards, values, dones = _one_row([0.0, 1.0, 0.0, -1.0], [0.25, 9.0, 0.5, 9.0], [0, 0, 0, 0])
    acting = torch.tensor([[True], [False], [True], [False]])
    adv = gae_by_turns(rewards, values, dones, torch.tensor([0.75]), torch.tensor([0.0]), acting, 0.5, 1.0)
    # step 2: -1 + 0.5 * 0.75 - 0.5 = -1.125; step 0: 1 + 0.5 * 0.5 - 0.25 = 1.0, plus 0.5 * -1.125
    assert adv.flatten().tolist() == [0.4375, 0.0, -1.125, 0.0]
    # the episode ends at step 1 (obs 2 starts a new one): step 0 keeps step 1's reward, bootstraps from nothing
    dones = _one_row([0, 0, 1, 0])[0]
    adv = gae_by_turns(rewards, values, dones, torch.tensor([0.75]), torch.tensor([0.0]), acting, 0.5, 1.0)
    assert adv.flatten().tolist() == [0.75, 0.0, -1.125, 0.0]
    # the episode ends at step 2, before step 3's reward: that reward is the next episode's, dropped here
    dones = _one_row([0, 0, 0, 1])[0]
    adv = gae_by_turns(rewards, values, dones, torch.tensor([0.75]), torch.tensor([0.0]), acting, 0.5, 1.0)
    assert adv.flatten().tolist() == [0.75, 0.0, -0.5, 0.0]


def test_gae_by_turns_is_gae_when_every_step_acts_and_returns_are_lambda_one():
    g = torch.Generator().manual_seed(0)
    T, N = 16, 6
    rewards, values = torch.randn(T, N, generator=g), torch.randn(T, N, generator=g)
    dones = (torch.rand(T, N, generator=g) < 0.2).float()
    next_value, next_done = torch.randn(N, generator=g), (torch.rand(N, generator=g) < 0.3).float()
    every = torch.ones(T, N, dtype=torch.bool)
    args = (rewards, values, dones, next_value, next_done)
    assert torch.equal(gae_by_turns(*args, every, 0.99, 0.95), gae(*args, 0.99, 0.95))
    returns = estimate_advantages("returns", *args, 0.99, 0.95, acting=every)
    torch.testing.assert_close(
        returns, discounted_returns(rewards, dones, next_value, next_done, 0.99) - values
    )


def test_gae_by_turns_ends_a_row_at_a_move_whose_next_the_rollout_cut_off():
    """A row that waits at the observation after the rollout has its last move's reward and next move past it:
    that move is open (``open_moves``), its advantage 0, and the moves before it bootstrap from its value, as
    GAE's last step does from ``next_value``. The row that moves next is bootstrapped from ``next_value``."""
    from proxima.algo.advantages import open_moves

    rewards, values, dones = _one_row([0.0, 1.0, 0.0], [0.25, 9.0, 0.5], [0, 0, 0])
    acting = torch.tensor([[True], [False], [True]])
    args = (rewards, values, dones, torch.tensor([7.0]), torch.tensor([0.0]), acting, 0.5, 1.0)
    waits, moves = torch.tensor([False]), torch.tensor([True])
    assert open_moves(acting, dones, torch.tensor([0.0]), waits).flatten().tolist() == [False, False, True]
    # step 0: its move's reward 1 (step 1) and 0.5 * V(step 2) = 0.25, less 0.25
    assert gae_by_turns(*args, next_acting=waits).flatten().tolist() == [1.0, 0.0, 0.0]
    assert gae_by_turns(*args, next_acting=moves).tolist() == gae_by_turns(*args).tolist()
    # where the episode ended after the last move, that move is whole (-0.5), and step 0 adds it (lambda 1)
    ended = torch.tensor([1.0])
    assert not open_moves(acting, dones, ended, waits).any()
    whole = gae_by_turns(*args[:4], ended, *args[5:], next_acting=waits)
    assert whole.flatten().tolist() == [0.75, 0.0, -0.5]


def test_a_turn_based_rollout_leaves_out_the_moves_it_cut_off():
    """Call and answer in rollouts of 3 steps: the caller's move at step 2 is paid at the next rollout's step 0,
    so its value target would be V of the caller's waiting observation after the rollout, which the critic never
    trains on, and its payment would count nowhere. That move is no sample; the caller's move at step 0 is one,
    its target what the answer paid it."""
    from types import SimpleNamespace

    from proxima.envs import make_envs
    from proxima.policy.distributions import make_head
    from proxima.policy.networks import NetworkSettings, NetworkSpec, make_policy
    from proxima.run.loop import rollout
    from proxima.run.multiagent import MultiAgentCollector
    from tests.fixtures.wild_aec_envs import env

    pytest.importorskip("pettingzoo")
    torch.manual_seed(0)
    envs = make_envs(env, 2, seed=0)
    head = make_head(envs.single_action_space)
    spec = NetworkSpec(head.logits_dim, envs.obs_layout.shape, NetworkSettings(norm_value=False),
                       obs_layout=envs.obs_layout.to_json(), agents=envs.agents.to_json())  # fmt: skip
    model = make_policy(spec, head)  # the multi-agent policy
    collector = MultiAgentCollector(envs, 3, 0.5, model, seed=0)
    args = SimpleNamespace(algorithm=SimpleNamespace(advantage="gae", gamma=0.5, gae_lambda=1.0))
    buf, _, targets = rollout(collector, model, args, 1)
    envs.close()
    caller = buf.valid.view(3, 2, 2)[:, :, 0]  # the caller moves at steps 0 and 2, the answerer at step 1
    assert caller.tolist() == [[True, True], [False, False], [False, False]]
    assert buf.valid.view(3, 2, 2)[:, :, 1].tolist() == [[False, False], [True, True], [False, False]]
    assert torch.equal(targets.view(3, 2, 2)[0, :, 0], buf.rewards.view(3, 2, 2)[1, :, 0])
