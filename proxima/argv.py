"""Check command-line arguments against a dataclass's type hints before tyro parses them.

tyro reports a bad argument in a multi-line box whose drawing and wording change between its releases.
Checking here first gives one stable line that names the flag, the bad value and what is accepted.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import math
import re
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import tyro

from proxima.errors import UserError


@dataclass(frozen=True)
class Field:
    name: str
    hint: Any  # without Annotated and without the None of ``X | None``
    optional: bool  # ``X | None``: the value None is accepted too
    positional: bool
    required: bool
    doc: str
    metavar: str | None = None  # tyro.conf.arg's, where one was given: it says what the value is

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def many(self) -> bool:
        return typing.get_origin(self.hint) is tuple

    @property
    def item(self) -> Any:
        return typing.get_args(self.hint)[0] if self.many else self.hint

    def accepts(self) -> str:
        """What the field accepts, in words."""
        if self.metavar:
            return self.metavar
        item = self.item
        if typing.get_origin(item) is Literal:
            choices = ", ".join(map(str, typing.get_args(item)))
            words = f"one or more of {choices}" if self.many else f"one of {choices}"
        else:
            one, more = {int: ("an integer", "integers"), float: ("a number", "numbers")}.get(
                item, ("a string", "strings")
            )
            words = f"one or more {more}" if self.many else one
        return words + (" or None" if self.optional else "")

    def converts(self, value: str) -> bool:
        item = self.item
        if typing.get_origin(item) is Literal:
            return value in map(str, typing.get_args(item))
        if item is int:
            return as_integer(value) is not None
        if item is float:
            try:
                float(value)
            except ValueError:
                return False
        return True  # a string, or a type left to tyro


def as_integer(value: str) -> str | None:
    """``value`` as an integer's digits, or None: a count written as a float that is a whole number (``1e6``,
    ``2.5e5``, as Stable-Baselines3's and rl-zoo's configs write total_timesteps) is that integer."""
    try:
        return str(int(value))
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return None
    return str(int(number)) if math.isfinite(number) and number == int(number) else None


@functools.cache
def _module_tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


@functools.cache  # every command reads the settings' classes several times
def field_docs(cls) -> dict[str, str]:
    """Each field's docstring (the string right after it in the class body), on one line."""
    body = _class_body(cls)
    return {
        a.target.id: " ".join(b.value.value.split())
        for a, b in zip(body, body[1:], strict=False)
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
        and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)
    }  # fmt: skip


def _class_body(cls) -> list[ast.stmt]:
    """The statements of ``cls``'s body. A module-level class (or one nested in classes) is found in its
    module's tree, parsed once for all its classes; before Python 3.13 ``inspect.getsource`` parses the whole
    module again for each class, and a command reads a dozen."""
    try:
        nodes = _module_tree(inspect.getsourcefile(cls) or "").body
        for name in cls.__qualname__.split("."):
            nodes = next(n for n in nodes if isinstance(n, ast.ClassDef) and n.name == name).body
        return nodes
    except (OSError, TypeError, SyntaxError, StopIteration):  # made at run time, or defined in a function
        pass
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    except (OSError, TypeError):  # a class made at run time has no source
        return []


def fields(cls) -> list[Field]:
    """The fields of ``cls`` as flags, with the fields of nested dataclasses in place (their flags are flat)."""
    hints, docs, out = typing.get_type_hints(cls, include_extras=True), field_docs(cls), []
    for f in dataclasses.fields(cls):
        hint, markers = hints[f.name], ()
        if typing.get_origin(hint) is Annotated:
            hint, *markers = typing.get_args(hint)
        if dataclasses.is_dataclass(hint):
            out += fields(hint)
            continue
        args = typing.get_args(hint)
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
        if optional:
            hint = next(a for a in args if a is not type(None))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        positional = tyro.conf.Positional in markers
        metavar = next((m.metavar for m in markers if getattr(m, "metavar", None)), None)
        out.append(Field(f.name, hint, optional, positional, required, docs.get(f.name, ""), metavar))
    return out


def in_flags(message: str, cls, typed: set[str] | None = None) -> str:
    """A settings error worded as the command line words it: each field of ``cls`` by its flag (``num_envs``
    as ``--num-envs``). The settings' checks serve ``proxima.train(num_envs=0)`` and ``--num-envs 0`` alike, and
    word their errors for Python. A snake_case name is a field's wherever it stands outside quotes; a one-word
    name only where it opens the message (``gamma must be ...``: the message is about it), since elsewhere it
    is a word of the prose. ``typed``: only these flags (where the command takes settings by name too:
    ``--grid num_envs=4,8``)."""
    names = {f.name: f.flag for f in fields(cls) if typed is None or f.flag in typed}
    if not names:
        return message
    snake = "|".join(sorted((re.escape(n) for n in names if "_" in n), key=len, reverse=True))
    message = re.sub(
        rf"(?<![\w\-./'\"`])({snake})(?:(=)(?=\w)|(?![\w'\"`]))",  # num_minibatches=3: --num-minibatches 3
        lambda m: names[m.group(1)] + (" " if m.group(2) else ""),
        message,
    )
    first = re.match(r"(\w+)(?= )", message)
    if first and first.group(1) in names:
        message = names[first.group(1)] + message[first.end() :]
    return message


# The flags that Stable-Baselines3, rl-zoo and CleanRL users type first, and proxima's that do their job (said
# where difflib's spelling match would point elsewhere: --normalize is not --norm-value).
FOREIGN = {
    "--n-steps": "--num-steps",
    "--n-envs": "--num-envs",
    "--n-epochs": "--update-epochs",
    "--lr": "--learning-rate",
    "--clip-range": "--clip-coef",
    "--net-arch": "--hidden-sizes",
    "--batch-size": "--num-minibatches (a minibatch is num_envs x num_steps / num_minibatches samples)",
    "--minibatch-size": "--num-minibatches (a minibatch is num_envs x num_steps / num_minibatches samples)",
    "--device": "--cuda or --no-cuda",
    "--eval-freq": "--eval-every (in updates)",
    "--save-freq": "--checkpoint-every (in updates)",
    "--tensorboard-log": "--run-dir (TensorBoard's events are written there)",
    "--verbose": "--quiet (the console output is on by default)",
    "--normalize": "--norm-obs and --norm-reward",
    "--norm-advantages": "--norm-adv",
    "--normalize-advantage": "--norm-adv",
    "--policy": "--hidden-sizes and --encoder",
}


def _is_flag(token: str) -> bool:
    """Whether the parser reads ``token`` as a flag: negative numbers are values, as they are for tyro."""
    try:
        float(token)
        return False
    except ValueError:
        return token.startswith("-") and len(token) > 1


def check(cls, argv: list[str], prog: str) -> list[str]:
    """Raise a one-line ``UserError`` for the first argument that ``cls``'s fields do not accept; else return
    ``argv`` with each integer written as a float (``1e6``) in plain digits, as the parser takes it."""
    argv = list(argv)

    def fail(message: str):
        raise UserError(f"{message} (see {prog} --help for the accepted flags)")

    def check_values(field: Field, name: str, values: list[str], at: int, prefix: str = "") -> None:
        """``values`` are ``argv[at:]``'s (``prefix`` before the first: ``--flag=``)."""
        if not values:
            fail(f"{name} needs a value: {field.accepts()}")
        if field.optional and values == ["None"]:
            return
        bad = next((v for v in values if not field.converts(v)), None)
        if bad is not None:
            fail(f"{name} expects {field.accepts()}, got {bad!r}")
        if field.item is int:
            for k, value in enumerate(values):
                argv[at + k] = (prefix if k == 0 else "") + as_integer(value)

    all_fields = fields(cls)
    flags = {f.flag: f for f in all_fields if not f.positional}
    flags |= {"--no-" + f.flag[2:]: f for f in all_fields if f.hint is bool and not f.positional}
    waiting = [f for f in all_fields if f.positional]
    filling = None  # the tuple positional that takes the values in a row
    switch = None  # the boolean flag just before, which takes no value
    only_values = False  # after "--" every token is a positional value
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--" and not only_values:
            only_values = True
            continue
        if not _is_flag(token) or only_values:
            if filling is None and waiting:
                filling = waiting.pop(0)
            if filling is None:
                after = f" after {switch}, which takes no value" if switch else ""
                fail(f"unexpected argument {token!r}{after}")
            check_values(filling, filling.name.upper(), [token], i - 1)
            filling = filling if filling.many else None
            switch = None
            continue
        filling = switch = None
        name, equals, inline = token.partition("=")
        field = flags.get(name)
        if field is None:
            foreign = FOREIGN.get(name.replace("_", "-"))
            if foreign is not None and foreign.split()[0] in flags:
                fail(f"unrecognized flag {name!r}; in proxima: {foreign}")
            close = difflib.get_close_matches(name, flags, n=1, cutoff=0.75)
            fail(f"unrecognized flag {name!r}" + (f"; did you mean {close[0]}?" if close else ""))
        if field.hint is bool:
            if equals:  # true and false were turned into --x and --no-x already (``_bool_flags_as_tyro``)
                fail(f"{name} takes no value, or true or false, got {inline!r}")
            switch = name
            continue
        if equals:
            check_values(field, name, [inline], i - 1, prefix=name + "=")
            continue
        j = i
        while j < len(argv) and not _is_flag(argv[j]) and (field.many or j == i):
            j += 1
        check_values(field, name, argv[i:j], i)
        i = j
    for field in waiting:
        if field.required:
            fail(f"missing {field.metavar or field.name.upper()}: {field.doc or field.accepts()}")
    return argv
