"""The optimizer (details 3 and 11 of the 13 in docs/SEEDS.md); the learning rate's schedule (detail 4) is in
``proxima.algo.schedules``.

``Adam`` steps with ``torch.optim.adam.adam(..., fused=True)``, the public function that
``torch.optim.Adam(fused=True)`` runs, and keeps its state in the same layout, so it steps bit for bit as that
optimizer does (``tests/test_components.py``). It is not a ``torch.optim.Optimizer``: building one imports
``torch._dynamo``, seconds per process (a short run's whole budget), and its ``step`` wraps the same function in
more Python. ``benchmarks/adam_variants.py`` measures both against ``torch.optim.Adam``'s variants on proxima's
update.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim.adam import adam


class Adam:
    """Adam over one or more parameter groups, each a dict with ``params`` and optionally its own ``lr``.

    ``seeds``: the parameters are stacked along a leading axis of that many independent agents (``--num-seeds``),
    each with its own step count (``state[p]["step"]`` is ``(seeds,)``): a seed steps only at the minibatches it
    trains on, and its bias correction goes by its own count, as its solo run's does. Adam is elementwise, so each
    seed's rows step as its own optimizer would step them (up to the kernel's rounding, which differs between its
    vectorized body and its tail). Without ``seeds`` (a solo run), each parameter's count is its own 0-d tensor, as
    in torch's layout, which the fused call counts on: no count is read back to the host."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,  # rather than PyTorch's 1e-8, as the PPO reference code does (detail 3, SEEDS.md)
        seeds: int | None = None,
    ):
        listed = list(params)
        groups = listed if listed and isinstance(listed[0], dict) else [{"params": listed}]
        self.param_groups: list[dict[str, Any]] = [
            {**group, "params": list(group["params"]), "lr": group.get("lr", lr), "betas": betas, "eps": eps}
            for group in groups
        ]
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        self.seeds = seeds
        self.step_shape: tuple[int, ...] = () if seeds is None else (seeds,)  # of each parameter's step count
        # finished seeds whose moments are zero (again after a load: not saved)
        self._zeroed: set[int] = set()

    def _params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params():
            p.grad = None

    @torch.no_grad()
    def step(self, seeds: list[int] | None = None, finished: Iterable[int] = ()) -> None:
        """Step the rows of ``seeds`` (default: all), whose gradients the last backward pass gave; a parameter
        without a gradient neither steps nor counts.

        ``finished``: seeds that never step again, whose gradients are zero. Their moments are zeroed, which
        makes a fused step of every row leave their weights exactly as they are: while the others share one
        count (no ``--target-kl`` stopped one early), a step stays one call over whole tensors. Otherwise each
        count's seeds are stepped on their own rows, gathered and written back."""
        if self.seeds is None:
            self._fused(None, None)
            return
        seeds = list(range(self.seeds)) if seeds is None else seeds
        finished = sorted(finished)
        params = [p for p in self._params() if p.grad is not None]
        counts = self._state(params[0])["step"].tolist()  # every parameter of a seed steps with the others
        by_count: dict[float, list[int]] = {}
        for j in seeds:
            by_count.setdefault(counts[j], []).append(j)
        device = params[0].device
        if len(by_count) == 1 and len(seeds) + len(finished) == self.seeds:
            # zeroed once: with their gradients zero, the moments of a finished seed then stay zero
            newly = [j for j in finished if j not in self._zeroed]
            if newly:
                index = torch.tensor(newly, device=device)
                for p in params:
                    self.state[p]["exp_avg"].index_fill_(0, index, 0.0)
                    self.state[p]["exp_avg_sq"].index_fill_(0, index, 0.0)
                self._zeroed.update(newly)
            self._fused(counts[seeds[0]], None)
        else:
            for count, rows in by_count.items():
                self._fused(count, torch.tensor(rows, device=device))
        # where every seed steps, a whole add (a tenth of the time of indexing each count)
        step_counts = [self.state[p]["step"] for p in params]
        if len(seeds) == self.seeds:
            for n in step_counts:
                n.add_(1.0)
        else:
            index, ones = torch.tensor(seeds, device=device), torch.ones(len(seeds), device=device)
            for n in step_counts:
                n.index_add_(0, index, ones)

    def _fused(self, count: float | None, rows: Tensor | None) -> None:
        """One fused Adam step of the rows ``rows`` of every tensor (None: whole tensors), at the seeds' shared
        ``count`` (None: at each parameter's own count, which the call then adds one to)."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p) for p in params]
            grads = [p.grad for p in params if p.grad is not None]
            moments = [[s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]]
            parts = [params, grads, *moments]
            if rows is not None:
                parts = [[x.index_select(0, rows) for x in part] for part in parts]
            if count is None:
                steps = [s["step"] for s in states]
            else:  # a copy, counted here and dropped: step adds to the seeds' own counts
                steps = [torch.tensor(count, device=p.device) for p in params]
            # torch.optim.Adam's defaults but for betas, lr and eps: no weight decay, AMSGrad or gradient scaler
            beta1, beta2 = group["betas"]
            adam(
                parts[0],
                parts[1],
                parts[2],
                parts[3],
                [],
                steps,
                fused=True,
                amsgrad=False,
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=0.0,
                eps=group["eps"],
                maximize=False,
            )
            if rows is not None:  # the stepped rows written back: weights and moments
                for targets, stepped in zip([params, *moments], (parts[0], parts[2], parts[3]), strict=True):
                    for target, part in zip(targets, stepped, strict=True):
                        target.index_copy_(0, rows, part)

    def _state(self, p: Tensor) -> dict[str, Tensor]:
        if p not in self.state:  # as torch.optim.Adam(fused=True) initializes it
            self.state[p] = {
                "step": torch.zeros(self.step_shape, dtype=torch.float32, device=p.device),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return self.state[p]

    def state_dict(self) -> dict:
        """``torch.optim.Optimizer.state_dict``'s layout: state by parameter index, groups without tensors. The
        moments are the optimizer's own tensors, as torch gives them; the step counts are copies."""
        index = {p: i for i, p in enumerate(self._params())}
        return {
            "state": {index[p]: {**s, "step": s["step"].clone()} for p, s in self.state.items()},
            "param_groups": [
                {**{k: v for k, v in g.items() if k != "params"}, "params": [index[p] for p in g["params"]]}
                for g in self.param_groups
            ],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """``state_dict``'s state, checked first (a ``ValueError`` names what does not fit): it may come from a
        file, and a moment of another shape, or a rate that is not a number, would fail only at the next step."""
        groups = state_dict["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("the saved parameter groups do not match this optimizer's")
        params = self._params()
        for group, saved in zip(self.param_groups, groups, strict=True):
            _check_group(saved, group)
        state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)] if 0 <= int(i) < len(params) else None
            if p is None or not isinstance(s, dict) or set(s) != {"step", "exp_avg", "exp_avg_sq"}:
                raise ValueError(f"the saved state {i} is of no parameter of this optimizer's")
            if not _fits(s, p, self.step_shape):
                raise ValueError(
                    f"the saved state {i} is not of its parameter's shape {tuple(p.shape)} and dtype"
                )
            state[p] = {k: v.to(p.device) for k, v in s.items()}
        for group, saved in zip(self.param_groups, groups, strict=True):
            group.update({k: tuple(v) if k == "betas" else v for k, v in saved.items() if k != "params"})
        self.state = state
        self._zeroed = set()


def _fits(state: dict, p: Tensor, step_shape: tuple[int, ...]) -> bool:
    """Whether ``state`` is one parameter's: moments of ``p``'s shape and dtype, a count of ``step_shape``."""
    step = state["step"]
    moments = (state["exp_avg"], state["exp_avg_sq"])
    return (
        all(isinstance(m, Tensor) and m.shape == p.shape and m.dtype == p.dtype for m in moments)
        and isinstance(step, Tensor)
        and step.is_floating_point()
        and tuple(step.shape) == step_shape
        and bool((step >= 0).all())
    )


def _check_group(saved: dict, group: dict) -> None:
    """A ``ValueError`` unless ``saved`` holds ``group``'s settings, each a number Adam takes."""
    number = lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
    betas = saved.get("betas")
    if (
        set(saved) != set(group)
        or not (number(saved["lr"]) and saved["lr"] >= 0)
        or not (number(saved["eps"]) and saved["eps"] > 0)
        or not (
            isinstance(betas, list | tuple)
            and len(betas) == 2
            and all(number(b) and 0 <= b < 1 for b in betas)
        )
    ):
        raise ValueError(
            f"the saved parameter group { ({k: v for k, v in saved.items() if k != 'params'}) } is not Adam's"
        )


make_adam = (
    Adam  # the name the loop builds it by: eps 1e-5 (--adam-eps), not PyTorch's 1e-8 (detail 3, SEEDS.md)
)


def clip_grad_norm(params: list[Tensor], max_norm: float) -> Tensor:
    """Global gradient-norm clipping over all parameters together (detail 11, docs/SEEDS.md): torch's
    ``clip_grad_norm_`` with ``foreach`` (one call for all parameters' norms and one for their scaling, where a
    loop would make one per parameter); ``params``: the model's ``parameters()`` as a list, listed once by the
    caller rather than walked through the modules at every minibatch. Returns the norm before clipping."""
    return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
