"""The ``proxima`` command: ``main`` runs one subcommand (``USAGE``), each a module of this package
(``proxima.commands.train``, ...) whose ``run(argv)`` returns the exit status.

Every command's flags are a dataclass parsed by ``proxima.commands.argv.parse`` (tyro): ``EvalArgs``, ``ExportArgs``, ...
and, for the commands that train (train, probe, solve, sweep), the command's own flags composed with
``PPOArgs``' settings by ``common.parse_command``, in the help's sections (``common.SECTIONS``: the source
documents' settings first). So ``--help`` is their field docs, and every user error
becomes one line on stderr and exit status 2 (``PROXIMA_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import difflib
import errno
import gc
import importlib
import os
import sys
import time
import traceback
import typing

from proxima.base import files
from proxima.base.errors import (
    DiskFullError,
    EnvError,
    FileAccessError,
    NonFiniteError,
    TrainingInterrupted,
    UserError,
)
from proxima.commands.argv import debug, in_flags
from proxima.commands.common import flag_value

STARTED = time.perf_counter()  # where the process's own start time cannot be read


def process_seconds() -> float:
    """Seconds since this process started (Linux: from /proc, so the interpreter's and torch's start-up count,
    as in benchmarks/solve_suite.py); elsewhere since this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - STARTED


USAGE = """usage: proxima COMMAND [FLAGS]

commands:
  train   train an agent (proxima train --help lists every flag)
  eval    evaluate a trained agent on Gymnasium's own env (proxima eval --help)
  compare train several algorithms over several seeds and plot their learning curves (proxima compare --help)
  sweep   train every combination of settings and seeds, on Ray Tune by default (proxima sweep --help)
  tune    search settings on Ray Tune: random or Optuna search, ASHA or PBT (proxima tune --help)
  plot    overlay the learning curves of runs: proxima plot RUN_DIR... --output FILE.png
  probe   train the agent on the probe envs and name the component a failure points to (proxima probe --help)
  solve   train ENV_ID with its fast preset until solved, then score it on Gymnasium's env (proxima solve --help)
  report  one self-contained HTML page of runs, a sweep or a comparison: proxima report RUN_DIR... (--help)
  stats   IQM, median, mean and optimality gap of runs' final scores, with bootstrap CIs: proxima stats DIR...
  bench   train a suite's tasks x 10 seeds with their presets, beside published PPO numbers: proxima bench SUITE
  presets list the presets that `proxima train --config NAME` accepts; `proxima presets NAME` shows one
  export  write a trained agent's deterministic policy as one ONNX or TorchScript file (proxima export --help)
  check-env  check that proxima will train on ENV_ID (or module:ID) and say what it will make of it
  check   grade your own functions (the source documents' compute_advantages, ...): proxima check MODULE[:FUNCTION]

proxima --version prints the version.
"""


# Each command's module in this package, imported when the command runs: the CLI starts fast
COMMANDS = {
    "train": "train",
    "eval": "eval",
    "presets": "presets",
    "solve": "solve",
    "compare": "compare",
    "plot": "plot",
    "probe": "probe",
    "report": "report",
    "stats": "stats",
    "bench": "bench",
    "sweep": "sweep",
    "tune": "tune",
    "export": "export",
    "check-env": "check_env",
    "check": "check",
}


def _working_directory_on_path(command: str, rest: list[str], own_process: bool) -> None:
    """A command whose settings the user types (``train``, not ``--resume``; ``check-env``; a new sweep or
    search; ``check``, whose MODULE is the learner's) imports ``module:Env-v0``'s module from the working
    directory, as ``python -m`` would (and not under
    ``-P``/PYTHONSAFEPATH). Every other command reads a run's files, and finds no module there: the working
    directory is taken off the path where ``python -m proxima`` put it, in a process of the command's own
    (``own_process``: a caller of ``main``, a test or a notebook, keeps its path as it is)."""
    cwd = os.getcwd()
    typed = (
        command in ("train", "check-env", "check", "sweep", "tune") and flag_value(rest, "--resume") is None
    )
    if typed and not sys.flags.safe_path:
        if "" not in sys.path and cwd not in sys.path:
            sys.path.insert(0, cwd)
    elif not typed and own_process and sys.path and sys.path[0] in ("", cwd):
        del sys.path[0]  # Python's own entry for `python -m`; one that PYTHONPATH names comes after it


def console() -> int:
    """The ``proxima`` command (the installed script and ``python -m proxima``): ``main`` in a process of its own.

    The command owns its process, and what its imports made lives until it exits: frozen, those objects are
    left out of the cyclic collector's later passes, which would walk them again and again during a run. A
    caller of ``main`` in its own process (a test, a notebook) keeps its collector as it is."""
    gc.freeze()
    return main(own_process=True)


def main(argv: list[str] | None = None, own_process: bool = False) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if argv[0] in ("-V", "--version"):
        from proxima.version import __version__

        print(f"proxima {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    _working_directory_on_path(command, rest, own_process)
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, COMMANDS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(
            f"proxima: error: unknown command {command!r}{hint} (accepted: {', '.join(COMMANDS)})",
            file=sys.stderr,
        )
        return 2
    try:
        return importlib.import_module(f"proxima.commands.{COMMANDS[command]}").run(rest)
    except SystemExit as e:  # --help, printed in full
        return e.code if isinstance(e.code, int) else 0
    except BrokenPipeError:  # `proxima presets | head`: the reader has all it wants
        # Python's advice: no second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UserError, EnvError, NonFiniteError, DiskFullError) as e:
        if debug():  # where it was raised, and what raised the env's exception (its cause)
            traceback.print_exc()
        # one line, whatever the message holds: numpy writes a 2-D space's bounds over several lines
        line = " ".join(part.strip() for part in str(e).splitlines())
        if isinstance(e, UserError) and not isinstance(e, FileAccessError):  # whose paths are not flags
            from proxima.commands.eval import EvalArgs
            from proxima.run.config import PPOArgs

            # sweep's --grid and tune's --space name settings as Python does: only the flags typed are flags
            by_name = command in ("sweep", "tune")
            settings = EvalArgs if command == "eval" else PPOArgs  # eval's settings are its own
            line = in_flags(line, settings, {a.split("=")[0] for a in rest} if by_name else None)
        print(f"proxima {command}: error: {line}", file=sys.stderr)
        return 2 if isinstance(e, UserError) else getattr(e, "exit_status", 1)
    except OSError as e:  # one that no proxima code around it said in its own words (a library's write)
        cannot = files.refused(e, verb="write" if e.errno == errno.EROFS else "access")
        if cannot is None and e.errno not in files.FULL_DISK:
            raise
        if debug():
            traceback.print_exc()
        print(
            f"proxima {command}: error: {cannot or f'{os.strerror(typing.cast(int, e.errno)).lower()} writing {e.filename}'}",
            file=sys.stderr,
        )
        return 2 if cannot is not None else DiskFullError.exit_status
    except TrainingInterrupted as e:
        print(
            f"proxima {command}: {e}; continue it with: proxima train --resume {e.run_dir}", file=sys.stderr
        )
        return e.exit_status
    except KeyboardInterrupt:  # a second Ctrl-C, which stops at once, even while the first one's checkpoint
        # is being written (written whole or not at all)
        if debug():
            traceback.print_exc()
        print(
            f"proxima {command}: stopped at once by a second interrupt; a run keeps its last checkpoint "
            "(proxima train --resume RUN_DIR continues from it)",
            file=sys.stderr,
        )
        return 130
