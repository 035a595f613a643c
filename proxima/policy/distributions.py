"""Policy heads: the one place that knows what kind of action space the agent acts in.

A head turns the actor network's output into actions, log-probabilities and entropies. The training loop
only ever calls these methods, so adding an action space means adding a head, not a branch in the loop
(docs/ARCHITECTURE.md). The methods are written as plain tensor ops rather than through
``torch.distributions`` objects: building a distribution object on every rollout step costs more than the
policy's forward pass at small batch sizes, and the numbers are the same (tests compare them).
"""

from __future__ import annotations

import math
from typing import Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from proxima.base.errors import UserError


class Head(Protocol):
    """What ``ActorCritic`` and the loop ask of a policy head. Each head below implements it for one kind of
    action space, as an ``nn.Module`` (so that its buffers move and save with the network). ``logits`` is the
    actor's output, ``(B, logits_dim)``."""

    action_dtype: torch.dtype  # of the actions it returns (int64 for indices, float32 for values)
    action_shape: tuple[int, ...]  # of one action: () for Discrete
    logits_dim: int  # the actor's outputs it needs
    discrete: bool  # whether its entropy is a discrete distribution's (the health checks read it so)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """The random draws that ``sample`` turns into actions for logits of ``like``'s shape, from ``generator``
        (a run's own; None: torch's global one, for a user's ``predict``). They do not depend on the logits, so
        rows may draw from generators of their own (a batched run's seeds, a rollout worker's envs) and one
        ``sample`` serve them all."""
        ...

    def sample(self, logits: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """``(actions, log_probs)``, one per row, from ``noise`` (what ``noise(logits)`` drew): a pure function.
        A head with parameters also takes them by name, one row per row of ``logits`` (a batched run's seeds',
        a multi-agent run's groups' log-std); a Box head takes ``dims`` (``per_component_total``)."""
        ...

    def mode(self, logits: Tensor) -> Tensor:
        """The most probable action per row, for deterministic evaluation."""
        ...

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """The log-probability of ``actions`` and the entropy of each row's distribution; keyword arguments by
        row as for ``sample``."""
        ...


class CategoricalHead(nn.Module):
    """Softmax policy over ``n`` discrete actions; the actor outputs one logit per action."""

    action_dtype = torch.int64
    discrete = True

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.logits_dim = n
        self.action_shape: tuple[int, ...] = ()

    def sample(self, logits: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """One action per row from ``noise``'s Exp(1) draws; returns ``(actions, log_probs)``."""
        log_p = logits.log_softmax(dim=-1)
        # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits); -log(Exp(1)) is Gumbel.
        # It is a third cheaper than torch.multinomial on the small batches of a rollout step.
        actions = (log_p - noise.log()).argmax(dim=-1, keepdim=True)
        return actions.squeeze(-1), log_p.gather(-1, actions).squeeze(-1)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Exp(1) draws, one per logit (laid out contiguously, as ``sample`` draws them)."""
        return torch.empty(like.shape, dtype=like.dtype, device=like.device).exponential_(generator=generator)

    def mode(self, logits: Tensor) -> Tensor:
        return logits.argmax(dim=-1)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        log_p = logits.log_softmax(dim=-1)
        logprob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
        return logprob, entropy

    def probs(self, logits: Tensor) -> Tensor:
        return logits.softmax(dim=-1)


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def per_component_total(x: Tensor, dims: Tensor | None) -> Tensor:
    """The sum over a Box's components of a per-component log-density or entropy; with ``dims``, over the
    components each row's agent acts with (agents of several kinds share one Box of the largest kind's size,
    and the env ignores the components that a smaller kind lacks, so their draws are noise to the update)."""
    return x.sum(-1) if dims is None else (x * dims).sum(-1)


GAMMA_TRIES = 6  # Marsaglia-Tsang proposals per Gamma draw from per-env uniforms (BetaHead)


def gamma_from_uniforms(concentration: Tensor, uniforms: Tensor) -> Tensor:
    """Gamma(concentration, 1) draws, each from its own ``3 * GAMMA_TRIES`` uniforms in [0, 1), for a
    concentration of at least 1 (Marsaglia and Tsang 2000).

    ``uniforms`` is ``(B, 3 * GAMMA_TRIES * n)`` for a ``(B, n)`` concentration. Each proposal takes three
    uniforms (two for a normal z, one for the test); the draw is the first accepted proposal's d * v, with
    d = a - 1/3 and v = (1 + z / sqrt(9 d))^3. Each proposal is accepted with probability above 0.95 at a >= 1,
    so all six are rejected with probability below 0.05^6 (about 1.6e-8); then the draw is d, near the median.
    A fixed number of uniforms per draw is what lets an env's stream alone decide its actions, whichever
    worker holds it (``--rollout-workers``). Computed in float64; returns float64.
    """
    a = concentration.to(torch.float64)
    u = uniforms.to(torch.float64).reshape(a.shape[0], GAMMA_TRIES, 3, a.shape[1])
    d = (a - 1.0 / 3.0).unsqueeze(1)
    # Box-Muller: two uniforms per standard normal (1 - u is in (0, 1])
    z = (-2.0 * (1.0 - u[:, :, 0]).log()).sqrt() * torch.cos(2.0 * math.pi * u[:, :, 1])
    v = (1.0 + z / (9.0 * d).sqrt()) ** 3
    # log of a uniform of exactly 0 is -inf: accepted, as a draw below every bound would be
    accepted = (v > 0) & (u[:, :, 2].log() < 0.5 * z.square() + d - d * v + d * v.clamp_min(1e-300).log())
    first = accepted.to(torch.int8).argmax(dim=1, keepdim=True)  # the first True along the tries
    draws = (d * v).gather(1, first).squeeze(1)
    return torch.where(accepted.any(dim=1), draws, d.squeeze(1))


class BoxShaped(nn.Module):
    """What the Box heads share: they compute on the flat components, and give actions in the space's own shape
    (a Box of shape () or of several dims, as Stable-Baselines3 takes them; one dim: as computed)."""

    action_shape: tuple[int, ...]

    def _shaped(self, flat: Tensor) -> Tensor:
        return flat if len(self.action_shape) == 1 else flat.reshape(*flat.shape[:-1], *self.action_shape)

    def _flat(self, actions: Tensor) -> Tensor:
        if len(self.action_shape) == 1:
            return actions
        return actions.reshape(*actions.shape[: actions.dim() - len(self.action_shape)], -1)


class DiagGaussianHead(BoxShaped):
    """Diagonal Gaussian policy for a Box action space (continuous-control details 1-3 in docs/SEEDS.md).

    The actor outputs the mean; the log standard deviation is one learned parameter per action component,
    independent of the state and initialised to 0 (std 1); agents with actors of their own have a row of them
    each (``proxima.policy.multiagent``). The components are independent, so log-probs and entropies are sums
    over them. Actions are unbounded samples: they are stored and trained on as drawn, and only the copy sent
    to the environment is clipped to its bounds (by the vector env).
    """

    action_dtype = torch.float32
    discrete = False

    def __init__(self, action_dim: int, shape: tuple[int, ...] | None = None):
        super().__init__()
        self.logits_dim = action_dim
        self.action_shape: tuple[int, ...] = (action_dim,) if shape is None else tuple(shape)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def sample(
        self, mean: Tensor, noise: Tensor, log_std: Tensor | None = None, dims: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        log_std = self.log_std if log_std is None else log_std  # or each row's (Head.sample's rows)
        actions = mean + noise * log_std.exp()
        # log N(a; mean, std) with (a - mean) / std = noise, summed over the components
        logprob = -per_component_total(0.5 * noise.square() + log_std + _HALF_LOG_2PI, dims)
        return self._shaped(actions), logprob

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return torch.empty_like(like).normal_(generator=generator)  # torch.randn_like's draws

    def mode(self, mean: Tensor) -> Tensor:
        return self._shaped(mean)

    def mean_std(self, mean: Tensor) -> tuple[Tensor, Tensor]:
        """The mean and standard deviation of each action component (for the continuous probe)."""
        return mean, self.log_std.exp().expand_as(mean)

    @torch.no_grad()
    def cap_std(self, max_std: float) -> None:
        """Lower every component's std that is above ``max_std`` to it (``--action-std-end``)."""
        self.log_std.clamp_(max=math.log(max_std))

    def log_prob_entropy(
        self, mean: Tensor, actions: Tensor, log_std: Tensor | None = None, dims: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        log_std = self.log_std if log_std is None else log_std
        z = (self._flat(actions) - mean) * (-log_std).exp()
        logprob = -per_component_total(0.5 * z.square() + log_std + _HALF_LOG_2PI, dims)
        entropy = per_component_total(0.5 + _HALF_LOG_2PI + log_std, dims).expand(mean.shape[:-1])
        return logprob, entropy


class BoundedHead(BoxShaped):
    """What the heads whose every draw lies inside a Box's finite bounds share: two actor outputs per component,
    and the bounds as buffers."""

    action_dtype = torch.float32
    discrete = False
    low: Tensor  # buffers (nn.Module's attribute lookup types them loosely)
    scale: Tensor

    def __init__(self, low, high):
        super().__init__()
        low, high = torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
        self.logits_dim = 2 * low.numel()
        self.action_shape: tuple[int, ...] = tuple(low.shape)
        low, high = low.flatten(), high.flatten()
        # derived from the action space, which agent.json records: not weights, not in model.safetensors
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("scale", high - low, persistent=False)


class BetaHead(BoundedHead):
    """``--action-dist beta``: a Beta policy for a Box with finite bounds (Chou, Maturana and Scherer 2017).

    Each component is Beta(alpha, beta) on (0, 1), stretched to [low, high]: every action lies inside the
    bounds, so the env clips nothing and the log-probs are those of the actions the env receives. A Gaussian's
    tails beyond the bounds are clipped to the same action, which the policy gradient cannot see. The actor
    outputs two numbers per component, and alpha = 1 + softplus(.), beta = 1 + softplus(.) keep the density
    unimodal. The deterministic action is the mean. A sample is G_a / (G_a + G_b) for Gamma draws G_a and
    G_b, each from a fixed number of uniforms (``gamma_from_uniforms``), so that the draws do not depend on the
    concentrations (``Head.noise``).
    """

    EDGE = 1e-6  # a draw is kept this far inside (0, 1): float32 rounds steep draws onto the bounds, log 0

    def _concentrations(self, params: Tensor) -> tuple[Tensor, Tensor]:
        alpha, beta = (1.0 + nn.functional.softplus(params)).chunk(2, dim=-1)
        return alpha, beta

    def sample(self, params: Tensor, noise: Tensor, dims: Tensor | None = None) -> tuple[Tensor, Tensor]:
        alpha, beta = self._concentrations(params)
        gammas = gamma_from_uniforms(torch.cat([alpha, beta], dim=-1), noise)
        g_alpha, g_beta = gammas.chunk(2, dim=-1)
        x = (g_alpha / (g_alpha + g_beta)).to(alpha.dtype)
        actions = self.low + x.clamp(self.EDGE, 1.0 - self.EDGE) * self.scale
        return self._shaped(actions), self._log_prob(alpha, beta, actions, dims)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """``3 * GAMMA_TRIES`` uniforms for each of the two Gamma draws per component (``like``'s last dim)."""
        shape = (*like.shape[:-1], 3 * GAMMA_TRIES * like.shape[-1])
        return torch.empty(shape, dtype=torch.float32, device=like.device).uniform_(generator=generator)

    def mode(self, params: Tensor) -> Tensor:
        alpha, beta = self._concentrations(params)
        return self._shaped(self.low + alpha / (alpha + beta) * self.scale)

    def mean_std(self, params: Tensor) -> tuple[Tensor, Tensor]:
        """The mean and standard deviation of each action component (for the continuous probe)."""
        alpha, beta = self._concentrations(params)
        total = alpha + beta
        return self.low + alpha / total * self.scale, (
            alpha * beta / (total.square() * (total + 1.0))
        ).sqrt() * self.scale

    @staticmethod
    def _log_beta_fn(alpha: Tensor, beta: Tensor) -> Tensor:
        return torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)

    def _log_prob(self, alpha: Tensor, beta: Tensor, actions: Tensor, dims: Tensor | None) -> Tensor:
        x = ((actions - self.low) / self.scale).clamp(self.EDGE, 1.0 - self.EDGE)
        # the density of the stretched action: the Beta's, divided by the scale in each component
        log_p = (alpha - 1.0) * x.log() + (beta - 1.0) * torch.log1p(-x) - self._log_beta_fn(alpha, beta)
        return per_component_total(log_p - self.scale.log(), dims)

    def log_prob_entropy(
        self, params: Tensor, actions: Tensor, dims: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        alpha, beta = self._concentrations(params)
        entropy = (
            self._log_beta_fn(alpha, beta)
            - (alpha - 1.0) * torch.digamma(alpha)
            - (beta - 1.0) * torch.digamma(beta)
            + (alpha + beta - 2.0) * torch.digamma(alpha + beta)
            + self.scale.log()
        )
        return self._log_prob(alpha, beta, self._flat(actions), dims), per_component_total(entropy, dims)


_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(16)


class TanhGaussianHead(BoundedHead):
    """``--action-dist tanh-gaussian``: a Gaussian per component squashed by tanh into a Box's finite bounds,
    its std a function of the state (as BenchMARL's and torchrl's continuous policies are).

    The actor outputs a mean and a std input per component; std = softplus(x + shift) + 0.01, 1 where the
    actor outputs 0 (its output layer starts near 0). A draw u ~ N(mean, std) becomes the action
    low + (tanh(u) + 1) / 2 * (high - low): inside the bounds, so the env clips nothing, and the log-prob is the
    squashed density of the action the env receives (computed back from it, so that the rollout's and the
    update's log-probs of one action agree). The deterministic action is the squashed mean. A squashed
    Gaussian's entropy has no closed form: the Gaussian's plus the expected log-Jacobian, by Gauss-Hermite
    quadrature (smooth in the mean and std, so the entropy bonus has a gradient, and no random draws).
    """

    EDGE = 1e-6  # tanh is kept this far inside (-1, 1): float32 rounds steep draws onto the bounds, log 0
    STD_MIN = 0.01
    STD_SHIFT = math.log(math.expm1(1.0 - STD_MIN))  # softplus(STD_SHIFT) + STD_MIN = 1
    half_scale: Tensor  # buffers, as BoundedHead's
    nodes: Tensor
    weights: Tensor

    def __init__(self, low, high):
        super().__init__(low, high)
        self.register_buffer("half_scale", self.scale / 2, persistent=False)
        self.register_buffer(
            "nodes", torch.as_tensor(_HERMITE_NODES * math.sqrt(2), dtype=torch.float32), persistent=False
        )
        self.register_buffer(
            "weights",
            torch.as_tensor(_HERMITE_WEIGHTS / math.sqrt(math.pi), dtype=torch.float32),
            persistent=False,
        )

    def _mean_std(self, params: Tensor) -> tuple[Tensor, Tensor]:
        mean, x = params.chunk(2, dim=-1)
        return mean, nn.functional.softplus(x + self.STD_SHIFT) + self.STD_MIN

    def _squash(self, u: Tensor) -> Tensor:
        return self.low + (torch.tanh(u).clamp(self.EDGE - 1.0, 1.0 - self.EDGE) + 1.0) * self.half_scale

    @staticmethod
    def _log_dtanh(u: Tensor) -> Tensor:
        """log(1 - tanh(u)^2), without the cancellation of 1 - tanh^2 at large |u|."""
        return 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))

    def sample(self, params: Tensor, noise: Tensor, dims: Tensor | None = None) -> tuple[Tensor, Tensor]:
        mean, std = self._mean_std(params)
        actions = self._squash(mean + noise * std)
        return self._shaped(actions), self._log_prob(mean, std, actions, dims)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """One standard normal per component (half of ``like``'s last dim: a mean and a std input each)."""
        shape = (*like.shape[:-1], like.shape[-1] // 2)
        return torch.empty(shape, dtype=like.dtype, device=like.device).normal_(generator=generator)

    def mode(self, params: Tensor) -> Tensor:
        return self._shaped(self._squash(self._mean_std(params)[0]))

    def _expect(self, f, mean: Tensor, std: Tensor) -> Tensor:
        """E[f(u)] over u ~ N(mean, std) per component, by Gauss-Hermite quadrature (f elementwise)."""
        return (f(mean.unsqueeze(-1) + std.unsqueeze(-1) * self.nodes) * self.weights).sum(-1)

    def mean_std(self, params: Tensor) -> tuple[Tensor, Tensor]:
        """The mean and standard deviation of each squashed action component (for the continuous probe)."""
        mean, std = self._mean_std(params)
        first = self._expect(torch.tanh, mean, std)
        second = self._expect(lambda u: torch.tanh(u).square(), mean, std)
        spread = (second - first.square()).clamp_min(0.0).sqrt()
        return self.low + (first + 1.0) * self.half_scale, spread * self.half_scale

    def _log_prob(self, mean: Tensor, std: Tensor, actions: Tensor, dims: Tensor | None) -> Tensor:
        y = ((actions - self.low) / self.half_scale - 1.0).clamp(self.EDGE - 1.0, 1.0 - self.EDGE)
        u = torch.atanh(y)
        z = (u - mean) / std
        # the Gaussian's density at u over the Jacobian of u -> action: (1 - y^2) * half_scale
        log_p = (
            -(0.5 * z.square() + std.log() + _HALF_LOG_2PI) - torch.log1p(-y.square()) - self.half_scale.log()
        )
        return per_component_total(log_p, dims)

    def log_prob_entropy(
        self, params: Tensor, actions: Tensor, dims: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        mean, std = self._mean_std(params)
        log_jacobian = self._expect(self._log_dtanh, mean, std) + self.half_scale.log()
        entropy = 0.5 + _HALF_LOG_2PI + std.log() + log_jacobian
        return self._log_prob(mean, std, self._flat(actions), dims), per_component_total(entropy, dims)


class MultiCategoricalHead(nn.Module):
    """``MultiDiscrete(nvec)``: one independent softmax per dimension, their logits side by side; the
    log-prob and entropy of an action are the sums of its dimensions' (independent factors)."""

    action_dtype = torch.int64
    discrete = True

    def __init__(self, nvec: list[int]):
        super().__init__()
        self.nvec = tuple(int(n) for n in nvec)
        self.logits_dim = sum(self.nvec)
        self.action_shape: tuple[int, ...] = (len(self.nvec),)
        self.dims = tuple(CategoricalHead(n) for n in self.nvec)  # no parameters: not submodules

    def _split(self, x: Tensor) -> tuple[Tensor, ...]:
        return x.split(self.nvec, dim=-1)

    def sample(self, logits: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        parts = zip(self.dims, self._split(logits), self._split(noise), strict=True)
        drawn = [d.sample(x, e) for d, x, e in parts]
        return torch.stack([a for a, _ in drawn], -1), torch.stack([lp for _, lp in drawn], -1).sum(-1)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Each dimension's draws in turn, as ``sample`` takes them, side by side."""
        parts = zip(self.dims, self._split(like), strict=True)
        return torch.cat([d.noise(x, generator) for d, x in parts], -1)

    def mode(self, logits: Tensor) -> Tensor:
        return torch.stack([x.argmax(dim=-1) for x in self._split(logits)], -1)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        parts = enumerate(zip(self.dims, self._split(logits), strict=True))
        logprobs, entropies = zip(
            *(d.log_prob_entropy(x, actions[..., i]) for i, (d, x) in parts), strict=True
        )
        return torch.stack(logprobs, -1).sum(-1), torch.stack(entropies, -1).sum(-1)


class BernoulliHead(nn.Module):
    """``MultiBinary(n)``: one independent Bernoulli per element, with P(1) = sigmoid(logit). Actions are
    stored as float 0/1 and sent to the env as the space's int8."""

    action_dtype = torch.float32
    discrete = True

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.action_shape = tuple(int(s) for s in shape)
        self.logits_dim = math.prod(self.action_shape)

    def sample(self, logits: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        actions = (noise < torch.sigmoid(logits)).to(logits.dtype)
        return actions.reshape(-1, *self.action_shape), self._log_prob(logits, actions)

    @staticmethod
    def _log_prob(logits: Tensor, flat_actions: Tensor) -> Tensor:
        # log p(1) = -softplus(-l) = l - softplus(l), log p(0) = -softplus(l)
        return (flat_actions * logits - nn.functional.softplus(logits)).sum(-1)

    def noise(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return torch.empty_like(like).uniform_(generator=generator)  # torch.rand_like's draws

    def mode(self, logits: Tensor) -> Tensor:
        return (logits > 0).to(logits.dtype).reshape(-1, *self.action_shape)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        logprob = self._log_prob(logits, actions.reshape(logits.shape).to(logits.dtype))
        # H = -p log p - (1 - p) log(1 - p) = softplus(l) - p l
        entropy = (nn.functional.softplus(logits) - torch.sigmoid(logits) * logits).sum(-1)
        return logprob, entropy


ACTION_DISTS = ("gaussian", "beta", "tanh-gaussian")  # for a Box action space (--action-dist)


def make_head(action_space: gym.Space, action_dist: str = "gaussian") -> Head:
    """The head for an action space, or a ``UserError`` naming what is accepted. ``action_dist``: the
    distribution of a Box's actions (the other spaces have one each)."""
    if action_dist not in ACTION_DISTS:
        raise UserError(f"action_dist must be one of {', '.join(ACTION_DISTS)}, got {action_dist!r}")
    box = action_space if isinstance(action_space, gym.spaces.Box) else None
    if action_dist != "gaussian":
        if box is None or not (np.isfinite(box.low).all() and np.isfinite(box.high).all()):
            raise UserError(
                f"--action-dist {action_dist} needs a Box action space with finite bounds, got "
                f"{action_space}; drop it (gaussian)"
            )
        bounded = BetaHead if action_dist == "beta" else TanhGaussianHead
        return bounded(box.low, box.high)
    # A Discrete's or MultiDiscrete's start is added on the way into the env (proxima.envs.interface.env_actions):
    # the heads work with indices from 0.
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalHead(int(action_space.n))
    if box is not None:
        return DiagGaussianHead(math.prod(box.shape), box.shape)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        return MultiCategoricalHead(action_space.nvec.tolist())
    if isinstance(action_space, gym.spaces.MultiBinary):
        return BernoulliHead(action_space.shape)
    raise UserError(
        f"action space {action_space} is not supported; proxima accepts Discrete, MultiDiscrete (1-D), "
        "MultiBinary and Box action spaces"
    )
