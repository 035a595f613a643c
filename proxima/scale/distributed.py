"""One run on many processes (``--distributed``): a data-parallel learner on ``torch.distributed``, as DD-PPO
(Wijmans et al., ICLR 2020) and CleanRL's ``ppo_atari_multigpu.py`` do it.

torchrun (or SLURM's srun) starts N processes, the ranks, with the same command line. Each rank steps its share
of the run's envs, ``num_envs / N`` consecutive ones, seeded as those envs are in one process (env ``i``:
``seed + i``), computes its rollout and advantages, and learns on its share of every minibatch; the gradients
are summed across the ranks before each clipping and Adam step, so every rank holds the same weights after
every step. What would differ from one process is made global:

- The random streams. Every rank has its own ``RunStreams``, seeded as one process's are, and draws what the
  whole run draws: each step's action noise for all envs, of which it takes its envs' rows
  (``RankCollector``), and each epoch's permutation of the whole batch, of which it takes the samples of its
  envs (``RankLearner.minibatches``). So the global minibatch is the one-process minibatch, and an N-rank run
  computes the one-process run, up to the order of the sums.
- Per-minibatch advantage normalization (detail 7 in docs/SEEDS.md), the losses and the debug variables:
  reduced over the global minibatch (``RankLearner.loss``); ``--target-kl`` stops on the global KL.
- Observation, reward and value-target statistics (``ReducedMeanStd``): each merge takes the moments of all
  ranks' samples.
- The record: rank 0 gathers the rollout's values, returns and episodes of all ranks (``RankRun.result``).

Rank 0 alone has the run directory and its callbacks (metrics, TensorBoard, evaluation, checkpoints, the agent,
the report); the other ranks write nothing there, follow rank 0's decision to stop after each update
(``FollowRankZero``) and run only what changes the model (``--action-std-end``'s cap).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import gymnasium as gym
import torch
import torch.distributed as dist
from torch import Tensor

from proxima.algo.optim import Adam
from proxima.algo.storage import Batch, RolloutBuffer, minibatches
from proxima.algo.update import Solo, UpdateSettings, learn, minibatch_loss, one_member
from proxima.base import seeding
from proxima.base.errors import UserError
from proxima.base.files import lock_directory
from proxima.envs import make_envs
from proxima.envs.interface import agent_spec
from proxima.envs.registry import resolve_backend
from proxima.envs.selfplay import is_selfplay_id
from proxima.policy.normalization import RunningMeanStd
from proxima.policy.protocol import Learned, Policy
from proxima.run.callbacks import Callback, StdCap, UpdateResult
from proxima.run.config import PPOArgs
from proxima.run.loop import Run, Updates, run_video_dir, steps
from proxima.run.rollout import RolloutCollector

# What --distributed trains, said by each refusal
ACCEPTED = "a feed-forward policy on single-agent envs, one seed, envs in the rank's own process"
# How long a rank waits for the others at a collective: rank 0's evaluations and checkpoints come between updates
TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class Ranks:
    """This process's place among the run's: ``rank`` of ``size``, ``local`` on its machine (its GPU)."""

    rank: int
    size: int
    local: int

    def envs(self, num_envs: int) -> tuple[int, int]:
        """The first of this rank's envs and their count: consecutive envs, ``num_envs / size`` of them."""
        share = num_envs // self.size
        return self.rank * share, share


def ranks_from_environment(environ=os.environ) -> Ranks:
    """The rank variables that torchrun sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), else SLURM's
    (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``); ``MASTER_ADDR`` and ``MASTER_PORT`` are where
    rank 0 meets the others."""
    names = (
        ("RANK", "WORLD_SIZE", "LOCAL_RANK")
        if "RANK" in environ
        else ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
    )
    missing = [name for name in (*names[:2], "MASTER_ADDR", "MASTER_PORT") if name not in environ]
    if missing:
        launched = "RANK" in environ or "SLURM_PROCID" in environ
        raise UserError(
            f"--distributed takes its ranks from the launcher, and {missing[0]} is not set"
            f"{'' if launched else ' (nor RANK, which torchrun sets)'}; launch it with torchrun "
            "--nproc-per-node N -m proxima train --distributed ..., or under SLURM's srun with MASTER_ADDR and "
            "MASTER_PORT exported (docs/SCALING.md)"
        )
    try:
        rank, size, local = (int(environ.get(name, "0")) for name in names)
    except ValueError:
        raise UserError(f"--distributed: {', '.join(names)} must be whole numbers") from None
    return Ranks(rank, size, local)


def refuse_unasked(args: PPOArgs, environ=os.environ) -> None:
    """``proxima train`` started by torchrun without ``--distributed`` would train the same run N times into one
    directory: refused in one line."""
    size = environ.get("WORLD_SIZE", "1")
    if not args.run.distributed and size.isdigit() and int(size) > 1:
        raise UserError(
            f"this process is one of WORLD_SIZE={size} that a launcher started: give --distributed to train one "
            "run on all of them, or start proxima train with python for one process"
        )


def check(args: PPOArgs, env=None, environ=os.environ) -> None:
    """Refuse, in one line, what ``--distributed`` does not do yet; before any process group is joined, so that
    every rank refuses alike."""
    ranks = ranks_from_environment(environ)
    a, r = args.env, args.run
    refused = [
        (r.num_seeds > 1, f"--num-seeds {r.num_seeds}", "run each seed as its own job"),
        (a.rollout_workers > 0, "--rollout-workers", "each rank steps its own envs"),
        (args.network.recurrent is not None, "--recurrent", "drop it"),
        (bool(r.log_info), "--log-info", "drop it"),
        (is_selfplay_id(a.env_id), "a self-play env", "train it in one process"),
        (isinstance(env, gym.vector.VectorEnv), "a VectorEnv object", "give a class or function instead"),
    ]
    for bad, what, instead in refused:
        if bad:
            raise UserError(f"--distributed does not take {what} yet ({instead}); it trains {ACCEPTED}")
    if a.num_envs % ranks.size:
        raise UserError(
            f"--distributed on {ranks.size} ranks splits the envs evenly: num_envs {a.num_envs} is not a multiple "
            f"of {ranks.size}; give a multiple of {ranks.size}"
        )


def refuse_resume(run_dir: str) -> UserError:
    """A run trained with ``--distributed`` holds rank 0's envs only in its checkpoint."""
    return UserError(
        f"the run in {run_dir} was trained with --distributed, whose checkpoint holds rank 0's envs only: it "
        "cannot be resumed yet; start a new run (its agent is in RUN_DIR/model.safetensors)"
    )


# --- the reductions -------------------------------------------------------------------------------------------
def all_sum(x: Tensor) -> Tensor:
    """``x`` summed over the ranks, in place (every rank gets the sum)."""
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x


class ReducedMeanStd(RunningMeanStd):
    """A ``RunningMeanStd`` whose every merge takes the batch of all ranks: their moments summed, so that the
    statistics are those of one process that saw every rank's samples (and the same on every rank)."""

    @torch.no_grad()
    def update(self, x: Tensor, horizon: int = 0, rows: Tensor | None = None) -> None:
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        weight = torch.ones(x.shape[0], dtype=x.dtype, device=x.device) if rows is None else rows.to(x.dtype)
        weight = weight.reshape(-1, *[1] * (x.dim() - 1))
        sums = all_sum(torch.cat([(x * weight).sum(0).reshape(-1), weight.sum().reshape(1)]))
        n = sums[-1]
        batch_mean = sums[:-1].view(self.mean.shape) / n.clamp_min(1)
        batch_var = all_sum(((x - batch_mean).square() * weight).sum(0)) / n.clamp_min(1)
        if horizon:  # as RunningMeanStd.update's, with the batch of all ranks
            self.count.clamp_(max=(horizon - 1) * n)
        self._merge(batch_mean, batch_var, n)


def reduce_statistics(model: torch.nn.Module) -> None:
    """Make each of ``model``'s running statistics (``proxima.policy.normalization``) a ``ReducedMeanStd``
    holding the same values: the state dict, and so the files, are those of a ``RunningMeanStd``."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is RunningMeanStd:
                reduced = ReducedMeanStd(tuple(child.mean.shape)).to(child.mean.device)
                reduced.load_state_dict(child.state_dict())
                setattr(module, name, reduced)


# --- a rank's share of the rollout and of the update ----------------------------------------------------------
class RankCollector(RolloutCollector):
    """The collector of one rank's envs (rows ``first`` to ``first + count`` of the run's ``total``). Its
    generator is seeded as one process's, and each step it draws the noise of all ``total`` envs and keeps its
    rows: the actions one process would sample for these envs."""

    def __init__(
        self, envs, num_steps: int, gamma: float, model: Policy, *, first: int, total: int, **options
    ):
        super().__init__(envs, num_steps, gamma, model, **options)
        self.rows = slice(first, first + envs.num_envs)
        # the logits the head draws for (float32: a bfloat16 network's outputs are cast back)
        self._all = torch.empty((total, model.head.logits_dim), device=envs.device)

    def _act(self, model: Policy, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return model.act(obs, model.head.noise(self._all, self.generator)[self.rows])


@dataclass
class Share(Batch):
    """A rank's share of a global minibatch, and its ``weight``: its samples' part of the minibatch's."""

    weight: float = 1.0


class RankLearner(Solo):
    """``update.learn``'s one member, learning on this rank's share of each global minibatch: the run's
    permutation of the whole batch (``generator`` as one process's), of which this rank takes its envs' samples.
    Its loss is weighted by its share of the minibatch and the gradients are summed over the ranks, so that the
    step is the one-process step on the whole minibatch."""

    def __init__(
        self,
        model: Learned,
        optimizer: Adam,
        batch: Batch,
        settings: UpdateSettings,
        generator: torch.Generator,
        envs: tuple[int, int],
        total: int,
    ):
        super().__init__(model, optimizer, batch, settings, generator)  # the value statistics: reduced
        (self.first, self.count), self.total, self._reduced = envs, total, False

    def minibatches(self) -> Iterable[Share]:
        total, count = self.total, self.count
        global_size = len(self.batch) // count * total
        for index in minibatches(global_size, self.settings.num_minibatches, self.generator):
            t, env = index // total, index % total  # the one-process batch is flattened time-major
            mine = (env >= self.first) & (env < self.first + count)
            local = t[mine] * count + (env[mine] - self.first)
            share = local.numel() / index.numel()
            # an empty share computes the loss of one of its samples weighted 0: its gradients exist (zeros), as
            # the other ranks' do, and the sums over the ranks add the same tensors everywhere
            mb = self.batch[local if local.numel() else local.new_zeros(1)]
            yield Share(**{f.name: getattr(mb, f.name) for f in dataclasses.fields(Batch)}, weight=share)

    def loss(self, mb: Batch) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
        assert isinstance(mb, Share)  # minibatches' own
        weight, settings = mb.weight, self.settings
        if settings.norm_adv:  # detail 7, over the global minibatch
            mb = dataclasses.replace(mb, advantages=normalized(mb.advantages, weight > 0))
            settings = dataclasses.replace(settings, norm_adv=False)
        logprobs, entropy, values = mb.evaluate(self.model)
        critic = self.model.critic is not None
        loss, *terms, diagnostics = minibatch_loss(
            logprobs, entropy, values, mb, settings, self.scale, critic
        )
        # each term is a mean over this rank's samples: weighted by its share, summed, the global minibatch's
        reduced = all_sum(torch.stack([*terms, *diagnostics.values()]) * weight)
        return one_member((loss * weight, *reduced[:3], dict(zip(diagnostics, reduced[3:], strict=True))))

    def _sum_gradients(self) -> None:
        if self._reduced:
            return
        grads = [p.grad for p in self.params if p.grad is not None]
        flat = all_sum(torch.cat([g.reshape(-1) for g in grads]))
        for g, summed in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(summed.view_as(g))
        self._reduced = True

    def clip(self, max_norm: float) -> Tensor:
        self._sum_gradients()  # clipped as one process clips them: the whole minibatch's gradient
        return super().clip(max_norm)

    def step(self) -> None:
        self._sum_gradients()
        super().step()
        self._reduced = False


def normalized(x: Tensor, mine: bool, eps: float = 1e-8) -> Tensor:
    """``proxima.algo.losses.normalize`` over the samples of all ranks' ``x`` (zero mean, unit std, the
    unbiased std as torch's); ``mine``: whether ``x`` holds samples (False: a stand-in, counted as none)."""
    weight = float(mine)
    sums = all_sum(torch.stack([x.sum() * weight, x.new_tensor(x.numel() * weight)]))
    mean = sums[0] / sums[1]
    std = (all_sum((x - mean).square().sum() * weight) / (sums[1] - 1)).sqrt()
    return (x - mean) / (std + eps)


@dataclass
class _Gathered:
    """All ranks' rollout as the record reads it (``Run.result``): the values and returns of the one-process
    batch, in its order, and the episodes that ended."""

    values: Tensor
    returns: Tensor
    episode_returns: Tensor
    episode_lengths: Tensor
    episode_ended: Tensor

    def samples(self) -> tuple[_Gathered, tuple]:
        return self, ()

    def finished_episodes(self) -> tuple[list[float], list[int]]:
        return RolloutBuffer.finished_episodes(self)  # type: ignore[arg-type]  # reads these three tensors

    def finished_infos(self) -> list[dict]:
        return []  # --log-info is refused

    def breakdown(self) -> dict:
        return {}


def gathered(buf: RolloutBuffer, batch: Batch) -> _Gathered:
    """``buf``'s rollout and ``batch``'s returns joined with the other ranks' along the envs (rank order is env
    order), in one all-gather."""
    steps_ = buf.values.shape[0]
    parts = (
        buf.values,
        batch.returns.view(steps_, -1),
        buf.episode_returns,
        buf.episode_lengths,
        buf.episode_ended,
    )
    mine = torch.stack([p.to(torch.float64) for p in parts], -1)  # exact for each: float32s, counts, flags
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    joined = torch.cat(every, 1).unbind(-1)
    values, returns, ep_returns, ep_lengths, ended = joined
    return _Gathered(
        values.flatten().to(buf.values.dtype),
        returns.flatten().to(batch.returns.dtype),
        ep_returns,
        ep_lengths.to(torch.int64),
        ended.bool(),
    )


class RankRun(Run):
    """One rank's ``Run``: its share of the envs, ``RankCollector``, ``RankLearner`` and the reduced statistics;
    rank 0 alone finishes the run (its agent saved, its callbacks' ends) and decides when it stops."""

    def __init__(self, *args, ranks: Ranks, **kwargs):
        self.ranks, self._stopping = ranks, False
        super().__init__(*args, **kwargs)
        if self.settings.own is not None:
            raise UserError(f"--distributed does not take your own loss functions yet; it trains {ACCEPTED}")
        if agent_spec(self.envs) is not None:
            raise UserError(f"--distributed does not take a multi-agent env yet; it trains {ACCEPTED}")
        reduce_statistics(self.model)

    def _make_collector(self) -> RankCollector:
        algo = self.args.algorithm
        first, _ = self.ranks.envs(self.args.env.num_envs)
        return RankCollector(
            self.envs,
            algo.num_steps,
            algo.gamma,
            self.model,
            first=first,
            total=self.args.env.num_envs,
            seed=seeding.training_envs(self.args.run.seed, first),
            generator=self.streams.actions,
        )

    def learn(self, batch) -> dict:
        total = self.args.env.num_envs
        streams = self.streams.minibatches
        learner = RankLearner(
            self.model, self.optimizer, batch, self.settings, streams, self.ranks.envs(total), total
        )
        stats = learn(learner, self.settings)[0]
        assert stats is not None
        return stats

    def result(self, buf, batch, stats: dict, learning_rate: float, in_force: dict) -> UpdateResult:
        every = gathered(buf, batch)
        return super().result(every, every, stats, learning_rate, in_force)

    def set(self, **values) -> None:
        raise UserError(
            "run.set changes the settings on rank 0 alone, which --distributed does not follow yet: give the "
            "settings' schedules instead (--*-end, docs/TRAINING.md)"
        )

    def start(self) -> list[Run]:
        for tensor in self.model.state_dict().values():  # rank 0's weights, --init-from's included
            dist.broadcast(tensor, 0)
        return super().start()

    def stopping(self, member: Run, result: UpdateResult) -> None:
        self._stopping = True

    def leave(self, members: list[Run]) -> None:
        if self.ranks.rank == 0:
            super().leave(members)

    def updated(self, live: list[Run], updated: list[tuple[Run, UpdateResult]]) -> None:
        if self.ranks.rank == 0:  # the others wait for this in FollowRankZero
            dist.broadcast(torch.tensor([float(self._stopping)], device=self.device), 0)


class FollowRankZero(Callback):
    """The callback of a rank other than 0: stop when rank 0's callbacks stop the run (``RankRun.updated``)."""

    def on_update_end(self, run, result: UpdateResult) -> bool:
        stop = torch.zeros(1, device=run.device)
        dist.broadcast(stop, 0)
        return bool(stop.item())


# --- starting the ranks ---------------------------------------------------------------------------------------
def rank_envs(args: PPOArgs, run_dir: str, device: torch.device, env=None, resumed=None, *, ranks: Ranks):
    """This rank's envs, as ``trainer.make_run_envs`` makes the run's: the backend the whole count would get
    (``auto`` chooses by it), env ``i`` seeded ``seed + i`` as in one process; videos of rank 0's env 0 only."""
    a = args.env
    first, count = ranks.envs(a.num_envs)
    video = a.capture_video and ranks.rank == 0
    backend = a.env_backend
    if env is None:
        backend = resolve_backend(
            a.env_id,
            backend,
            asynchronous=a.async_envs,
            video=video,
            num_envs=a.num_envs,
            env_kwargs=bool(a.env_kwargs),
        )
    return make_envs(
        a.env_id if env is None else env,
        count,
        env_kwargs=a.env_kwargs,
        backend=backend,
        seed=seeding.training_envs(args.run.seed, first),
        asynchronous=a.async_envs,
        device=device,
        video_dir=run_video_dir(run_dir) if video else None,
    )


def join(args: PPOArgs) -> Ranks:
    """This process's rank, in the run's process group: gloo on the CPU, NCCL on a GPU (this rank's local one)."""
    ranks = ranks_from_environment()
    cuda = args.run.cuda and torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(ranks.local)
    dist.init_process_group(
        "nccl" if cuda else "gloo", rank=ranks.rank, world_size=ranks.size, timeout=TIMEOUT
    )
    return ranks


def agree(failure: Exception | None, ranks: Ranks) -> None:
    """Every rank's start, agreed: raise ``failure`` on the rank that met it, and a line on the others, so
    that no rank waits for one that stopped before its first update."""
    failed = torch.tensor([float(failure is not None)])
    if dist.get_backend() == "nccl":
        failed = failed.cuda()
    all_sum(failed)
    if failure is not None:
        raise failure
    if failed.item():
        raise UserError(f"rank {ranks.rank}: another rank could not start the run; its message says why")


def training(
    args: PPOArgs, callbacks: list[Callback], env, resume_if_exists: bool, new_run: Callable, run_dir: str
) -> Updates:
    """``trainer.training`` of a ``checked`` run with ``--distributed``: this process's rank of it. Rank 0 holds
    ``run_dir``; the others build their run in a directory of their own, removed at the end, and write nothing
    in ``run_dir``."""
    if resume_if_exists:
        raise UserError(f"--distributed does not take --resume-if-exists yet; it trains {ACCEPTED}")
    ranks = join(args)
    own_dir = None if ranks.rank == 0 else tempfile.mkdtemp(prefix=f"proxima-rank{ranks.rank}-")
    try:
        with contextlib.ExitStack() as stack:
            failure: Exception | None = None
            run = None
            try:
                if ranks.rank == 0:
                    stack.enter_context(lock_directory(run_dir, instead="--run-dir"))
                run = stack.enter_context(_rank_run(args, own_dir or run_dir, callbacks, env, ranks, new_run))
            except Exception as e:  # noqa: BLE001  # raised again by agree, after the others heard of it
                failure = e
            agree(failure, ranks)
            assert run is not None
            return (yield from steps(run))
    finally:
        dist.destroy_process_group()
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


@contextlib.contextmanager
def _rank_run(args: PPOArgs, run_dir: str, callbacks, env, ranks: Ranks, new_run: Callable) -> Iterator[Run]:
    quiet = args if ranks.rank == 0 else args.replace(quiet=True)
    made = new_run(
        quiet,
        run_dir,
        callbacks if ranks.rank == 0 else [],
        env,
        run_type=functools.partial(RankRun, ranks=ranks),
        envs_of=functools.partial(rank_envs, ranks=ranks),
    )
    with made as run:
        if ranks.rank:  # what changes the model runs on every rank; the rest is rank 0's
            run.callbacks = [c for c in run.callbacks if isinstance(c, StdCap)] + [FollowRankZero()]
        yield run
