"""Many seeds as one computation (``--num-seeds N``): N independent agents whose parameters are stacked along a
leading axis, so that each forward and backward pass is one batched call (``torch.func.vmap`` over
``functional_call``) instead of N streams of small ops.

Each seed keeps its own ``ActorCritic``, whose parameters and buffers are *views* of the stacked tensors: what the
batched update writes, the seed's evaluation, checkpoint and saved agent see, and a normalization statistic that a
seed's model updates in place is the stacked one. Nothing is shared across seeds: each has its own random
generators (its run's ``seeding.RunStreams``, the solo run's), statistics, advantage normalization per minibatch, and gradient-norm clipping
(``clip_grad_norms``), and Adam step count (``optim.Adam``: Adam is elementwise, so one Adam over the stacked
tensors steps each seed as its own would).
A seed's run is thus the algorithm of a solo run with its seed, on the same env seeds and random draws; only
the batched kernels round differently (``tests/test_num_seeds.py`` measures by how much).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import cast

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from proxima.algo.optim import Adam
from proxima.algo.storage import Batch, RolloutBuffer, SequenceBatch, minibatches
from proxima.algo.update import UpdateSettings, learn, minibatch_loss, one_member
from proxima.policy.protocol import Policy
from proxima.policy.stacked import StackedModels, StackedNormalizations, stacked_step
from proxima.run.rollout import RecurrentCollector, RolloutCollector


class SeedModel:
    """What the rollout steps with (``RolloutCollector``'s ``model``): the stacked seeds over all rows, each
    seed's actions drawn from its own stream.

    A finished seed is left out of the forward passes and the draws (``start``): its envs still step, since
    they share one vector env with the others', and are given the mode of uniform logits (an action that any
    env takes, its mask respected); its rows of the rollout hold what nothing reads."""

    def __init__(self, stacked: StackedModels, generators: list[torch.Generator], rows: int):
        # generators: each seed's actions'
        self.stacked, self.generators, self.rows = stacked, generators, rows
        self.head = stacked.head
        self.normalization = StackedNormalizations(
            [m.normalization for m in stacked.models], stacked.buffers, rows, lambda: stacked.frozen
        )
        self.start()

    def start(self) -> None:
        """Before each rollout: the seeds that still train, and the seeds and weights that its forward passes
        compute with (no step of it changes a weight)."""
        n, rows, frozen = len(self.stacked), self.rows, self.stacked.frozen
        device = next(iter(self.stacked.params.values())).device
        self.live, done = [j for j in range(n) if j not in frozen], sorted(frozen)
        self._place = {j: i for i, j in enumerate(self.live)}  # seed -> its place among the live ones
        # the live seeds' head parameters (a Gaussian's log-std), one row per row: no step of a rollout changes them
        live = torch.tensor(self.live, device=device)
        self._head_rows = {
            name: self.stacked.params[f"model.head.{name}"]
            .detach()
            .index_select(0, live)
            .repeat_interleave(rows, 0)
            for name, _ in cast(nn.Module, self.head).named_parameters()
        }
        computed, self._weights = list(range(n)), None
        # Batched matmuls round each seed's rows alike whatever the other seeds (vmap's batched convolutions do
        # not: there every seed goes on through the forward passes). But torch's batched matmul of a single
        # matrix takes another kernel (a matrix-vector product for the critic's output): a lone live seed goes
        # through twice.
        if done and self.stacked.plain:
            computed = self.live * 2 if len(self.live) == 1 else self.live
            self._computed = torch.tensor(computed, device=device)
            self._weights = self.stacked.weights_of(self._computed)
        picked = [computed.index(j) for j in self.live]
        self._pick = None if picked == list(range(len(computed))) else torch.tensor(picked, device=device)
        self._done = torch.tensor(done, device=device)
        # the rows of all seeds, seed-major, as rows of [the live seeds' rows, the finished seeds' rows]
        place = torch.tensor(self.live + done, device=device).argsort()
        self._order = (place[:, None] * rows + torch.arange(rows, device=device)).flatten()
        self._zeros = torch.zeros(len(done) * rows, device=device)
        self._uniform = torch.zeros(len(done) * rows, self.head.logits_dim, device=device)

    def _seeds(self, obs: Tensor) -> Tensor:
        return obs.view(len(self.stacked), self.rows, *obs.shape[1:])

    def _call(self, method: str, obs: Tensor):
        """The live seeds' ``method`` on their rows of ``obs`` (all rows, seed-major), ``(live seeds, ...)``."""
        obs = self._seeds(obs)
        if self._weights is None:
            out = self.stacked.call(method, obs)
        else:
            out = self.stacked.call(method, obs[self._computed], weights=self._weights)
        if self._pick is None:
            return out
        return tuple(x[self._pick] for x in out) if isinstance(out, tuple) else out[self._pick]

    def _all_rows(self, live: Tensor, finished: Tensor) -> Tensor:
        """The live seeds' rows and the finished seeds' rows as the rows of all seeds."""
        return live if not len(self._done) else torch.cat([live, finished]).index_select(0, self._order)

    def act(
        self, obs: Tensor, noise: Tensor | torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``ActorCritic.act``; ``noise``: none (the collector's own generator is None), each seed draws from
        its own generator."""
        assert noise is None, "each seed draws from its own generator"
        logits, values = self._call("forward", obs)
        return self._draw(logits, values, obs)

    def _draw(self, logits: Tensor, values: Tensor, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Actions, log-probs and values of all rows from the live seeds' logits and values."""
        models, place, head = self.stacked.models, self._place, self.head
        # Only the draws need each seed's generator; the arithmetic on them is row by row, so one call for all
        # seeds gives each row what its seed's own call would, at a tenth of the calls per step. A head's
        # parameters (a Gaussian's log-std) are each seed's own: one row per row.
        noise = torch.cat([head.noise(logits[place[j]], self.generators[j]) for j in self.live])
        actions, logprobs = head.sample(logits.flatten(0, 1), noise, **self._head_rows)
        values = values.flatten()
        if not len(self._done):
            return actions, logprobs, values
        idle = self.head.mode(models[0]._masked(self._uniform, self._seeds(obs)[self._done].flatten(0, 1)))
        return (
            self._all_rows(actions, idle),
            self._all_rows(logprobs, self._zeros),
            self._all_rows(values, self._zeros),
        )

    def value(self, obs: Tensor) -> Tensor:
        return self._all_rows(self._call("value", obs).flatten(), self._zeros)

    # --- a recurrent agent's (--recurrent lstm), whose memory the collector carries for all rows: (h, c), each
    # (layers, rows of all seeds, hidden). Every seed goes through the LSTM, only the live ones' draws count.
    def initial_memory(self, n: int, device=None) -> tuple[Tensor, Tensor]:
        return self.stacked.models[0].initial_memory(n, device)

    def _live(self, x: Tensor) -> Tensor:
        return x if self._pick is None else x[self._pick]

    def act_recurrent(
        self, obs: Tensor, starts: Tensor, memory, noise: Tensor | torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor, tuple]:
        assert noise is None, "each seed draws from its own generator"
        logits, values, memory = stacked_step(self.stacked, obs, starts, memory, self.rows)
        return *self._draw(self._live(logits), self._live(values), obs), memory

    def forward_sequence(self, obs: Tensor, starts: Tensor, memory) -> tuple[Tensor, Tensor, tuple]:
        """One step (``obs`` ``(1, rows of all seeds, ...)``): the live seeds' logits, the values of all rows
        (``(1, rows of all seeds)``) and the memory after it."""
        logits, values, memory = stacked_step(self.stacked, obs[0], starts[0], memory, self.rows)
        return self._live(logits), self._all_rows(self._live(values).flatten(), self._zeros)[None], memory

    def value_after(self, obs: Tensor, memory) -> Tensor:
        """The values of all rows after ``memory`` (no reset): ``memory`` is all rows', as the seeds' LSTMs
        take it."""
        starts = torch.zeros((1, obs.shape[0]), device=obs.device)
        return self.forward_sequence(obs[None], starts, memory)[1][0]


class SeedCollector(RolloutCollector):
    """The rollout of all seeds' envs (one vector env, seed-major). A truncated episode's final observation is
    valued with its own seed's critic: all rows are valued, and the truncated ones kept."""

    @torch.no_grad()
    def collect(self, model: Policy) -> tuple[Tensor, Tensor]:
        assert isinstance(model, SeedModel)  # the stacked seeds
        model.start()
        return super().collect(model)

    def _final_values(self, model: Policy, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.value(model.normalization.obs(final_obs))[rows]


class SeedRecurrentCollector(SeedCollector, RecurrentCollector):
    """``SeedCollector`` of a recurrent agent: the memory of all seeds' envs, each seed's rows through its own
    LSTM; all rows are valued after the memory (the seeds' LSTMs take all rows), and the truncated ones kept."""

    def _final_values(self, model: Policy, final_obs: Tensor, rows: Tensor) -> Tensor:
        return model.value_after(model.normalization.obs(final_obs), self.memory)[rows]


def seed_batches(
    buf: RolloutBuffer, advantages: Tensor, returns: Tensor, seeds: int, sequences: bool = False
):
    """The rollout as each seed's flat batch, stacked: every field ``(N, T * E, ...)``, seed ``j``'s samples in
    the order of its solo run's ``RolloutBuffer.flatten``. ``sequences``: as each seed's ``SequenceBatch``
    (a recurrent agent's), stacked: every field ``(N, T, E, ...)``, the memory ``(N, layers, E, hidden)``."""

    def per_seed(x: Tensor) -> Tensor:  # (T, N * E, ...) -> (N, T, E, ...)
        steps, rows = x.shape[:2]
        return x.view(steps, seeds, rows // seeds, *x.shape[2:]).transpose(0, 1)

    parts = [per_seed(x) for x in (buf.obs, buf.actions, buf.logprobs, buf.values, advantages, returns)]
    if not sequences:
        return Batch(*(x.flatten(1, 2) for x in parts))
    obs, actions, logprobs, values, advantages, returns = parts
    starts, memory = per_seed(buf.dones), tuple(per_seed(m) for m in buf.memory)
    return SequenceBatch(obs, actions, logprobs, values, advantages, returns, starts=starts, memory=memory)


def clip_grad_norms(params: list[Tensor], max_norm: float) -> Tensor:
    """Each seed's global gradient-norm clipping over its own parameters (detail 11), as
    ``torch.nn.utils.clip_grad_norm_`` does for one; returns the seeds' norms before clipping, ``(N,)``."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))
    return norms


def update_seeds(
    stacked: StackedModels,
    optimizer: Adam,
    batch: Batch,
    settings: UpdateSettings,
    generators: list[torch.Generator],
) -> list[dict | None]:
    """``proxima.algo.update.learn`` for every seed at once, each in its own minibatch order (``generators[j]``,
    its run's ``RunStreams.minibatches``); each seed's debug variables (None for a finished seed)."""
    return learn(SeedLearner(stacked, optimizer, batch, settings, generators), settings)


class SeedLearner:
    """The stacked seeds as ``learn``'s members: one batched loss and backward pass per minibatch, vmapped over
    ``functional_call``; a seed whose ``--target-kl`` stopped its epochs, or that finished, is left out."""

    def __init__(
        self,
        stacked: StackedModels,
        optimizer: Adam,
        batch: Batch,
        settings: UpdateSettings,
        generators: list[torch.Generator],
    ):
        self.stacked, self.optimizer, self.settings = stacked, optimizer, settings
        self.generators = generators
        # A minibatch is gathered from the seeds' units (samples; a recurrent agent's env sequences, on the axis
        # after the steps) laid end to end, by each seed's own indices.
        self.axis = 2 if isinstance(batch, SequenceBatch) else 1
        self.members, self.size = batch.obs.shape[0], batch.obs.shape[self.axis]
        self.training = [j for j in range(self.members) if j not in stacked.frozen]
        for j in self.training:
            stacked.models[j].update_value_normalization(batch.returns[j], settings.value_norm_horizon)
        self.scale = stacked.value_scale()
        if self.scale is not None:
            per_seed = self.scale.view(-1, *[1] * (batch.values.dim() - 1))
            batch = dataclasses.replace(
                batch, values=batch.values / per_seed, returns=batch.returns / per_seed
            )
        self.has_critic = stacked.models[0].critic is not None
        self.params = list(stacked.params.values())
        fields = [getattr(batch, f.name) for f in dataclasses.fields(Batch)]
        if isinstance(batch, SequenceBatch):  # each env sequence's episode starts and memory go with it
            fields += [batch.starts, *batch.memory]
        self.units = [x.movedim(self.axis, 1).flatten(0, 1) for x in fields]
        self.losses_of = vmap(self.loss_of, in_dims=(0, 0, 0, None if self.scale is None else 0))

    def loss_of(self, params, buffers, fields: tuple[Tensor, ...], scale):
        """One seed's ``minibatch_loss`` with its weights, on its minibatch's ``fields``."""
        mb = Batch(*fields[:6])  # vmap maps over tensors, tuples and dicts, not dataclasses
        memory = fields[6:] or None  # (starts, h, c)
        logprobs, entropy, values = functional_call(
            self.stacked._base, (params, buffers), ("evaluate", mb.obs, mb.actions, memory), tie_weights=False
        )
        return minibatch_loss(logprobs, entropy, values, mb, self.settings, scale, self.has_critic)

    def minibatches(self) -> Iterator[tuple[Tensor, ...]]:
        training, device = self.training, self.units[0].device
        # (training seeds, minibatches, minibatch size)
        count, streams = self.settings.num_minibatches, self.generators
        orders = torch.stack([torch.stack(minibatches(self.size, count, streams[j])) for j in training])
        self.which = torch.tensor(training, device=device)
        offsets = self.which[:, None] * self.size
        self.own_scale = None if self.scale is None else self.scale[self.which]
        for k in range(orders.shape[1]):
            index = (orders[:, k] + offsets).flatten()
            yield tuple(
                x.index_select(0, index).view(len(training), -1, *x.shape[1:]).movedim(1, self.axis)
                for x in self.units
            )

    def loss(self, mb: tuple[Tensor, ...]) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
        # Only the training seeds are computed with: the others' gradients are zero, and Adam leaves their rows.
        stacked, training = self.stacked, self.training
        every = len(training) == self.members
        weights = (stacked.params, stacked.buffers) if every else stacked.weights_of(self.which)
        losses: Callable = self.losses_of if len(training) > 1 else _alone(self.loss_of)
        return losses(*weights, mb, self.own_scale)

    def clip(self, max_norm: float) -> Tensor:
        return clip_grad_norms(self.params, max_norm)

    def step(self) -> None:
        self.optimizer.step(self.training, finished=self.stacked.frozen)


def _alone(loss_of: Callable) -> Callable:
    """``loss_of`` for one seed, called on its own tensors without vmap, its outputs stacked as vmap's would be:
    a batch's last live seed trains about as fast as a solo run (vmap's fixed cost per call is about a solo
    minibatch's), an MLP agent through its solo run's kernels (an LSTM stays ``lstm_by_steps``)."""

    def one(params, buffers, fields, scale):
        return one_member(
            loss_of(
                {k: v[0] for k, v in params.items()},
                {k: v[0] for k, v in buffers.items()},
                tuple(x[0] for x in fields),
                None if scale is None else scale[0],
            )
        )

    return one
