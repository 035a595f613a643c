"""Training and resuming as ``proxima train`` does them: ``train`` (``training``), ``resume`` (``resuming``) and
``requeue`` take what a user gives, check it, and build a ``Run`` for the loop (``proxima.run.loop``), or, for
``--num-seeds``, the seeds' runs for their group (``proxima.scale.seedgroup``). ``new_run`` and ``resumed_run``
make the ``Run`` alone, for a driver that trains several (a tune sample's seeds, ``proxima.scale.tuning``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import torch

from proxima.algo.algorithms import given_algorithm
from proxima.algo.custom import FUNCTIONS
from proxima.base import trust
from proxima.base.errors import UserError
from proxima.base.files import (
    CHECKPOINT,
    CONFIG_JSON,
    SEEDS_JSON,
    VIDEOS,
    WRITER_WAIT_S,
    links_inside,
    lock_directory,
    make_dirs,
    read_json,
    remove_stopped_run,
    seed_run_dirs,
    write_json,
)
from proxima.envs import make_envs
from proxima.envs.interface import obs_layout
from proxima.envs.user import describe_env, env_note, env_source, made_from_id
from proxima.policy.encoders import check_spaces, encoder_note, hardware_notes
from proxima.run import checkpoint
from proxima.run.agent import Agent
from proxima.run.callbacks import Callback, default_callbacks, user_callbacks
from proxima.run.config import PPOArgs, resolve_args, show_value
from proxima.run.loop import (
    Run,
    Updates,
    check_run_dir_free,
    default_run_dir,
    env_of,
    init_from_agent,
    network_spec,
    resolve_args_precision,
    run_to_end,
    run_video_dir,
    setup,
    steps,
    take_env,
    thread_notes,
)
from proxima.scale import distributed
from proxima.scale.rollout_workers import WorkerPool
from proxima.scale.seedgroup import check_seeds, resume_seeds, train_seeds


def train(
    args: PPOArgs | None = None,
    *,
    config: str | None = None,
    resume: str | None = None,
    resume_if_exists: bool = False,
    callbacks: list[Callback] | None = None,
    env=None,
    **overrides,
) -> Agent | list[Agent]:
    """Train as ``proxima train`` does and return the trained agent (``num_seeds`` > 1: each seed's).

    Takes a ``PPOArgs``, keyword overrides of its fields, or both: ``train(env_id="Acrobot-v1", seed=2)``,
    ``train(algo="vpg")``, ``train(config="pendulum-discrete-single-env", seed=2)``. Without ``args``, the
    overrides are layered on the algorithm's defaults and the preset as on the command line.
    ``callbacks``: your own ``proxima.run.callbacks.Callback`` objects, run after each update.
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
    done) and returns the agent when the run ends; closing it early (``close()``) ends its run where it stands,
    without the end-of-run save."""
    callbacks = user_callbacks(callbacks)
    if resume is not None:
        if resume_if_exists:
            raise UserError(
                "give resume=RUN_DIR (continue that run) or run_dir=RUN_DIR with resume_if_exists=True (start it or "
                "continue it), not both"
            )
        naming = {k: overrides.pop(k) for k in RENAMED if k in overrides}
        others = sorted(set(overrides) - {"quiet", "total_timesteps", "torch_threads", "trust_code"})
        if others or args is not None or config is not None:
            given = others[0] if others else "args" if args is not None else "config"
            raise UserError(
                f"train(resume=...) takes only quiet, total_timesteps, torch_threads and trust_code besides callbacks, "
                f"and the run's own algo and functions ({', '.join(RENAMED[1:])}) given again (the run's config.json "
                f"holds its settings), not {given}"
            )
        named = named_again(naming)
        return (yield from resuming(resume, callbacks=callbacks, env=env, named=named, **overrides))
    args, env = checked(args, config, env, **overrides)
    run_dir = args.run.run_dir
    if run_dir is None:
        if resume_if_exists:
            raise UserError(
                "--resume-if-exists needs the run's directory: give --run-dir RUN_DIR (run_dir=RUN_DIR), the same "
                "on every start of the job"
            )
        run_dir = default_run_dir(args)
    if args.run.distributed:  # this process is one rank of the run (proxima.scale.distributed)
        return (yield from distributed.training(args, callbacks, env, resume_if_exists, new_run, run_dir))
    # One writer: a requeued job may start while the old one, in its grace period, finishes its last update.
    waiting = None if args.run.quiet else (lambda text: print(text, flush=True))
    with lock_directory(
        run_dir,
        instead=None if resume_if_exists else "--run-dir",
        wait_s=WRITER_WAIT_S if resume_if_exists else 0.0,
        waiting=waiting,
    ):
        if resume_if_exists:
            agent = requeue(args, callbacks, env)
            if agent is not None:
                return agent
        if args.run.num_seeds > 1:
            return train_seeds(args, callbacks, env, requeued=resume_if_exists, parent=run_dir)
        with new_run(args, run_dir, callbacks, env, requeued=resume_if_exists) as run:
            return (yield from steps(run))


# What train(resume=...) takes again of the run's settings that name code: its algorithm and your functions
RENAMED = ("algo", *FUNCTIONS)


def named_again(values: dict) -> dict:
    """Settings that name code, given again by the user (``train``'s keywords), as config.json records them:
    functions by their names, an ``Algorithm`` by its name, ``algo=MODULE`` as the module's functions."""
    values = given_algorithm(values)
    named = PPOArgs.of(**{k: v for k, v in values.items() if v is not None})  # functions by their names
    return {k: getattr(named.algorithm, k) for k in values if values[k] is not None}


def checked(args: PPOArgs | None, config: str | None = None, env=None, **overrides) -> tuple[PPOArgs, object]:
    """``train``'s settings, layered and checked before anything is made, and the env object they train on (None:
    ``args.env.env_id``)."""
    env, args, overrides = take_env(env, args, overrides)
    overrides = given_algorithm(overrides)  # algo=MODULE: its functions; an Algorithm object: its name
    # the user's own, which the settings may name (get_algorithm imports an algo's MODULE:NAME)
    given = {**(trust.names_of(args) if args is not None else {}), **overrides}
    for setting in trust.SETTINGS:
        if isinstance(given.get(setting), str):
            trust.remember(setting, given[setting])
    args = resolve_args(args, config=config, **overrides).validate()
    for setting, name in trust.names_of(args).items():  # the user's own: a run's files may name them later
        trust.remember(setting, name)
    env = env_of(args, env)
    if env is not None and not args.env.env_id.startswith("object:"):  # --env-factory given, not env=
        args = args.replace(env_id=describe_env(env)[0])
    if args.run.num_seeds > 1:
        check_seeds(args, env)
    if args.run.distributed:
        distributed.check(args, env)
    return args, env


@contextlib.contextmanager
def new_run(
    args: PPOArgs,
    run_dir: str,
    callbacks: list[Callback],
    env=None,
    requeued: bool = False,
    run_type: Callable[..., Run] = Run,
    envs_of: Callable[..., Any] | None = None,
) -> Iterator[Run]:
    """The ``Run`` of ``checked`` settings in ``run_dir``, which this process holds, with its callbacks and its
    config.json written, for ``steps`` to train; its envs and console closed after. ``requeued``: ``requeue``
    found no run there (its files may be others'), else ``run_dir`` must be free. ``run_type`` and ``envs_of``:
    one rank's run and its share of the envs, where the run is on many processes (``proxima.scale.distributed``)."""
    if not requeued:  # held, as another run would find a run that it writes now stopped before its checkpoint
        check_run_dir_free(run_dir)
    device, notes = setup(args)
    written, envs = False, None
    run: Run | None = None
    try:
        # Built before the run directory, so a bad env id or unsupported space leaves nothing behind (but
        # --capture-video's recorder makes RUN_DIR/videos as it is built: removed below if the run never starts).
        envs = (envs_of or make_run_envs)(args, run_dir, device, env)
        check_spaces(obs_layout(envs), envs.single_action_space, args.network.encoder)
        if args.algorithm.action_std_end is not None and not isinstance(
            envs.single_action_space, gym.spaces.Box
        ):
            raise UserError(
                f"--action-std-end caps a Gaussian policy's std, for Box action spaces; {args.env.env_id} has "
                f"{envs.single_action_space}: drop --action-std-end"
            )
        # config.json keeps what auto chose, so that a resume elsewhere computes as this run did
        args = resolve_args_precision(args, envs, device)
        notes += hardware_notes(args.network.precision, device, obs_layout(envs).has_images)
        notes += (
            thread_notes(args, envs) + encoder_note(args.network.encoder) + env_note(args.env.env_factory)
        )
        notes += encoder_note(args.network.actor_critic, "actor_critic")
        run = run_type(args, envs, run_dir, device, env=env)
        run.agent.env_source = env_source(args.env.env_id, args.env.env_kwargs, args.env.env_factory)
        if args.run.init_from is not None:
            init_from_agent(run, args.run.init_from)
        make_dirs(run_dir)
        write_json(os.path.join(run_dir, CONFIG_JSON), args.to_json())
        written = True
        run.notes += notes
        run.callbacks = default_callbacks(run, callbacks or [])
        yield run
    finally:
        if run is not None:  # a progress bar started as the run was made
            run.console.close()
        if envs is not None:
            envs.close()
        if not written:  # and the lock removes RUN_DIR where it made it and nothing else is left there
            shutil.rmtree(os.path.join(run_dir, VIDEOS), ignore_errors=True)


def resume(
    run_dir: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    total_timesteps: int | None = None,
    env=None,
    torch_threads: int | None = None,
    trust_code: bool = False,
) -> Agent | list[Agent]:
    """Continue the run in ``run_dir`` from its last checkpoint, with the settings in its ``config.json``.

    On native envs the continuation is exact: the final weights and every ``metrics.jsonl`` value except the
    times are those of a run that was never interrupted. Gymnasium envs cannot be saved without pickling, so
    there the envs start fresh episodes and the rest of the run differs from an uninterrupted one.

    ``total_timesteps``: continue the run, finished or not, to this many steps (written to its config.json).
    Every schedule (the annealed learning rate, ``--*-end``) then ends at the new last update: from here on
    each scheduled value is the one a run started with this ``total_timesteps`` would have (docs/TRAINING.md).

    ``env``: the env object the run was trained on, given again (``train(env=...)``): config.json cannot make a
    lambda, a ``functools.partial`` or a ``VectorEnv`` again (a class or module-level function it imports).

    ``torch_threads``: train on with this many torch threads (written to its config.json), where the run kept
    its own count; another count rounds the updates differently, so the continuation is no longer exact.

    ``trust_code``: import what config.json names (an env factory, a ``module:`` env id, an encoder class)
    without its being given again (docs/SECURITY.md); only for a run whose files you trust.
    """
    return run_to_end(resuming(run_dir, quiet, callbacks, total_timesteps, env, torch_threads, trust_code))


def resuming(
    run_dir: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    total_timesteps: int | None = None,
    env=None,
    torch_threads: int | None = None,
    trust_code: bool = False,
    named: dict | None = None,
) -> Updates:
    """``resume`` one update at a time, as ``training`` is ``train``; ``named``: the settings that name code
    (``trust.SETTINGS``) as the user gave them again, which config.json may then name."""
    callbacks = user_callbacks(callbacks)
    if not os.path.isdir(run_dir):
        what = "is a file" if os.path.isfile(run_dir) else "does not exist"
        raise UserError(f"run directory {run_dir!r} {what}; give a directory written by `proxima train`")
    with lock_directory(run_dir, instead=None):  # before the checkpoint is read: another may be writing it
        if os.path.exists(os.path.join(run_dir, SEEDS_JSON)):
            if total_timesteps is not None:
                raise UserError(
                    "a batched run (--num-seeds) resumes to the steps it was started for: drop total_timesteps"
                )
            return resume_seeds(run_dir, quiet, callbacks, env, torch_threads, trust_code, named)
        with resumed_run(
            run_dir, quiet, callbacks, total_timesteps, env, torch_threads, trust_code, named
        ) as run:
            return (yield from steps(run))


@contextlib.contextmanager
def resumed_run(
    run_dir: str,
    quiet: bool = False,
    callbacks: list[Callback] | None = None,
    total_timesteps: int | None = None,
    env=None,
    torch_threads: int | None = None,
    trust_code: bool = False,
    named: dict | None = None,
) -> Iterator[Run]:
    """The ``Run`` in ``run_dir`` (one run's, which this process holds) as its checkpoint left it, with its
    callbacks, for ``steps`` to train on (``resume`` says how); its envs and console closed after."""
    links_inside(run_dir)  # a resume appends to and cuts back its logs: none of them may be a file elsewhere
    config_path = os.path.join(run_dir, CONFIG_JSON)
    saved = PPOArgs.from_json(read_json(config_path), config_path)
    trust.check_settings(config_path, saved, env=env, trusted=trust_code, named=named)
    if saved.run.distributed:
        raise distributed.refuse_resume(run_dir)
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.exists(path):
        raise UserError(
            f"{path} is missing: the run stopped before its first checkpoint (see --checkpoint-every)"
        )
    meta, states = checkpoint.read(path)
    checkpoint.check_counters(meta, saved, path)
    if total_timesteps is not None:
        if total_timesteps < meta["global_step"]:
            raise UserError(
                f"total_timesteps {total_timesteps} is below the {meta['global_step']} steps the run in {run_dir} "
                f"has done; give at least {meta['global_step']}"
            )
        saved = saved.replace(total_timesteps=total_timesteps)
    elif checkpoint.finished(run_dir):
        raise UserError(
            f"the run in {run_dir} already finished (update {meta['update']}); to train it further, give the new "
            "total: --resume RUN_DIR --total-timesteps N"
        )
    if torch_threads is not None:
        saved = saved.replace(torch_threads=torch_threads)
    args = saved.replace(run_dir=run_dir, quiet=quiet).validate()
    env = env_of(args, env, what=run_dir)
    device, notes = setup(args)
    envs = make_run_envs(args, run_dir, device, env, resumed=meta)
    run: Run | None = None
    try:
        args = resolve_args_precision(args, envs, device)  # a config.json written by hand may say auto
        notes += hardware_notes(args.network.precision, device, obs_layout(envs).has_images)
        notes += thread_notes(args, envs, saved=meta["torch_threads"])
        checkpoint.check_model(states, network_spec(args, envs), envs.single_action_space, path, config_path)
        run = Run(args, envs, run_dir, device, env=env)
        run.agent.env_source = env_source(args.env.env_id, args.env.env_kwargs, args.env.env_factory)
        run.notes += notes
        run.callbacks = default_callbacks(run, callbacks or [])
        run.restore(path, meta, states)
        if total_timesteps is not None or torch_threads is not None:
            write_json(config_path, saved.to_json())
        yield run
    finally:
        if run is not None:  # a progress bar started as the run was made
            run.console.close()
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
    assert run_dir is not None, "training checks that it is given; this process holds it"
    say = (lambda text: None) if args.run.quiet else (lambda text: print(text, flush=True))
    # A batched run keeps its settings in seeds.json, its seeds' runs in seedS/. The run in the directory says
    # which kind it is: a --num-seeds of the other kind is one more setting that differs.
    group = os.path.exists(os.path.join(run_dir, SEEDS_JSON)) or (
        not os.path.exists(os.path.join(run_dir, CONFIG_JSON)) and args.run.num_seeds > 1
    )
    config_name = SEEDS_JSON if group else CONFIG_JSON
    path = os.path.join(run_dir, CHECKPOINT)
    if os.path.exists(path):
        config_path = os.path.join(run_dir, config_name)
        saved = PPOArgs.from_json(read_json(config_path), config_path)
        # the job's command line names its env and encoder again on every start
        named = _named_alike(args, saved)
        if checkpoint.finished(run_dir):
            runs = checkpoint.read_group_header(path).values() if group else [checkpoint.read_header(path)]
            steps = "+".join(str(m["global_step"]) for m in runs)
            # a batched run trains to the steps it started for: it has no further to go
            further = (
                ""
                if group
                else f" (train it further with: proxima train --resume {run_dir} --total-timesteps N)"
            )
            say(f"{run_dir}: the run already finished ({steps} steps); nothing to train{further}")
            trust.check_settings(config_path, saved, env=env, named=named)
            return [Agent.load(d) for d in seed_run_dirs(run_dir)] if group else Agent.load(run_dir)
        ignored = _differences(args, saved)
        if ignored:
            say(
                f"{run_dir} holds a run: it resumes with the settings of its {config_name}, and these given ones, "
                f"which differ, are ignored: {ignored}"
            )
        if group:
            return resume_seeds(run_dir, quiet=args.run.quiet, callbacks=callbacks, env=env, named=named)
        return run_to_end(resuming(run_dir, quiet=args.run.quiet, callbacks=callbacks, env=env, named=named))
    if remove_stopped_run(run_dir, group, hint="give another --run-dir"):
        say(f"{run_dir}: the run stopped before its first checkpoint; starting it again")
    return None


def _named_alike(given: PPOArgs, saved: PPOArgs) -> dict:
    """The settings that name code which the job's command line gives as the run's own: those that differ are
    ignored (``_differences`` names them), so they name nothing again."""
    theirs = trust.names_of(saved)
    return {k: v for k, v in trust.names_of(given).items() if v == theirs[k]}


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


def make_run_envs(args: PPOArgs, run_dir: str, device: torch.device, env=None, resumed: dict | None = None):
    """The run's envs: of ``env`` (an object: ``proxima.envs.user``) where given, else of ``args.env.env_id``.
    ``resumed``: the checkpoint's header, where the run resumes."""
    if args.env.rollout_workers:
        return WorkerPool(args, env)
    kwargs = args.env.env_kwargs
    if isinstance(env, gym.vector.VectorEnv) and (made_from_id(env) or ("", None))[1] == kwargs:
        kwargs = None  # the VectorEnv's own, which take_env recorded: it was made with them
    return make_envs(
        args.env.env_id if env is None else env,
        args.env.num_envs,
        env_kwargs=kwargs,
        backend=args.env.env_backend,
        seed=args.run.seed,
        asynchronous=args.env.async_envs,
        device=device,
        video_dir=run_video_dir(run_dir, resumed) if args.env.capture_video else None,
    )
