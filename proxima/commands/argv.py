"""Every command's flags, the one way: ``parse`` runs tyro on a dataclass, and words each mistake in one line.

tyro reports a bad argument in a multi-line box whose drawing and wording change between its releases. Its
parse-error hook (``tyro._errors.on_parse_error``, private: tyro is pinned in constraints.txt) hands ``parse``
each mistake as an event, which becomes one ``UserError`` naming the flag, the bad value and what is accepted.
A value's meaning (``--num-envs 0``) is checked where the setting is declared (``proxima.run.config.check``), as
for a preset or a keyword argument; ``in_flags`` words that error with the flags.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import io
import json
import math
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn

import tyro
from tyro import _docstrings
from tyro import _errors as events
from tyro.constructors._struct_spec_dataclass import dataclass_rule

from proxima.base.errors import UserError


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


@functools.cache  # every command reads the settings' classes several times
def field_docs(cls) -> dict[str, str]:
    """Each field's docstring, as tyro reads it for ``--help`` (``tyro._docstrings``, private like the
    parse-error hook), on one line."""
    docs = {f.name: _docstrings.get_field_docstring(cls, f.name, ()) for f in dataclasses.fields(cls)}
    return {name: " ".join(doc.split()) for name, doc in docs.items() if doc}


def fields(cls) -> list[Field]:
    """The fields of ``cls`` as flags, with the fields of nested dataclasses in place (their flags are flat)."""
    hints, docs, out = typing.get_type_hints(cls, include_extras=True), field_docs(cls), []
    for f in dataclasses.fields(cls):
        hint, markers = hints[f.name], list[Any]()
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
        metavar = next((str(m.metavar) for m in markers if getattr(m, "metavar", None)), None)
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


def _is_flag(token: str) -> bool:
    """Whether the parser reads ``token`` as a flag: negative numbers are values, as they are for tyro."""
    try:
        float(token)
        return False
    except ValueError:
        return token.startswith("-") and len(token) > 1


_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def bool_flags_as_tyro(cls, argv: list[str]) -> list[str]:
    """Accept the seed's ``--cuda False`` / ``--cuda=true`` spelling beside tyro's ``--cuda`` / ``--no-cuda``."""
    flags = {f.flag for f in fields(cls) if f.hint is bool and not f.positional}
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        name, _, inline = arg.partition("=")
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
        if name in flags and value.lower() in _TRUE | _FALSE:
            out.append(name if value.lower() in _TRUE else "--no-" + name[2:])
            i += 1 if inline else 2
            continue
        out.append(arg)
        i += 1
    return out


def debug() -> bool:
    return os.environ.get("PROXIMA_DEBUG", "") not in ("", "0")


def helping(argv: list[str]) -> bool:
    return "-h" in argv or "--help" in argv


def parse(cls, argv: list[str], prog: str, description: str | None = None, hidden: tuple[str, ...] = ()):
    """``tyro.cli`` on the dataclass ``cls`` (its flags flat), with each mistake one ``UserError``; help
    prints in full and exits 0. ``hidden``: fields left out of the flags and the help (settings that the
    command sets itself)."""
    _hidden[:] = hidden
    argv = bool_flags_as_tyro(cls, argv)
    flat = tyro.conf.OmitArgPrefixes[cls]
    if helping(argv):
        # straight to the terminal, so it keeps its formatting; without the other flags, which tyro would
        # parse first, so that a mistake in them does not hide the help
        with _REGISTRY:
            return tyro.cli(flat, args=["--help"], prog=prog, description=description)
    mistake = _Mistakes(cls, argv, prog)
    mistake.scan()
    _rejected.clear()
    try:
        with contextlib.ExitStack() as stack:
            if not debug():
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
                stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
            with _REGISTRY, events.on_parse_error(mistake.said):
                parsed = tyro.cli(flat, args=argv, prog=prog, description=description)
    except SystemExit:
        # A mistake the hook does not know of. tyro's wording and layout change between its releases, so
        # its text is not read here; PROXIMA_DEBUG=1 lets it through.
        mistake.fail(f"cannot parse the arguments {' '.join(argv)!r}", generic=True)
    mistake.check_positionals(parsed)
    from proxima.run.config import GROUPS, check_fields, declared

    # the constraints declared in a command's own flags (proxima.run.config.Must), in the flags' words; the
    # settings' groups are checked once, when their PPOArgs is made (sweep's and tune's by name, as typed)
    for value in (parsed, *(getattr(parsed, f.name) for f in dataclasses.fields(parsed))):
        if not dataclasses.is_dataclass(value) or isinstance(value, type) or type(value) in GROUPS.values():
            continue
        if any(musts for _, musts in declared(type(value)).values()):
            try:
                check_fields(value)
            except UserError as e:
                raise UserError(in_flags(str(e), type(value))) from None
    return parsed


class _Mistakes:
    """The one line each of tyro's parse-error events becomes, for the flags of ``cls`` in ``argv``."""

    def __init__(self, cls, argv: list[str], prog: str):
        self.argv, self.prog, self.fields = argv, prog, fields(cls)
        self.by_name = {f.name: f for f in self.fields}
        self.flags = {f.flag: f for f in self.fields if not f.positional}
        self.flags |= {"--no-" + f.flag[2:]: f for f in self.fields if f.hint is bool and not f.positional}

    def fail(self, message: str, generic: bool = False) -> NoReturn:
        more = ", or set PROXIMA_DEBUG=1 for the parser's own message" if generic else ""
        raise UserError(f"{message} (see {self.prog} --help for the accepted flags{more})") from None

    def said(self, event: events.ParseErrorEvent) -> None:
        """tyro's hook: raise the event's line (the events this does not know fall through to ``parse``)."""
        argument = getattr(event, "argument", None)
        field = self.by_name.get(argument.field.intern_name) if argument is not None else None
        if isinstance(event, events.MissingArgs):
            field = self.by_name.get(event.missing_arguments[0].arg.field.intern_name)
            if field is not None:
                self.missing(field)
        elif isinstance(event, events.UnrecognizedArgs):
            self.unrecognized(event.tokens[0])
        if field is None:
            return
        name = field.flag if not field.positional else field.name.upper()
        if isinstance(event, events.BadValue) and event.reason == "too_few_values":
            self.fail(f"{name} needs a value: {field.accepts()}")
        if isinstance(event, events.InvalidChoice):
            self.fail(f"{name} expects {field.accepts()}, got {event.value!r}")
        if isinstance(event, events.InstantiationFailure) and _rejected:
            bad = _rejected.pop()
            if isinstance(bad, UserError):  # a constructor's own line (--env-kwargs' JSON)
                raise bad
            self.fail(f"{name} expects {field.accepts()}, got {bad!r}")

    def missing(self, field: Field) -> NoReturn:
        self.fail(f"missing {field.metavar or field.name.upper()}: {field.doc or field.accepts()}")

    def unrecognized(self, token: str) -> NoReturn:
        if _is_flag(token):
            from proxima.run.config import FOREIGN

            name = token.partition("=")[0]
            foreign = FOREIGN.get(name.replace("_", "-"))
            if foreign is not None and foreign.split()[0] in self.flags:
                self.fail(f"unrecognized flag {name!r}; in proxima: {foreign}")
            close = difflib.get_close_matches(name, self.flags, n=1, cutoff=0.75)
            self.fail(f"unrecognized flag {name!r}" + (f"; did you mean {close[0]}?" if close else ""))
        for i, arg in enumerate(self.argv):  # where the value stood: --cuda=maybe, or --cuda maybe
            switch = self.flags.get(arg.partition("=")[0])
            if switch is not None and switch.hint is bool and arg.endswith("=" + token):
                self.fail(f"{arg.partition('=')[0]} takes no value, or true or false, got {token!r}")
            if arg == token:
                before = self.flags.get(self.argv[i - 1]) if i else None
                after = (
                    f" after {self.argv[i - 1]}, which takes no value"
                    if before and before.hint is bool
                    else ""
                )
                self.fail(f"unexpected argument {token!r}{after}")
        self.fail(f"unexpected argument {token!r}")

    def scan(self) -> None:
        """What tyro would say otherwise, or not at all: a flag that no field has (named before any value's
        mistake, with a guess), and a flag of several values given none (tyro takes the empty tuple)."""
        for i, arg in enumerate(self.argv):
            if arg == "--":
                return
            field = self.flags.get(arg.partition("=")[0])
            if field is None and _is_flag(arg):
                self.unrecognized(arg)
            last = i + 1 == len(self.argv) or _is_flag(self.argv[i + 1])
            if field is not None and field.many and "=" not in arg and last:
                self.fail(f"{arg} needs a value: {field.accepts()}")

    def check_positionals(self, parsed) -> None:
        """A positional of several values that is required but was given none (tyro takes the empty tuple)."""
        for f in dataclasses.fields(parsed):
            value = getattr(parsed, f.name)
            if dataclasses.is_dataclass(value):
                self.check_positionals(value)
            field = self.by_name.get(f.name)
            if field is not None and field.positional and field.many and field.required and value == ():
                self.missing(field)


# Values that the constructors below refused: the hook's event names the flag, not the value
_rejected: list[str | UserError] = []
_REGISTRY = tyro.constructors.ConstructorRegistry()
_hidden: list[str] = []  # parse's


@_REGISTRY.struct_rule
def _one_line_help(info: tyro.constructors.StructTypeInfo):
    """Each field's docstring on one line as its help (tyro keeps a docstring's line breaks, which the help's
    columns then break again), and ``parse``'s hidden fields suppressed."""
    spec = dataclass_rule(info)
    if spec is None:
        return None
    docs, annotated = field_docs(typing.cast(Any, info.type)), typing.cast(Any, Annotated)
    return dataclasses.replace(
        spec,
        fields=tuple(
            dataclasses.replace(
                f,
                helptext=docs.get(f.name),
                type=annotated[f.type, tyro.conf.Suppress] if f.name in _hidden else f.type,
            )
            for f in spec.fields
        ),
    )


def _number(kind: type, convert: Callable[[str], Any]):
    def make(values: list[str]):
        try:
            return convert(values[0])
        except (ValueError, UserError) as e:
            _rejected.append(e if isinstance(e, UserError) else values[0])
            raise ValueError(values[0]) from None

    return tyro.constructors.PrimitiveConstructorSpec(
        nargs=1,
        metavar=kind.__name__.upper(),
        instance_from_str=make,
        is_instance=lambda value: (
            isinstance(value, (int, float) if kind is float else kind) and not isinstance(value, bool)
        ),
        str_from_instance=lambda value: [str(value)],
    )


def _integer(text: str) -> int:
    """A count written as a float that is a whole number (``1e6``, ``2.5e5``, as Stable-Baselines3's and rl-zoo's
    configs write total_timesteps) is that integer."""
    try:
        return int(text)
    except ValueError:
        number = float(text)
    if not (math.isfinite(number) and number == int(number)):
        raise ValueError(text)
    return int(number)


@_REGISTRY.primitive_rule
def _numbers(info: tyro.constructors.PrimitiveTypeInfo):
    """An integer may be written as a whole float (``1e6``); a value neither reads is kept for the hook."""
    if info.type is int:
        return _number(int, _integer)
    if info.type is float:
        return _number(float, float)
    return None


@_REGISTRY.primitive_rule
def _dict_as_json(info: tyro.constructors.PrimitiveTypeInfo):
    """PPOArgs' dict settings (env_kwargs) are one JSON object on the command line."""
    if info.type is not dict:
        return None
    from proxima.run.config import parse_env_kwargs

    spec = _number(dict, lambda text: parse_env_kwargs(text))
    return dataclasses.replace(spec, metavar="JSON", str_from_instance=lambda value: [json.dumps(value)])
