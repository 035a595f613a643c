"""Actor and critic networks (seed 000, detail #2; detail #13 for separate networks)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from proxima.encoders import make_encoder
from proxima.normalization import Normalization

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def run(layers: nn.Module, x: Tensor) -> Tensor:
    """Apply a ``Sequential`` (or any module) through ``forward`` directly, skipping ``__call__``'s hook dispatch.

    At a rollout's batch of a few observations, that dispatch costs as much as the matrix products; proxima
    registers no hooks, so the result is identical.
    """
    if isinstance(layers, nn.Sequential):
        for layer in layers:
            x = layer.forward(x)
        return x
    return layers.forward(x)


def layer_init(layer: nn.Linear, row_norm: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """Orthogonal weights whose rows have norm ``row_norm``, constant bias (detail #2).

    √2 suits hidden tanh/ReLU layers; 1 the critic's output; 0.01 the actor's output, so that the initial
    policy is close to uniform and its value estimates do not depend on the actor's random start.
    """
    nn.init.orthogonal_(layer.weight, row_norm)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(sizes: list[int], activation: str, out_norm: float | None = None) -> nn.Sequential:
    """Linear layers through ``sizes``; activation after every layer except a final one given ``out_norm``."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        last = out_norm is not None and i == len(sizes) - 2
        layers.append(layer_init(nn.Linear(fan_in, fan_out), out_norm if last else math.sqrt(2)))
        if not last:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class NetworkSpec:
    """Everything needed to rebuild an ``ActorCritic`` from a checkpoint (stored as JSON)."""

    obs_dim: int  # the encoder's input size, flattened (kept for agents saved before obs_shape)
    logits_dim: int
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    shared: bool = False
    critic_hidden_sizes: tuple[int, ...] | None = None  # None: the same as hidden_sizes
    critic_activation: str | None = None  # None: the same as activation
    has_critic: bool = True  # REINFORCE learns no value function; V(s) is then 0 everywhere
    norm_obs: bool = False
    norm_reward: bool = False
    norm_value: bool = False
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    encoder: str = "flatten-mlp"  # proxima.encoders: chosen from the observation space
    obs_shape: tuple[int, ...] | None = None  # None: (obs_dim,)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.obs_shape or (self.obs_dim,)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> NetworkSpec:
        sizes = {
            k: tuple(data[k])
            for k in ("hidden_sizes", "critic_hidden_sizes", "obs_shape")
            if data.get(k) is not None
        }
        return cls(**{**data, **sizes})


class ActorCritic(nn.Module):
    """Actor (policy logits) and critic (state value) on the features of an observation encoder.

    By default they are separate ``hidden_sizes`` MLPs (detail #13: better on simple envs); with
    ``shared=True`` they share one trunk and differ only in their output layers.
    """

    def __init__(self, spec: NetworkSpec, head: nn.Module):
        super().__init__()
        self.spec = spec
        self.head = head
        self.normalization = Normalization(
            spec.input_shape,
            spec.norm_obs,
            spec.norm_reward,
            spec.clip_obs,
            spec.clip_reward,
            norm_value=spec.norm_value and spec.has_critic,
        )
        self.encoder = make_encoder(spec.encoder, spec.input_shape)
        features = self.encoder.features_dim
        sizes = [features, *spec.hidden_sizes]
        critic_sizes = [features, *(spec.critic_hidden_sizes or spec.hidden_sizes)]
        critic_activation = spec.critic_activation or spec.activation
        if spec.shared:
            self.trunk = mlp(sizes, spec.activation)
            self.actor = layer_init(nn.Linear(sizes[-1], spec.logits_dim), 0.01)
            self.critic = layer_init(nn.Linear(sizes[-1], 1), 1.0) if spec.has_critic else None
        else:
            self.trunk = nn.Identity()
            self.actor = mlp([*sizes, spec.logits_dim], spec.activation, out_norm=0.01)
            self.critic = (
                mlp([*critic_sizes, 1], critic_activation, out_norm=1.0) if spec.has_critic else None
            )

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Policy logits ``(B, logits_dim)`` and values ``(B,)`` in one pass over the batch."""
        features = self._features(obs)
        return run(self.actor, features), self._value(features)

    def _features(self, obs: Tensor) -> Tensor:
        """The encoder's features, through the shared trunk if there is one."""
        return run(self.trunk, self.encoder.forward(obs))

    def _value(self, features: Tensor) -> Tensor:
        if self.critic is None:
            return features.new_zeros(features.shape[0])
        return self.normalization.value(run(self.critic, features).squeeze(-1))

    def value(self, obs: Tensor) -> Tensor:
        return self._value(self._features(obs))

    @torch.no_grad()
    def update_value_normalization(self, targets: Tensor) -> None:
        """Merge ``targets`` into the critic's statistics (``norm_value``) without moving any value it predicts.

        From the second call on, the critic's output layer is rescaled to absorb the change of mean and std
        (PopArt's "preserving outputs precisely", van Hasselt et al. 2016). Otherwise every update would shift
        all values by the change of the statistics, and late in a run, with the learning rate annealed to
        almost 0, nothing would undo that shift: seed 000's probe 2 then misses its ±1e-4 by 2e-3.
        """
        norm = self.normalization
        if not norm.norm_value:
            return
        first = bool(norm.value_rms.count < 1)  # only the prior so far
        old_mean, old_std = norm.value_mean.clone(), norm.value_std.clone()
        norm.update_value(targets)
        if first:  # the initial critic's outputs are random: nothing learned to preserve, and keeping them
            return  # would leave it as far from targets of about 100 as seed 000's critic
        last = self.critic if isinstance(self.critic, nn.Linear) else self.critic[-1]
        # (W h + b) * old_std + old_mean == (W' h + b') * std + mean
        last.weight.mul_(old_std / norm.value_std)
        last.bias.mul_(old_std).add_(old_mean - norm.value_mean).div_(norm.value_std)

    def param_groups(self, learning_rate: float, value_learning_rate: float | None) -> list[dict]:
        """Parameters for the optimizer: one group, or the critic apart with its own rate.

        Adam keeps its statistics per parameter, so two groups in one Adam step exactly as two separate Adam
        optimizers would (seed 002's set-up), with one ``zero_grad``/``step`` and one LR schedule for both.
        """
        if value_learning_rate is None:
            return [{"params": list(self.parameters()), "lr": learning_rate}]
        critic = list(self.critic.parameters())
        critic_ids = {id(p) for p in critic}
        policy = [p for p in self.parameters() if id(p) not in critic_ids]
        return [{"params": policy, "lr": learning_rate}, {"params": critic, "lr": value_learning_rate}]

    def logits(self, obs: Tensor) -> Tensor:
        return run(self.actor, self._features(obs))

    def act(self, obs: Tensor, uniforms: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Sample actions for a batch of observations: ``(actions, log_probs, values)``; ``uniforms``: each
        row's random draws (``head.noise_draws`` per row), where not torch's global generator."""
        logits, values = self.forward(obs)
        actions, logprobs = self.head.sample(logits, uniforms)
        return actions, logprobs, values

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log-probs of stored actions, entropies and values under the current parameters."""
        logits, values = self.forward(obs)
        logprobs, entropy = self.head.log_prob_entropy(logits, actions)
        return logprobs, entropy, values

    @torch.no_grad()
    def predict(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        """Actions for raw environment observations (normalized here with the frozen statistics); the other
        methods take observations already normalized, as the rollout stores them."""
        logits = self.logits(self.normalization.obs(obs))
        return self.head.mode(logits) if deterministic else self.head.sample(logits)[0]
