"""``proxima probe``: train the configured agent on each probe environment and name the part that is broken.

Each probe has one exact answer and isolates one component (``proxima/envs/probes.py``). They are ordered so
that each probe relies only on the parts the earlier ones checked. So the first failure points at the broken
part, and later failures are usually the same bug seen again. Probes 1-5 have the PPO tutorial's
tolerances (docs/SEEDS.md);
the continuous probe's and the multi-agent probes' are proxima's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

import torch
from torch import Tensor

from proxima.base.files import PROBES_JSON, write_json
from proxima.policy.distributions import CategoricalHead
from proxima.policy.networks import ActorCritic
from proxima.run.config import PPOArgs


@dataclass(frozen=True)
class Probe:
    name: str
    env_id: str
    tests: str
    blame: str  # the component a failure points to
    timesteps: int  # the budget the probe passes within at the default settings (CleanRL's PPO settings)
    # -> (expected, learned, passed, blame): blame None is the probe's own, else what this failure points to
    check: Callable[[ActorCritic, PPOArgs], tuple[str, str, bool | None, str | None]]


# Where a probe checks a policy and its values, and only the values are off: the policy's parts, which the
# probe is there to test, did their job, and the critic either lags the returns that policy now earns or
# learns a wrong target. Lagging is the common case: one gradient-norm clip covers actor and critic, and a
# policy sharpened to a small std has gradients of norm in the hundreds, so the clip leaves the critic's
# share of each step tiny. Value normalization enlarges the critic's gradients; a larger clip stops the
# crowding out.
VALUE_LAGS = (
    "critic: the policy is right, its values are not (lagging it, or a wrong target; try --norm-value, a larger "
    "--max-grad-norm or --total-timesteps)"
)


def _verdict(expected: str, learned: str, policy_ok: bool, value_ok: bool | None = None):
    """A policy-and-value probe's answer: it passes where both parts do (``value_ok`` None: values not
    checked), and a failure of the values alone is blamed on the critic rather than on the probe's component."""
    passed = policy_ok and value_ok is not False
    return expected, learned, passed, VALUE_LAGS if policy_ok and value_ok is False else None


def _with_values(
    model: ActorCritic,
    args: PPOArgs,
    expected: str,
    learned: str,
    policy_ok: bool,
    values: Tensor,
    value: float,
    atol: float,
):
    """A policy probe's answer, with V = ``value`` ± ``atol`` checked too where the values can be (a critic,
    unscaled rewards)."""
    if model.critic is None or args.network.norm_reward:
        return _verdict(expected, learned, policy_ok)
    atol = _value_atol(args, atol)
    value_ok = bool(((values - value).abs() <= atol).all())
    return _verdict(
        f"{expected}, V = {value:g} ± {atol:g}", f"{learned}, V = {_fmt(values)}", policy_ok, value_ok
    )


def _value_atol(args: PPOArgs, atol: float) -> float:
    """The tolerance on a value of magnitude about 1: ``atol``, or bf16's relative step 2^-8 where the agent
    computes in bf16 (``args`` as it trained, ``auto`` resolved). Its features are rounded to 8 significant bits at every forward, so the
    critic's fit jitters at that scale: the image-value probe's V(left bright) = 1 ± 0.001 learned 1.0015 with
    --precision bfloat16 on an AVX2 CPU (2026-12-03), and passed on one with AVX512-BF16."""
    return max(atol, 2.0**-8) if args.network.precision == "bfloat16" else atol


def _not_applicable(expected: str, model: ActorCritic):
    """A values-only probe's answer for an agent without values to check: no critic, or scaled rewards."""
    return expected, "n/a: " + ("no critic" if model.critic is None else "values are scaled"), None, None


# Settings of a Box action's policy: reset for every probe but "continuous", the only one whose actions are Box
BOX_ONLY = {"action_dist": "gaussian", "action_std_end": None}


def _query(model: ActorCritic, obs: list[float], episode: bool = False):
    """Values and logits of observations: each the first of its episode, or (``episode``) the steps of one
    episode in order, which only tells them apart for a recurrent agent's memory."""
    return _fresh(model, torch.tensor(obs, dtype=torch.float32).reshape(-1, 1), episode)


def _fresh(model: ActorCritic, raw: torch.Tensor, episode: bool = False):
    """``_query`` for a batch of raw observations, vectors or images."""
    x, n = model.normalization.obs(raw), raw.shape[0]
    with torch.no_grad():
        if model.lstm is None:
            return model.value(x), model.logits(x)
        if episode:  # T steps of one env
            x, starts = x.unsqueeze(1), (torch.arange(n) == 0).float().unsqueeze(1)
        else:  # one step of N envs, each starting
            x, starts = x.unsqueeze(0), torch.ones(1, n)
        logits, values, _ = model.forward_sequence(x, starts, model.initial_memory(x.shape[1]))
        return values.reshape(-1), logits.reshape(n, -1)


def _fmt(values) -> str:
    return ", ".join(f"{float(v):.4f}" for v in values)


def _obs(obs: list[float]) -> str:
    return ", ".join(f"{v:g}" for v in obs)


def _values(obs: list[float], targets: Callable[[PPOArgs], list[float]], atol: float, episode: bool = False):
    def check(model: ActorCritic, args: PPOArgs):
        target, tol = torch.tensor(targets(args)), _value_atol(args, atol)
        values, _ = _query(model, obs, episode)
        expected = f"V({_obs(obs)}) = {_obs(target.tolist())} ± {tol:g}"
        if model.critic is None or args.network.norm_reward:
            return _not_applicable(expected, model)
        return expected, f"V = {_fmt(values)}", bool(((values - target).abs() <= tol).all()), None

    return check


def _probs(model: ActorCritic, logits: Tensor) -> Tensor:
    return cast(CategoricalHead, model.head).probs(logits)  # the probes that call it have Discrete actions


class _MeanStd(Protocol):  # the continuous heads (DiagGaussianHead, BetaHead, TanhGaussianHead)
    def mean_std(self, params: Tensor) -> tuple[Tensor, Tensor]: ...


def _policy(obs: list[float], best_actions: list[int], value: float, atol: float):
    def check(model: ActorCritic, args: PPOArgs):
        values, logits = _query(model, obs)
        probs = _probs(model, logits)
        p_best = probs[torch.arange(len(obs)), torch.tensor(best_actions)]
        expected = f"π(best | {_obs(obs)}) = 1 ± {atol:g}"
        learned = f"π(best) = {_fmt(p_best)}"
        return _with_values(
            model, args, expected, learned, bool(((1 - p_best) <= atol).all()), values, value, atol
        )

    return check


def _continuous(model: ActorCritic, args: PPOArgs):
    values, params = _query(model, [0.0])
    mean, std = (x.item() for x in cast(_MeanStd, model.head).mean_std(params))
    implied = -(std**2) - (mean - 0.5) ** 2  # E[-(a - 0.5)^2] for any policy of that mean and std
    expected = "mean = 0.5 ± 0.1, std < 1, V(0) = -std² - (mean - 0.5)² ± 0.1"
    learned = f"mean = {mean:.4f}, std = {std:.4f}"
    value_ok = None
    if model.critic is not None and not args.network.norm_reward:
        learned += f", V(0) = {values.item():.4f} (implied {implied:.4f})"
        value_ok = abs(values.item() - implied) <= 0.1
    return _verdict(expected, learned, abs(mean - 0.5) <= 0.1 and std < 1.0, value_ok)


PROBES = [
    Probe(
        "1",
        "proxima/Probe1-v0",
        "constant reward: V(0) = 1",
        "value loss or optimizer",
        10_000,
        _values([0.0], lambda a: [1.0], 1e-4),
    ),
    Probe(
        "2",
        "proxima/Probe2-v0",
        "reward = observation: V(±1) = ±1",
        "backprop or network",
        10_000,
        _values([-1.0, 1.0], lambda a: [-1.0, 1.0], 1e-4),
    ),
    Probe(
        "3",
        "proxima/Probe3-v0",
        "reward one step later: V(0) = gamma",
        "discounting",
        20_000,
        _values([0.0, 1.0], lambda a: [a.algorithm.gamma, 1.0], 1e-3, episode=True),
    ),
    Probe(
        "4",
        "proxima/Probe4-v0",
        "the better of two actions",
        "advantages or policy loss",
        30_000,
        _policy([0.0], [1], 1.0, 1e-2),
    ),
    Probe(
        "5",
        "proxima/Probe5-v0",
        "the action that matches the observation",
        "batching or stale data",
        30_000,
        _policy([0.0, 1.0], [0, 1], 1.0, 1e-2),
    ),
    Probe(
        "continuous",
        "proxima/ProbeContinuous-v0",
        "a Box policy's mean to a target of 0.5",
        "continuous head: log-probs or std",
        50_000,
        _continuous,
    ),
]


def _images():
    from proxima.envs.native import probe_images

    return torch.as_tensor(probe_images())


def _image_values(model: ActorCritic, args: PPOArgs):
    """V(left half bright) = 1, V(right half bright) = -1: the value reads the pixels through the CNN."""
    atol = _value_atol(args, 1e-3)
    expected = f"V(left bright, right bright) = 1, -1 ± {atol:g}"
    if args.network.norm_reward:
        return expected, "n/a: values are scaled", None, None
    values, _ = _fresh(model, _images())
    passed = bool(((values - torch.tensor([1.0, -1.0])).abs() <= atol).all())
    return expected, f"V = {_fmt(values)}", passed, None


def _image_policy(model: ActorCritic, args: PPOArgs):
    """pi(the bright side | image) = 1: the policy reads the pixels through the CNN."""
    values, logits = _fresh(model, _images())
    p_best = _probs(model, logits)[[0, 1], [0, 1]]
    expected, learned = "π(bright side | image) = 1 ± 0.01", f"π(best) = {_fmt(p_best)}"
    return _with_values(model, args, expected, learned, bool(((1 - p_best) <= 1e-2).all()), values, 1.0, 0.01)


# Probes 2 and 5 in pixels (1x36x36 uint8, one half bright): run for agents whose env gives images, where the
# encoder is the CNN; they catch what the vector probes cannot: no /255, /255 twice, a CNN that never learns.
IMAGE_PROBES = [
    Probe(
        "image-value",
        "proxima/ProbeImageValue-v0",
        "reward = which half is bright: V = ±1",
        "image encoder",
        10_000,
        _image_values,
    ),
    Probe(
        "image-policy",
        "proxima/ProbeImagePolicy-v0",
        "the action that names the bright half",
        "image encoder or policy head",
        20_000,
        _image_policy,
    ),
]


def _memory(model: ActorCritic, args: PPOArgs):
    """pi(the cue's action | cue, 0, 0, 0) = 1 and V = 1 there: the LSTM remembers the first observation."""
    picks: list[Tensor] = []
    last_values: list[Tensor] = []
    for cue, best in ((-1.0, 0), (1.0, 1)):
        value, logits = _query(model, [cue, 0.0, 0.0, 0.0], episode=True)
        picks.append(_probs(model, logits[-1:])[0, best])
        last_values.append(value[-1])
    p_best, values = torch.stack(picks), torch.stack(last_values)
    expected, learned = "π(cue's action | cue, 0, 0, 0) = 1 ± 0.02", f"π(best) = {_fmt(p_best)}"
    return _with_values(model, args, expected, learned, bool(((1 - p_best) <= 2e-2).all()), values, 1.0, 0.05)


# For recurrent agents (--recurrent lstm), after probes 1-5 and the continuous one, whose answers need no memory.
MEMORY_PROBES = [
    Probe(
        "memory",
        "proxima/ProbeMemory-v0",
        "the action named by the first of four observations",
        "LSTM: its state, its reset at episode starts, or the replay of sequences",
        60_000,
        _memory,
    ),
]


# Multi-agent probes (docs/MULTIAGENT.md): envs of two agents whose rows the trainer sees through AgentSpec. Their
# checks query the agent on the env's own packed rows, so the actor and the critic read from them what they read
# in training (MAPPO's critic the "state" part; IPPO's the agent's "obs" and "agent" parts).
MULTIAGENT_ALGOS = ("ippo", "mappo")


def _centralized_critic(args: PPOArgs) -> bool:
    """Whether the agent's critic sees the global state (MAPPO's) rather than only its agent's view (IPPO's)."""
    return args.algorithm.algo == "mappo"


def _games(env_id: str, own: list[list[float]]):
    """The packed rows, as the probe env ``env_id`` gives them, of one game per entry of ``own`` (each agent's
    own observation): game-major, agent by agent."""
    from proxima.envs.native import MULTIAGENT_PROBE_ENVS

    return MULTIAGENT_PROBE_ENVS[env_id](len(own)).observe(torch.tensor(own, dtype=torch.float32))


def _coordination(model: ActorCritic, args: PPOArgs):
    """P(both agents choose the same action) = 1, and V = 1 for both: the agents agreed on one action."""
    values, logits = _fresh(model, _games("proxima/ProbeCoordination-v0", [[0.0, 0.0]]))
    probs = _probs(model, logits)
    p_same = float((probs[0] * probs[1]).sum())
    expected, learned = "P(same action) = 1 ± 0.02", f"P(same) = {p_same:.4f}, π(0) = {_fmt(probs[:, 0])}"
    return _with_values(model, args, expected, learned, 1 - p_same <= 0.02, values, 1.0, 0.05)


# The agents' bits in the four kinds of game, each as likely
CENTRAL_STATES = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]


def _central_values(model: ActorCritic, args: PPOArgs):
    """The reward (the sum of the two agents' bits) as each critic can know it. A critic that sees the state
    (MAPPO's) values every game exactly: V = 0, 1, 1, 2 for the bits (0,0), (0,1), (1,0), (1,1), squared error
    0. One that sees only its agent's bit (IPPO's) knows the other's only on average: V = its own bit + 0.5, and
    it keeps the other bit's variance, 0.25, as its squared error. Each agent is checked against its own
    critic's answer: MAPPO's fails where its critic does not read the state, IPPO's where the other agent's bit
    leaks into its critic."""
    if model.critic is None or args.network.norm_reward:
        return _not_applicable("V per game", model)
    values, _ = _fresh(model, _games("proxima/ProbeCentralCritic-v0", CENTRAL_STATES))
    bits = torch.tensor(CENTRAL_STATES)  # (games, agents), rows in the env's order: game-major
    reward = bits.sum(dim=1).repeat_interleave(2)
    error = float(((values - reward) ** 2).mean())
    learned = f"V = {_fmt(values)} (squared error {error:.4f})"
    mappo = _centralized_critic(args)
    expected = (
        "V(bits 00, 01, 10, 11) = 0, 1, 1, 2 ± 0.05: the state's"
        if mappo
        else ("V = own bit + 0.5 ± 0.05 (squared error 0.25): its own view's")
    )
    target = reward if mappo else bits.reshape(-1) + 0.5
    return expected, learned, bool(((values - target).abs() <= 0.05).all()), None


# For multi-agent agents (--algo ippo or mappo, or a multi-agent env), in place of the single-agent probes.
MULTIAGENT_PROBES = [
    Probe(
        "coordination",
        "proxima/ProbeCoordination-v0",
        "two agents paid only for choosing the same action",
        "per-agent rows: their rewards, advantages or shared policy",
        30_000,
        _coordination,
    ),
    Probe(
        "central-critic",
        "proxima/ProbeCentralCritic-v0",
        "a reward only the global state predicts",
        "critic's input (MAPPO's must read the state; IPPO's only its agent's view)",
        30_000,
        _central_values,
    ),
]
PROBE_NAMES = [p.name for p in PROBES + IMAGE_PROBES + MEMORY_PROBES + MULTIAGENT_PROBES]


def probes_for(args: PPOArgs) -> list[Probe]:
    """The probes that apply to the agent ``args`` builds: the image probes where its env gives images (the
    vector probes would train a network it does not have: a linear head on one number, at Atari's learning
    rate, needs 20x their budgets), the multi-agent probes for a multi-agent agent (``--algo ippo`` or
    ``mappo``, or a multi-agent env), probes 1-5 and the continuous one otherwise."""
    from proxima.envs import make_vec_env
    from proxima.envs.interface import agent_spec, obs_layout
    from proxima.policy.encoders import encoder_for

    if args.algorithm.algo in MULTIAGENT_ALGOS:
        return MULTIAGENT_PROBES
    envs = make_vec_env(args.env.env_id, 1, backend=args.env.env_backend)
    try:
        images = encoder_for(obs_layout(envs)) == "nature-cnn"
        many = agent_spec(envs) is not None
    finally:
        envs.close()
    if many:
        return MULTIAGENT_PROBES
    return IMAGE_PROBES if images else PROBES + (MEMORY_PROBES if args.network.recurrent else [])


# The budgets above are set for CleanRL's PPO settings (4 epochs x 4 minibatches per 512-sample rollout): the
# PPO tutorial (docs/SEEDS.md) gives about 10k steps for probes 1-2 and 30k+ for 4-5; probe 3's and the
# continuous probe's are proxima's.
BUDGET_STEPS_PER_SAMPLE = 16 / 512


def steps_per_sample(args: PPOArgs) -> float:
    """Gradient steps per collected sample: what a probe's env-step budget buys this agent."""
    return args.algorithm.update_epochs * args.algorithm.num_minibatches / args.batch_size


@dataclass
class ProbeResult:
    probe: Probe
    expected: str
    learned: str
    passed: bool | None  # None: does not apply to this agent (no critic, or scaled rewards)
    blame: str  # what a failure points to: the probe's component, or the critic where only values failed


def run_probes(
    args: PPOArgs,
    names: list[str] | None = None,
    timesteps: int | None = None,
    run_dir: str | None = None,
    norm_value: bool | None = None,
) -> list[ProbeResult]:
    """Train ``args`` (its env aside) on each probe in ``names`` and check the answer. By default: every
    probe that applies to the agent (``probes_for``), the image probes included when its env gives images.

    ``timesteps`` replaces every probe's own budget; ``run_dir`` keeps the runs (one sub-directory per probe)
    instead of deleting them. ``norm_value`` replaces ``args.network.norm_value``; None means
    a critic without value normalization (False).
    """
    from proxima.algo.algorithms import get_algorithm
    from proxima.envs.registry import get_backend
    from proxima.scale.trainer import train

    if norm_value is None:
        # Probes 1 to 3 check a critic that learns its values. A normalized one gets probe 1's constant value
        # from its statistics alone, whatever its value loss does: it would hide a broken value loss.
        if args.network.norm_value and get_algorithm(args.algorithm.algo).has_critic and not args.run.quiet:
            print(
                "probing the critic without value normalization (--no-norm-value): with value normalization, "
                "probe 1 passes whatever the value loss does; give --norm-value to probe the critic as configured"
            )
        norm_value = False

    every = PROBES + IMAGE_PROBES + MEMORY_PROBES + MULTIAGENT_PROBES
    chosen = [p for p in every if p.name in names] if names is not None else probes_for(args)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for probe in chosen:
            # kept where it runs the probe env (native, gymnasium), else auto's
            backend = args.env.env_backend
            if backend != "auto" and not get_backend(backend).handles(probe.env_id):
                backend = "auto"
            if probe in MULTIAGENT_PROBES:  # batched torch envs, not Gymnasium's (which takes any id)
                backend = "native"
            probe_args = args.replace(
                env_id=probe.env_id,
                env_backend=backend,
                norm_value=norm_value,
                total_timesteps=timesteps or probe.timesteps,
                run_dir=f"{run_dir or tmp}/probe-{probe.name}",
                quiet=True,
                plot=False,
                report=False,
                checkpoint_every=0,
                track=False,
                capture_video=False,
                eval_every=0,
                stop_return=None,
                save_best=False,
                **({} if probe.name == "continuous" else BOX_ONLY),
            ).validate()
            if not args.run.quiet:  # a probe takes seconds: say what is running
                print(
                    f"probe {probe.name}: {probe.tests}, {probe_args.algorithm.total_timesteps} steps",
                    flush=True,
                )
            agent = train(probe_args)
            assert not isinstance(agent, list), "a probe trains one seed"
            model = agent.model.cpu()
            # the precision it trained in: --precision auto is resolved by then (the value tolerances follow it)
            probe_args = probe_args.replace(precision=model.spec.network.precision)
            expected, learned, passed, blame = probe.check(model, probe_args)
            results.append(ProbeResult(probe, expected, learned, passed, blame or probe.blame))
    if run_dir is not None:  # the table, for `proxima report RUN_DIR`
        write_json(
            os.path.join(run_dir, PROBES_JSON),
            {
                "probes": [
                    {
                        "name": r.probe.name,
                        "tests": r.probe.tests,
                        "expected": r.expected,
                        "learned": r.learned,
                        "passed": r.passed,
                        "points_to": r.blame,
                        "run_dir": f"probe-{r.probe.name}",
                    }
                    for r in results
                ]
            },
        )
    return results


def print_table(results: list[ProbeResult], args: PPOArgs | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("probe", "tests", "expected", "learned", "result", "points to")
    for r in results:
        table.add_row(
            r.probe.name,
            r.probe.tests,
            r.expected,
            r.learned,
            {True: "pass", False: "FAIL", None: "n/a"}[r.passed],
            r.blame if r.passed is False else "",
        )
    console = Console(width=200) if not Console().is_terminal else Console()
    console.print(table)
    failed = [r for r in results if r.passed is False]
    if failed:
        first = failed[0]
        console.print(
            f"first failure: probe {first.probe.name}, which points to the {first.blame}. Fix that first: later probes "
            "rely on what earlier ones test, so their failures are often the same bug."
        )
        if args is not None and steps_per_sample(args) < BUDGET_STEPS_PER_SAMPLE:
            console.print(
                f"note: this agent takes {args.algorithm.update_epochs * args.algorithm.num_minibatches} gradient steps per "
                f"{args.batch_size} samples, fewer than the 16 per 512 the probes' budgets were set for, so a "
                "failure may only mean too few steps: try a larger --total-timesteps."
            )
    else:
        console.print(f"no probe failed ({sum(r.passed is True for r in results)} passed)")
