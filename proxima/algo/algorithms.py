"""The algorithms ``--algo`` chooses from, as one table: each one's defaults, whether it learns a critic,
and its policy term. PPO, VPG and REINFORCE share everything else (rollout, advantages, ``update``), so
the loop and the update never branch on an algorithm's name; adding one is adding a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor

from proxima.algo.losses import clipped_surrogate_loss, normalize, policy_gradient_loss
from proxima.algo.storage import Batch
from proxima.base.errors import UserError

# (new log-probs, minibatch, clip_coef, norm_adv) -> the policy term of the loss, to minimize
PolicyLoss = Callable[[Tensor, Batch, float, bool], Tensor]


def ppo_policy_loss(logprobs: Tensor, mb: Batch, clip_coef: float, norm_adv: bool) -> Tensor:
    """PPO's clipped surrogate (detail 8 of the 13 in docs/SEEDS.md), on advantages normalized per minibatch
    when ``norm_adv`` (detail 7)."""
    return clipped_surrogate_loss(logprobs, mb.logprobs, mb.advantages, clip_coef, norm_adv)


def pg_policy_loss(logprobs: Tensor, mb: Batch, clip_coef: float, norm_adv: bool) -> Tensor:
    """The plain policy gradient of the policy-gradient homework (docs/SEEDS.md): weights R - V(s) for VPG, R for
    REINFORCE (whose V is 0); no clip."""
    return policy_gradient_loss(logprobs, normalize(mb.advantages) if norm_adv else mb.advantages)


@dataclass(frozen=True)
class Algorithm:
    name: str
    summary: str
    policy_loss: PolicyLoss
    has_critic: bool = True
    multi_agent: bool = False  # only for multi-agent envs (docs/MULTIAGENT.md)
    defaults: dict = field(default_factory=dict)  # PPOArgs fields it sets, under a preset and explicit flags


# REINFORCE and VPG take one full-batch gradient step per rollout on raw rewards-to-go, as the policy-gradient
# homework does (docs/SEEDS.md); PPO keeps the settings of CleanRL's ppo.py.
_ONE_STEP_ON_RETURNS = {"advantage": "returns", "norm_adv": False, "update_epochs": 1, "num_minibatches": 1}

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("ppo", "the clipped surrogate", ppo_policy_loss),
        Algorithm(
            "vpg",
            "policy gradient with a learned value baseline",
            pg_policy_loss,
            defaults={"exp_name": "vpg", **_ONE_STEP_ON_RETURNS},
        ),
        Algorithm(
            "reinforce",
            "policy gradient on rewards-to-go, no critic",
            pg_policy_loss,
            has_critic=False,
            defaults={"exp_name": "reinforce", **_ONE_STEP_ON_RETURNS},
        ),
        # Many agents (Yu et al. 2022): PPO per agent, with the critic on the agent's own observation (IPPO) or on
        # the global state (MAPPO). Both share the agents' networks unless --no-share-params.
        Algorithm(
            "ippo",
            "PPO for each agent, its critic on its own observation",
            ppo_policy_loss,
            multi_agent=True,
            defaults={"exp_name": "ippo"},
        ),
        Algorithm(
            "mappo",
            "PPO for each agent, one critic on the global state",
            ppo_policy_loss,
            multi_agent=True,
            defaults={"exp_name": "mappo", "centralized_critic": True},
        ),
    )
}
ALGOS = tuple(ALGORITHMS)


def get_algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise UserError(f"unknown algo {name!r}; accepted: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]
