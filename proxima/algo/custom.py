"""Your functions in the loop: an advantage estimator, a policy loss, a value loss and an entropy term written to
the PPO tutorial's signatures (seed 000 in docs/SEEDS.md), in place of proxima's own pieces of a run:

    compute_advantages(next_value, next_done, rewards, values, dones, device, gamma, gae_lambda) -> (T, N)
    calc_policy_loss(probs, mb_action, mb_advantages, mb_logprobs, clip_coef) -> the policy term, to minimize
    calc_value_function_loss(critic, mb_obs, mb_returns, v_coef) -> the value term, weighted by v_coef
    calc_entropy_loss(probs, ent_coef) -> the entropy term, signed and weighted: negative to raise the entropy

Each is called with keyword arguments by those names, so the order of its parameters never matters, and one whose
parameters are other names is refused before training (``check_signature``). A piece you do not give is proxima's
own, so you can swap one at a time. The adapters here turn each into what the core calls: the estimator into a
function of ``gae``'s signature, which ``RolloutBuffer.advantages`` takes beside an estimator's name
(``check_advantages``), and the losses into ``OwnTerms``, whose terms ``proxima.algo.update.minibatch_loss`` adds
in place of its own. A run that gives none of them builds none of this (``in_the_loop``).

A function that computes what proxima's does gives proxima's numbers to the last bit: ``probs.log_prob`` of the
minibatch's actions, ``probs.entropy()`` and ``critic(mb_obs)`` are the very tensors the update's own terms take
(tests/test_custom_losses.py trains both ways and compares the weights).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor
from torch.distributions import Categorical, Distribution, Independent, Normal

from proxima.algo.advantages import gae
from proxima.algo.storage import Batch
from proxima.base import trust
from proxima.base.errors import UserError
from proxima.policy.distributions import CategoricalHead, DiagGaussianHead
from proxima.policy.networks import ActorCritic
from proxima.policy.protocol import Learned

if TYPE_CHECKING:
    from proxima.algo.update import UpdateSettings


@dataclass(frozen=True)
class Piece:
    """One piece of a run you can replace: the setting (and ``train`` keyword) that names your function, the PPO
    tutorial's name and parameters for it, and what of proxima's it replaces."""

    setting: str
    tutorial: str
    parameters: tuple[str, ...]
    replaces: str


PIECES = {
    piece.setting: piece
    for piece in (
        Piece(
            "advantages",
            "compute_advantages",
            ("next_value", "next_done", "rewards", "values", "dones", "device", "gamma", "gae_lambda"),
            "the --advantage estimator",
        ),
        Piece(
            "policy_loss",
            "calc_policy_loss",
            ("probs", "mb_action", "mb_advantages", "mb_logprobs", "clip_coef"),
            "the algorithm's policy term",
        ),
        Piece(
            "value_loss", "calc_value_function_loss", ("critic", "mb_obs", "mb_returns", "v_coef"), "½·MSE"
        ),
        Piece("entropy_loss", "calc_entropy_loss", ("probs", "ent_coef"), "the entropy bonus"),
    )
}
FUNCTIONS = trust.FUNCTIONS  # the settings, in the loop's order (PIECES has each)


# --- naming a function: what config.json records of it, and back --------------------------------------------

# Functions given as objects in this process, by setting and by the name config.json records for them: a run
# that names one again (a resume in this process) uses the object, whose placeholder no file can import.
_GIVEN: dict[str, dict[str, Callable]] = {setting: {} for setting in FUNCTIONS}


def check_signature(setting: str, fn: object) -> Callable:
    """``fn``, or a one-line ``UserError`` where it cannot be called with the tutorial's parameter names as
    keywords (a parameter of another name without a default, or a tutorial's name it lacks)."""
    piece = PIECES[setting]
    # the names quoted: the command line words a setting's name as its flag, and clip_coef is one
    expected = f"{piece.tutorial}({', '.join(map(repr, piece.parameters))})"
    if not callable(fn):
        raise UserError(f"{setting} must be a function written as the PPO tutorial's {expected}, got {fn!r}")
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        raise UserError(
            f"{setting}: cannot read the parameters of {fn!r}; give a function {expected}"
        ) from None
    kind = inspect.Parameter
    by_keyword = (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY)
    any_keyword = any(p.kind is kind.VAR_KEYWORD for p in parameters.values())
    missing = [n for n in piece.parameters if not (n in parameters and parameters[n].kind in by_keyword)]
    if any_keyword:  # **kwargs takes the names it does not list, but not one it lists positional-only
        missing = [n for n in missing if n in parameters]
    extra = [
        n
        for n, p in parameters.items()
        if n not in piece.parameters
        and p.default is p.empty
        and p.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)
    ]
    if missing or extra:
        name = getattr(fn, "__name__", type(fn).__name__)
        wrong = [
            f"it lacks {', '.join(map(repr, missing))}" if missing else "",
            f"it has {', '.join(map(repr, extra))}, which proxima does not give" if extra else "",
        ]
        raise UserError(
            f"{setting}: proxima calls your {name} by the parameter names of the PPO tutorial's {expected}, as "
            f"keywords, and {'; '.join(w for w in wrong if w)}"
        )
    return fn


def function_name(setting: str, fn: object) -> str:
    """What config.json records of a function given as an object: its ``module:qualname``, from which another
    process imports it again, or a placeholder in ``<...>`` where it cannot (a lambda, a function of the script
    run as ``__main__`` or defined inside a function). This process keeps the object under that name."""
    check_signature(setting, fn)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)):
        name = f"<{type(fn).__name__}>"
    elif qualname.endswith("<lambda>"):
        name = "<lambda>"
    elif (
        module == "__main__"
        or "<locals>" in qualname
        or _attribute(sys.modules.get(module), qualname) is not fn
    ):
        name = f"<{qualname}>"
    else:
        name = f"{module}:{qualname}"
        trust.remember(setting, name)  # given by the user: a run's files may name it in this process
    _GIVEN[setting][name] = cast(Callable, fn)
    return name


def _attribute(found: object, qualname: str) -> object:
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def import_attribute(path: str, what: str) -> object:
    """The object at ``module:qual.name``, importing the module; a one-line ``UserError`` where it cannot be had.
    Its callers have passed ``trust.check``: the user named it."""
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise UserError(f"{what}: give MODULE:NAME, got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise UserError(
                f"{what}: module {module_name!r} cannot be imported; put the directory that holds it on PYTHONPATH "
                "(PYTHONPATH=DIR proxima ...) or install the package that has it"
            ) from None
        raise UserError(f"{what}: importing module {module_name!r} failed: {e}") from None
    found = _attribute(module, qualname)
    if found is None:
        raise UserError(f"{what}: module {module_name!r} has no {qualname!r}")
    return found


def resolve(setting: str, name: str) -> Callable:
    """The function that config.json's ``name`` of ``setting`` stands for: the object given in this process, or
    the one its ``module:qualname`` imports (where the user named it or trusted the run's files)."""
    fn = _GIVEN[setting].get(name)
    if fn is None:
        if name.startswith("<"):
            raise UserError(
                f"the run's {PIECES[setting].tutorial} was the function {name}, given from Python as an object that "
                "config.json cannot name (a lambda, or defined in the script run as __main__ or inside a function): "
                f"give it again, `{setting}=...` beside resume=RUN_DIR in proxima.train, or define it in a module on "
                "PYTHONPATH"
            )
        trust.check("the settings", {setting: name})
        fn = cast(Callable, import_attribute(name, f"{setting} {name}"))
    return check_signature(setting, fn)


def module_functions(module_name: str) -> dict[str, str] | None:
    """``--algo MODULE``: the settings that name the functions of the module that have the PPO tutorial's names
    (``MODULE:compute_advantages`` and so on); None where no module has that name. Imports it: the user named it."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            return None
        raise UserError(f"--algo {module_name}: importing module {module_name!r} failed: {e}") from None
    found = {
        setting: f"{module_name}:{piece.tutorial}"
        for setting, piece in PIECES.items()
        if callable(getattr(module, piece.tutorial, None))
    }
    if not found:
        names = ", ".join(piece.tutorial for piece in PIECES.values())
        raise UserError(
            f"--algo {module_name}: the module has none of the PPO tutorial's functions ({names}); give an "
            "algorithm's name, MODULE:NAME of an Algorithm, or a module that defines some of them"
        )
    for setting, name in found.items():
        trust.remember(setting, name)
    return found


# --- advantages ------------------------------------------------------------------------------------------------


def _ended(dones: Tensor, next_done: Tensor) -> Tensor:
    """The policy-gradient homework's ``dones`` of proxima's: 1 where the episode ended at step t, that is where
    obs[t + 1] starts one (``next_done`` after the last step)."""
    return torch.cat([dones[1:], next_done.reshape(1, -1).to(dones.dtype)])


@dataclass(frozen=True)
class Advantages:
    """Your ``compute_advantages`` as an estimator of ``gae``'s signature, which ``RolloutBuffer.advantages``
    takes beside the names of ``proxima.algo.advantages``' estimators. ``shifted``: it reads ``dones`` as the
    policy-gradient homework does (``dones[t] = 1``: the episode ended at step t), and is given them so."""

    fn: Callable
    shifted: bool = False

    @torch.no_grad()
    def __call__(
        self,
        rewards: Tensor,
        values: Tensor,
        dones: Tensor,
        next_value: Tensor,
        next_done: Tensor,
        gamma: float,
        gae_lambda: float,
    ) -> Tensor:
        advantages = self.fn(
            next_value=next_value.reshape(1, -1).clone(),  # the tutorial's (1, N)
            next_done=next_done.clone(),
            rewards=rewards.clone(),  # copies: what it writes in place is its own
            values=values.clone(),
            dones=(_ended(dones, next_done) if self.shifted else dones).clone(),
            device=rewards.device,
            gamma=gamma,
            gae_lambda=gae_lambda,
        )
        if not isinstance(advantages, Tensor) or advantages.shape != rewards.shape:
            got = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages).__name__
            raise UserError(
                f"compute_advantages returned {got}; it must return a tensor of the rewards' shape (T, N) = "
                f"{tuple(rewards.shape)}"
            )
        return advantages.to(values.dtype)

    @property
    def note(self) -> str:
        return (
            "note: your compute_advantages reads dones[t] = 1 as 'the episode ended at step t' (the policy-gradient "
            "homework's convention); proxima's and the PPO tutorial's dones[t] = 1 says obs[t] starts a new "
            "episode, so it is given dones shifted one step (dones[t + 1], next_done last)"
        )


# The known case: 6 steps of 3 envs, episodes starting at steps 3 (env 0), 1 and 4 (env 1) and after the last
# step (env 2), and at step 0 (env 2), where no advantage depends on it.
KNOWN_STEPS, KNOWN_ENVS, KNOWN_GAMMA, KNOWN_LAMBDA = 6, 3, 0.9, 0.8


def _known_case() -> dict[str, Any]:
    rng = torch.Generator().manual_seed(0)
    dones = torch.zeros(KNOWN_STEPS, KNOWN_ENVS)
    dones[3, 0] = dones[1, 1] = dones[4, 1] = dones[0, 2] = 1.0
    return {
        "next_value": torch.randn(1, KNOWN_ENVS, generator=rng),
        "next_done": torch.tensor([0.0, 0.0, 1.0]),
        "rewards": torch.randn(KNOWN_STEPS, KNOWN_ENVS, generator=rng),
        "values": torch.randn(KNOWN_STEPS, KNOWN_ENVS, generator=rng),
        "dones": dones,
    }


def _gae_args(case: dict[str, Any]) -> tuple:
    """``gae``'s arguments for a case of the tutorial's tensors, at the known case's gamma and lambda."""
    keys = ("rewards", "values", "dones", "next_value", "next_done")
    return (*(case[k] for k in keys), KNOWN_GAMMA, KNOWN_LAMBDA)


def check_advantages(fn: Callable) -> Advantages:
    """Your ``compute_advantages`` adapted for the loop, once it gives ``proxima.algo.advantages.gae``'s advantages
    on a known case: as it is, or, where it reads ``dones`` as the policy-gradient homework does, with the dones
    shifted (``Advantages.shifted``, whose ``note`` says so); otherwise a one-line ``UserError`` naming the first
    advantage that differs, or the shape that is wrong."""
    check_signature("advantages", fn)
    case = _known_case()
    ours = gae(*_gae_args(case))
    theirs = {}
    for shifted in (False, True):
        adapter = Advantages(fn, shifted)
        try:
            theirs[shifted] = adapter(*_gae_args(case))
        except UserError:
            raise
        except Exception as e:  # your function's own error, on the known case: one line, and how to see more
            raise UserError(
                f"compute_advantages raised {type(e).__name__}: {e}, on a known case of T={KNOWN_STEPS} steps and "
                f"N={KNOWN_ENVS} envs (call it yourself on such tensors for the traceback)"
            ) from None
        if torch.allclose(theirs[shifted], ours, rtol=1e-5, atol=1e-6):
            return adapter
    close = functools.partial(torch.allclose, rtol=1e-5, atol=1e-6)
    wrong = ~torch.isclose(theirs[False], ours, rtol=1e-5, atol=1e-6)
    t, n = (int(i) for i in wrong.nonzero()[0])
    # what it does compute, where it is GAE with a piece left out
    without = {
        "the bootstrap from next_value, V(obs_T), is missing": {
            **case,
            "next_value": torch.zeros(1, KNOWN_ENVS),
        },
        "the episode boundaries (dones, next_done) are ignored": {
            **case,
            "dones": torch.zeros_like(case["dones"]),
            "next_done": torch.zeros(KNOWN_ENVS),
        },
    }
    known = [
        why
        for why, c in without.items()
        for adv in theirs.values()
        if close(
            adv,
            gae(*_gae_args(c)),
        )
    ]
    raise UserError(
        f"compute_advantages differs from proxima's GAE (proxima.algo.advantages.gae) on a known case of "
        f"T={KNOWN_STEPS} steps, N={KNOWN_ENVS} envs, γ {KNOWN_GAMMA}, λ {KNOWN_LAMBDA} (with the "
        f"tutorial's dones and with the homework's): first at step {t}, env {n}: yours "
        f"{theirs[False][t, n].item():.6g}, proxima's {ours[t, n].item():.6g}"
        + (f"; it is GAE where {known[0]}" if known else "")
    )


# --- the losses ------------------------------------------------------------------------------------------------


class _OfTheMinibatch:
    """What the distributions below add to torch's: ``log_prob`` of the minibatch's own actions and ``entropy()``
    are the tensors the update took from the policy head in the same forward pass (``Head.log_prob_entropy``), so
    a loss of them is proxima's own to the last bit, with the same gradients; ``log_prob`` of other actions is the
    head's too. (torch's own formulas give the same numbers to float rounding, not to the bit.)"""

    _head: Any
    _logits: Tensor
    _actions: Tensor
    _logprobs: Tensor
    _entropy: Tensor

    def _of(self, head, logits: Tensor, actions: Tensor, logprobs: Tensor, entropy: Tensor) -> None:
        self._head, self._logits, self._actions, self._logprobs, self._entropy = (
            head,
            logits,
            actions,
            logprobs,
            entropy,
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if value is self._actions:
            return self._logprobs
        return self._head.log_prob_entropy(self._logits, value)[0]

    def entropy(self) -> Tensor:
        return self._entropy


class PolicyCategorical(_OfTheMinibatch, Categorical):
    """The policy of a Discrete action space on a minibatch: torch's ``Categorical`` of the actor's logits."""

    def __init__(self, head, logits: Tensor, actions: Tensor, logprobs: Tensor, entropy: Tensor):
        super().__init__(logits=logits, validate_args=False)
        self._of(head, logits, actions, logprobs, entropy)


class PolicyNormal(_OfTheMinibatch, Independent):
    """The Gaussian policy of a Box action space on a minibatch: torch's ``Normal`` of the actor's means and the
    learned std, its components one event (``Independent``), so that ``log_prob`` is one number per action."""

    def __init__(self, head, mean: Tensor, actions: Tensor, logprobs: Tensor, entropy: Tensor):
        normal = Normal(mean, head.log_std.exp().expand_as(mean), validate_args=False)
        super().__init__(normal, 1, validate_args=False)
        self._of(head, mean, actions, logprobs, entropy)


DISTRIBUTIONS: dict[type, Callable[..., Distribution]] = {
    CategoricalHead: PolicyCategorical,
    DiagGaussianHead: PolicyNormal,
}


class OnMinibatch:
    """The current policy on one minibatch, as your loss functions take it: ``probs``, its distribution, and
    ``critic``, values in the units of the minibatch's returns."""

    def __init__(
        self,
        model: Learned,
        mb: Batch,
        outputs: tuple[Tensor, Tensor, Tensor],
        logits: Tensor | None,
        scale: Tensor | None,
        distribution: Callable[..., Distribution] | None,
    ):
        self.model, self.mb, self.scale = model, mb, scale
        self.logprobs, self.entropy, self.values = outputs
        self._logits, self._distribution = logits, distribution

    @functools.cached_property
    def probs(self) -> Distribution:
        assert (
            self._distribution is not None and self._logits is not None
        )  # OwnTerms asks for it where it has one
        return self._distribution(self.model.head, self._logits, self.mb.actions, self.logprobs, self.entropy)

    def critic(self, obs: Tensor) -> Tensor:
        """V(obs), ``(B, 1)`` as the tutorial's critic network gives it, in the units of ``mb_returns``: with
        ``--norm-value``, divided by the value targets' std, the units the update measures its value loss in.
        The minibatch's own observations give the values of the update's forward pass (the same tensor)."""
        values = self.values if obs is self.mb.obs else self.model.value(obs)
        return (values if self.scale is None else values / self.scale).unsqueeze(-1)


def _number(piece: str, term: object) -> Tensor:
    if not isinstance(term, Tensor) or term.dim() != 0:
        got = f"shape {tuple(term.shape)}" if isinstance(term, Tensor) else type(term).__name__
        raise UserError(
            f"{PIECES[piece].tutorial} returned {got}; it must return one number, a 0-d tensor (a mean)"
        )
    return term


@dataclass(frozen=True)
class OwnTerms:
    """Your loss functions (each None where proxima's own term is kept) as the update adds them:
    ``evaluate`` gives the policy on a minibatch, ``loss`` the minibatch's loss with your terms in place of
    proxima's. ``distribution``: the policy's distribution class, where your functions take ``probs``."""

    policy: Callable | None = None
    value: Callable | None = None
    entropy: Callable | None = None
    distribution: Callable[..., Distribution] | None = None

    def evaluate(
        self, model: Learned, mb: Batch, scale: Tensor | None
    ) -> tuple[tuple[Tensor, Tensor, Tensor], OnMinibatch]:
        """``Batch.evaluate``'s log-probs, entropies and values of ``mb``, and the policy on it. Where your
        functions take its distribution, its logits come from the same forward pass: ``ActorCritic.evaluate``'s
        own two steps, kept apart (in_the_loop checks the model is an ActorCritic of flat batches)."""
        if self.distribution is None:
            outputs, logits = mb.evaluate(model), None
        else:
            logits, values = cast(ActorCritic, model).forward(mb.obs)
            logprobs, entropy = model.head.log_prob_entropy(logits, mb.actions)
            outputs = (logprobs, entropy, values)
        return outputs, OnMinibatch(model, mb, outputs, logits, scale, self.distribution)

    def loss(
        self, on: OnMinibatch, pg_loss: Tensor, v_loss: Tensor, ent: Tensor, settings: UpdateSettings
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The minibatch's loss, with your terms in place of proxima's (its policy loss ``pg_loss``, its
        unweighted value loss ``v_loss`` and its mean entropy ``ent``), and the policy and value losses to log: the
        value loss unweighted, as proxima logs its own (yours divided by ``vf_coef``)."""
        mb = on.mb
        policy = pg_loss
        if self.policy is not None:
            policy = _number(
                "policy_loss",
                self.policy(
                    probs=on.probs,
                    mb_action=mb.actions,
                    mb_advantages=mb.advantages,
                    mb_logprobs=mb.logprobs,
                    clip_coef=settings.clip_coef,
                ),
            )
        value = settings.vf_coef * v_loss
        if self.value is not None:
            value = _number(
                "value_loss",
                self.value(critic=on.critic, mb_obs=mb.obs, mb_returns=mb.returns, v_coef=settings.vf_coef),
            )
        entropy = -settings.ent_coef * ent  # detail 10: the bonus is subtracted
        if self.entropy is not None:
            entropy = _number("entropy_loss", self.entropy(probs=on.probs, ent_coef=settings.ent_coef))
        logged = v_loss if self.value is None or not settings.vf_coef else value.detach() / settings.vf_coef
        return policy + value + entropy, policy, logged


# --- a run's functions -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InTheLoop:
    """What a run computes with: the estimator ``RolloutBuffer.advantages`` takes (a name, or your function
    adapted), your loss terms (None: proxima's alone), and the lines said when it starts."""

    estimator: str | Advantages
    terms: OwnTerms | None = None
    notes: tuple[str, ...] = ()


def in_the_loop(args, algorithm, model: Learned) -> InTheLoop:
    """The functions of a run's settings (``args``, a ``PPOArgs``) and of its ``Algorithm``, adapted for the loop
    around ``model``, each checked before training; a run that names none has proxima's own, and nothing else."""
    given = {s: getattr(args.algorithm, s) for s in FUNCTIONS}
    where = {s: (name if name is not None else f"algo {algorithm.name}") for s, name in given.items()}
    functions = {
        s: resolve(s, name) if name is not None else getattr(algorithm, PIECES[s].tutorial)
        for s, name in given.items()
    }
    functions = {s: check_signature(s, fn) for s, fn in functions.items() if fn is not None}
    if not functions:
        return InTheLoop(args.algorithm.advantage)
    _refuse_unsupported(args, algorithm, model, functions)
    yours = ", ".join(f"{PIECES[s].tutorial} ({where[s]})" for s in functions)
    kept = [PIECES[s].replaces for s in FUNCTIONS if s not in functions]
    notes = [f"your functions in the loop: {yours}; proxima's own: {', '.join(kept) or 'none'}"]
    estimator: str | Advantages = args.algorithm.advantage
    if "advantages" in functions:
        estimator = check_advantages(functions["advantages"])
        if estimator.shifted:
            notes.append(estimator.note)
    policy, value, entropy = (functions.get(s) for s in ("policy_loss", "value_loss", "entropy_loss"))
    terms = None
    if policy is not None or value is not None or entropy is not None:
        takes_probs = policy is not None or entropy is not None
        terms = OwnTerms(policy, value, entropy, DISTRIBUTIONS[type(model.head)] if takes_probs else None)
    return InTheLoop(estimator, terms, tuple(notes))


def _refuse_unsupported(args, algorithm, model: Learned, functions: dict[str, Callable]) -> None:
    """A one-line ``UserError`` for a run your functions cannot train, before it starts."""
    named = ", ".join(PIECES[s].tutorial for s in functions)
    if args.run.num_seeds > 1:
        raise UserError(
            f"your functions in the loop ({named}) train one seed per run: drop --num-seeds, or sweep the seeds"
        )
    if algorithm.multi_agent:
        raise UserError(
            f"your functions in the loop ({named}) train one agent per env: --algo {algorithm.name} has many"
        )
    losses = [s for s in functions if s != "advantages"]
    if not losses:
        return
    if args.network.recurrent:
        raise UserError(f"your functions in the loop ({named}) take flat minibatches: drop --recurrent")
    if type(model).evaluate is not ActorCritic.evaluate:
        raise UserError(
            f"your functions in the loop ({named}) train proxima's ActorCritic; this run's model is {type(model).__name__}"
        )
    if "value_loss" in functions and model.critic is None:
        raise UserError(
            f"--algo {algorithm.name} has no value network, so calc_value_function_loss does not apply"
        )
    takes_probs = [PIECES[s].tutorial for s in ("policy_loss", "entropy_loss") if s in functions]
    if takes_probs and type(model.head) not in DISTRIBUTIONS:
        raise UserError(
            f"your {' and '.join(takes_probs)} take{'s' if len(takes_probs) == 1 else ''} the policy's torch distribution, which proxima gives for a Discrete "
            f"action space (Categorical) and a Box with the Gaussian head (Normal); this run's head is "
            f"{type(model.head).__name__}: keep proxima's own terms"
        )
