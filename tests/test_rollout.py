"""The collector writes each step where it belongs: two rollouts in a row hold what stepping the envs and the policy
by hand gives, row by row, episodes and time limits carried from the first into the second."""

import gymnasium as gym
import torch

from proxima.algo.storage import RolloutBuffer
from proxima.envs.native import CartPole
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic, NetworkSpec
from proxima.run.rollout import RolloutCollector


class ShortCartPole(CartPole):
    # time limits at steps 4, 8 and 12 of two rollouts of 6 (no CartPole falls in 4 steps): truncations, whose
    # rewards bootstrap, one at the second rollout's last step and none at the first's
    max_episode_steps = 4


def test_two_rollouts_hold_what_stepping_by_hand_gives():
    torch.manual_seed(0)
    model = ActorCritic(NetworkSpec(2, (4,)), make_head(gym.spaces.Discrete(2)))
    gamma, steps, n = 0.9, 6, 3
    collector = RolloutCollector(
        ShortCartPole(n, seed=1), steps, gamma, model, generator=torch.Generator().manual_seed(2)
    )
    envs, generator = ShortCartPole(n, seed=1), torch.Generator().manual_seed(2)
    obs, next_done = envs.reset(), torch.zeros(n)
    episode_return, episode_length = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.int64)
    cuts = 0
    returned = []
    for _rollout in range(2):
        next_value, done_after = collector.collect(model)
        buf = collector.buffer
        for t in range(steps):
            with torch.no_grad():
                actions, logprobs, values = model.act(obs, generator)
            step = envs.step(actions)
            done = step.terminated | step.truncated
            episode_return += 1.0
            episode_length += 1
            expected = {
                "obs": obs, "dones": next_done, "actions": actions, "logprobs": logprobs, "values": values,
                "episode_returns": episode_return, "episode_lengths": episode_length, "episode_ended": done,
            }  # fmt: skip
            for name, value in expected.items():
                assert torch.equal(getattr(buf, name)[t], value), (name, t)
            cut = step.truncated & ~step.terminated
            with torch.no_grad():  # a time limit's reward is 1 + gamma * V(final_obs); a termination's 1
                bootstrap = torch.where(cut, gamma * model.value(step.final_obs), 0.0)
            torch.testing.assert_close(buf.rewards[t], 1.0 + bootstrap)
            cuts += int(cut.sum())
            episode_return.masked_fill_(done, 0.0)
            episode_length.masked_fill_(done, 0)
            obs, next_done = step.obs, done.float()
        assert torch.equal(done_after, next_done)
        with torch.no_grad():
            assert torch.equal(next_value, model.value(obs))
        returned.append((done_after, next_done.clone()))
    assert cuts == 3 * n
    # the next_done a rollout returned is its own: the next rollout does not write into it
    assert all(torch.equal(done_after, kept) for done_after, kept in returned)


def test_the_rows_by_step_are_the_buffers_own():
    buf = RolloutBuffer(3, 2, (4,), torch.float32, (), torch.int64, torch.device("cpu"))
    rows = buf.rows_by_step()
    assert set(rows) == set(RolloutBuffer.STEPS)
    for name, by_step in rows.items():
        assert len(by_step) == 3
        by_step[1].fill_(1)
        tensor = getattr(buf, name)
        assert bool((tensor[1] == 1).all()) and not bool(tensor[0].bool().any() | tensor[2].bool().any()), (
            name
        )
