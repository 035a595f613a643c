"""Files of a run: weights as safetensors, everything else as JSON. Nothing is ever unpickled.

Every file is written atomically (a temporary file in the same directory, then a rename), so a reader
sees either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save

from proxima.errors import DiskFullError, UserError

# The names of the files and folders a run directory (RUN_DIR), an agent's directory and a sweep's directory
# hold: every module that writes or reads one takes its name from here.
# RUN_DIR, written by `proxima train`:
CONFIG_JSON = "config.json"  # the run's settings, as resolved when it started
METRICS = "metrics.jsonl"  # one line per update
EPISODES = "episodes.jsonl"  # one line per finished episode
MACHINE_JSON = "machine.json"  # the machine and versions of each session that trained the run
CHECKPOINT = "checkpoint.safetensors"  # what --resume continues from (proxima.checkpoint)
VIDEOS = "videos"  # --capture-video's episodes
LEARNING_CURVE = "learning_curve.png"  # the plot extra's curve, at the end
REPORT = "report.html"  # `proxima report`'s page (and the live one during training)
EVAL_JSON = "eval.json"  # `proxima eval`'s (and `proxima solve`'s) verdict
EVAL_VIDEOS = "eval-videos"  # `proxima eval --video`'s episodes
PROBES_JSON = "probes.json"  # `proxima probe`'s results
BEST = "best"  # --save-best's agent (an agent directory)
CANDIDATES = "candidates"  # the agents --rescore-best scores at the end, one agent directory each
# an agent directory (RUN_DIR itself, or RUN_DIR/best), written by Agent.save:
WEIGHTS = "model.safetensors"
AGENT_JSON = "agent.json"
# a sweep's directory (its runs are RUN_DIRs in it):
SWEEP_JSON = "sweep.json"  # the plan, for --resume
SEEDS_JSON = "seeds.json"  # a batched run's (--num-seeds): its settings and seeds, for --resume
TRIAL_JSON = "trial.json"  # in each run's directory: the sweep's verdict on it
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
LEARNING_CURVES = "learning_curves.png"  # the curves of every setting, with bands over seeds
TUNE_JSON = "tune.json"  # `proxima tune`'s plan and the samples drawn, for --resume
BEST_PRESET = "best.json"  # `proxima tune`'s best settings, a preset for --config
PERTURBATIONS = (
    "perturbations.jsonl"  # in a PBT run's directory: each time it continued from another's checkpoint
)
STOP_JSON = "stop.json"  # while a Ray sweep stops on SIGTERM: tells its trials to checkpoint and stop

# What `proxima train` writes into RUN_DIR, and the other commands beside it; besides, TensorBoard's event files,
# W&B's folder and the atomic writes' temporary files (_atomic)
WANDB = "wandb"  # --track's: W&B's own folder
RUN_FILES = (CONFIG_JSON, METRICS, EPISODES, MACHINE_JSON, CHECKPOINT, VIDEOS, LEARNING_CURVE, REPORT, EVAL_JSON,
             EVAL_VIDEOS, PROBES_JSON, BEST, CANDIDATES, WEIGHTS, AGENT_JSON, TRIAL_JSON, WANDB)  # fmt: skip
_RUN_FILE_PREFIXES = ("events.out.tfevents.", ".tmp-")


# What a batched run (--num-seeds) writes into its RUN_DIR besides the files of RUN_FILES and its seedS directories
GROUP_FILES = (SEEDS_JSON, RESULTS_JSON, RESULTS_MD, LEARNING_CURVES)


def _seed_dir(name: str) -> bool:
    return name.startswith("seed") and name[4:].isdigit()


def seed_run_dirs(path: str) -> list[str]:
    """The seeds' run directories of a batched run's directory (``--num-seeds``: ``PATH/seedS``, in seed order);
    [] for any other path."""
    if not os.path.exists(os.path.join(path, SEEDS_JSON)):
        return []
    names = [n for n in os.listdir(path) if _seed_dir(n)]
    return [os.path.join(path, n) for n in sorted(names, key=lambda n: int(n[4:]))]


def distinct_dirs(paths: list[str]) -> list[str]:
    """``paths`` with each directory once (``RUN`` and ``./RUN/`` are one), in the order first given: a run given
    twice would count twice in a group's mean and band."""
    first: dict[str, str] = {}
    for path in paths:
        first.setdefault(os.path.realpath(path), path)
    return list(first.values())


def output_directory(path: str) -> str:
    """The directory that the file ``path`` goes in; a ``UserError`` where it does not exist, checked before the
    work whose result would then be lost."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"cannot write {path}: the directory {directory} does not exist")
    return directory


def written_by_a_run(name: str, group: bool = False) -> bool:
    """Whether ``name``, an entry of a run directory (``group``: a batched run's), is one that proxima writes
    there."""
    return (
        name in RUN_FILES
        or name.startswith(_RUN_FILE_PREFIXES)
        or (group and (name in GROUP_FILES or _seed_dir(name)))
    )


def _within(base: str, path: str) -> bool:
    """Whether ``path`` lies below ``base`` (both resolved), and is not ``base`` itself."""
    return path != base and os.path.commonpath([base, path]) == base


def inside(directory: str, relative, what: str) -> str:
    """``directory/relative``, a path that the file ``what`` names (a trial's run directory in sweep.json): a
    ``UserError`` unless it lies inside ``directory``, and is not ``directory`` itself, once every symbolic link
    on the way is resolved. A run's, a sweep's or a search's files may come from a stranger, and the commands
    that read them remove, write and embed what they name (docs/SECURITY.md)."""
    if isinstance(relative, str) and relative and "\0" not in relative:
        base = os.path.realpath(directory)
        if _within(base, os.path.realpath(os.path.join(base, relative))):
            return os.path.join(directory, relative)
    raise UserError(
        f"{what} names the path {relative!r}, which does not lie inside {directory}: the paths in it must lie "
        "inside its directory (the file was changed, or is not proxima's)"
    )


def links_inside(directory: str) -> None:
    """A ``UserError`` where a symbolic link anywhere in ``directory`` (a run's, before a resume writes to it)
    leads out of it: through one, the resume would cut, append to or overwrite a file elsewhere. W&B's folder
    is W&B's own (it links its logs to ~/.cache/wandb); proxima writes nothing through it."""
    base = os.path.realpath(directory)
    for root, dirs, names in os.walk(directory):  # links to directories are listed, not followed
        for name in dirs + names:
            path = os.path.join(root, name)
            if os.path.islink(path) and not _within(base, os.path.realpath(path)):
                raise UserError(
                    f"{path} is a symbolic link to {os.path.realpath(path)}, outside {directory}: a run's files "
                    "must lie inside its directory (it was changed, or is not proxima's)"
                )
        dirs[:] = [d for d in dirs if d != WANDB]  # (a batched run's seeds have one each)


def remove_stopped_run(run_dir: str, group: bool = False, hint: str = "give another run directory") -> bool:
    """Remove what a run that stopped before its first checkpoint wrote in ``run_dir``, so that it can start
    again; return whether there was any. Only the entries that proxima writes go (``written_by_a_run``; a
    symbolic link is removed, never what it points to); the directory and anything else in it stay. Such files
    without the run's config.json (``group``: a batched run's seeds.json) are a ``UserError``: not a run that
    proxima started, so nothing in it is removed (the message ends with ``hint``)."""
    if not os.path.isdir(run_dir):
        return False
    config = SEEDS_JSON if group else CONFIG_JSON
    written = sorted(name for name in os.listdir(run_dir) if written_by_a_run(name, group))
    if written and config not in written:
        raise UserError(
            f"{run_dir} holds {written[0]} but no {config}: not a run that proxima started, so it is left alone; {hint}"
        )
    for name in written:
        path = os.path.join(run_dir, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    return bool(written)


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # the errnos of a full disk and of a full quota


@contextlib.contextmanager
def writing(path: str, size: int | None):
    """Turns a full disk (ENOSPC) or quota (EDQUOT) met while writing ``size`` bytes (None: what is pending) to
    ``path`` into one ``DiskFullError`` that names them and the space free; any other error passes."""
    try:
        yield
    except OSError as e:
        if e.errno not in FULL_DISK:
            raise
        parts = [] if size is None else [f"it needs about {_size(size)}"]
        if e.errno == errno.ENOSPC:  # a quota's room is not the filesystem's free space
            with contextlib.suppress(OSError):
                free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
                parts.append(f"{_size(free)} free on that filesystem")
        what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
        raise DiskFullError(f"{what} writing {path}" + (": " + ", ".join(parts) if parts else "")) from None


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


_NEW_FILE_FLAGS = (
    os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)  # fmt: skip


def temporary_beside(path: str) -> tuple[int, str]:
    """A new temporary file in ``path``'s directory (named ``.tmp-XXXXXXXXXXXX<basename>``), open for writing,
    to be renamed onto ``path``: returns its descriptor and its path. Every atomic write makes its file here.

    Unlike ``tempfile.mkstemp``, which makes every file 0600, it asks for 0666, as ``open`` does, so the kernel
    gives it the mode a file written plainly would get (0666 less the umask, or a directory's default ACL): a
    model or report on a shared disk stays readable by those who may read the rest of the run. The umask is
    never read or set (``os.umask`` sets it for every thread of the process at once). The name is made unique
    by O_EXCL, as mkstemp does."""
    directory = os.path.dirname(os.path.abspath(path))
    for _ in range(100):
        tmp = os.path.join(directory, f".tmp-{secrets.token_hex(6)}{os.path.basename(path)}")
        try:
            return os.open(tmp, _NEW_FILE_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name found", directory)


def _atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename: a failed write
    (a full disk among others) leaves the previous file whole and no temporary file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    with writing(path, len(data)):
        fd, tmp = temporary_beside(path)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            # the data reaches the disk before the name does, so a power cut cannot leave it empty
            _fsync(tmp)
            os.replace(tmp, path)
            _fsync(directory)  # and the rename itself is on disk
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str, data: dict) -> None:
    _atomic(path, (json.dumps(data, indent=2, allow_nan=False) + "\n").encode())


def write_text(path: str, text: str) -> None:
    _atomic(path, text.encode())


def read_jsonl(path: str) -> list[dict]:
    """The lines of a JSON-lines log (``[]`` if there is none); a last line not yet ended by its newline (a run
    writing it now, or one killed mid-write) is left out. Parsed as one JSON array: one call instead of one per
    line, 3x faster on a 10M-step run's 235k episodes."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return []
    lines = [line for line in text[: text.rfind("\n") + 1].split("\n") if line.strip()]
    try:
        return json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:
        for i, line in enumerate(lines):
            try:
                json.loads(line)
            except json.JSONDecodeError:
                raise UserError(f"{path} is corrupt at line {i + 1}") from None
        raise UserError(f"{path} is corrupt") from None


# The safetensors bytes are made here and written by _atomic, not by safetensors' save_file, whose I/O errors
# come without their errno: a full disk must be told from any other failure.
def write_tensors(path: str, tensors: dict[str, torch.Tensor]) -> None:
    _atomic(path, save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}))


def write_checkpoint(path: str, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """One safetensors file holding tensors plus a JSON object in its header, written atomically, so the
    tensors and the counters that go with them can never come from two different moments."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    _atomic(path, save(tensors, metadata={"proxima": json.dumps(meta, allow_nan=False)}))


def read_checkpoint(path: str) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and the JSON object of a file written by ``write_checkpoint``; ``UserError`` if it is not one."""
    return read_tensors(path), read_checkpoint_meta(path)


def read_checkpoint_meta(path: str) -> dict:
    """Only the JSON object of a file written by ``write_checkpoint`` (its header; no tensor is read)."""
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`")
    try:
        with safe_open(path, "pt") as f:
            text = (f.metadata() or {}).get("proxima")
    except (SafetensorError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"{path} is not a readable safetensors file ({reason}); the checkpoint is corrupt"
        ) from None
    try:
        meta = json.loads(text) if text is not None else None
    except json.JSONDecodeError:
        meta = None
    if not isinstance(meta, dict):
        raise UserError(f"{path} has no proxima training state in its header; the checkpoint is corrupt")
    return meta


def read_json(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; the checkpoint is corrupt")
    return data


def read_tensors(path: str) -> dict[str, torch.Tensor]:
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"{path} is not a readable safetensors file ({reason}); the checkpoint is corrupt"
        ) from None


def load_module_state(module: torch.nn.Module, state: dict[str, torch.Tensor], path: str) -> None:
    """``module.load_state_dict(state, strict=True)`` with a mismatch reported as a one-line ``UserError``."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0]
        raise UserError(f"{path} does not match the network it should hold: {detail}") from None
