"""Your own actor and critic (``--actor-critic module:Class``, docs/NETWORKS.md): a class written as the PPO
tutorial's ``Agent`` (docs/SEEDS.md), whose ``actor`` maps a batch of observations to the logits and whose
``critic`` maps it to the value, trained in proxima's loop in the place of ``ActorCritic``'s own MLPs.

Only the two networks are the user's: the observations reach them flattened (the ``flatten-mlp`` encoder, which
has no weights) and normalized with ``--norm-obs``, the action space's head turns the actor's logits into a
distribution, and ``--norm-value`` standardizes the critic's targets, as for proxima's own networks.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import torch
from torch import Tensor, nn

from proxima.base.errors import UserError, raised
from proxima.policy.distributions import Head
from proxima.policy.encoders import user_class
from proxima.policy.networks import ActorCritic, NetworkSpec, forward_skipping_hooks


@dataclass(frozen=True)
class EnvSpaces:
    """What a user's class is built with, read as the tutorial's ``Agent(envs)`` reads a vector env: the spaces
    of one env and the number of envs. Not the env itself, so that building a network steps no env, and a
    saved agent is built from its ``agent.json`` as the run built it (``num_envs`` is then 1)."""

    single_observation_space: gym.Space
    single_action_space: gym.Space
    num_envs: int = 1


def env_spaces(envs) -> EnvSpaces:
    """The ``EnvSpaces`` of a vector env."""
    return EnvSpaces(envs.single_observation_space, envs.single_action_space, envs.num_envs)


class UserActorCritic(ActorCritic):
    """``ActorCritic`` whose ``actor`` and ``critic`` are those of a user's module (``NetworkSettings.actor_critic``):
    logits = ``actor(obs)`` ``(B, logits_dim)``, value = ``critic(obs)`` ``(B, 1)`` or ``(B,)``, on the flattened
    observations. The user's layers keep the initialization they made themselves. The module's other
    attributes are not kept: it may hold no weights outside the two networks."""

    _made: tuple[nn.Module, nn.Module]

    def __init__(self, spec: NetworkSpec, head: Head, envs: EnvSpaces):
        name = spec.network.actor_critic
        assert name is not None  # make_policy builds this class for a user's actor_critic only
        _check_network(spec, name)
        # Made first, and ActorCritic's __init__ takes them where it makes its own MLPs: nothing it makes before
        # them draws random numbers for flattened observations, so a class that makes proxima's layers in
        # proxima's order starts from proxima's weights. (A tuple: nn.Module keeps it as a plain attribute.)
        self._made = _networks(_built(user_class(name, "actor_critic"), envs, name), name)
        super().__init__(spec, head)
        del self._made
        self._check_value_layer(name)
        self._check_outputs(name)

    def _network(self, make, role: str) -> nn.Module:
        return self._made[0 if role == "actor" else 1]

    def _value(self, features: Tensor, obs: Tensor) -> Tensor:
        if self.critic is None:
            return features.new_zeros(features.shape[:-1])
        # (B, 1) or (B,): squeeze(-1) would make a batch of one (predict's) a scalar
        out = forward_skipping_hooks(self.critic, features).reshape(features.shape[:-1])
        return self.normalization.value(out)

    def _check_value_layer(self, name: str) -> None:
        """With ``--norm-value`` a ``UserError`` unless the critic ends in an ``nn.Linear``: the changes of the
        value statistics are absorbed by rescaling that layer (PopArt, ``update_value_normalization``)."""
        if self.critic is None or not self.normalization.norm_value:
            return
        last = self.critic[-1] if isinstance(self.critic, nn.Sequential) and len(self.critic) else self.critic
        if not isinstance(last, nn.Linear):
            raise UserError(
                f"actor_critic {name}: --norm-value (the default) rescales the critic's output layer as the value "
                f"targets' mean and std change, so the critic must end in an nn.Linear, and it ends in "
                f"{type(last).__name__}: end it in nn.Linear(..., 1), or give --no-norm-value (Python: "
                "norm_value=False)"
            )

    def _check_outputs(self, name: str) -> None:
        """A ``UserError`` in one line, before any training, where the actor does not give ``(B, logits_dim)``
        or the critic ``(B, 1)`` or ``(B,)`` for a batch of the env's observations (torch would say so at the
        first update, deep in the losses, or broadcast a wrong shape silently). In eval mode: dropout draws
        nothing, batch norm keeps its statistics."""
        if torch.empty(()).is_meta:  # network_shapes' build, for the shapes of the weights only
            return
        features = self.encoder.forward(torch.zeros((2, *self.spec.obs_shape)))
        nets: dict[str, tuple[nn.Module, list[tuple[int, ...]]]] = {
            "actor": (self.actor, [(2, self.spec.logits_dim)])
        }
        if self.critic is not None:
            nets["critic"] = (self.critic, [(2, 1), (2,)])
        was_training = self.training
        self.eval()
        try:
            for role, (net, shapes) in nets.items():
                try:
                    with torch.no_grad():
                        out = forward_skipping_hooks(net, features)
                except Exception as e:
                    raise UserError(
                        f"actor_critic {name}: its {role} fails on a batch of observations of shape "
                        f"{tuple(features.shape)} ({raised(e)}); it takes (batch, observation size) floats"
                    ) from None
                shape = tuple(getattr(out, "shape", ()))
                if shape not in shapes:
                    wanted = " or ".join(str(s) for s in shapes)
                    raise UserError(
                        f"actor_critic {name}: its {role} returned shape {shape} for a batch of 2 observations; "
                        f"it must return {wanted}" + (" (one logit per action)" if role == "actor" else "")
                    )
        finally:
            self.train(was_training)


def _check_network(spec: NetworkSpec, name: str) -> None:
    """A ``UserError`` for a network that a user's actor and critic cannot be: of several agents, or on
    observations that are not flattened into a vector."""
    if spec.agents is not None:
        raise UserError(
            f"actor_critic {name}: --actor-critic trains one agent per env; this env has several agents, which "
            "proxima's own networks serve (docs/MULTIAGENT.md): drop --actor-critic"
        )
    if spec.network.encoder != "flatten-mlp":
        raise UserError(
            f"actor_critic {name}: --actor-critic takes Box observations, flattened into a vector; this env's go "
            f"through the {spec.network.encoder} encoder: drop --actor-critic, or give an encoder class of yours "
            "(--encoder) under proxima's networks"
        )


def _built(cls: type[nn.Module], envs: EnvSpaces, name: str) -> nn.Module:
    """``cls(envs)``, or a ``UserError`` in one line quoting what it raised."""
    try:
        return cls(envs)
    except UserError:
        raise
    except Exception as e:
        if torch.empty(()).is_meta:  # network_shapes' build: a class that reads its weights' values cannot be
            raise  # built there, and the real build judges it
        raise UserError(
            f"actor_critic {name}({type(envs).__name__}) failed ({raised(e)}); it is built as the PPO tutorial's "
            "Agent(envs), from envs.single_observation_space, envs.single_action_space and envs.num_envs"
        ) from None


def _networks(agent: nn.Module, name: str) -> tuple[nn.Module, nn.Module]:
    """The ``actor`` and ``critic`` of the user's ``agent``, or a ``UserError`` saying what is wrong with them."""
    nets: list[nn.Module] = []
    for role in ("actor", "critic"):
        net = getattr(agent, role, None)
        if not isinstance(net, nn.Module):
            raise UserError(
                f"actor_critic {name} has no {role} module (got {type(net).__name__}): as the PPO tutorial's "
                "Agent, its __init__ sets self.actor (observations -> logits) and self.critic (observations -> "
                "value), each an nn.Module"
            )
        nets.append(net)
    actor, critic = nets
    own = {id(p) for net in nets for p in [*net.parameters(), *net.buffers()]}
    outside = [n for n, p in [*agent.named_parameters(), *agent.named_buffers()] if id(p) not in own]
    if outside:
        raise UserError(
            f"actor_critic {name} has weights outside its actor and critic ({', '.join(outside[:3])}), which "
            "proxima would neither train nor save: move them into the actor or the critic"
        )
    shared = {id(p) for p in actor.parameters()} & {id(p) for p in critic.parameters()}
    if shared:
        raise UserError(
            f"actor_critic {name}: its actor and critic share weights; --actor-critic takes two separate "
            "networks (proxima's --shared-network shares a trunk of its own MLPs)"
        )
    return actor, critic
