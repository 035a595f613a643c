"""The algorithms ``--algo`` chooses from, as one table: each one's defaults, whether it learns a critic,
and its policy term. PPO, VPG and REINFORCE share everything else (rollout, advantages, ``update``), so
the loop and the update never branch on an algorithm's name; adding one is adding a row here, or, from your
own code, ``register_algorithm`` (an ``Algorithm`` may hold your functions written to the PPO tutorial's
signatures: ``proxima.algo.custom``, docs/ALGORITHMS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor

from proxima.algo import custom
from proxima.algo.losses import clipped_surrogate_loss, normalize, policy_gradient_loss
from proxima.algo.storage import Batch
from proxima.base import trust
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
    policy_loss: PolicyLoss = ppo_policy_loss
    has_critic: bool = True
    multi_agent: bool = False  # only for multi-agent envs (docs/MULTIAGENT.md)
    defaults: dict = field(default_factory=dict)  # PPOArgs fields it sets, under a preset and explicit flags
    # Your own functions in the loop, written to the PPO tutorial's signatures (proxima.algo.custom): each one
    # given replaces proxima's piece (the estimator, the policy term, the value term, the entropy term).
    compute_advantages: Callable | None = None
    calc_policy_loss: Callable | None = None
    calc_value_function_loss: Callable | None = None
    calc_entropy_loss: Callable | None = None


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


# The Algorithms that ``--algo MODULE:NAME`` named, once imported (apart from the table, which lists the names)
_IMPORTED: dict[str, Algorithm] = {}


def register_algorithm(algorithm: Algorithm) -> str:
    """Add ``algorithm`` to the table under its name, which ``--algo`` and ``train(algo=...)`` then take and
    config.json records; its name. A run resumed in another process needs it registered there again (or give it
    as ``--algo MODULE:NAME``, which config.json records as such)."""
    if not isinstance(algorithm, Algorithm):
        raise UserError(f"register_algorithm takes a proxima.algo.algorithms.Algorithm, got {algorithm!r}")
    name = algorithm.name
    if not name or ":" in name or name.startswith("<"):
        raise UserError(
            f"an algorithm's name is a word without ':' (MODULE:NAME names a module's), got {name!r}"
        )
    if ALGORITHMS.get(name, algorithm) is not algorithm:
        raise UserError(f"the algo name {name!r} is taken by another Algorithm; give yours another name")
    ALGORITHMS[name] = _checked(algorithm)
    return name


def _checked(algorithm: Algorithm) -> Algorithm:
    """``algorithm``, once the functions it holds have the PPO tutorial's parameters (``custom.check_signature``)."""
    for setting, piece in custom.PIECES.items():
        fn = getattr(algorithm, piece.tutorial)
        if fn is not None:
            custom.check_signature(setting, fn)
    return algorithm


def given_algorithm(values: dict) -> dict:
    """Settings by their flat names as the user gave them (``train``'s keywords, the flags typed), with ``algo``
    as config.json records it: an ``Algorithm`` object by its name (``register_algorithm``), and a module of your
    functions (``--algo MODULE``, not a name of the table) as PPO with the settings that name its functions
    (``custom.module_functions``), where no setting given names one already."""
    algo = values.get("algo")
    if isinstance(algo, Algorithm):
        return {**values, "algo": register_algorithm(algo)}
    if not isinstance(algo, str) or algo in ALGORITHMS or ":" in algo or not algo:
        return values
    found = custom.module_functions(algo)
    if found is None:
        get_algorithm(algo)  # no such module either: unknown, as get_algorithm says
        return values
    return {**values, "algo": "ppo", **{k: v for k, v in found.items() if values.get(k) is None}}


def get_algorithm(name: str) -> Algorithm:
    """The algorithm of a name in the table, or the ``Algorithm`` that ``MODULE:NAME`` names, imported only where
    the user named it in this process or trusted the run's files (proxima.base.trust)."""
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    if ":" not in name:
        raise UserError(
            f"unknown algo {name!r}; accepted: {', '.join(ALGORITHMS)}, MODULE:NAME of an Algorithm, or (given to "
            "--algo or train(algo=...)) a module on PYTHONPATH of your functions of the PPO tutorial's names "
            "(docs/ALGORITHMS.md)"
        )
    if name not in _IMPORTED:
        trust.check("the settings", {"algo": name})
        found = custom.import_attribute(name, f"algo {name}")
        if not isinstance(found, Algorithm):
            raise UserError(
                f"algo {name}: {found!r} is no Algorithm (a proxima.algo.algorithms.Algorithm object)"
            )
        _IMPORTED[name] = _checked(found)
    return _IMPORTED[name]
