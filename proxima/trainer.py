"""The training loop: rollout, advantages, update, log; repeated ``num_updates`` times, then a checkpoint."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from proxima import update as updates
from proxima.advantages import estimate_advantages
from proxima.agent import Agent, space_to_json
from proxima.checkpoint import load_module_state, read_checkpoint, read_json, write_checkpoint, write_json
from proxima.config import PPOArgs, resolve_args
from proxima.distributions import make_head
from proxima.envs import make_vec_env
from proxima.errors import NonFiniteError, TrainingInterrupted, UserError
from proxima.evaluate import run_episodes
from proxima.health import HealthMonitor, first_non_finite_in_rollout
from proxima.logger import RunLogger
from proxima.losses import explained_variance
from proxima.networks import ActorCritic, NetworkSpec
from proxima.optim import LinearLR, make_adam
from proxima.plotting import plot_runs
from proxima.progress import ProgressReport
from proxima.rollout import RolloutCollector

# torch's own choice for this machine, read before any run changes it
DEFAULT_THREADS = torch.get_num_threads()


def set_threads(args: PPOArgs, threads: int | None = None) -> None:
    """Set torch's CPU threads for this run, always explicitly: the thread count changes the order of float
    sums, so a run must not inherit whatever an earlier run in the same process left (``threads``: a resumed
    run's saved count, for the same numbers on another machine)."""
    if threads is None:
        # Measured on 2 cores: CartPole defaults (minibatch 128) run at 10.0k steps/s with 1 thread, 8.3k with
        # 2; a 512-sample minibatch step takes 2.04 ms with 1 thread, 1.71 ms with 2.
        threads = args.torch_threads or (1 if args.minibatch_size < 512 else DEFAULT_THREADS)
    torch.set_num_threads(threads)


def seed_everything(seed: int, deterministic: bool) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = deterministic


def default_run_dir(args: PPOArgs) -> str:
    env_name = args.env_id.replace("/", "_").replace(":", "_")
    return os.path.join("runs", f"{env_name}__{args.exp_name}__{args.seed}__{int(time.time())}")


def _check_run_dir_free(run_dir: str) -> None:
    if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir)):
        raise UserError(f"run directory {run_dir!r} already exists and is not empty; give a new --run-dir")


CHECKPOINT = "checkpoint.safetensors"
CHECKPOINT_FORMAT, CHECKPOINT_VERSION = "proxima-checkpoint", 1


def train(args: PPOArgs | None = None, **overrides) -> Agent:
    """Train as ``proxima train`` does and return the trained agent.

    Takes a ``PPOArgs``, keyword overrides of its fields, or both: ``train(env_id="Acrobot-v1", seed=2)``,
    ``train(algo="vpg")``, ``train(config="seed3-ppo-pendulum-discrete", seed=2)``. Without ``args``, the
    overrides are layered on the algorithm's defaults and the preset as on the command line.
    ``train(resume=RUN_DIR)`` continues an interrupted run instead (see ``resume``).
    """
    args = resolve_args(args, **overrides)
    if args.resume is not None:
        return resume(args.resume, quiet=args.quiet)
    args.validate()
    run_dir = args.run_dir or default_run_dir(args)
    _check_run_dir_free(run_dir)
    device = _setup(args)
    # Built before the run directory, so a bad env id or unsupported space leaves nothing behind.
    envs = _make_envs(args, run_dir, device)
    try:
        os.makedirs(run_dir, exist_ok=True)
        write_json(os.path.join(run_dir, "config.json"), args.to_json())
        return _Run(args, envs, run_dir, device).train()
    finally:
        envs.close()


def resume(run_dir: str, quiet: bool = False) -> Agent:
    """Continue the run in ``run_dir`` from its last checkpoint, with the settings in its ``config.json``.

    On native envs the continuation is exact: the final weights and every ``metrics.jsonl`` value except the
    times are those of a run that was never interrupted. Gymnasium envs cannot be saved without pickling, so
    there the envs start fresh episodes and the rest of the run differs from an uninterrupted one.
    """
    if not os.path.isdir(run_dir):
        raise UserError(
            f"run directory {run_dir!r} does not exist; give a directory written by `proxima train`"
        )
    saved = read_json(os.path.join(run_dir, "config.json"))
    saved.setdefault("norm_value", False)  # a run from before value normalization had seed 000's critic
    args = PPOArgs.from_json(
        {**saved, "run_dir": run_dir, "quiet": quiet, "resume": None}, f"{run_dir}/config.json"
    )
    args.validate()
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.exists(path):
        raise UserError(
            f"{path} is missing: the run stopped before its first checkpoint (see --checkpoint-every)"
        )
    tensors, meta = read_checkpoint(path)
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") != CHECKPOINT_VERSION:
        raise UserError(f"{path} is not a proxima checkpoint (format version {CHECKPOINT_VERSION})")
    if meta.get("finished"):
        raise UserError(f"the run in {run_dir} already finished (update {meta['update']}); nothing to resume")
    device = _setup(args, meta.get("torch_threads"))
    # Gymnasium's recorder numbers a new process's episodes from 0 again: keep the earlier videos apart.
    envs = _make_envs(args, run_dir, device, video_subdir=f"resumed-after-update-{meta['update']}")
    try:
        run = _Run(args, envs, run_dir, device)
        run.load_state_dict(tensors, meta, path)
        return run.train()
    finally:
        envs.close()


def _setup(args: PPOArgs, threads: int | None = None) -> torch.device:
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    set_threads(args, threads)
    seed_everything(args.seed, args.torch_deterministic)
    return device


def _make_envs(args: PPOArgs, run_dir: str, device: torch.device, video_subdir: str = ""):
    return make_vec_env(
        args.env_id,
        args.num_envs,
        backend=args.env_backend,
        seed=args.seed,
        asynchronous=args.async_envs,
        device=device,
        video_dir=os.path.join(run_dir, "videos", video_subdir) if args.capture_video else None,
    )


def network_spec(args: PPOArgs, envs, head) -> NetworkSpec:
    return NetworkSpec(
        obs_dim=int(np.prod(envs.single_observation_space.shape)),
        logits_dim=head.logits_dim,
        hidden_sizes=args.hidden_sizes,
        activation=args.activation,
        shared=args.shared_network,
        critic_hidden_sizes=args.critic_hidden_sizes,
        critic_activation=args.critic_activation,
        has_critic=args.algo != "reinforce",
        norm_obs=args.norm_obs,
        norm_reward=args.norm_reward,
        norm_value=args.norm_value,
        clip_obs=args.clip_obs,
        clip_reward=args.clip_reward,
    )


class _Run:
    """One training run: its parts, its counters, and the loop over updates.

    ``state_dict`` captures everything the rest of the run depends on (weights and normalization statistics,
    optimizer and schedule, RNG states, the envs mid-episode, the counters, where the logs end), so that a
    checkpoint continues exactly where it was taken.
    """

    def __init__(self, args: PPOArgs, envs, run_dir: str, device: torch.device):
        self.args, self.envs, self.run_dir, self.device = args, envs, run_dir, device
        head = make_head(envs.single_action_space)
        self.model = ActorCritic(network_spec(args, envs, head), head).to(device)
        self.optimizer = make_adam(
            self.model.param_groups(args.learning_rate, args.value_learning_rate), args.learning_rate
        )
        self.scheduler = LinearLR(self.optimizer, args.num_updates) if args.anneal_lr else None
        self.collector = RolloutCollector(envs, args.num_steps, args.gamma, head, seed=args.seed)
        self.agent = Agent(self.model, args.env_id, envs.single_observation_space, envs.single_action_space)
        self.health = HealthMonitor(
            args.num_updates,
            discrete=isinstance(envs.single_action_space, gym.spaces.Discrete),
            action_dim=int(np.prod(head.action_shape or (1,))),
            has_critic=self.model.critic is not None,
        )
        self.update = self.global_step = 0
        self.elapsed = 0.0
        self.finished = False
        self.log_offsets: dict | None = None  # where a resumed run's logs continue
        self.checkpoint_update: int | None = None  # the last checkpoint's update
        self.notes: list[str] = []  # shown when training starts
        self.wandb_id: str | None = None
        self.best_return: float | None = None  # with --save-best: the eval_return of RUN_DIR/best
        self.critic_spread: tuple[float, float] = (1.0, 1.0)  # the last batch's, for the health checks

    def iterate(self) -> tuple[dict, list[float], list[int]]:
        """One update: a rollout, its advantages, the gradient steps. Returns the update's record (without
        times) and the returns and lengths of the episodes that ended in the rollout."""
        args = self.args
        learning_rate = self.optimizer.param_groups[0]["lr"]
        next_value, next_done = self.collector.collect(self.model)
        buf = self.collector.buffer
        bad = first_non_finite_in_rollout(buf)
        if bad is not None:
            self._stop_non_finite(bad, self.update + 1)
        advantages = estimate_advantages(
            args.advantage,
            buf.rewards,
            buf.values,
            buf.dones,
            next_value,
            next_done,
            args.gamma,
            args.gae_lambda,
        )
        batch = buf.flatten(advantages, advantages + buf.values)  # returns = advantages + values
        stats = updates.update(self.model, self.optimizer, batch, args)
        if self.scheduler is not None:
            self.scheduler.step()
        self.update += 1
        self.global_step += args.batch_size
        episode_returns, episode_lengths = buf.finished_episodes()
        target_std = batch.returns.std()
        self.critic_spread = (  # of the targets around their size, and of the predictions against the targets
            float(target_std / batch.returns.abs().mean().clamp_min(1e-8)),
            float(batch.values.std() / target_std.clamp_min(1e-8)),
        )
        record = {
            "global_step": self.global_step,
            "learning_rate": learning_rate,
            **stats,
            "explained_variance": explained_variance(batch.values, batch.returns),
            "episodic_return": float(np.mean(episode_returns)) if episode_returns else None,
            "episodic_length": float(np.mean(episode_lengths)) if episode_lengths else None,
        }
        return record, episode_returns, episode_lengths

    def train(self) -> Agent:
        args, run_dir = self.args, self.run_dir
        # before TensorBoard, which it mirrors; a resumed run continues the same W&B run
        wandb_run = _init_wandb(args, run_dir, self.wandb_id) if args.track else None
        self.wandb_id = wandb_run.id if wandb_run is not None else None
        self.logger = RunLogger(run_dir, args.to_json(), resume_from=self.log_offsets)
        report = ProgressReport(args.num_updates * args.batch_size, args.num_updates, quiet=args.quiet)
        evaluator = _Evaluator(args, self.device) if args.eval_every else None
        for note in self.notes:
            report.message(note)
        start = time.perf_counter() - self.elapsed
        try:
            with _deferred_sigint() as interrupted:
                while self.update < args.num_updates and not self.finished:
                    record, episode_returns = self._logged_iteration(start, evaluator)
                    for warning in self.health.check(self.update, record, *self.critic_spread):
                        report.message(f"warning: {warning.text} (see docs/HEALTH.md, {warning.kind})")
                        self.logger.text(f"health/{warning.kind}", warning.text, self.global_step)
                    report.update(self.update, record, episode_returns, force=self.finished)
                    if self.finished:
                        report.message(
                            f"stopping: eval_return {record['eval_return']:.1f} >= stop_return {args.stop_return}"
                        )
                    if interrupted() or (args.checkpoint_every and self.update % args.checkpoint_every == 0):
                        self.save_checkpoint()
                    if interrupted():
                        raise TrainingInterrupted(run_dir, self.update, args.num_updates)
            self.finished = True
            self.agent.save(run_dir, global_step=self.global_step)
            self.save_checkpoint()  # marked finished: there is nothing left to resume
            report.close()
            for line in self.health.summary(self.update):
                report.message(f"health: {line}")
            if args.plot:
                _plot_curve(run_dir, report)
            report.message(f"saved agent to {run_dir}")
        finally:
            report.close()
            self.logger.close()
            if wandb_run is not None:
                wandb_run.finish()
            if evaluator is not None:
                evaluator.envs.close()
        return self.agent

    def _logged_iteration(self, start: float, evaluator: _Evaluator | None) -> tuple[dict, list[float]]:
        """``iterate``, then the times and the periodic evaluation added to its record, which is logged.
        Stops the run if the update met a NaN or infinity (after logging it, for the post-mortem)."""
        args = self.args
        record, episode_returns, episode_lengths = self.iterate()
        self.elapsed = time.perf_counter() - start
        record = {
            "global_step": self.global_step,
            "time_s": self.elapsed,
            "sps": self.global_step / self.elapsed,
            **record,
        }
        if evaluator is not None and self.update % args.eval_every == 0:
            record["eval_return"] = float(evaluator(self.model).mean())
            self.finished = args.stop_return is not None and record["eval_return"] >= args.stop_return
            if args.save_best and (self.best_return is None or record["eval_return"] > self.best_return):
                self.best_return = record["eval_return"]
                best_dir = os.path.join(self.run_dir, "best")
                os.makedirs(best_dir, exist_ok=True)
                self.agent.save(best_dir, global_step=self.global_step, eval_return=self.best_return)
        self.logger.log_update(record)
        self.logger.log_episodes(self.global_step, episode_returns, episode_lengths)
        if "non_finite" in record:
            self._stop_non_finite(record["non_finite"], self.update)
        return record, episode_returns

    def _stop_non_finite(self, where: str, update: int) -> None:
        kept = (
            f"the last good checkpoint, from update {self.checkpoint_update}, is {self.run_dir}/{CHECKPOINT}"
            if self.checkpoint_update is not None
            else "no checkpoint had been written yet"
        )
        raise NonFiniteError(
            f"NaN or infinity in the {where} at update {update}; training stopped and {kept}"
        )

    # --- checkpoints ------------------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, Tensor], dict]:
        tensors = {f"model/{k}": v for k, v in self.model.state_dict().items()}
        optim = self.optimizer.state_dict()
        for index, state in optim["state"].items():
            tensors.update({f"optimizer/{index}/{k}": v for k, v in state.items()})
        tensors["rng/torch"] = torch.get_rng_state()
        if self.device.type == "cuda":
            tensors["rng/cuda"] = torch.cuda.get_rng_state(self.device)
        collector = self.collector.state_dict()
        tensors.update({f"collector/{k}": v for k, v in (collector or {}).items()})
        np_state = np.random.get_state()
        meta = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "update": self.update,
            "global_step": self.global_step,
            "elapsed_s": self.elapsed,
            "finished": self.finished,
            "envs_saved": collector is not None,
            "observation_space": space_to_json(self.envs.single_observation_space),
            "action_space": space_to_json(self.envs.single_action_space),
            "optimizer_groups": optim["param_groups"],
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "numpy_rng": [np_state[0], np_state[1].tolist(), *np_state[2:]],
            "python_rng": random.getstate(),
            "health": vars(self.health),
            "logs": self.logger.offsets(self.global_step),
            "wandb_id": self.wandb_id,
            "torch_threads": torch.get_num_threads(),
            "best_return": self.best_return,
        }
        return tensors, meta

    def save_checkpoint(self) -> None:
        write_checkpoint(os.path.join(self.run_dir, CHECKPOINT), *self.state_dict())
        self.checkpoint_update = self.update

    def load_state_dict(self, tensors: dict[str, Tensor], meta: dict, path: str) -> None:
        spaces = {
            k: space_to_json(getattr(self.envs, f"single_{k}")) for k in ("observation_space", "action_space")
        }
        for key, space in spaces.items():
            if meta.get(key) != space:
                raise UserError(
                    f"{path} was written for another env: its {key} is {meta.get(key)}, {self.args.env_id}'s is {space}"
                )
        part = lambda prefix: {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}  # noqa: E731
        load_module_state(self.model, part("model/"), path)
        optim_state: dict = {}
        for key, value in part("optimizer/").items():
            index, name = key.split("/")
            optim_state.setdefault(int(index), {})[name] = value
        try:
            self.optimizer.load_state_dict({"state": optim_state, "param_groups": meta["optimizer_groups"]})
            if self.scheduler is not None:
                self.scheduler.load_state_dict(meta["scheduler"])
        except (KeyError, ValueError, TypeError) as e:
            raise UserError(
                f"{path} has optimizer state that does not fit this network ({e}); the checkpoint is corrupt"
            ) from None
        torch.set_rng_state(tensors["rng/torch"])
        if "rng/cuda" in tensors and self.device.type == "cuda":
            torch.cuda.set_rng_state(tensors["rng/cuda"], self.device)
        name, keys, *rest = meta["numpy_rng"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), *rest))
        version, internal, gauss = meta["python_rng"]
        random.setstate((version, tuple(internal), gauss))
        if meta["envs_saved"]:
            self.collector.load_state_dict(part("collector/"))
        else:  # new episodes, from a seed the run has not used yet
            self.collector.next_obs = self.envs.reset(seed=self.args.seed + meta["global_step"])
        vars(self.health).update(meta["health"])
        self.update, self.global_step, self.elapsed = meta["update"], meta["global_step"], meta["elapsed_s"]
        self.notes.append(f"resuming {self.run_dir} after update {self.update} of {self.args.num_updates}")
        if not meta["envs_saved"]:
            self.notes.append(
                "note: Gymnasium envs cannot be saved without pickling, so they start new episodes; the rest of "
                "this run will differ from an uninterrupted one (native envs resume exactly)"
            )
        self.log_offsets = meta["logs"]
        self.wandb_id = meta.get("wandb_id")
        self.best_return = meta.get("best_return")
        self.checkpoint_update = self.update


@contextlib.contextmanager
def _deferred_sigint():
    """While training, Ctrl-C only sets a flag, which the loop reads after each update to checkpoint at a
    clean boundary. A second Ctrl-C interrupts at once, as usual."""
    hit = []
    if threading.current_thread() is not threading.main_thread():  # signals can only be caught there
        yield lambda: False
        return

    def handler(signum, frame):
        if hit:
            raise KeyboardInterrupt
        hit.append(signum)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(hit)
    finally:
        signal.signal(signal.SIGINT, previous)


def _plot_curve(run_dir: str, report: ProgressReport) -> None:
    try:
        plot_runs(
            {os.path.basename(os.path.normpath(run_dir)): [run_dir]},
            os.path.join(run_dir, "learning_curve.png"),
        )
    except UserError as e:  # matplotlib is an extra; the run itself is complete
        report.message(f"no learning_curve.png: {e}")


class _Evaluator:
    """Deterministic evaluation on its own envs (same backend as training, seeds apart from the training
    envs'), each time from the same starting states so that evaluations are comparable."""

    def __init__(self, args: PPOArgs, device: torch.device):
        self.envs = make_vec_env(args.env_id, args.eval_episodes, backend=args.env_backend, device=device)
        self.seed = args.seed + 1_000_000

    def __call__(self, model: ActorCritic):
        return run_episodes(model, self.envs, self.envs.num_envs, deterministic=True, seed=self.seed)


def _init_wandb(args: PPOArgs, run_dir: str, run_id: str | None = None):
    """Start a Weights & Biases run that mirrors the TensorBoard scalars (offline with WANDB_MODE=offline)."""
    try:
        import wandb
    except ImportError:
        raise UserError("--track needs Weights & Biases: pip install 'proxima[track]'") from None
    return wandb.init(
        project=args.wandb_project_name,
        entity=args.wandb_entity,
        sync_tensorboard=True,
        config=args.to_json(),
        name=os.path.basename(os.path.normpath(run_dir)),
        dir=run_dir,
        save_code=False,
        id=run_id,
        resume="allow" if run_id else None,
    )
