"""Many seeds as one batched computation (``--num-seeds``): each seed is an ordinary run (``SeedRun``) in its
own directory, to its callbacks and checkpoint, while its ``SeedGroup`` collects and updates every seed at once
with stacked models (``proxima.scale.batched``). The parent directory holds the group's seeds.json, checkpoint,
report and results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from proxima.algo.optim import make_adam
from proxima.algo.storage import Batch, RolloutBuffer
from proxima.base import seeding, trust
from proxima.base.errors import (
    DiskFullError,
    EnvError,
    NonFiniteError,
    TrainingInterrupted,
    UserError,
)
from proxima.base.files import (
    CHECKPOINT,
    CONFIG_JSON,
    LEARNING_CURVES,
    REPORT,
    RESULTS_JSON,
    RESULTS_MD,
    SEEDS_JSON,
    VIDEOS,
    links_inside,
    lock_directory,
    make_dirs,
    read_json,
    seed_run_dirs,
    write_json,
    write_text,
)
from proxima.envs import make_envs
from proxima.envs.interface import InfoKeys, Seeds, VecEnv, agent_spec, obs_layout
from proxima.envs.registry import resolve_backend
from proxima.envs.selfplay import is_selfplay_id
from proxima.envs.user import env_note, env_source
from proxima.policy.encoders import check_spaces, encoder_note, hardware_notes
from proxima.policy.protocol import Policy
from proxima.policy.stacked import StackedModels
from proxima.run import checkpoint
from proxima.run.agent import Agent
from proxima.run.callbacks import (
    Callback,
    Checkpointing,
    Evaluation,
    Logging,
    UpdateResult,
    default_callbacks,
    wanted_infos,
)
from proxima.run.config import PPOArgs
from proxima.run.evaluate import deterministic_returns
from proxima.run.loop import (
    Run,
    check_run_dir_free,
    default_run_dir,
    env_of,
    finish,
    init_from_agent,
    resolve_args_precision,
    rollout,
    run_to_end,
    run_video_dir,
    setup,
    steps,
    thread_notes,
)
from proxima.run.plotting import final_return, plot_runs
from proxima.run.progress import ProgressReport
from proxima.run.report import read_run, write_report
from proxima.run.scores import seeds_iqm
from proxima.run.threads import choose_threads
from proxima.scale.batched import SeedCollector, SeedModel, SeedRecurrentCollector, seed_batches, update_seeds


class _SeedRows:
    """A seed's share of its group's collector: the rows of its envs in the group's last rollout (``buffer``) and
    in its checkpointable state, so that the seed's own checkpoint continues its episodes (alone, or in the group
    again)."""

    reports_infos = False  # set by the group, which collects for all seeds

    def __init__(self, rows: slice):
        self.rows = rows
        # set by the group: its collector, and this seed's columns of each rollout
        self.group_collector: SeedCollector | None = None
        self.buffer: RolloutBuffer
        self.loaded: dict | None = None

    def collect(self, model: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError("a seed of a batched run is collected for by its SeedGroup")

    def keep_infos(self, keys: InfoKeys) -> bool:
        return self.reports_infos  # the group keeps them for all seeds

    def state_dict(self) -> dict | None:
        assert self.group_collector is not None, "a seed's rollouts are its group's"
        return _rows_of(self.group_collector.state_dict(), self.rows)

    def load_state_dict(self, state: dict) -> None:
        self.loaded = state

    def restart(self, seed: Seeds) -> None:
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

    collector: _SeedRows

    def __init__(
        self, args: PPOArgs, envs, run_dir: str, device: torch.device, rows: slice, env: object = None
    ):
        self._rows = rows
        # the group's console shows every seed
        console = ProgressReport(args.num_updates * args.batch_size, args.num_updates, quiet=True)
        super().__init__(args, envs, run_dir, device, console=console, env=env)
        self.group: SeedGroup | None = None
        self.index = 0

    def _make_collector(self) -> _SeedRows:
        return _SeedRows(self._rows)

    def state_dict(self) -> dict:
        state = super().state_dict()
        assert self.group is not None, "a seed checkpoints in its group"
        state["optimizer"] = self.group.optimizer_share(self.index, self.optimizer)
        return state

    def failed(self, e: Exception) -> Exception:
        assert self.group is not None, "a seed trains in its group"
        return self.group.failed(e)  # the group's checkpoint holds every seed


class SeedGroup:
    """The seeds of a batched run: one vector env of all their envs (seed-major), their models stacked
    (``proxima.scale.batched``), one collector, and one update for all; each seed's counters, settings and
    callbacks stay in its ``SeedRun``."""

    def __init__(self, runs: list[SeedRun], envs, env_seeds: list[int]):
        self.runs, self.envs = runs, envs
        # the batched run's settings, directory and notes, given before it trains (_train_group)
        self.args: PPOArgs
        self.parent: str
        self.notes: list[str] = []
        # the snapshots of the seeds that ended, for the group's checkpoints
        self.finished: dict[str, tuple] = {}
        lead, algo = runs[0], runs[0].args.algorithm
        self.rows = lead.args.env.num_envs
        self.stacked = StackedModels([r.model for r in runs])
        groups = lead.model.param_groups(algo.learning_rate, algo.value_learning_rate)
        self.optimizer = make_adam(
            self.stacked.named_groups(groups), algo.learning_rate, seeds=len(runs), eps=algo.adam_eps
        )
        self.model = SeedModel(self.stacked, [r.streams.actions for r in runs], self.rows)
        collector = SeedRecurrentCollector if lead.args.network.recurrent else SeedCollector
        self.collector = collector(envs, algo.num_steps, algo.gamma, self.model, seed=env_seeds)
        for j, run in enumerate(runs):
            run.group, run.index = self, j
            run.collector.group_collector = self.collector
            run.collector.buffer = self.collector.buffer.columns(j * self.rows, (j + 1) * self.rows)

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
        """After each seed's checkpoint was loaded into its run (its random generators too): the stacked Adam
        state and the envs of all seeds, from theirs."""
        stacked = self.optimizer._params()
        for i, p in enumerate(stacked):
            states = [r.optimizer.state_dict()["state"].get(i) for r in self.runs]
            if all(s is not None for s in states):
                self.optimizer.state[p] = {k: torch.stack([s[k] for s in states]) for k in states[0]}
        shares = [r.collector.loaded for r in self.runs]
        if all(s is not None for s in shares):
            self.collector.load_state_dict(_joined(shares))
            return
        # each seed's envs start the episodes its own resumed solo run would
        first = [seeding.resumed_episodes(r.args.run.seed, r.global_step) for r in self.runs]
        self.collector.restart(seed=[s + k for s in first for k in range(self.rows)])

    def iterate(self) -> list[tuple[SeedRun, UpdateResult]]:
        """One update of every seed that is still training: each one's result."""
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
        batch = seed_batches(
            buf, advantages, returns, len(self.runs), sequences=lead.args.network.recurrent is not None
        )
        minibatch_streams = [r.streams.minibatches for r in self.runs]
        stats = update_seeds(self.stacked, self.optimizer, batch, lead.settings, minibatch_streams)
        results = []
        for run in live:
            j, rows = run.index, slice(run.index * self.rows, (run.index + 1) * self.rows)
            run.collector.buffer = buf.columns(rows.start, rows.stop)
            seed_batch = Batch(*(getattr(batch, f.name)[j] for f in dataclasses.fields(Batch)))
            learning_rate, seed_stats = run.optimizer.param_groups[0]["lr"], stats[j]
            assert seed_stats is not None, "a seed still training was updated"
            results.append(
                (run, run.result(run.collector.buffer, seed_batch, seed_stats, learning_rate, in_force[j]))
            )
        return results

    # --- the seams of loop.steps: a seed its callbacks stop leaves the group, frozen, while the others go on ---
    def start(self) -> list[SeedRun]:
        """The seeds still training; the group's console, with its notes."""
        infos = wanted_infos(self.runs[0].callbacks)  # every seed has the same callbacks
        if infos is not None:
            reports = self.collector.keep_infos(infos)
            for run in self.runs:
                run.collector.reports_infos = reports
        live = [run for run in self.runs if run.index not in self.stacked.frozen]
        args = self.args
        self.console = ProgressReport(
            args.num_updates * args.batch_size, args.num_updates, quiet=args.run.quiet, seeds=len(self.runs)
        )
        for note in self.notes:
            self.console.message(note)
        # a seed finished before a resume never opens its Evaluation
        self.evaluations = _SeedEvaluations(live)
        return live

    def update(self, live: list[SeedRun]) -> list[tuple[SeedRun, UpdateResult]]:
        updated = self.iterate()
        self.evaluations.play(live)
        return updated

    def stopping(self, run: SeedRun, result: UpdateResult) -> None:
        value = result.record.get("eval_return")
        said = "no evaluation" if value is None else f"eval_return {value:.1f}"
        self.console.message(
            f"seed {run.args.run.seed} stopped after update {run.updates_done}: "
            f"{run.global_step:,} steps, {said}"
        )

    def leave(self, runs: list[SeedRun]) -> None:
        """Seeds that end: their candidates rescored at once, each finished and frozen, its snapshot kept for
        the group's checkpoints."""
        self.evaluations.rescore(runs)
        for run in runs:
            finish(run)
            # optional (VecEnv): a backend that records one env only
            end_video = getattr(run.envs, "end_video", None)
            if run.args.env.capture_video and end_video is not None:
                # its envs may step on with the other seeds': its video ends here, as its solo run's envs close
                end_video(run.index * run.args.env.num_envs)
            self.stacked.freeze(run.index)
            # its snapshot as of now, for every later group checkpoint: its tensors are copied, since they are
            # views of the group's (its envs' rows, its Adam moments), which go on changing
            tensors, meta = checkpoint.snapshot(*run.checkpoint_state(finished=True))
            self.finished[os.path.basename(run.run_dir)] = {k: t.clone() for k, t in tensors.items()}, meta

    def interrupt(self, live: list[SeedRun], first: TrainingInterrupted) -> None:
        """One seed's Checkpointing got the signal: every other seed checkpoints too, and the group stops."""
        self.save(live)
        checkpoint_the_rest(live)
        raise TrainingInterrupted(
            self.parent, live[0].updates_done, self.args.num_updates, first.exit_status - 128
        )

    def updated(self, live: list[SeedRun], updated: list[tuple[SeedRun, UpdateResult]]) -> None:
        """The group's checkpoint every ``--checkpoint-every``; its line on the console: one seed's steps, every
        seed's steps per second and episodes."""
        every = self.args.run.checkpoint_every
        if live and every and live[0].updates_done % every == 0:
            self.save(live)
        runs, elapsed = self.runs, updated[0][0].elapsed
        steps_done = sum(run.global_step for run in runs)
        returns = [r for _, res in updated for r in res.episode_returns]
        record = {
            "global_step": max(run.global_step for run in runs),
            "sps": steps_done / elapsed,
            "episodic_return": float(np.mean(returns)) if returns else None,
        }
        self.console.update(max(run.updates_done for run in runs), record, returns)

    def save(self, live: list[SeedRun]) -> None:
        """The group's checkpoint: every seed's snapshot in one file."""
        snapshots = {
            os.path.basename(run.run_dir): checkpoint.snapshot(*run.checkpoint_state()) for run in live
        }
        checkpoint.save_group(os.path.join(self.parent, CHECKPOINT), {**self.finished, **snapshots})

    def end(self) -> None:
        """The group's checkpoint, results, report and plot."""
        args, parent, runs = self.args, self.parent, self.runs
        self.save([])
        _summarize_seeds(parent, runs)
        if args.run.report:  # every seed's curve on one page, as a sweep's
            write_report([parent], os.path.join(parent, REPORT))
        if args.run.plot:  # the seeds' mean and band
            try:
                plot_runs(
                    {args.env.env_id: [run.run_dir for run in runs]}, os.path.join(parent, LEARNING_CURVES)
                )
            except UserError as e:  # no matplotlib: each seed's own files are what matter
                self.console.message(f"no {LEARNING_CURVES}: {e}")
        self.console.message(f"saved {len(runs)} agents to {parent}/seed*")

    def failed(self, e: Exception) -> Exception:
        """``e`` with what survives of the group, and how to go on where a resume may."""
        parent, saved = self.parent, os.path.exists(os.path.join(self.parent, CHECKPOINT))
        last = f"the last checkpoint of every seed is {parent}/{CHECKPOINT}"
        if isinstance(e, EnvError | NonFiniteError):
            where = last if saved else "no checkpoint was written"
            if saved and isinstance(e, EnvError):  # a crash may not recur; a NaN would, from the same state
                where += f"; continue with: proxima train --resume {parent}"
            return type(e)(f"{e}; {where}")
        how = "free space" if isinstance(e, DiskFullError) else f"make {parent} writable"
        where = "no checkpoint was written, so it cannot be resumed"
        if checkpoint.finished(parent):  # the end's own files failed: the seeds' agents are saved
            where = f"every seed had finished: their agents and the final checkpoint, {parent}/{CHECKPOINT}, are saved"
        elif saved:
            where = f"{last}; {how}, then continue with: proxima train --resume {parent}"
        return type(e)(f"{e}; {where}")

    def close(self) -> None:
        self.console.close()
        self.evaluations.close()

    def trained(self) -> list[Agent]:
        return [run.agent for run in self.runs]


def checkpoint_the_rest(runs: Sequence[Run]) -> None:
    """Of runs trained together, one's ``Checkpointing`` got the signal and checkpointed: the others do too."""
    for run in runs:
        for callback in run.callbacks:
            if isinstance(callback, Checkpointing) and not callback.hits:
                run.save_checkpoint()


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


def _seed_dirs(args: PPOArgs, parent: str) -> list[str]:
    """Each seed's run directory, ``parent/seedS``."""
    return [
        os.path.join(parent, f"seed{s}") for s in range(args.run.seed, args.run.seed + args.run.num_seeds)
    ]


def _seed_args(args: PPOArgs, parent: str) -> list[PPOArgs]:
    """Each seed's own settings: an ordinary run of its seed in ``parent/seedS``."""
    return [
        args.replace(seed=args.run.seed + j, num_seeds=1, run_dir=run_dir, quiet=True)
        for j, run_dir in enumerate(_seed_dirs(args, parent))
    ]


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
    # seed s's env k is seeded s + k, as in its solo run (proxima.base.seeding.training_envs); seed-major
    env_seeds = [
        seeding.training_envs(s) + k for s in range(args.run.seed, args.run.seed + n) for k in range(rows)
    ]
    backend = args.env.env_backend
    if env is None:  # auto chooses by the env count: each seed's envs are of its solo run's backend
        backend = resolve_backend(
            args.env.env_id,
            backend,
            asynchronous=args.env.async_envs,
            num_envs=rows,
            video=args.env.capture_video,
            env_kwargs=bool(args.env.env_kwargs),
        )
    envs = make_envs(
        args.env.env_id if env is None else env,
        n * rows,
        env_kwargs=args.env.env_kwargs,
        backend=backend,
        seed=env_seeds,
        asynchronous=args.env.async_envs,
        device=device,
        video_dir=_seed_videos(args, parent, resumed),
    )
    try:
        args = resolve_args_precision(args, envs, device)
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
        for j, (a, run_dir) in enumerate(zip(seed_args, _seed_dirs(args, parent), strict=True)):
            seeding.seed_globals(a.run.seed, a.run.torch_deterministic)
            run = SeedRun(a, envs, run_dir, device, slice(j * rows, (j + 1) * rows), env)
            run.agent.env_source = env_source(a.env.env_id, a.env.env_kwargs, a.env.env_factory)
            if start and a.run.init_from is not None:
                init_from_agent(run, a.run.init_from)
            runs.append(run)
        # The update's count: of minibatches of every seed's samples together. A resumed group keeps the count
        # it trained with (each seed's header has it), unless given another.
        saved = resumed[0].get("torch_threads") if resumed else None
        notes = hardware_notes(args.network.precision, device, images)
        notes += thread_notes(args.replace(num_envs=n * rows), envs, saved)
        if start:
            notes += encoder_note(args.network.encoder) + env_note(args.env.env_factory)
            notes += encoder_note(args.network.actor_critic, "actor_critic")
        return SeedGroup(runs, envs, env_seeds), notes
    except BaseException:
        envs.close()
        raise


def _seed_videos(args: PPOArgs, parent: str, resumed: list | None = None) -> dict[int, str] | None:
    """``--capture-video``'s recorders of a batched run: each seed's first env records into the seed's run
    directory, as its solo run's env 0 does (``run_video_dir``); a seed that finished before a resume records
    nothing."""
    if not args.env.capture_video:
        return None
    seeds = _seed_dirs(args, parent)
    dirs = {
        j * args.env.num_envs: run_video_dir(run_dir, meta)
        for j, (run_dir, meta) in enumerate(zip(seeds, resumed or [None] * len(seeds), strict=True))
        if meta is None or not meta["finished"]
    }
    return dirs or None


def train_seeds(
    args: PPOArgs,
    callbacks: list[Callback] | None = None,
    env=None,
    requeued: bool = False,
    parent: str | None = None,
) -> list[Agent]:
    """``train`` with ``num_seeds`` > 1: seeds ``seed`` … ``seed + num_seeds - 1`` as one batched computation.
    Returns each seed's agent; each seed's run directory is ``RUN_DIR/seedS``, an ordinary run's.
    ``requeued``: ``requeue`` has cleared RUN_DIR of a run's files (others, a scheduler's log, may stay).
    ``parent``: RUN_DIR, where ``args`` leave it to the default. This process holds RUN_DIR and each seed's
    directory, which may be resumed alone, from its own checkpoint."""
    parent = parent or args.run.run_dir or default_run_dir(args)
    with lock_directory(parent):
        if not requeued:
            check_run_dir_free(parent)
        with holding(_seed_dirs(args, parent)):
            device, notes = setup(args)
            group, written = None, False
            try:
                # Built before the run directories are written, so a bad setting leaves nothing behind (but
                # --capture-video's recorders make each seed's videos folder as they are built: removed below).
                group, more = _seed_group(args, parent, device, env)
                args = args.replace(precision=group.runs[0].args.network.precision)
                make_dirs(parent)
                write_json(os.path.join(parent, SEEDS_JSON), args.to_json())
                for run in group.runs:
                    make_dirs(run.run_dir)
                    write_json(os.path.join(run.run_dir, CONFIG_JSON), run.args.to_json())
                written = True
                return _train_group(group, args, parent, callbacks or [], notes + more)
            finally:
                if group is not None:
                    group.envs.close()
                # and the locks remove the directories they made where nothing else is left there
                if not written:
                    for run_dir in _seed_dirs(args, parent):
                        shutil.rmtree(os.path.join(run_dir, VIDEOS), ignore_errors=True)


@contextlib.contextmanager
def holding(run_dirs: list[str], wait_s: float = 0.0):
    """The lock of each of ``run_dirs`` (``proxima.base.files.lock_directory``, waiting ``wait_s`` for each), in
    order."""
    with contextlib.ExitStack() as stack:
        for run_dir in run_dirs:
            stack.enter_context(lock_directory(run_dir, instead=None, wait_s=wait_s))
        yield


def resume_seeds(
    parent: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    env=None,
    torch_threads: int | None = None,
    trust_code: bool = False,
    named: dict | None = None,
) -> list[Agent]:
    """Continue a batched run from its seeds' checkpoints: exactly, on native envs. ``env``: the env object the
    run was trained on, given again. ``torch_threads``: another thread count than the run's (written to its
    seeds.json; the continuation then rounds differently). ``trust_code``, ``named``: as ``resuming``'s. This
    process holds RUN_DIR and its seeds'."""
    with lock_directory(parent, instead=None), holding(seed_run_dirs(parent)):
        links_inside(parent)  # as for one run (trainer.resumed_run)
        path = os.path.join(parent, SEEDS_JSON)
        stored = PPOArgs.from_json(read_json(path), path)
        trust.check_settings(path, stored, env=env, trusted=trust_code, named=named)
        if torch_threads is not None:
            stored = stored.replace(torch_threads=torch_threads).validate()
        args = stored.replace(run_dir=parent, quiet=quiet)
        checkpoint_path = os.path.join(parent, CHECKPOINT)
        if not os.path.exists(checkpoint_path):
            raise UserError(
                f"{checkpoint_path} is missing: the run stopped before its first checkpoint; start it again"
            )
        saved = checkpoint.read_group(checkpoint_path)
        names = [os.path.basename(run_dir) for run_dir in _seed_dirs(args, parent)]
        if sorted(names) != sorted(saved):
            raise UserError(
                f"{checkpoint_path} holds the seeds {sorted(saved)}; {path} trains {names}: the checkpoint is corrupt, "
                "or not this run's"
            )
        metas = [saved[name] for name in names]
        if checkpoint.finished(parent):
            raise UserError(f"every seed of the batched run in {parent} already finished")
        for seed_args, (meta, _) in zip(_seed_args(args, parent), metas, strict=True):
            checkpoint.check_counters(meta, seed_args, checkpoint_path)
        if torch_threads is not None:
            write_json(path, stored.to_json())
        device, notes = setup(args)
        env = env_of(args, env, what=parent)
        group, more = _seed_group(args, parent, device, env, start=False, resumed=[meta for meta, _ in metas])
        try:
            return _train_group(group, args, parent, callbacks or [], notes + more, pending=metas)
        finally:
            group.envs.close()


def _train_group(
    group: SeedGroup,
    args: PPOArgs,
    parent: str,
    user: list[Callback],
    notes: list[str],
    pending: list[tuple[dict, dict]] | None = None,
) -> list[Agent]:
    """``steps`` of ``group``, each seed with its callbacks. ``pending``: each seed's ``(meta, states)`` in the
    group's checkpoint, where the group resumes."""
    group.args, group.parent, group.notes = args, parent, notes
    states: list[tuple[dict, dict] | None] = [*pending] if pending is not None else [None] * len(group.runs)
    for run, state in zip(group.runs, states, strict=True):
        run.callbacks = default_callbacks(run, user)
        for callback in run.callbacks:
            if isinstance(callback, Logging):  # --track: each seed's W&B run, in the batch's group
                callback.wandb_group = os.path.basename(os.path.normpath(parent))
        if state is not None:
            run.restore(os.path.join(parent, CHECKPOINT), *state)
            if state[0]["finished"]:
                group.stacked.freeze(run.index)
                group.finished[os.path.basename(run.run_dir)] = checkpoint.kept(*state)
    if pending is not None:
        group.load()
    return run_to_end(steps(group))


class _SeedEvaluations:
    """The seeds' ``--eval-every`` evaluations played at once, on one vector env of all their evaluation envs
    (``evaluate.deterministic_returns``): each seed's ``Evaluation`` then finds its returns given. The same
    envs serve the rescoring of the candidates of the seeds that end together (``--rescore-best``)."""

    def __init__(self, runs: list[SeedRun]):
        self.of = {run.index: c for run in runs for c in run.callbacks if isinstance(c, Evaluation)}
        self.envs: dict[int, VecEnv] = {}

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
        returns = deterministic_returns(
            [run.model for run in due],
            self.make,
            first.episodes,
            first.episodes,
            [self.of[run.index].seed for run in due],
            first.env_id,
        )
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
        assert first.envs is not None, "each seed's Evaluation opened at on_train_start"
        returns = deterministic_returns(
            models, self.make, first.rescore_episodes, first.envs.num_envs, seeds, first.env_id
        )
        for (_, c), own in zip(due, agents, strict=True):
            c.given, returns = (own, returns[: len(c.candidates)]), returns[len(c.candidates) :]

    def close(self) -> None:
        for envs in self.envs.values():
            envs.close()


def _summarize_seeds(parent: str, runs: list[SeedRun]) -> None:
    """``RESULTS_JSON`` and ``RESULTS_MD`` in the batched run's directory: each seed's steps, whether it stopped
    early and its final return; and the IQM of the seeds' scores with its 95% interval (each seed's
    ``proxima.run.scores.final_score``: its last deterministic evaluation where it evaluated, else its final
    return)."""
    rows = []
    for run in runs:
        final = final_return(run.run_dir)
        rows.append(
            {
                "seed": run.args.run.seed,
                "run_dir": os.path.relpath(run.run_dir, parent),
                "global_step": run.global_step,
                "stopped_early": run.updates_done < run.args.num_updates,
                "final_return": None if np.isnan(final) else final,
            }
        )
    iqm, said = seeds_iqm([read_run(run.run_dir) for run in runs], parent)
    write_json(os.path.join(parent, RESULTS_JSON), {"seeds": rows, **({"iqm": iqm} if iqm else {})})
    lines = ["| seed | steps | stopped early | final return (last 20 episodes) |", "|---|---|---|---|"]
    for r in rows:
        shown = "–" if r["final_return"] is None else f"{r['final_return']:.1f}"
        lines.append(
            f"| {r['seed']} | {r['global_step']:,} | {'yes' if r['stopped_early'] else 'no'} | {shown} |"
        )
    lines += ["", said]
    write_text(os.path.join(parent, RESULTS_MD), "\n".join(lines) + "\n")
