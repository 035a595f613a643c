"""``PPOArgs``: every setting of a run, in four typed groups whose field docs become ``--help``.

Names and defaults of the seed's fields follow seed 000 (and CleanRL's ppo.py); proxima adds the rest. Each
group is a frozen dataclass that validates itself and goes where it is used: ``args.env`` (``EnvSettings``),
``args.network`` (``proxima.policy.networks.NetworkSettings``, which the network's ``NetworkSpec`` holds),
``args.algorithm`` (``AlgoSettings``) and ``args.run`` (``RunSettings``). The names stay flat where a user
gives them (flags, keyword arguments, presets, ``PPOArgs(...)``, ``args.replace``) and reads them
(``args.env_id``): every field name is unique across the groups. Derived sizes are properties, never written back into the object.

Where a value comes from, lowest priority first: the field defaults here, then the chosen algorithm's
defaults (``proxima.algo.algorithms``), then a preset (``config``), then explicit flags or keyword arguments
(``resolve_args``). ``config`` and ``resume`` are instructions, not settings: they are not fields and are
not written to ``config.json``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any, Literal

import numpy as np

from proxima.algo import custom
from proxima.algo.algorithms import Algorithm, get_algorithm, register_algorithm
from proxima.algo.schedules import ADJUSTABLE
from proxima.base import trust
from proxima.base.errors import UserError, read_only
from proxima.policy.encoders import class_path
from proxima.policy.networks import NetworkSettings

# The most torch threads a run may ask for: more than any machine's cores, fewer than crash OpenMP.
MAX_THREADS = 1024

# config.json: the settings of a run, by group. Before 1.0 a file of another version is refused, not converted.
CONFIG_FORMAT, CONFIG_VERSION = "proxima-config", 2


@dataclass(frozen=True)
class Must:
    """A setting's own constraint, declared in its type beside it: ``num_envs: Annotated[int, POSITIVE_INT]``.
    ``check`` reads it, for every way a value comes (flags, a preset or config.json, keyword arguments,
    ``PPOArgs(...)``), so a bad value is said in the same words whichever way it came: ``{name} must be
    {words}, got {value!r}`` (``when given`` for an optional one, whose None is not checked). ``typed``: ``holds``
    checks the value's type too, and its words replace the type's."""

    holds: Callable[[Any], bool]
    words: str
    typed: bool = False


# The constraints, by name: an annotation is evaluated in the class's namespace, where a lambda of its own finds
# no module constant (MAX_THREADS).
POSITIVE_INT = Must(lambda v: v >= 1, "a positive integer")
POSITIVE = Must(lambda v: v > 0, "positive")  # a NaN fails every one of these: no comparison holds for it
NON_NEGATIVE = Must(lambda v: v >= 0, "non-negative")
UNIT = Must(lambda v: 0 < v <= 1, "in (0, 1]")
PROBABILITY = Must(lambda v: 0 <= v <= 1, "a probability in [0, 1]")
UPDATES = Must(lambda v: v >= 0, "0 or a positive number of updates")
SEED = Must(lambda v: 0 <= v <= 2**32 - 1, "an integer from 0 to 2**32 - 1 (4294967295)")  # numpy's: 32 bits
KWARGS = Must(
    lambda v: all(isinstance(k, str) for k in v), "a dict of the env constructor's keyword arguments"
)
SEEDS = Must(lambda v: v >= 1, "a positive number of seeds")
THREADS = Must(lambda v: 0 <= v <= MAX_THREADS, f"0 (automatic) or a number of threads up to {MAX_THREADS}")
CHECKPOINTS = Must(lambda v: v >= 0, "0 (only at the end) or a positive number of updates")
AGENTS = Must(lambda v: v >= 0, "0 (off) or a number of agents")
STD_END = Must(lambda v: 0 < v <= 1, "a standard deviation in (0, 1], under the initial 1")
INFO_KEYS = Must(
    lambda keys: isinstance(keys, tuple) and all(isinstance(k, str) and k.strip() for k in keys),
    "a tuple of info keys such as ('success',)",
    typed=True,
)


@read_only
@dataclass(frozen=True)
class EnvSettings:
    """the environment"""

    env_id: str = "CartPole-v1"
    """the id of the environment: any registered Gymnasium id, or module:EnvName-v0 to import module first (from
    the working directory too); many agents: pettingzoo:module.env_v0, vmas:scenario, selfplay:module.game_v0
    (docs/MULTIAGENT.md); for an env given to train(env=...) as an object, a label that names it"""
    env_kwargs: Annotated[dict | None, KWARGS] = None
    """keyword arguments of the env's constructor, as JSON: --env-kwargs '{"size": 8}' (passed to gymnasium.make,
    or to the function given as env=; the native backend takes none)"""
    env_factory: str | None = None
    """module:name of a class or function that returns the env, called with --env-kwargs once per env (instead of
    --env-id); train(env=...) records it for an env object, or <lambda>, <functools.partial>, <VectorEnv>,
    <callable> for one that config.json cannot name (give it again: proxima.resume(RUN_DIR, env=...)); docs/ENVS.md"""
    num_envs: Annotated[int, POSITIVE_INT] = 4
    """the number of parallel game environments"""
    env_backend: str = "auto"
    """native: proxima's batched torch envs (classic control, PendulumDiscrete, probes); gymnasium: Gymnasium's
    vector envs, any id; pettingzoo, vmas, selfplay: the ids of that prefix; auto: native where it exists (and
    without --async-envs or --capture-video), else the one that handles the id; or the name of a backend
    registered with proxima.envs.register_backend"""
    async_envs: bool = False
    """run each environment in its own process (Gymnasium's AsyncVectorEnv) instead of in-process"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (into the run directory's `videos` folder)"""
    rollout_workers: int = 0
    """0: the envs step in this process; N: N Ray actors each own num_envs / N envs and collect their slice of
    every rollout (needs the ray extra; see docs/SCALING.md)"""
    team_reward: bool = False
    """multi-agent envs: every agent present is rewarded with the mean reward of its game's agents present, not
    its own (a cooperative team's shared reward; the episode statistics stay the env's own rewards)"""
    self_play_every: Annotated[int, POSITIVE_INT] = 10
    """selfplay: envs (two-player games, docs/MULTIAGENT.md): every this many updates, save the agent to
    RUN_DIR/snapshots/UPDATE and add it to the pool of opponents"""
    self_play_pool: Annotated[int, POSITIVE_INT] = 10
    """selfplay: envs: the number of opponents the pool keeps, the most recent snapshots (at first the random
    player)"""
    self_play_latest: Annotated[float, PROBABILITY] = 0.5
    """selfplay: envs: the probability that a game's opponent is the latest snapshot; the rest of the pool
    shares the remainder evenly"""
    self_play_random_moves: Annotated[float, PROBABILITY] = 0.0
    """selfplay: envs: the probability that a snapshot opponent's move is a random legal one instead, which
    shows the learner positions its own play never reaches"""

    def validate(self) -> None:
        from proxima.envs.registry import backend_names

        if self.env_backend not in backend_names():
            raise UserError(
                f"unknown env backend {self.env_backend!r}; accepted: {', '.join(backend_names())}"
            )
        if self.rollout_workers < 0 or (self.rollout_workers and self.num_envs % self.rollout_workers):
            raise UserError(
                f"rollout_workers must be 0 (envs in this process) or a positive divisor of num_envs={self.num_envs}, "
                f"got {self.rollout_workers}"
            )
        if self.rollout_workers and self.capture_video:
            raise UserError("capture_video records envs of this process; drop it or --rollout-workers")


@read_only
@dataclass(frozen=True)
class AlgoSettings:
    """the algorithm and its optimization"""

    algo: str = "ppo"
    """the algorithm: ppo (clipped surrogate), vpg (policy gradient with a learned value baseline) or
    reinforce (policy gradient on rewards-to-go, no critic); for many agents ippo (each agent's critic sees its
    own observation) or mappo (the critic sees the global state); any name in proxima.algo.algorithms.ALGORITHMS"""
    total_timesteps: Annotated[int, POSITIVE_INT] = 500000
    """total timesteps of the experiments"""
    learning_rate: Annotated[float, POSITIVE] = 2.5e-4
    """the learning rate of the optimizer"""
    value_learning_rate: Annotated[float | None, POSITIVE] = None
    """give the value network its own optimizer with this learning rate (default: one optimizer for both)"""
    adam_eps: Annotated[float, POSITIVE] = 1e-5
    """Adam's epsilon, added to the root of each weight's mean squared gradient: 1e-5 as the PPO reference code
    (PyTorch's default is 1e-8, BenchMARL's 1e-6). A weight whose gradients are much smaller than it steps at a
    fraction of the learning rate: with --no-norm-adv and rewards of a few hundredths, the hidden layers behind
    the actor's 0.01-scaled output layer (docs/MULTIAGENT.md, VMAS)"""
    anneal_lr: bool = True
    """toggles linear learning-rate annealing to 0 over the run"""
    learning_rate_end: Annotated[float | None, NON_NEGATIVE] = None
    """anneal the learning rate linearly to this instead of 0 over the run (--anneal-lr is this with 0; given,
    it schedules the rate with or without --anneal-lr); docs/TRAINING.md"""
    num_steps: Annotated[int, POSITIVE_INT] = 128
    """the number of steps to run in each environment per policy rollout"""
    gamma: Annotated[float, UNIT] = 0.99
    """the discount factor gamma"""
    gae_lambda: Annotated[float, UNIT] = 0.95
    """the lambda for the general advantage estimation"""
    advantage: Literal["gae", "returns"] = "gae"
    """the advantage estimator: gae (GAE(lambda)) or returns (discounted rewards-to-go minus V(s))"""
    num_minibatches: Annotated[int, POSITIVE_INT] = 4
    """the number of mini-batches"""
    update_epochs: Annotated[int, POSITIVE_INT] = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles per-minibatch advantage normalization"""
    clip_coef: Annotated[float, POSITIVE] = 0.2
    """the surrogate clipping coefficient"""
    clip_coef_end: Annotated[float | None, NON_NEGATIVE] = None
    """change the clipping coefficient linearly from --clip-coef to this over the run (None: constant)"""
    clip_vloss: bool = False
    """toggles the clipped value loss of the reference implementation (OpenAI baselines' ppo2; detail 9)"""
    ent_coef: Annotated[float, NON_NEGATIVE] = 0.01
    """coefficient of the entropy"""
    ent_coef_end: Annotated[float | None, NON_NEGATIVE] = None
    """change the entropy coefficient linearly from --ent-coef to this over the run (None: constant)"""
    vf_coef: Annotated[float, NON_NEGATIVE] = 0.5
    """coefficient of the value function"""
    max_grad_norm: Annotated[float, NON_NEGATIVE] = 0.5
    """the maximum norm for the gradient clipping (0 turns clipping off)"""
    target_kl: Annotated[float | None, POSITIVE] = None
    """stop an update's epochs early once the approximate KL exceeds this (off by default)"""
    action_std_end: Annotated[float | None, STD_END] = None
    """Box actions: cap the Gaussian policy's standard deviation under a ceiling that falls from 1 (its initial
    value) to this over the run, evenly in log std; the learned std may sit lower, never higher. The env clips
    actions to their bounds, so a wider Gaussian costs the policy nothing there and its std tends to grow; the
    ceiling keeps the late policy precise (BipedalWalker, docs/journal/benchmarks.md). The fall spans --total-timesteps,
    so a shorter run falls faster, and one stopped early by --stop-return ends above this. Off by default"""
    advantages: str | None = None
    """your own advantage estimator instead of --advantage's: MODULE:FUNCTION of a function written as the PPO
    tutorial's compute_advantages(next_value, next_done, rewards, values, dones, device, gamma, gae_lambda),
    checked against proxima's GAE before training (from Python, the function itself); --algo MODULE gives a
    module's functions of the tutorial's names (docs/ALGORITHMS.md)"""
    policy_loss: str | None = None
    """your own policy term: MODULE:FUNCTION of calc_policy_loss(probs, mb_action, mb_advantages, mb_logprobs,
    clip_coef), which normalizes the advantages itself (from Python, the function itself)"""
    value_loss: str | None = None
    """your own value term: MODULE:FUNCTION of calc_value_function_loss(critic, mb_obs, mb_returns, v_coef),
    weighted by v_coef (from Python, the function itself)"""
    entropy_loss: str | None = None
    """your own entropy term: MODULE:FUNCTION of calc_entropy_loss(probs, ent_coef), signed and weighted
    (negative to raise the entropy; from Python, the function itself)"""

    def validate(self) -> None:
        algo = get_algorithm(self.algo)  # a UserError naming the accepted ones
        if self.value_learning_rate is not None and not algo.has_critic:
            raise UserError(f"{self.algo} has no value network, so value_learning_rate does not apply")

    def how_to_change(self, name: str) -> str:
        if name in ADJUSTABLE:
            return f"change it between updates of a run with run.set({name}=...)"
        return f"make new ones with args.replace({name}=...) (run.set changes {', '.join(ADJUSTABLE)})"


@read_only
@dataclass(frozen=True)
class RunSettings:
    """the run: seeding, devices, logging, evaluation, checkpoints"""

    exp_name: str = "ppo"
    """the name of this experiment"""
    seed: Annotated[int, SEED] = 1
    """seed of the experiment"""
    num_seeds: Annotated[int, SEEDS] = 1
    """train seeds seed ... seed+N-1 as N independent agents in one process, as one batched computation; each
    writes its own run directory, RUN_DIR/seedS (docs/TRAINING.md)"""
    distributed: bool = False
    """train this one run on the processes that torchrun or SLURM started (their RANK and WORLD_SIZE), each
    stepping num_envs / WORLD_SIZE of its envs, with the gradients averaged across them: the run a single process
    would train, on many (docs/SCALING.md)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True` and torch picks deterministic algorithms"""
    cuda: bool = True
    """if toggled, cuda will be used when a GPU is present (the CPU otherwise)"""
    torch_threads: Annotated[int, THREADS] = 0
    """torch's CPU threads; 0 picks 1 for minibatches under 512 samples (where threads cost more than they
    save) and torch's default otherwise"""
    run_dir: str | None = None
    """where to write the run (default: runs/{env_id}__{exp_name}__{seed}__{unix time})"""
    init_from: str | None = None
    """start from the agent saved in this run directory (or RUN_DIR/best): its weights and normalization
    statistics, with a fresh optimizer and counters; its spaces and network settings must be this run's"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "proxima"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    eval_every: Annotated[int, UPDATES] = 0
    """every this many updates, evaluate the deterministic policy on --eval-episodes fresh episodes of the
    training backend and log eval_return (0: never)"""
    eval_episodes: Annotated[int, POSITIVE_INT] = 32
    """episodes per evaluation during training, one env each"""
    stop_return: float | None = None
    """stop training as soon as an evaluation's mean return reaches this (needs --eval-every)"""
    save_best: bool = False
    """also keep the agent with the best eval_return so far in RUN_DIR/best (needs --eval-every); the run
    directory itself always holds the final agent"""
    rescore_best: Annotated[int, AGENTS] = 0
    """with --save-best: also keep the agents of the K best evaluations, score each of them at the end of
    training on --rescore-episodes more fresh episodes, and keep the highest in RUN_DIR/best (a few evaluation
    episodes cannot see a policy that fails now and then; 0: off)"""
    rescore_episodes: Annotated[int, POSITIVE_INT] = 100
    """episodes per agent for --rescore-best, seeded apart from the evaluations' and `proxima eval`'s"""
    checkpoint_every: Annotated[int, CHECKPOINTS] = 10
    """save the whole training state to RUN_DIR/checkpoint.safetensors every this many updates (0: only at the
    end and on Ctrl-C), so that `--resume` can continue the run after a crash"""
    plot: bool = True
    """write RUN_DIR/learning_curve.png (episodic return against env steps) at the end (needs the plot extra)"""
    report: bool = True
    """write RUN_DIR/report.html (proxima report: one self-contained page of the run) every 30 s while training
    and at the end; an open page reloads itself until the run ends"""
    log_info: Annotated[tuple[str, ...], INFO_KEYS] = ()
    """info keys whose mean at the episodes' ends (bools as 0/1) is logged each update as info/KEY, to
    metrics.jsonl, TensorBoard (charts/info/KEY) and the report; Gymnasium-backend envs report infos, native
    envs none (docs/CALLBACKS.md)"""
    quiet: bool = False
    """no console output (no progress bar or progress lines); the run directory still gets everything"""

    def validate(self) -> None:
        last = self.seed + self.num_seeds - 1  # each seed's own is checked where it is declared
        if last > 2**32 - 1:
            raise UserError(f"seed must be {SEED.words}, got seeds {self.seed} to {last}")
        if self.stop_return is not None and not self.eval_every:
            raise UserError("stop_return needs evaluations during training: give --eval-every N as well")
        if self.save_best and not self.eval_every:
            raise UserError("save_best needs evaluations during training: give --eval-every N as well")
        if self.rescore_best and not self.save_best:
            raise UserError("rescore_best chooses the agent in RUN_DIR/best: give --save-best as well")


# Each group by its attribute in PPOArgs, in config.json's order (--help's sections are commands.common.SECTIONS).
GROUPS: dict[str, type] = {
    "env": EnvSettings,
    "network": NetworkSettings,
    "algorithm": AlgoSettings,
    "run": RunSettings,
}
# Each setting's flat name (a flag, a keyword, a preset's key) -> its group
GROUP_OF: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in dataclasses.fields(cls)}
TUPLES = ("hidden_sizes", "critic_hidden_sizes", "log_info")  # JSON has lists
PATHS = ("run_dir", "init_from")  # a pathlib.Path is written down as its string
TYPED_BY_GROUP = ("encoder", "actor_critic")  # its group's validate() says more than its type can (a class)

# The flags that Stable-Baselines3, rl-zoo and CleanRL users type first, and proxima's that do their job (said
# where difflib's spelling match would point elsewhere: --normalize is not --norm-value). `proxima train` says
# them for an unknown flag (proxima.commands.argv), PPOArgs and proxima.train for an unknown keyword, as
# keywords (``unknown_words``). Said, never mapped, even where the meaning is the same (n_steps): each setting
# has one name, in flags, keywords, presets and config.json alike, and several of them differ in meaning
# (SB3's batch_size is samples per minibatch, proxima's knob num_minibatches; SB3's learning rate is constant,
# proxima's annealed by default).
FOREIGN = {
    "--n-steps": "--num-steps",
    "--n-envs": "--num-envs",
    "--n-epochs": "--update-epochs",
    "--lr": "--learning-rate",
    "--clip-range": "--clip-coef",
    "--net-arch": "--hidden-sizes",
    "--batch-size": "--num-minibatches (a minibatch is num_envs x num_steps / num_minibatches samples)",
    "--minibatch-size": "--num-minibatches (a minibatch is num_envs x num_steps / num_minibatches samples)",
    "--device": "--cuda or --no-cuda",
    "--eval-freq": "--eval-every (in updates)",
    "--save-freq": "--checkpoint-every (in updates)",
    "--tensorboard-log": "--run-dir (TensorBoard's events are written there)",
    "--verbose": "--quiet (the console output is on by default)",
    "--normalize": "--norm-obs and --norm-reward",
    "--norm-advantages": "--norm-adv",
    "--normalize-advantage": "--norm-adv",
    "--policy": "--hidden-sizes and --encoder",
}
# CleanRL's names of sizes that proxima derives too: read (args.minibatch_size), never given. CleanRL's ppo.py
# computes minibatch_size from num_minibatches as well; given, it would be a second setting of one size, and the
# two would disagree as soon as a replace(num_envs=...) changed the batch. So a tutorial's reads work, and its
# value is refused with the setting that makes it (FOREIGN's --minibatch-size).
ALIASES = {"minibatch_size": "samples_per_minibatch"}


def _keyword(flag: re.Match) -> str:
    """A FOREIGN flag as a keyword: ``--num-steps`` is num_steps, a switch ``--cuda`` cuda=True, ``--no-cuda``
    cuda=False."""
    name = flag.group(2).replace("-", "_")
    if declared(GROUPS[GROUP_OF[name]])[name][0] is not bool:
        return name
    return f"{name}={not flag.group(1)}"


def unknown_words(names: list[str], source: str | None = None) -> str:
    """The one line for settings given by names that no group has: each with the proxima setting that does its
    job (FOREIGN, as keywords: --no-cuda is cuda=False) or its close spelling, else the accepted names."""
    hints, plain = [], []
    for name in names:
        foreign = FOREIGN.get("--" + name.replace("_", "-"))
        close = difflib.get_close_matches(name, GROUP_OF, n=1, cutoff=0.75)
        if foreign is not None:
            hint = f"in proxima: {re.sub(r'--(no-)?([a-z][a-z-]*)', _keyword, foreign)}"
        elif close:
            hint = f"did you mean {close[0]}?"
        else:
            plain.append(name)
            continue
        if name in ALIASES:
            hint += f"; read it as args.{name} or args.{ALIASES[name]}"
        hints.append(hint if len(names) == 1 else f"{name}: {hint}")
    if plain:
        hints.append(
            "the accepted names are the fields of proxima.PPOArgs' groups "
            f"({', '.join(f'{g}: {c.__name__}' for g, c in GROUPS.items())})"
        )
    return f"{source + ' has unknown' if source else 'unknown'} settings {names}; {'; '.join(hints)}"


def by_group(values: dict, source: str | None = None) -> dict[str, dict]:
    """Settings by their flat names, sorted into their groups, as the groups' fields hold them (a list of
    hidden_sizes as a tuple, a path as its string); an unknown name is refused (``unknown_words``)."""
    unknown = sorted(set(values) - set(GROUP_OF))
    if unknown:
        raise UserError(unknown_words(unknown, source))
    out: dict[str, dict] = {}
    for name, value in values.items():
        if name in TUPLES and isinstance(value, list):
            value = tuple(value)
        if name in ("encoder", "actor_critic") and isinstance(
            value, type
        ):  # the import path config.json records
            value = class_path(value, name)
        if (
            name in custom.FUNCTIONS and value is not None and not isinstance(value, str)
        ):  # a function: its name
            value = custom.function_name(name, value)
        if name == "algo" and isinstance(value, Algorithm):  # registered: config.json records its name
            value = register_algorithm(value)
        if name in PATHS and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, np.generic):  # as config.json writes it
            value = value.item()
        out.setdefault(GROUP_OF[name], {})[name] = value
    return out


@functools.cache
def declared(cls: type) -> dict[str, tuple[Any, tuple[Must, ...]]]:
    """Each field of the dataclass ``cls``: its type (without ``Annotated``) and the constraints declared in it."""
    out = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        musts: tuple[Must, ...] = ()
        if typing.get_origin(hint) is Annotated:
            hint, *extras = typing.get_args(hint)
            musts = tuple(m for m in extras if isinstance(m, Must))
        out[name] = (hint, musts)
    return out


def _fits(value, hint) -> bool:
    """Whether ``value`` is of the settings' type ``hint`` (numpy's numbers count as numbers)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, args[0]) for v in value)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool | np.bool_)
    if hint is int:
        return isinstance(value, int | np.integer) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


def _described(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_described(a) for a in args)
    if origin is tuple:
        return f"a tuple of {_described(args[0]).removeprefix('an ').removeprefix('a ')}s, such as " + (
            "(64, 64)" if args[0] is int else "('success',)"
        )
    return {bool: "True or False", int: "an int", float: "a number", str: "a string", type(None): "None"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def _choices(hint) -> tuple:
    """A Literal's values (and None, for an optional one); () for any other type."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    literal = [a for a in args if typing.get_origin(a) is Literal]
    if not literal:
        return ()
    return (*typing.get_args(literal[0]), *([None] if type(None) in args else []))


def check(cls: type, name: str, value) -> None:
    """The one check of a setting's value, for every way it comes: a ``UserError`` where the field ``name`` of
    the dataclass ``cls`` is given a value of another type (before it fails deep inside a run or, for a bool
    given as the string "False", silently counts as true) or one that its declared constraint (``Must``)
    refuses. Checks across settings are the groups' ``validate()``."""
    hint, musts = declared(cls)[name]
    optional = type(None) in typing.get_args(hint)
    if optional and value is None:
        return
    if name not in TYPED_BY_GROUP and not any(m.typed for m in musts) and not _fits(value, hint):
        choices = _choices(hint)
        if choices:  # the words of the groups' own checks: "init must be ..., got ..."
            words = [str(c) for c in choices]
            raise UserError(f"{name} must be {', '.join(words[:-1])} or {words[-1]}, got {value!r}")
        extra = ""
        if callable(value) and name in ADJUSTABLE:  # SB3 takes a function of the progress here
            extra = "; for a schedule give learning_rate_end (and the like) or a callback calling run.set (docs/TRAINING.md)"
        raise UserError(
            f"{name}={value!r} is of type {type(value).__name__}; {name} takes {_described(hint)}{extra}"
        )
    for must in musts:
        if not must.holds(value):
            raise UserError(f"{name} must be {must.words}{' when given' if optional else ''}, got {value!r}")


def check_fields(settings) -> None:
    for f in dataclasses.fields(settings):
        check(type(settings), f.name, getattr(settings, f.name))


@read_only
@dataclass(frozen=True)
class PPOArgs:
    """Every setting of a run, in four groups. ``PPOArgs(env_id=..., clip_coef=...)`` (as CleanRL's ``Args``),
    ``PPOArgs.of(...)`` and ``args.replace(...)`` take the settings' flat names, and ``args.env_id`` reads one
    (``args.env.env_id``); ``PPOArgs(env=EnvSettings(...))`` takes a group whole."""

    env: EnvSettings = field(default_factory=EnvSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    algorithm: AlgoSettings = field(default_factory=AlgoSettings)
    run: RunSettings = field(default_factory=RunSettings)

    def __init__(
        self,
        env: EnvSettings | None = None,
        network: NetworkSettings | None = None,
        algorithm: AlgoSettings | None = None,
        run: RunSettings | None = None,
        **flat: Any,
    ) -> None:
        # The dataclass's own __init__ would take the groups only. A setting by its flat name beside its group
        # given whole is refused: one of the two would be dropped without a word.
        given = {"env": env, "network": network, "algorithm": algorithm, "run": run}
        values = by_group(flat)
        both = [(name, GROUP_OF[name]) for name in flat if given[GROUP_OF[name]] is not None]
        if both:
            name, group = both[0]
            raise UserError(
                f"PPOArgs got {name} beside {group}={GROUPS[group].__name__}(...), which holds it: give it inside "
                f"the group ({GROUPS[group].__name__}({name}=...)) or drop {group}= and give every setting by its flat name"
            )
        for group, cls in GROUPS.items():
            settings = given[group]
            object.__setattr__(self, group, cls(**values.get(group, {})) if settings is None else settings)
        # every setting, however the PPOArgs was made; the checks across them: validate()
        for group in GROUPS:
            check_fields(getattr(self, group))

    # Reads by flat name, as a CleanRL script reads its args: args.env_id is args.env.env_id. mypy types any
    # attribute that PPOArgs does not declare as Any through this (a misspelt one too); proxima's own code reads
    # the groups (args.env.env_id), whose fields stay typed.
    def __getattr__(self, name: str) -> Any:
        group = GROUP_OF.get(name)
        if group is not None:
            return getattr(getattr(self, group), name)
        if name in ALIASES:
            return getattr(self, ALIASES[name])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)

    def how_to_change(self, name: str) -> str:
        """The words of ``read_only``'s refusal of ``args.NAME = ...``."""
        if name in GROUPS:
            return (
                f"make new ones with dataclasses.replace(args, {name}=...) or args.replace(...) by flat names"
            )
        if name in GROUP_OF:  # the group's words: run.set for a setting that a run adjusts
            return getattr(self, GROUP_OF[name]).how_to_change(name)
        return f"make new ones with args.replace({name}=...)"

    @property
    def batch_size(self) -> int:
        """Samples per update: every env's ``num_steps`` steps."""
        return self.env.num_envs * self.algorithm.num_steps

    @property
    def samples_per_minibatch(self) -> int:
        """Samples per gradient step (with --recurrent, ``num_envs / num_minibatches`` whole env sequences)."""
        return self.batch_size // self.algorithm.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.algorithm.total_timesteps // self.batch_size

    @classmethod
    def of(cls, source: str | None = None, **values) -> PPOArgs:
        """Settings by their flat names (``PPOArgs.of(env_id="Acrobot-v1", hidden_sizes=(32,))``) over the field
        defaults; ``source`` names where they come from in the error for an unknown name."""
        return cls().replace(_source=source, **values)

    def replace(self, _source: str | None = None, **values) -> PPOArgs:
        """A copy with the settings given by their flat names changed: ``args.replace(seed=2, num_envs=8)``."""
        groups = by_group(values, _source)
        return dataclasses.replace(
            self, **{g: dataclasses.replace(getattr(self, g), **v) for g, v in groups.items()}
        )

    def flat(self) -> dict:
        """Every setting by its flat name, in the groups' order."""
        return {k: v for group in GROUPS for k, v in dataclasses.asdict(getattr(self, group)).items()}

    def to_json(self) -> dict:
        """``config.json``'s content: the settings by group, with the format's version."""
        groups = {group: dataclasses.asdict(getattr(self, group)) for group in GROUPS}
        return {"format": CONFIG_FORMAT, "version": CONFIG_VERSION, **groups}

    @classmethod
    def from_json(cls, data: dict, source: str = "config.json") -> PPOArgs:
        """From ``to_json``'s output, whole; another format or version, or a setting that is missing, is refused
        in one line: a missing one is never given today's default (a run trained with gamma 0.8 would resume at
        0.99, and write that into its config.json)."""
        if data.get("format") != CONFIG_FORMAT or data.get("version") != CONFIG_VERSION:
            raise UserError(
                f"{source} is not a proxima config of format version {CONFIG_VERSION} (settings by group); "
                "this proxima reads no other: train the run again, or use the proxima that wrote it"
            )
        unknown = sorted(set(data) - {"format", "version", *GROUPS})
        if unknown:
            raise UserError(f"{source} has unknown groups {unknown}; accepted: {', '.join(GROUPS)}")
        values = {}
        for group, cls_ in GROUPS.items():
            names = {f.name for f in dataclasses.fields(cls_)}
            given = data.get(group, {})
            if not isinstance(given, dict) or set(given) - names:
                bad = sorted(set(given) - names) if isinstance(given, dict) else given
                raise UserError(f"{source} has unknown settings in {group}: {bad}")
            missing = [f.name for f in dataclasses.fields(cls_) if f.name not in given]
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise UserError(
                    f"{source} lacks the setting {group}.{missing[0]}{more}: a run's config.json holds every "
                    "setting, and one that is missing is not filled with today's default; the file is corrupt"
                )
            values.update(given)
        return cls.of(source, **values)

    def validate(self) -> PPOArgs:
        """Raise a ``UserError`` naming the first bad value and what is accepted; return self if all is well.
        Each group checks its own values; the checks across groups are here."""
        for group in GROUPS:
            getattr(self, group).validate()
        env, net, algo = self.env, self.network, self.algorithm
        if algo.value_learning_rate is not None and net.shared_network:
            raise UserError("value_learning_rate needs separate networks; drop it or --shared-network")
        if net.recurrent and env.rollout_workers:
            raise UserError("--recurrent runs its envs in this process; drop it or --rollout-workers")
        if net.recurrent and env.num_envs % algo.num_minibatches:
            raise UserError(
                f"num_minibatches={algo.num_minibatches} does not divide num_envs={env.num_envs}: with --recurrent a "
                "minibatch is whole env sequences; pick a divisor of num_envs"
            )
        if net.action_dist != "gaussian" and algo.action_std_end is not None:
            raise UserError(
                f"--action-std-end caps the Gaussian's learned std; --action-dist {net.action_dist} has none: "
                "drop one of them"
            )
        if self.batch_size % algo.num_minibatches:
            raise UserError(
                f"num_minibatches={algo.num_minibatches} does not divide the batch of num_envs x num_steps = "
                f"{self.batch_size}; pick a divisor of {self.batch_size}"
            )
        if self.num_updates < 1:
            raise UserError(
                f"total_timesteps={algo.total_timesteps} is less than one batch of num_envs x num_steps = "
                f"{self.batch_size}; give at least {self.batch_size}"
            )
        return self


PRESET_PACKAGE = "proxima.presets"


def preset_names() -> list[str]:
    files = resources.files(PRESET_PACKAGE).iterdir()
    return sorted(f.name[: -len(".json")] for f in files if f.name.endswith(".json"))


# Keys of a preset that describe it rather than set anything: its one-line description, how long it takes
# (``typical``: the steps and wall time a results table measured, with the table and date, or "not measured"),
# and for the presets that `proxima solve` uses, the score that counts as solving the task ({"threshold": R,
# "deterministic": B}).
PRESET_METADATA = ("description", "typical", "solve")


def load_preset(name_or_path: str) -> dict:
    """The settings of a shipped preset (by name) or of a JSON file (by path), without its metadata. A run's
    ``config.json`` (settings by group) gives its settings but its run directory: the same run again, elsewhere."""
    data = read_preset(name_or_path)
    if "format" in data:
        settings = PPOArgs.from_json(data, f"config {name_or_path!r}").flat()
        return {k: v for k, v in settings.items() if k != "run_dir"}
    for key in PRESET_METADATA:
        data.pop(key, None)
    PPOArgs.of(f"config {name_or_path!r}", **data)  # names checked here, values by validate()
    return data


def solve_presets() -> dict[str, str]:
    """Env id -> the shipped preset that solves it fastest (the presets with a ``solve`` entry)."""
    presets = {name: read_preset(name) for name in preset_names()}
    return {data["env_id"]: name for name, data in presets.items() if "solve" in data}


def is_preset_file(name_or_path: str) -> bool:
    """Whether ``--config``'s value is a file's path rather than a shipped preset's name."""
    return name_or_path.endswith(".json") or os.sep in name_or_path


def read_preset(name_or_path: str) -> dict:
    if is_preset_file(name_or_path):
        try:
            with open(name_or_path) as f:
                data = json.load(f)
        except OSError as e:
            raise UserError(f"cannot read config file {name_or_path!r}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise UserError(f"config file {name_or_path!r} is not valid JSON: {e}") from None
    elif name_or_path in preset_names():
        data = json.loads(resources.files(PRESET_PACKAGE).joinpath(name_or_path + ".json").read_text())
    else:
        raise UserError(
            f"unknown preset {name_or_path!r}; accepted: {', '.join(preset_names())}, or a path to a .json file"
        )
    if not isinstance(data, dict):
        raise UserError(f"config {name_or_path!r} must be a JSON object of settings by their flat names")
    return data


def resolve_args(
    args: PPOArgs | None = None, config: str | None = None, *, named: dict | None = None, **overrides
) -> PPOArgs:
    """Layer the defaults: field defaults < the algorithm's defaults < preset (``config``) < ``overrides``.
    A ``config`` file's env factory, ``module:`` env id or encoder class is used only where the user names it
    again (``named``, setting -> value; default: ``overrides``), docs/SECURITY.md.

    With ``args`` given, it is the base instead and only ``overrides`` are applied on top.
    """
    if args is not None:
        if config is not None:
            raise UserError("give either a PPOArgs or a config preset to layer on the defaults, not both")
        return args.replace(**overrides)
    preset = load_preset(config) if config else {}
    if config and is_preset_file(config):  # a file may come from anyone: it names no code the user did not
        named = overrides if named is None else named
        names = {k: preset.get(k) for k in trust.SETTINGS}
        if trust.module_of("algo", names["algo"]) is None:  # a name of the table: chosen over, as any setting
            del names["algo"]
        trust.check(f"config {config!r}", names, named=named, switch=False)
    algo = overrides.get("algo", preset.get("algo", "ppo"))
    algo = get_algorithm(register_algorithm(algo) if isinstance(algo, Algorithm) else algo)
    return PPOArgs.of(**{**algo.defaults, **preset, **overrides})


def parse_env_kwargs(text: str | None, flag: str = "--env-kwargs") -> dict | None:
    """``--env-kwargs``' JSON object as a dict (None or empty text: none)."""
    if text is None or not text.strip():
        return None
    words = f"{flag} must be a JSON object such as '{{\"size\": 8}}', got {text!r}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{words} ({e})") from None
    if not isinstance(value, dict):
        raise UserError(words)
    return value


def show_value(value) -> str:
    """A setting's value in a label or a directory name: ``64x64`` for a tuple such as hidden_sizes."""
    return "x".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
