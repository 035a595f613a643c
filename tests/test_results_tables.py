"""The results records (benchmarks/records.py) and their rendering (benchmarks/render_results.py), on fabricated
records in a temporary folder: these numbers are made up to check the tables, they are not results."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import records, render_results  # noqa: E402

MACHINE = {
    "cpu": "Test CPU 9000",
    "cores": 2,
    "memory_gb": 8.0,
    "os": "Linux",
    "python": "3.11",
    "load_1m": 0.0,
}


def batch(data, topic, date, rows, peer=None, rate=(100_000.0, 110_000.0)):
    """A batch written with records.Batch, then dated ``date`` and placed on a fabricated machine."""
    b = records.Batch(
        topic, out_dir=str(data), peer=peer, reference=False, command=f"python bench.py {topic}"
    )
    b.record.update(date=date, commit="0123456789abcdef", dirty=False, machine=MACHINE)
    b.record["reference_sps"] = {"before": rate[0], "after": rate[1]}
    for row in rows:
        b.add(**row)
    return b.finish(render=False)


def solve_row(task, seed, mean, steps, wall, preset="fast", threshold=475):
    return dict(task=task, preset=preset, seed=seed, score=records.score(mean, 1.0, 100), threshold=threshold,
                steps=steps, wall_s=wall, command=f"proxima train --config {preset} --seed {seed}")  # fmt: skip


def readme(path):
    path.write_text(f"# x\n\nbefore\n\n{render_results.START}\nold table\n{render_results.END}\n\nafter\n")
    return path


def test_a_batch_is_one_file_rewritten_after_each_row(tmp_path):
    b = records.Batch("solve", out_dir=str(tmp_path), peer="Peer", reference=False)
    b.add(**solve_row("CartPole-v1", 1, 480.0, 50_000, 4.0))
    first = json.loads(open(b.path).read())
    b.add(**solve_row("CartPole-v1", 2, 400.0, 60_000, 5.0))
    second = json.loads(open(b.path).read())
    assert os.listdir(tmp_path) == [os.path.basename(b.path)]
    assert first["format"] == records.FORMAT and first["topic"] == "solve"
    assert [len(first["rows"]), len(second["rows"])] == [1, 2]
    assert [r["solved"] for r in second["rows"]] == [True, False]  # 480 and 400 against 475
    assert second["rows"][0]["peer"] == "Peer"
    assert second["machine"]["cores"] == os.cpu_count()
    assert len(second["commit"]) == 40  # this checkout's commit


def test_without_a_folder_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    b = records.Batch("solve", out_dir=None, reference=False)
    b.add(**solve_row("CartPole-v1", 1, 480.0, 50_000, 4.0))
    assert b.finish() is None and os.listdir(tmp_path) == []
    assert b.reference == {"before": None, "after": None}


def test_results_page_keeps_the_newest_batch_per_task_and_peer(tmp_path):
    data = tmp_path / "data"
    old = [solve_row("CartPole-v1", s, 500.0, 99_000, 9.9) for s in (1, 2)]
    batch(
        data,
        "solve",
        "2026-01-01T00:00:00Z",
        old + [solve_row("Acrobot-v1", 1, -80.0, 20_000, 2.5, threshold=-100)],
    )
    new = [solve_row("CartPole-v1", 1, 490.0, 40_000, 3.6), solve_row("CartPole-v1", 2, 470.0, 98_000, 6.8)]
    batch(data, "solve", "2026-02-01T00:00:00Z", new, rate=(85_000.0, 113_000.0))
    peer = [dict(solve_row("CartPole-v1", 1, 500.0, 100_000, 13.0), preset=None, settings="zoo")]
    batch(data, "solve", "2026-02-02T00:00:00Z", peer, peer="SB3 (zoo settings)")
    batch(data, "export-latency", "2026-02-03T00:00:00Z",
          [dict(task="CartPole-v1", settings="onnxruntime", median_us=21.0, p90_us=30.0, calls=2000)])  # fmt: skip
    results = tmp_path / "RESULTS.md"
    render_results.render_all(str(data), str(results), None)
    page = results.read_text()

    rows = [
        line for line in page.splitlines() if line.startswith("| CartPole-v1") or line.startswith("| Acrobot")
    ]
    solve = [r for r in rows if "`fast`" in r or "zoo" in r]
    # Acrobot's only batch stays; CartPole's second batch replaces the first; the peer's row comes right after
    assert [r.split(" | ")[1] for r in solve] == ["proxima", "proxima", "SB3 (zoo settings)"]
    assert solve[0].startswith("| Acrobot-v1") and solve[1].startswith("| CartPole-v1")
    cartpole = solve[1].split(" | ")
    assert cartpole[3:8] == ["1, 2", "470.0–490.0", "1/2", "40k–98k", "3.6–6.8 s"]
    assert "2026-02-01" in solve[1] and "`0123456` " in solve[1] + " " and "85k–113k" in solve[1]
    assert "2 cores, Test CPU 9000" in solve[1] and "`python bench.py solve`" in solve[1]
    assert "99k" not in page and "9.9 s" not in page  # the superseded batch is gone
    assert "500.0 ± 1.0" in solve[2] and "zoo" in solve[2]  # one seed: mean ± std
    latency = [r for r in rows if "onnxruntime" in r][0].split(" | ")
    assert latency[-8:-5] == ["21", "30", "2,000"]  # median and p90 µs
    assert "To be measured: `python benchmarks/throughput.py" in page  # a topic with no records


def test_readme_table_puts_the_peers_beside_proxima_between_the_markers(tmp_path):
    data = tmp_path / "data"
    batch(
        data,
        "solve",
        "2026-02-01T00:00:00Z",
        [solve_row("CartPole-v1", s, 490.0, 40_000 * s, 3.0 * s) for s in (1, 2)],
    )
    batch(data, "solve", "2026-02-02T00:00:00Z",
          [dict(solve_row("CartPole-v1", 1, 300.0, 500_000, 20.0), preset=None, settings="defaults")],
          peer="PureJaxRL (defaults)")  # fmt: skip
    path = readme(tmp_path / "README.md")
    render_results.render_all(str(data), str(tmp_path / "RESULTS.md"), str(path))
    text = path.read_text()
    assert text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "old table" not in text
    table = text.split(render_results.START)[1].split(render_results.END)[0]
    assert "| task | preset | proxima | PureJaxRL (defaults) |" in table
    assert "| CartPole-v1 | `fast` | 2/2 solved, 40k–80k, 3.0–6.0 s | 0/1 solved, 500k, 20.0 s |" in table
    render_results.render_all(str(data), str(tmp_path / "RESULTS.md"), str(path))
    assert path.read_text() == text  # rendering again changes nothing


def test_no_records_say_to_be_measured(tmp_path):
    path = readme(tmp_path / "README.md")
    render_results.render_all(str(tmp_path / "none"), str(tmp_path / "RESULTS.md"), str(path))
    assert "to be measured" in path.read_text()
    assert (tmp_path / "RESULTS.md").read_text().count("To be measured") == len(render_results.TOPICS)


def test_a_readme_without_markers_and_a_record_of_another_format_are_refused(tmp_path):
    (tmp_path / "README.md").write_text("# no markers\n")
    with pytest.raises(SystemExit, match="no <!-- results:start -->"):
        render_results.render_readme(str(tmp_path / "README.md"), "table")
    (tmp_path / "x.json").write_text(json.dumps({"format": "other/9", "rows": []}))
    with pytest.raises(SystemExit, match="format 'other/9'"):
        records.load(str(tmp_path))


def test_the_writer_and_renderer_import_without_proxima_torch_numpy_or_gymnasium():
    # The peers' scripts run in venvs of their own: block these imports as if they were not installed.
    code = ("import sys\nfor m in ('proxima', 'torch', 'numpy', 'gymnasium'): sys.modules[m] = None\n"
            "from benchmarks import records, render_results\nprint(records.FORMAT)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == records.FORMAT


def seeds_row(n, how, wall, solved, peer=None, preset="fast"):
    return dict(task="CartPole-v1", preset=preset, settings=how, peer=peer, seed=1, steps=40_000 * n, wall_s=wall,
                command=f"run {how} {n}", num_seeds=n, seeds_solved=solved, sps=round(40_000 * n / wall))  # fmt: skip


def test_num_seeds_table_puts_each_way_in_one_row_and_each_number_of_seeds_in_a_column(tmp_path):
    data = tmp_path / "data"
    old = [seeds_row(4, "one process", 99.0, 0), seeds_row(64, "one process", 50.0, 64)]
    batch(data, "num_seeds", "2026-01-01T00:00:00Z", old)  # its 4 seeds are replaced below, its 64 are not
    rows = [seeds_row(1, "one process", 3.0, 1), seeds_row(16, "one process", 6.0, 15),
            seeds_row(4, "one process", 4.5, 4), seeds_row(1, "processes", 3.5, 1),
            seeds_row(4, "processes", 8.75, 3), seeds_row(16, "processes", 28.0, 16)]  # fmt: skip
    batch(data, "num_seeds", "2026-02-01T00:00:00Z", rows)
    peer = [seeds_row(n, "jax.vmap", 8.0 * n**0.5, n, peer="PureJaxRL", preset=None) for n in (1, 4)]
    batch(data, "num_seeds", "2026-02-02T00:00:00Z", peer)
    results = tmp_path / "RESULTS.md"
    render_results.render_all(str(data), str(results), None)
    section = results.read_text().split("## Many seeds")[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    assert lines[0].startswith(
        "| task | who | preset | how | 1 seed | 4 seeds | 16 seeds | 64 seeds | date |"
    )
    table = [line.split(" | ") for line in lines[1:] if line.startswith("| CartPole-v1")]
    # proxima's ways before the peer's; the way whose counts came from two batches has a row for each
    assert [(r[1], r[3], r[8]) for r in table] == [
        ("proxima", "one process", "2026-01-01"), ("proxima", "one process", "2026-02-01"),
        ("proxima", "processes", "2026-02-01"), ("PureJaxRL", "jax.vmap", "2026-02-02"),
    ]  # fmt: skip
    assert table[0][4:8] == [
        "",
        "",
        "",
        "50.0 s, 64/64 solved, 2.56M steps, 51,200/s",
    ]  # no one seed of its own
    assert table[1][4:8] == ["3.0 s, 1/1 solved, 40k steps, 13,333/s", "4.5 s (1.5×), 4/4 solved, 160k steps, 35,556/s",
                             "6.0 s (2.0×), 15/16 solved, 640k steps, 106,667/s", ""]  # fmt: skip
    assert (
        table[2][6] == "28.0 s (8.0×), 16/16 solved, 640k steps, 22,857/s"
    )  # 28.0 s against one seed's 3.5 s
    assert (
        table[3][5] == "16.0 s (2.0×), 4/4 solved, 160k steps, 10,000/s" and table[3][2] == ""
    )  # its own one seed
    assert table[1][-1] == "`run one process N` (N: the seeds) |"  # the counts' commands differ only in N
    assert "99.0 s" not in section  # the older batch's 4 seeds of the same way are gone from the page
    history = (tmp_path / "journal" / "results-history.md").read_text()
    assert "99.0 s (×" not in history and "| 99.0 s, 0/4 solved, 160k steps, 1,616/s |" in history
    assert "replaced by the batch of 2026-02-01 (the same task, settings and who)" in history


def test_the_summary_puts_the_chosen_rows_beside_the_peers_and_the_history_keeps_what_left(tmp_path):
    data = tmp_path / "data"
    batch(
        data,
        "solve",
        "2026-01-01T00:00:00Z",
        [solve_row("Acrobot-v1", 1, -80.0, 20_000, 2.5, threshold=-100)],
    )
    new = [solve_row("CartPole-v1", 1, 490.0, 40_000, 3.6), solve_row("CartPole-v1", 2, 470.0, 98_000, 6.8)]
    batch(data, "solve", "2026-02-01T00:00:00Z", new)
    peer = [dict(solve_row("CartPole-v1", 1, 500.0, 100_000, 13.0), preset=None, settings="zoo")]
    batch(data, "solve", "2026-02-02T00:00:00Z", peer, peer="SB3 (zoo settings)")
    journal = {
        "who": "CleanRL",
        "cell": "speed only: 25.8 s",
        "section": "CleanRL, back to back (2026-01-05)",
    }
    summary = [{"task": "CartPole-v1", "topic": "solve", "proxima": ["fast"], "peers": ["SB3 (zoo settings)"],
                "journal": [journal], "note": "a note"},
               {"task": "Breakout", "statistic": "steps/s", "journal": [dict(journal, who="proxima", cell="338")]}]  # fmt: skip
    moved = [{"topic": "solve", "task": "Acrobot-v1", "settings": "fast", "peer": None,
              "date": "2026-01-01T00:00:00Z", "why": "measured again elsewhere"}]  # fmt: skip
    page = {"format": render_results.PAGE_FORMAT, "summary": summary, "moved": moved}
    (tmp_path / "page.json").write_text(json.dumps(page))
    results = tmp_path / "RESULTS.md"
    render_results.render_all(str(data), str(results), None)
    text = results.read_text()
    assert text.index("## Summary") < text.index("## Classic tasks solved")
    table = [
        line for line in text.split("## Summary")[1].split("\n## ")[0].splitlines() if line.startswith("| ")
    ]
    assert table[0] == "| task | statistic | proxima | SB3 (zoo settings) | CleanRL | measured |"
    assert table[1] == (
        "| CartPole-v1 | seeds solved, their score (100 deterministic episodes), steps, wall time | "
        "`fast`: 1/2 solved, 470.0–490.0, 40k–98k steps, 3.6–6.8 s | 1/1 solved, 500.0 ± 1.0, 100k steps, 13.0 s | "
        "speed only: 25.8 s | [solved](#classic-tasks-solved-proxima-solve), 2026-02-01, 2026-02-02; CleanRL: "
        "[journal, 2026-01-05](journal/benchmarks.md#cleanrl-back-to-back-2026-01-05) |"
    )
    assert table[2] == ("| Breakout | steps/s | 338 |  |  | proxima: [journal, 2026-01-05]"
                        "(journal/benchmarks.md#cleanrl-back-to-back-2026-01-05) |")  # fmt: skip
    assert "- CartPole-v1: a note." in text
    # the moved Acrobot row left the page for the history, with its command, date and reason
    assert "| Acrobot-v1 |" not in text
    history = (tmp_path / "journal" / "results-history.md").read_text()
    assert "| Acrobot-v1 | proxima | `fast` | 1 | -80.0 ± 1.0 | 1/1 |" in history
    assert (
        "| 2026-01-01 | `0123456` |" in history
        and "`python bench.py solve` | measured again elsewhere |" in history
    )
    assert "Older measurements of this topic: the [results history](journal/results-history.md#" in text
    # what page.json names must exist: a stale choice is refused, not silently dropped
    for broken in ({**page, "moved": [{**moved[0], "date": "2026-01-09T00:00:00Z"}]},
                   {**page, "summary": [{**summary[0], "proxima": ["slow"]}]}):  # fmt: skip
        (tmp_path / "page.json").write_text(json.dumps(broken))
        with pytest.raises(SystemExit, match="page.json"):
            render_results.render_all(str(data), str(results), None)


def test_a_page_file_of_another_format_is_refused(tmp_path):
    (tmp_path / "page.json").write_text(json.dumps({"format": "other/2", "summary": [], "moved": []}))
    with pytest.raises(SystemExit, match="format 'other/2'"):
        render_results.render_all(str(tmp_path / "data"), str(tmp_path / "RESULTS.md"), None)


def test_num_seeds_counts_a_seed_solved_where_its_run_stopped_on_its_stop_return(tmp_path):
    from benchmarks import num_seeds

    def run(name, stop, evals):
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text(json.dumps({"run": {"stop_return": stop}}))
        lines = [{"global_step": 1000 * (i + 1), "eval_return": e} for i, e in enumerate(evals)]
        (path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    run("seed1", 498, [120.0, 498.0])  # stopped at its second evaluation
    run("seed2", 498, [120.0, 497.9])  # ran out of steps just short
    (tmp_path / "results.md").write_text("not a run")
    assert num_seeds.outcome(str(tmp_path), 2) == {"steps": 4000, "solved": 1}
    with pytest.raises(SystemExit, match="2 run directories, expected 3"):
        num_seeds.outcome(str(tmp_path), 3)
    run("seed3", None, [500.0])  # no stop_return: solved is not known
    assert num_seeds.outcome(str(tmp_path), 3) == {"steps": 5000, "solved": None}
