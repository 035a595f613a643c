"""Every code example in README.md and docs/ runs, so that none rots (docs/WRITING_DOCS.md is the writers' side).

Each page's blocks run in the page's order, in a fresh temporary working directory:
- a ```python block runs in the page's one namespace, as a script (``__name__ == "__main__"``);
- in a ```bash (or ```sh, ```console) block, each line that starts with ``proxima`` (or ``python -m proxima``,
  after optional ``VAR=value`` assignments) runs as ``proxima.commands.main(argv)`` in this process and must exit 0
  (or the status its ``exit`` marker gives);
  other lines (``make``, ``pip install``) are not run;
- an untagged block that holds a ``proxima`` command fails the test: tag it ``bash``, or ``text`` for output.

Budgets are made small, and only budgets: ``total_timesteps`` (a keyword of any call in Python, the
``--total-timesteps`` flag on the command line) above ``BUDGET`` becomes ``BUDGET``, and a ``train`` or
``sweep`` call, or a ``proxima train/compare/sweep`` command, that gives none (and resumes nothing) gets
``BUDGET``; a resumed run's total becomes twice ``BUDGET``, so that it trains one budget more.

An HTML comment on the lines right before a block changes what happens to it:
- ``<!-- docs-test: skip: REASON -->``: never run; the reason is required;
- ``<!-- docs-test: file NAME -->``: written to NAME in the working directory, a module later blocks import;
  ``<!-- docs-test: append NAME -->``: added to the end of NAME (an exercise page's stubs, one by one);
- ``<!-- docs-test: budget N -->``: this block's budget (a preset with bigger batches needs one);
- ``<!-- docs-test: exit N -->``: this block's ``proxima`` commands must exit N, not 0 (a ``proxima check`` of an
  answer the page shows wrong on purpose exits 1);
- ``<!-- docs-test: slow -->``: run only by the page's second test, marked slow, which runs all its blocks (a
  block that needs a slow one's output is slow too).

docs/journal/ holds dated records of runs that took hours: history, not examples.
"""

import ast
import os
import re
import shlex
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import proxima.scale.seedgroup
import proxima.scale.trainer
from proxima.algo.algorithms import ALGORITHMS
from proxima.commands import main
from proxima.envs.registry import _BACKENDS
from proxima.policy.encoders import ENCODERS

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 2048
SHELL = ("bash", "sh", "shell", "console")
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None = None
    file: str | None = None
    append: bool = False  # to the end of the file, not in its place
    budget: int = BUDGET
    exit: int = 0  # the status its proxima commands must exit with
    slow: bool = False
    commands: list[list[str]] = field(default_factory=list)  # shell blocks: the argv of each proxima line

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if "journal" not in p.relative_to(ROOT).parts]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown page, with the markers written right before each."""
    name, lines = str(path.relative_to(ROOT)), path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.groups()
        close = re.compile(rf"^\s*{fence[0]}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : end]
        ]
        block = Block(name, i + 1, lang.lower(), "\n".join(body) + "\n")
        j = i - 1
        while j >= 0 and (not lines[j].strip() or MARKER.search(lines[j])):
            for marker in MARKER.findall(lines[j]):
                apply_marker(block, marker)
            j -= 1
        found.append(block)
        i = end + 1
    return found


def apply_marker(block: Block, marker: str) -> None:
    word, _, rest = marker.partition(" ")
    if word.rstrip(":") == "skip":
        reason = rest.strip(" :")
        assert reason, f"{block.where}: a skip marker says why: <!-- docs-test: skip: REASON -->"
        block.skip = reason
    elif word in ("file", "append"):
        block.file, block.append = rest.strip(), word == "append"
    elif word == "budget":
        block.budget = int(rest)
    elif word == "exit":
        block.exit = int(rest)
    elif word == "slow":
        block.slow = True
    else:
        raise AssertionError(
            f"{block.where}: unknown marker {marker!r}: skip: REASON, file NAME, append NAME, budget N, exit N, slow"
        )


def shell_lines(block: Block) -> list[str]:
    """The block's logical lines: continuations joined; for console blocks only the ``$ `` prompts."""
    text = block.code.replace("\\\n", " ")
    lines = text.splitlines()
    if block.lang == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    return [line.strip() for line in lines if line.strip()]


def proxima_command(line: str) -> tuple[dict[str, str], list[str]] | None:
    """``(environment, argv)`` of a ``proxima`` command line; None for any other line."""
    words = shlex.split(line, comments=True)
    env = {}
    while words and ASSIGNMENT.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[:3] == ["python", "-m", "proxima"]:
        words = ["proxima", *words[3:]]
    if not words or words[0] != "proxima":
        return None
    return env, words[1:]


def looks_like_a_command(line: str) -> bool:
    """For an untagged block, which is often prose or output: a line shlex cannot split (an apostrophe, as in
    "the run's files") is no command."""
    try:
        return proxima_command(line) is not None
    except ValueError:
        return False


def budgeted_argv(argv: list[str], budget: int) -> list[str]:
    argv = list(argv)
    limit = 2 * budget if "--resume" in argv else budget  # a resumed run trains one budget more
    for i, word in enumerate(argv):
        if word == "--total-timesteps" and i + 1 < len(argv):
            argv[i + 1] = str(min(int(argv[i + 1]), limit))
            return argv
        if word.startswith("--total-timesteps="):
            argv[i] = f"--total-timesteps={min(int(word.split('=', 1)[1]), limit)}"
            return argv
    if argv and argv[0] in ("train", "compare", "sweep") and not {"--resume", "--help", "-h"} & set(argv):
        argv += ["--total-timesteps", str(budget)]
    return argv


class Budget(ast.NodeTransformer):
    """``total_timesteps=N`` above the budget becomes the budget; a ``train``/``sweep`` call without one gets it."""

    def __init__(self, budget: int):
        self.budget = budget

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        given = {k.arg: k for k in node.keywords}
        limit = 2 * self.budget if "resume" in (name, *given) else self.budget  # one budget more
        if "total_timesteps" in given:
            value = given["total_timesteps"].value
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value > limit:
                given["total_timesteps"].value = ast.copy_location(ast.Constant(limit), value)
        elif name in ("train", "sweep") and "resume" not in given and None not in given:
            node.keywords.append(ast.keyword("total_timesteps", ast.Constant(self.budget)))
        return ast.fix_missing_locations(node)


def run_python(block: Block, module: types.ModuleType) -> None:
    tree = Budget(block.budget).visit(ast.parse(block.code, filename=block.where))
    # the fence's line numbers in tracebacks: the code starts on the line after it
    ast.increment_lineno(tree, block.line)
    code = compile(tree, block.page, "exec")
    try:
        exec(code, module.__dict__)
    except Exception as e:
        e.add_note(f"in the python block at {block.where}")
        raise


def run_shell(block: Block, cwd: Path, monkeypatch, capsys) -> None:
    for line in shell_lines(block):
        command = proxima_command(line)
        if command is None:
            continue
        env, argv = command
        argv = budgeted_argv(argv, block.budget)
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
                if key == "PYTHONPATH":
                    for entry in reversed(value.split(os.pathsep)):
                        m.syspath_prepend(str((cwd / entry).resolve()))
            try:
                status = main(argv)
            except SystemExit as e:  # --help
                status = e.code or 0
        out = capsys.readouterr()
        assert status == block.exit, (
            f"{block.where}: `proxima {shlex.join(argv)}` exited {status}, not {block.exit}\n"
            f"{out.out[-2000:]}{out.err[-2000:]}"
        )


def page_params():
    """Per page: its blocks but the slow ones; and where it has slow ones, all its blocks, marked slow."""
    params = []
    for path in pages():
        found, name = blocks(path), str(path.relative_to(ROOT))
        if any(not b.slow for b in found):
            params.append(pytest.param(name, False, id=name))
        if any(b.slow for b in found):
            params.append(pytest.param(name, True, id=f"{name}-all", marks=pytest.mark.slow))
    return params


def one_run_dir_per_second(monkeypatch) -> None:
    """A default run directory is named to the second; shrunk budgets start several runs of one env in the same
    second, which the full budgets never would. Such a run waits for the next second instead."""
    named = proxima.scale.trainer.default_run_dir

    def waiting(args):
        while os.path.exists(run_dir := named(args)):
            time.sleep(0.05)
        return run_dir

    for module in (proxima.scale.trainer, proxima.scale.seedgroup):  # each names its runs' directories
        monkeypatch.setattr(module, "default_run_dir", waiting)


@pytest.fixture
def own_registries():
    """What a page registers (an encoder, an env backend, an algorithm) is its own: other tests in this process
    list these registries' contents, so each is put back as it was. Gymnasium's ids stay: a module that registers
    one on import (tests.fixtures.info_envs) is not imported again, and no test lists them."""
    registries = (ENCODERS, _BACKENDS, ALGORITHMS)
    saved = [dict(registry) for registry in registries]
    yield
    for registry, contents in zip(registries, saved, strict=True):
        registry.clear()
        registry.update(contents)


@pytest.mark.parametrize(("page", "slow_too"), page_params())
@pytest.mark.usefixtures("own_registries")
def test_the_examples_of_a_page_run(page, slow_too, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    one_run_dir_per_second(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    # a script's namespace: classes defined in a block are importable as __main__.Name, as in `python page.py`
    script = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", script)
    before = set(sys.modules)
    try:
        for block in blocks(ROOT / page):
            if block.skip or (block.slow and not slow_too):
                continue
            if block.file:
                with open(tmp_path / block.file, "a" if block.append else "w") as f:
                    f.write(("\n\n" if block.append else "") + block.code)
            elif block.lang == "python":
                run_python(block, script)
            elif block.lang in SHELL:
                run_shell(block, tmp_path, monkeypatch, capsys)
            elif not block.lang:
                commands = [line for line in shell_lines(block) if looks_like_a_command(line)]
                assert not commands, (
                    f"{block.where}: a command in an untagged block: tag it bash (text if output)"
                )
    finally:  # the modules a page wrote are its own: the next page may write another of the same name
        for name in set(sys.modules) - before:
            if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
                del sys.modules[name]


def test_the_runner_shrinks_budgets_and_only_budgets():
    assert budgeted_argv(["train", "--env-id", "CartPole-v1"], 2048)[-2:] == ["--total-timesteps", "2048"]
    assert budgeted_argv(["train", "--total-timesteps", "100000", "--seed", "2"], 2048) == [
        "train", "--total-timesteps", "2048", "--seed", "2",
    ]  # fmt: skip
    assert budgeted_argv(["train", "--total-timesteps", "512"], 2048) == ["train", "--total-timesteps", "512"]
    assert budgeted_argv(["train", "--resume", "runs/a"], 2048) == ["train", "--resume", "runs/a"]
    assert budgeted_argv(["train", "--resume", "a", "--total-timesteps", "10000"], 2048)[-1] == "4096"
    assert budgeted_argv(["eval", "runs/a"], 2048) == ["eval", "runs/a"]
    assert proxima_command("PYTHONPATH=. proxima train --env-kwargs '{\"a\": 1}'  # note") == (
        {"PYTHONPATH": "."}, ["train", "--env-kwargs", '{"a": 1}'],
    )  # fmt: skip
    assert proxima_command("make demo") is None
    marked = Block("page.md", 1, "bash", "")
    for marker in ("exit 1", "append my_ppo.py"):
        apply_marker(marked, marker)
    assert (marked.exit, marked.file, marked.append) == (1, "my_ppo.py", True)
    assert looks_like_a_command("proxima eval runs/a") and not looks_like_a_command("a run directory's files")
    tree = Budget(2048).visit(
        ast.parse("proxima.train(env_id='x')\nf(total_timesteps=10**6)\nresume(total_timesteps=30_000)")
    )
    assert ast.unparse(tree).splitlines() == [
        "proxima.train(env_id='x', total_timesteps=2048)",
        "f(total_timesteps=10 ** 6)",  # not a literal: left as written
        "resume(total_timesteps=4096)",
    ]
