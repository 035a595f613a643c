"""The results as the docs show them: docs/RESULTS.md opens with its summary, one row per task, and is what
benchmarks/render_results.py writes from the records and docs/results/page.json; and no docs page names a folder
that only the machine that ran a command has."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks import records, render_results  # noqa: E402

RESULTS = ROOT / "docs" / "RESULTS.md"
# /tmp/..., /work/..., /root/..., /home/...: a scratch folder, a checkout or a home of one machine. Ray's own
# /tmp/ray is the same on every machine, and the docs name it as Ray's.
LOCAL = re.compile(r"(?<![\w.~])/(?:tmp|work|root|home)/(?!ray\b)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_docs_page_names_a_folder_that_only_one_machine_has():
    found = [f"{page.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for page in pages()
             for n, line in enumerate(page.read_text().splitlines(), 1) if LOCAL.search(line)]  # fmt: skip
    assert not found, "\n".join(found)
    # the pattern itself: a recorded scratch folder is caught, Ray's folder and a relative path are not
    assert LOCAL.search("--record /work/exp/x") and LOCAL.search("`cd /tmp/x && make`")
    assert not LOCAL.search("`/tmp/ray/ray_current_cluster`") and not LOCAL.search("--run-dir runs/tmp/x")


def test_no_record_names_one(tmp_path):
    commands = [
        (b["date"], c)
        for b in records.load()
        for c in [b["command"], *(r.get("command") or "" for r in b["rows"])]
    ]
    assert len(commands) > 50
    assert [c for c in commands if LOCAL.search(c[1])] == []


def summary_rows() -> list[list[str]]:
    text = RESULTS.read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[0] == "Summary: proxima beside its peers, task by task"  # the page opens with it
    section = text.split("## " + headings[0])[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert lines[0].startswith(
        "| task | statistic | proxima | SB3 (zoo settings) | PureJaxRL (defaults) | CleanRL |"
    )
    assert lines[1].startswith("|---|")
    return [line.split(" | ") for line in lines[2:]]


def test_results_open_with_a_summary_of_one_row_per_task():
    rows = summary_rows()
    tasks = [row[0].removeprefix("| ") for row in rows]
    assert len(tasks) == len(set(tasks)) >= 10
    classic = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1",
               "LunarLander-v3", "BipedalWalker-v3"]  # fmt: skip
    assert tasks[: len(classic)] == classic
    assert {"vmas/navigation", "vmas/balance", "vmas/sampling", "Hopper-v5", "BreakoutNoFrameskip-v4"} <= set(
        tasks
    )
    recorded = {r["task"] for b in records.load() for r in b["rows"]}
    page = json.loads((ROOT / "docs" / "results" / "page.json").read_text())
    quoted = {s["task"] for s in page["summary"] if not s.get("topic")}
    for task, row in zip(tasks, rows, strict=True):
        assert task in recorded or task in quoted, task  # a task of the records, or quoted from the journal
        assert row[2].strip(), task  # proxima's cell
        assert re.search(r"\d{4}-\d\d-\d\d", row[-1]), task  # where it was measured, and when
    # CartPole: proxima's preset beside SB3's, PureJaxRL's and CleanRL's cells
    assert rows[0][2].startswith("`cartpole-fast --torch-threads 1`: 10/10 solved")
    assert all(cell.strip() for cell in rows[0][3:6])


def test_the_summary_quotes_journal_sections_that_exist():
    journal = (ROOT / "docs" / "journal" / "benchmarks.md").read_text()
    headings = set(re.findall(r"^#{2,4} (.+)$", journal, flags=re.M))
    page = json.loads((ROOT / "docs" / "results" / "page.json").read_text())
    sections = {q["section"] for s in page["summary"] for q in s.get("journal", [])}
    assert len(sections) >= 5 and sections <= headings, sections - headings


def test_the_results_pages_are_what_the_renderer_writes(tmp_path):
    """An edit by hand, or a record or page.json change not rendered, shows here."""
    data = tmp_path / "results" / "data"
    data.parent.mkdir()
    data.symlink_to(ROOT / "docs" / "results" / "data")
    (tmp_path / "results" / "page.json").write_text((ROOT / "docs" / "results" / "page.json").read_text())
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    render_results.render_all(str(data), str(tmp_path / "RESULTS.md"), str(readme))
    assert (tmp_path / "RESULTS.md").read_text() == RESULTS.read_text()
    history = ROOT / "docs" / "journal" / "results-history.md"
    assert (tmp_path / "journal" / "results-history.md").read_text() == history.read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text()
