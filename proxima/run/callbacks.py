"""Callbacks: everything a run does besides rollout → advantages → update (docs/ARCHITECTURE.md).

The loop (``proxima.run.loop.steps``) calls each hook of ``Callback`` for every callback in order (``close`` in
reverse), with ``run``, a ``RunView``. Users pass their own to ``proxima.train(..., callbacks=[...])``; they run
after ``Evaluation`` and before the built-in ones that log and checkpoint (docs/CALLBACKS.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from proxima.base import seeding
from proxima.base.errors import DiskFullError, NonFiniteError, TrainingInterrupted, UserError, raised
from proxima.base.files import BEST, CANDIDATES, EPISODES, LEARNING_CURVE, METRICS, REPORT, VIDEOS
from proxima.envs import make_envs
from proxima.envs.interface import InfoKeys, VecEnv, merge_info_keys
from proxima.envs.registry import resolve_backend
from proxima.envs.selfplay import is_selfplay_id
from proxima.policy.distributions import DiagGaussianHead
from proxima.policy.networks import ActorCritic
from proxima.policy.stacked import plain_mlps
from proxima.run.agent import Agent
from proxima.run.config import PPOArgs
from proxima.run.evaluate import deterministic_returns, run_episodes
from proxima.run.health import HealthMonitor, HealthWarning
from proxima.run.logger import RunLogger, info_number, log_session
from proxima.run.progress import ProgressReport
from proxima.run.report import REWRITE_S, write_report
from proxima.run.rollout import Collector
from proxima.run.selfplay import OpponentPool


@dataclass
class UpdateResult:
    """What one update produced, passed to every callback's ``on_update_end``."""

    record: dict
    """metrics.jsonl's line for this update (global_step, time_s, sps, losses, ...)"""
    episode_returns: list[float]
    """of the episodes that ended during the rollout, in time order"""
    episode_lengths: list[int]
    return_spread: float
    """std / mean |value target| of the batch"""
    value_spread: float
    """std of the predicted values / std of the targets"""
    warnings: list[HealthWarning] = field(default_factory=list)
    """filled by Health, shown and logged after"""
    episode_infos: list[dict] = field(default_factory=list)
    """The info at the end of each of episode_returns' episodes, in the same order ({} where the env gave
    none): the keys that --log-info and the callbacks' info_keys ask for, all of it if one asks for "all";
    [] when nobody asks, for then the rollout collects none."""


class RunView(Protocol):
    """What a callback sees of its run (``proxima.run.loop.Run`` is one; each seed of a ``--num-seeds`` run is
    another). Everything but ``set`` is read-only: a callback changes the run through ``set``, its own state,
    the envs (``envs.call``, ``envs.set_attr``: docs/CALLBACKS.md) or the model's own methods."""

    @property
    def args(self) -> PPOArgs:
        """The run's settings, as its config.json holds them (``in_force`` has those that ``set`` changed)."""

    @property
    def run_dir(self) -> str:
        """The run's directory: its logs, checkpoint, agent and ``best/``."""

    @property
    def device(self) -> Any:
        """The ``torch.device`` the model is on."""

    @property
    def env(self) -> Any:
        """The env object of ``train(env=...)``, to make envs of one's own from; None: ``args.env.env_id``."""

    @property
    def envs(self) -> VecEnv:
        """The training envs, one vector env."""

    @property
    def model(self) -> ActorCritic:
        """The network being trained."""

    @property
    def agent(self) -> Agent:
        """The model with its spaces, as ``proxima.load`` gives it; ``agent.save(dir)`` saves it."""

    @property
    def optimizer(self) -> Any:
        """The run's ``torch.optim`` optimizer (its rates are ``set``'s to change)."""

    @property
    def collector(self) -> Collector:
        """What makes the rollouts; ``collector.buffer`` holds the last one (time-major tensors)."""

    @property
    def console(self) -> ProgressReport:
        """``console.message(text)`` prints a line above the progress bar (nothing with ``--quiet``)."""

    @property
    def logger(self) -> RunLogger:
        """The run's logs (metrics.jsonl, episodes.jsonl, TensorBoard), open from ``Logging.on_train_start``."""

    @property
    def callbacks(self) -> Sequence[Callback]:
        """Every callback of the run, in the order they are called."""

    @property
    def updates_done(self) -> int:
        """The updates done so far, this one included in ``on_update_end``."""

    @property
    def global_step(self) -> int:
        """The env steps done so far (``updates_done * args.batch_size``)."""

    @property
    def in_force(self) -> dict:
        """The values of ``set``'s settings that the next update will use."""

    def set(self, **values: float) -> None:
        """Change settings from the next update on: learning_rate, ent_coef, clip_coef, vf_coef,
        max_grad_norm and target_kl (docs/TRAINING.md)."""

    def save_checkpoint(self, finished: bool = False) -> None:
        """Write the run's checkpoint (``RUN_DIR/checkpoint.safetensors``, ``proxima.run.checkpoint``) as it stands;
        ``finished``: the run has nothing left to train."""


class Callback:
    """Base class: every hook does nothing. Override the ones you need."""

    state_key: str | None = None
    """Given: checkpoints save ``state_dict()`` under this key, and a resumed run restores it."""
    info_keys: InfoKeys = ()
    """The info keys this callback reads in result.episode_infos: a tuple of keys, or "all" for the whole info
    dicts; () asks for none (docs/CALLBACKS.md)."""

    def on_train_start(self, run: RunView) -> None:
        """Before the first update of this session: at the start, and again when a run resumes."""

    def on_update_end(self, run: RunView, result: UpdateResult) -> bool | None:
        """After each update; keys added to ``result.record`` are logged. Return True to stop training after this
        update (every callback still sees it, and the final agent is saved as usual)."""
        return None

    def on_train_end(self, run: RunView) -> None:
        """After the last update, once the agent is saved (not when training failed)."""

    def close(self, run: RunView) -> None:
        """Always, last, in reverse order of the callbacks: release what the callback holds."""

    def state_dict(self) -> dict:
        """What checkpoints save of this callback, under ``state_key`` (JSON-compatible values or tensors)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned, when a run with this ``state_key`` resumes."""


SB3_HOOKS = (
    "_on_step",
    "on_step",
    "_on_rollout_end",
    "on_rollout_end",
    "_on_training_start",
    "_on_training_end",
)


def user_callbacks(callbacks) -> list[Callback]:
    """``train(callbacks=...)`` as a list (one ``Callback`` alone is taken as a list of it, as SB3 takes it), or
    a ``UserError`` before the run starts for what would fail or be ignored during it: an object that is not a
    ``Callback``, state that checkpoints would not save (no ``state_key``), or SB3's hooks, never called here."""
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        callbacks = [callbacks]
    if not isinstance(callbacks, list | tuple):
        raise UserError(
            f"callbacks is {type(callbacks).__name__}; give a list of proxima.run.callbacks.Callback objects"
        )
    for i, callback in enumerate(callbacks):
        name = type(callback).__name__
        if not isinstance(callback, Callback):
            raise UserError(
                f"callbacks[{i}] is {name}, not a proxima.Callback: subclass Callback and override "
                "on_update_end(self, run, result) (docs/CALLBACKS.md)"
            )
        if type(callback).state_dict is not Callback.state_dict and callback.state_key is None:
            raise UserError(
                f"{name} has a state_dict but no state_key, so checkpoints would not save its state; give it a "
                "state_key (a name no other callback of the run has)"
            )
        hooks = [h for h in SB3_HOOKS if hasattr(callback, h)]
        if hooks:
            raise UserError(
                f"{name} defines {hooks[0]}, which proxima never calls (it is Stable-Baselines3's); proxima's "
                "hooks are on_train_start, on_update_end(run, result) after each update, on_train_end and close"
            )
    return list(callbacks)


class Evaluation(Callback):
    """``--eval-every``: the deterministic policy on fresh episodes of the training backend, logged as
    ``eval_return``; ``--stop-return`` ends training when it is reached, ``--save-best`` keeps the best agent
    so far in ``RUN_DIR/best``. Its envs are seeded apart from the training envs', and every evaluation
    starts from the same states, so evaluations are comparable."""

    state_key = "evaluation"

    def __init__(
        self,
        every: int,
        episodes: int,
        stop_return: float | None = None,
        save_best: bool = False,
        rescore: int = 0,
        rescore_episodes: int = 100,
    ):
        self.every, self.episodes, self.stop_return, self.save_best = every, episodes, stop_return, save_best
        self.rescore, self.rescore_episodes = rescore, rescore_episodes
        self.best_return: float | None = None  # the eval_return of RUN_DIR/best
        # [eval_return, global_step] of the agents kept for rescoring, best first
        self.candidates: list[list] = []
        self.envs: VecEnv | None = None
        self.rescore_envs: VecEnv | None = None
        # A batched run (--num-seeds) plays its seeds' evaluations at once and leaves each seed's returns here
        # (at the end: its candidates and their rescoring returns)
        self.given: Any = None

    def on_train_start(self, run: RunView) -> None:
        self.open(run.args, run.device, run.env)

    def open(self, args, device, env=None) -> None:
        """The evaluation envs of a run with settings ``args`` (of ``env``, the run's env object, where given)."""
        source, backend = args.env.env_id if env is None else env, args.env.env_backend
        if env is None:  # auto's choice hangs on the env count: the rescoring's envs play on this one too
            backend = resolve_backend(
                source, backend, num_envs=self.episodes, env_kwargs=bool(args.env.env_kwargs)
            )
        self.make = functools.partial(
            make_envs, source, env_kwargs=args.env.env_kwargs, backend=backend, device=device
        )
        self.envs = self.make(self.episodes)
        self.seed, self.env_id = seeding.evaluation(args.run.seed), args.env.env_id
        self.rescore_seed = seeding.rescore(args.run.seed)

    def evaluate(self, model) -> np.ndarray:
        """The returns of ``episodes`` deterministic episodes, from the same starting states each time."""
        if self.given is not None:
            returns, self.given = self.given, None
            return returns
        assert self.envs is not None, "opened in on_train_start"
        return run_episodes(
            model, self.envs, self.episodes, deterministic=True, seed=self.seed, name=self.env_id
        )

    def on_update_end(self, run: RunView, result: UpdateResult) -> bool:
        if run.updates_done % self.every:
            return False
        result.record["eval_return"] = value = float(self.evaluate(run.model).mean())
        if self.save_best and (self.best_return is None or value > self.best_return):
            self.best_return = value
            run.agent.save(os.path.join(run.run_dir, BEST), global_step=run.global_step, eval_return=value)
        if self.rescore and (len(self.candidates) < self.rescore or value > self.candidates[-1][0]):
            # a candidate for rescoring, pushing the last one out of the K best
            run.agent.save(
                self._candidate_dir(run, run.global_step), global_step=run.global_step, eval_return=value
            )
            self.candidates.append([value, run.global_step])
            self.candidates.sort(key=lambda c: -c[0])  # stable: of equal evaluations the earlier agent stays
            for _, step in self.candidates[self.rescore :]:
                shutil.rmtree(self._candidate_dir(run, step), ignore_errors=True)
            del self.candidates[self.rescore :]
        if self.stop_return is not None and value >= self.stop_return:
            run.console.message(f"stopping: eval_return {value:.1f} >= stop_return {self.stop_return}")
            return True
        return False

    def candidate_agents(self, run: RunView) -> dict:
        """The agents kept for rescoring, by the step they were saved at (best evaluation first)."""
        return {
            step: Agent.load(self._candidate_dir(run, step), device=run.device) for _, step in self.candidates
        }

    def on_train_end(self, run: RunView) -> None:
        if not self.rescore or not self.candidates:
            return
        # other episodes than the evaluations' (seed) and proxima eval's (args.run.seed)
        if self.given is not None:  # a batched run played them for several seeds at once
            (agents, rescored), self.given = self.given, None
        else:
            agents = self.candidate_agents(run)
            rescored = self._rescore([agents[step].model for _, step in self.candidates])
        scored = [
            {"global_step": step, "eval_return": value, "rescore_return": float(returns.mean())}
            for (value, step), returns in zip(self.candidates, rescored, strict=True)
        ]
        winner = max(scored, key=lambda c: c["rescore_return"])  # the first of equals: the higher evaluation
        agents[winner["global_step"]].save(
            os.path.join(run.run_dir, BEST),
            global_step=winner["global_step"],
            eval_return=winner["eval_return"],
            rescore_return=winner["rescore_return"],
            rescore_episodes=self.rescore_episodes,
            rescored=scored,
        )
        shutil.rmtree(os.path.join(run.run_dir, CANDIDATES))
        self.candidates = []  # a run continued to more steps (--total-timesteps) rescores its own agents
        run.console.message(
            f"best: the agent of step {winner['global_step']:,}, {winner['rescore_return']:.1f} over "
            f"{self.rescore_episodes} episodes, the highest of the {len(scored)} best evaluations rescored"
        )

    def _rescore(self, models: list) -> list[np.ndarray]:
        """Each candidate's returns on the rescoring episodes: an agent of plain MLPs' all played at once, on one
        vector env of every candidate's envs (the same episodes as one at a time, a fraction of the steps' fixed
        costs: its stacked forward pass is a few batched matmuls); any other agent's one after another (stacked
        through vmap, a CNN's or a critic-less agent's took longer than apart), as a self-play env's (one seed
        for all its games, whose opponents draw from one generator)."""
        assert self.envs is not None, "opened in on_train_start"
        envs, episodes, seed, name = self.envs, self.rescore_episodes, self.rescore_seed, self.env_id
        if len(models) > 1 and plain_mlps(models[0]) and not is_selfplay_id(name):
            return deterministic_returns(
                models, self._made, episodes, envs.num_envs, [seed] * len(models), name
            )
        return [run_episodes(m, envs, episodes, deterministic=True, seed=seed, name=name) for m in models]

    def _made(self, n: int):
        """A vector env of ``n`` envs, closed with the evaluation's (or when a later rescoring makes another)."""
        if self.rescore_envs is not None:
            self.rescore_envs.close()
        self.rescore_envs = self.make(n)
        return self.rescore_envs

    @staticmethod
    def _candidate_dir(run: RunView, step: int) -> str:
        return os.path.join(run.run_dir, CANDIDATES, f"step-{step}")

    def close(self, run: RunView) -> None:
        for envs in (self.envs, self.rescore_envs):
            if envs is not None:
                envs.close()

    def state_dict(self) -> dict:
        return {"best_return": self.best_return, "candidates": self.candidates}

    def load_state_dict(self, state: dict) -> None:
        self.best_return = state["best_return"]
        # each step names the directory candidates/step-N that a later evaluation removes: a whole number only
        for candidate in state["candidates"]:
            if not (isinstance(candidate, list) and len(candidate) == 2 and type(candidate[1]) is int):
                raise ValueError(f"a candidate for rescoring is [eval_return, step], got {candidate!r}")
        self.candidates = state["candidates"]


class Health(HealthMonitor, Callback):
    """Warnings on the debug variables that usually mean trouble (docs/HEALTH.md), and a count at the end; its
    state is the monitor's."""

    state_key = "health"

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        result.warnings += self.check(
            run.updates_done, result.record, result.return_spread, result.value_spread
        )

    def on_train_end(self, run: RunView) -> None:
        for line in self.summary(run.updates_done):
            run.console.message(f"health: {line}")


class Logging(Callback):
    """``metrics.jsonl``, ``episodes.jsonl``, TensorBoard and, with ``--track``, Weights & Biases: opens
    ``run.logger`` and writes each update to it. A resumed run continues the logs from where its checkpoint
    says they ended."""

    state_key = "logging"

    def __init__(self, log_info: tuple[str, ...] = ()):
        self.info_keys = log_info  # --log-info: the mean of each at the episodes' ends, as info/KEY
        self._info_said: set[str] = set()  # the keys whose problem was said once already
        self.resume_from: dict | None = None
        self.wandb_id: str | None = None
        self.wandb_run: Any = None  # wandb.Run, of an optional package
        # A batched run (--num-seeds) names its group here: each seed's W&B run joins it, and is logged to by the
        # seed's logger itself, since W&B mirrors TensorBoard into the process's one global run only.
        self.wandb_group: str | None = None
        self.logger: RunLogger | None = None
        self.global_step = 0  # of the last update logged: where the logs' offsets stand

    def on_train_start(self, run: RunView) -> None:
        # before TensorBoard, which it mirrors; a resumed run continues the same W&B run
        if run.args.run.track:
            self.wandb_run = _init_wandb(run.args, run.run_dir, self.wandb_id, self.wandb_group)
            self.wandb_id = self.wandb_run.id
        wandb_run = self.wandb_run if self.wandb_group is not None else None
        self.logger = run.logger.open(resume_from=self.resume_from, wandb_run=wandb_run)
        self.global_step = run.global_step
        log_session(run.run_dir, run.global_step, str(run.device), torch.get_num_threads())

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        self.global_step = run.global_step
        if self.info_keys:
            self._log_infos(run, result)
        run.logger.log_update(result.record, [w._asdict() for w in result.warnings])
        run.logger.log_episodes(run.global_step, result.episode_returns, result.episode_lengths)
        for warning in result.warnings:
            run.logger.text(f"health/{warning.kind}", warning.text, run.global_step)

    def _log_infos(self, run: RunView, result: UpdateResult) -> None:
        """``info/KEY``: the mean of ``info[KEY]`` over the episodes that ended (None where none did, or none
        gave a number). A key no ended episode had, or one that is not a number, is said once."""
        infos = result.episode_infos
        for key in self.info_keys:
            values = [info[key] for info in infos if key in info]
            numbers = [x for x in map(info_number, values) if x is not None]
            result.record[f"info/{key}"] = float(np.mean(numbers)) if numbers else None
            if key in self._info_said or not infos or len(numbers) == len(values) > 0:
                continue
            self._info_said.add(key)
            if not values:
                seen = ", ".join(map(repr, sorted({k for info in infos for k in info})))
                had = f"of the keys asked for, they had {seen}" if seen else "nor any other key asked for"
                reports = getattr(run.collector, "reports_infos", True)
                where = (
                    "proxima check-env lists the env's keys"
                    if reports
                    else "this env backend reports no info"
                )
                run.console.message(
                    f"note: --log-info {key}: none of the {len(infos)} episodes that ended in update "
                    f"{run.updates_done} had info[{key!r}] ({had}; {where}); info/{key} stays empty until one does"
                )
            else:
                bad = next(v for v in values if info_number(v) is None)
                shown = repr(bad) if len(repr(bad)) <= 40 else repr(bad)[:37] + "..."
                run.console.message(
                    f"warning: --log-info {key}: info[{key!r}] is {type(bad).__name__} {shown}, not a "
                    f"number; info/{key} averages only the numbers (a bool counts as 0 or 1)"
                )

    def close(self, run: RunView) -> None:
        if self.logger is not None:
            self.logger.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()

    def state_dict(self) -> dict:
        assert self.logger is not None, "a run checkpoints once its logs are open"
        return {"offsets": self.logger.offsets(self.global_step), "wandb_id": self.wandb_id}

    def load_state_dict(self, state: dict) -> None:
        offsets = state["offsets"]
        if not all(isinstance(offsets.get(n), int) and offsets[n] >= 0 for n in (METRICS, EPISODES)):
            raise ValueError(f"the logs' ends are {offsets}, not byte counts")  # before a log is cut there
        self.resume_from, self.wandb_id = offsets, state["wandb_id"]


class NonFiniteStop(Callback):
    """Stops the run when an update's loss or gradients held a NaN or infinity (after it was logged, for the
    post-mortem); the rollout's own check happens before the update."""

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        where = result.record.get("non_finite")
        if where is not None:
            raise NonFiniteError(
                f"NaN or infinity in the {where} at update {run.updates_done}; training stopped"
            )


class Progress(Callback):
    """The console: a progress bar on terminals, a plain line every 5% elsewhere, the health warnings."""

    def __init__(self):
        self.shown = 0  # the last update whose line was printed
        self.last: UpdateResult | None = None

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        for warning in result.warnings:
            run.console.message(f"warning: {warning.text} (see docs/HEALTH.md, {warning.kind})")
        if run.console.update(run.updates_done, result.record, result.episode_returns):
            self.shown = run.updates_done
        self.last = result

    def on_train_end(self, run: RunView) -> None:
        if self.shown != run.updates_done and self.last is not None:  # stopped early: show where
            run.console.update(run.updates_done, self.last.record, [], force=True)
        run.console.close()


class Checkpointing(Callback):
    """``RUN_DIR/checkpoint.safetensors`` every ``every`` updates (0: only at the end), on Ctrl-C or SIGTERM
    (then the run stops with ``TrainingInterrupted``), and marked finished at the end. While training, either
    signal only sets a flag, read after each update so that the checkpoint is taken at a clean boundary; a
    second one interrupts at once, as usual. SIGTERM is how cluster schedulers (SLURM, Kubernetes) stop a job,
    with a grace period before they kill it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, every: int):
        self.every = every
        self.hits: list[int] = []
        self.previous: dict = {}

    def on_train_start(self, run: RunView) -> None:
        if threading.current_thread() is threading.main_thread():  # signals can only be caught there
            self.previous = {signum: signal.signal(signum, self._handler) for signum in self.SIGNALS}

    def _handler(self, signum, frame) -> None:
        if self.hits:
            raise KeyboardInterrupt
        self.hits.append(signum)

    def interrupt(self, signum: int) -> None:
        """Stop after this update as on ``signum``: for a run whose process got no signal of its own (a sweep's
        trial in a Ray worker is told through its sweep)."""
        if not self.hits:
            self.hits.append(signum)

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        if self.hits or (self.every and run.updates_done % self.every == 0):
            run.save_checkpoint()
        if self.hits:
            raise TrainingInterrupted(run.run_dir, run.updates_done, run.args.num_updates, self.hits[0])

    def on_train_end(self, run: RunView) -> None:
        run.save_checkpoint(finished=True)  # there is nothing left to resume

    def close(self, run: RunView) -> None:
        for signum, previous in self.previous.items():
            if previous is not None:  # None: not installed from Python, and not restorable from it
                signal.signal(signum, previous)
        self.previous = {}


class LearningCurve(Callback):
    """``RUN_DIR/learning_curve.png`` at the end (episodic return against env steps; the plot extra)."""

    def on_train_end(self, run: RunView) -> None:
        from proxima.run.plotting import plot_runs

        name = os.path.basename(os.path.normpath(run.run_dir))
        try:
            plot_runs({name: [run.run_dir]}, os.path.join(run.run_dir, LEARNING_CURVE))
        except (UserError, DiskFullError) as e:  # matplotlib is an extra; the run itself is complete
            run.console.message(f"no learning_curve.png: {e}")


class TensorBoardVideos(Callback):
    """``--capture-video``'s episodes in TensorBoard too (``videos/episode``, at the step they were found), as
    CleanRL's W&B runs show them. The recorder may write from another process (async envs), so a file is
    logged once its size has stayed the same for an update; at the end, whatever is there. Files already there
    when the run starts (a resumed run's earlier part) were logged by that part."""

    def __init__(self):
        self.done: set[str] = set()
        self.sizes: dict[str, int] = {}

    def _videos(self, run: RunView) -> list[str]:
        walk = os.walk(os.path.join(run.run_dir, VIDEOS))
        found = {os.path.join(root, f) for root, _, files in walk for f in files if f.endswith(".mp4")}
        return sorted(found - self.done, key=os.path.getmtime)

    def on_train_start(self, run: RunView) -> None:
        self.done.update(self._videos(run))

    def on_train_end(self, run: RunView) -> None:
        self.on_update_end(run, None, final=True)

    def on_update_end(self, run: RunView, result: UpdateResult | None, final: bool = False) -> None:
        for path in self._videos(run):
            size = os.path.getsize(path)
            if final or self.sizes.get(path) == size:
                try:
                    run.logger.video("videos/episode", path, run.global_step)
                except (UserError, OSError, RuntimeError) as e:  # a file cut short: the run goes on
                    run.console.message(f"video {path} not logged to TensorBoard: {raised(e)}")
                self.done.add(path)
            self.sizes[path] = size


class ReportPageWriter(Callback):
    """``RUN_DIR/report.html`` (``proxima report``) every ``every_s`` seconds and at the end, last of all, so that
    the page has this update's logs and the final checkpoint's verdict. A page reads the whole logs (benchmarks/report_cost.py
    measures it), so the pages of a long run come at least ``COST_RATIO`` times their cost apart: they never
    take more than 2% of its time."""

    COST_RATIO = 50

    def __init__(self, every_s: float):
        self.every_s, self.ended = every_s, False
        self.written = self.cost = 0.0

    def on_train_start(self, run: RunView) -> None:
        self.written = time.monotonic()  # the first page after every_s: a short run gets only its final one

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        if time.monotonic() - self.written >= max(self.every_s, self.COST_RATIO * self.cost):
            self._write(run)

    def on_train_end(self, run: RunView) -> None:
        self._write(run)
        self.ended = True

    def close(self, run: RunView) -> None:
        if not self.ended and os.path.exists(os.path.join(run.run_dir, METRICS)):
            self._write(run, "stopped")  # an env crashed, a NaN, Ctrl-C: the page says so and stops reloading

    def _write(self, run: RunView, status: str | None = None) -> None:
        start = time.monotonic()
        try:
            write_report([run.run_dir], os.path.join(run.run_dir, REPORT), status, live=True)
        except Exception as e:  # noqa: BLE001  the page only shows the logs: whatever fails, training goes on
            # a run that a full disk stopped has said so in its one line
            if not (isinstance(e, DiskFullError) and status == "stopped"):
                run.console.message(f"no report.html: {raised(e)}")
        self.written = time.monotonic()
        self.cost = self.written - start


class SelfPlay(OpponentPool, Callback):
    """The opponents of a ``selfplay:`` env: snapshots of the agent every ``--self-play-every`` updates, in
    ``RUN_DIR/snapshots`` (``proxima.run.selfplay``); its state is the pool's."""

    state_key = "self_play"

    def on_train_start(self, run: RunView) -> None:
        self.open(run.envs, run.run_dir, run.device)

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        if run.updates_done % self.every == 0:
            self.add(run.agent, run.updates_done, run.run_dir, run.global_step, run.device)
        result.record["self_play_opponents"] = len(self.members)


class StdCap(Callback):
    """``--action-std-end``: after each update, lower the Gaussian policy's std to a ceiling that falls from 1 to
    ``end`` over the run, evenly in log std. First of the callbacks, so that evaluations and checkpoints see the
    capped policy; the ceiling is logged as ``action_std_cap``."""

    def __init__(self, end: float):
        self.end = end

    def on_update_end(self, run: RunView, result: UpdateResult) -> None:
        cap = self.end ** (run.updates_done / run.args.num_updates)
        head = run.model.head
        assert isinstance(head, DiagGaussianHead), "--action-std-end is refused for any other head"
        head.cap_std(cap)
        result.record["action_std_cap"] = cap


def default_callbacks(run: RunView, user: Sequence[Callback] = ()) -> list[Callback]:
    """The built-in callbacks a run's settings ask for, in the order they must run, with ``user``'s after
    evaluation (so they see ``eval_return``) and before logging (so what they add to the record is logged)."""
    args, env, r, head = run.args, run.args.env, run.args.run, run.model.head
    std_end = args.algorithm.action_std_end
    callbacks: list[Callback] = [StdCap(std_end)] if std_end is not None else []
    if r.eval_every:
        rescore = (r.rescore_best, r.rescore_episodes)
        callbacks.append(Evaluation(r.eval_every, r.eval_episodes, r.stop_return, r.save_best, *rescore))
    if is_selfplay_id(env.env_id):
        pool = (env.self_play_every, env.self_play_pool, env.self_play_latest, env.self_play_random_moves)
        callbacks.append(SelfPlay(*pool))
    callbacks += list(user)
    action_dim = int(np.prod(head.action_shape or (1,)))
    health = Health(args.num_updates, head.discrete, action_dim, run.model.critic is not None)
    callbacks += [health, Logging(r.log_info), NonFiniteStop(), Progress(), Checkpointing(r.checkpoint_every)]
    if env.capture_video:
        callbacks.append(TensorBoardVideos())
    if r.plot:
        callbacks.append(LearningCurve())
    if r.report:
        callbacks.append(ReportPageWriter(REWRITE_S))
    return callbacks


def wanted_infos(callbacks: list[Callback]) -> InfoKeys | None:
    """What the callbacks' ``info_keys`` ask the rollout to collect (``Logging``'s are --log-info's); None:
    nothing, and the envs step as if infos did not exist."""
    for callback in callbacks:
        keys = callback.info_keys
        if not (keys == "all" or (isinstance(keys, tuple | list) and all(isinstance(k, str) for k in keys))):
            raise UserError(
                f'{type(callback).__name__}.info_keys is {keys!r}; give a tuple of info keys, or "all"'
            )
    return merge_info_keys(*(callback.info_keys for callback in callbacks))


def _init_wandb(args, run_dir: str, run_id: str | None = None, group: str | None = None):
    """Start a Weights & Biases run that mirrors the TensorBoard scalars (offline with WANDB_MODE=offline).
    ``group``: the run is one seed of a batched run, in that W&B group. Its seeds' runs are active in one
    process at once (``reinit="create_new"``), where W&B's TensorBoard mirroring would feed none of them (it
    feeds the process's global run): the seed's ``RunLogger`` logs the same scalars to it, against
    ``global_step`` as the mirrored ones are."""
    try:
        import wandb
    except ImportError:
        raise UserError("--track needs Weights & Biases: pip install 'proxima[track]'") from None
    batched: dict[str, Any] = {} if group is None else {"group": group, "reinit": "create_new"}
    try:
        run = wandb.init(
            project=args.run.wandb_project_name,
            entity=args.run.wandb_entity,
            sync_tensorboard=group is None,
            config=args.to_json(),
            name=os.path.basename(os.path.normpath(run_dir)),
            dir=run_dir,
            save_code=False,
            id=run_id,
            resume="allow" if run_id else None,
            **batched,
        )
    except wandb.errors.UsageError as e:  # no API key, most often
        raise UserError(
            f"--track could not start Weights & Biases ({str(e).splitlines()[0]}): log in with `wandb login` (or "
            "set WANDB_API_KEY), or log locally with WANDB_MODE=offline"
        ) from None
    if group is not None:
        run.define_metric("*", step_metric="global_step")
    return run
