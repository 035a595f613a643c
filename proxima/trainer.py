"""The training loop: rollout, advantages, update, log; repeated ``num_updates`` times, then a checkpoint."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import torch

from proxima import update as updates
from proxima.advantages import estimate_advantages
from proxima.agent import Agent
from proxima.checkpoint import write_json
from proxima.config import PPOArgs, resolve_args
from proxima.distributions import make_head
from proxima.envs import make_vec_env
from proxima.errors import UserError
from proxima.evaluate import run_episodes
from proxima.logger import RunLogger
from proxima.losses import explained_variance
from proxima.networks import ActorCritic, NetworkSpec
from proxima.optim import LinearLR, make_adam
from proxima.progress import ProgressReport
from proxima.rollout import RolloutCollector


def set_threads(args: PPOArgs) -> None:
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    elif args.minibatch_size < 512:
        # Measured on 2 cores: CartPole defaults (minibatch 128) run at 10.0k steps/s with 1 thread, 8.3k with
        # 2; a 512-sample minibatch step takes 2.04 ms with 1 thread, 1.71 ms with 2.
        torch.set_num_threads(1)


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


def train(args: PPOArgs | None = None, **overrides) -> Agent:
    """Train as ``proxima train`` does and return the trained agent.

    Takes a ``PPOArgs``, keyword overrides of its fields, or both: ``train(env_id="Acrobot-v1", seed=2)``,
    ``train(algo="vpg")``, ``train(config="seed3-ppo-pendulum-discrete", seed=2)``. Without ``args``, the
    overrides are layered on the algorithm's defaults and the preset as on the command line.
    """
    args = resolve_args(args, **overrides)
    args.validate()
    run_dir = args.run_dir or default_run_dir(args)
    _check_run_dir_free(run_dir)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    set_threads(args)
    seed_everything(args.seed, args.torch_deterministic)
    video_dir = os.path.join(run_dir, "videos") if args.capture_video else None
    # Built before the run directory, so a bad env id or unsupported space leaves nothing behind.
    envs = make_vec_env(
        args.env_id,
        args.num_envs,
        backend=args.env_backend,
        seed=args.seed,
        asynchronous=args.async_envs,
        device=device,
        video_dir=video_dir,
    )
    try:
        os.makedirs(run_dir, exist_ok=True)
        write_json(os.path.join(run_dir, "config.json"), args.to_json())
        return _train(args, envs, run_dir, device)
    finally:
        envs.close()


def _train(args: PPOArgs, envs, run_dir: str, device: torch.device) -> Agent:
    head = make_head(envs.single_action_space)
    spec = NetworkSpec(
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
        clip_obs=args.clip_obs,
        clip_reward=args.clip_reward,
    )
    model = ActorCritic(spec, head).to(device)
    optimizer = make_adam(
        model.param_groups(args.learning_rate, args.value_learning_rate), args.learning_rate
    )
    scheduler = LinearLR(optimizer, args.num_updates) if args.anneal_lr else None
    collector = RolloutCollector(envs, args.num_steps, args.gamma, head, seed=args.seed)
    wandb_run = _init_wandb(args, run_dir) if args.track else None  # before TensorBoard, which it mirrors
    logger = RunLogger(run_dir, args.to_json())
    agent = Agent(model, args.env_id, envs.single_observation_space, envs.single_action_space)
    report = ProgressReport(args.num_updates * args.batch_size, args.num_updates, quiet=args.quiet)
    evaluator = _Evaluator(args, device) if args.eval_every else None
    start, global_step = time.perf_counter(), 0
    try:
        for update in range(1, args.num_updates + 1):
            learning_rate = optimizer.param_groups[0]["lr"]
            next_value, next_done = collector.collect(model)
            buf = collector.buffer
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
            stats = updates.update(model, optimizer, batch, args)
            if scheduler is not None:
                scheduler.step()
            global_step += args.batch_size
            episode_returns, episode_lengths = buf.finished_episodes()
            elapsed = time.perf_counter() - start
            record = {
                "global_step": global_step,
                "time_s": elapsed,
                "sps": global_step / elapsed,
                "learning_rate": learning_rate,
                **stats,
                "explained_variance": explained_variance(batch.values, batch.returns),
                "episodic_return": float(np.mean(episode_returns)) if episode_returns else None,
                "episodic_length": float(np.mean(episode_lengths)) if episode_lengths else None,
            }
            solved = False
            if args.eval_every and update % args.eval_every == 0:
                record["eval_return"] = float(evaluator(model).mean())
                solved = args.stop_return is not None and record["eval_return"] >= args.stop_return
            logger.log_update(record)
            logger.log_episodes(global_step, episode_returns, episode_lengths)
            report.update(update, record, episode_returns, force=solved)
            if solved:
                report.message(
                    f"stopping: eval_return {record['eval_return']:.1f} >= stop_return {args.stop_return}"
                )
                break
        agent.save(run_dir, global_step=global_step)
        report.close()
        report.message(f"saved agent to {run_dir}")
    finally:
        report.close()
        logger.close()
        if wandb_run is not None:
            wandb_run.finish()
        if evaluator is not None:
            evaluator.envs.close()
    return agent


class _Evaluator:
    """Deterministic evaluation on its own envs (same backend as training, seeds apart from the training
    envs'), each time from the same starting states so that evaluations are comparable."""

    def __init__(self, args: PPOArgs, device: torch.device):
        self.envs = make_vec_env(args.env_id, args.eval_episodes, backend=args.env_backend, device=device)
        self.seed = args.seed + 1_000_000

    def __call__(self, model: ActorCritic):
        return run_episodes(model, self.envs, self.envs.num_envs, deterministic=True, seed=self.seed)


def _init_wandb(args: PPOArgs, run_dir: str):
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
    )
