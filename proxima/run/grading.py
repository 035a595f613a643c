"""Grade a learner's own functions against proxima's answers: ``proxima check MODULE[:FUNCTION]``, and
``proxima.check(...)`` from Python (docs/tutorials/check.md).

The three source documents (docs/SEEDS.md) ask the learner to write functions of given names and signatures.
Each grader here calls the learner's function by keyword, with the document's parameter names, on the
document's own unit-test inputs where it gives them (the homework's) and on seeded random batches with episode
ends, and compares what it returns with proxima's function for the same thing (docs/tutorials/names.md), within
the tolerance the grader states. A mismatch whose cause is common (a flipped sign, the dones read one step early,
no bootstrap, ...) is recognised by a variant of proxima's answer that the learner's output matches in every
case, and named in a hint.

The learner's code draws from torch's global generator (the homework's ``Agent.__init__`` seeds it, and
``layer_init`` must use it), so grading runs under ``torch.random.fork_rng``: the caller's draws are as they were.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import math
import os
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.distributions import Categorical

from proxima.algo.advantages import discounted_returns, gae
from proxima.algo.custom import PIECES
from proxima.algo.losses import (
    clipped_surrogate_loss,
    entropy_bonus,
    normalize,
    policy_gradient_loss,
    value_loss,
)
from proxima.algo.optim import make_adam
from proxima.algo.schedules import Schedules
from proxima.base.errors import UserError, raised
from proxima.policy.encoders import layer_init
from proxima.policy.user import EnvSpaces

TUTORIAL, HOMEWORK, WALKTHROUGH = (
    "the PPO tutorial",
    "the policy-gradient homework",
    "the PPO-from-scratch walk-through",
)
PROXIMAS = "proxima's"


class Mismatch(Exception):
    """What a check found wrong, in the words of a FAIL line."""


@dataclass(frozen=True)
class Result:
    """One graded name: ``passed`` True, False, or None where it could not be graded (``detail`` says why)."""

    name: str
    passed: bool | None
    cases: int
    case: str | None = None  # the first case that failed
    detail: str = ""
    hint: str | None = None

    def lines(self) -> list[str]:
        if self.passed:
            return [f"PASS {self.name} ({self.cases} case{'s' if self.cases != 1 else ''})"]
        if self.passed is None:
            return [f"SKIP {self.name}: {self.detail}"]
        where = f'case "{self.case}": ' if self.case else ""
        return [f"FAIL {self.name}: {where}{self.detail}"] + ([f"  hint: {self.hint}"] if self.hint else [])


@dataclass(frozen=True)
class Grades:
    """What ``check`` found: the results, in the documents' order, and the names it looked for and did not find."""

    source: str
    results: list[Result]
    missing: list[str] = field(default_factory=list)
    # the graded objects proxima's loop takes in place of its own pieces, by proxima.train's keyword
    # (advantages=, policy_loss=, value_loss=, entropy_loss=, actor_critic=): what ``--probes`` trains
    pieces: dict[str, Any] = field(default_factory=dict)
    # proxima.scale.probe.ProbeResult of each probe trained with those pieces (check's probes=...)
    probes: list[Any] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in [*self.results, *self.probes])

    @property
    def exit_status(self) -> int:
        return 0 if self.passed else 1

    def found_line(self) -> str:
        """One line: which of the documents' names were found, and which documents' names were not."""
        line = f"{self.source}: grading {', '.join(r.name for r in self.results)}"
        by_document = {doc: [n for n in self.missing if GRADERS[n].document == doc] for doc in DOCUMENTS}
        absent = "; ".join(f"{doc}'s {', '.join(names)}" for doc, names in by_document.items() if names)
        return line + (f"; not found: {absent}" if absent else "")

    def lines(self) -> list[str]:
        return [line for r in self.results for line in r.lines()]

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class Case:
    """One input: ``run`` calls the learner's code; ``check`` raises ``Mismatch`` where its output is wrong;
    ``fits[hint]`` says whether the output is what a known mistake gives (a hint is given where the output fits
    it in every case that tests for it)."""

    name: str
    run: Callable[[], Any]
    check: Callable[[Any], None]
    fits: dict[str, Callable[[Any], bool]] = field(default_factory=dict)


@dataclass(frozen=True)
class Grader:
    name: str  # the document's
    document: str
    signature: str  # the document's, as the hint for a call that does not bind shows it
    cases: Callable[[Any], list[Case]]  # of the learner's object (a function or a class)
    owner: str | None = None  # the class whose method this is (TrajData.calc_returns), else None
    # an attribute of another document's class of the same name: the homework's Agent has a get_loss
    not_if: str | None = None

    @property
    def attribute(self) -> str:
        return self.name.rpartition(".")[2]


# ---- comparing -------------------------------------------------------------------------------------------


def _number(x: float) -> str:
    return f"{x:.7g}"


def _kind(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a tensor of shape {tuple(x.shape)}" if x.dim() else "a scalar tensor"
    return "None" if x is None else f"a {type(x).__name__}"


def differ(
    label: str, yours: Any, expected: Tensor, rtol: float, atol: float, whose: str = PROXIMAS
) -> str | None:
    """None where ``yours`` is ``expected`` within ``torch.isclose``'s ``rtol`` and ``atol``, else the first
    difference in the words of a FAIL line. A scalar may come as any one-element tensor or a Python number."""
    scalar = expected.dim() == 0
    if scalar and isinstance(yours, int | float) and not isinstance(yours, bool):
        yours = torch.tensor(float(yours))
    if isinstance(yours, np.ndarray):
        yours = torch.from_numpy(yours)
    if not isinstance(yours, Tensor):
        return f"{label} is {_kind(yours)} (yours) vs {_kind(expected)} ({whose})"
    if scalar and yours.numel() == 1:
        yours = yours.reshape(())
    if yours.shape != expected.shape:
        return f"{label} has shape {tuple(yours.shape)} (yours) vs {tuple(expected.shape)} ({whose})"
    mine, theirs = yours.detach().cpu().double(), expected.detach().cpu().double()
    close = torch.isclose(mine, theirs, rtol=rtol, atol=atol)
    if bool(close.all()):
        return None
    index = tuple(int(i) for i in (~close).nonzero()[0])
    at = f"{label}[{', '.join(map(str, index))}]" if index else label
    return f"{at} = {_number(mine[index].item())} (yours) vs {_number(theirs[index].item())} ({whose})"


def tensor_case(
    name: str,
    run: Callable[[], Any],
    label: str,
    expected: Tensor,
    rtol: float,
    atol: float,
    variants: Sequence[tuple[str, Tensor]] = (),
    read: Callable[[Any], Any] | None = None,
) -> Case:
    """A case whose answer is a tensor: ``read`` takes it from what ``run`` returns (default: all of it); each
    variant is (hint, what the mistake it names gives)."""
    read = read or _itself

    def check(out: Any) -> None:
        problem = differ(label, read(out), expected, rtol, atol)
        if problem:
            raise Mismatch(problem)

    wrongs: dict[str, list[Tensor]] = {}
    for hint, wrong in variants:  # a mistake may be made in more than one way
        wrongs.setdefault(hint, []).append(wrong)

    def fitting(outputs: list[Tensor]) -> Callable[[Any], bool]:
        return lambda out: any(differ(label, read(out), wrong, rtol, atol) is None for wrong in outputs)

    return Case(name, run, check, {hint: fitting(outputs) for hint, outputs in wrongs.items()})


def _itself(out: Any) -> Any:
    return out


def gradient_case(
    name: str,
    run: Callable[[], Any],
    leaves: Sequence[Tensor],
    expected: Sequence[Tensor],
    what: str,
    rtol: float,
    atol: float,
) -> Case:
    """A case that backpropagates the learner's loss into ``leaves`` and compares the gradients with
    ``expected``: a loss that carries none (computed under no_grad, detached, or a Python number) trains
    nothing."""

    def check(loss: Any) -> None:
        if not isinstance(loss, Tensor) or not loss.requires_grad:
            raise Mismatch(
                f"the loss carries no gradient to {what} ({_kind(loss)}, requires_grad=False): backward() "
                "would train nothing; keep it a tensor, outside torch.no_grad(), and do not detach it"
            )
        grads = torch.autograd.grad(loss.reshape(()), leaves, allow_unused=True)
        for i, (grad, want) in enumerate(zip(grads, expected, strict=True)):
            label = f"the gradient of {what}" + (f" (parameter {i})" if len(leaves) > 1 else "")
            problem = differ(label, torch.zeros_like(want) if grad is None else grad, want, rtol, atol)
            if problem:
                raise Mismatch(problem)

    return Case(name, run, check)


def bound(fn: Callable, name: str, signature: str, kwargs: dict) -> None:
    """Raise ``Mismatch`` where ``fn`` cannot take the document's keyword arguments."""
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:
        raise Mismatch(f"{name} cannot be called as the document calls it, {signature}: {e}") from None
    except ValueError:  # a builtin without a signature: let the call say
        pass


def grade(grader: Grader, obj: Any) -> Result:
    """Run ``grader``'s cases on the learner's ``obj``: the first failing case is the result's, and the hint
    is that of the first known mistake whose output the learner's matches in every case that tests for it."""
    try:
        cases = grader.cases(obj)
    except Mismatch as e:  # a call the document's keywords do not bind, a class that cannot be built
        return Result(grader.name, False, 0, detail=str(e))
    except _Skip as e:
        return Result(grader.name, None, 0, detail=str(e))
    outputs: list[tuple[Case, Any]] = []
    failure: tuple[str, str] | None = None
    for case in cases:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the homework's get_loss prints its loss
                out = case.run()
        except Mismatch as e:
            failure = failure or (case.name, str(e))
            continue
        except Exception as e:  # the learner's code raised: its message, on one line
            failure = failure or (case.name, "raised " + " ".join(raised(e).split()))
            continue
        outputs.append((case, out))
        if failure is None:
            try:
                case.check(out)
            except Mismatch as e:
                failure = (case.name, str(e))
            except Exception as e:  # an answer of another kind: a function left as `pass` returns None
                failure = (
                    case.name,
                    f"returned {_kind(out)}, which is not the document's answer ({raised(e)})",
                )
    if failure is None:
        return Result(grader.name, True, len(cases))
    hints = dict.fromkeys(hint for case in cases for hint in case.fits)
    hint = next(
        (
            h
            for h in hints
            if any(h in c.fits for c, _ in outputs)
            and all(_fits(c.fits[h], out) for c, out in outputs if h in c.fits)
        ),
        None,
    )
    return Result(grader.name, False, len(cases), case=failure[0], detail=failure[1], hint=hint)


def _fits(fit: Callable[[Any], bool], out: Any) -> bool:
    try:
        return fit(out)
    except Exception:  # an output of another kind entirely fits no known mistake
        return False


class _Skip(Exception):
    """The learner's object is of a kind no grader has answers for (the homework's GAE agent)."""


# ---- inputs ----------------------------------------------------------------------------------------------


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ends(shape: tuple[int, ...], share: float, g: torch.Generator) -> Tensor:
    return (torch.rand(*shape, generator=g) < share).float()


def _first_steps(ended: Tensor) -> Tensor:
    """The homework's "step t ended its episode" flags as proxima's "step t is a new episode's first": one step
    later (docs/tutorials/reinforce-to-ppo.md)."""
    return torch.cat([torch.zeros_like(ended[:1]), ended[:-1]])


# ---- the PPO tutorial ------------------------------------------------------------------------------------

# float32 sums of up to a rollout's length of terms, compared in float64
RTOL, ATOL = 1e-5, 1e-6

SHIFTED = (
    "your advantages are proxima's with the dones read one step early: you treat dones[t] as 'step t ended its "
    "episode' (the homework's convention); the tutorial's dones[t] = 1 marks step t as the first of a new "
    "episode, so step t's successor is cut off by dones[t + 1], and the last step's by next_done"
)
NO_BOOTSTRAP = (
    "your advantages do not bootstrap from next_value: the last step's delta is "
    "rewards[-1] + gamma * (1 - next_done) * next_value - values[-1]"
)


def _compute_advantages_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["compute_advantages"].signature
    cases = []
    settings = [
        # name, seed, steps, envs, share of episode ends, gamma, lambda, truncate
        ("no episode ends", 1, 8, 3, 0.0, 0.99, 0.95, False),
        ("episode boundaries", 2, 10, 4, 0.25, 0.99, 0.95, False),
        ("gamma 0.9, lambda 0.5", 3, 9, 3, 0.3, 0.9, 0.5, False),
        ("truncation: the reward holds gamma * V(final obs)", 4, 6, 2, 0.0, 0.99, 0.95, True),
    ]
    for name, seed, steps, envs, share, gamma, lam, truncate in settings:
        g = _generator(seed)
        rewards = torch.randn(steps, envs, generator=g)
        values = torch.randn(steps, envs, generator=g)
        next_value = torch.randn(1, envs, generator=g)
        dones = _ends((steps, envs), share, g)
        next_done = torch.zeros(envs)
        if share:
            next_done[1] = 1.0  # one env's episode ended at the rollout's last step
        if truncate:
            # env 0's episode hit its time limit at step 2: proxima's rollout adds gamma * V(final obs) to that
            # step's reward, after which the truncation is an ordinary episode end (proxima.algo.advantages)
            rewards[2, 0] += gamma * torch.randn((), generator=g)
            dones[3, 0] = 1.0
            dones[4, 1] = 1.0  # env 1's ended at step 3
        kwargs = dict(
            next_value=next_value,
            next_done=next_done,
            rewards=rewards,
            values=values,
            dones=dones,
            device=torch.device("cpu"),
            gamma=gamma,
            gae_lambda=lam,
        )
        bound(fn, "compute_advantages", signature, kwargs)
        expected = gae(rewards, values, dones, next_value, next_done, gamma, lam)
        shifted, nothing = _first_steps(dones), torch.zeros_like(next_value)
        variants = [
            (NO_BOOTSTRAP, gae(rewards, values, dones, nothing, next_done, gamma, lam)),
            (SHIFTED, gae(rewards, values, shifted, next_value, dones[-1], gamma, lam)),
            (SHIFTED, gae(rewards, values, shifted, next_value, next_done, gamma, lam)),
            (
                SHIFTED + "; " + NO_BOOTSTRAP[5:],
                gae(rewards, values, shifted, nothing, dones[-1], gamma, lam),
            ),
            (
                SHIFTED + "; " + NO_BOOTSTRAP[5:],
                gae(rewards, values, shifted, nothing, next_done, gamma, lam),
            ),
        ]
        cases.append(tensor_case(name, _caller(fn, kwargs), "advantages", expected, RTOL, ATOL, variants))
    return cases


def _caller(fn: Callable, kwargs: dict) -> Callable[[], Any]:
    """A call of the learner's ``fn`` on copies of ``kwargs``' tensors, so that one editing its inputs in place
    changes neither the reference's nor another case's."""

    def run() -> Any:
        return fn(
            **{
                k: v.clone() if isinstance(v, Tensor) and not v.requires_grad else v
                for k, v in kwargs.items()
            }
        )

    return run


NOT_NEGATED = "the sign is flipped: return minus L^CLIP, so that gradient descent maximizes the objective"
NOT_NORMALIZED = "advantages not normalized per minibatch: (A - A.mean()) / (A.std() + 1e-8) first (detail 7)"
BIASED_STD = (
    "advantages normalized with the biased std (unbiased=False, numpy's default); the tutorial's and CleanRL's "
    "divide by torch's std(), the unbiased one"
)
NOT_CLIPPED = (
    "no clipping: take the min of ratio * A and clamp(ratio, 1 - clip_coef, 1 + clip_coef) * A (eq. 7)"
)
INVERTED = (
    "the ratio is inverted: it is exp(new log-prob - old log-prob), the new policy's over the old one's"
)


def _policy_loss_inputs(seed: int, size: int, actions: int, spread: float) -> dict:
    g = _generator(seed)
    logits = torch.randn(size, actions, generator=g)
    mb_action = torch.randint(0, actions, (size,), generator=g)
    now = Categorical(logits=logits).log_prob(mb_action)
    return dict(
        logits=logits,
        mb_action=mb_action,
        mb_advantages=3.0 * torch.randn(size, generator=g) + 1.0,  # far from mean 0, std 1: normalizing shows
        mb_logprobs=now + spread * torch.randn(size, generator=g),
    )


def _calc_policy_loss_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["calc_policy_loss"].signature
    cases = []
    settings = [
        ("ratios within the clip range", 11, 32, 3, 0.05, 0.2),
        ("ratios outside the clip range", 12, 32, 3, 0.8, 0.2),
        ("clip_coef 0.1, 2 actions", 13, 24, 2, 0.3, 0.1),
    ]
    for name, seed, size, actions, spread, clip_coef in settings:
        x = _policy_loss_inputs(seed, size, actions, spread)
        logits, action, adv, old = x["logits"], x["mb_action"], x["mb_advantages"], x["mb_logprobs"]
        new = Categorical(logits=logits).log_prob(action)
        kwargs = dict(
            probs=Categorical(logits=logits),
            mb_action=action,
            mb_advantages=adv,
            mb_logprobs=old,
            clip_coef=clip_coef,
        )
        bound(fn, "calc_policy_loss", signature, kwargs)
        expected = clipped_surrogate_loss(new, old, adv, clip_coef)
        ratio = (new - old).exp()
        biased = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
        variants = [
            (NOT_NEGATED, -expected),
            (NOT_NORMALIZED, clipped_surrogate_loss(new, old, adv, clip_coef, normalize_advantages=False)),
            (NOT_NORMALIZED, -clipped_surrogate_loss(new, old, adv, clip_coef, normalize_advantages=False)),
            (BIASED_STD, clipped_surrogate_loss(new, old, biased, clip_coef, normalize_advantages=False)),
            (NOT_CLIPPED, -(ratio * normalize(adv)).mean()),
            (INVERTED, clipped_surrogate_loss(old, new, adv, clip_coef)),
        ]

        def run(logits=logits, kwargs=kwargs) -> Any:
            return fn(**{**kwargs, "probs": Categorical(logits=logits.clone())})

        cases.append(tensor_case(name, run, "loss", expected, RTOL, ATOL, variants))
    # the gradient: the loss must reach the actor's logits through probs
    x = _policy_loss_inputs(12, 32, 3, 0.8)
    leaf = x["logits"].clone().requires_grad_(True)
    mine = clipped_surrogate_loss(
        Categorical(logits=leaf).log_prob(x["mb_action"]), x["mb_logprobs"], x["mb_advantages"], 0.2
    )
    want = torch.autograd.grad(mine, [leaf])

    def run_grad() -> Any:
        leaf.grad = None
        return fn(
            probs=Categorical(logits=leaf),
            mb_action=x["mb_action"].clone(),
            mb_advantages=x["mb_advantages"].clone(),
            mb_logprobs=x["mb_logprobs"].clone(),
            clip_coef=0.2,
        )

    cases.append(
        gradient_case("the gradient to the logits", run_grad, [leaf], list(want), "the logits", 1e-4, 1e-6)
    )
    return cases


NO_V_COEF = (
    "the loss is not weighted by v_coef: the function returns c1 * L^VF (eq. 9), so multiply by v_coef"
)
NO_HALF = "the squared error is not halved: the tutorial's value loss is 1/2 the mean squared difference"
BROADCAST = (
    "critic(mb_obs) has shape (B, 1) and mb_returns (B,): their difference broadcasts to (B, B); squeeze the "
    "critic's output (.squeeze(-1)) first"
)
VALUE_SIGN = "the sign is flipped: the value loss is a squared error, never negative"


def _critic(seed: int, obs: int) -> nn.Sequential:
    g = _generator(seed)
    critic = nn.Sequential(nn.Linear(obs, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in critic.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
    return critic


def _calc_value_function_loss_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["calc_value_function_loss"].signature
    cases = []
    for name, seed, size, v_coef in [("v_coef 0.5", 21, 16, 0.5), ("v_coef 0.25", 22, 24, 0.25)]:
        g = _generator(seed)
        critic = _critic(seed, 4)
        obs, returns = torch.randn(size, 4, generator=g), 2.0 * torch.randn(size, generator=g) + 1.0
        kwargs = dict(critic=critic, mb_obs=obs, mb_returns=returns, v_coef=v_coef)
        bound(fn, "calc_value_function_loss", signature, kwargs)
        with torch.no_grad():
            column = critic(obs)
        values = column.squeeze(-1)
        expected = v_coef * value_loss(values, returns)
        wide = 0.5 * (column - returns).pow(2).mean()  # (B, 1) - (B,): (B, B)
        variants = [
            (NO_V_COEF, value_loss(values, returns)),
            (NO_HALF, 2.0 * expected),
            (NO_V_COEF + "; " + NO_HALF[4:], 2.0 * value_loss(values, returns)),
            (BROADCAST, v_coef * wide),
            (BROADCAST, 2.0 * v_coef * wide),
            (BROADCAST, wide),
            (VALUE_SIGN, -expected),
        ]
        cases.append(tensor_case(name, _caller(fn, kwargs), "loss", expected, RTOL, ATOL, variants))
    # the gradient: the loss must train the critic
    g = _generator(21)
    critic = _critic(21, 4)
    obs, returns = torch.randn(16, 4, generator=g), 2.0 * torch.randn(16, generator=g) + 1.0
    params = list(critic.parameters())
    want = torch.autograd.grad(0.5 * value_loss(critic(obs).squeeze(-1), returns), params)
    kwargs = dict(critic=critic, mb_obs=obs, mb_returns=returns, v_coef=0.5)
    cases.append(
        gradient_case(
            "the gradient to the critic", _caller(fn, kwargs), params, list(want), "the critic", 1e-4, 1e-6
        )
    )
    return cases


ENTROPY_SIGN = (
    "the sign is flipped: minimizing the loss must increase the entropy, so return -ent_coef * entropy"
)
NO_ENT_COEF = "the entropy is not weighted by ent_coef (c2 in eq. 9)"
SUMMED = "the entropy is summed over the minibatch; take its mean"


def _calc_entropy_loss_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["calc_entropy_loss"].signature
    cases = []
    for name, seed, size, actions, scale, ent_coef in [
        ("ent_coef 0.01, 4 actions", 31, 16, 4, 1.0, 0.01),
        ("ent_coef 0.2, 2 actions", 32, 12, 2, 3.0, 0.2),
    ]:
        logits = scale * torch.randn(size, actions, generator=_generator(seed))
        entropy = Categorical(logits=logits).entropy()
        bound(fn, "calc_entropy_loss", signature, dict(probs=Categorical(logits=logits), ent_coef=ent_coef))
        expected = -ent_coef * entropy_bonus(entropy)
        variants = [
            (ENTROPY_SIGN, -expected),
            (NO_ENT_COEF, -entropy.mean()),
            (NO_ENT_COEF + "; " + ENTROPY_SIGN[4:], entropy.mean()),
            (SUMMED, -ent_coef * entropy.sum()),
        ]

        def run(logits=logits, ent_coef=ent_coef) -> Any:
            return fn(probs=Categorical(logits=logits.clone()), ent_coef=ent_coef)

        cases.append(tensor_case(name, run, "loss", expected, RTOL, ATOL, variants))
    leaf = torch.randn(16, 4, generator=_generator(31)).requires_grad_(True)
    want = torch.autograd.grad(-0.01 * entropy_bonus(Categorical(logits=leaf).entropy()), [leaf])

    def run_grad() -> Any:
        return fn(probs=Categorical(logits=leaf), ent_coef=0.01)

    cases.append(
        gradient_case("the gradient to the logits", run_grad, [leaf], list(want), "the logits", 1e-4, 1e-7)
    )
    return cases


UNSCALED = (
    "the rows have norm 1 whatever row_norm says: pass it as orthogonal_'s gain, "
    "torch.nn.init.orthogonal_(layer.weight, row_norm)"
)
NOT_ORTHOGONAL = (
    "the rows are not orthogonal: torch.nn.init.orthogonal_(layer.weight, row_norm) makes them so"
)


def _row_norms_are(norm: float, orthogonal: bool) -> Callable[[Any], bool]:
    """Whether a ``layer_init`` output's rows have norm ``norm``, and are orthogonal or not."""

    def fits(out: Any) -> bool:
        weight = out[0].weight.detach()
        gram = weight @ weight.T
        apart = bool(torch.allclose(gram - torch.diag(gram.diagonal()), torch.zeros_like(gram), atol=1e-5))
        return bool(torch.allclose(weight.norm(dim=1), torch.tensor(norm), rtol=1e-4)) and apart == orthogonal

    return fits


def _layer_init_cases(fn: Callable) -> list[Case]:
    """The weights are random, so the check is of what proxima's ``layer_init`` makes of the same layer: rows
    orthogonal and of norm ``row_norm`` (``weight @ weight.T`` is ``row_norm**2 * I``), and the bias."""
    signature = GRADERS["layer_init"].signature
    cases = []
    for name, inputs, outputs, kwargs in [
        ("row_norm 0.01, bias_const 0.5 (the actor's output)", 16, 4, dict(row_norm=0.01, bias_const=0.5)),
        ("row_norm 1 (the critic's output)", 64, 1, dict(row_norm=1.0)),
        ("the defaults: row_norm sqrt(2), bias_const 0", 64, 64, {}),
    ]:
        bound(fn, "layer_init", signature, dict(layer=nn.Linear(inputs, outputs), **kwargs))
        mine = layer_init(nn.Linear(inputs, outputs), **kwargs)
        gram, bias = (mine.weight @ mine.weight.T).detach(), mine.bias.detach()

        def run(inputs=inputs, outputs=outputs, kwargs=kwargs) -> Any:
            layer = nn.Linear(inputs, outputs)
            return layer, fn(layer=layer, **kwargs)

        def check(out: Any, gram=gram, bias=bias) -> None:
            layer, returned = out
            if returned is not layer:
                raise Mismatch(
                    f"returned {_kind(returned)} (yours) vs the layer it was given (the document's)"
                )
            weight = layer.weight.detach()
            # float32 orthogonalization: the products of a 64 x 64 matrix are exact to about 1e-6
            problem = differ("(weight @ weight.T)", weight @ weight.T, gram, 1e-4, 1e-5) or differ(
                "bias", layer.bias.detach(), bias, 1e-6, 1e-7
            )
            if problem:
                raise Mismatch(problem)

        norm = float(kwargs.get("row_norm", math.sqrt(2)))
        fits = {UNSCALED: _row_norms_are(1.0, True), NOT_ORTHOGONAL: _row_norms_are(norm, False)}
        cases.append(Case(name, run, check, fits))
    return cases


def _cartpole() -> EnvSpaces:
    """CartPole's spaces, as the tutorial's ``Agent(envs)`` reads a vector env of 4 of them."""
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    try:
        return EnvSpaces(env.observation_space, env.action_space, num_envs=4)
    finally:
        env.close()


def _output_layer(net: Any, role: str, outputs: int) -> nn.Linear:
    """The layer that gives ``net``'s output: a Sequential's last module, else the last ``nn.Linear`` it holds;
    ``Mismatch`` where that is not an ``nn.Linear`` (an activation after it bounds the output)."""
    if not isinstance(net, nn.Module):
        raise Mismatch(f"agent.{role} is {_kind(net)} (yours) vs an nn.Module (the tutorial's nn.Sequential)")
    last: Any = net
    while isinstance(last, nn.Sequential) and len(last):
        last = last[-1]
    if last is net:  # a module of its own forward: its last Linear, in the order it made them
        last = next((m for m in reversed(list(net.modules())) if isinstance(m, nn.Linear)), None)
    if not isinstance(last, nn.Linear):
        why = "logits, which the Categorical normalizes" if role == "actor" else "a value of either sign"
        raise Mismatch(
            f"the {role} ends in {type(last).__name__} (yours) vs an nn.Linear with {outputs} output"
            f"{'s' if outputs > 1 else ''} (the tutorial's: {why})"
        )
    return last


DEFAULT_NORM = "the rows have norm sqrt(2), layer_init's default: pass row_norm="


def _agent_cases(cls: Any) -> list[Case]:
    """The tutorial's ``Agent(envs)`` built on CartPole's spaces: the shapes of ``actor(obs)`` and
    ``critic(obs)``, and its init (the diagram's): the output layers' rows of norm 0.01 (the actor's) and 1
    (the critic's). Orthogonal rows of a float32 layer have their norm to about 1e-6: rtol 1e-4."""
    envs = _cartpole()
    actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]  # CartPole's: Discrete(2)
    bound(cls, "Agent", GRADERS["Agent"].signature, dict(envs=envs))
    obs = torch.randn(5, *(envs.single_observation_space.shape or ()), generator=_generator(81))

    def build() -> Any:
        return cls(envs=envs)

    def outputs() -> Any:
        agent = build()
        with torch.no_grad():
            return agent.actor(obs.clone()), agent.critic(obs.clone())

    def shapes(out: Any) -> None:
        for label, value, shape in [("actor(obs)", out[0], (5, actions)), ("critic(obs)", out[1], (5, 1))]:
            got = tuple(value.shape) if isinstance(value, Tensor) else None
            if got != shape:
                what = f"shape {got}" if got is not None else _kind(value)
                raise Mismatch(f"{label} has {what} (yours) vs shape {shape} (the tutorial's)")

    cases = [Case("actor(obs) and critic(obs) of 5 CartPole observations", outputs, shapes)]
    for role, outputs_, norm in [("actor", actions, 0.01), ("critic", 1, 1.0)]:

        def run(role=role, outputs_=outputs_) -> Any:
            layer = _output_layer(getattr(build(), role, None), role, outputs_)
            return layer.weight.detach().norm(dim=1)

        def check(norms: Tensor, role=role, norm=norm) -> None:
            problem = differ(
                f"the {role}'s output layer's row norm",
                norms,
                torch.full_like(norms, norm),
                1e-4,
                1e-7,
                whose=f"the tutorial's, layer_init(..., row_norm={norm:g})",
            )
            if problem:
                raise Mismatch(problem)

        def default(norms: Tensor) -> bool:
            return bool(torch.allclose(norms, torch.full_like(norms, math.sqrt(2)), rtol=1e-4))

        name = f"the {role}'s output layer: rows of norm {norm:g}"
        cases.append(Case(name, run, check, {f"{DEFAULT_NORM}{norm:g} for the {role}'s output": default}))
    return cases


def _minibatch_indexes_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["minibatch_indexes"].signature
    cases = []
    for batch_size, minibatch_size in [(64, 16), (12, 3), (8, 8)]:
        bound(fn, "minibatch_indexes", signature, dict(batch_size=batch_size, minibatch_size=minibatch_size))

        def check(out: Any, batch_size=batch_size, minibatch_size=minibatch_size) -> None:
            _check_partition(
                [np.asarray(part).reshape(-1) for part in list(out)], batch_size, minibatch_size, "minibatch"
            )

        run = _caller(fn, dict(batch_size=batch_size, minibatch_size=minibatch_size))
        cases.append(Case(f"batch_size {batch_size}, minibatch_size {minibatch_size}", run, check))
    return cases


def _check_partition(parts: list[np.ndarray], batch_size: int, minibatch_size: int, what: str) -> None:
    """Raise ``Mismatch`` unless ``parts`` cut ``range(batch_size)`` into minibatches of ``minibatch_size``."""
    count = batch_size // minibatch_size
    if len(parts) != count:
        raise Mismatch(f"{len(parts)} minibatches (yours) vs {count} (batch_size // minibatch_size)")
    for i, part in enumerate(parts):
        if len(part) != minibatch_size:
            raise Mismatch(f"{what} {i} has {len(part)} samples (yours) vs {minibatch_size} (minibatch_size)")
    seen = np.bincount(np.concatenate(parts).astype(np.int64), minlength=batch_size)
    if len(seen) > batch_size:
        raise Mismatch(f"sample {len(seen) - 1} (yours) is past the batch's last, {batch_size - 1}")
    if not (seen == 1).all():
        index = int(np.nonzero(seen != 1)[0][0])
        raise Mismatch(
            f"sample {index} appears {seen[index]} times (yours) vs once (each exactly once, detail 6)"
        )


def _make_minibatches_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["make_minibatches"].signature
    cases = []
    for name, steps, envs, obs_shape, action_shape, minibatch_size in [
        ("8 steps of 4 envs, minibatches of 8", 8, 4, (3,), (), 8),
        ("image-like observations, 2-number actions", 6, 2, (2, 2), (2,), 4),
    ]:
        ids = torch.arange(steps * envs, dtype=torch.float32).reshape(steps, envs)
        # each sample's fields are made from its index, so a row whose fields came from different samples shows
        obs = ids.reshape(steps, envs, *[1] * len(obs_shape)) + torch.zeros(steps, envs, *obs_shape)
        kwargs = dict(
            obs=obs,
            logprobs=-ids / 100,
            actions=(ids % 5)
            .reshape(steps, envs, *[1] * len(action_shape))
            .expand(steps, envs, *action_shape)
            .clone(),
            advantages=ids / 10 + 1,
            values=ids / 100 - 2,
            obs_shape=obs_shape,
            action_shape=action_shape,
            batch_size=steps * envs,
            minibatch_size=minibatch_size,
        )
        bound(fn, "make_minibatches", signature, kwargs)

        def check(out: Any, kwargs=kwargs) -> None:
            _check_minibatches(list(out), kwargs)

        cases.append(Case(name, _caller(fn, kwargs), check, {NO_VALUES: _returns_are_advantages}))
    return cases


NO_VALUES = "returns are advantages + values (the tutorial's tip); yours are the advantages"


def _returns_are_advantages(out: Any) -> bool:
    return all(torch.allclose(mb.returns, mb.advantages) for mb in out)


def _check_minibatches(minibatches: list, kwargs: dict) -> None:
    batch, size = kwargs["batch_size"], kwargs["minibatch_size"]
    shapes = {
        "obs": (size, *kwargs["obs_shape"]),
        "logprobs": (size,),
        "actions": (size, *kwargs["action_shape"]),
        "advantages": (size,),
        "returns": (size,),
        "values": (size,),
    }
    parts = []
    for i, mb in enumerate(minibatches):
        for name, shape in shapes.items():
            value = getattr(mb, name, None)
            if not isinstance(value, Tensor) or tuple(value.shape) != shape:
                raise Mismatch(
                    f"minibatch {i}'s {name} is {_kind(value)} (yours) vs a tensor of shape {shape}"
                )
        ids = mb.obs.reshape(size, -1)[:, 0]
        expected = {
            "logprobs": -ids / 100,
            "actions": (ids % 5).reshape(size, *[1] * len(kwargs["action_shape"])).expand(shapes["actions"]),
            "advantages": ids / 10 + 1,
            "values": ids / 100 - 2,
            "returns": ids / 10 + 1 + ids / 100 - 2,
        }
        for name, want in expected.items():
            whose = "advantages + values" if name == "returns" else "the same sample's, by its obs"
            problem = differ(
                f"minibatch {i}'s {name}",
                getattr(mb, name),
                want.to(getattr(mb, name).dtype),
                RTOL,
                ATOL,
                whose,
            )
            if problem:
                raise Mismatch(problem)
        parts.append(ids.round().long().numpy())
    _check_partition(parts, batch, size, "minibatch")


LATE_STEP = (
    "one step late: after k calls of step() the rate is initial_lr + k / num_updates * (end_lr - initial_lr)"
)


def _lr_case(make: Callable[[Any], Any], start: float, end: float, updates: int, groups: int) -> Case:
    """Step the learner's scheduler ``updates`` times; the rate after ``k`` steps must be proxima's line from
    ``start`` to ``end`` at update ``k`` (detail 4), in every parameter group. Python floats: rtol 1e-9."""
    line = Schedules(updates, {"learning_rate": [start, end, 0]})

    def run() -> Any:
        params = [nn.Parameter(torch.zeros(2)) for _ in range(groups)]
        optimizer = torch.optim.Adam([{"params": [p]} for p in params], lr=start)
        scheduler = make(optimizer)
        rates = []
        for _ in range(updates):
            scheduler.step()
            rates.append([float(group["lr"]) for group in optimizer.param_groups])
        return rates

    def wrong(rates: list[list[float]], late: int = 0) -> str | None:
        for k, row in enumerate(rates, start=1):
            want = line.value("learning_rate", k - late)
            for g, rate in enumerate(row):
                if not math.isclose(rate, want, rel_tol=1e-9, abs_tol=1e-15):
                    group = f" in param group {g}" if groups > 1 else ""
                    return f"lr after {k} step{'s' if k > 1 else ''}{group} = {_number(rate)} (yours) vs {_number(want)} ({PROXIMAS})"
        return None

    def check(rates: list[list[float]]) -> None:
        problem = wrong(rates)
        if problem:
            raise Mismatch(problem)

    name = f"{_number(start)} to {_number(end)} over {updates} updates"
    name += f", {groups} param groups" if groups > 1 else ""
    return Case(name, run, check, {LATE_STEP: lambda rates: wrong(rates, late=1) is None})


def _ppo_scheduler_cases(cls: Any) -> list[Case]:
    signature = GRADERS["PPOScheduler"].signature
    bound(cls, "PPOScheduler", signature, dict(optimizer=None, initial_lr=1.0, end_lr=0.0, num_updates=1))
    cases = []
    for start, end, updates, groups in [(1e-3, 1e-5, 10, 1), (2.5e-4, 0.0, 4, 2)]:

        def make(optimizer: Any, start=start, end=end, updates=updates) -> Any:
            return cls(optimizer=optimizer, initial_lr=start, end_lr=end, num_updates=updates)

        cases.append(_lr_case(make, start, end, updates, groups))
    return cases


def _make_optimizer_cases(fn: Callable) -> list[Case]:
    signature = GRADERS["make_optimizer"].signature
    agent = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    kwargs = dict(agent=agent, num_updates=5, initial_lr=1e-3, end_lr=1e-4)
    bound(fn, "make_optimizer", signature, kwargs)
    eps = make_adam(agent.parameters(), 1e-3).param_groups[0]["eps"]

    def check(out: Any) -> None:
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise Mismatch(
                f"returned {_kind(out)} (yours) vs a tuple (optimizer, scheduler) (the document's)"
            )
        optimizer, scheduler = out
        groups = getattr(optimizer, "param_groups", None)
        if not groups:
            raise Mismatch(
                f"the optimizer is {_kind(optimizer)} (yours) vs a torch.optim.Adam (the document's)"
            )
        theirs = {id(p) for g in groups for p in g["params"]}
        if theirs != {id(p) for p in agent.parameters()}:
            raise Mismatch(
                f"the optimizer holds {len(theirs)} tensors (yours) vs the agent's {len(list(agent.parameters()))} parameters"
            )
        for key, want in (("lr", 1e-3), ("eps", eps)):
            if not math.isclose(float(groups[0].get(key, math.nan)), want, rel_tol=1e-9):
                why = "proxima's, detail 3: not PyTorch's 1e-8" if key == "eps" else "initial_lr"
                raise Mismatch(f"{key} = {groups[0].get(key)} (yours) vs {want} ({why})")
        for _ in range(5):
            scheduler.step()
        if not math.isclose(float(groups[0]["lr"]), 1e-4, rel_tol=1e-6):
            raise Mismatch(f"lr after num_updates steps = {groups[0]['lr']} (yours) vs 0.0001 (end_lr)")

    return [Case("an agent of 2 layers, 5 updates", _caller(fn, kwargs), check)]


# ---- the policy-gradient homework -------------------------------------------------------------------------


class HomeworkTrajData(types.SimpleNamespace):
    """The homework's trajectory store, as its unit tests fill it: what ``get_loss`` reads."""


def homework_traj_data(ppo: bool = False) -> HomeworkTrajData:
    """The tensors of the homework's loss tests: ``TrajData(10, 5, 4, 1)`` filled in its order after
    ``torch.manual_seed(0)`` (tests/test_family.py)."""
    torch.manual_seed(0)
    states = torch.rand(10, 5, 4)
    actions = torch.randint(0, 1, (10, 5))
    rewards = torch.rand(10, 5)
    not_dones = torch.randint(0, 2, (10, 5))
    log_probs = torch.rand(10, 5)
    returns = 2 * torch.rand(10, 5) - 1 if ppo else torch.rand(10, 5)
    return HomeworkTrajData(
        states=states,
        actions=actions,
        rewards=rewards,
        not_dones=not_dones,
        log_probs=log_probs,
        returns=returns,
        n_steps=10,
    )


def _random_traj_data(seed: int, actions: int, ppo: bool) -> HomeworkTrajData:
    g = _generator(seed)
    return HomeworkTrajData(
        states=torch.rand(10, 5, 4, generator=g),
        actions=torch.randint(0, actions, (10, 5), generator=g),
        rewards=torch.rand(10, 5, generator=g),
        not_dones=torch.randint(0, 2, (10, 5), generator=g),
        log_probs=-torch.rand(10, 5, generator=g),
        returns=(2 * torch.rand(10, 5, generator=g) - 1) if ppo else torch.rand(10, 5, generator=g),
        n_steps=10,
    )


HOMEWORK_LOSSES = {"REINFORCE": -0.23688789, "VPG": 0.06184128, "PPO": 0.93139088}  # its unit tests', to 1e-8
NO_VALUE_TERM = "the value loss is missing: get_loss returns the policy loss plus the MSE of returns - values"
HALF_VALUE = "the value term is 1/2 MSE; the homework's is the mean of (returns - values)^2, not halved"
PG_SIGN = "the policy term's sign is flipped: the loss is minus the mean of log-prob times the weight"


def homework_loss(
    kind: str, data: HomeworkTrajData, policy: nn.Module | None, value: nn.Module | None
) -> tuple[Tensor, list]:
    """The homework's ``get_loss`` for ``kind`` by proxima's functions (tests/test_family.py), and its known
    mistakes as (hint, loss)."""
    if kind == "REINFORCE":
        loss = policy_gradient_loss(data.log_probs, data.returns)
        return loss, [(PG_SIGN, -loss)]
    assert value is not None and policy is not None
    values = value(data.states).squeeze(-1)
    if kind == "VPG":
        pg = policy_gradient_loss(data.log_probs, data.returns - values)
    else:  # the homework's PPO: epsilon 0.1, advantages not normalized
        new = Categorical(logits=policy(data.states)).log_prob(data.actions).reshape(-1)
        advantages = (data.returns - values).reshape(-1)
        pg = clipped_surrogate_loss(
            new, data.log_probs.reshape(-1), advantages, 0.1, normalize_advantages=False
        )
    vf = value_loss(values, data.returns)
    return pg + 2.0 * vf, [(NO_VALUE_TERM, pg), (HALF_VALUE, pg + vf), (PG_SIGN, -pg + 2.0 * vf)]


def _get_loss_cases(cls: Any) -> list[Case]:
    signature = "Agent(n_obs, n_actions), then agent.get_loss(traj_data)"
    bound(cls, "Agent", signature, dict(n_obs=4, n_actions=1))
    try:
        kind = getattr(cls(n_obs=4, n_actions=1), "name", None)
    except Exception as e:
        raise Mismatch("Agent(n_obs=4, n_actions=1) raised " + " ".join(raised(e).split())) from None
    if kind not in HOMEWORK_LOSSES:
        raise _Skip(
            f"Agent(n_obs=4, n_actions=1).name is {kind!r}; graded: {', '.join(HOMEWORK_LOSSES)} (the homework's)"
        )
    cases = []
    for name, actions, make in [
        ("the homework's unit test", 1, lambda: homework_traj_data(ppo=kind == "PPO")),
        ("3 actions, other data", 3, lambda: _random_traj_data(41, 3, ppo=kind == "PPO")),
    ]:
        data = make()
        torch.manual_seed(0)  # the homework's tests build a.policy, then a.value, after this
        policy, value = nn.Linear(4, actions), nn.Linear(4, 1)
        with torch.no_grad():
            expected, variants = homework_loss(kind, data, policy, value)

        def run(actions=actions, data=data, policy=policy, value=value) -> Any:
            agent = cls(n_obs=4, n_actions=actions)
            if kind != "REINFORCE":
                agent.policy, agent.value = policy, value
            copy = HomeworkTrajData(
                **{k: v.clone() if isinstance(v, Tensor) else v for k, v in vars(data).items()}
            )
            return agent.get_loss(traj_data=copy)

        cases.append(tensor_case(name, run, "loss", expected, RTOL, ATOL, variants))
    return cases


LATE = (
    "you read not_dones one step late: the homework's not_dones[t] = 0 says step t ended its episode, so the "
    "return of step t stops there (not_dones[t], not not_dones[t + 1])"
)


def _homework_store(cls: Any, signature: str, rewards: Tensor, ended: Tensor) -> Any:
    steps, envs = rewards.shape
    bound(cls, "TrajData", signature, dict(n_steps=steps, n_envs=envs, n_obs=4, n_actions=1))
    store = cls(n_steps=steps, n_envs=envs, n_obs=4, n_actions=1)
    store.rewards, store.not_dones = rewards.clone(), 1.0 - ended
    return store


def _trajectories(seed: int, share: float) -> tuple[Tensor, Tensor, Tensor]:
    g = _generator(seed)
    return torch.rand(12, 4, generator=g), _ends((12, 4), share, g), torch.randn(12, 4, generator=g)


def _calc_returns_cases(cls: Any) -> list[Case]:
    signature = GRADERS["TrajData.calc_returns"].signature
    cases = []
    for name, seed, share, gamma in [
        ("episode ends", 51, 0.25, 0.99),
        ("no episode ends", 52, 0.0, 0.99),
        ("gamma 0.5", 53, 0.3, 0.5),
    ]:
        rewards, ended, _ = _trajectories(seed, share)
        zero = torch.zeros(4)
        expected = discounted_returns(rewards, _first_steps(ended), zero, ended[-1], gamma)
        late = discounted_returns(rewards, ended, zero, zero, gamma)

        def run(rewards=rewards, ended=ended, gamma=gamma) -> Any:
            store = _homework_store(cls, "TrajData(n_steps, n_envs, n_obs, n_actions)", rewards, ended)
            bound(store.calc_returns, "calc_returns", signature, dict(gamma=gamma))
            store.calc_returns(gamma=gamma)
            return store.returns

        cases.append(tensor_case(name, run, "returns", expected, RTOL, ATOL, [(LATE, late)]))
    return cases


def _calc_gae_cases(cls: Any) -> list[Case]:
    signature = GRADERS["TrajData.calc_gae"].signature
    cases = []
    for name, seed, share, gamma, lam in [
        ("episode ends", 61, 0.25, 0.99, 0.95),
        ("no episode ends", 62, 0.0, 0.99, 0.95),
        ("gamma 0.9, lam 0.5", 63, 0.3, 0.9, 0.5),
    ]:
        rewards, ended, values = _trajectories(seed, share)
        zero = torch.zeros(4)
        # the homework's calc_gae bootstraps from nothing past the rollout (its next_values end with 0)
        expected = gae(rewards, values, _first_steps(ended), zero, ended[-1], gamma, lam)
        late = gae(rewards, values, ended, zero, zero, gamma, lam)

        def run(rewards=rewards, ended=ended, values=values, gamma=gamma, lam=lam) -> Any:
            store = _homework_store(cls, "TrajData(n_steps, n_envs, n_obs, n_actions)", rewards, ended)
            bound(store.calc_gae, "calc_gae", signature, dict(values=values, gamma=gamma, lam=lam))
            store.calc_gae(values=values.clone(), gamma=gamma, lam=lam)
            return store.advantages

        cases.append(
            tensor_case(
                name, run, "advantages", expected, RTOL, ATOL, [(LATE.replace("return", "advantage"), late)]
            )
        )
    return cases


# ---- the PPO-from-scratch walk-through --------------------------------------------------------------------


def _pendulum():
    import gymnasium as gym

    return gym.make("Pendulum-v1")


def _wrapper_case(
    name: str,
    build: Callable[[Any], Any],
    call: Callable[[Any], list],
    read: Callable[[list], Any],
    expected: Tensor,
    label: str,
) -> Case:
    """``call`` gives the learner's wrapper's outputs, one per input, which ``read`` makes one float64 tensor;
    rtol 1e-6, as the wrappers do one float32 product."""

    def run() -> Any:
        env = _pendulum()
        try:
            return call(build(env))
        finally:
            env.close()

    def each(out: list) -> Any:
        return None if any(o is None for o in out) else read(out)  # a method left as `pass`

    return tensor_case(name, run, label, expected, 1e-6, 1e-7, read=each)


def _discrete_action_cases(cls: Any) -> list[Case]:
    from proxima.envs.pendulum import DiscreteTorques

    env = _pendulum()
    torques = torch.tensor([float(DiscreteTorques(env).action(a)[0]) for a in range(5)], dtype=torch.float64)
    env.close()
    bound(
        cls, "DiscreteActionWrapper", GRADERS["DiscreteActionWrapper"].signature, dict(env=None, n_actions=5)
    )

    def torques_of(wrapper: Any) -> list:
        if getattr(wrapper.action_space, "n", None) != 5:
            raise Mismatch(f"action_space is {wrapper.action_space} (yours) vs Discrete(5) (proxima's)")
        return [wrapper.action(action=a) for a in range(5)]

    def read(out: list) -> Tensor:
        return torch.tensor([float(np.asarray(o).reshape(-1)[0]) for o in out], dtype=torch.float64)

    def build(env: Any) -> Any:
        return cls(env=env, n_actions=5)

    return [_wrapper_case("the 5 torques", build, torques_of, read, torques, "torque of action")]


def _observation_cases(cls: Any) -> list[Case]:
    from proxima.envs.pendulum import ScaleAngularVelocity

    bound(cls, "ObservationWrapper", GRADERS["ObservationWrapper"].signature, dict(env=None))
    g = np.random.default_rng(71)
    angles = g.uniform(-np.pi, np.pi, 4)
    observations = np.stack([np.cos(angles), np.sin(angles), g.uniform(-8, 8, 4)], axis=1).astype(np.float32)
    env = _pendulum()
    expected = torch.tensor(
        np.stack([ScaleAngularVelocity(env).observation(o.copy()) for o in observations]), dtype=torch.float64
    )
    env.close()

    def scaled(wrapper: Any) -> list:
        return [wrapper.observation(observation=o.copy()) for o in observations]

    def read(out: list) -> Tensor:
        return torch.as_tensor(np.stack([np.asarray(o, dtype=np.float64) for o in out]))

    def build(env: Any) -> Any:
        return cls(env=env)

    return [_wrapper_case("4 observations", build, scaled, read, expected, "observation")]


def _floats(out: list) -> Tensor:
    return torch.tensor([float(o) for o in out], dtype=torch.float64)


def _reward_cases(cls: Any) -> list[Case]:
    from proxima.envs.pendulum import ScaleReward

    bound(
        cls,
        "RewardScalingWrapper",
        GRADERS["RewardScalingWrapper"].signature,
        dict(env=None, scaling_factor=0.1),
    )
    rewards = [-16.2736044, -0.5, 0.0]
    cases = []
    for name, kwargs, scale in [
        ("the default scaling_factor", {}, 0.1),
        ("scaling_factor 0.5", dict(scaling_factor=0.5), 0.5),
    ]:
        env = _pendulum()
        expected = torch.tensor([ScaleReward(env, scale).reward(r) for r in rewards], dtype=torch.float64)
        env.close()

        def scaled(wrapper: Any) -> list:
            return [wrapper.reward(reward=r) for r in rewards]

        def build(env: Any, kwargs=kwargs) -> Any:
            return cls(env=env, **kwargs)

        cases.append(_wrapper_case(name, build, scaled, _floats, expected, "reward"))
    return cases


# ---- the registry -----------------------------------------------------------------------------------------

DOCUMENTS = (TUTORIAL, HOMEWORK, WALKTHROUGH)

GRADERS: dict[str, Grader] = {
    g.name: g
    for g in [
        Grader(
            "layer_init",
            TUTORIAL,
            "layer_init(layer, row_norm=np.sqrt(2), bias_const=0.0)",
            _layer_init_cases,
        ),
        Grader("Agent", TUTORIAL, "Agent(envs)", _agent_cases, not_if="get_loss"),
        Grader(
            "compute_advantages",
            TUTORIAL,
            "compute_advantages(next_value, next_done, rewards, values, dones, device, gamma, gae_lambda)",
            _compute_advantages_cases,
        ),
        Grader(
            "minibatch_indexes",
            TUTORIAL,
            "minibatch_indexes(batch_size, minibatch_size)",
            _minibatch_indexes_cases,
        ),
        Grader(
            "make_minibatches",
            TUTORIAL,
            "make_minibatches(obs, logprobs, actions, advantages, values, obs_shape, action_shape, batch_size, "
            "minibatch_size)",
            _make_minibatches_cases,
        ),
        Grader(
            "calc_policy_loss",
            TUTORIAL,
            "calc_policy_loss(probs, mb_action, mb_advantages, mb_logprobs, clip_coef)",
            _calc_policy_loss_cases,
        ),
        Grader(
            "calc_value_function_loss",
            TUTORIAL,
            "calc_value_function_loss(critic, mb_obs, mb_returns, v_coef)",
            _calc_value_function_loss_cases,
        ),
        Grader("calc_entropy_loss", TUTORIAL, "calc_entropy_loss(probs, ent_coef)", _calc_entropy_loss_cases),
        Grader(
            "PPOScheduler",
            TUTORIAL,
            "PPOScheduler(optimizer, initial_lr, end_lr, num_updates)",
            _ppo_scheduler_cases,
        ),
        Grader(
            "make_optimizer",
            TUTORIAL,
            "make_optimizer(agent, num_updates, initial_lr, end_lr)",
            _make_optimizer_cases,
        ),
        Grader(
            "TrajData.calc_returns",
            HOMEWORK,
            "calc_returns(self, gamma=.99)",
            _calc_returns_cases,
            owner="TrajData",
        ),
        Grader(
            "TrajData.calc_gae",
            HOMEWORK,
            "calc_gae(self, values, gamma=0.99, lam=0.95)",
            _calc_gae_cases,
            owner="TrajData",
        ),
        Grader("Agent.get_loss", HOMEWORK, "get_loss(self, traj_data)", _get_loss_cases, owner="Agent"),
        Grader(
            "DiscreteActionWrapper",
            WALKTHROUGH,
            "DiscreteActionWrapper(env, n_actions=5)",
            _discrete_action_cases,
        ),
        Grader("ObservationWrapper", WALKTHROUGH, "ObservationWrapper(env)", _observation_cases),
        Grader(
            "RewardScalingWrapper",
            WALKTHROUGH,
            "RewardScalingWrapper(env, scaling_factor=1/10.0)",
            _reward_cases,
        ),
    ]
}


# The documents' names whose objects proxima's loop takes in place of its own pieces, and proxima.train's keyword
# for each: the PPO tutorial's four functions (proxima.algo.custom) and its Agent (proxima.policy.user)
IN_THE_LOOP = {piece.tutorial: setting for setting, piece in PIECES.items()} | {"Agent": "actor_critic"}


def grader_named(name: str) -> Grader:
    """The grader of a document's name: ``calc_gae`` or ``TrajData.calc_gae``, ``get_loss`` for the homework's
    ``Agent.get_loss``."""
    by_attribute = {g.attribute: g for g in GRADERS.values()}
    found = GRADERS.get(name) or by_attribute.get(name)
    if found is None:
        raise UserError(f"unknown function {name!r}; gradable: {', '.join(GRADERS)}")
    return found


# ---- finding the learner's functions ----------------------------------------------------------------------


def _namespace(source: Any) -> tuple[str, Mapping[str, Any], str | None]:
    """(a label, the names to look in, the module's name where only what it defines itself counts)."""
    if isinstance(source, types.ModuleType):
        return getattr(source, "__file__", None) or source.__name__, vars(source), source.__name__
    if isinstance(source, Mapping):
        return "the functions given", source, None
    if isinstance(source, str | os.PathLike):
        module = load(os.fspath(source))
        return os.fspath(source), vars(module), module.__name__
    raise UserError(
        f"check takes a module, a module's name or .py path, or a dict of functions, got {_kind(source)}"
    )


def load(target: str) -> types.ModuleType:
    """The module ``target`` names: a ``.py`` file's path (run as a fresh module, without entering
    ``sys.modules`` for good), or a module to import from the path. Only a name the user gave (on the command
    line or to ``check``): proxima imports nothing because a file names it (proxima/base/trust.py)."""
    is_path = target.endswith(".py") or os.sep in target or (os.altsep is not None and os.altsep in target)
    try:
        if not is_path:
            return importlib.import_module(target)
        if not os.path.isfile(target):
            raise UserError(f"no such file: {target}")
        name = os.path.splitext(os.path.basename(target))[0]
        spec = importlib.util.spec_from_file_location(name, target)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        before = sys.modules.get(name)
        # registered while it runs, as an import would be (a dataclass looks its module up there)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            if before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before
        return module
    except UserError:
        raise
    except ModuleNotFoundError as e:
        if not is_path and e.name == target.split(".")[0]:
            raise UserError(
                f"no module named {target!r} on the path: give a .py file's path, or the module's name from the "
                "directory that holds it"
            ) from None
        raise UserError(f"importing {target} raised {' '.join(raised(e).split())}") from None
    except Exception as e:  # the learner's module failed as it ran: bad input, in one line
        raise UserError(f"importing {target} raised {' '.join(raised(e).split())}") from None


def _lookup(grader: Grader, names: Mapping[str, Any], own: str | None) -> Any:
    """The learner's object for ``grader`` (a function, or the class that holds the method), or None."""
    obj = names.get(grader.owner or grader.name)
    if obj is None or (own is not None and getattr(obj, "__module__", own) != own):
        return None  # absent, or imported from elsewhere (gymnasium's ObservationWrapper)
    if grader.owner is not None and not callable(getattr(obj, grader.attribute, None)):
        return None  # the tutorial's Agent has no get_loss
    if grader.not_if is not None and hasattr(obj, grader.not_if):
        return None  # the homework's Agent, which has one
    return obj


def check(source: Any, only: str | None = None) -> Grades:
    """Grade the learner's functions in ``source``: a module, a module's name or a ``.py`` file's path, or a
    dict of the documents' names to functions (``{"compute_advantages": f}``; a method by its class:
    ``{"TrajData": cls}``). ``only``: one name (``calc_policy_loss``, ``TrajData.calc_gae``); otherwise every
    name of the documents' that ``source`` defines. ``UserError`` where there is nothing to grade."""
    label, names, own = _namespace(source)
    wanted = [grader_named(only)] if only else list(GRADERS.values())
    found = {g.name: obj for g in wanted if (obj := _lookup(g, names, own)) is not None}
    if not found:
        what = f"no {wanted[0].name}" if only else f"none of the documents' names ({', '.join(GRADERS)})"
        raise UserError(f"{label} defines {what}")
    # the learner's code draws from torch's global generator (see the module's docstring): the caller's is kept
    with torch.random.fork_rng(devices=[]):
        results = [grade(GRADERS[name], obj) for name, obj in found.items()]
    missing = [g.name for g in wanted if g.name not in found]
    pieces = {IN_THE_LOOP[name]: obj for name, obj in found.items() if name in IN_THE_LOOP}
    return Grades(label, results, missing, pieces)
