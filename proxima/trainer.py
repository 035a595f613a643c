"""The training loop: rollout → advantages → update → callbacks, ``num_updates`` times.

``train`` and ``resume`` build a ``Run`` (the parts and counters of one run) and hand it to ``loop``.
Everything else a run does (evaluation, health, logging, progress, checkpoints, the plot) is a callback
(``proxima.callbacks``), and the checkpoint's format belongs to ``proxima.checkpoint``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import shutil
import time
from collections.abc import Generator

import gymnasium as gym
import numpy as np
import torch

from proxima import checkpoint, seeding
from proxima.advantages import estimate_advantages
from proxima.agent import Agent
from proxima.algorithms import get_algorithm
from proxima.batched import deterministic_returns
from proxima.callbacks import (
    Callback,
    Checkpointing,
    Evaluation,
    Logging,
    UpdateResult,
    default_callbacks,
    wanted_infos,
)
from proxima.config import PPOArgs, resolve_args, show_value
from proxima.distributions import make_head
from proxima.encoders import check_spaces, choose_encoder, emulation_note, encoder_note, resolve_precision
from proxima.envs import make_envs
from proxima.envs.interface import AgentSpec, agent_spec, obs_layout
from proxima.envs.registry import resolve_backend
from proxima.envs.selfplay import is_selfplay_id
from proxima.envs.user import describe_env, env_source, is_env_object, load_env_factory
from proxima.errors import DiskFullError, EnvError, NonFiniteError, TrainingInterrupted, UserError
from proxima.files import (
    AGENT_JSON,
    CHECKPOINT,
    CONFIG_JSON,
    LEARNING_CURVES,
    REPORT,
    RESULTS_JSON,
    RESULTS_MD,
    SEEDS_JSON,
    VIDEOS,
    WEIGHTS,
    load_module_state,
    read_checkpoint_meta,
    read_json,
    seed_run_dirs,
    write_json,
    written_by_a_run,
)
from proxima.health import check_rollout, spreads
from proxima.losses import explained_variance
from proxima.networks import ActorCritic, NetworkSpec
from proxima.optim import make_adam
from proxima.plotting import plot_runs
from proxima.progress import ProgressReport
from proxima.report import write_report
from proxima.rollout import Collector, RecurrentCollector, RolloutCollector
from proxima.rollout_workers import RayCollector, WorkerPool
from proxima.schedules import ADJUSTABLE, VALUE_LR, Schedules
from proxima.spaces import space_to_json
from proxima.threads import choose_threads
from proxima.update import UpdateSettings, group_diagnostics, update

# what training, resuming and steps are: (run, result) after each update, then the agent
Updates = Generator["tuple[Run, UpdateResult]", None, Agent]


def train(
    args: PPOArgs | None = None,
    *,
    config: str | None = None,
    resume: str | None = None,
    resume_if_exists: bool = False,
    callbacks: list[Callback] | None = None,
    env=None,
    **overrides,
) -> Agent:
    """Train as ``proxima train`` does and return the trained agent.

    Takes a ``PPOArgs``, keyword overrides of its fields, or both: ``train(env_id="Acrobot-v1", seed=2)``,
    ``train(algo="vpg")``, ``train(config="pendulum-discrete-single-env", seed=2)``. Without ``args``, the
    overrides are layered on the algorithm's defaults and the preset as on the command line.
    ``callbacks``: your own ``proxima.callbacks.Callback`` objects, run after each update.
    ``train(resume=RUN_DIR)`` continues an interrupted run instead (see ``resume``); ``init_from=RUN_DIR``
    starts from that run's agent (docs/TRAINING.md).
    ``resume_if_exists``: the same call starts the run or continues it, for a job that a scheduler may start
    again (``requeue``, docs/SCALING.md); ``run_dir`` is required.
    ``env``: the env as you have it, instead of an id: a class or function that returns a ``gymnasium.Env``
    (called with ``env_kwargs`` once per sub-env), or a ``gymnasium.vector.VectorEnv`` in any autoreset mode
    (``env_id=`` takes the same); config.json records what it can of it (docs/ENVS.md).
    """
    return run_to_end(
        training(
            args,
            config=config,
            resume=resume,
            resume_if_exists=resume_if_exists,
            callbacks=callbacks,
            env=env,
            **overrides,
        )
    )


def training(
    args: PPOArgs | None = None,
    *,
    config: str | None = None,
    resume: str | None = None,
    resume_if_exists: bool = False,
    callbacks: list[Callback] | None = None,
    env=None,
    **overrides,
) -> Updates:
    """``train`` one update at a time: a generator that yields ``(run, result)`` after each update (its callbacks
    done) and returns the agent when the run ends. Stepping several of them in turn trains several runs in one
    thread, as ``proxima tune`` does for the seeds of a sample; closing one early (``close()``) ends its run
    where it stands, without the end-of-run save."""
    if resume is not None:
        if resume_if_exists:
            raise UserError(
                "give resume=RUN_DIR (continue that run) or run_dir=RUN_DIR with resume_if_exists=True (start it or "
                "continue it), not both"
            )
        others = sorted(set(overrides) - {"quiet", "total_timesteps"})
        if others or args is not None or config is not None:
            given = others[0] if others else "args" if args is not None else "config"
            raise UserError(
                f"train(resume=...) takes only quiet and total_timesteps besides callbacks (the run's config.json "
                f"holds its settings), not {given}"
            )
        return (yield from resuming(resume, callbacks=callbacks, env=env, **overrides))
    env, args, overrides = _take_env(env, args, overrides)
    args = resolve_args(args, config=config, **overrides).validate()
    env = _env_of(args, env)
    if env is not None and not args.env.env_id.startswith("object:"):  # --env-factory given, not env=
        args = args.replace(env_id=describe_env(env)[0])
    if args.run.num_seeds > 1:
        check_seeds(args, env)
    if resume_if_exists:
        agent = requeue(args, callbacks, env)
        if agent is not None:
            return agent
    if args.run.num_seeds > 1:
        return train_seeds(args, callbacks, env, requeued=resume_if_exists)
    run_dir = args.run.run_dir or default_run_dir(args)
    if not resume_if_exists:  # else the files in it are not a run's (requeue said so)
        _check_run_dir_free(run_dir)
    device, notes = _setup(args)
    existed, written, envs = os.path.isdir(run_dir), False, None
    try:
        # Built before the run directory, so a bad env id or unsupported space leaves nothing behind (but
        # --capture-video's recorder makes RUN_DIR/videos as it is built: removed below if the run never starts).
        envs = _make_envs(args, run_dir, device, env)
        check_spaces(obs_layout(envs), envs.single_action_space, args.network.encoder)
        if args.algorithm.action_std_end is not None and not isinstance(
            envs.single_action_space, gym.spaces.Box
        ):
            raise UserError(
                f"--action-std-end caps a Gaussian policy's std, for Box action spaces; {args.env.env_id} has "
                f"{envs.single_action_space}: drop --action-std-end"
            )
        # config.json keeps what auto chose, so that a resume elsewhere computes as this run did
        args = _resolve_precision(args, envs, device)
        notes += (
            emulation_note(args.network.precision, device)
            + _threads(args, envs)
            + encoder_note(args.network.encoder)
        )
        run = Run(args, envs, run_dir, device)
        run.env = env
        run.agent.env_source = env_source(args.env.env_id, args.env.env_kwargs, args.env.env_factory)
        if args.run.init_from is not None:
            _init_from(run, args.run.init_from)
        os.makedirs(run_dir, exist_ok=True)
        write_json(os.path.join(run_dir, CONFIG_JSON), args.to_json())
        written = True
        run.notes += notes
        return (yield from steps(run, default_callbacks(run, callbacks or [])))
    finally:
        if envs is not None:
            envs.close()
        if not written:
            shutil.rmtree(os.path.join(run_dir, VIDEOS), ignore_errors=True)
            if not existed and os.path.isdir(run_dir) and not os.listdir(run_dir):
                os.rmdir(run_dir)


def resume(
    run_dir: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    total_timesteps: int | None = None,
    env=None,
) -> Agent:
    """Continue the run in ``run_dir`` from its last checkpoint, with the settings in its ``config.json``.

    On native envs the continuation is exact: the final weights and every ``metrics.jsonl`` value except the
    times are those of a run that was never interrupted. Gymnasium envs cannot be saved without pickling, so
    there the envs start fresh episodes and the rest of the run differs from an uninterrupted one.

    ``total_timesteps``: continue the run, finished or not, to this many steps (written to its config.json).
    Every schedule (the annealed learning rate, ``--*-end``) then ends at the new last update: from here on
    each scheduled value is the one a run started with this ``total_timesteps`` would have (docs/TRAINING.md).

    ``env``: the env object the run was trained on, given again (``train(env=...)``): config.json cannot make a
    lambda, a ``functools.partial`` or a ``VectorEnv`` again (a class or module-level function it imports).
    """
    return run_to_end(resuming(run_dir, quiet, callbacks, total_timesteps, env))


def resuming(
    run_dir: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    total_timesteps: int | None = None,
    env=None,
) -> Updates:
    """``resume`` one update at a time, as ``training`` is ``train``."""
    if not os.path.isdir(run_dir):
        raise UserError(
            f"run directory {run_dir!r} does not exist; give a directory written by `proxima train`"
        )
    if os.path.exists(os.path.join(run_dir, SEEDS_JSON)):
        if total_timesteps is not None:
            raise UserError(
                "a batched run (--num-seeds) resumes to the steps it was started for: drop total_timesteps"
            )
        return resume_seeds(run_dir, quiet, callbacks, env)
    config_path = os.path.join(run_dir, CONFIG_JSON)
    saved = PPOArgs.from_json(read_json(config_path), config_path)
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.exists(path):
        raise UserError(
            f"{path} is missing: the run stopped before its first checkpoint (see --checkpoint-every)"
        )
    meta, states = checkpoint.read(path)
    if total_timesteps is not None:
        if total_timesteps < meta["global_step"]:
            raise UserError(
                f"total_timesteps {total_timesteps} is below the {meta['global_step']} steps the run in {run_dir} "
                f"has done; give at least {meta['global_step']}"
            )
        saved = saved.replace(total_timesteps=total_timesteps)
    elif meta["finished"]:
        raise UserError(
            f"the run in {run_dir} already finished (update {meta['update']}); to train it further, give the new "
            "total: --resume RUN_DIR --total-timesteps N"
        )
    args = saved.replace(run_dir=run_dir, quiet=quiet).validate()
    env = _env_of(args, env, what=run_dir)
    device, notes = _setup(args)
    envs = _make_envs(args, run_dir, device, env, resumed=meta)
    try:
        args = _resolve_precision(args, envs, device)  # a config.json written by hand may say auto
        notes += emulation_note(args.network.precision, device)
        notes += _threads(args, envs, saved=meta["torch_threads"])
        run = Run(args, envs, run_dir, device)
        run.env = env
        run.agent.env_source = env_source(args.env.env_id, args.env.env_kwargs, args.env.env_factory)
        run.notes += notes
        run_callbacks = default_callbacks(run, callbacks or [])
        run.callbacks = run_callbacks
        checkpoint.load(run, path, meta, states)
        if total_timesteps is not None:
            write_json(config_path, saved.to_json())
        return (yield from steps(run, run_callbacks))
    finally:
        envs.close()


def requeue(args: PPOArgs, callbacks: list[Callback] | None = None, env=None) -> Agent | list[Agent] | None:
    """``--resume-if-exists``: what to do with ``args.run.run_dir`` when a job that a scheduler may start again
    (a SLURM array task, a Kubernetes Job's pod) runs the same command each time. Returns the agent (a batched
    run's: the seeds' agents) where the run is handled here, None where ``train`` should start it.

    - A checkpoint there: the run resumes from it, exactly as ``resume`` does, with the settings of its own
      config.json. Settings given that differ from them are ignored, and one line names them: the job's command
      line is the same on every start, so a difference comes from an edited script or from new defaults after
      an upgrade, and in neither case should a half-trained run change course or fail (``--resume RUN_DIR
      --total-timesteps N`` is how a run is continued further).
    - A finished checkpoint: nothing to train; one line says so and the saved agent is returned (exit status 0:
      a job started again after its run finished must not fail).
    - No checkpoint, but the files of a run that stopped before its first one (its config.json): they are
      removed and the run starts again, as a sweep's trial does. Other files are left (a scheduler's log
      written there), and files that only a run writes, without its config.json, are refused.
    - Nothing there: the run starts.

    A batched run's directory (its seeds.json) is handled as a batched run, another run's as one seed's,
    whatever ``num_seeds`` is given.
    """
    run_dir = args.run.run_dir
    if run_dir is None:
        raise UserError(
            "--resume-if-exists needs the run's directory: give --run-dir RUN_DIR (run_dir=RUN_DIR), the same on "
            "every start of the job"
        )
    say = (lambda text: None) if args.run.quiet else (lambda text: print(text, flush=True))
    # A batched run keeps its settings in seeds.json, its seeds' runs in seedS/. The run in the directory says
    # which kind it is: a --num-seeds of the other kind is one more setting that differs.
    group = args.run.num_seeds > 1
    for name, kind in ((SEEDS_JSON, True), (CONFIG_JSON, False)):
        if os.path.exists(os.path.join(run_dir, name)):
            group = kind
            break
    config_name = SEEDS_JSON if group else CONFIG_JSON
    path = os.path.join(run_dir, CHECKPOINT)
    if os.path.exists(path):
        meta = read_checkpoint_meta(path)
        config_path = os.path.join(run_dir, config_name)
        saved = PPOArgs.from_json(read_json(config_path), config_path)
        runs = meta["runs"].values() if group else [meta]
        if all(m.get("finished") for m in runs):
            steps = "+".join(str(m["global_step"]) for m in runs)
            say(
                f"{run_dir}: the run already finished ({steps} steps); nothing to train (train it further with: "
                f"proxima train --resume {run_dir} --total-timesteps N)"
            )
            return [Agent.load(d) for d in seed_run_dirs(run_dir)] if group else Agent.load(run_dir)
        ignored = _differences(args, saved)
        if ignored:
            say(
                f"{run_dir} holds a run: it resumes with the settings of its {config_name}, and these given ones, "
                f"which differ, are ignored: {ignored}"
            )
        if group:
            return resume_seeds(run_dir, quiet=args.run.quiet, callbacks=callbacks, env=env)
        return resume(run_dir, quiet=args.run.quiet, callbacks=callbacks, env=env)
    if os.path.isdir(run_dir):
        written = sorted(name for name in os.listdir(run_dir) if written_by_a_run(name, group))
        if written and config_name not in written:
            raise UserError(
                f"{run_dir} holds {written[0]} but no {config_name}: not a run that proxima started, so "
                "--resume-if-exists leaves it alone; give another --run-dir"
            )
        if written:
            say(f"{run_dir}: the run stopped before its first checkpoint; starting it again")
            for name in written:
                target = os.path.join(run_dir, name)
                shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)
    return None


def _differences(given: PPOArgs, saved: PPOArgs) -> str:
    """The settings of ``given`` that differ from ``saved``'s, as ``name=value (the run's: value)``; the run's
    directory, the console's and what a run resolves itself (``precision`` auto) are no difference."""
    theirs = saved.flat()
    own = {"run_dir", "quiet", *(("precision",) if given.network.precision == "auto" else ())}
    return ", ".join(
        f"{name}={show_value(value)} (the run's: {show_value(theirs[name])})"
        for name, value in given.flat().items()
        if name not in own and value != theirs[name]
    )


def loop(run: Run, callbacks: list[Callback]) -> Agent:
    """Train ``run`` to its last update (or until a callback stops it); return its agent, saved in its
    directory. An env that fails, or a NaN, ends the run with one line saying what survives of it."""
    return run_to_end(steps(run, callbacks))


def run_to_end(updates: Updates) -> Agent:
    """Step a generator of ``steps`` (or ``training``, ``resuming``) to its end; return its agent."""
    while True:
        try:
            next(updates)
        except StopIteration as end:
            return end.value


def steps(run: Run, callbacks: list[Callback]) -> Updates:
    """``loop`` one update at a time: yields ``(run, result)`` after each update's callbacks, returns the agent."""
    run.callbacks = callbacks
    args = run.args
    infos = wanted_infos(callbacks)
    if infos is not None:  # else the envs never carry an info, and a step costs what it did without them
        run.collector.keep_infos(infos)
    run.console = ProgressReport(args.num_updates * args.batch_size, args.num_updates, quiet=args.run.quiet)
    for note in run.notes:
        run.console.message(note)
    try:
        for callback in callbacks:
            callback.on_train_start(run)
        start = time.perf_counter() - run.elapsed
        while run.updates_done < args.num_updates:
            result = run.iterate()
            run.elapsed = time.perf_counter() - start
            result.record = {
                "global_step": run.global_step,
                "time_s": run.elapsed,
                "sps": run.global_step / run.elapsed,
                **result.record,
            }
            stops = [callback.on_update_end(run, result) for callback in callbacks]  # each sees every update
            yield run, result
            if any(stops):
                break
        run.agent.save(run.run_dir, global_step=run.global_step)
        for callback in callbacks:
            callback.on_train_end(run)
        run.console.message(f"saved agent to {run.run_dir}")
    except (EnvError, NonFiniteError) as e:
        crashed = isinstance(e, EnvError)  # a crash may not recur; a NaN would, from the same state
        where = f" in update {run.updates_done + 1}" if crashed else ""
        raise type(e)(f"{e}{where}; {checkpoint.last_checkpoint_note(run.run_dir, resumable=crashed)}") from e
    except DiskFullError as e:
        note = checkpoint.last_checkpoint_note(run.run_dir, how="free space, then continue with")
        raise DiskFullError(f"{e}; {note}") from None
    finally:
        run.console.close()
        for callback in reversed(callbacks):
            callback.close(run)
    return run.agent


class Run:
    """One training run: its parts (envs, model, optimizer, schedules, collector), its counters, and one
    iteration of the loop. ``state_dict`` is what a checkpoint needs of them; callbacks hold the rest.

    ``args`` is read-only (it is the run's config.json); ``set`` changes the settings that may change between
    updates, and ``in_force`` gives their values now."""

    def __init__(self, args: PPOArgs, envs, run_dir: str, device: torch.device):
        self.args, self.envs, self.run_dir, self.device = args, envs, run_dir, device
        head = make_head(envs.single_action_space, args.network.action_dist)
        self.model = ActorCritic(network_spec(args, envs), head).to(device)
        self.optimizer = make_adam(
            self.model.param_groups(args.algorithm.learning_rate, args.algorithm.value_learning_rate),
            args.algorithm.learning_rate,
        )
        self.settings = UpdateSettings.from_args(args)
        self.schedules = Schedules.from_args(args)
        self._value_lr_ratio = (
            args.algorithm.value_learning_rate / args.algorithm.learning_rate
            if len(self.optimizer.param_groups) > 1
            else None
        )
        self._lrs: list[float] | None = None  # the rates _apply put into the optimizer
        self.collector: Collector = self._make_collector()
        self.agent = Agent(
            self.model, args.env.env_id, envs.single_observation_space, envs.single_action_space
        )
        self.console: ProgressReport | None = None  # the loop's
        self.updates_done = self.global_step = 0
        self.elapsed = 0.0
        self._apply()
        self.notes: list[str] = []  # shown when training starts
        self.callbacks: list[Callback] = []
        self.logger = None  # set by the Logging callback
        self.env = (
            None  # the env object of train(env=...) (None: args.env.env_id), for the callbacks' own envs
        )

    def _make_collector(self) -> Collector:
        args, envs = self.args, self.envs
        if isinstance(envs, WorkerPool):  # the envs are on Ray actors: one more collector, same buffer
            return RayCollector(
                envs, args.algorithm.num_steps, args.algorithm.gamma, self.model, args.run.seed, say=self._say
            )
        collector = RecurrentCollector if args.network.recurrent else RolloutCollector
        return collector(
            envs,
            args.algorithm.num_steps,
            args.algorithm.gamma,
            self.model,
            seed=args.run.seed,
            team_reward=args.env.team_reward,
        )

    def _say(self, text: str) -> None:
        if self.console is not None:
            self.console.message(text)

    def set(self, **values) -> None:
        """Change settings from the next update on, between updates (a callback's ``on_update_end``):
        ``run.set(ent_coef=0.001, learning_rate=1e-4)``. Accepted: learning_rate, ent_coef, clip_coef,
        vf_coef, max_grad_norm and target_kl. A setting with a schedule (``--anneal-lr``, ``--*-end``) goes on
        linearly from the new value to its end value; one without stays at the new value. With
        ``--value-learning-rate``, the critic's rate keeps its ratio to ``learning_rate``. The values in force
        are logged each update, and checkpoints keep them (docs/TRAINING.md)."""
        self.schedules.set(self.updates_done, values, self._value_lr_ratio)
        self._apply()

    @property
    def in_force(self) -> dict:
        """The values of ``set``'s settings that the next update will use."""
        return {
            "learning_rate": self.optimizer.param_groups[0]["lr"],
            **{name: getattr(self.settings, name) for name in ADJUSTABLE[1:]},
        }

    def _apply(self) -> dict:
        """Put the values in force at this update into the optimizer and ``settings``; return those that have a
        line (``proxima.schedules``). A learning rate changed in the optimizer behind ``set``'s back would be
        overwritten here: refused instead."""
        values = self.schedules.at(self.updates_done)
        if not values:
            return values
        groups = self.optimizer.param_groups
        for i, (group, name) in enumerate(zip(groups, ("learning_rate", VALUE_LR), strict=False)):
            if name in values:
                if self._lrs is not None and group["lr"] != self._lrs[i]:
                    raise UserError(
                        f"the optimizer's learning rate was changed to {group['lr']} outside run.set, and its "
                        f"schedule would overwrite it; use run.set(learning_rate=...) instead"
                    )
                group["lr"] = values[name]
        self._lrs = [group["lr"] for group in groups]
        coefficients = {name: values[name] for name in ADJUSTABLE[1:] if name in values}
        if coefficients:
            self.settings = dataclasses.replace(self.settings, **coefficients)
        return values

    def iterate(self) -> UpdateResult:
        """One update: a rollout, its advantages, the gradient steps."""
        args = self.args
        in_force = self._apply()
        learning_rate = self.optimizer.param_groups[0]["lr"]
        buf, advantages, returns = rollout(self.collector, self.model, args, self.updates_done + 1)
        batch = (
            buf.sequences(advantages, returns) if args.network.recurrent else buf.flatten(advantages, returns)
        )
        stats = update(self.model, self.optimizer, batch, self.settings)
        agents = agent_spec(self.envs)
        if agents is not None and agents.num_kinds > 1:
            stats.update(group_diagnostics(self.model, batch, list(agents.kinds), agents.kind_names()))
        return self.result(buf, batch, stats, learning_rate, in_force)

    def result(self, buf, batch, stats: dict, learning_rate: float, in_force: dict) -> UpdateResult:
        """Count the update done and return what the callbacks get of it: its record (the update's ``stats``
        and the rollout's episodes) and the episodes themselves."""
        self.updates_done += 1
        self.global_step += self.args.batch_size
        self._apply()  # the next update's values, in place for the callbacks and the checkpoint
        episode_returns, episode_lengths = buf.finished_episodes()
        values, returns = batch.present(batch.values), batch.present(batch.returns)
        return_spread, value_spread = spreads(values, returns)
        record = {
            "global_step": self.global_step,
            "learning_rate": learning_rate,
            # the values in force of the settings that changed or change (a run without any logs none of them)
            **{name: in_force[name] for name in ADJUSTABLE[1:] if name in in_force},
            **stats,
            "explained_variance": explained_variance(values, returns),
            "episodic_return": float(np.mean(episode_returns)) if episode_returns else None,
            "episodic_length": float(np.mean(episode_lengths)) if episode_lengths else None,
            **self._per_agent(buf),
        }
        return UpdateResult(
            record,
            episode_returns,
            episode_lengths,
            return_spread=return_spread,
            value_spread=value_spread,
            episode_infos=buf.finished_infos(),
        )

    def _per_agent(self, buf) -> dict:
        """A multi-agent run's mean episodic return of each agent (``episodic_return/NAME``; None where none of
        its episodes ended): which agent lags behind."""
        agents = agent_spec(self.envs)
        if agents is None:
            return {}
        by_row = buf.episode_returns.where(buf.episode_ended, torch.nan).view(
            -1, agents.num_envs, agents.num_agents
        )
        means = by_row.nanmean((0, 1)).tolist()
        return {
            f"episodic_return/{name}": None if np.isnan(m) else m
            for name, m in zip(agents.names, means, strict=True)
        }

    # --- the checkpoint's share of the run (proxima.checkpoint owns the file) ---------------------------
    def counters(self) -> dict:
        return {
            "update": self.updates_done,
            "global_step": self.global_step,
            "elapsed_s": self.elapsed,
            "torch_threads": torch.get_num_threads(),
        }

    def spaces(self) -> dict:
        return {
            "spaces": {
                "observation_space": space_to_json(self.envs.single_observation_space),
                "action_space": space_to_json(self.envs.single_action_space),
            }
        }

    def state_dict(self) -> dict:
        rng = {"torch": torch.get_rng_state(), "numpy": _numpy_rng_state(), "python": random.getstate()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "settings": self.schedules.state_dict(),
            "collector": self.collector.state_dict(),  # None: the envs cannot be captured
            "rng": rng,
        }

    def load_state_dict(self, meta: dict, states: dict) -> None:
        load_module_state(self.model, states["model"], CHECKPOINT)
        self.optimizer.load_state_dict(states["optimizer"])
        self.schedules.load_state_dict(states["settings"])
        rng = states["rng"]
        torch.set_rng_state(rng["torch"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)
        name, keys, *rest = rng["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), *rest))
        version, internal, gauss = rng["python"]
        random.setstate((version, tuple(internal), gauss))
        if states["collector"] is not None:
            self.collector.load_state_dict(states["collector"])
        else:  # new episodes, from a seed the run has not used yet
            self.collector.restart(seed=seeding.resumed_episodes(self.args.run.seed, meta["global_step"]))
        self.updates_done, self.global_step, self.elapsed = (
            meta["update"],
            meta["global_step"],
            meta["elapsed_s"],
        )
        self._lrs = None  # the optimizer's rates are the checkpoint's
        self._apply()
        self.notes.append(
            f"resuming {self.run_dir} after update {self.updates_done} of {self.args.num_updates}"
        )
        if states["collector"] is None:
            self.notes.append(
                f"note: {self.args.env.env_id}'s envs cannot be saved without pickling (Gymnasium's and "
                "PettingZoo's), so they start new episodes; the rest of this run will differ from an uninterrupted "
                "one (native and VMAS envs resume exactly)"
            )


def rollout(collector: Collector, model, args: PPOArgs, update: int) -> tuple:
    """Update ``update``'s rollout, checked for NaNs, and its advantages and returns (the value targets):
    ``(buffer, advantages, returns)``."""
    next_value, next_done = collector.collect(model)
    buf = collector.buffer
    check_rollout(buf, update)
    advantages = estimate_advantages(
        args.algorithm.advantage,
        buf.rewards,
        buf.values,
        buf.dones,
        next_value,
        next_done,
        args.algorithm.gamma,
        args.algorithm.gae_lambda,
    )
    return buf, advantages, advantages + buf.values


def _init_from(run: Run, source: str) -> None:
    """Start ``run`` from the agent saved in ``source`` (a run directory, or its ``best``): its weights and
    normalization statistics. Its spaces and network must be the run's; the first difference is named."""
    seeds = seed_run_dirs(source)
    if seeds:
        raise UserError(
            f"--init-from {source}: a batched run's directory (--num-seeds) holds one agent per seed; give one "
            f"of its seeds' directories, such as {seeds[0]}"
        )
    if os.path.isdir(source) and not os.path.exists(os.path.join(source, AGENT_JSON)):
        raise UserError(
            f"--init-from {source}: no agent there ({AGENT_JSON}); a run saves its agent when it ends: resume "
            "it to its end first, or give its best/ directory"
        )
    agent = Agent.load(source)
    for name, theirs, ours in (
        ("observation space", agent.observation_space, run.envs.single_observation_space),
        ("action space", agent.action_space, run.envs.single_action_space),
    ):
        if space_to_json(theirs) != space_to_json(ours):
            raise UserError(
                f"--init-from {source}: its agent's {name} is {theirs}, this run's env has {ours}"
            )

    def described(spec: NetworkSpec) -> dict:
        return {**dataclasses.asdict(spec), **dataclasses.asdict(spec.network), "network": None}

    theirs, ours = described(agent.model.spec), described(run.model.spec)
    # the precision a CNN computes in is not part of what it is, nor the statistics' horizon
    for name in ours:
        if name not in ("precision", "value_norm_horizon") and theirs.get(name) != ours[name]:
            raise UserError(
                f"--init-from {source}: its agent's network has {name} {show_value(theirs.get(name))}, this run's "
                f"{show_value(ours[name])}; give the network settings of that run (its config.json)"
            )
    load_module_state(run.model, agent.model.state_dict(), os.path.join(source, WEIGHTS))


def _numpy_rng_state() -> list:
    name, keys, *rest = np.random.get_state()
    return [name, keys.tolist(), *rest]


def network_spec(args: PPOArgs, envs) -> NetworkSpec:
    """The run's network settings, with the encoder that ``auto`` (or the name given) stands for on these envs,
    and what the envs and the algorithm decide."""
    layout, agents = obs_layout(envs), agent_spec(envs)
    check_agents(args, agents)
    return NetworkSpec(
        logits_dim=make_head(envs.single_action_space, args.network.action_dist).logits_dim,
        obs_shape=tuple(layout.shape),
        network=dataclasses.replace(args.network, encoder=choose_encoder(args.network.encoder, layout)),
        has_critic=get_algorithm(args.algorithm.algo).has_critic,
        obs_layout=layout.to_json() if layout.packed else None,
        agents=None if agents is None else agents.to_json(),
    )


def check_agents(args: PPOArgs, agents: AgentSpec | None) -> None:
    """The settings that only a multi-agent env gives a meaning to, refused on any other."""
    algo = args.algorithm.algo
    asked = (
        (f"--algo {algo}", get_algorithm(algo).multi_agent),
        ("centralized_critic", args.network.centralized_critic),
        ("team_reward", args.env.team_reward),
    )
    named = [name for name, on in asked if on]
    if agents is None and named:
        raise UserError(
            f"{named[0]} trains many agents, and {args.env.env_id} is a single-agent env; multi-agent envs are "
            "pettingzoo:MODULE and vmas:SCENARIO ids (docs/MULTIAGENT.md)"
        )
    separate = agents is not None and (agents.num_kinds > 1 or not args.network.share_params)
    if separate and args.network.shared_network:
        raise UserError(
            "--shared-network gives one trunk to every agent; agents of several kinds, or --no-share-params, need "
            "a network each: drop --shared-network"
        )


def default_run_dir(args: PPOArgs) -> str:
    env_name = re.sub(r"[^\w.-]", "_", args.env.env_id)  # an id's / and :, an env object's <lambda>
    return os.path.join("runs", f"{env_name}__{args.run.exp_name}__{args.run.seed}__{int(time.time())}")


def _check_run_dir_free(run_dir: str) -> None:
    if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir)):
        raise UserError(f"run directory {run_dir!r} already exists and is not empty; give a new --run-dir")


def _setup(args: PPOArgs) -> tuple[torch.device, list[str]]:
    """The device and the seeds; returns the device and notes for the console."""
    notes = []
    device = torch.device("cuda" if args.run.cuda and torch.cuda.is_available() else "cpu")
    if args.run.cuda and device.type == "cpu":
        notes.append(
            "note: no GPU is available, so training runs on the CPU (--no-cuda says so and hides this)"
        )
    seeding.seed_globals(args.run.seed, args.run.torch_deterministic)
    return device, notes


def _resolve_precision(args: PPOArgs, envs, device: torch.device) -> PPOArgs:
    """``--precision auto`` made concrete: bfloat16 where the device computes it natively and the agent has a
    CNN, float32 elsewhere. An agent without images computes its MLPs in bf16 only when asked by name: their
    speed-up depends on their size (nothing for CartPole's 64-64), and it rounds every layer's output."""
    requested = args.network.precision
    if obs_layout(envs).has_images:
        return args.replace(precision=resolve_precision(requested, device))
    return args.replace(precision="bfloat16" if requested == "bfloat16" else "float32")


def _threads(args: PPOArgs, envs, saved: int | None = None) -> list[str]:
    """Set torch's thread count for the run (``proxima.threads``); a resumed run keeps its ``saved`` one."""
    images = obs_layout(envs).has_images
    count, why = choose_threads(
        args.run.torch_threads, args.samples_per_minibatch, saved=saved, images=images
    )
    torch.set_num_threads(count)
    return [why] if why else []


def _take_env(env, args: PPOArgs | None, overrides: dict):
    """The env object of ``train(env=...)``, or of an ``env_id`` (keyword or ``PPOArgs``) that is not an id
    string, with the ``args`` and ``overrides`` that record it: its label as ``env_id`` and ``env_factory``."""
    if args is not None and is_env_object(args.env.env_id):
        env, args = (args.env.env_id if env is None else env), args.replace(env_id="")
    if is_env_object(overrides.get("env_id")):
        if env is not None:
            raise UserError("give the env once: as env= or as env_id=, not both")
        env = overrides.pop("env_id")
    if env is None:
        return None, args, overrides
    if isinstance(env, str):
        if "env_id" in overrides:
            raise UserError("give the env once: as env= or as env_id=, not both")
        return None, args, {**overrides, "env_id": env}
    label, factory = describe_env(env)
    overrides = {**overrides, "env_id": label, "env_factory": factory}
    if isinstance(env, gym.vector.VectorEnv):
        if overrides.get("num_envs", env.num_envs) != env.num_envs:
            raise UserError(
                f"num_envs is {overrides['num_envs']}, but the VectorEnv given has {env.num_envs} envs"
            )
        overrides["num_envs"] = env.num_envs
    return env, args, overrides


def _env_of(args: PPOArgs, env, what: str = "the run"):
    """What the run's envs are made from: ``env`` where given, else the factory that ``args.env.env_factory`` names
    (imported again), else None (``args.env.env_id``). What a run on a user's VectorEnv cannot do is refused here."""
    if env is None and args.env.env_factory is not None:
        env = load_env_factory(args.env.env_factory, what)
    if isinstance(env, gym.vector.VectorEnv):
        for asked, flag in (
            (args.run.eval_every, "--eval-every"),
            (args.env.rollout_workers, "--rollout-workers"),
        ):
            if asked:
                raise UserError(
                    f"{flag} makes envs of its own, which a VectorEnv instance cannot give; pass env= a class or "
                    "function that returns one gymnasium.Env instead"
                )
        if env.num_envs != args.env.num_envs:
            raise UserError(
                f"num_envs is {args.env.num_envs}, but the VectorEnv given has {env.num_envs} envs"
            )
    return env


def _make_envs(args: PPOArgs, run_dir: str, device: torch.device, env=None, resumed: dict | None = None):
    """The run's envs: of ``env`` (an object: ``proxima.envs.user``) where given, else of ``args.env.env_id``.
    ``resumed``: the checkpoint's header, where the run resumes."""
    if args.env.rollout_workers:
        return WorkerPool(args, env)
    return make_envs(
        args.env.env_id if env is None else env,
        args.env.num_envs,
        env_kwargs=args.env.env_kwargs,
        backend=args.env.env_backend,
        seed=args.run.seed,
        asynchronous=args.env.async_envs,
        device=device,
        video_dir=_video_dir(run_dir, resumed) if args.env.capture_video else None,
    )


def _video_dir(run_dir: str, resumed: dict | None = None) -> str:
    """Where ``--capture-video`` records: ``RUN_DIR/videos``, and a resumed part of the run in a folder of its
    own there, since Gymnasium's recorder numbers a new process's episodes from 0 again."""
    return os.path.join(
        run_dir, VIDEOS, "" if resumed is None else f"resumed-after-update-{resumed['update']}"
    )


# --- many seeds as one batched computation (--num-seeds; proxima.batched) -----------------------------------


class _SeedRows:
    """A seed's share of its group's collector: the rows of its envs in the group's checkpointable state, so that
    the seed's own checkpoint continues its episodes (alone, or in the group again)."""

    reports_infos = False  # set by the group, which collects for all seeds

    def __init__(self, rows: slice):
        self.rows, self.group_collector, self.loaded = rows, None, None

    def state_dict(self) -> dict | None:
        return _rows_of(self.group_collector.state_dict(), self.rows)

    def load_state_dict(self, state: dict) -> None:
        self.loaded = state

    def restart(self, seed: int) -> None:
        self.loaded = None


# the parts of a collector's state whose rows are not on their first axis: a recurrent agent's memory is
# (layers, rows, hidden)
_ROW_AXIS = {"memory_h": 1, "memory_c": 1}


def _rows_of(tree, rows: slice, axis: int = 0):
    """``tree`` (a collector's state) with each tensor cut to ``rows`` (None: a part of it is not per row)."""
    if tree is None:
        return None
    if isinstance(tree, torch.Tensor):
        return tree.narrow(axis, rows.start, rows.stop - rows.start) if tree.dim() else None
    parts = {key: _rows_of(value, rows, _ROW_AXIS.get(key, 0)) for key, value in tree.items()}
    return None if any(v is None for v in parts.values()) else parts


def _joined(trees: list, axis: int = 0):
    """The seeds' shares of a collector's state, joined again (``_rows_of``'s inverse)."""
    first = trees[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(trees, dim=axis)
    return {key: _joined([t[key] for t in trees], _ROW_AXIS.get(key, 0)) for key in first}


class SeedRun(Run):
    """One seed of a batched run (``--num-seeds``): an ordinary run to its callbacks and in its directory, whose
    rollouts and updates its ``SeedGroup`` makes for every seed at once."""

    def __init__(self, args: PPOArgs, envs, run_dir: str, device: torch.device, rows: slice):
        self._rows = rows
        super().__init__(args, envs, run_dir, device)
        self.stream = torch.get_rng_state()  # after the initialization: what its first actions draw from
        self.cuda_stream = _cuda_rng_state(device)  # on a GPU, where its draws come from
        self.group: SeedGroup | None = None
        self.index = 0

    def _make_collector(self) -> _SeedRows:
        return _SeedRows(self._rows)

    def iterate(self) -> UpdateResult:
        raise RuntimeError("a seed of a batched run is updated by its SeedGroup")

    def state_dict(self) -> dict:
        state = super().state_dict()
        group = self.group
        state["optimizer"] = group.optimizer_share(self.index, self.optimizer)
        state["rng"]["torch"] = group.streams.states[self.index]
        if group.streams.cuda is not None:
            state["rng"]["cuda"] = group.streams.cuda[self.index]
        return state

    def load_state_dict(self, meta: dict, states: dict) -> None:
        super().load_state_dict(meta, states)
        self.stream, self.cuda_stream = torch.get_rng_state(), _cuda_rng_state(self.device)


def _cuda_rng_state(device: torch.device) -> torch.Tensor | None:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else None


class SeedGroup:
    """The seeds of a batched run: one vector env of all their envs (seed-major), their models stacked
    (``proxima.batched``), one collector, and one update for all; each seed's counters, settings and
    callbacks stay in its ``SeedRun``."""

    def __init__(self, runs: list[SeedRun], envs, env_seeds: list[int]):
        from proxima.batched import (
            SeedCollector,
            SeedModel,
            SeedRecurrentCollector,
            SeedStreams,
            StackedModels,
        )

        self.runs, self.envs = runs, envs
        lead = runs[0]
        args = lead.args
        self.rows = args.env.num_envs
        self.stacked = StackedModels([r.model for r in runs])
        cuda = [r.cuda_stream for r in runs] if lead.device.type == "cuda" else None
        self.streams = SeedStreams([r.stream for r in runs], cuda, lead.device)
        groups = lead.model.param_groups(args.algorithm.learning_rate, args.algorithm.value_learning_rate)
        self.optimizer = make_adam(
            self.stacked.named_groups(groups), args.algorithm.learning_rate, seeds=len(runs)
        )
        self.model = SeedModel(self.stacked, self.streams, self.rows)
        collector = SeedRecurrentCollector if args.network.recurrent else SeedCollector
        self.collector = collector(
            envs, args.algorithm.num_steps, args.algorithm.gamma, self.model, seed=env_seeds
        )
        for j, run in enumerate(runs):
            run.group, run.index = self, j
            run.collector.group_collector = self.collector

    def optimizer_share(self, j: int, own) -> dict:
        """Seed ``j``'s Adam state in the layout of its own optimizer's ``state_dict``."""
        saved = own.state_dict()
        stacked = self.optimizer._params()
        saved["state"] = {
            i: {k: v[j] for k, v in self.optimizer.state[p].items()}
            for i, p in enumerate(stacked)
            if p in self.optimizer.state
        }
        return saved

    def load(self) -> None:
        """After each seed's checkpoint was loaded into its run: the stacked Adam state, the random streams and
        the envs of all seeds, from theirs."""
        stacked = self.optimizer._params()
        for i, p in enumerate(stacked):
            states = [r.optimizer.state_dict()["state"].get(i) for r in self.runs]
            if all(s is not None for s in states):
                self.optimizer.state[p] = {k: torch.stack([s[k] for s in states]) for k in states[0]}
        self.streams.states = [r.stream for r in self.runs]
        if self.streams.cuda is not None:
            self.streams.cuda = [r.cuda_stream for r in self.runs]
        shares = [r.collector.loaded for r in self.runs]
        if all(s is not None for s in shares):
            self.collector.load_state_dict(_joined(shares))
            return
        # each seed's envs start the episodes its own resumed solo run would
        first = [seeding.resumed_episodes(r.args.run.seed, r.global_step) for r in self.runs]
        self.collector.restart(seed=[s + k for s in first for k in range(self.rows)])

    def iterate(self) -> list[UpdateResult | None]:
        """One update of every seed that is still training (None for those that finished)."""
        from proxima.batched import seed_batches, update_seeds
        from proxima.storage import Batch

        live = [run for run in self.runs if run.index not in self.stacked.frozen]
        in_force = {run.index: run._apply() for run in live}
        lead = live[0]
        for run in live[1:]:
            if run.settings != lead.settings or run.in_force != lead.in_force:
                raise UserError(
                    f"the seeds of a batched run train with the same settings, and seed {run.args.run.seed}'s "
                    f"differ from seed {lead.args.run.seed}'s (run.set on one seed): set them on every seed"
                )
        for group, own in zip(self.optimizer.param_groups, lead.optimizer.param_groups, strict=True):
            group["lr"] = own["lr"]
        buf, advantages, returns = rollout(self.collector, self.model, lead.args, lead.updates_done + 1)
        batch = seed_batches(buf, advantages, returns, len(self.runs), sequences=lead.args.network.recurrent)
        stats = update_seeds(self.stacked, self.optimizer, batch, lead.settings, self.streams)
        results: list[UpdateResult | None] = [None] * len(self.runs)
        for run in live:
            j, rows = run.index, slice(run.index * self.rows, (run.index + 1) * self.rows)
            own = Batch(*(getattr(batch, f.name)[j] for f in dataclasses.fields(Batch)))
            learning_rate = run.optimizer.param_groups[0]["lr"]
            results[j] = run.result(
                buf.columns(rows.start, rows.stop), own, stats[j], learning_rate, in_force[j]
            )
        return results


def check_seeds(args: PPOArgs, env) -> None:
    """What a batched run (``--num-seeds``) cannot do yet, refused in one line each."""
    refused = (
        (args.env.rollout_workers, "--rollout-workers"),
        (
            isinstance(env, gym.vector.VectorEnv),
            "a VectorEnv instance (give a class or function that makes one env)",
        ),
        (is_selfplay_id(args.env.env_id), "a self-play env"),
    )
    for asked, what in refused:
        if asked:
            raise UserError(
                f"--num-seeds {args.run.num_seeds} trains the seeds as one batched computation, which does not "
                f"take {what} yet; drop it, or train each seed as a run of its own"
            )


def _seed_args(args: PPOArgs, parent: str) -> list[PPOArgs]:
    """Each seed's own settings: an ordinary run of its seed in ``parent/seedS``."""
    first = args.run.seed
    return [
        args.replace(seed=s, num_seeds=1, run_dir=os.path.join(parent, f"seed{s}"), quiet=True)
        for s in range(first, first + args.run.num_seeds)
    ]


def _env_seeds(seed_args: list[PPOArgs]) -> list[int]:
    """The seed of every env of the group, seed-major: seed ``s``'s env ``k`` is seeded ``s + k`` as in its solo
    run (``proxima.seeding.training_envs``)."""
    return [seeding.training_envs(a.run.seed) + k for a in seed_args for k in range(a.env.num_envs)]


def _seed_group(
    args: PPOArgs,
    parent: str,
    device: torch.device,
    env=None,
    start: bool = True,
    resumed: list | None = None,
) -> tuple[SeedGroup, list[str]]:
    """The envs (of ``env``, an env object, where given), the seeds' runs (each model initialized as its solo
    run's, from ``--init-from``'s agent where a run ``start``s) and their group. ``resumed``: each seed's
    checkpoint header, where the group resumes."""
    n, rows = args.run.num_seeds, args.env.num_envs
    env_seeds = _env_seeds(_seed_args(args, parent))
    backend = args.env.env_backend
    if env is None:  # auto chooses by the env count: each seed's envs are of its solo run's backend
        backend = resolve_backend(args.env.env_id, backend, asynchronous=args.env.async_envs, num_envs=rows,
                                  video=args.env.capture_video, env_kwargs=bool(args.env.env_kwargs))  # fmt: skip
    envs = make_envs(args.env.env_id if env is None else env, n * rows, env_kwargs=args.env.env_kwargs, backend=backend,
                     seed=env_seeds, asynchronous=args.env.async_envs, device=device,
                     video_dir=_seed_videos(args, _seed_args(args, parent), resumed))  # fmt: skip
    try:
        args = _resolve_precision(args, envs, device)
        seed_args = _seed_args(args, parent)
        if agent_spec(envs) is not None:
            raise UserError(
                f"--num-seeds trains single-agent envs; {args.env.env_id} has many agents: train each seed as a run "
                "of its own"
            )
        check_spaces(obs_layout(envs), envs.single_action_space, args.network.encoder)
        images = obs_layout(envs).has_images
        # Each model is initialized with its solo run's thread count: an orthogonal initialization's QR rounds
        # by it. The group's minibatches are N times a seed's, which may choose another count for the update.
        torch.set_num_threads(
            choose_threads(args.run.torch_threads, args.samples_per_minibatch, images=images)[0]
        )
        runs = []
        for j, a in enumerate(seed_args):
            seeding.seed_globals(a.run.seed, a.run.torch_deterministic)
            run = SeedRun(a, envs, a.run.run_dir, device, slice(j * rows, (j + 1) * rows))
            run.env = env
            run.agent.env_source = env_source(a.env.env_id, a.env.env_kwargs, a.env.env_factory)
            if start and a.run.init_from is not None:
                _init_from(run, a.run.init_from)
                run.stream = torch.get_rng_state()  # loading the agent drew from it, as in the solo run
            runs.append(run)
        count, why = choose_threads(args.run.torch_threads, args.samples_per_minibatch * n, images=images)
        torch.set_num_threads(count)
        notes = emulation_note(args.network.precision, device) + ([why] if why else [])
        return SeedGroup(runs, envs, env_seeds), notes
    except BaseException:
        envs.close()
        raise


def _seed_videos(
    args: PPOArgs, seed_args: list[PPOArgs], resumed: list | None = None
) -> dict[int, str] | None:
    """``--capture-video``'s recorders of a batched run: each seed's first env records into the seed's run
    directory, as its solo run's env 0 does (``_video_dir``); a seed that finished before a resume records
    nothing."""
    if not args.env.capture_video:
        return None
    rows, resumed = args.env.num_envs, resumed or [None] * len(seed_args)
    dirs = {
        j * rows: _video_dir(a.run.run_dir, meta)
        for j, (a, meta) in enumerate(zip(seed_args, resumed, strict=True))
        if meta is None or not meta["finished"]
    }
    return dirs or None


def train_seeds(
    args: PPOArgs, callbacks: list[Callback] | None = None, env=None, requeued: bool = False
) -> list[Agent]:
    """``train`` with ``num_seeds`` > 1: seeds ``seed`` … ``seed + num_seeds - 1`` as one batched computation.
    Returns each seed's agent; each seed's run directory is ``RUN_DIR/seedS``, an ordinary run's.
    ``requeued``: ``requeue`` has cleared RUN_DIR of a run's files (others, a scheduler's log, may stay)."""
    parent = args.run.run_dir or default_run_dir(args)
    if not requeued:
        _check_run_dir_free(parent)
    device, notes = _setup(args)
    group, written = None, False
    try:
        # Built before the run directories are written, so a bad setting leaves nothing behind (but
        # --capture-video's recorders make each seed's videos folder as they are built: removed below).
        group, more = _seed_group(args, parent, device, env)
        args = args.replace(precision=group.runs[0].args.network.precision)
        os.makedirs(parent, exist_ok=True)
        write_json(os.path.join(parent, SEEDS_JSON), args.to_json())
        for run in group.runs:
            os.makedirs(run.run_dir, exist_ok=True)
            write_json(os.path.join(run.run_dir, CONFIG_JSON), run.args.to_json())
        written = True
        return _train_group(group, args, parent, callbacks or [], notes + more)
    finally:
        if group is not None:
            group.envs.close()
        if not written:
            for seed in _seed_args(args, parent):
                shutil.rmtree(os.path.join(seed.run.run_dir, VIDEOS), ignore_errors=True)
                if os.path.isdir(seed.run.run_dir) and not os.listdir(seed.run.run_dir):
                    os.rmdir(seed.run.run_dir)
            if os.path.isdir(parent) and not os.listdir(parent):
                os.rmdir(parent)


def resume_seeds(
    parent: str, quiet: bool = False, callbacks: list[Callback] | None = None, env=None
) -> list[Agent]:
    """Continue a batched run from its seeds' checkpoints: exactly, on native envs. ``env``: the env object the
    run was trained on, given again."""
    path = os.path.join(parent, SEEDS_JSON)
    args = PPOArgs.from_json(read_json(path), path).replace(run_dir=parent, quiet=quiet)
    path = os.path.join(parent, CHECKPOINT)
    if not os.path.exists(path):
        raise UserError(f"{path} is missing: the run stopped before its first checkpoint; start it again")
    saved = checkpoint.read_group(path)
    metas = [saved[os.path.basename(a.run.run_dir)] for a in _seed_args(args, parent)]
    if all(meta["finished"] for meta, _ in metas):
        raise UserError(f"every seed of the batched run in {parent} already finished")
    device, notes = _setup(args)
    env = _env_of(args, env, what=parent)
    group, more = _seed_group(args, parent, device, env, start=False, resumed=[meta for meta, _ in metas])
    try:
        group.pending = metas
        return _train_group(group, args, parent, callbacks or [], notes + more)
    finally:
        group.envs.close()


def _train_group(
    group: SeedGroup, args: PPOArgs, parent: str, user: list[Callback], notes: list[str]
) -> list[Agent]:
    """The loop of ``steps`` for every seed of ``group``: each seed's callbacks after each update, and a seed
    that a callback stops (``--stop-return``) leaves the group, its weights frozen, while the others go on."""
    runs = group.runs
    seed_callbacks = [default_callbacks(run, user) for run in runs]
    pending = getattr(group, "pending", None)
    finished: dict[str, tuple] = {}  # the snapshots of the seeds that stopped, for the group's checkpoints
    for run, callbacks, state in zip(runs, seed_callbacks, pending or [None] * len(runs), strict=True):
        run.callbacks = callbacks
        for callback in callbacks:
            if isinstance(callback, Logging):  # --track: each seed's W&B run, in the batch's group
                callback.wandb_group = os.path.basename(os.path.normpath(parent))
        run.console = ProgressReport(args.num_updates * args.batch_size, args.num_updates, quiet=True)
        if state is not None:
            checkpoint.load(run, os.path.join(parent, CHECKPOINT), *state)
            if state[0]["finished"]:
                group.stacked.freeze(run.index)
                finished[os.path.basename(run.run_dir)] = checkpoint.kept(*state)

    def save_group() -> None:
        snapshots = {os.path.basename(run.run_dir): checkpoint.snapshot(run) for run in live}
        checkpoint.save_group(os.path.join(parent, CHECKPOINT), {**finished, **snapshots})

    if pending is not None:
        group.load()
    infos = wanted_infos(seed_callbacks[0])  # every seed has the same callbacks
    if infos is not None:
        reports = group.collector.keep_infos(infos)
        for run in runs:
            run.collector.reports_infos = reports
    console = ProgressReport(
        args.num_updates * args.batch_size * len(runs), args.num_updates, quiet=args.run.quiet
    )
    for note in notes:
        console.message(note)
    live = [run for run in runs if run.index not in group.stacked.frozen]
    evaluations = _SeedEvaluations(live)  # a seed finished before a resume never opens its Evaluation
    started: list[SeedRun] = []
    interrupted: list[TrainingInterrupted] = []
    try:
        for run in live:
            started.append(run)
            for callback in run.callbacks:
                callback.on_train_start(run)
        start = time.perf_counter() - live[0].elapsed
        while live and live[0].updates_done < args.num_updates and not interrupted:
            results = group.iterate()
            evaluations.play(live)
            elapsed = time.perf_counter() - start
            stopping: list[SeedRun] = []
            for run in list(live):
                result = results[run.index]
                run.elapsed = elapsed
                result.record = {"global_step": run.global_step, "time_s": elapsed,
                                 "sps": run.global_step / elapsed, **result.record}  # fmt: skip
                try:
                    stops = [callback.on_update_end(run, result) for callback in run.callbacks]
                except TrainingInterrupted as e:
                    interrupted.append(e)
                    continue
                if any(stops):
                    console.message(f"seed {run.args.run.seed} stopped after update {run.updates_done}: "
                                    f"{run.global_step:,} steps, {_said(result.record)}")  # fmt: skip
                    stopping.append(run)
            evaluations.rescore(stopping)
            for run in stopping:
                _finish_seed(run)
                group.stacked.freeze(run.index)
                live.remove(run)
                finished[os.path.basename(run.run_dir)] = _finished_snapshot(run)
            every = args.run.checkpoint_every
            if live and (interrupted or (every and live[0].updates_done % every == 0)):
                save_group()
            if interrupted:  # one seed's Checkpointing got the signal: every other seed checkpoints too
                for run in live:
                    for callback in run.callbacks:
                        if isinstance(callback, Checkpointing) and not callback.hits:
                            checkpoint.save(run)
                raise TrainingInterrupted(
                    parent, live[0].updates_done, args.num_updates, interrupted[0].exit_status - 128
                )
            steps_done = sum(run.global_step for run in runs)
            returns = [r for res in results if res is not None for r in res.episode_returns]
            record = {"global_step": steps_done, "sps": steps_done / elapsed,
                      "episodic_return": float(np.mean(returns)) if returns else None}  # fmt: skip
            console.update(max(run.updates_done for run in runs), record, returns)
        evaluations.rescore(live)
        for run in live:
            _finish_seed(run)
            finished[os.path.basename(run.run_dir)] = _finished_snapshot(run)
        live = []
        save_group()
        _summarize_seeds(parent, runs)
        if args.run.report:  # every seed's curve on one page, as a sweep's
            write_report([parent], os.path.join(parent, REPORT))
        if args.run.plot:  # the seeds' mean and band
            try:
                plot_runs(
                    {args.env.env_id: [run.run_dir for run in runs]}, os.path.join(parent, LEARNING_CURVES)
                )
            except UserError as e:  # no matplotlib: each seed's own files are what matter
                console.message(f"no {LEARNING_CURVES}: {e}")
        console.message(f"saved {len(runs)} agents to {parent}/seed*")
    except (EnvError, NonFiniteError) as e:
        saved = os.path.exists(os.path.join(parent, CHECKPOINT))
        where = (
            f"the last checkpoint of every seed is {parent}/{CHECKPOINT}"
            if saved
            else "no checkpoint was written"
        )
        if saved and isinstance(e, EnvError):  # a crash may not recur; a NaN would, from the same state
            where += f"; continue with: proxima train --resume {parent}"
        raise type(e)(f"{e}; {where}") from e
    finally:
        console.close()
        evaluations.close()
        for run in reversed(started):  # each Checkpointing puts back the signal handlers it found
            for callback in reversed(run.callbacks):
                callback.close(run)
    return [run.agent for run in runs]


class _SeedEvaluations:
    """The seeds' ``--eval-every`` evaluations played at once, on one vector env of all their evaluation envs
    (``batched.deterministic_returns``): each seed's ``Evaluation`` then finds its returns given. The same
    envs serve the rescoring of the candidates of the seeds that end together (``--rescore-best``)."""

    def __init__(self, runs: list[SeedRun]):
        self.of = {run.index: c for run in runs for c in run.callbacks if isinstance(c, Evaluation)}
        self.envs = {}

    def make(self, n: int):
        if n not in self.envs:  # kept: the same numbers of envs come back at every evaluation
            self.envs[n] = next(iter(self.of.values())).make(n)
        return self.envs[n]

    def play(self, live: list[SeedRun]) -> None:
        due = [
            run for run in live if run.index in self.of and run.updates_done % self.of[run.index].every == 0
        ]
        if not due:
            return
        first = self.of[due[0].index]
        returns = deterministic_returns([run.model for run in due], self.make, first.episodes, first.episodes,
                                        [self.of[run.index].seed for run in due], first.env_id)  # fmt: skip
        for run, r in zip(due, returns, strict=True):
            self.of[run.index].given = r

    def rescore(self, ending: list[SeedRun]) -> None:
        """``--rescore-best`` of the seeds that end now: every candidate of every one of them played at once."""
        due = [(run, self.of[run.index]) for run in ending if run.index in self.of]
        due = [(run, c) for run, c in due if c.rescore and c.candidates]
        if not due:
            return
        agents = [c.candidate_agents(run) for run, c in due]
        models = [a[step].model for a, (_, c) in zip(agents, due, strict=True) for _, step in c.candidates]
        seeds = [c.rescore_seed for _, c in due for _ in c.candidates]
        first = due[0][1]
        returns = deterministic_returns(
            models, self.make, first.rescore_episodes, first.envs.num_envs, seeds, first.env_id
        )
        for (_, c), own in zip(due, agents, strict=True):
            c.given, returns = (own, returns[: len(c.candidates)]), returns[len(c.candidates) :]

    def close(self) -> None:
        for envs in self.envs.values():
            envs.close()


def _said(record: dict) -> str:
    value = record.get("eval_return")
    return "no evaluation" if value is None else f"eval_return {value:.1f}"


def _finished_snapshot(run: SeedRun) -> tuple[dict, dict]:
    """A finished seed's ``checkpoint.snapshot`` as of now, for every later group checkpoint: its tensors are
    copied, since they are views of the group's (its envs' rows, its Adam moments), which go on changing."""
    tensors, meta = checkpoint.snapshot(run, finished=True)
    return {key: t.clone() for key, t in tensors.items()}, meta


def _finish_seed(run: SeedRun) -> None:
    run.agent.save(run.run_dir, global_step=run.global_step)
    for callback in run.callbacks:
        callback.on_train_end(run)
    end_video = getattr(run.envs, "end_video", None)  # optional (VecEnv): a backend that records one env only
    if run.args.env.capture_video and end_video is not None:
        # its envs may step on with the other seeds': its video ends here, as its solo run's envs close
        end_video(run.index * run.args.env.num_envs)


def _summarize_seeds(parent: str, runs: list[SeedRun]) -> None:
    """``RESULTS_JSON`` and ``RESULTS_MD`` in the batched run's directory: each seed's steps, whether it stopped
    early, its final return and its last evaluation."""
    from proxima.plotting import final_return

    rows = []
    for run in runs:
        final = final_return(run.run_dir)
        rows.append({"seed": run.args.run.seed, "run_dir": os.path.relpath(run.run_dir, parent),
                     "global_step": run.global_step, "stopped_early": run.updates_done < run.args.num_updates,
                     "final_return": None if np.isnan(final) else final})  # fmt: skip
    write_json(os.path.join(parent, RESULTS_JSON), {"seeds": rows})
    lines = ["| seed | steps | stopped early | final return (last 20 episodes) |", "|---|---|---|---|"]
    for r in rows:
        final = "–" if r["final_return"] is None else f"{r['final_return']:.1f}"
        lines.append(
            f"| {r['seed']} | {r['global_step']:,} | {'yes' if r['stopped_early'] else 'no'} | {final} |"
        )
    with open(os.path.join(parent, RESULTS_MD), "w") as f:
        f.write("\n".join(lines) + "\n")
