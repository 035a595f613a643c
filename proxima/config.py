"""``PPOArgs``: every setting of a run, one typed dataclass whose field docs become ``--help``.

Names and defaults of the seed's fields follow seed 000 (and CleanRL's ppo.py); proxima adds the rest.
The fields are grouped by concern (env, network, algorithm, run). Derived sizes are properties, never
written back into the object.

Where a value comes from, lowest priority first: the field defaults here, then the chosen algorithm's
defaults (``proxima.algorithms``), then a preset (``config``), then explicit flags or keyword arguments
(``resolve_args``). ``config`` and ``resume`` are instructions, not settings: they are not fields and are
not written to ``config.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from proxima.algorithms import get_algorithm
from proxima.encoders import PRECISIONS, class_path
from proxima.errors import UserError
from proxima.networks import check_activation


@dataclass
class PPOArgs:
    """Every setting of a run. The fields are grouped by concern (``GROUPS``); the flags stay flat."""

    # --- env: the environment
    env_id: str = "CartPole-v1"
    """the id of the environment: any registered Gymnasium id, or module:EnvName-v0 to import module first (from
    the working directory too); for an env given to train(env=...) as an object, a label that names it"""
    env_kwargs: dict | None = None
    """keyword arguments of the env's constructor, as JSON: --env-kwargs '{"size": 8}' (passed to gymnasium.make,
    or to the function given as env=; the native backend takes none)"""
    env_factory: str | None = None
    """module:name of a class or function that returns the env, called with --env-kwargs once per env (instead of
    --env-id); train(env=...) records it for an env object, or <lambda>, <functools.partial>, <VectorEnv>,
    <callable> for one that config.json cannot name (give it again: proxima.resume(RUN_DIR, env=...)); docs/ENVS.md"""
    num_envs: int = 4
    """the number of parallel game environments"""
    env_backend: str = "auto"
    """native: proxima's batched torch envs (classic control, PendulumDiscrete, probes); gymnasium: Gymnasium's
    vector envs, any id; auto: native where it exists (and without --async-envs or --capture-video); or the
    name of a backend registered with proxima.envs.register_backend"""
    async_envs: bool = False
    """run each environment in its own process (Gymnasium's AsyncVectorEnv) instead of in-process"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (into the run directory's `videos` folder)"""
    rollout_workers: int = 0
    """0: the envs step in this process; N: N Ray actors each own num_envs / N envs and collect their slice of
    every rollout (needs the ray extra; see docs/SCALING.md)"""

    # --- network: the networks and normalization
    encoder: str = "auto"
    """what turns observations into features for the MLPs: auto (flatten-mlp for vectors, nature-cnn for images,
    multi-input for Dict and other spaces), the name of an encoder registered with
    proxima.encoders.register_encoder, or a class as module:ClassName (from Python, the class itself);
    docs/NETWORKS.md"""
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
    shared_network: bool = False
    """let the actor and critic share one hidden trunk instead of two separate networks"""
    norm_obs: bool = False
    """normalize observations by their running mean and std, then clip them (saved with the model)"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return, then clip them"""
    norm_value: bool = True
    """let the critic predict its targets standardized by their running mean and std (values stay in reward
    units); --no-norm-value gives seed 000's critic, which saturates on CartPole's returns of about 100"""
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
    action_dist: Literal["gaussian", "beta"] = "gaussian"
    """the policy's distribution over Box actions: gaussian (a diagonal Gaussian whose draws the env clips to the
    bounds) or beta (a Beta per component, stretched to the bounds, which must be finite: every draw is a valid
    action, and the log-probs are those of the actions taken). The other action spaces have one each"""
    precision: Literal["float32", "bfloat16", "auto"] = "float32"
    """what a CNN encoder's convolutions compute in: bfloat16 runs them under autocast (float32 weights,
    gradients, 512-unit layer, heads and losses); auto picks bfloat16 where the hardware computes it natively (a
    CPU with AVX512-BF16 or AMX, a GPU of compute capability 8.0+) and float32 elsewhere, and float32 for
    agents without a CNN. docs/ATARI.md has the speed and learning measured"""

    # --- algorithm: the algorithm and its optimization
    algo: str = "ppo"
    """the algorithm: ppo (clipped surrogate), vpg (policy gradient with a learned value baseline) or
    reinforce (policy gradient on rewards-to-go, no critic); any name in proxima.algorithms.ALGORITHMS"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    value_learning_rate: float | None = None
    """give the value network its own optimizer with this learning rate (default: one optimizer for both)"""
    anneal_lr: bool = True
    """toggles linear learning-rate annealing to 0 over the run"""
    learning_rate_end: float | None = None
    """anneal the learning rate linearly to this instead of 0 over the run (--anneal-lr is this with 0; given,
    it schedules the rate with or without --anneal-lr); docs/TRAINING.md"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    advantage: Literal["gae", "returns"] = "gae"
    """the advantage estimator: gae (GAE(lambda)) or returns (discounted rewards-to-go minus V(s))"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles per-minibatch advantage normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_coef_end: float | None = None
    """change the clipping coefficient linearly from --clip-coef to this over the run (None: constant)"""
    clip_vloss: bool = False
    """toggles the clipped value loss of the PPO paper"""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    ent_coef_end: float | None = None
    """change the entropy coefficient linearly from --ent-coef to this over the run (None: constant)"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping (0 turns clipping off)"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off by default)"""
    action_std_end: float | None = None
    """Box actions: cap the Gaussian policy's standard deviation under a ceiling that falls from 1 (its initial
    value) to this over the run, evenly in log std; the learned std may sit lower, never higher. The env clips
    actions to their bounds, so a wider Gaussian costs the policy nothing there and its std tends to grow; the
    ceiling keeps the late policy precise (BipedalWalker, docs/journal/benchmarks.md). The fall spans --total-timesteps,
    so a shorter run falls faster, and one stopped early by --stop-return ends above this. Off by default"""

    # --- run: the run: seeding, devices, logging, evaluation, checkpoints
    exp_name: str = "ppo"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True` and torch picks deterministic algorithms"""
    cuda: bool = True
    """if toggled, cuda will be used when a GPU is present (the CPU otherwise)"""
    torch_threads: int = 0
    """torch's CPU threads; 0 picks 1 for minibatches under 512 samples (where threads cost more than they
    save) and torch's default otherwise"""
    run_dir: str | None = None
    """where to write the run (default: runs/{env_id}__{exp_name}__{seed}__{unix time})"""
    init_from: str | None = None
    """start from the agent saved in this run directory (or RUN_DIR/best): its weights and normalization
    statistics, with a fresh optimizer and counters; its spaces and network settings must be this run's"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "mlab2_ppo"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    eval_every: int = 0
    """every this many updates, evaluate the deterministic policy on --eval-episodes fresh episodes of the
    training backend and log eval_return (0: never)"""
    eval_episodes: int = 32
    """episodes per evaluation during training, one env each"""
    stop_return: float | None = None
    """stop training as soon as an evaluation's mean return reaches this (needs --eval-every)"""
    save_best: bool = False
    """also keep the agent with the best eval_return so far in RUN_DIR/best (needs --eval-every); the run
    directory itself always holds the final agent"""
    rescore_best: int = 0
    """with --save-best: also keep the agents of the K best evaluations, score each of them at the end of
    training on --rescore-episodes more fresh episodes, and keep the highest in RUN_DIR/best (a few evaluation
    episodes cannot see a policy that fails now and then; 0: off)"""
    rescore_episodes: int = 100
    """episodes per agent for --rescore-best, seeded apart from the evaluations' and `proxima eval`'s"""
    checkpoint_every: int = 10
    """save the whole training state to RUN_DIR/checkpoint.safetensors every this many updates (0: only at the
    end and on Ctrl-C), so that `--resume` can continue the run after a crash"""
    plot: bool = True
    """write RUN_DIR/learning_curve.png (episodic return against env steps) at the end (needs the plot extra)"""
    report: bool = True
    """write RUN_DIR/report.html (proxima report: one self-contained page of the run) every 30 s while training
    and at the end; an open page reloads itself until the run ends"""
    log_info: tuple[str, ...] = ()
    """info keys whose mean at the episodes' ends (bools as 0/1) is logged each update as info/KEY, to
    metrics.jsonl, TensorBoard (charts/info/KEY) and the report; Gymnasium-backend envs report infos, native
    envs none (docs/CALLBACKS.md)"""
    quiet: bool = False
    """no console output (no progress bar or progress lines); the run directory still gets everything"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, source: str = "settings") -> PPOArgs:
        """From ``to_json``'s output (a run's ``config.json``) or a preset's settings."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise UserError(
                f"{source} has unknown settings {unknown}; the accepted names are PPOArgs' fields"
            )
        tuples = {"hidden_sizes", "critic_hidden_sizes", "log_info"}
        data = {k: tuple(v) if k in tuples and isinstance(v, list | tuple) else v for k, v in data.items()}
        return cls(**data)

    def validate(self) -> PPOArgs:
        """Raise a ``UserError`` naming the first bad value and what is accepted; return self if all is well."""
        get_algorithm(self.algo)  # a UserError naming the accepted ones
        positive_ints = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
        if self.value_norm_horizon < 0:
            raise UserError(
                f"value_norm_horizon must be 0 (every target counts) or a positive number of updates, got {self.value_norm_horizon}"
            )
        if self.torch_threads < 0:
            raise UserError(
                f"torch_threads must be 0 (automatic) or a positive integer, got {self.torch_threads}"
            )
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
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be a positive integer, got {getattr(self, name)}")
        for name in ("learning_rate", "clip_coef", "clip_obs", "clip_reward"):
            if not getattr(self, name) > 0:
                raise UserError(f"{name} must be positive, got {getattr(self, name)}")
        if self.value_learning_rate is not None and not self.value_learning_rate > 0:
            raise UserError(
                f"value_learning_rate must be positive when given, got {self.value_learning_rate}"
            )
        if self.value_learning_rate is not None and self.shared_network:
            raise UserError("value_learning_rate needs separate networks; drop it or --shared-network")
        if self.value_learning_rate is not None and not get_algorithm(self.algo).has_critic:
            raise UserError(f"{self.algo} has no value network, so value_learning_rate does not apply")
        from proxima.envs.registry import backend_names

        if self.env_backend not in backend_names():
            raise UserError(
                f"unknown env backend {self.env_backend!r}; accepted: {', '.join(backend_names())}"
            )
        for name in ("hidden_sizes", "critic_hidden_sizes"):
            sizes = getattr(self, name)
            if sizes and min(sizes) < 1:
                raise UserError(
                    f"{name} must be positive layer widths (none: the heads sit on the encoder's features), got {sizes}"
                )
        for name in ("gamma", "gae_lambda"):
            if not 0 < getattr(self, name) <= 1:
                raise UserError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("ent_coef", "vf_coef", "max_grad_norm"):
            if getattr(self, name) < 0:
                raise UserError(f"{name} must be non-negative, got {getattr(self, name)}")
        for name in ("learning_rate_end", "ent_coef_end", "clip_coef_end"):
            if getattr(self, name) is not None and not getattr(self, name) >= 0:
                raise UserError(f"{name} must be non-negative when given, got {getattr(self, name)}")
        if self.rollout_workers < 0 or (self.rollout_workers and self.num_envs % self.rollout_workers):
            raise UserError(
                f"rollout_workers must be 0 (envs in this process) or a positive divisor of num_envs={self.num_envs}, "
                f"got {self.rollout_workers}"
            )
        if self.recurrent and self.rollout_workers:
            raise UserError("--recurrent runs its envs in this process; drop it or --rollout-workers")
        if self.recurrent and self.num_envs % self.num_minibatches:
            raise UserError(
                f"num_minibatches={self.num_minibatches} does not divide num_envs={self.num_envs}: with --recurrent a "
                "minibatch is whole env sequences; pick a divisor of num_envs"
            )
        if self.lstm_hidden_size < 1 or self.lstm_layers < 1:
            raise UserError(
                f"lstm_hidden_size and lstm_layers must be positive, got {self.lstm_hidden_size} and {self.lstm_layers}"
            )
        if self.rollout_workers and self.capture_video:
            raise UserError("capture_video records envs of this process; drop it or --rollout-workers")
        if self.checkpoint_every < 0:
            raise UserError(
                f"checkpoint_every must be 0 (only at the end) or a positive number of updates, got {self.checkpoint_every}"
            )
        if self.eval_every < 0 or self.eval_episodes < 1:
            raise UserError(
                f"eval_every must be 0 or a positive number of updates and eval_episodes positive, got "
                f"{self.eval_every} and {self.eval_episodes}"
            )
        if self.stop_return is not None and not self.eval_every:
            raise UserError("stop_return needs evaluations during training: give --eval-every N as well")
        if self.save_best and not self.eval_every:
            raise UserError("save_best needs evaluations during training: give --eval-every N as well")
        if self.rescore_best < 0 or self.rescore_episodes < 1:
            raise UserError(
                f"rescore_best must be 0 (off) or a number of agents and rescore_episodes positive, got "
                f"{self.rescore_best} and {self.rescore_episodes}"
            )
        if self.rescore_best and not self.save_best:
            raise UserError("rescore_best chooses the agent in RUN_DIR/best: give --save-best as well")
        if self.env_kwargs is not None and not (
            isinstance(self.env_kwargs, dict) and all(isinstance(k, str) for k in self.env_kwargs)
        ):
            raise UserError(
                f"env_kwargs must be a dict of the env constructor's keyword arguments, got {self.env_kwargs!r}"
            )
        keys = self.log_info
        if isinstance(keys, str) or any(not isinstance(k, str) or not k.strip() for k in keys):
            raise UserError(f"log_info must be a tuple of info keys such as ('success',), got {keys!r}")
        if self.target_kl is not None and not self.target_kl > 0:
            raise UserError(f"target_kl must be positive when given, got {self.target_kl}")
        if self.action_dist == "beta" and self.action_std_end is not None:
            raise UserError(
                "--action-std-end caps a Gaussian's std; a Beta policy has none: drop one of them"
            )
        if self.action_std_end is not None and not 0 < self.action_std_end <= 1:
            raise UserError(
                f"action_std_end must be a standard deviation in (0, 1], under the initial 1, got {self.action_std_end}"
            )
        if self.batch_size % self.num_minibatches:
            raise UserError(
                f"num_minibatches={self.num_minibatches} does not divide the batch of num_envs x num_steps = "
                f"{self.batch_size}; pick a divisor of {self.batch_size}"
            )
        if self.num_updates < 1:
            raise UserError(
                f"total_timesteps={self.total_timesteps} is less than one batch of num_envs x num_steps = "
                f"{self.batch_size}; give at least {self.batch_size}"
            )
        return self


# Each group is one concern, in the order of PPOArgs' fields; ``--help`` shows one section per group.
GROUPS: dict[str, tuple[str, ...]] = {
    "env": ("env_id", "env_kwargs", "env_factory", "num_envs", "env_backend", "async_envs", "capture_video", "rollout_workers"),
    "network": (
        "encoder", "hidden_sizes", "activation", "critic_hidden_sizes", "critic_activation", "layer_norm",
        "shared_network", "norm_obs", "norm_reward", "norm_value", "value_norm_horizon", "clip_obs", "clip_reward", "recurrent", "lstm_hidden_size",
        "lstm_layers", "action_dist", "precision",
    ),
    "algorithm": (
        "algo", "total_timesteps", "learning_rate", "value_learning_rate", "anneal_lr", "learning_rate_end",
        "num_steps", "gamma", "gae_lambda", "advantage", "num_minibatches", "update_epochs", "norm_adv", "clip_coef",
        "clip_coef_end", "clip_vloss", "ent_coef", "ent_coef_end", "vf_coef", "max_grad_norm", "target_kl",
        "action_std_end",
    ),
    "run": (
        "exp_name", "seed", "torch_deterministic", "cuda", "torch_threads", "run_dir", "init_from", "track",
        "wandb_project_name", "wandb_entity", "eval_every", "eval_episodes", "stop_return", "save_best",
        "rescore_best", "rescore_episodes", "checkpoint_every", "plot", "report", "log_info", "quiet",
    ),
}  # fmt: skip

PRESET_PACKAGE = "proxima.presets"


def preset_names() -> list[str]:
    """The shipped presets' names."""
    files = resources.files(PRESET_PACKAGE).iterdir()
    return sorted(f.name[: -len(".json")] for f in files if f.name.endswith(".json"))


# Keys of a preset that describe it rather than set anything: its one-line description, and for the presets
# that `proxima solve` uses, the score that counts as solving the task ({"threshold": R, "deterministic": B}).
PRESET_METADATA = ("description", "solve")


def load_preset(name_or_path: str) -> dict:
    """The settings of a shipped preset (by name) or of a JSON file (by path), without its metadata."""
    data = read_preset(name_or_path)
    for key in PRESET_METADATA:
        data.pop(key, None)
    PPOArgs.from_json(data, source=f"config {name_or_path!r}")  # names checked here, values by validate()
    return data


def solve_presets() -> dict[str, str]:
    """Env id -> the shipped preset that solves it fastest (the presets with a ``solve`` entry)."""
    found = {}
    for name in preset_names():
        data = read_preset(name)
        if "solve" in data:
            found[data["env_id"]] = name
    return found


def read_preset(name_or_path: str) -> dict:
    if name_or_path.endswith(".json") or os.sep in name_or_path:
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
        raise UserError(f"config {name_or_path!r} must be a JSON object of PPOArgs fields")
    return data


def resolve_args(args: PPOArgs | None = None, config: str | None = None, **overrides) -> PPOArgs:
    """Layer the defaults: field defaults < the algorithm's defaults < preset (``config``) < ``overrides``.

    With ``args`` given, it is the base instead and only ``overrides`` are applied on top.
    """
    names = {f.name for f in dataclasses.fields(PPOArgs)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise UserError(
            f"unknown settings {unknown}; the accepted settings are the fields of proxima.PPOArgs"
        )
    if args is not None:
        if config is not None:
            raise UserError("give either a PPOArgs or a config preset to layer on the defaults, not both")
        return _encoder_as_path(dataclasses.replace(args, **overrides))
    preset = load_preset(config) if config else {}
    algo = get_algorithm(overrides.get("algo", preset.get("algo", "ppo")))
    return _encoder_as_path(PPOArgs.from_json({**algo.defaults, **preset, **overrides}))


def _encoder_as_path(args: PPOArgs) -> PPOArgs:
    """``encoder=`` given a class: its import path, which config.json and agent.json record."""
    if isinstance(args.encoder, type):
        return dataclasses.replace(args, encoder=class_path(args.encoder))
    return args


def parse_env_kwargs(text: str | None, flag: str = "--env-kwargs") -> dict | None:
    """``--env-kwargs``' JSON object as a dict (None or empty text: none)."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            f"{flag} must be a JSON object such as '{{\"size\": 8}}', got {text!r} ({e})"
        ) from None
    if not isinstance(value, dict):
        raise UserError(f"{flag} must be a JSON object such as '{{\"size\": 8}}', got {text!r}")
    return value


def show_value(value) -> str:
    """A setting's value in a label or a directory name: ``64x64`` for a tuple such as hidden_sizes."""
    return "x".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
