"""Advantage estimators as pure tensor functions (GAE: detail 5 of the 13 in docs/SEEDS.md).

Conventions, shared by every estimator here (they are CleanRL's ppo.py's):

- ``rewards``, ``values``, ``dones`` are time-major, shape ``(T, N)``.
- ``dones[t] = 1`` marks step ``t`` as the *first* step of a new episode, i.e. the step before it ended one.
  So the value of ``obs[t + 1]`` is cut off by ``dones[t + 1]``, and at the end of the rollout by ``next_done``.
- ``next_value`` is ``V(obs_T)``, shape ``(1, N)`` or ``(N,)``; ``next_done`` says whether ``obs_T`` starts a new
  episode, shape ``(N,)``.

Time-limit truncation is not a special case here: the rollout adds ``gamma * V(final_obs)`` to the reward of a
truncated step (see ``proxima.run.rollout``), after which a truncation is an ordinary episode boundary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

# An estimator as a function of ``gae``'s signature: your own compute_advantages, adapted (proxima.algo.custom)
Estimator = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor, float, float], Tensor]


def _then(x: Tensor, last: Tensor) -> Tensor:
    """``x`` of the step *after* each step, ``last`` after the rollout's last: shape (T, N)."""
    return torch.cat([x[1:], last.reshape(1, -1).to(x.dtype)], dim=0)


@torch.no_grad()
def gae(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    next_value: Tensor,
    next_done: Tensor,
    gamma: float,
    gae_lambda: float,
) -> Tensor:
    """Generalized Advantage Estimation, the reference reversed loop (PPO paper, eqs. 11-12).

    ``A_t = delta_t + gamma * lambda * (1 - done_{t+1}) * A_{t+1}``, with
    ``delta_t = r_t + gamma * (1 - done_{t+1}) * V_{t+1} - V_t``. Returns advantages of shape ``(T, N)``.
    """
    nonterminal = 1.0 - _then(dones, next_done)
    deltas = rewards + gamma * _then(values, next_value) * nonterminal - values
    decays = gamma * gae_lambda * nonterminal  # each step's discount of the advantage after it
    advantages = torch.empty_like(deltas)
    last = torch.zeros_like(deltas[0])
    # Back through the steps' rows, unbound once as views: two ops a step, where indexing each row took five more
    # (the advantages have the deltas' dtype, which the decays' promotes to, so each is summed into its row).
    for delta, decay, advantage in zip(
        *(x.unbind(0)[::-1] for x in (deltas, decays, advantages)), strict=True
    ):
        last = torch.add(delta, decay * last, out=advantage)
    return advantages


@torch.no_grad()
def gae_vectorized(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    next_value: Tensor,
    next_done: Tensor,
    gamma: float,
    gae_lambda: float,
) -> Tensor:
    """GAE with no Python loop over time: ``A = M @ delta`` with a per-env (T, T) discount matrix.

    ``M[t, s] = prod_{k=t}^{s-1} gamma * lambda * nonterminal_k`` for ``s >= t`` and 0 below the diagonal, so
    each advantage is the discounted sum of the deltas that follow it within its episode. A cumulative
    product builds M; an episode end puts a 0 in the product, which cuts every later term. Costs
    O(T^2 N) memory, so it suits short rollouts; ``gae`` is the loop it must agree with.
    """
    nonterminal = 1.0 - _then(dones, next_done)
    deltas = rewards + gamma * _then(values, next_value) * nonterminal - values
    T = deltas.shape[0]
    factors = (gamma * gae_lambda) * nonterminal  # (T, N): discount from step k to k + 1
    # step[t, s] = factors[s - 1] for s > t, else 1; the cumprod over s is then M[t, s] for s >= t.
    later = torch.ones(T, T, dtype=torch.bool, device=deltas.device).triu(1)
    step = torch.where(later.unsqueeze(-1), factors.roll(1, dims=0).unsqueeze(0), torch.ones_like(factors))
    discount = step.cumprod(dim=1) * later.logical_not().T.unsqueeze(-1)  # zero below the diagonal
    return torch.einsum("tsn,sn->tn", discount, deltas)


@torch.no_grad()
def discounted_returns(
    rewards: Tensor, dones: Tensor, next_value: Tensor, next_done: Tensor, gamma: float
) -> Tensor:
    """Discounted rewards-to-go, reset at episode ends and bootstrapped from ``next_value`` at the rollout's end.

    ``R_t = r_t + gamma * (1 - done_{t+1}) * R_{t+1}``, with ``R_T = V(obs_T)``. Same conventions as ``gae``;
    with ``gae_lambda = 1`` and zero values, ``gae`` gives the same numbers.
    """
    nonterminal = 1.0 - _then(dones, next_done)
    discounts = gamma * nonterminal
    returns = torch.empty_like(rewards)
    last = next_value.reshape(-1).to(rewards.dtype)
    # as in gae; copied into its row rather than summed there, since dones of a wider dtype than the rewards' give
    # a wider running return
    for reward, discount, out in zip(
        *(x.unbind(0)[::-1] for x in (rewards, discounts, returns)), strict=True
    ):
        last = reward + discount * last
        out.copy_(last)
    return returns


@torch.no_grad()
def gae_by_turns(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    next_value: Tensor,
    next_done: Tensor,
    acting: Tensor,
    gamma: float,
    gae_lambda: float,
    next_acting: Tensor | None = None,
) -> Tensor:
    """GAE for turn-based games, where each row is a player that acts only at its ``acting`` steps (``(T, N)``,
    bool). A player's clock is its own turns: each acting step's transition runs to the row's next acting step,
    its reward is the sum of the rewards the row got from that step until then (the other players' moves can win
    or lose the game for it), and it bootstraps from the value of that next acting step (at the rollout's end,
    ``next_value``), unless the episode ended in between. Advantages at steps where the row did not act are 0
    (they are not samples). With every step acting this is ``gae``.

    ``next_acting`` (``(N,)``, bool): the rows that act at the observation after the rollout; None: all of them.
    A row that waits there has its next move, and the rewards before it, past the rollout (``open_moves``):
    its advantages end at its last move, from whose value the moves before it bootstrap, as GAE's do from
    ``next_value``; that move's advantage is 0, and it is no sample.
    """
    cutoff = (
        torch.zeros_like(acting) if next_acting is None else open_moves(acting, dones, next_done, next_acting)
    )
    advantages = torch.zeros_like(values)
    boundary = _then(dones, next_done) > 0  # step t ended an episode
    last = torch.zeros_like(values[0])  # the advantage at the row's next acting step
    next_v = next_value.reshape(-1).to(values.dtype)  # the value at the row's next acting step
    cut = boundary[-1].clone()  # an episode ended between this step and next_v's
    pending = torch.zeros_like(values[0])  # rewards of the steps between this one and the next acting step
    for t in reversed(range(values.shape[0])):
        ended = boundary[t]
        cut |= ended
        pending.masked_fill_(ended, 0.0)  # what comes after an episode's end is the next episode's
        delta = rewards[t] + pending + gamma * next_v * (~cut) - values[t]
        advantage = (delta + gamma * gae_lambda * (~cut) * last).masked_fill(cutoff[t], 0.0)
        act = acting[t]
        advantages[t] = torch.where(act, advantage, 0.0)
        last = torch.where(act, advantage, last)
        next_v = torch.where(act, values[t], next_v)
        cut &= ~act
        pending = torch.where(act, 0.0, pending + rewards[t])
    return advantages


def open_moves(acting: Tensor, dones: Tensor, next_done: Tensor, next_acting: Tensor) -> Tensor:
    """``(T, N)`` bool: the moves of a turn-based game that the rollout's end cut off: a row's last acting step
    where the row does not act at the observation after the rollout (``next_acting``) and no episode ended since.
    Its transition runs to the row's next move, past the rollout, with the rewards the row gets until then; its
    row's observation after the rollout is one where it waits, which the critic is never trained on."""
    boundary = _then(dones, next_done) > 0
    steps = torch.arange(acting.shape[0], device=acting.device).unsqueeze(1)
    last = torch.where(acting, steps, -1).amax(0)  # each row's last acting step; -1: none
    ended = (boundary & (steps >= last)).any(0)
    return acting & (steps == last) & ~ended & ~next_acting.reshape(-1).bool()


ESTIMATORS = ("gae", "returns")


def estimate_advantages(
    estimator: str | Estimator,
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    next_value: Tensor,
    next_done: Tensor,
    gamma: float,
    gae_lambda: float,
    acting: Tensor | None = None,
    next_acting: Tensor | None = None,
) -> Tensor:
    """Advantages by the named estimator: ``gae`` (GAE(lambda)) or ``returns`` (rewards-to-go minus V(s)).
    ``acting``, ``next_acting``: a turn-based game's acting steps (``gae_by_turns``; its ``returns`` are GAE with
    lambda 1).

    Either way the value targets are ``advantages + values``: the lambda-returns, or the rewards-to-go.
    ``estimator`` may be a function of ``gae``'s signature too (not for turn-based games).
    """
    if callable(estimator):
        if acting is not None:
            raise ValueError(
                "an estimator function takes every step as acting: a turn-based game's steps are not"
            )
        return estimator(rewards, values, dones, next_value, next_done, gamma, gae_lambda)
    if acting is not None and estimator in ESTIMATORS:
        lam = gae_lambda if estimator == "gae" else 1.0
        return gae_by_turns(rewards, values, dones, next_value, next_done, acting, gamma, lam, next_acting)
    if estimator == "gae":
        return gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda)
    if estimator == "returns":
        return discounted_returns(rewards, dones, next_value, next_done, gamma) - values
    raise ValueError(f"unknown advantage estimator {estimator!r}; accepted: {', '.join(ESTIMATORS)}")
