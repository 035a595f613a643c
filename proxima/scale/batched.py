"""Many seeds as one computation (``--num-seeds N``): N independent agents whose parameters are stacked along a
leading axis, so that each forward and backward pass is one batched call (``torch.func.vmap`` over
``functional_call``) instead of N streams of small ops.

Each seed keeps its own ``ActorCritic``, whose parameters and buffers are *views* of the stacked tensors: what the
batched update writes, the seed's evaluation, checkpoint and saved agent see, and a normalization statistic that a
seed's model updates in place is the stacked one. Nothing is shared across seeds: each has its own random
generators (its run's ``seeding.RunStreams``, the solo run's), statistics, advantage normalization per minibatch, and gradient-norm clipping
(``clip_grad_norms``), and Adam step count (``optim.SeedAdam``: Adam is elementwise, so one Adam over the stacked
tensors steps each seed as its own would).
A seed's run is thus the algorithm of a solo run with its seed, on the same env seeds and random draws; only
the batched kernels round differently (``tests/test_num_seeds.py`` measures by how much).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from proxima.algo.losses import ratio_diagnostics
from proxima.algo.optim import SeedAdam
from proxima.algo.storage import Batch, RolloutBuffer, SequenceBatch, minibatches
from proxima.algo.update import UpdateSettings, grad_stats, minibatch_loss
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
        self.stacked, self.generators, self.rows = (
            stacked,
            generators,
            rows,
        )  # generators: each seed's actions'
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
            name: self.stacked.params[f"model.head.{name}"].detach().index_select(0, live)
            .repeat_interleave(rows, 0)
            for name, _ in cast(nn.Module, self.head).named_parameters()
        }  # fmt: skip
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
    optimizer: SeedAdam,
    batch: Batch,
    settings: UpdateSettings,
    generators: list[torch.Generator],
) -> list[dict | None]:
    """``proxima.algo.update.update`` for every seed at once: the same epochs of minibatches, each seed's in its own
    order (from its ``generators[j]``, its run's ``RunStreams.minibatches``), one batched loss and backward pass per minibatch. With ``--target-kl`` a seed whose KL went past it
    stops its epochs as its solo run would, and the others go on. Returns each seed's debug variables (None
    for a finished seed)."""
    sequences = isinstance(batch, SequenceBatch)
    # A minibatch is gathered from the seeds' units (samples; a recurrent agent's env sequences, on the axis
    # after the steps) laid end to end, by each seed's own indices.
    axis = 2 if sequences else 1
    seeds, size = batch.obs.shape[0], batch.obs.shape[axis]
    live = [j for j in range(seeds) if j not in stacked.frozen]
    for j in live:
        stacked.models[j].update_value_normalization(batch.returns[j], settings.value_norm_horizon)
    scale = stacked.value_scale()
    if scale is not None:
        per_seed = scale.view(-1, *[1] * (batch.values.dim() - 1))
        batch = dataclasses.replace(batch, values=batch.values / per_seed, returns=batch.returns / per_seed)
    has_critic = stacked.models[0].critic is not None
    params = list(stacked.params.values())
    fields = [getattr(batch, f.name) for f in dataclasses.fields(Batch)]
    if sequences:  # each env sequence's episode starts and its memory before the rollout go with it
        assert isinstance(batch, SequenceBatch)
        fields += [batch.starts, *batch.memory]
    units = [x.movedim(axis, 1).flatten(0, 1) for x in fields]
    device = batch.obs.device

    def loss_of(params, buffers, fields: tuple[Tensor, ...], scale):
        mb = Batch(*fields[:6])  # vmap maps over tensors, tuples and dicts, not dataclasses
        memory = fields[6:] or None  # (starts, h, c)
        logprobs, entropy, values = functional_call(
            stacked._base, (params, buffers), ("evaluate", mb.obs, mb.actions, memory), tie_weights=False
        )
        loss, pg_loss, v_loss, ent = minibatch_loss(
            logprobs, entropy, values, mb, settings, scale, has_critic
        )
        diagnostics = ratio_diagnostics(logprobs.detach(), mb.logprobs, settings.clip_coef)
        return loss, pg_loss.detach(), v_loss.detach(), ent.detach(), diagnostics

    losses_of = vmap(loss_of, in_dims=(0, 0, 0, None if scale is None else 0))
    training = live  # the seeds that go on with this update's epochs
    steps = []  # each minibatch's seeds, and what it gave them: (seeds, loss, grad norms, outputs)
    for _ in range(settings.update_epochs):
        orders = torch.stack(
            [torch.stack(minibatches(size, settings.num_minibatches, generators[j])) for j in training]
        )  # (training seeds, minibatches, minibatch size)
        which = torch.tensor(training, device=device)
        offsets = which[:, None] * size
        own_scale = None if scale is None else scale[which]
        for k in range(orders.shape[1]):
            index = (orders[:, k] + offsets).flatten()
            mb = tuple(
                x.index_select(0, index).view(len(training), -1, *x.shape[1:]).movedim(1, axis) for x in units
            )
            # Only these seeds are computed with: the others' gradients are zero, and Adam leaves their rows.
            weights = (
                (stacked.params, stacked.buffers) if len(training) == seeds else stacked.weights_of(which)
            )
            losses: Callable = losses_of if len(training) > 1 else _alone(loss_of)
            loss, *outputs = losses(*weights, mb, own_scale)
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # each seed's loss reaches its own parameters only
            norms = clip_grad_norms(params, settings.max_grad_norm) if settings.max_grad_norm > 0 else None
            optimizer.step(training, finished=stacked.frozen)
            steps.append((training, loss.detach(), norms, outputs))
        if settings.target_kl is not None:  # --target-kl's early stopping, on each seed's last minibatch
            kl = outputs[-1]["approx_kl"].tolist()
            training = [j for j, x in zip(training, kl, strict=True) if not x > settings.target_kl]
            if not training:
                break
    steps = _on_host(steps)
    return [None if j in stacked.frozen else _seed_stats(steps, j) for j in range(seeds)]


def _on_host(tree):
    """``tree`` with its tensors on the CPU, copied off the device at once: on a GPU every ``.item()`` of each
    seed's debug variables would wait for the device on its own."""
    leaves, spec = tree_flatten(tree)
    tensors = [x for x in leaves if isinstance(x, Tensor)]
    if not tensors or tensors[0].device.type == "cpu":
        return tree
    flat = torch.cat([x.detach().reshape(-1).double() for x in tensors]).cpu()  # float64: exact for all
    host = iter(flat.split([x.numel() for x in tensors]))
    leaves = [next(host).view(x.shape).to(x.dtype) if isinstance(x, Tensor) else x for x in leaves]
    return tree_unflatten(leaves, spec)


def _alone(loss_of: Callable) -> Callable:
    """``loss_of`` for one seed, called on its own tensors without vmap, its outputs stacked as vmap's would be:
    a batch's last live seed trains about as fast as a solo run (vmap's fixed cost per call is about a solo
    minibatch's), an MLP agent through its solo run's kernels (an LSTM stays ``lstm_by_steps``)."""

    def one(params, buffers, fields, scale):
        *losses, diagnostics = loss_of(
            {k: v[0] for k, v in params.items()},
            {k: v[0] for k, v in buffers.items()},
            tuple(x[0] for x in fields),
            None if scale is None else scale[0],
        )
        return *(x.unsqueeze(0) for x in losses), {k: v.unsqueeze(0) for k, v in diagnostics.items()}

    return one


def _seed_stats(steps: list[tuple], j: int) -> dict:
    """Seed ``j``'s debug variables from the minibatches it trained on, as ``proxima.algo.update.update`` gives
    them: the last one's losses and KL estimates, the mean clip fraction, the largest gradient norm."""
    taken = [(seeds.index(j), loss, norms, outputs) for seeds, loss, norms, outputs in steps if j in seeds]
    i, _, _, (pg_loss, v_loss, ent, diagnostics) = taken[-1]
    return {
        **grad_stats([loss[i] for i, loss, _, _ in taken], [n[j] for _, _, n, _ in taken if n is not None]),
        "value_loss": v_loss[i].item(),
        "policy_loss": pg_loss[i].item(),
        "entropy": ent[i].item(),
        "old_approx_kl": diagnostics["old_approx_kl"][i].item(),
        "approx_kl": diagnostics["approx_kl"][i].item(),
        "clipfrac": torch.stack([out[3]["clipfrac"][i] for i, _, _, out in taken]).mean().item(),
    }
