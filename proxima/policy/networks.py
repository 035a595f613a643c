"""Actor and critic networks (their initialization and separation: details 2 and 13 in docs/SEEDS.md)."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Literal, cast

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from proxima.base.errors import UserError, read_only
from proxima.base.files import Shapes, shapes_of
from proxima.base.spaces import ObsLayout
from proxima.policy.distributions import Head, make_head
from proxima.policy.encoders import PRECISIONS, choose_encoder, layer_init, make_encoder
from proxima.policy.normalization import Normalization

# --activation: torch.nn's elementwise activations, by name in snake case (leaky_relu: nn.LeakyReLU). The
# softmax family, GLU (it halves its input) and attention mix units or change shapes: no hidden activation.
_NOT_ELEMENTWISE = {"GLU", "LogSoftmax", "MultiheadAttention", "Softmax", "Softmax2d", "Softmin"}
_SNAKE = {"LeakyReLU": "leaky_relu", "LogSigmoid": "log_sigmoid"}  # the rest are one word, lower-cased


def _no_args_needed(cls: type) -> bool:
    params = inspect.signature(cls).parameters.values()
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


ACTIVATIONS: dict[str, type[nn.Module]] = {
    _SNAKE.get(name, name.lower()): getattr(nn, name)
    for name in torch.nn.modules.activation.__all__
    if name not in _NOT_ELEMENTWISE and _no_args_needed(getattr(nn, name))
}


def activation_name(name: str) -> str | None:
    """The ``ACTIVATIONS`` key ``name`` means (case and underscores aside: LeakyReLU, leakyrelu), or None."""
    key = name.lower().replace("_", "")
    return next((k for k in ACTIVATIONS if k.replace("_", "") == key), None)


def check_activation(name: str, field: str = "activation") -> str:
    """The ``ACTIVATIONS`` key ``name`` means, or a ``UserError`` listing them."""
    key = activation_name(name) if isinstance(name, str) else None
    if key is None:
        raise UserError(
            f"{field} {name!r} is not a torch.nn activation; accepted: {', '.join(sorted(ACTIVATIONS))}"
        )
    return key


def hidden_gain(activation: str) -> float:
    """The row norm of a hidden layer's orthogonal weights, for the activation after it.

    √2 for tanh and ReLU, as detail 2 has it (CleanRL uses √2 for tanh too, not torch's 5/3); for the others,
    ``torch.nn.init.calculate_gain`` where it knows the activation (sigmoid 1, selu 3/4, leaky_relu
    √(2 / (1 + 0.01²)) for nn.LeakyReLU's default slope), and √2 for the rest: ReLU's for the ReLU-like ones
    (elu, gelu, silu, mish, ...), and what tanh has here for the saturating ones (hardtanh, softsign).
    """
    name = activation_name(activation)
    if name in ("sigmoid", "selu", "leaky_relu"):
        return nn.init.calculate_gain(cast(Literal["sigmoid", "selu", "leaky_relu"], name))
    return math.sqrt(2)


def forward_skipping_hooks(layers: nn.Module, x: Tensor) -> Tensor:
    """Apply a ``Sequential`` (or any module) through ``forward`` directly, not ``__call__``: forward hooks and
    pre-hooks registered on ``layers`` or their layers do NOT run (nor do global module hooks).

    ``ActorCritic`` applies its trunk, actor and critic this way because at a rollout's batch of a few
    observations ``__call__``'s dispatch is a sizeable share of a step (benchmarks/forward_dispatch.py measures
    it). proxima registers no hooks, so the numbers are those of ``layers(x)``. To watch a layer's output, wrap
    its ``forward`` instead of registering a hook. The encoder's ``forward`` is called directly too, but the
    submodules it calls (a CNN's layers) are called normally, and their hooks do run.
    """
    if isinstance(layers, nn.Sequential):
        for layer in layers:
            x = layer.forward(x)
        return x
    return layers.forward(x)


def initialized(layer: nn.Linear, row_norm: float, init: str) -> nn.Linear:
    """``layer_init(layer, row_norm)`` for ``--init orthogonal``; ``layer`` as it started itself for ``torch``."""
    return layer_init(layer, row_norm) if init == "orthogonal" else layer


class Bf16Linear(nn.Linear):
    """A hidden layer of an MLP agent trained with ``--precision bfloat16``: its product computes under autocast
    (bf16 inputs and weights, float32 accumulation) and its output returns to float32, so the weights, their
    gradients, the activations and Adam stay float32. On a CPU with AVX512-BF16 or AMX the products of large
    layers take about half the time (benchmarks/mlp_precision.py)."""

    def forward(self, x: Tensor) -> Tensor:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            return super().forward(x).float()


def mlp(
    sizes: list[int],
    activation: str,
    out_norm: float | None = None,
    layer_norm: bool = False,
    precision: str = "float32",
    init: str = "orthogonal",
) -> nn.Sequential:
    """Linear layers through ``sizes``; activation after every layer except a final one given ``out_norm``.

    ``init``: ``initialized``'s (``--init``).

    ``layer_norm``: a LayerNorm between each hidden layer and its activation (Ba et al. 2016 normalize the
    summed inputs, before the nonlinearity). It draws no random numbers, so the Linear layers' weights are
    those of the network without it. ``precision`` ``"bfloat16"``: the hidden layers are ``Bf16Linear``s (an
    output layer given ``out_norm`` stays float32: it is small, and a value rounded to 8 bits would be noisy)."""
    act, gain = ACTIVATIONS[check_activation(activation)], hidden_gain(activation)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        out = out_norm if i == len(sizes) - 2 else None  # the output layer's row norm; None: a hidden layer
        linear = Bf16Linear if precision == "bfloat16" and out is None else nn.Linear
        layers.append(initialized(linear(fan_in, fan_out), gain if out is None else out, init))
        if out is None:
            if layer_norm:
                layers.append(nn.LayerNorm(fan_out))
            layers.append(act())
    return nn.Sequential(*layers)


def lstm_by_steps(
    lstm: nn.LSTM, x: Tensor, starts: Tensor, h: Tensor, c: Tensor
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """``lstm`` over ``x`` ``(T, E, features)`` from the memory ``(h, c)`` (each ``(layers, E, hidden)``), zeroed
    for each env where ``starts[t]`` is 1, as ``ActorCritic.forward_sequence`` runs it: nn.LSTM's equations written
    out one step at a time. ``torch.func.vmap`` has no batching rule for nn.LSTM's fused kernel, but batches
    these ops over the stacked LSTMs of ``--num-seeds``; they round differently from the kernel."""
    outputs: list[Tensor] = []
    size = lstm.hidden_size
    weights = [
        [getattr(lstm, f"{name}_l{k}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        for k in range(lstm.num_layers)
    ]
    # the first layer's input products (and both biases) for every step at once; the others depend on the step
    # before. As few ops a step as can be: under vmap each op costs far more than its arithmetic.
    w_ih, _, b_ih, b_hh = weights[0]
    # (unbind and chunk, not indexing: each index's backward would allocate the whole tensor's gradient)
    first = torch.addmm(b_ih + b_hh, x.flatten(0, 1), w_ih.t()).view(*x.shape[:2], -1).unbind(0)
    hs, cs, keeps = list(h.unbind(0)), list(c.unbind(0)), (1.0 - starts).unsqueeze(-1).unbind(0)
    for t, keep in enumerate(keeps):
        inputs = first[t]  # the first layer's, already projected; each later layer's is the output below it
        for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
            projected = inputs if k == 0 else torch.addmm(b_ih + b_hh, inputs, w_ih.t())
            gates = torch.addmm(projected, hs[k] * keep, w_hh.t())
            i, f, _, o = torch.sigmoid(gates).chunk(4, dim=-1)
            cs[k] = torch.addcmul(f * (cs[k] * keep), i, torch.tanh(gates[..., 2 * size : 3 * size]))
            hs[k] = inputs = o * torch.tanh(cs[k])
        outputs.append(inputs)
    return torch.stack(outputs), (torch.stack(hs), torch.stack(cs))


@read_only
@dataclass(frozen=True)
class NetworkSettings:
    """the networks and normalization"""

    encoder: str = "auto"
    """what turns observations into features for the MLPs: auto (flatten-mlp for vectors, nature-cnn for images,
    multi-input for Dict and other spaces), the name of an encoder registered with
    proxima.policy.encoders.register_encoder, or a class as module:ClassName (from Python, the class itself);
    docs/NETWORKS.md"""
    actor_critic: str | None = None
    """your own actor and critic instead of proxima's MLPs, as the PPO tutorial's Agent: an nn.Module class as
    module:ClassName (from Python, the class itself), built with an object that has the env's
    single_observation_space, single_action_space and num_envs; its actor maps the flattened observations to the
    logits, its critic to the value; --hidden-sizes and the other MLP settings then do not apply
    (docs/NETWORKS.md)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy network (and of the shared trunk with --shared-network); none: the heads
    are linear layers on the encoder's features (the Nature CNN's 512, as for Atari)"""
    activation: str = "tanh"
    """activation of the policy network's hidden layers: any torch.nn activation by name (tanh, relu, elu, gelu,
    silu, leaky_relu, selu, softplus, mish, ...)"""
    critic_hidden_sizes: tuple[int, ...] | None = None
    """hidden layer sizes of the value network (default: the same as --hidden-sizes)"""
    critic_activation: str | None = None
    """activation of the value network's hidden layers (default: the same as --activation)"""
    layer_norm: bool = False
    """a LayerNorm after each hidden Linear layer of the actor's, the critic's and the shared MLPs, before its
    activation"""
    init: Literal["orthogonal", "torch"] = "orthogonal"
    """how the Linear layers of the actor's, the critic's and the shared MLPs start: orthogonal (detail 2: scaled
    by the activation's gain in hidden layers, by 0.01 in the actor's output layer, 1 in the critic's; zero
    biases) or torch (nn.Linear's own default, weights and biases uniform within 1/sqrt(fan_in), as BenchMARL's
    and TorchRL's MLPs start); an encoder's and the LSTM's layers keep their own"""
    shared_network: bool = False
    """let the actor and critic share one hidden trunk instead of two separate networks"""
    centralized_critic: bool = False
    """multi-agent envs: the critic sees the global state (MAPPO; --algo mappo sets it), not the agent's own
    observation; the actor always sees only its own (docs/MULTIAGENT.md)"""
    share_params: bool = True
    """multi-agent envs: agents of a kind share one actor and one critic, told apart by their one-hot index;
    --no-share-params gives each agent its own (agents of different kinds never share)"""
    actor_agent_index: bool = True
    """multi-agent envs: the actor sees the agent's one-hot index beside its own observation, so that agents
    sharing one actor can act differently; --no-actor-agent-index: its own observation alone, as BenchMARL's
    actors (with IPPO the critic, which works on the actor's features, then goes without it too)"""
    critic_agent_index: bool = True
    """multi-agent envs: the critic sees the agent's one-hot index (MAPPO's beside the global state, so each
    agent of a game gets a value of its own); --no-critic-agent-index: without it. A centralized critic then
    gives a game's agents one value, as BenchMARL's MAPPO critic, which the update computes once per game
    instead of once per agent. An IPPO critic works on the actor's features: without the index only with
    --no-actor-agent-index"""
    norm_obs: bool = False
    """normalize observations by their running mean and std, then clip them (saved with the model)"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return, then clip them"""
    norm_value: bool = True
    """let the critic predict its targets standardized by their running mean and std (values stay in reward
    units); --no-norm-value gives the PPO tutorial's critic, which saturates on CartPole's returns of about 100"""
    value_norm_horizon: int = 10
    """with --norm-value: the value targets' statistics weigh each update's batch at least 1/N and forget older
    batches geometrically (PopArt's moving average), so that the critic's scale follows the spread its targets
    have now; 0: every target since the start counts equally (docs/HEALTH.md, explained_variance)"""
    clip_obs: float = 10.0
    """the bound of normalized observations"""
    clip_reward: float = 10.0
    """the bound of scaled rewards"""
    recurrent: Literal["lstm"] | None = None
    """lstm: an LSTM between the encoder and the heads, its state carried across steps (recurrent PPO); the
    update then replays whole env sequences, in minibatches of envs"""
    lstm_hidden_size: int = 128
    """the LSTM's hidden size (with --recurrent lstm)"""
    lstm_layers: int = 1
    """the number of stacked LSTM layers (with --recurrent lstm)"""
    action_dist: Literal["gaussian", "beta", "tanh-gaussian"] = "gaussian"
    """the policy's distribution over Box actions: gaussian (a diagonal Gaussian whose draws the env clips to the
    bounds), beta (a Beta per component, stretched to the bounds) or tanh-gaussian (a Gaussian squashed into the
    bounds by tanh, its std a function of the state). The last two need finite bounds: every draw is a valid
    action, and the log-probs are those of the actions taken. The other action spaces have one each"""
    precision: Literal["float32", "bfloat16", "auto"] = "float32"
    """what the bulk of the network computes in: bfloat16 runs a CNN encoder's convolutions, or for an agent
    without images its MLPs' hidden layers, under autocast (bf16 products; float32 weights, gradients, output
    layers, losses and Adam); auto picks bfloat16 for a CNN where the hardware computes it natively (a CPU with
    AVX512-BF16 or AMX, a GPU of compute capability 8.0+), and float32 elsewhere and for agents without a CNN.
    docs/ATARI.md and docs/NETWORKS.md have the speed and learning measured"""

    def validate(self) -> None:
        if self.value_norm_horizon < 0:
            raise UserError(
                f"value_norm_horizon must be 0 (every target counts) or a positive number of updates, got {self.value_norm_horizon}"
            )
        if self.init not in ("orthogonal", "torch"):
            raise UserError(f"init must be orthogonal or torch, got {self.init!r}")
        if self.precision not in (*PRECISIONS, "auto"):
            raise UserError(f"precision must be float32, bfloat16 or auto, got {self.precision!r}")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise UserError(
                f"encoder must be auto, a registered encoder's name, module:ClassName or an nn.Module class, "
                f"got {self.encoder!r}"
            )  # which names exist and fit the env is known once the env is made (encoders.choose_encoder)
        check_activation(self.activation)
        if self.critic_activation is not None:
            check_activation(self.critic_activation, "critic_activation")
        for name in ("clip_obs", "clip_reward"):
            if not getattr(self, name) > 0:
                raise UserError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("hidden_sizes", "critic_hidden_sizes"):
            sizes = getattr(self, name)
            if sizes and min(sizes) < 1:
                raise UserError(
                    f"{name} must be positive layer widths (none: the heads sit on the encoder's features), got {sizes}"
                )
        if self.shared_network:
            given = [
                f"--{n.replace('_', '-')}"
                for n in ("critic_hidden_sizes", "critic_activation")
                if getattr(self, n) is not None
            ]
            if given:
                raise UserError(
                    f"--shared-network gives the critic the actor's trunk and a linear head, so {given[0]} would "
                    f"be ignored; drop {given[0]} or --shared-network"
                )
        if self.centralized_critic and self.shared_network:
            raise UserError(
                "centralized_critic (--algo mappo) needs separate actor and critic networks: the actor must not "
                "see the global state; drop --shared-network"
            )
        if self.lstm_hidden_size < 1 or self.lstm_layers < 1:
            raise UserError(
                f"lstm_hidden_size and lstm_layers must be positive, got {self.lstm_hidden_size} and {self.lstm_layers}"
            )
        if self.actor_critic is not None:
            self._check_actor_critic()

    def _check_actor_critic(self) -> None:
        """A ``UserError`` for a setting that ``actor_critic``, which gives the whole actor and critic, leaves
        without effect, or a network it cannot be part of."""
        if not isinstance(self.actor_critic, str) or ":" not in self.actor_critic:
            raise UserError(
                "actor_critic must be an nn.Module class with actor and critic attributes, or its "
                f"module:ClassName, got {self.actor_critic!r}"
            )
        defaults = NetworkSettings()
        mlp_settings = (
            "hidden_sizes",
            "activation",
            "critic_hidden_sizes",
            "critic_activation",
            "layer_norm",
        )
        ignored = [n for n in (*mlp_settings, "init") if getattr(self, n) != getattr(defaults, n)]
        if self.precision == "bfloat16":
            ignored.append("precision")
        if ignored:
            flag = f"--{ignored[0].replace('_', '-')}"
            raise UserError(
                f"--actor-critic gives the whole actor and critic, so {flag} (of proxima's own MLPs) would be "
                f"ignored; drop {flag}, or build it into {self.actor_critic}"
            )
        unsupported = {
            "shared_network": "a shared trunk (--shared-network)",
            "recurrent": "an LSTM (--recurrent)",
            "centralized_critic": "a centralized critic (--centralized-critic, --algo mappo)",
        }
        given = [words for name, words in unsupported.items() if getattr(self, name)]
        if given:
            raise UserError(
                f"--actor-critic takes a separate actor and critic on the observations, without {given[0]} "
                "between: drop it, or use proxima's own networks"
            )
        if self.encoder not in ("auto", "flatten-mlp"):
            raise UserError(
                f"--actor-critic's actor and critic take the observations flattened (flatten-mlp), so --encoder "
                f"{self.encoder} would be ignored; drop --encoder"
            )

    @classmethod
    def from_json(cls, data: dict) -> NetworkSettings:
        """From ``asdict``'s output, whole: a setting that is missing is refused, never given today's default
        (an agent would then act with another network than it was trained with)."""
        _whole(cls, data)
        sizes = {
            k: tuple(data[k]) for k in ("hidden_sizes", "critic_hidden_sizes") if data.get(k) is not None
        }
        return cls(**{**data, **sizes})


@dataclass(frozen=True)
class NetworkSpec:
    """Everything needed to rebuild an ``ActorCritic`` from a checkpoint (stored as JSON): the run's network
    settings, and what the env and the algorithm decide (the logits' size, the observations' shape and layout,
    whether there is a critic)."""

    logits_dim: int
    obs_shape: tuple[int, ...]  # the shape of one observation tensor, as the encoder takes it
    network: NetworkSettings = field(default_factory=NetworkSettings)
    has_critic: bool = True  # REINFORCE learns no value function; V(s) is then 0 everywhere
    # ObsLayout.to_json() of packed observations (proxima.base.spaces); None: Box
    obs_layout: dict | None = None
    # a multi-agent env's AgentSpec.to_json() (proxima.envs.interface); None: one agent
    agents: dict | None = None

    def layout(self) -> ObsLayout:
        if self.obs_layout is not None:
            return ObsLayout.from_json(self.obs_layout)
        if self.obs_shape == ():  # saved before a scalar Box was packed (and then only with an encoder class)
            raise UserError(
                "this agent takes observations of shape (), saved in an older format; train it again"
            )
        return ObsLayout(gym.spaces.Box(-np.inf, np.inf, shape=self.obs_shape))  # shape is all a Box needs

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> NetworkSpec:
        _whole(cls, data)
        network = NetworkSettings.from_json(data["network"])
        return cls(**{**data, "network": network, "obs_shape": tuple(data["obs_shape"])})


def _whole(cls, data: dict) -> None:
    """A ``ValueError`` naming the first field of the dataclass ``cls`` that ``data`` lacks (or the first key it
    holds that is none of them)."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} must be a JSON object, got {data!r}")
    names = [f.name for f in fields(cls)]
    missing, unknown = [n for n in names if n not in data], sorted(set(data) - set(names))
    if missing or unknown:
        raise ValueError(
            f"{missing[0]!r} is missing" if missing else f"{unknown[0]!r} is not a setting of it"
        )


def make_policy(spec: NetworkSpec, head: Head, envs=None) -> ActorCritic:
    """The model a run, a saved agent or an export builds from ``spec``: the one place that chooses it, so that
    a multi-agent policy (``spec.agents`` not None) and a user's actor and critic (``actor_critic``) are classes
    of their own. ``envs``: what a user's class is built with, an object with ``single_observation_space``,
    ``single_action_space`` and ``num_envs`` (``proxima.policy.user.EnvSpaces``, or the run's vector env)."""
    # they build on this module's ActorCritic
    from proxima.policy.multiagent import MultiAgentActorCritic
    from proxima.policy.user import UserActorCritic

    if spec.network.actor_critic is not None:
        return UserActorCritic(spec, head, envs)
    return ActorCritic(spec, head) if spec.agents is None else MultiAgentActorCritic(spec, head)


def network_shapes(spec: NetworkSpec, action_space: gym.Space) -> Shapes | None:
    """The state of ``make_policy(spec, make_head(action_space, ...))`` as ``proxima.base.files.shapes_of`` gives it
    (each tensor's shape and dtype), from the network built on the meta device: nothing is allocated, so a
    spec of any size (a file edited to ask for 40 GB) costs nothing to check before the real one is built.
    None where it cannot be built there (a user's encoder that reads its own tensors' values as it is made):
    the real network's strict ``load_state_dict`` is then the check."""
    from proxima.policy.user import EnvSpaces  # it builds on this module's ActorCritic

    # a user's class gets the observations' shape, which is all that shapes can depend on (not their bounds)
    envs = EnvSpaces(spec.layout().space, action_space)
    try:
        with torch.device("meta"):
            model = make_policy(spec, make_head(action_space, spec.network.action_dist), envs)
    except (RuntimeError, NotImplementedError):
        return None
    return shapes_of(model.state_dict())


class ActorCritic(nn.Module):
    """Actor (policy logits) and critic (state value) on the features of an observation encoder.

    By default they are separate ``hidden_sizes`` MLPs (detail 13, docs/SEEDS.md: better on simple envs); with
    ``shared=True`` they share one trunk and differ only in their output layers. One agent per row:
    ``proxima.policy.multiagent.MultiAgentActorCritic`` overrides the seams below (``_inputs``, ``_network``,
    ``_features``, ``_logits``, ``_value``, ``_sample``, ...) for rows that are agents of a game.

    V(s) in the rewards' units is ``value(obs)``. ``critic`` is the critic's network alone: with ``norm_value``
    (the default) its output is the value standardized by the running mean and std of the value targets, so
    ``critic(obs)`` is about 0 where ``value(obs)`` is 1 (probe 1; docs/tutorials/probes.md). ``value`` maps
    it back (``normalization.value``); without ``norm_value`` the two are equal.
    """

    # --num-seeds: the LSTM's recurrence in plain torch ops (``lstm_by_steps``), which vmap batches over seeds
    lstm_by_steps = False

    # set in __init__, declared for the type checker (nn.Module's attributes read as Tensor | Module)
    lstm: nn.LSTM | None
    trunk: nn.Module
    actor: nn.Module
    critic: nn.Module | None
    """the critic's network on the encoder's features: with ``norm_value`` its output is the value standardized
    by the targets' running mean and std, not V(s), which is ``value(obs)``; None without a value function
    (REINFORCE)"""

    def __init__(self, spec: NetworkSpec, head: Head):
        super().__init__()
        self.spec = spec
        self.head = head
        net, full = spec.network, spec.layout()
        self.normalization = Normalization(
            spec.obs_shape,
            net.norm_obs,
            net.norm_reward,
            net.clip_obs,
            net.clip_reward,
            norm_value=net.norm_value and spec.has_critic,
            elements=full.norm_elements(),
        )
        # before the encoder: a subclass's networks of its own draw their initial weights first
        layout, critic_features = self._inputs(full)
        self.encoder = make_encoder(choose_encoder(net.encoder, layout), layout, net.precision)
        features = cast(int, self.encoder.features_dim)  # make_encoder checked it is a positive int
        self.lstm = None
        if net.recurrent:  # orthogonal weights and zero biases, as CleanRL's ppo_atari_lstm.py
            self.lstm = nn.LSTM(features, net.lstm_hidden_size, net.lstm_layers)
            for name, param in self.lstm.named_parameters():
                nn.init.orthogonal_(param, 1.0) if "weight" in name else nn.init.constant_(param, 0.0)
            features = net.lstm_hidden_size
        # Action masking: the mask is a part of the packed observation (proxima.base.spaces)
        mask = full.mask_part
        self.mask_span = mask.span if mask is not None else None
        sizes = [features, *net.hidden_sizes]
        critic_sizes = [critic_features or features, *(net.critic_hidden_sizes or net.hidden_sizes)]
        critic_activation = net.critic_activation or net.activation
        # --precision bfloat16 is the convolutions' where there are images, else the MLPs'
        precision = "float32" if full.has_images else net.precision
        layers = functools.partial(mlp, layer_norm=net.layer_norm, precision=precision, init=net.init)
        if net.shared_network:
            self.trunk = layers(sizes, net.activation)
            self.actor = initialized(nn.Linear(sizes[-1], spec.logits_dim), 0.01, net.init)
            self.critic = initialized(nn.Linear(sizes[-1], 1), 1.0, net.init) if spec.has_critic else None
        else:
            self.trunk = nn.Identity()
            self.actor = self._network(
                lambda: layers([*sizes, spec.logits_dim], net.activation, 0.01), "actor"
            )
            self.critic = None
            if spec.has_critic:
                self.critic = self._network(
                    lambda: layers([*critic_sizes, 1], critic_activation, 1.0), "critic"
                )

    def _inputs(self, layout: ObsLayout) -> tuple[ObsLayout, int | None]:
        """The layout of what the encoder takes, and the critic's input size where it is not the encoder's (or
        the LSTM's) features (None). A row is one agent's observation: all of it, the critic on its features."""
        return layout, None

    def _network(self, make: Callable[[], nn.Module], role: str) -> nn.Module:
        """The actor's or the critic's network (``role``: "actor" or "critic", without a shared trunk),
        ``make``'s."""
        return make()

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Policy logits ``(B, logits_dim)`` and values ``(B,)`` in one pass over a batch of observations
        already normalized (as the rollout stores them).

        This is not the policy: it skips the observation normalization and returns logits (a Gaussian's
        unclipped mean), so tracing it by hand gives a file that disagrees with ``predict``. Use
        ``Agent.predict(obs, deterministic=True)``, or ``proxima.export`` for a file of that (docs/EXPORT.md)."""
        features = self._features(obs)
        return self._logits(features, obs), self._value(features, obs)

    def _features(self, obs: Tensor) -> Tensor:
        """The encoder's features, through the shared trunk if there is one."""
        if self.lstm is not None:  # its heads expect the LSTM's outputs, which need the memory
            raise RuntimeError("a recurrent agent's forward passes take its memory: use forward_sequence")
        return forward_skipping_hooks(self.trunk, self.encoder.forward(obs))

    def _logits(self, features: Tensor, obs: Tensor) -> Tensor:
        """The actor's logits of ``features`` (of ``obs``), masked."""
        return self._masked(forward_skipping_hooks(self.actor, features), obs)

    def _masked(self, logits: Tensor, obs: Tensor) -> Tensor:
        """Logits with masked actions at the lowest finite float: their probability is exactly 0 in softmax,
        and 0 * log(p) stays 0 in the entropy, which is then over the valid actions only (-inf would give
        NaN there). A MultiDiscrete's per-dimension masks line up with its per-dimension logits."""
        if self.mask_span is None:
            return logits
        valid = obs[..., self.mask_span] > 0
        return logits.masked_fill(~valid, torch.finfo(logits.dtype).min)

    def _value(self, features: Tensor, obs: Tensor) -> Tensor:
        """V(s) from the features of ``obs``."""
        if self.critic is None:
            return features.new_zeros(features.shape[:-1])
        return self.normalization.value(forward_skipping_hooks(self.critic, features).squeeze(-1))

    def value(self, obs: Tensor) -> Tensor:
        """V(s) ``(B,)`` in the rewards' units, for a batch of observations already normalized (as the rollout
        stores them; ``normalization.obs`` normalizes raw ones with ``--norm-obs``). Not ``critic(obs)``, which
        with ``norm_value`` is in standardized units; 0 everywhere without a critic (REINFORCE)."""
        return self._value(self._features(obs), obs)

    @torch.no_grad()
    def update_value_normalization(self, targets: Tensor, horizon: int = 0) -> None:
        """Merge ``targets`` into the critic's statistics (``norm_value``) without moving any value it predicts.

        From the second call on, the critic's output layer is rescaled to absorb the change of mean and std
        (PopArt's "preserving outputs precisely", van Hasselt et al. 2016). Otherwise every update would shift
        all values by the change of the statistics, and late in a run, with the learning rate annealed to
        almost 0, nothing would undo that shift: probe 2 then misses its ±1e-4 by 2e-3.
        """
        norm = self.normalization
        if not norm.norm_value:
            return
        first = bool(norm.value_rms.count < 1)  # only the prior so far
        old_mean, old_std = norm.value_mean.clone(), norm.value_std.clone()
        norm.update_value(targets, horizon)
        if first:  # the initial critic's outputs are random: nothing learned to preserve, and keeping them
            return  # would leave it as far from targets of about 100 as an unnormalized critic
        for net in self._critic_nets():
            # an MLP's output layer, or the output layer on the shared trunk
            last = cast(nn.Linear, net[-1] if isinstance(net, nn.Sequential) else net)
            # (W h + b) * old_std + old_mean == (W' h + b') * std + mean
            last.weight.mul_(old_std / norm.value_std)
            last.bias.mul_(old_std).add_(old_mean - norm.value_mean).div_(norm.value_std)

    def _critic_nets(self) -> list[nn.Module]:
        """The networks whose output layers are values (``update_value_normalization``)."""
        assert self.critic is not None  # norm_value is on only with a critic
        return [self.critic]

    def _critic_parameters(self) -> list[nn.Parameter]:
        """What the critic's learning rate moves (``param_groups``)."""
        assert self.critic is not None  # config.py refuses a value learning rate without one
        return list(self.critic.parameters())

    def param_groups(self, learning_rate: float, value_learning_rate: float | None) -> list[dict]:
        """Parameters for the optimizer: one group, or the critic apart with its own rate.

        Adam keeps its statistics per parameter, so two groups in one Adam step exactly as two separate Adam
        optimizers would (the PPO-from-scratch walk-through's set-up, docs/SEEDS.md), with one
        ``zero_grad``/``step`` and one LR schedule for both.
        """
        if value_learning_rate is None:
            return [{"params": list(self.parameters()), "lr": learning_rate}]
        critic = self._critic_parameters()
        critic_ids = {id(p) for p in critic}
        policy = [p for p in self.parameters() if id(p) not in critic_ids]
        return [{"params": policy, "lr": learning_rate}, {"params": critic, "lr": value_learning_rate}]

    def logits(self, obs: Tensor) -> Tensor:
        return self._logits(self._features(obs), obs)

    def act(
        self, obs: Tensor, noise: Tensor | torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Sample actions for a batch of observations: ``(actions, log_probs, values)``; ``noise``: the head's
        draws for these rows (``Head.noise``), or the generator to draw them from (the run's own)."""
        logits, values = self.forward(obs)
        actions, logprobs = self._sample(logits, _noise(self.head, logits, noise), obs)
        return actions, logprobs, values

    def _sample(self, logits: Tensor, noise: Tensor, obs: Tensor) -> tuple[Tensor, Tensor]:
        """The head's actions and log-probs of ``logits`` (of ``obs``) from its draws ``noise``."""
        return self.head.sample(logits, noise)

    def evaluate(self, obs: Tensor, actions: Tensor, sequences=None) -> tuple[Tensor, Tensor, Tensor]:
        """Log-probs of stored actions, entropies and values under the current parameters. ``sequences``:
        ``(starts, memory)`` for a recurrent agent's minibatch of whole env sequences, ``obs`` ``(T, E, ...)``."""
        if sequences is None:
            logits, values = self.forward(obs)
        else:
            logits, values, _ = self.forward_sequence(obs, *sequences)
        logprobs, entropy = self.head.log_prob_entropy(logits, actions)
        return logprobs, entropy, values

    @torch.no_grad()
    def predict(
        self, obs: Tensor, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> Tensor:
        """Actions for raw environment observations (normalized here with the frozen statistics); the other
        methods take observations already normalized, as the rollout stores them. Sampled actions draw from
        ``generator`` (None: torch's global one)."""
        obs = self.normalization.obs(obs)
        logits = self.logits(obs)
        if deterministic:
            return self.head.mode(logits)
        return self._sample(logits, self.head.noise(logits, generator), obs)[0]

    # --- recurrent agents (--recurrent lstm): the LSTM's state is the "memory", (h, c), each (layers, N, hidden)

    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]:
        shape = (self.spec.network.lstm_layers, n, self.spec.network.lstm_hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward_sequence(self, obs: Tensor, starts: Tensor, memory) -> tuple[Tensor, Tensor, tuple]:
        """Logits ``(T, E, logits_dim)`` and values ``(T, E)`` of ``T`` steps of ``E`` envs, from the memory
        before the first step; ``starts[t]`` = 1 where ``obs[t]`` begins an episode, whose memory is zeroed first.
        Returns the memory after the last step too."""
        features, memory = self._recur(self.encoder.forward(obs.flatten(0, 1)), starts, memory)
        return self._logits(features, obs), self._value(features, obs), memory

    def _recur(self, x: Tensor, starts: Tensor, memory) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """The encoder's features ``x`` ``(T * E, features)`` through the LSTM from ``memory`` and the shared
        trunk: the heads' features ``(T, E, ...)``, and the memory after the last step."""
        assert self.lstm is not None  # the memory is the LSTM's
        steps, envs = starts.shape
        x = x.view(steps, envs, -1)
        h, c = memory
        if self.lstm_by_steps:
            out, (h, c) = lstm_by_steps(self.lstm, x, starts, h, c)
        else:
            # The memory is zeroed where an episode starts, so the sequence is cut there; each piece between
            # cuts is one call of the LSTM, which runs its steps in C++ (a step-by-step Python loop is 10x
            # slower). (a rollout step is one piece: no search, and no sync, on the per-step path)
            cuts = (starts[1:].sum(1) > 0).nonzero().flatten().add(1).tolist() if steps > 1 else []
            outputs = []
            for a, b in zip([0, *cuts], [*cuts, steps], strict=True):
                keep = (1.0 - starts[a]).view(1, -1, 1)
                out, (h, c) = self.lstm(x[a:b], (h * keep, c * keep))
                outputs.append(out)
            out = torch.cat(outputs)
        return forward_skipping_hooks(self.trunk, out), (h, c)

    def act_recurrent(
        self, obs: Tensor, starts: Tensor, memory, noise: Tensor | torch.Generator | None = None
    ):
        """One step of ``N`` envs: ``(actions, log_probs, values, memory after the step)``; ``noise`` as for
        ``act``."""
        logits, values, memory = self.forward_sequence(obs.unsqueeze(0), starts.unsqueeze(0), memory)
        actions, logprobs = self._sample(logits[0], _noise(self.head, logits[0], noise), obs)
        return actions, logprobs, values[0], memory

    def value_after(self, obs: Tensor, memory) -> Tensor:
        """Values of observations that continue the episodes whose memory is ``memory`` (no reset)."""
        starts = torch.zeros((1, obs.shape[0]), device=obs.device)
        return self.forward_sequence(obs.unsqueeze(0), starts, memory)[1][0]

    @torch.no_grad()
    def predict_recurrent(
        self,
        obs: Tensor,
        starts: Tensor,
        memory,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ):
        """``predict`` for a recurrent agent: ``(actions, memory after the step)``."""
        obs = self.normalization.obs(obs)
        logits, _, memory = self.forward_sequence(obs.unsqueeze(0), starts.float().unsqueeze(0), memory)
        if deterministic:
            return self.head.mode(logits[0]), memory
        return self._sample(logits[0], self.head.noise(logits[0], generator), obs)[0], memory


def _noise(head: Head, logits: Tensor, noise: Tensor | torch.Generator | None) -> Tensor:
    """``noise`` where it is the draws already, else the head's draws from it (a generator; None: torch's)."""
    return noise if isinstance(noise, Tensor) else head.noise(logits, noise)
