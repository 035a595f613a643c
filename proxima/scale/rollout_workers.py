"""Rollouts on Ray actors (``--rollout-workers N``): N actors each own ``num_envs / N`` envs, of any backend,
with all of their rows (an env of many agents has one per agent, proxima.run.multiagent).

Each update the learner puts the weights in Ray's object store once (the normalization statistics are
buffers among them); each actor loads them, collects its slice of the rollout where its envs are, with
nothing crossing the process boundary per env step, and returns the whole slice in one transfer
(observations, actions, log-probs, values, rewards with the truncation bootstraps added, dones, episode
statistics, the rest of its buffer's ``STEPS`` and ``END``, and its state for a replacement). The learner joins the
slices along the env axis and goes on as with local envs: GAE, then the update. ``RayCollector`` is one
more collector; the loop does not know.

**Partition invariance.** A run gives the same numbers with 1, 2 or 4 workers (byte for byte on native
envs), because nothing an env sees depends on which worker holds it:
- env ``i`` is seeded with ``seed + i`` and draws its actions from its own ``torch.Generator`` (keyed by
  the run seed and ``i``: ``proxima.base.seeding.action_noise``), not from a generator shared by the envs of a process (where an
  env has many rows, each row has its own action stream);
- every forward pass runs on a batch of all ``num_envs`` rows, the worker's own in their places and zeros
  elsewhere, because a matrix product's rounding can depend on the batch size;
- observation and reward statistics stay frozen during a rollout; the learner merges the rollout's raw
  observations and discounted returns into them afterwards, step by step, in env order.
The last two points are where this path differs from the local one (which samples all envs from the run's one generator and
merges the statistics at every step), so a run with workers does not repeat a run without them.

**Faults.** An actor that dies (its node fails, ``ray.kill``) is replaced by a new one for the same envs,
and its slice is collected again: from the state its envs had at the start of the rollout where the backend
can save it (native envs: the result is exactly the same), else from fresh episodes. Only whole slices reach
the buffer, so no transition is lost or counted twice.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor

from proxima.base import seeding
from proxima.base.errors import EnvError, NonFiniteError, UserError, raised
from proxima.envs import make_envs
from proxima.envs.interface import EnvCalls, InfoKeys, VecEnv, agent_spec, obs_layout, per_env_values
from proxima.envs.registry import resolve_backend
from proxima.envs.user import factory_backend
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic, NetworkSpec, make_policy
from proxima.policy.protocol import Policy
from proxima.policy.user import env_spaces
from proxima.run.config import PPOArgs
from proxima.run.multiagent import collector_of, resized
from proxima.run.rollout import RolloutCollector
from proxima.scale.executors import start_ray

RAY_MISSING = "--rollout-workers needs Ray: pip install 'proxima[ray]' (make installs it)"
TRIAL_ACTOR_CPUS = 1  # what each actor asks for inside a Tune trial, which reserved that much for it


class SliceCollector(RolloutCollector):
    """A collector for envs ``offset .. offset + count`` of ``total``: per-row sampling streams, forward passes
    padded to all rows of the ``total`` envs, and frozen statistics (``frozen_stats``). It goes before the
    collector that the envs would have in one process (``proxima.run.multiagent.collector_of``): ``slicing``."""

    def __init__(
        self,
        envs,
        num_steps: int,
        gamma: float,
        model: ActorCritic,
        seed: int,
        offset: int,
        count: int,
        total: int,
        **options,
    ):
        super().__init__(
            envs,
            num_steps,
            gamma,
            model,
            seed=seeding.training_envs(seed, offset),
            frozen_stats=True,
            **options,
        )
        n = envs.num_envs
        per_env = n // count  # rows of an env, env-major
        first = offset * per_env
        self.rows = slice(first, first + n)
        self.total = total * per_env
        # each row's own generator, keyed by its place among all rows: its actions whichever worker holds it
        self.generators = [
            torch.Generator(envs.device).manual_seed(seeding.action_noise(seed, first + i)) for i in range(n)
        ]
        self._row = torch.zeros((1, model.head.logits_dim), device=envs.device)  # one row's logits' shape

    def _pad(self, x: Tensor, fill: float = 0.0) -> Tensor:
        full = x.new_full((self.total, *x.shape[1:]), fill)
        full[self.rows] = x
        return full

    def _act(self, model: Policy, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        noise = torch.cat([model.head.noise(self._row, g) for g in self.generators])
        # the other workers' rows take draws that any head turns into some action: only these rows are kept
        actions, logprobs, values = model.act(self._pad(obs), self._pad(noise, 0.5))
        return actions[self.rows], logprobs[self.rows], values[self.rows]

    def _final_values(self, model: Policy, final_obs: Tensor, rows: Tensor) -> Tensor:
        values = model.value(model.normalization.obs(self._pad(final_obs)))
        return values[self.rows][rows]

    def _values(self, model: Policy, obs: Tensor) -> Tensor:
        return model.value(self._pad(obs))[self.rows]

    def state_dict(self) -> dict | None:
        state = super().state_dict()
        generators = torch.stack([g.get_state() for g in self.generators])
        return None if state is None else {**state, "generators": generators}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for g, saved in zip(self.generators, state["generators"], strict=True):
            g.set_state(saved.clone())


def slicing(collector: type[RolloutCollector]) -> type[SliceCollector]:
    """``collector`` (the class of the envs' collector in one process) as a ``SliceCollector``."""
    return cast(type[SliceCollector], type(f"Slice{collector.__name__}", (SliceCollector, collector), {}))


class RolloutWorker:
    """One Ray actor: its envs, its copy of the policy, and its ``SliceCollector``."""

    def __init__(self, args: dict, offset: int, count: int, env=None):
        torch.set_num_threads(1)  # one CPU per actor: Ray's default reservation
        self.args, self.offset, self.count = PPOArgs.from_json(args), offset, count
        self.env = env  # the run's env factory (train(env=...)), sent by Ray; None: the env id in args
        self.envs: VecEnv | None = None  # made by open()
        self.model: ActorCritic | None = None  # built by start(), with the collector
        self.collector: SliceCollector | None = None
        self.infos: InfoKeys | None = None  # keep_infos' keys, for every collector this actor builds

    def open(self) -> tuple:
        """Make the envs; return their spaces, observation layout, rows and ``agents`` (``VecEnv``'s). Not in
        ``__init__``: an env that fails there would reach the learner as the actor's death, without the error
        it raised."""
        env = self.args.env
        # seeded again by the collector's first reset
        self.envs = envs = make_envs(
            env.env_id if self.env is None else self.env,
            self.count,
            env_kwargs=env.env_kwargs,
            backend=env.env_backend,
            asynchronous=env.async_envs,
            seed=seeding.training_envs(self.args.run.seed, self.offset),
        )
        spaces = envs.single_observation_space, envs.single_action_space, obs_layout(envs)
        return *spaces, envs.num_envs, agent_spec(envs)

    def start(self, spec: dict, seed: int, state: dict | None = None) -> None:
        """Build the policy and the collector (whose first reset seeds env i with ``seed + i``); continue
        from ``state`` where one is given."""
        assert self.envs is not None  # open() came first
        algo, env = self.args.algorithm, self.args.env
        net_spec = NetworkSpec.from_json(spec)
        self.model = make_policy(
            net_spec,
            make_head(self.envs.single_action_space, net_spec.network.action_dist),
            env_spaces(self.envs),
        )
        collector, options = collector_of(self.envs, self.args)
        self.collector = slicing(collector)(
            self.envs,
            algo.num_steps,
            algo.gamma,
            self.model,
            seed,
            self.offset,
            self.count,
            env.num_envs,
            **options,
        )
        if state is not None:
            self.collector.load_state_dict(state)
        if self.infos is not None:
            self.collector.keep_infos(self.infos)

    def keep_infos(self, keys: InfoKeys) -> bool:
        assert self.collector is not None  # start() came first
        self.infos = keys
        return self.collector.keep_infos(keys)

    def _calls(self) -> EnvCalls:
        return cast(EnvCalls, self.envs)  # every backend that rollout workers run has call and set_attr

    def call(self, name: str, args: tuple, kwargs: dict) -> tuple:
        return self._calls().call(name, *args, **kwargs)

    def set_attr(self, name: str, values: list) -> None:
        self._calls().set_attr(name, values)

    def collect(self, weights: dict[str, Tensor]) -> dict:
        assert self.model is not None and self.collector is not None  # start() came first
        start = time.perf_counter()
        self.model.load_state_dict(weights)
        next_value, next_done = self.collector.collect(self.model)
        buf, c = self.collector.buffer, self.collector
        return {
            **{name: getattr(buf, name) for name in (*buf.STEPS, *buf.END)},
            "next_value": next_value,
            "next_done": next_done,
            "raw_obs": c.raw_obs,
            "returns_seen": c.returns_seen,
            "state": c.state_dict(),  # where the next rollout starts: a replacement's starting point
            "episode_infos": None if buf.episode_infos is None else list(buf.episode_infos.items()),
            "rollout_s": time.perf_counter() - start,
        }

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()


class WorkerPool:
    """The Ray actors, and what the learner needs of their envs: the spaces, the count of rows and ``agents``
    (``VecEnv``'s attributes, so ``Run`` builds the model from it as from local envs). ``count`` is each actor's
    share of the envs."""

    def make_collector(
        self, num_steps: int, gamma: float, model: ActorCritic, seed: int, say: Callable[[str], None] = print
    ) -> RayCollector:
        """The collector of these envs: ``Run`` takes it from envs that bring their own, so the loop does not
        know about Ray."""
        return RayCollector(self, num_steps, gamma, model, seed, say=say)

    def __init__(self, args: PPOArgs, env=None):
        try:
            import ray
        except ImportError:
            raise UserError(RAY_MISSING) from None
        # auto's choice depends on the env count: it is made once, for the whole run's num_envs, so that every
        # slice runs the backend one process would (partition invariance)
        if env is not None:  # a factory, made on each actor: Ray sends it there with cloudpickle
            _check_sendable(ray, env)
            backend = factory_backend(env, args.env.env_kwargs, args.env.env_backend)
        else:
            # suggest=False: what a game backend offers instead of --async-envs is these workers
            backend = resolve_backend(
                args.env.env_id,
                args.env.env_backend,
                asynchronous=args.env.async_envs,
                num_envs=args.env.num_envs,
                env_kwargs=bool(args.env.env_kwargs),
                suggest=False,
            )
        self.env = env
        self.ray, self.args = ray, args.replace(env_backend=backend)
        self._started = start_ray()  # RAY_ADDRESS or a new local instance
        self.device = torch.device("cpu")
        self.count = args.env.num_envs // args.env.rollout_workers
        if ray.util.get_current_placement_group() is not None:
            # a sweep's trial: Ray places the actors in its placement group, where a bundle waits for each
            cpus = TRIAL_ACTOR_CPUS
        else:
            # a CPU each where the cluster has them; on a small machine a share, so that every actor starts
            share = ray.cluster_resources().get("CPU", 1.0) / args.env.rollout_workers
            # rounded down: N shares never exceed the CPUs
            cpus = min(1.0, math.floor(share * 10_000) / 10_000)
        self.actor_class = ray.remote(num_cpus=cpus)(RolloutWorker)
        self.actors = [self._new(k) for k in range(args.env.rollout_workers)]
        try:
            spaces = self.get([actor.open.remote() for actor in self.actors])
            self.single_observation_space, self.single_action_space, self.obs_layout, rows, agents = spaces[0]
        except BaseException:  # the env could not be made: nothing is left running
            self.close()
            raise
        self.num_envs = rows * args.env.rollout_workers  # every actor's rows
        self.agents = resized(agents, args.env.num_envs)

    def call(self, name: str, *args, **kwargs) -> tuple:
        """``VecEnv.call`` on every actor's envs, the results in env order (the envs must be a backend that
        has it). An actor that dies and is replaced starts from its env's constructor: a curriculum callback that
        sets its attributes at every update sets them again."""
        parts = self.get([actor.call.remote(name, args, kwargs) for actor in self.actors])
        return tuple(result for part in parts for result in part)

    def set_attr(self, name: str, values) -> None:
        """``VecEnv.set_attr`` on every actor's envs: a list or tuple of one value per env, in env order, or one
        value for all."""
        values, c = per_env_values(values, self.args.env.num_envs), self.count
        self.get([a.set_attr.remote(name, values[k * c : (k + 1) * c]) for k, a in enumerate(self.actors)])

    def _new(self, k: int):
        return self.actor_class.remote(self.args.to_json(), k * self.count, self.count, self.env)

    def replace(self, k: int):
        """A new actor for worker ``k``'s envs, in place of one that died."""
        with contextlib.suppress(Exception):
            self.ray.kill(self.actors[k])
        self.actors[k] = self._new(k)
        self.get(self.actors[k].open.remote())
        return self.actors[k]

    def get(self, refs, actor_may_die: bool = False):
        """``ray.get``: an error raised in an actor's env or policy re-raised as itself, any other failure as
        a one-line ``EnvError``; a dead actor's ``RayActorError`` passes through where ``actor_may_die``."""
        errors = self.ray.exceptions
        try:
            return self.ray.get(refs)
        except errors.RayTaskError as e:
            _raise_proxima_error(e)
            raise EnvError(f"a rollout worker failed: {_last_line(e)}") from e
        except errors.RayActorError as e:
            _raise_proxima_error(getattr(e, "cause", None))  # its envs could not be made
            if actor_may_die:
                raise
            raise EnvError(f"a rollout worker's actor died: {_last_line(e)}") from e
        except errors.RayError as e:
            raise EnvError(f"Ray failed: {_last_line(e)}") from e

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        if self._started:
            self.ray.shutdown()


class RayCollector:
    """The collector of a run with ``--rollout-workers``: the same ``collect`` and ``buffer`` as
    ``RolloutCollector``, filled by the actors' slices."""

    def __init__(
        self,
        pool: WorkerPool,
        num_steps: int,
        gamma: float,
        model: ActorCritic,
        seed: int,
        say: Callable[[str], None] = print,
    ):
        self.pool, self.say, self.seed = pool, say, seed
        n, layout, head = pool.num_envs, pool.obs_layout, model.head
        obs_dtype = model.normalization.obs_dtype(layout.dtype)
        device = next(model.parameters()).device  # the learner's: slices come back on the CPU, then move
        shapes = (num_steps, n, layout.shape, obs_dtype, head.action_shape, head.action_dtype, device)
        self.buffer = collector_of(pool, pool.args)[0].new_buffer(pool, model, *shapes)  # the workers' kind
        self.spec = model.spec.to_json()
        self.steps_done = 0  # env steps collected so far per env: where a fresh replacement's seed comes from
        pool.get([actor.start.remote(self.spec, seed) for actor in pool.actors])
        self.states: list[dict | None] = [None] * len(pool.actors)  # each slice's state at the next rollout
        self.infos = None  # keep_infos' keys
        # seconds spent per phase, summed over updates (benchmarks/rollout_workers.py): the weights put in the
        # object store, the slowest actor's rollout, the rest of the wait (the slices' transfer), the join
        self.timings = dict.fromkeys(("weights_out", "rollout", "transfer_back", "join"), 0.0)
        self.bytes: dict[str, int] = {}

    @torch.no_grad()
    def collect(self, model: Policy) -> tuple[Tensor, Tensor]:
        assert isinstance(model, ActorCritic)  # its weights go to the workers
        clock = time.perf_counter()
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        weights = self.pool.ray.put(state)
        refs = [actor.collect.remote(weights) for actor in self.pool.actors]
        sent = time.perf_counter()
        slices = [self._slice(k, ref, weights) for k, ref in enumerate(refs)]
        received = time.perf_counter()
        buf, norm = self.buffer, model.normalization
        for dim, names in ((1, buf.STEPS), (0, buf.END)):
            for name in names:
                getattr(buf, name).copy_(torch.cat([s[name] for s in slices], dim=dim))
        # the statistics the actors kept frozen, merged step by step in env order (as one process would)
        kept = ((norm.norm_obs, "raw_obs", "obs_rms"), (norm.norm_reward, "returns_seen", "return_rms"))
        for on, key, rms in kept:
            if on:
                seen = torch.cat([s[key] for s in slices], dim=1)
                for t in range(seen.shape[0]):
                    getattr(norm, rms).update(seen[t].to(buf.obs.device), rows=buf.present(t))
        self.states = [s["state"] for s in slices]
        if self.infos is not None:  # each slice's (step, row) -> info, with the row counted over all slices
            c = self.pool.num_envs // len(self.pool.actors)
            buf.episode_infos = {
                (t, k * c + i): info for k, s in enumerate(slices) for (t, i), info in s["episode_infos"]
            }
        self.steps_done += buf.obs.shape[0]
        slowest = max(s["rollout_s"] for s in slices)
        spent = (sent - clock, slowest, received - sent - slowest, time.perf_counter() - received)
        for key, seconds in zip(self.timings, spent, strict=True):  # in the order of self.timings' keys
            self.timings[key] += seconds
        # of the last update
        self.bytes = {"weights": _nbytes(state), "slices": sum(_nbytes(s) for s in slices)}
        device = buf.obs.device
        return (
            torch.cat([s["next_value"] for s in slices]).to(device),
            torch.cat([s["next_done"] for s in slices]).to(device),
        )

    def _slice(self, k: int, ref, weights) -> dict:
        """Worker ``k``'s slice; if the actor died, a new one collects it again (see the module's doc)."""
        for attempt in range(3):
            try:
                return self.pool.get(ref, actor_may_die=True)
            except self.pool.ray.exceptions.RayActorError as e:
                if attempt == 2:
                    raise EnvError(
                        f"rollout worker {k} died three times in one rollout ({type(e).__name__})"
                    ) from e
            actor = self.pool.replace(k)
            state = self.states[k]
            if state is not None or self.steps_done == 0:  # the very state this rollout started from
                seed, how = self.seed, "from the state its envs had at the start of this rollout"
            else:
                seed = seeding.fresh_episodes(self.seed, self.steps_done * self.pool.num_envs)
                how = "from fresh episodes (its envs' state cannot be saved)"
            self.pool.get(actor.start.remote(self.spec, seed, state))
            if self.infos is not None:
                self.pool.get(actor.keep_infos.remote(self.infos))
            self.say(f"note: rollout worker {k} died; a new actor collects its slice again, {how}")
            ref = actor.collect.remote(weights)
        raise AssertionError("unreachable")

    def keep_infos(self, keys) -> bool:
        """``RolloutCollector.keep_infos`` on every actor: the infos travel back with each slice."""
        self.infos = keys
        self.reports_infos = all(self.pool.get([actor.keep_infos.remote(keys) for actor in self.pool.actors]))
        return self.reports_infos

    def restart(self, seed: int) -> None:
        """Every actor on fresh episodes from ``seed`` (a resumed run whose envs were not saved); a
        replacement before the next rollout ends starts from there too."""
        self.seed, self.steps_done = seed, 0
        self.pool.get([actor.start.remote(self.spec, seed) for actor in self.pool.actors])

    def state_dict(self) -> dict | None:
        if any(state is None for state in self.states):
            return None
        return {
            "workers": {str(k): state for k, state in enumerate(self.states)},
            "steps_done": self.steps_done,
        }

    def load_state_dict(self, state: dict) -> None:
        self.states = [state["workers"][str(k)] for k in range(len(self.pool.actors))]
        self.steps_done = int(state["steps_done"])
        pairs = zip(self.pool.actors, self.states, strict=True)
        self.pool.get([actor.start.remote(self.spec, self.seed, s) for actor, s in pairs])


def _check_sendable(ray, env) -> None:
    """A one-line ``UserError`` for an env factory that Ray cannot send to its actors (a lambda that closes over
    a lock, a file, a simulator handle), before any actor starts."""
    try:
        ray.cloudpickle.dumps(env)  # Ray's own transport for functions: what .remote() would do
    except Exception as e:
        raise UserError(
            f"--rollout-workers sends the env factory to Ray actors, but it cannot be serialized "
            f"({raised(e).splitlines()[0]}); define it at module level, or make "
            "it a class or functools.partial whose arguments can be pickled"
        ) from None


def _nbytes(tree) -> int:
    """Bytes of the tensors in a nested dict (what a transfer carries, its small header aside)."""
    if isinstance(tree, Tensor):
        return tree.nbytes
    return sum(_nbytes(v) for v in tree.values()) if isinstance(tree, dict) else 0


def _last_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _raise_proxima_error(error) -> None:
    """Raise the proxima error (a crashed env, bad input, a NaN) that a Ray error wraps, if it wraps one."""
    import ray

    for _ in range(3):  # an actor's death wraps the task error that wraps the exception
        # a RayTaskError also passes for the class of its cause, with the remote traceback as its text
        if isinstance(error, (UserError, EnvError, NonFiniteError)) and not isinstance(
            error, ray.exceptions.RayError
        ):
            raise error from None
        error = getattr(error, "cause", None)
