"""Executors: where a sweep's trials run. ``local`` runs them one after another in this process; ``ray`` runs
each as a Ray Tune trial, on a local Ray instance or on an existing cluster (``address``).

A trial is a function of a JSON-able config (``proxima.sweep.run_trial``) that writes what it did into its
own run directory, so an executor only calls it somewhere and says when it is done. Nothing here knows
about training, and nothing here schedules: Tune places trials on the CPUs it sees.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator

from proxima.base.errors import TrainingInterrupted, UserError, raised
from proxima.base.files import STOP_JSON, read_json, write_json
from proxima.run.threads import ray_worker_priority

EXECUTORS = ("local", "ray")
RAY_MISSING = "needs Ray: pip install 'proxima[ray]' (make installs it)"

# trial_fn(config, report, node, stop) -> the trial's row; report(metrics) is called after each update, stop()
# too: a signal number there asks the trial to checkpoint after its update and raise TrainingInterrupted
TrialFn = Callable[..., dict]
# on_done(config, error): error is None where the trial wrote its own row (finished, or failed with a reason)
OnDone = Callable[[dict, str | None], None]


class TrialFailed(Exception):
    """Raised inside a Tune trial that failed with a reason, so that Tune records it as an error."""


class TrialsStopped(TrainingInterrupted):
    """SIGTERM to a Ray sweep's driver: every trial that was running checkpointed after its update and stopped;
    the others did not start."""

    def __init__(self, signum: int):
        KeyboardInterrupt.__init__(
            self,
            f"stopped by {signal.Signals(signum).name}; each run that was training saved "
            "a checkpoint after its update",
        )
        self.run_dir = ""  # no one run to resume: the CLI says how to resume the sweep
        self.exit_status = 128 + signum


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
        from ray import tune  # noqa: F401
    except ImportError:
        return False
    return True


def check_executor(name: str, what: str) -> None:
    if name not in EXECUTORS:
        raise UserError(f"unknown executor {name!r}; accepted: {', '.join(EXECUTORS)}")
    if name == "ray" and not ray_available():
        raise UserError(f"{what} on Ray {RAY_MISSING}, or give --executor local")


def run_local(trial_fn: TrialFn, configs: list[dict], on_done: OnDone) -> None:
    """One trial after another in this process; a trial that raises is reported and the next one starts."""
    for config in configs:
        try:
            trial_fn(config, report=None, node="local")
        except Exception as e:  # a bug in a user's env or callback: the other trials go on
            on_done(config, f"{raised(e)}".splitlines()[0])
        else:
            on_done(config, None)


def trial_resources(cpus_per_trial: int, gpus_per_trial: float = 0, worker_cpus: int = 0):
    """What ``tune.with_resources`` takes for one trial: a placement group of one bundle for the trial itself
    (``cpus_per_trial`` CPUs, ``gpus_per_trial`` GPUs) and one bundle of one CPU for each of the ``worker_cpus``
    CPUs that its own Ray actors (rollout workers) ask for. Tune schedules a trial's actors into its group, so
    the actors run on CPUs reserved with the trial, never waiting on CPUs that other trials hold."""
    from ray import tune

    own = {"CPU": cpus_per_trial, **({"GPU": gpus_per_trial} if gpus_per_trial else {})}
    return tune.PlacementGroupFactory([own] + [{"CPU": 1}] * worker_cpus)


def error_line(error: BaseException | None) -> str:
    """What a trial's row says of its crash: the last line of Ray's error; a trial whose process was killed
    from outside (SIGKILL, the kernel out of memory) leaves Ray no error at all."""
    lines = [line for line in str(error or "").splitlines() if line.strip()]
    if lines:
        return lines[-1]
    return "the trial's process ended without an error (killed from outside, or out of memory)"


def run_ray(
    trial_fn: TrialFn,
    configs: list[dict] | None,
    on_done: OnDone,
    *,
    storage: str,
    cpus_per_trial: int,
    max_concurrent: int | None,
    address: str | None,
    gpus_per_trial: float = 0,
    worker_cpus: Callable[[dict], int] | None = None,
    name_of: Callable | None = None,
    param_space: dict | None = None,
    search_alg=None,
    scheduler=None,
    num_samples: int = 1,
    metric: str | None = None,
    mode: str | None = None,
    announce: bool = True,
) -> None:
    """Every config as one Ray Tune trial of ``trial_fn`` with ``cpus_per_trial`` CPUs and ``gpus_per_trial``
    GPUs, at most ``max_concurrent`` at once (None: as many as the cluster's CPUs allow), and
    ``worker_cpus(config)`` more CPUs for the trial's own actors (``trial_resources``). ``address``: None joins
    the cluster that ``RAY_ADDRESS`` names, if set, and otherwise starts a local Ray instance; ``auto`` or
    ``ray://host:port`` joins a cluster, whose nodes must all see ``storage``.

    ``name_of(trial)``: a trial's name and folder (default: its run directory's name). A search instead of a
    grid (``proxima tune``): ``configs`` None, and ``param_space``'s ``num_samples`` draws by ``search_alg``,
    under ``scheduler``, judged by ``metric`` and ``mode``; ``trial_fn`` and ``on_done`` then get the drawn
    settings with the trial's name under ``"__name"``. ``announce``: say so where Ray starts or is joined."""
    # Tune's console tables and tracebacks would bury proxima's one line per trial; PROXIMA_DEBUG shows them.
    quiet = os.environ.get("PROXIMA_DEBUG", "") in ("", "0")
    if quiet:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the older reporter, silent at verbose=0
    import ray
    from ray import tune

    worker_cpus = worker_cpus or (lambda _: 0)
    try:
        started = start_ray(address, announce)
    except (ConnectionError, ValueError, RuntimeError) as e:
        given = (
            f"--address {address!r}"
            if address
            else f"RAY_ADDRESS {os.environ.get('RAY_ADDRESS') or 'local'!r}"
        )
        raise UserError(f"cannot reach Ray at {given}: {str(e).splitlines()[0]}") from None
    try:
        _check_resources(ray, cpus_per_trial, gpus_per_trial, max(map(worker_cpus, configs or ()), default=0))
    except UserError:
        if started:
            ray.shutdown()
        raise
    stopping = _Stopping(storage)
    name_of = name_of or _name
    grid = configs is not None

    def config_of(trial) -> dict:
        return trial.config["config"] if grid else {**trial.config, "__name": name_of(trial)}

    class Notify(tune.Callback):  # runs in this process as Tune learns that a trial started or ended
        def on_trial_start(self, iteration, trials, trial, **info):
            stopping.running.add(trial.trial_id)

        def on_trial_complete(self, iteration, trials, trial, **info):
            stopping.running.discard(trial.trial_id)
            on_done(config_of(trial), None)

        def on_trial_error(self, iteration, trials, trial, **info):
            stopping.running.discard(trial.trial_id)
            # the reason a failed trial wrote to its trial.json comes first; this is for any other crash
            on_done(config_of(trial), error_line(trial.get_error()))

    class StopTheRest(tune.Stopper):  # _Stopping says when
        def __call__(self, trial_id, result) -> bool:
            return False

        def stop_all(self) -> bool:
            return stopping.stop_all()

    # A new Tune experiment each time: the run directories, not Tune's state, say what is done (a resumed
    # sweep schedules only the unfinished trials).
    attempt = 1 + sum(name.startswith("tune-") for name in os.listdir(storage))
    tuner = tune.Tuner(
        tune.with_resources(
            _trainable(trial_fn, grid, stopping.file),
            lambda params: trial_resources(
                cpus_per_trial, gpus_per_trial, worker_cpus(params["config"] if grid else params)
            ),
        ),
        param_space={"config": tune.grid_search(configs)} if configs is not None else param_space,
        tune_config=tune.TuneConfig(
            max_concurrent_trials=max_concurrent,
            search_alg=search_alg,
            scheduler=scheduler,
            num_samples=num_samples,
            metric=metric,
            mode=mode,
            # Tune's names and folders (RUN_DIR/../tune-N/) are the runs' own
            trial_name_creator=name_of,
            trial_dirname_creator=name_of,
        ),
        run_config=tune.RunConfig(
            name=f"tune-{attempt}",
            storage_path=os.path.abspath(storage),
            verbose=0,
            callbacks=[Notify()],
            stop=StopTheRest(),
            failure_config=tune.FailureConfig(max_failures=0),  # a NaN would recur: proxima says why instead
        ),
    )
    logger = logging.getLogger("ray.tune")
    level = logger.level
    if quiet:
        logger.setLevel(logging.CRITICAL)  # a failed trial's traceback; on_trial_error says it in one line
    try:
        with stopping.handling_sigterm():
            tuner.fit()
    finally:
        logger.setLevel(level)
        if started:
            ray.shutdown()
        stopping.clear()
    if stopping.signals:
        raise TrialsStopped(stopping.signals[0])


def start_ray(address: str | None = None, announce: bool = False) -> bool:
    """Join or start Ray where this process has not (``address``: ``run_ray``'s); whether it was started here
    (then this process shuts it down). ``announce``: one line first, since Ray says nothing while it starts,
    which on a small machine takes long enough to look like a hang."""
    import ray

    if ray.is_initialized():
        return False
    ray_worker_priority()
    # "local", not None: with None, Ray joins the cluster that its file /tmp/ray/ray_current_cluster names, left
    # by the last `ray start` or by a test's ray.cluster_utils.Cluster, alive or dying
    target = address or os.environ.get("RAY_ADDRESS") or "local"
    if announce:
        print(
            f"starting Ray (local{_local_cpus()})..." if target == "local" else f"joining Ray at {target}...",
            flush=True,
        )
    ray.init(address=target, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    return True


def _local_cpus() -> str:
    """``, N CPUs``: the CPUs a local Ray instance takes, as Ray counts them (a container's quota, not the
    host's cores); nothing where this Ray does not say."""
    try:
        from ray._private.utils import get_num_cpus
    except ImportError:  # Ray's private helper: a later Ray may move it
        return ""
    return f", {int(get_num_cpus(override_docker_cpu_warning=True))} CPUs"


class _Stopping:
    """SIGTERM (a scheduler ending the job) reaches this process only: the trials, in Ray's processes, learn it
    from the stop file, which every node sees as it sees ``storage``. Once signalled and every running trial
    has stopped on its own (with its checkpoint), Tune stops the rest (``stop_all``): trials that had not
    started yet. Tune's own stop would kill a running trial mid-update."""

    def __init__(self, storage: str):
        self.file = os.path.join(storage, STOP_JSON)
        self.clear()  # one left by a stopped sweep that this one resumes
        self.signals: list[int] = []
        self.running: set[str] = set()  # the trials that Tune started and that have not ended

    def stop_all(self) -> bool:
        return bool(self.signals) and not self.running

    def clear(self) -> None:
        if os.path.exists(self.file):
            os.remove(self.file)

    def _handle(self, signum: int, frame: object) -> None:
        if self.signals:  # a second signal: now, as for a plain run
            raise KeyboardInterrupt
        self.signals.append(signum)
        write_json(self.file, {"signal": signum})

    @contextlib.contextmanager
    def handling_sigterm(self) -> Iterator[None]:
        handled = (signal.SIGTERM,) if threading.current_thread() is threading.main_thread() else ()
        previous = {signum: signal.signal(signum, self._handle) for signum in handled}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _check_resources(ray, cpus_per_trial: int, gpus_per_trial: float, worker_cpus: int) -> None:
    """A one-line ``UserError`` for a trial that no node, or the whole cluster, could hold: Tune would wait for
    it forever, with a warning at most."""
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    for flag, asked, name in (
        ("--cpus-per-trial", cpus_per_trial, "CPU"),
        ("--gpus-per-trial", gpus_per_trial, "GPU"),
    ):
        largest = max((node.get(name, 0) for node in nodes), default=0)
        if asked > largest:
            raise UserError(
                f"{flag} {asked:g} is more than any Ray node has (the largest has {largest:g} "
                f"{name}s); give at most {largest:g}"
            )
    total = sum(node.get("CPU", 0) for node in nodes)
    if cpus_per_trial + worker_cpus > total:
        raise UserError(
            f"a trial needs {cpus_per_trial + worker_cpus} CPUs ({cpus_per_trial} of its own, "
            f"{worker_cpus} for its rollout workers' actors), more than the {total:g} of the Ray "
            "cluster; give fewer --rollout-workers or a smaller --cpus-per-trial"
        )


def _name(trial) -> str:
    return os.path.basename(trial.config["config"]["run"]["run_dir"])


def _trainable(trial_fn: TrialFn, grid: bool, stop_file: str):
    def stop() -> int | None:
        """The signal that stopped the sweep, or None while it runs."""
        return read_json(stop_file)["signal"] if os.path.exists(stop_file) else None

    def trial(params: dict) -> None:
        import ray
        from ray import tune

        if stop() is not None:  # started as the sweep stops: left for --resume
            return
        node = ray.get_runtime_context().get_node_id()
        try:
            config = params["config"] if grid else {**params, "__name": tune.get_context().get_trial_name()}
            row = trial_fn(config, report=tune.report, node=node, stop=stop)
        except TrainingInterrupted:  # checkpointed after its update: --resume goes on from there
            return
        if row["status"] == "failed":
            raise TrialFailed(row["error"])

    return trial
