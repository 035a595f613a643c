"""The training loop: rollout → advantages → update → callbacks, ``num_updates`` times.

A ``Run`` holds the parts and counters of one run and does one iteration; ``steps`` runs it (or a batched run's
``SeedGroup``) to its end.
Everything else a run does (evaluation, health, logging, progress, checkpoints, the plot) is a callback
(``proxima.run.callbacks``), and the checkpoint's format belongs to ``proxima.run.checkpoint``. The helpers below
``Run`` build what a run needs (its envs, threads, precision, device) for ``proxima.scale.trainer`` and
``proxima.scale.seedgroup``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Generator
from typing import Any, Protocol, TypeVar

import gymnasium as gym
import numpy as np
import torch

from proxima.algo.advantages import Estimator
from proxima.algo.algorithms import get_algorithm
from proxima.algo.custom import in_the_loop
from proxima.algo.losses import explained_variance
from proxima.algo.optim import make_adam
from proxima.algo.schedules import ADJUSTABLE, VALUE_LR, Schedules
from proxima.algo.update import UpdateSettings, update
from proxima.base import seeding
from proxima.base.errors import (
    DiskFullError,
    EnvError,
    FileAccessError,
    NonFiniteError,
    TrainingInterrupted,
    UserError,
)
from proxima.base.files import (
    AGENT_JSON,
    CHECKPOINT,
    CONFIG_JSON,
    LOCK,
    SEEDS_JSON,
    VIDEOS,
    WEIGHTS,
    load_module_state,
    seed_run_dirs,
    write_checkpoint,
)
from proxima.base.spaces import space_to_json
from proxima.envs.interface import agent_spec, obs_layout
from proxima.envs.user import describe_env, is_env_object, load_env_factory, made_from_id
from proxima.policy.distributions import make_head
from proxima.policy.encoders import choose_encoder, resolve_precision
from proxima.policy.networks import NetworkSpec, make_policy
from proxima.policy.user import env_spaces
from proxima.run import checkpoint
from proxima.run.agent import Agent
from proxima.run.callbacks import Callback, UpdateResult, wanted_infos
from proxima.run.config import PPOArgs, show_value
from proxima.run.health import check_rollout, spreads
from proxima.run.logger import RunLogger
from proxima.run.multiagent import check_agents, collector_of
from proxima.run.progress import ProgressReport
from proxima.run.rollout import Collector
from proxima.run.threads import choose_threads

# what training, resuming and steps are: (run, result) after each update, then the agent (a batched run's
# training and resuming: each seed's agent)
Updates = Generator["tuple[Run, UpdateResult]", None, "Agent | list[Agent]"]
T = TypeVar("T")


def run_to_end(updates: Generator[Any, None, T]) -> T:
    """Step a generator of ``steps`` (or ``training``, ``resuming``) to its end; return its agent."""
    while True:
        try:
            next(updates)
        except StopIteration as end:
            return end.value


M = TypeVar("M", bound="Run")


class Driven(Protocol[M]):
    """What ``steps`` drives: a ``Run``, whose one member is itself, a ``SeedGroup``, one member per seed
    (``proxima.scale.seedgroup``), or a tune sample, one ``Run`` per seed (``proxima.scale.tuning``). Its seams are what differs between them: ``start`` (the members that train,
    each with its ``callbacks``; the notes shown), ``update`` (one update of every live member: each one's
    result), ``stopping`` (a member's callbacks stop it), ``leave`` (members that end: they finish),
    ``interrupt`` (a member's callback raised ``TrainingInterrupted``: raise it, the live members checkpointed),
    ``updated`` (after each update's callbacks), ``end``, ``failed`` (an error with what survives), ``close``
    and ``trained`` (what ``steps`` returns: the agent, or each seed's)."""

    def start(self) -> list[M]: ...
    def update(self, live: list[M]) -> list[tuple[M, UpdateResult]]: ...
    def stopping(self, member: M, result: UpdateResult) -> None: ...
    def leave(self, members: list[M]) -> None: ...
    def interrupt(self, live: list[M], first: TrainingInterrupted) -> None: ...
    def updated(self, live: list[M], updated: list[tuple[M, UpdateResult]]) -> None: ...
    def end(self) -> None: ...
    def failed(self, e: Exception) -> Exception: ...
    def close(self) -> None: ...
    def trained(self) -> Any: ...


def steps(run: Driven[M]) -> Generator[tuple[M, UpdateResult], None, Any]:
    """Train ``run`` to its last update, or until its members' callbacks stop them, one update at a time: yields
    ``(member, result)`` of each member after each update's callbacks (``member.callbacks``), returns
    ``run.trained()``. An env that fails, or a NaN, ends the run with one line saying what survives of it: of
    the member whose callbacks raised it (``member.failed``), else of the run."""
    live = run.start()
    started: list[M] = []
    at: M | None = None  # the member whose callbacks run now
    try:
        for at in live:
            started.append(at)
            for callback in at.callbacks:
                callback.on_train_start(at)
        at = None
        start = time.perf_counter() - live[0].elapsed
        while live and live[0].updates_done < live[0].args.num_updates:
            updated = run.update(live)
            elapsed = time.perf_counter() - start
            stopping: list[M] = []
            interrupted: list[TrainingInterrupted] = []
            for at, result in updated:
                at.elapsed, step = elapsed, at.global_step
                result.record = {
                    "global_step": step,
                    "time_s": elapsed,
                    "sps": step / elapsed,
                    **result.record,
                }
                try:  # a list, not any()'s shortcut: each callback sees every update
                    if any([callback.on_update_end(at, result) for callback in at.callbacks]):
                        run.stopping(at, result)
                        stopping.append(at)
                except TrainingInterrupted as e:
                    interrupted.append(e)
            at = None
            if interrupted:  # the members that stopped end, the others checkpoint: the run stops
                run.leave(stopping)
                run.interrupt([m for m in live if m not in stopping], interrupted[0])
            yield from updated
            run.leave(stopping)
            live = [m for m in live if m not in stopping]
            run.updated(live, updated)
        run.leave(live)
        run.end()
    except (EnvError, NonFiniteError) as e:
        raise (run if at is None else at).failed(e) from e
    except (DiskFullError, FileAccessError) as e:
        raise (run if at is None else at).failed(e) from None
    finally:
        run.close()
        for member in reversed(started):
            for callback in reversed(member.callbacks):
                callback.close(member)
    return run.trained()


class Run:
    """One training run: its parts (envs, model, optimizer, schedules, collector), its counters, and one
    iteration of the loop; to its callbacks, a ``proxima.run.callbacks.RunView``, which describes what it holds."""

    def __init__(
        self,
        args: PPOArgs,
        envs,
        run_dir: str,
        device: torch.device,
        console: ProgressReport | None = None,
        logger: RunLogger | None = None,
        env: object = None,
    ):
        self.args, self.envs, self.run_dir, self.device, self.env = args, envs, run_dir, device, env
        head, algo = make_head(envs.single_action_space, args.network.action_dist), args.algorithm
        self.model = make_policy(network_spec(args, envs), head, env_spaces(envs)).to(device)
        groups = self.model.param_groups(algo.learning_rate, algo.value_learning_rate)
        self.optimizer = make_adam(groups, algo.learning_rate, eps=algo.adam_eps)
        # your functions in the loop, adapted and checked (proxima.algo.custom); a run without any: proxima's own
        yours = in_the_loop(args, get_algorithm(algo.algo), self.model)
        self.settings = UpdateSettings.from_args(args, yours.terms)
        self.estimator = yours.estimator
        self.schedules = Schedules.from_args(args)
        value_lr = algo.value_learning_rate if len(self.optimizer.param_groups) > 1 else None
        self._value_lr_ratio = None if value_lr is None else value_lr / algo.learning_rate
        self._lrs: list[float] | None = None  # the rates _apply put into the optimizer
        self.streams = seeding.RunStreams(args.run.seed, device)  # after the initialization, which drew
        self.collector: Collector = self._make_collector()
        self.agent = Agent(
            self.model, args.env.env_id, envs.single_observation_space, envs.single_action_space
        )
        self.updates_done = self.global_step = 0
        self.elapsed = 0.0
        self._apply()
        self.notes: list[str] = [*yours.notes]  # shown when training starts
        self.callbacks: list[Callback] = []
        self.logger = RunLogger(run_dir, args.flat()) if logger is None else logger
        # last: a progress bar starts as it is made
        self.console = console or ProgressReport(
            args.num_updates * args.batch_size, args.num_updates, quiet=args.run.quiet
        )

    def _make_collector(self) -> Collector:
        algo, seed, own = self.args.algorithm, self.args.run.seed, getattr(self.envs, "make_collector", None)
        if own is not None:  # envs on Ray actors (proxima.scale.rollout_workers) bring their collector
            return own(
                algo.num_steps, algo.gamma, self.model, seed, say=lambda text: self.console.message(text)
            )
        collector, options = collector_of(self.envs, self.args)
        return collector(
            self.envs,
            algo.num_steps,
            algo.gamma,
            self.model,
            seed=seed,
            generator=self.streams.actions,
            **options,
        )

    def set(self, **values) -> None:
        """``RunView.set``: ``run.set(ent_coef=0.001, learning_rate=1e-4)`` in a callback's ``on_update_end``. A
        setting with a schedule goes on linearly from the new value to its end value (``proxima.algo.schedules``);
        with ``--value-learning-rate``, the critic's rate keeps its ratio to ``learning_rate`` (docs/TRAINING.md)."""
        self.schedules.set(self.updates_done, values, self._value_lr_ratio)
        self._apply()

    @property
    def in_force(self) -> dict:
        return {
            "learning_rate": self.optimizer.param_groups[0]["lr"],
            **{name: getattr(self.settings, name) for name in ADJUSTABLE[1:]},
        }

    def _apply(self) -> dict:
        """Put the values in force at this update into the optimizer and ``settings``; return those that have a
        line (``proxima.algo.schedules``). A learning rate changed in the optimizer behind ``set``'s back would be
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
        buf, advantages, returns = rollout(
            self.collector, self.model, args, self.updates_done + 1, self.estimator
        )
        batch = (buf.sequences if args.network.recurrent else buf.flatten)(advantages, returns)
        stats = self.learn(batch)
        stats.update(buf.diagnostics(self.model, batch))  # a multi-agent run's: each network's
        return self.result(buf, batch, stats, learning_rate, in_force)

    def learn(self, batch) -> dict:
        """The update's gradient steps on ``batch``; their debug variables. A run on many processes
        (``proxima.scale.distributed``) has each rank learn on its share of every minibatch instead."""
        return update(self.model, self.optimizer, batch, self.settings, self.streams.minibatches)

    def result(self, buf, batch, stats: dict, learning_rate: float, in_force: dict) -> UpdateResult:
        """Count the update done; return what the callbacks get of it."""
        self.updates_done += 1
        self.global_step += self.args.batch_size
        self._apply()  # the next update's values, in place for the callbacks and the checkpoint
        episode_returns, episode_lengths = buf.finished_episodes()
        samples, _ = batch.samples()
        values, returns = samples.values, samples.returns
        record = {  # after steps' global_step, time_s and sps
            "learning_rate": learning_rate,
            # the values in force of the settings that changed or change (a run without any logs none of them)
            **{name: in_force[name] for name in ADJUSTABLE[1:] if name in in_force},
            **stats,
            "explained_variance": explained_variance(values, returns),
            "episodic_return": float(np.mean(episode_returns)) if episode_returns else None,
            "episodic_length": float(np.mean(episode_lengths)) if episode_lengths else None,
            **buf.breakdown(),  # a multi-agent run's: each agent's episodic return
        }
        return UpdateResult(
            record,
            episode_returns,
            episode_lengths,
            *spreads(values, returns),
            episode_infos=buf.finished_infos(),
        )

    # --- the seams of steps (a SeedGroup has its own) --------------------------------------------------------
    def start(self) -> list[Run]:
        infos = wanted_infos(self.callbacks)
        if infos is not None:  # else the envs never carry an info, and a step costs what it did without them
            self.collector.keep_infos(infos)
        for note in self.notes:
            self.console.message(note)
        return [self]

    def update(self, live: list[Run]) -> list[tuple[Run, UpdateResult]]:
        return [(self, self.iterate())]

    def stopping(self, member: Run, result: UpdateResult) -> None:
        pass

    def leave(self, members: list[Run]) -> None:
        for member in members:
            finish(member)

    def interrupt(self, live: list[Run], first: TrainingInterrupted) -> None:
        raise first

    def updated(self, live: list[Run], updated: list[tuple[Run, UpdateResult]]) -> None:
        pass

    def end(self) -> None:
        self.console.message(f"saved agent to {self.run_dir}")

    def failed(self, e: Exception) -> Exception:
        if isinstance(e, EnvError | NonFiniteError):
            crashed = isinstance(e, EnvError)  # a crash may not recur; a NaN would, from the same state
            where = f" in update {self.updates_done + 1}" if crashed else ""
            return type(e)(f"{e}{where}; {checkpoint.last_checkpoint_note(self.run_dir, resumable=crashed)}")
        how = "free space" if isinstance(e, DiskFullError) else f"make {self.run_dir} writable"
        return type(e)(
            f"{e}; {checkpoint.last_checkpoint_note(self.run_dir, how=f'{how}, then continue with')}"
        )

    def close(self) -> None:
        self.console.close()

    def trained(self) -> Agent:
        return self.agent

    # --- the checkpoint's share of the run (proxima.run.checkpoint owns the file) ---------------------------
    def checkpoint_state(self, finished: bool = False) -> tuple[dict, dict]:
        """What a checkpoint holds of the run: its header (counters, ``finished``, spaces) and every component's
        state by name, the run's own (``state_dict``) and then each stateful callback's."""
        states = self.state_dict()
        for callback in self.callbacks:
            key = callback.state_key
            if key is not None:
                if key in states:
                    raise ValueError(f"two checkpoint components are named {key!r}")
                states[key] = callback.state_dict()
        return {
            "update": self.updates_done,
            "global_step": self.global_step,
            "elapsed_s": self.elapsed,
            "torch_threads": torch.get_num_threads(),
            "finished": finished,
            "spaces": self.spaces(),
        }, states

    def save_checkpoint(self, finished: bool = False) -> None:
        """Write ``RUN_DIR/checkpoint.safetensors`` (atomically) as the run stands."""
        write_checkpoint(
            os.path.join(self.run_dir, CHECKPOINT), *checkpoint.snapshot(*self.checkpoint_state(finished))
        )

    def restore(self, path: str, meta: dict, states: dict) -> None:
        """Put the run and its callbacks in the state of ``path``'s checkpoint (``checkpoint.read``'s output),
        each tensor checked against the run's own first."""
        checkpoint.check_fits(path, meta, states, self.spaces(), self.state_dict(), self.args.env.env_id)
        with checkpoint.fitting(path):
            self.load_state_dict(meta, states)
            for callback in self.callbacks:
                if callback.state_key in states:
                    callback.load_state_dict(states[callback.state_key])

    def spaces(self) -> dict:
        return {
            "observation_space": space_to_json(self.envs.single_observation_space),
            "action_space": space_to_json(self.envs.single_action_space),
        }

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "settings": self.schedules.state_dict(),
            "collector": self.collector.state_dict(),  # None: the envs cannot be captured
            "rng": self.streams.state_dict(),
        }

    def load_state_dict(self, meta: dict, states: dict) -> None:
        load_module_state(self.model, states["model"], CHECKPOINT)
        self.optimizer.load_state_dict(states["optimizer"])
        self.schedules.load_state_dict(states["settings"])
        self.streams.load_state_dict(states["rng"])
        if states["collector"] is not None:
            self.collector.load_state_dict(states["collector"])
        else:  # new episodes, from a seed the run has not used yet
            self.collector.restart(seed=seeding.resumed_episodes(self.args.run.seed, meta["global_step"]))
        self.updates_done, self.global_step = meta["update"], meta["global_step"]
        self.elapsed, self._lrs = meta["elapsed_s"], None  # the optimizer's rates are the checkpoint's
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


def rollout(
    collector: Collector, model, args: PPOArgs, update: int, estimator: str | Estimator | None = None
) -> tuple:
    """``(buffer, advantages, returns)`` of update ``update``'s rollout, checked for NaNs (returns: the value
    targets); ``estimator``: the run's (your compute_advantages, adapted), else the one ``--advantage`` names."""
    next_value, next_done = collector.collect(model)
    buf = collector.buffer
    check_rollout(buf, update)
    algo = args.algorithm
    estimator = algo.advantage if estimator is None else estimator
    advantages = buf.advantages(estimator, next_value, next_done, algo.gamma, algo.gae_lambda)
    return buf, advantages, advantages + buf.values


def finish(run: Run) -> None:
    """A member that ends: its agent saved, its callbacks' ``on_train_end``."""
    run.agent.save(run.run_dir, global_step=run.global_step)
    for callback in run.callbacks:
        callback.on_train_end(run)


def init_from_agent(run: Run, source: str) -> None:
    """Start ``run`` from the weights and normalization statistics of the agent saved in ``source`` (a run
    directory, or its ``best``), whose spaces and network must be the run's."""
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
    their_net, our_net = (
        {**dataclasses.asdict(spec), **dataclasses.asdict(spec.network), "network": None}
        for spec in (agent.model.spec, run.model.spec)
    )
    # the precision a CNN computes in is not part of what it is, nor the statistics' horizon
    for name in our_net:
        if name not in ("precision", "value_norm_horizon") and their_net.get(name) != our_net[name]:
            raise UserError(
                f"--init-from {source}: its agent's network has {name} {show_value(their_net.get(name))}, this "
                f"run's {show_value(our_net[name])}; give the network settings of that run (its config.json)"
            )
    load_module_state(run.model, agent.model.state_dict(), os.path.join(source, WEIGHTS))


def network_spec(args: PPOArgs, envs) -> NetworkSpec:
    """The run's network settings, with what the envs and the algorithm decide (the encoder ``auto`` stands for)."""
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


def default_run_dir(args: PPOArgs) -> str:
    """The PPO tutorial's run name under ``runs/``, with a count after it where runs started in the same second
    (a loop of short runs) would otherwise share it."""
    env_name = re.sub(r"[^\w.-]", "_", args.env.env_id)  # an id's / and :, an env object's <lambda>
    path = os.path.join("runs", f"{env_name}__{args.run.exp_name}__{args.run.seed}__{int(time.time())}")
    taken, count = path, 1
    while os.path.exists(taken):
        count += 1
        taken = f"{path}_{count}"
    return taken


def check_run_dir_free(run_dir: str) -> None:
    """Refuse a ``run_dir`` that holds anything but its lock: taken before, so that of two runs started into
    one new directory only the first finds it free."""
    names = set(os.listdir(run_dir)) - {LOCK} if os.path.isdir(run_dir) else set()
    if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or names):
        stopped = {CONFIG_JSON, SEEDS_JSON} & names
        if stopped and not {CHECKPOINT, AGENT_JSON} & names:
            raise UserError(
                f"run directory {run_dir!r} holds a run that stopped before its first checkpoint; remove it, or "
                "give --resume-if-exists, which starts such a run again"
            )
        raise UserError(f"run directory {run_dir!r} already exists and is not empty; give a new --run-dir")


def setup(args: PPOArgs) -> tuple[torch.device, list[str]]:
    """The device and the seeds; returns the device and notes for the console."""
    device = torch.device("cuda" if args.run.cuda and torch.cuda.is_available() else "cpu")
    seeding.seed_globals(args.run.seed, args.run.torch_deterministic)
    if args.run.cuda and device.type == "cpu":
        return device, [
            "note: no GPU is available, so training runs on the CPU (--no-cuda says so and hides this)"
        ]
    return device, []


def resolve_args_precision(args: PPOArgs, envs, device: torch.device) -> PPOArgs:
    """``--precision auto`` made concrete: bfloat16 where the device computes it natively and the agent has a
    CNN, float32 elsewhere. An agent without images computes its MLPs in bf16 only when asked by name: their
    speed-up depends on their size (nothing for CartPole's 64-64), and it rounds every layer's output."""
    requested = args.network.precision
    if obs_layout(envs).has_images:
        return args.replace(precision=resolve_precision(requested, device))
    return args.replace(precision="bfloat16" if requested == "bfloat16" else "float32")


def thread_notes(args: PPOArgs, envs, saved: int | None = None) -> list[str]:
    """Set torch's thread count for the run (``proxima.run.threads``); a resumed run keeps its ``saved`` one unless
    given another (``--resume RUN_DIR --torch-threads N``)."""
    images = obs_layout(envs).has_images
    count, why = choose_threads(
        args.run.torch_threads, args.samples_per_minibatch, saved=saved, images=images
    )
    torch.set_num_threads(count)
    if saved is not None and count != saved:
        why = (
            f"note: the run trained with {saved} torch thread(s) and goes on with {count}: its updates round "
            "differently from here on, so it will not be the run it would have been uninterrupted"
        )
    return [why] if why else []


def take_env(env, args: PPOArgs | None, overrides: dict):
    """The env object of ``train(env=...)``, or of an ``env_id`` (keyword or ``PPOArgs``) that is not an id
    string, with the ``args`` and ``overrides`` that record it: its label as ``env_id`` and ``env_factory``."""
    if args is not None and is_env_object(args.env.env_id):
        env, args = (args.env.env_id if env is None else env), args.replace(env_id="")
    given = is_env_object(overrides.get("env_id"))
    if given:
        env, given = overrides.pop("env_id"), env is not None
    elif env is not None:
        given = "env_id" in overrides if isinstance(env, str) else bool(overrides.get("env_id"))
    if given:
        raise UserError("give the env once: as env= or as env_id=, not both")
    if env is None or isinstance(env, str):
        return None, args, overrides if env is None else {**overrides, "env_id": env}
    label, factory = describe_env(env)
    overrides = {**overrides, "env_id": label, "env_factory": factory}
    if isinstance(env, gym.vector.VectorEnv):
        made = made_from_id(env)
        asked = overrides.get("env_kwargs") or (args is not None and args.env.env_kwargs)
        if made is not None and not asked:  # kwargs given besides are refused as the envs are made
            overrides["env_kwargs"] = made[1]  # recorded with the id, for the envs that it makes again
        if overrides.get("num_envs", env.num_envs) != env.num_envs:
            raise UserError(
                f"num_envs is {overrides['num_envs']}, but the VectorEnv given has {env.num_envs} envs"
            )
        overrides["num_envs"] = env.num_envs
    return env, args, overrides


def env_of(args: PPOArgs, env, what: str = "the run"):
    """What the run's envs are made from: ``env`` where given, else the factory that ``args.env.env_factory`` names
    (imported again), else None (``args.env.env_id``). What a run on a user's VectorEnv cannot do is refused here."""
    if env is None and args.env.env_factory is not None:
        env = load_env_factory(args.env.env_factory, what)
    if isinstance(env, gym.vector.VectorEnv):
        asked = [
            flag
            for flag, on in (
                ("--eval-every", args.run.eval_every),
                ("--rollout-workers", args.env.rollout_workers),
            )
            if on
        ]
        if asked:
            raise UserError(
                f"{asked[0]} makes envs of its own, which a VectorEnv instance cannot give; pass env= a class or "
                "function that returns one gymnasium.Env instead"
            )
        if env.num_envs != args.env.num_envs:
            raise UserError(
                f"num_envs is {args.env.num_envs}, but the VectorEnv given has {env.num_envs} envs"
            )
    return env


def run_video_dir(run_dir: str, resumed: dict | None = None) -> str:
    """Where ``--capture-video`` records: ``RUN_DIR/videos``, and a resumed part of the run in a folder of its
    own there, since Gymnasium's recorder numbers a new process's episodes from 0 again."""
    return os.path.join(
        run_dir, VIDEOS, "" if resumed is None else f"resumed-after-update-{resumed['update']}"
    )
