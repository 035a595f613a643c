"""Policy heads: the one place that knows what kind of action space the agent acts in.

A head turns the actor network's output into actions, log-probabilities and entropies. The training loop
only ever calls these methods, so adding an action space means adding a head, not a branch in the loop
(STYLE.md, point 3). The methods are written as plain tensor ops rather than through
``torch.distributions`` objects: building a distribution object on every rollout step costs more than the
policy's forward pass at small batch sizes, and the numbers are the same (tests compare them).
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import Tensor, nn

from proxima.errors import UserError


class CategoricalHead(nn.Module):
    """Softmax policy over ``n`` discrete actions; the actor outputs one logit per action."""

    action_dtype = torch.int64

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.logits_dim = n
        self.action_shape: tuple[int, ...] = ()

    def sample(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """Draw one action per row; returns ``(actions, log_probs)``."""
        log_p = logits.log_softmax(dim=-1)
        # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits); -log(Exp(1)) is Gumbel.
        # It is a third cheaper than torch.multinomial on the small batches of a rollout step.
        actions = (log_p - torch.empty_like(log_p).exponential_().log()).argmax(dim=-1, keepdim=True)
        return actions.squeeze(-1), log_p.gather(-1, actions).squeeze(-1)

    def mode(self, logits: Tensor) -> Tensor:
        """The most probable action, for deterministic evaluation."""
        return logits.argmax(dim=-1)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-probability of the given actions and the entropy of each row's distribution."""
        log_p = logits.log_softmax(dim=-1)
        logprob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
        return logprob, entropy

    def probs(self, logits: Tensor) -> Tensor:
        return logits.softmax(dim=-1)


def make_head(action_space: gym.Space) -> nn.Module:
    """The head for an action space, or a ``UserError`` naming what is accepted."""
    if isinstance(action_space, gym.spaces.Discrete):
        if int(action_space.start) != 0:
            raise UserError(
                f"action space {action_space} starts at {action_space.start}; proxima accepts Discrete(n) starting at 0"
            )
        return CategoricalHead(int(action_space.n))
    raise UserError(
        f"action space {action_space} is not supported yet; proxima accepts Discrete action spaces"
    )
