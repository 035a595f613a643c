"""Run logging: one JSON line per update in ``metrics.jsonl``, the same values as TensorBoard scalars (and the
health warnings that fired at that update), one JSON line per finished episode in ``episodes.jsonl`` (for
per-episode curves and "last 20 episodes" means), and ``machine.json``: where and with what each part of the
run ran (a resumed run adds a part).

TensorBoard tags follow CleanRL's grouping (``charts/`` and ``losses/``) with ``global_step`` on the x-axis.
"""

from __future__ import annotations

import datetime
import glob
import json
import math
import os
import platform
import threading
from collections.abc import Sequence

import numpy as np
import torch

from proxima.algo.algorithms import ALGORITHMS
from proxima.base.errors import UserError
from proxima.base.files import EPISODES, FULL_DISK, MACHINE_JSON, METRICS, REFUSED, writing

# metrics.jsonl key -> TensorBoard tag of detail 12's debug variables (docs/SEEDS.md); every other number of a
# record (episode statistics, the learning rate, a callback's own) goes under charts/
LOSSES = (
    "value_loss",
    "policy_loss",
    "entropy",
    "old_approx_kl",
    "approx_kl",
    "clipfrac",
    "explained_variance",
    "grad_norm",
)
TB_TAGS = {"sps": "charts/SPS", **{key: f"losses/{key}" for key in LOSSES}}
NOT_SCALARS = {"global_step", "time_s"}  # the x-axis, and a time TensorBoard records itself
# TensorBoard's text of what value_loss is measured in, where it is not the returns' units (value_loss_note)
VALUE_LOSS_TAG = "notes/value_loss"


def value_loss_note(config: dict) -> str | None:
    """What a run of these flat settings logs as ``value_loss`` where it is not in the returns' units: with
    ``norm_value`` and a critic, ``proxima.algo.update`` divides the critic's errors by the value targets'
    running std, so the numbers are not comparable with a run without it. None otherwise."""
    algorithm = ALGORITHMS.get(config.get("algo", "ppo"))
    if not config.get("norm_value") or (algorithm is not None and not algorithm.has_critic):
        return None
    return (
        "value_loss is normalized (norm_value): the critic's errors are measured in standard deviations of its "
        "value targets (their running std), not in the returns' units, so it does not compare with the value_loss "
        "of a run without norm_value; times that std squared it is in the returns' units. --no-norm-value logs it "
        "in the returns' units."
    )


def info_number(value) -> float | None:
    """An info value as ``--log-info`` logs it: a bool as 0 or 1, an int, a float, a numpy scalar or a
    one-element numeric array as a float; None for anything else (a string, a list, a larger array)."""
    if isinstance(value, bool | int | float | np.bool_ | np.number):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "biuf":
        return float(value.reshape(()))
    return None


def _json_number(x):
    """A record's value as JSON takes it: numpy scalars, one-element arrays and tensors (a callback's mean of
    float32 data) as Python numbers, larger ones as lists; NaN and inf, which are not JSON, as null."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.generic | np.ndarray):
        x = x.item() if x.size == 1 else x.tolist()
    return None if isinstance(x, float) and not math.isfinite(x) else x


class RunLogger:
    """Writes a run's logs, from ``open`` on (a run is given its logger when it is made, before its directory
    is written; the ``Logging`` callback opens it when training starts)."""

    def __init__(self, run_dir: str, config: dict, tensorboard: bool = True):
        self.run_dir, self._config, self._tensorboard = run_dir, config, tensorboard

    def open(self, resume_from: dict | None = None, wandb_run=None) -> RunLogger:
        """Start writing; ``resume_from`` (from ``offsets()`` at a checkpoint) continues the logs from there.
        ``wandb_run``: a W&B run to log the TensorBoard scalars and videos to, where W&B does not mirror
        TensorBoard itself (a batched run's seed: ``callbacks._init_wandb``)."""
        run_dir, config = self.run_dir, self._config
        self._wandb = wandb_run
        for name, size in () if resume_from is None else ((n, resume_from[n]) for n in (METRICS, EPISODES)):
            path = os.path.join(run_dir, name)  # both checked before either is cut back
            if not os.path.exists(path) or os.path.getsize(path) < size:
                raise UserError(
                    f"{path} is shorter than its checkpoint says; the run directory was changed after it"
                )
        self._metrics, self._episodes = (self._open(name, resume_from) for name in (METRICS, EPISODES))
        self._writer = None
        if self._tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            if resume_from is None:
                self._writer = SummaryWriter(run_dir)
                rows = "\n".join(f"|{k}|{v}|" for k, v in config.items())
                self._writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
                note = value_loss_note(config)
                if note is not None:  # the scalar's own tag stays losses/value_loss, which users read
                    self._writer.add_text(VALUE_LOSS_TAG, note)
            else:  # TensorBoard hides what the interrupted process logged after the checkpoint
                self._writer = SummaryWriter(run_dir, purge_step=resume_from["global_step"] + 1)
            found = glob.glob(os.path.join(run_dir, f"events.out.tfevents.*.{os.getpid()}.*"))
            self._events = (
                max(found, key=os.path.getmtime) if found else os.path.join(run_dir, "events.out.tfevents")
            )
            self._hook = threading.excepthook
            threading.excepthook = self._tensorboard_thread_hook
        return self

    def _tensorboard_thread_hook(self, args) -> None:
        """TensorBoard writes its events in a thread of its own, and raises that thread's error again in this one
        at the next call, where ``writing`` turns a full disk (or a refused write) into the run's one line: the
        thread need not print a traceback of it as well."""
        error = args.exc_value
        if not (
            isinstance(error, OSError)
            and (error.errno in FULL_DISK or error.errno in REFUSED)
            and "tensorboard" in type(args.thread).__module__
        ):
            self._hook(args)

    def _open(self, name: str, resume_from: dict | None):
        path = os.path.join(self.run_dir, name)
        if resume_from is None:
            return open(path, "w")
        # Lines written after the checkpoint (and a line cut off by a kill) belong to the lost future.
        os.truncate(path, resume_from[name])
        return open(path, "a")

    def offsets(self, global_step: int) -> dict:
        """Where the logs end now, for a checkpoint taken at ``global_step``; the logs are on disk up to there
        before the checkpoint that records it can be."""
        for f, name in ((self._metrics, METRICS), (self._episodes, EPISODES)):
            with writing(os.path.join(self.run_dir, name), None):
                f.flush()
                os.fsync(f.fileno())
        return {"global_step": global_step, METRICS: self._metrics.tell(), EPISODES: self._episodes.tell()}

    def text(self, tag: str, text: str, global_step: int) -> None:
        if self._writer is not None:
            with writing(self._events, None):
                self._writer.add_text(tag, text, global_step)

    def log_update(self, record: dict, warnings: Sequence[dict] = ()) -> None:
        """Write one update's record (which must hold ``global_step``) to every sink; ``warnings`` (the health
        warnings that fired, as ``{"kind", "text"}``) go into its ``metrics.jsonl`` line, so that a report
        can mark them where they fired and a resumed run's log keeps exactly the ones before its checkpoint."""
        record = {k: _json_number(v) for k, v in record.items()}
        line = {**record, "warnings": list(warnings)} if warnings else record
        self._append(self._metrics, METRICS, json.dumps(line) + "\n")
        step, scalars = record["global_step"], {}
        for key, value in record.items():
            # the debug variables under CleanRL's tags; a callback's own numbers under charts/
            tag = TB_TAGS.get(key, None if key in NOT_SCALARS else f"charts/{key}")
            if tag is not None and isinstance(value, int | float) and not isinstance(value, bool):
                scalars[tag] = value
        if self._writer is not None:
            with writing(self._events, None):
                for tag, value in scalars.items():
                    self._writer.add_scalar(tag, value, step)
        if self._wandb is not None:
            self._wandb.log({**scalars, "global_step": step})

    def video(self, tag: str, path: str, global_step: int) -> None:
        """An MP4 (``--capture-video``'s) into TensorBoard as a video, at most 240 wide and 150 frames (and to
        ``wandb_run`` as it is)."""
        if self._wandb is not None:
            import wandb

            self._wandb.log({tag: wandb.Video(path, format="mp4"), "global_step": global_step})
        if self._writer is not None:
            from proxima.run.video_summary import log_video, read_mp4

            frames, fps = read_mp4(path, max_width=240)
            if len(frames):
                with writing(self._events, None):
                    log_video(self._writer, tag, frames, fps, global_step, max_width=240, max_frames=150)

    def log_episodes(self, global_step: int, returns: list[float], lengths: list[int]) -> None:
        lines = [
            json.dumps({"global_step": global_step, "return": ret, "length": length}) + "\n"
            for ret, length in zip(returns, lengths, strict=True)
        ]
        self._append(self._episodes, EPISODES, "".join(lines))

    def _append(self, f, name: str, text: str) -> None:
        with writing(os.path.join(self.run_dir, name), len(text)):
            f.write(text)
            f.flush()

    def close(self) -> None:
        for sink in (self._metrics, self._episodes, self._writer):
            try:
                if sink is not None:
                    sink.close()
            except OSError as e:
                # a full disk (or a disk now read-only) here loses only what came after the last checkpoint,
                # which a resume cuts off from the logs (and TensorBoard hides); it must not hide the error that
                # stopped the run
                if e.errno not in FULL_DISK and e.errno not in REFUSED:
                    raise
        if self._writer is not None and threading.excepthook == self._tensorboard_thread_hook:
            threading.excepthook = self._hook


def log_session(run_dir: str, global_step: int, device: str, torch_threads: int) -> None:
    """Add this process to ``RUN_DIR/machine.json``: the machine, the versions, and the step it started at."""
    import gymnasium

    from proxima.base.files import write_json
    from proxima.version import __version__

    path = os.path.join(run_dir, MACHINE_JSON)
    try:
        with open(path) as f:
            sessions = json.load(f)["sessions"]
    except (OSError, ValueError, KeyError, TypeError):  # the first part of the run (or an unreadable file)
        sessions = []
    sessions.append(
        {
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "from_step": global_step,
            "host": platform.node(),
            "pid": os.getpid(),  # with the host: whether the run's process still lives (proxima report)
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "device": device,
            "torch_threads": torch_threads,
            "python": platform.python_version(),
            "proxima": __version__,  # not the installed metadata: a checkout run through PYTHONPATH has none
            "torch": torch.__version__,
            "gymnasium": gymnasium.__version__,
        }
    )
    write_json(path, {"sessions": sessions})


def _cpu_model() -> str:
    """The CPU's name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
