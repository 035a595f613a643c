"""The policy of a game of many agents: each row of a batch is one agent (docs/MULTIAGENT.md). The actor sees
the agent's own part of the row, a centralized critic (MAPPO) the global state, and agents of different
kinds (or every agent, ``--no-share-params``) have networks of their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import gymnasium as gym
import torch
from torch import Tensor, nn

from proxima.base.spaces import ObsLayout
from proxima.policy.distributions import DiagGaussianHead, Head
from proxima.policy.encoders import choose_encoder, make_encoder
from proxima.policy.networks import ActorCritic, NetworkSpec, forward_skipping_hooks


class Grouped(nn.Module):
    """One network per group of rows (an agent, or a kind of agent): row i goes through ``nets[groups[i]]``.
    Every network runs on every row and each row keeps its own network's output: with a handful of small MLPs
    that is cheaper than gathering each group's rows, and it keeps one code path."""

    def __init__(self, nets: list[nn.Module]):
        super().__init__()
        self.nets = nn.ModuleList(nets)

    def forward(self, x: Tensor, groups: Tensor) -> Tensor:
        out = torch.stack([forward_skipping_hooks(net, x) for net in self.nets])  # (G, *rows, out)
        index = groups.unsqueeze(0).unsqueeze(-1).expand(1, *out.shape[1:])
        return out.gather(0, index)[0]


class MultiAgentActorCritic(ActorCritic):
    """``ActorCritic`` whose rows are agents (``spec.agents``): the actor's encoder takes the row without the
    global state (``actor_index``, its columns); with ``--centralized-critic`` the critic has an encoder of its
    own on the state (``critic_encoder``, ``critic_index``); with groups of agents (``group_of_agent``) the
    actor, the critic and a Gaussian's log-std are one per group; a Box of agents acting with fewer components
    than others masks the rest (``action_dims_mask``)."""

    actor_index: Tensor
    critic_index: Tensor | None
    critic_encoder: nn.Module | None
    action_dims_mask: Tensor | None
    group_of_agent: Tensor | None

    def __init__(self, spec: NetworkSpec, head: Head):
        super().__init__(spec, head)
        # a group's actor gives its mean, and a Gaussian's log-std goes with it: a row (groups, action_dim) for
        # each group, so that agents with an actor of their own (a kind, or --no-share-params) explore at their
        # own scale; each row's is given to the head's methods as log_std (_head_rows)
        self.log_std_per_group = isinstance(self.actor, Grouped) and isinstance(head, DiagGaussianHead)
        if isinstance(self.actor, Grouped) and isinstance(head, DiagGaussianHead):
            head.log_std = nn.Parameter(torch.zeros(len(self.actor.nets), head.logits_dim))

    def _inputs(self, layout: ObsLayout) -> tuple[ObsLayout, int | None]:
        # called by ActorCritic.__init__ before its encoder: the critic's encoder draws its weights first
        net, agents = self.spec.network, self.spec.agents
        assert agents is not None and isinstance(layout.space, gym.spaces.Dict)  # rows of agents, a Dict each
        unseen = ("state",) if net.actor_agent_index else ("state", "agent")
        actor_layout, self.actor_index = layout.select(
            tuple(k for k in layout.space.spaces if k not in unseen)
        )
        kinds = agents["kinds"]
        # on the CPU, as its values are read here (network_shapes builds the rest on the meta device)
        groups = torch.tensor(kinds if net.share_params else list(range(len(kinds))), device="cpu")
        self.group_of_agent = groups if int(groups.max()) > 0 else None
        self.agent_column = next(p.offset for p in layout.parts if p.path == ("agent",))
        self.register_buffer("action_dims_mask", None, persistent=False)
        dims = agents.get("action_dims")
        if dims is not None:  # each agent's 1 for the Box components it acts with (Head.sample's dims)
            self.action_dims_mask = (torch.arange(max(dims)) < torch.tensor(dims).unsqueeze(1)).float()
        self.critic_index = self.critic_encoder = None
        if net.centralized_critic:
            seen = ("agent", "state") if net.critic_agent_index else ("state",)
            critic_layout, self.critic_index = layout.select(seen)
            self.critic_encoder = make_encoder(
                choose_encoder("auto", critic_layout), critic_layout, net.precision
            )
        # --no-critic-agent-index with one critic for all: every agent of a game gets the same value, so a batch
        # of whole games needs the critic once per game, not once per agent (``evaluate``'s whole_games)
        shared_value = net.centralized_critic and not net.critic_agent_index and self.group_of_agent is None
        self.agents_per_game = len(kinds) if shared_value else None
        critic_features = None if self.critic_encoder is None else self.critic_encoder.features_dim
        return actor_layout, cast(int | None, critic_features)

    def _network(self, make: Callable[[], nn.Module], role: str) -> nn.Module:
        """One network per group of agents: the one itself, or the ``Grouped`` of several."""
        count = 1 if self.group_of_agent is None else int(self.group_of_agent.max()) + 1
        return make() if count == 1 else Grouped([make() for _ in range(count)])

    def _actor_input(self, obs: Tensor) -> Tensor:
        return obs[..., self.actor_index.to(obs.device)]

    def _features(self, obs: Tensor) -> Tensor:
        return super()._features(self._actor_input(obs))

    def _through(self, layers: nn.Module, features: Tensor, obs: Tensor) -> Tensor:
        """The actor's or critic's MLP on ``features``; with one network per group of agents, each row's own."""
        if not isinstance(layers, Grouped):
            return forward_skipping_hooks(layers, features)
        agent = obs[..., self.agent_column].long()
        assert self.group_of_agent is not None  # there are groups where there is a Grouped
        return layers(features, self.group_of_agent.to(obs.device)[agent])

    def _logits(self, features: Tensor, obs: Tensor) -> Tensor:
        return self._masked(self._through(self.actor, features, obs), obs)

    def _value(self, features: Tensor, obs: Tensor, whole_games: bool = False) -> Tensor:
        """V(s): from the actor's features, or with a centralized critic from the global state (which a
        recurrent agent's critic takes as it is: the state is the whole game, its memory is not needed).
        ``whole_games``: ``obs`` is whole games' rows, each game's agents in order; a value that a game's agents
        share is then computed once per game."""
        if self.critic is None:
            return features.new_zeros(features.shape[:-1])
        if whole_games and self.agents_per_game is not None:
            assert self.critic_encoder is not None and self.critic_index is not None  # a centralized critic
            games = obs.view(-1, self.agents_per_game, obs.shape[-1])[:, 0]
            state = games[:, self.critic_index.to(obs.device)]
            value = self.normalization.value(
                self._through(self.critic, self.critic_encoder.forward(state), games).squeeze(-1)
            )
            return value.repeat_interleave(self.agents_per_game)
        if self.critic_encoder is not None:
            assert self.critic_index is not None  # made with the critic's encoder
            state = obs[..., self.critic_index.to(obs.device)]
            features = self.critic_encoder.forward(state.flatten(0, -2)).view(*obs.shape[:-1], -1)
        return self.normalization.value(self._through(self.critic, features, obs).squeeze(-1))

    def _critic_nets(self) -> list[nn.Module]:
        return list(self.critic.nets) if isinstance(self.critic, Grouped) else super()._critic_nets()

    def _critic_parameters(self) -> list[nn.Parameter]:
        return [*super()._critic_parameters(), *(self.critic_encoder or nn.Identity()).parameters()]

    def _sample(self, logits: Tensor, noise: Tensor, obs: Tensor) -> tuple[Tensor, Tensor]:
        return self.head.sample(logits, noise, **self._head_rows(obs))

    def _head_rows(self, obs: Tensor) -> dict[str, Tensor]:
        """The head's per-row arguments (``Head.sample``) where agents differ in more than their actors: each
        row's group's log-std and its agent's action components."""
        if self.action_dims_mask is None and not self.log_std_per_group:
            return {}
        agent = obs[..., self.agent_column].long()
        rows = {} if self.action_dims_mask is None else {"dims": self.action_dims_mask[agent]}
        if self.log_std_per_group:
            assert self.group_of_agent is not None  # log-stds per group: there are groups
            log_std = cast(DiagGaussianHead, self.head).log_std
            rows["log_std"] = log_std[self.group_of_agent.to(obs.device)[agent]]
        return rows

    def evaluate(
        self, obs: Tensor, actions: Tensor, sequences=None, whole_games: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``ActorCritic.evaluate``; ``whole_games``: the rows are whole games (``proxima.run.multiagent.GameBatch``),
        see ``_value``."""
        if sequences is None:
            features = self._features(obs)
            logits, values = self._logits(features, obs), self._value(features, obs, whole_games)
        else:
            logits, values, _ = self.forward_sequence(obs, *sequences)
        logprobs, entropy = self.head.log_prob_entropy(logits, actions, **self._head_rows(obs))
        return logprobs, entropy, values

    def forward_sequence(self, obs: Tensor, starts: Tensor, memory) -> tuple[Tensor, Tensor, tuple]:
        features, memory = self._recur(
            self.encoder.forward(self._actor_input(obs).flatten(0, 1)), starts, memory
        )
        return self._logits(features, obs), self._value(features, obs), memory
