"""The one exception type that means "the user asked for something we cannot do".

The CLI turns it into a single line on stderr and exit status 2; the Python API lets it propagate.
"""

import signal


class UserError(ValueError):
    """Bad input from the user: the message names the bad value and what is accepted."""


class NonFiniteError(RuntimeError):
    """A NaN or infinity appeared during training; the message names where it appeared first."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM during training: a checkpoint was saved at the end of the update in progress.
    ``exit_status`` is the shell's for that signal: 130 for Ctrl-C, 143 for SIGTERM."""

    def __init__(self, run_dir: str, update: int, num_updates: int, signum: int = signal.SIGINT):
        how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        super().__init__(f"{how} after update {update} of {num_updates}; checkpoint saved in {run_dir}")
        self.run_dir = run_dir
        self.exit_status = 128 + signum


class DiskFullError(RuntimeError):
    """A write failed for want of space (ENOSPC, or EDQUOT: a quota); the message names the file, the space the
    write needed and the space free. Files are written atomically, so the previous checkpoint stays whole. The CLI
    exits with ``exit_status``, 75 (EX_TEMPFAIL in sysexits.h: try again later): unlike 1 (a NaN or a crashed env,
    which a resume would meet again) and 2 (bad input), the run resumes as it was once space is freed."""

    exit_status = 75


class FileAccessError(UserError):
    """The file system refused to write (or read) a file (a permission, a read-only disk, a name too long): the
    message names the file and why. Unlike a full disk, waiting does not help: the user must give another place
    or make this one writable, so the CLI exits with status 2, as for any bad input."""


class EnvError(RuntimeError):
    """The environment itself failed (its constructor, reset or step raised); the message names its exception."""


def raised(e: BaseException) -> str:
    """An exception as a message quotes it: ``TypeError: what it says``, or its type alone where it says
    nothing (a bare ``raise NotImplementedError``)."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def read_only(cls):
    """Make the frozen dataclass ``cls`` refuse an assignment with a ``UserError`` that says how to change the
    value instead (``cls.how_to_change(name)``), where dataclasses would raise ``FrozenInstanceError``. Its
    ``__init__`` and ``dataclasses.replace`` still work: a frozen dataclass's ``__init__`` bypasses
    ``__setattr__``."""

    def refuse(self, name: str, value=None) -> None:
        raise UserError(
            f"{type(self).__name__}.{name} cannot be assigned: settings are fixed once made; "
            f"{self.how_to_change(name)}"
        )

    cls.__setattr__ = refuse
    cls.__delattr__ = refuse
    if not hasattr(cls, "how_to_change"):
        cls.how_to_change = lambda self, name: f"make new ones with args.replace({name}=...)"
    return cls
