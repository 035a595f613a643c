"""Files of a run: weights as safetensors, everything else as JSON. Nothing is ever unpickled.

Every file is written atomically (a temporary file in the same directory, then a rename), so a reader
sees either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save

from proxima.base.errors import DiskFullError, FileAccessError, UserError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, and no lock is taken (lock_directory)
    fcntl = None  # type: ignore[assignment]  # an import is typed as its module; None stands for its absence

# The names of the files and folders a run directory (RUN_DIR), an agent's directory and a sweep's directory
# hold: every module that writes or reads one takes its name from here.
# RUN_DIR, written by `proxima train`:
CONFIG_JSON = "config.json"  # the run's settings, as resolved when it started
METRICS = "metrics.jsonl"  # one line per update
EPISODES = "episodes.jsonl"  # one line per finished episode
MACHINE_JSON = "machine.json"  # the machine and versions of each session that trained the run
CHECKPOINT = "checkpoint.safetensors"  # what --resume continues from (proxima.run.checkpoint)
VIDEOS = "videos"  # --capture-video's episodes
LEARNING_CURVE = "learning_curve.png"  # the plot extra's curve, at the end
REPORT = "report.html"  # `proxima report`'s page (and the live one during training)
EVAL_JSON = "eval.json"  # the last `proxima eval`'s returns
# `proxima solve`'s verdict on its 100 episodes, apart from eval.json: a later short `proxima eval` (to watch a
# video, to try another env) replaces eval.json, and must not erase the score against the task's threshold
SOLVE_JSON = "solve.json"
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
# in a PBT run's directory: each time it continued from another's checkpoint
PERTURBATIONS = "perturbations.jsonl"
STOP_JSON = "stop.json"  # while a Ray sweep stops on SIGTERM: tells its trials to checkpoint and stop
# in RUN_DIR and in a sweep's or search's directory, while a process writes it: that process's PID and host
LOCK = ".lock"

# What `proxima train` writes into RUN_DIR, and the other commands beside it; besides, TensorBoard's event files,
# W&B's folder and the atomic writes' temporary files (_atomic)
WANDB = "wandb"  # --track's: W&B's own folder
RUN_FILES = (
    CONFIG_JSON,
    METRICS,
    EPISODES,
    MACHINE_JSON,
    CHECKPOINT,
    VIDEOS,
    LEARNING_CURVE,
    REPORT,
    EVAL_JSON,
    SOLVE_JSON,
    EVAL_VIDEOS,
    PROBES_JSON,
    BEST,
    CANDIDATES,
    WEIGHTS,
    AGENT_JSON,
    TRIAL_JSON,
    LOCK,
    WANDB,
)
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
    # the lock stays: the process that removes the rest holds it, and a new .lock would let a second writer in
    written = sorted(name for name in os.listdir(run_dir) if written_by_a_run(name, group) and name != LOCK)
    if written and config not in written:
        raise UserError(
            f"{run_dir} holds {written[0]} but no {config}: not a run that proxima started, so it is left alone; {hint}"
        )
    for name in written:
        path = os.path.join(run_dir, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    return bool(written)


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # the errnos of a full disk and of a full quota
# The errnos of a file the file system refuses to write (or read), whoever asks and however often (unlike a
# full disk), in the words of the one line that says so (docs/HEALTH.md lists them)
REFUSED = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "file name too long (the file system takes names of up to 255 bytes, on most)",
    errno.ENOTDIR: "a part of its path is a file, not a directory",
    errno.EISDIR: "it is a directory",
}


def refused(e: OSError, path: str | None = None, verb: str = "write") -> FileAccessError | None:
    """The one-line ``FileAccessError`` of ``e`` where the file system refused to ``verb`` (``REFUSED``),
    naming ``path`` (else the file ``e`` names); None for any other error."""
    if e.errno not in REFUSED:
        return None
    where = path if path is not None else (e.filename if e.filename is not None else "a file")
    return FileAccessError(f"cannot {verb} {where}: {REFUSED[e.errno]}")


def make_dirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, with a refused write (``REFUSED``) or a full disk in one line."""
    with writing(path, None):
        os.makedirs(path, exist_ok=True)


@contextlib.contextmanager
def writing(path: str, size: int | None):
    """Turns a full disk (ENOSPC) or quota (EDQUOT) met while writing ``size`` bytes (None: what is pending) to
    ``path`` into one ``DiskFullError`` that names them and the space free, and a write the file system
    refuses (a permission, a read-only disk, a name too long: ``REFUSED``) into one ``FileAccessError`` that
    names ``path``; any other error passes."""
    try:
        yield
    except OSError as e:
        if (cannot := refused(e, path)) is not None:
            raise cannot from None
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


NAME_MAX = 255  # the longest file name of ext4, XFS, btrfs, tmpfs, NTFS, APFS (in bytes or characters)
_NEW_FILE_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


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
        # cut to NAME_MAX bytes, so that a name the file system takes has a temporary name it takes too
        name = f".tmp-{secrets.token_hex(6)}{os.path.basename(path)}"
        name = (
            os.fsencode(name)[:NAME_MAX].decode(errors="ignore")
            if len(os.fsencode(name)) > NAME_MAX
            else name
        )
        tmp = os.path.join(directory, name)
        try:
            return os.open(tmp, _NEW_FILE_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name found", directory)


def _atomic(path: str, data: bytes) -> None:
    with replacing(path, len(data)) as (fd, _), os.fdopen(fd, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def replacing(path: str, size: int | None = None):
    """A new temporary file beside ``path`` (``temporary_beside``: its descriptor, to be closed, and its path)
    for the block to write; renamed onto ``path`` once the block is done, removed where it fails: a reader
    sees the old file or the whole new one, and a failed write (a full disk among others) leaves the old one
    and no temporary file behind. ``size``: what the block writes, for ``writing``'s message."""
    with writing(path, size):
        fd, tmp = temporary_beside(path)
        try:
            yield fd, tmp
            # the data reaches the disk before the name does, so a power cut cannot leave it empty
            _fsync(tmp)
            os.replace(tmp, path)
            _fsync(os.path.dirname(os.path.abspath(path)))  # and the rename itself is on disk
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
    with _safetensors(path), safe_open(path, "pt") as f:
        text = (f.metadata() or {}).get("proxima")
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
    except OSError as e:
        raise refused(e, path, "read") or e from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; the checkpoint is corrupt")
    return data


def read_tensors(path: str) -> dict[str, torch.Tensor]:
    with _safetensors(path):
        return load_file(path)


@contextlib.contextmanager
def _safetensors(path: str):
    """A missing or unreadable safetensors file at ``path``, read in the block, as a one-line ``UserError``."""
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`")
    try:
        yield
    except (SafetensorError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"{path} is not a readable safetensors file ({reason}); the checkpoint is corrupt"
        ) from None


# safetensors' names of the dtypes a network holds (its header names each tensor's dtype so)
_DTYPE_CODES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_DTYPE_NAMES = {code: str(dtype).removeprefix("torch.") for dtype, code in _DTYPE_CODES.items()}

Shapes = dict[str, tuple[tuple[int, ...], str]]  # each tensor's shape and safetensors dtype code, by name


def tensor_shapes(path: str) -> Shapes:
    """Each tensor's shape and dtype in the safetensors file ``path``, from its header alone: no tensor is read,
    so what a file claims can be checked before anything is allocated for it."""
    with _safetensors(path), safe_open(path, "pt") as f:
        return {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118


def shapes_of(tensors: dict[str, torch.Tensor]) -> Shapes:
    """``tensor_shapes``' form of tensors in hand (a meta-device network's state, a checkpoint's part)."""
    return {k: (tuple(t.shape), _DTYPE_CODES.get(t.dtype, str(t.dtype))) for k, t in tensors.items()}


def check_shapes(found: Shapes, expected: Shapes, path: str, source: str) -> None:
    """A one-line ``UserError`` unless the tensors ``found`` in ``path`` are exactly those ``expected`` of the
    network that ``source`` describes: the same names, shapes and dtypes (a float32 network loads no integer
    or float64 weights: ``load_state_dict`` would convert them silently)."""
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing or extra:
        what = f"lacks {missing[0]}" if missing else f"holds {extra[0]}"
        more = len(missing) + len(extra) - 1
        raise UserError(
            f"{path} does not match the network that {source} describes: it {what}"
            f"{f' and {more} more differences' if more else ''}; the two files do not go together"
        )
    for key, (shape, dtype) in expected.items():
        if found[key][0] != shape:
            raise UserError(
                f"{path} does not match the network that {source} describes: its {key} is of shape "
                f"{found[key][0]}, the network's {shape}; the two files do not go together"
            )
        if found[key][1] != dtype:
            name = _DTYPE_NAMES.get(found[key][1], found[key][1])
            raise UserError(
                f"{path} holds {key} as {name}; the network holds it as {_DTYPE_NAMES.get(dtype, dtype)}, and weights "
                "of another dtype are refused, not converted"
            )


def check_finite(tensors: dict[str, torch.Tensor], path: str) -> None:
    """A one-line ``UserError`` where a floating tensor holds a NaN or an infinity: a network with one gives
    NaN logits, and an agent that plays action 0 whatever it sees."""
    for key, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            count = int((~torch.isfinite(tensor)).sum())
            raise UserError(
                f"{path} holds {count} non-finite value{'s' if count > 1 else ''} (NaN or infinity) in {key}; no "
                "trained network has one: use another copy of the run, or train it again"
            )


def load_module_state(module: torch.nn.Module, state: dict[str, torch.Tensor], path: str) -> None:
    """``module.load_state_dict(state, strict=True)`` with a mismatch reported as a one-line ``UserError``."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0]
        raise UserError(f"{path} does not match the network it should hold: {detail}") from None


# ---- one writer per directory ------------------------------------------------------------------------------
# A run, a batched run, a sweep and a search write their directory from one process at a time: it holds the
# directory's LOCK with fcntl.flock from before its first write to its end. The kernel lets go of a flock when
# its process ends, however it ends, so a lock left by a killed process never blocks the next run.

WRITER_WAIT_S = 120.0  # how long a requeued job, or a sweep's or search's trial, waits for the last holder
LOCK_POLL_S = 0.1

# The files that only a directory's writer replaces (atomically): a temporary file of one of them that is there
# when the lock is taken was left by a writer killed mid-write. eval.json, probes.json and report.html are not
# among them: `proxima eval`, `probe` and `report` write them without the lock, maybe at this very moment.
_WRITER_FILES = frozenset(
    (
        CONFIG_JSON,
        CHECKPOINT,
        WEIGHTS,
        AGENT_JSON,
        MACHINE_JSON,
        SEEDS_JSON,
        TRIAL_JSON,
        RESULTS_JSON,
        SWEEP_JSON,
        TUNE_JSON,
        BEST_PRESET,
        STOP_JSON,
    )
)
_TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{12}(.+)\Z", re.DOTALL)  # temporary_beside's names
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}  # a file system without flock


class _Held:
    def __init__(self, fd: int | None, path: str):
        self.fd, self.path, self.thread = fd, path, threading.get_ident()


_held: dict[str, _Held] = {}  # the directories this process holds, by real path
_held_guard = threading.Lock()


def _forget_held() -> None:
    """In a process forked from a holder (an async env's worker): the lock stays the holder's alone, so that it
    ends with the holder, however the holder ends, and not with the last of its workers."""
    global _held_guard
    _held_guard = threading.Lock()  # another thread of the parent may have held it as it forked
    for held in _held.values():
        if held.fd is not None:
            with contextlib.suppress(OSError):
                os.close(held.fd)  # the parent's descriptor, which shares the lock, keeps it
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_held)


@contextlib.contextmanager
def lock_directory(
    directory: str,
    what: str = "run directory",
    instead: str | None = "--run-dir",
    wait_s: float = 0.0,
    waiting: Callable[[str], None] | None = None,
):
    """Hold ``directory``'s lock (``DIRECTORY/.lock``, holding the holder's PID and host) while the block runs,
    as its one writer; ``directory`` is made where it does not exist, and removed again if it is left empty.
    Where another process holds it, a ``UserError`` names that process's PID (``what`` names the directory,
    ``instead`` the flag that gives another one), after ``wait_s`` seconds of waiting for it to let go
    (``waiting`` is told so once). Once taken, the temporary files that a killed writer left are removed
    (``remove_stale_temporaries``).

    Taken again by the thread that holds it (a sweep's trial, then its run), it is held once; a thread of the
    same process is refused as another process is. A file system without locks (flock fails with ENOLCK) and
    Windows take none."""
    made = _make_dirs(directory, what)
    key = os.path.realpath(directory)
    with _held_guard:
        held = _held.get(key)
    if held is not None and held.thread == threading.get_ident():
        if not _still_ours(held):  # the lock file went with the directory's contents (a trial clearing them)
            fd = _take(directory, what, instead, wait_s, waiting)
            if held.fd is not None:
                os.close(held.fd)
            held.fd = fd
        yield
        return
    try:
        held = _Held(_take(directory, what, instead, wait_s, waiting), os.path.join(directory, LOCK))
    except BaseException:
        _remove_made(made)
        raise
    with _held_guard:
        _held[key] = held
    try:
        remove_stale_temporaries(directory)
        yield
    finally:
        with _held_guard:
            del _held[key]
        if held.fd is not None:
            with contextlib.suppress(OSError):
                if _still_ours(held):  # a waiting process that opened it then finds it gone, and opens anew
                    os.unlink(held.path)
            os.close(held.fd)
        _remove_made(made)


def _make_dirs(directory: str, what: str) -> list[str]:
    """Make ``directory`` and its missing parents; return those made, the deepest first."""
    made, path = [], os.path.abspath(directory)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        made.append(path)
        path = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{what} {directory!r} is a file, not a directory; give a directory") from None
    except OSError as e:  # a read-only disk, a permission, a name too long: said as every refused write is
        raise refused(e, directory) or UserError(
            f"cannot make the {what} {directory}: {e.strerror}"
        ) from None
    return made


def _remove_made(made: list[str]) -> None:
    for path in made:  # only what is empty: a run that wrote its files keeps them
        try:
            os.rmdir(path)
        except OSError:
            return


def _still_ours(held: _Held) -> bool:
    if held.fd is None:
        return True
    try:
        return os.path.samestat(os.fstat(held.fd), os.lstat(held.path))
    except OSError:
        return False


def _take(directory: str, what: str, instead: str | None, wait_s: float, waiting) -> int | None:
    """Lock ``DIRECTORY/.lock`` and write this process's PID and host there; its descriptor, which holds the
    lock (None where none can be taken)."""
    path = os.path.join(directory, LOCK)
    deadline, told = time.monotonic() + wait_s, False
    while True:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(path).st_mode):  # a link or a device, in a directory from elsewhere
                raise UserError(
                    f"{path} is not a regular file: remove it (proxima locks {directory} with it)"
                )
        if fcntl is None:
            return None
        try:
            fd = os.open(path, _LOCK_FLAGS, 0o666)
        except FileNotFoundError:  # the directory, made empty, was removed by its last holder: make it again
            _make_dirs(directory, what)
            continue
        except OSError as e:
            raise refused(e, directory) or UserError(
                f"cannot write in the {what} {directory}: {e.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _holder(path)
            if time.monotonic() >= deadline:
                then = f" or give another {instead}" if instead else ""
                raise UserError(
                    f"{what} {directory} is in use by {holder}; wait for it to finish{then}"
                ) from None
            if waiting is not None and not told:
                waiting(f"{directory} is in use by {holder}; waiting for it to end")
                told = True
            time.sleep(LOCK_POLL_S)
            continue
        except OSError as e:
            os.close(fd)
            if e.errno in _NO_LOCKS:
                return None
            raise UserError(f"cannot lock {path}: {e.strerror}") from None
        held = _Held(fd, path)
        if not _still_ours(held):  # its last holder removed it between our open and our lock: open anew
            os.close(fd)
            continue
        if os.fstat(fd).st_nlink != 1:  # a hard link to a file elsewhere, whose contents would be replaced
            os.close(fd)
            raise UserError(
                f"{path} is a hard link to another file: remove it (proxima locks {directory} with it)"
            )
        try:
            with writing(path, None):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError as e:
            os.close(fd)
            raise UserError(f"cannot write {path}: {e.strerror}") from None
        except BaseException:  # a full disk, said as any write's (DiskFullError)
            os.close(fd)
            raise
        return fd


_LOCK_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


def _holder(path: str) -> str:
    """Who holds the lock file ``path``, from the PID and host it holds (written just after it was locked)."""
    for _ in range(20):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            try:
                text = os.read(fd, 300).decode(errors="replace")
            finally:
                os.close(fd)
        except OSError:
            text = ""
        found = re.fullmatch(r"(\d{1,10}) ([\w.-]{1,255})\n", text)
        if found:
            break
        time.sleep(0.01)
    else:
        return "another proxima process"
    pid, host = int(found[1]), found[2]
    if host != socket.gethostname():
        return f"another proxima process (PID {pid} on {host})"
    return f"another {'run of this' if pid == os.getpid() else 'proxima'} process (PID {pid})"


def remove_stale_temporaries(directory: str) -> None:
    """Remove from ``directory`` and its agent directories (``best``, each of ``candidates``) the temporary
    files (``temporary_beside``'s) of the files that only its writer replaces: left by a writer killed
    mid-write. Only regular files of such a name go, never a link; called with the directory's lock held, so
    that no writer of those files is writing one now."""
    folders, candidates = [directory, os.path.join(directory, BEST)], os.path.join(directory, CANDIDATES)
    if not os.path.islink(candidates):
        with contextlib.suppress(OSError), os.scandir(candidates) as entries:
            folders += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    for folder in folders:
        if folder != directory and os.path.islink(folder):  # leads out of the directory
            continue
        try:
            with os.scandir(folder) as entries:
                stale = [entry.path for entry in entries if _left_by_a_writer(entry)]
        except OSError:
            continue
        for path in stale:
            with contextlib.suppress(OSError):
                os.remove(path)


def _left_by_a_writer(entry: os.DirEntry) -> bool:
    name = _TEMPORARY.match(entry.name)
    return name is not None and name[1] in _WRITER_FILES and entry.is_file(follow_symlinks=False)
