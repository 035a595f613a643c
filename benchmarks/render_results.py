"""Render docs/RESULTS.md, its history page and the README's results table from the records in docs/results/data.

RESULTS.md opens with a summary, one row per task: proxima's best preset beside each peer measured side by side.
Then one table per topic. Each row is the newest batch's measurement of one (task, preset or settings, peer), its
seeds together: numbers over several seeds read as their range. Peers sit in the rows just below proxima's for
the same task. Every measurement not shown there, replaced by a newer batch of the same key or moved by hand,
goes to docs/journal/results-history.md with the reason. The README's table (between its
`<!-- results:start -->` and `<!-- results:end -->` lines) is the solve topic with the peers side by side in one
row per task. Standard library only, like benchmarks/records.py.

What the summary shows and what was moved are choices, not measurements: they live in docs/results/page.json
(PAGE_FORMAT below), beside the records folder. Its "summary" rows name, per task, the topic, proxima's rows (by
their preset and settings), the peers whose rows stand beside them, and cells quoted from a journal section for
what no record holds. Its "moved" entries name a batch's rows (topic, task, settings, peer, batch date) and why
they left the page.

    .venv/bin/python benchmarks/render_results.py [--data DIR] [--results FILE] [--readme FILE]

The benchmark scripts run it themselves after a `--record` batch; by hand it is needed only after editing or
removing a record.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

RESULTS_MD = os.path.join(records.ROOT, "docs", "RESULTS.md")
README = os.path.join(records.ROOT, "README.md")
START, END = "<!-- results:start -->", "<!-- results:end -->"
PROXIMA = "proxima"
PAGE_FORMAT = "proxima-results-page/1"
HISTORY = os.path.join("journal", "results-history.md")  # beside RESULTS.md, in the journal's folder
JOURNAL = "journal/benchmarks.md"  # the dated journal, as RESULTS.md links to it


@dataclass
class Topic:
    title: str
    about: str
    measure: str  # markdown: the command that (re)measures it
    # the row fields this topic measures, of COMMON's, then its own numbers: (key in "extra", header, format)
    common: tuple[str, ...] = ("seeds", "score", "solved", "steps", "wall")
    extras: list[tuple[str, str, Callable[[float], str]]] = field(default_factory=list)
    # a table of its own, from the topic's groups, where one row per group does not fit the measurement
    table: Callable[[list[dict]], list[str]] | None = None
    # the summary's cells: keys of COMMON or of this topic's extras, shown in this order; and what they are
    summary: tuple[str, ...] = ()
    statistic: str = ""
    short: str = ""  # the summary's name for the topic's table
    per: str | None = None  # an "extra" field that keys rows too: a newer batch replaces only its own values
    by_task: bool = False  # a table per task, under its own heading: many rows a task


def _steps(v: float) -> str:
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k" if v >= 1e4 else f"{v:,.0f}"


def _seconds(v: float) -> str:
    return f"{v:.1f} s"


def _rate(v: float) -> str:
    return f"{v / 1e3:.0f}k"


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _percent(v: float) -> str:
    return f"{v:.1%}"


def over_n(commands: dict[int, str]) -> str:
    """One command for a way's runs of several seed counts: the largest count's, with that count written N where
    the others differ from it only there; else each count's own."""
    if len(commands) == 1:
        return f"`{next(iter(commands.values()))}`"
    largest = max(commands)
    template = re.sub(rf"(?<!\d)(?<!\d\.){largest}(?!\d)", "N", commands[largest])
    if "N" not in commands[largest] and all(template.replace("N", str(n)) == c for n, c in commands.items()):
        return f"`{template}` (N: the seeds)"
    return "; ".join(f"{n}: `{c}`" for n, c in sorted(commands.items()))


def seeds_column(row: dict | None, n: int, one: float | None) -> str:
    """A way's cell for N seeds: its wall time (over ``one`` seed's of the same way), seeds solved, steps, rate."""
    if row is None:
        return ""
    solved, wall = row["extra"].get("seeds_solved"), row.get("wall_s")
    parts = [span([wall], _seconds) + (f" ({wall / one:.1f}×)" if one and wall and n != 1 else ""),
             "" if solved is None else f"{solved}/{n} solved",
             f"{_steps(row['steps'])} steps" if row.get("steps") else "",
             f"{_int(row['extra']['sps'])}/s" if row["extra"].get("sps") else ""]  # fmt: skip
    return ", ".join(p for p in parts if p)


def num_seeds_table(topic_groups: list[dict]) -> list[str]:
    """One row per (task, who, preset, way), one column per number of seeds N: the way's wall time for N seeds,
    that over its one seed's in the same batch ("×"), the seeds solved, all seeds' steps and their rate."""
    counts = sorted(
        {r["extra"]["num_seeds"] for g in topic_groups for r in g["rows"] if r["extra"].get("num_seeds")}
    )
    head = ["task", "who", "preset", "how", *(f"{n} seed{'s' * (n > 1)}" for n in counts), "date", "commit",
            "machine", "raw CartPole steps/s", "command"]  # fmt: skip
    why = any("why" in g for g in topic_groups)
    lines = table_head(head + ["moved because"] * why)
    for g in sorted(topic_groups, key=_order):
        by_n = {r["extra"].get("num_seeds"): r for r in g["rows"]}
        one = by_n[1]["wall_s"] if 1 in by_n and by_n[1].get("wall_s") else None
        first = g["rows"][0]
        commands = {r["extra"].get("num_seeds"): r["command"] for r in g["rows"] if r.get("command")}
        cells = [
            first["task"],
            first.get("peer") or PROXIMA,
            f"`{first['preset']}`" if first.get("preset") else "",
            first.get("settings") or "",
            *(seeds_column(by_n.get(n), n, one) for n in counts),
            *batch_cells(g["batch"]),
            over_n(commands) if commands else "",
            *([g.get("why", "")] if why else []),
        ]
        lines.append(table_row(cells))
    return lines


def table_head(head: list[str]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def table_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


TOPICS = {
    "solve": Topic(
        "Classic tasks solved: `proxima solve`",
        "Each task's fast preset trains until its deterministic evaluations reach the task's threshold, then 100 "
        "deterministic episodes of Gymnasium's own env score the agent (the kept best agent where the preset "
        "keeps one). Wall time: the training process from its start to its exit, imports included. The peers: "
        "Stable-Baselines3 with rl-baselines3-zoo's tuned settings, stopped the same way, and PureJaxRL's PPO "
        "with its own defaults (wall time to the end of training, jit compile included).",
        "`python benchmarks/solve_suite.py --record`; for the peers, `benchmarks/peers/sb3_zoo_solve.py "
        "--record` and `benchmarks/peers/purejaxrl_solve.py --record` in their venvs",
        extras=[("peak_rss_mb", "peak RSS MB", _int)],
        summary=("solved", "score", "steps", "wall"),
        statistic="seeds solved, their score (100 deterministic episodes), steps, wall time",
        short="solved",
    ),
    "tuned": Topic(
        "Settings found by `proxima tune`, trained longer",
        "The best settings of a search (`best.json`) and the settings the search started from, each trained for "
        "the steps shown on each seed, then scored on 100 deterministic episodes of Gymnasium's env. The search "
        "columns: how it searched, its samples and their CPU time (every sample's process, all seeds).",
        "`proxima tune ...` (the command in docs/TUNING.md), then `python benchmarks/tuned_preset.py TUNE_DIR "
        "--record`",
        common=("seeds", "score", "steps", "wall"),
        extras=[
            ("search", "search", str),
            ("samples", "samples", _int),
            ("search_cpu_s", "search CPU s", _int),
        ],
        summary=("score", "steps", "wall"),
        statistic="score (100 deterministic episodes), steps, wall time",
        short="tuned",
    ),
    "throughput": Topic(
        "Throughput: env steps per second of the whole loop",
        "`proxima train` timed from process start (imports and set-up count); steps/s (loop) is what the run "
        "itself logs at its end.",
        "`python benchmarks/throughput.py --record` (or `--suite --record`)",
        common=("steps", "wall"),
        extras=[
            ("sps_process", "steps/s (process)", _int),
            ("sps_loop", "steps/s (loop)", _int),
            ("peak_rss_mb", "peak RSS MB", _int),
        ],
    ),
    "export-latency": Topic(
        "Exported policy: latency of one observation",
        "A CartPole MLP policy called on one observation at a time, numpy in and numpy out, one thread.",
        "`python benchmarks/export_latency.py --record`",
        common=(),
        extras=[("median_us", "median µs", _int), ("p90_us", "p90 µs", _int), ("calls", "calls", _int)],
    ),
    "num_seeds": Topic(
        "Many seeds: one batched process against one process per seed",
        "N seeds of a preset (seeds 1 to N) trained in one process as one batched computation (`proxima train "
        "--num-seeds N`), as the N runs of `proxima sweep` (each a Ray trial process of its own) and as N plain "
        "`proxima train` processes, a few at a time; beside them PureJaxRL's `ppo.py` with its own defaults, "
        "`jax.vmap`ped over N seeds. Wall time: from the first process's start to the last one's exit (imports, "
        "Ray's start-up and jit compile included); steps/s: all seeds' env steps over it. Solved: proxima's seeds "
        "whose run stopped early on the preset's stop_return; PureJaxRL's seeds (which never stop early) whose "
        "final policy reaches the task's threshold on 100 deterministic episodes. One row per way of running, one "
        "column per N: the wall time, in brackets that over the same way's one seed in the same batch, the seeds "
        "solved, all seeds' env steps and their rate.",
        "`python benchmarks/num_seeds.py --peers --record`",
        table=num_seeds_table,
        per="num_seeds",
    ),
    "multiagent": Topic(
        "Many agents: IPPO and MAPPO on VMAS against BenchMARL",
        "BenchMARL at its published VMAS settings and proxima at the same settings as far as its flags go "
        "(benchmarks/vmas_side_by_side.py lists them), back to back on one machine, for the frames shown (the "
        "published budget is 10M). Wall time: process start to exit. Return: the mean agent return of the last "
        "iteration's training episodes (sampled actions) in both.",
        "`python benchmarks/vmas_side_by_side.py --record`",
        common=("seeds", "steps", "wall"),
        extras=[("mean_return", "mean agent return", lambda v: f"{v:.3f}")],
        summary=("mean_return", "steps", "wall"),
        statistic="mean agent return (last iteration's training episodes), frames, wall time",
        short="VMAS",
        by_task=True,
    ),
    "mpe": Topic(
        "Many agents: MPE simple_spread against the MAPPO paper",
        "The `simple-spread-mappo` preset (the MAPPO paper's MPE settings, feedforward) trained for the steps "
        "shown, and recorded from its run directory: the mean agent return of its last 21 updates' training "
        "episodes, the same on the paper's scale (the team's return as its code logs it, 6m − 75; users of that "
        "code report about −110 to −120 at 20M steps for its recurrent MAPPO), and the final agent's "
        "deterministic play (the score, over agent episodes). Date and commit: the recording's. Wall time: the "
        "run's own training time, beside other work: not a timing.",
        "`proxima train --config simple-spread-mappo --seed 1 --torch-threads 1`, then "
        "`python benchmarks/mpe_spread.py RUN_DIR --record`",
        common=("seeds", "score", "steps", "wall"),
        extras=[
            ("train_return", "training return (last 21 updates)", lambda v: f"{v:.2f}"),
            ("paper_scale", "on the paper's scale", lambda v: f"{v:.1f}"),
        ],
        summary=("score", "paper_scale", "steps", "wall"),
        statistic="deterministic score (agent episodes), the training return on the MAPPO paper's scale, steps, "
        "training time",
        short="MPE",
    ),
    "selfplay": Topic(
        "Connect Four by self-play: against the random and the one-step lookahead player",
        "The preset trained by self-play against a pool of its own snapshots, one torch thread a seed; then its "
        "final agent's deterministic play, half the games in each seat, against the random player and the "
        "one-step lookahead player (it wins where it can, else blocks an immediate loss, else plays at random), "
        "which it never met in training. Wins taken and blocked: of the agent's moves against the lookahead "
        "where it could win at once, and where it had to block, the share where it did. Issue 35 aims at 95% "
        "against random and 80% against the lookahead.",
        "`python benchmarks/selfplay_connect4.py --record`",
        common=("seeds", "steps", "wall"),
        extras=[
            ("games", "games", _int),
            ("win_random", "win vs random", _percent),
            ("win_lookahead", "win vs lookahead", _percent),
            ("wins_taken", "wins taken", _percent),
            ("blocked", "blocked", _percent),
        ],
        summary=("win_lookahead", "win_random", "steps", "wall"),
        statistic="games won against the one-step lookahead and against the random player, steps, wall time",
        short="Connect Four",
    ),
}


def span(values: list, fmt: Callable[[float], str]) -> str:
    """One value, or the range of several (seeds), formatted; blank where nothing was measured."""
    values = [v for v in values if v is not None]
    if not values:
        return ""
    low, high = fmt(min(values)), fmt(max(values))
    if low == high:
        return low
    if " " in low and low.rsplit(" ", 1)[1] == high.rsplit(" ", 1)[1]:
        low = low.rsplit(" ", 1)[0]  # the unit once: "3.6–6.8 s"
    return f"{low}–{high}"


def label(row: dict) -> str:
    """The preset and the settings a row was measured with, as one string."""
    return " ".join(str(part) for part in (row.get("preset"), row.get("settings")) if part)


def all_groups(batches: list[dict], topic: str) -> list[dict]:
    """Every batch's rows for each (task, preset or settings, peer) of ``topic``, oldest batch first; ``newest``
    marks the rows that no later batch replaces. Where the topic keys its rows by one more field (``per``: the
    many-seeds topic's number of seeds), a later batch replaces only the rows of the values it measured."""
    per = TOPICS[topic].per if topic in TOPICS else None
    units: list[dict] = []
    latest: dict[tuple, dict] = {}
    for batch in batches:  # oldest first: a newer batch replaces the rows of the same key
        if batch["topic"] != topic:
            continue
        keyed: dict[tuple, list[dict]] = {}
        for row in batch["rows"]:
            unit = (row["task"], label(row), row.get("peer"), row["extra"].get(per) if per else None)
            keyed.setdefault(unit, []).append(row)
        for unit, rows in keyed.items():
            if unit in latest:
                latest[unit]["replaced_by"] = batch
            latest[unit] = {"unit": unit, "batch": batch, "rows": rows}
            units.append(latest[unit])
    merged: dict[tuple, dict] = {}
    for u in units:  # the units of one key, batch and fate form one group
        replaced = u.get("replaced_by")
        fate = (u["unit"][:3], id(u["batch"]), id(replaced) if replaced else None)
        group = merged.setdefault(fate, {"key": u["unit"][:3], "batch": u["batch"], "rows": [],
                                         "newest": replaced is None, "replaced_by": replaced})  # fmt: skip
        group["rows"] += u["rows"]
    return list(merged.values())


def _order(g: dict) -> tuple:
    return (g["key"][0], g["key"][2] is not None, g["key"][2] or "", g["key"][1], g["batch"]["date"])


def score_cell(rows: list[dict]) -> str:
    scores = [r["score"] for r in rows if r.get("score")]
    if not scores:
        return ""
    if len(scores) == 1:
        return f"{scores[0]['mean']:.1f} ± {scores[0]['std']:.1f}"
    return span([s["mean"] for s in scores], lambda v: f"{v:.1f}")


def solved_cell(rows: list[dict]) -> str:
    known = [r["solved"] for r in rows if r.get("solved") is not None]
    return f"{sum(known)}/{len(known)}" if known else ""


def machine_cell(machine: dict) -> str:
    """Cores and CPU model, and the GPUs where the batch's machine had any."""
    gpus = machine.get("gpus") or []
    return f"{machine.get('cores')} cores, {machine.get('cpu')}" + "".join(f", {g}" for g in gpus)


def batch_cells(batch: dict) -> list[str]:
    """Date, commit, machine and the raw Gymnasium CartPole rate of the batch."""
    commit = (batch.get("commit") or "?")[:7] + (" (modified)" if batch.get("dirty") else "")
    machine = batch.get("machine", {})
    ref = batch.get("reference_sps", {})
    return [batch["date"][:10], f"`{commit}`", machine_cell(machine),
            span([ref.get("before"), ref.get("after")], _rate)]  # fmt: skip


def seeds_cell(rows: list[dict]) -> str:
    return ", ".join(str(s) for s in sorted(r["seed"] for r in rows if r.get("seed") is not None))


COMMON: dict[str, tuple[str, Callable[[list[dict]], str]]] = {
    "seeds": ("seeds", seeds_cell),
    "score": ("score (mean ± std)", score_cell),
    "solved": ("solved", solved_cell),
    "steps": ("steps", lambda rows: span([r.get("steps") for r in rows], _steps)),
    "wall": ("wall time", lambda rows: span([r.get("wall_s") for r in rows], _seconds)),
}


def topic_table(topic: Topic, topic_groups: list[dict]) -> list[str]:
    head = ["task", "who", "preset / settings", *(COMMON[c][0] for c in topic.common),
            *(h for _, h, _ in topic.extras), "date", "commit", "machine", "raw CartPole steps/s", "command"]  # fmt: skip
    why = any("why" in g for g in topic_groups)
    lines = table_head(head + ["moved because"] * why)
    for g in topic_groups:
        rows, (task, preset, peer) = g["rows"], g["key"]
        cells = [
            task,
            peer or PROXIMA,
            f"`{preset}`" if preset else "",
            *(COMMON[c][1](rows) for c in topic.common),
            *(span([r["extra"].get(key) for r in rows], fmt) for key, _, fmt in topic.extras),
            *batch_cells(g["batch"]),
            f"`{g['batch']['command']}`",
            *([g.get("why", "")] if why else []),
        ]
        lines.append(table_row(cells))
    return lines


def tables(topic: Topic, topic_groups: list[dict]) -> list[str]:
    """The topic's table of these groups, or one table per task under the task's heading."""
    table = topic.table or (lambda gs: topic_table(topic, gs))
    if not topic.by_task:
        return table(topic_groups)
    out: list[str] = []
    for task in sorted({g["key"][0] for g in topic_groups}):
        out += (
            ([""] if out else [])
            + [f"### {task}", ""]
            + table([g for g in topic_groups if g["key"][0] == task])
        )
    return out


def slug(title: str) -> str:
    """The anchor that the docs' Markdown (Python-Markdown's toc, mkdocs' default) gives a heading."""
    text = unicodedata.normalize("NFKD", title.replace("`", "")).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def load_page(path: str | None) -> dict:
    """The page's choices (docs/results/page.json): its summary rows and the groups moved off the page; none
    where there is no such file."""
    if not path or not os.path.exists(path):
        return {"summary": [], "moved": []}
    with open(path) as f:
        page = json.load(f)
    if page.get("format") != PAGE_FORMAT:
        raise SystemExit(f"{path}: format {page.get('format')!r}, this renderer takes {PAGE_FORMAT!r}")
    return page


def split(batches: list[dict], page: dict) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """Each topic's groups on the page (the newest of each key, less those the page moves) and in the history
    (every other, with why it left), both in the tables' order. A "moved" entry that names no group is refused:
    a typo there would keep a row on the page unnoticed."""
    moved = {
        (m["topic"], m["task"], m["settings"], m.get("peer"), m["date"]): m["why"] for m in page["moved"]
    }
    found: set[tuple] = set()
    current: dict[str, list[dict]] = {}
    history: dict[str, list[dict]] = {}
    for topic in [*TOPICS, *sorted({b["topic"] for b in batches} - set(TOPICS))]:
        for g in all_groups(batches, topic):
            entry = (topic, *g["key"], g["batch"]["date"])
            plain = {"key": g["key"], "batch": g["batch"], "rows": g["rows"]}
            if entry in moved:
                found.add(entry)
                history.setdefault(topic, []).append({**plain, "why": moved[entry]})
            elif not g["newest"]:
                why = f"replaced by the batch of {g['replaced_by']['date'][:10]} (the same task, settings and who)"
                history.setdefault(topic, []).append({**plain, "why": why})
            else:
                current.setdefault(topic, []).append(plain)
    if set(moved) - found:
        raise SystemExit(f"page.json moves what no record holds: {next(iter(set(moved) - found))}")
    return ({t: sorted(gs, key=_order) for t, gs in current.items()},
            {t: sorted(gs, key=_order) for t, gs in history.items()})  # fmt: skip


def summary_cell(topic: Topic, chosen: list[dict], named: bool) -> str:
    """The summary's cell of one library for a task: for each of its groups (a peer's IPPO and MAPPO, say), the
    topic's summary fields in order; led by the preset or settings where ``named``."""
    extras = {key: fmt for key, _, fmt in topic.extras}
    out = []
    for g in chosen:
        rows, parts = g["rows"], []
        for key in topic.summary:
            text = (
                COMMON[key][1](rows)
                if key in COMMON
                else span([r["extra"].get(key) for r in rows], extras[key])
            )
            parts.append(text + {"solved": " solved", "steps": " steps"}.get(key, "") if text else "")
        text = ", ".join(p for p in parts if p)
        out.append(f"`{g['key'][1]}`: {text}" if named and g["key"][1] else text)
    return "<br>".join(out)


def summary_table(page: dict, current: dict[str, list[dict]]) -> list[str]:
    """One row per task of page.json's summary: proxima's chosen rows beside each peer's current rows for the
    task, in the same topic, then cells quoted from the journal; and where each came from."""
    peers: list[str] = []
    for spec in page["summary"]:
        for who in [*spec.get("peers", []), *(j["who"] for j in spec.get("journal", []))]:
            if who != PROXIMA and who not in peers:
                peers.append(who)
    lines = table_head(["task", "statistic", PROXIMA, *peers, "measured"])
    machines: set[str] = set()
    notes: dict[str, list[str]] = {}  # a note under the table, with the tasks it is about
    for spec in page["summary"]:
        task, cells, measured = spec["task"], {}, []
        topic = TOPICS[spec["topic"]] if spec.get("topic") else None
        if topic is not None:
            mine = [g for g in current.get(spec["topic"], []) if g["key"][0] == task]
            chosen = []
            for settings in spec.get("proxima", []):
                match = [g for g in mine if g["key"][1:] == (settings, None)]
                if not match:
                    raise SystemExit(f"page.json: no current {spec['topic']} row of {task} with {settings!r}")
                chosen += match
            cells[PROXIMA] = summary_cell(topic, chosen, named=True)
            used = list(chosen)
            for who in spec.get("peers", []):
                theirs = [g for g in mine if g["key"][2] == who]
                if not theirs:
                    raise SystemExit(f"page.json: no current {spec['topic']} row of {task} by {who!r}")
                cells[who] = summary_cell(topic, theirs, named=len(theirs) > 1)
                used += theirs
            dates = ", ".join(sorted({g["batch"]["date"][:10] for g in used}))
            measured.append(f"[{topic.short}](#{slug(topic.title)}), {dates}")
            machines |= {machine_cell(g["batch"]["machine"]) for g in used}
        sections: dict[str, list[str]] = {}
        for quoted in spec.get("journal", []):
            cells[quoted["who"]] = quoted["cell"]
            sections.setdefault(quoted["section"], []).append(quoted["who"])
        for section, whos in sections.items():
            date = re.findall(r"\d{4}-\d\d-\d\d", section)
            link = f"[journal{', ' + date[0] if date else ''}]({JOURNAL}#{slug(section)})"
            measured.append(f"{', '.join(whos)}: {link}")
        statistic = spec.get("statistic") or (topic.statistic if topic else "")
        if spec.get("note"):
            notes.setdefault(spec["note"], []).append(task)
        lines.append(table_row([task, statistic, cells.get(PROXIMA, ""), *(cells.get(p, "") for p in peers),
                                "; ".join(measured)]))  # fmt: skip
    lines.append("")
    lines += [f"- {', '.join(tasks)}: {note}." for note, tasks in notes.items()]
    if machines:
        lines.append(f"- The cells from the tables below were measured on {'; '.join(sorted(machines))}.")
    return lines


def results_page(batches: list[dict], page: dict | None = None) -> str:
    page = page or {"summary": [], "moved": []}
    current, history = split(batches, page)
    out = [
        "# Results",
        "",
        "<!-- Written by benchmarks/render_results.py from docs/results/data and docs/results/page.json: edit "
        "those and the scripts, not this page. -->",
        "",
        "The numbers, written by the benchmark scripts themselves: each script run with `--record` adds one JSON "
        "file to `docs/results/data/` (the format is in `benchmarks/records.py`). The summary comes first: one row "
        "per task, proxima's best preset beside each library measured side by side with it. Then one table per "
        "topic, one row per task, preset or settings, and way of running: its newest measurement. Numbers over "
        "several seeds read as their range. Every row names the command that measured it, the commit, the date, "
        "the machine and the raw Gymnasium CartPole rate measured in the same batch (`benchmarks/reference.py`): "
        "these machines' speed varies up to 4x from day to day, so compare times only beside that rate. How the "
        "numbers came about is in the [journal](journal/benchmarks.md); the measurements these tables replaced "
        f"are in the [results history]({HISTORY}). Whole suites, 10 seeds of each task scored with the IQM and "
        "its 95% interval beside the published numbers (`proxima bench`, [BENCH.md](BENCH.md)): "
        "[classic](results/bench-classic.md).",
    ]
    if page["summary"]:
        out += ["", "## Summary: proxima beside its peers, task by task", "",
                "Each cell: the statistic the row names, over the seeds shown in the table it comes from (a range "
                "where there are several), then the steps and the wall time. proxima's cell names its preset; a "
                "peer's, its settings where it has several rows. Cells quoted from the journal are of the day "
                "its section names, and say what they measured where that differs.", ""]  # fmt: skip
        out += summary_table(page, current)
    for name, topic in TOPICS.items():
        topic_groups = current.get(name, [])
        out += ["", f"## {topic.title}", "", topic.about, ""]
        if not topic_groups:
            out.append(f"To be measured: {topic.measure}.")
        else:
            out += tables(topic, topic_groups)
        if history.get(name):
            out += [
                "",
                f"Older measurements of this topic: the [results history]({HISTORY}#{slug(topic.title)}).",
            ]
    for name in sorted(
        {b["topic"] for b in batches} - set(TOPICS)
    ):  # recorded by a script this renderer has no description for
        out += ["", f"## {name}", ""] + topic_table(Topic(name, "", ""), current.get(name, []))
    return "\n".join(out) + "\n"


def history_page(batches: list[dict], page: dict | None = None) -> str:
    """The measurements RESULTS.md no longer shows, each with its batch's date, commit, machine and command as
    recorded, and why it left."""
    _, history = split(batches, page or {"summary": [], "moved": []})
    out = [
        "# Results history",
        "",
        "<!-- Written by benchmarks/render_results.py from docs/results/data and docs/results/page.json: edit "
        "those and the scripts, not this page. -->",
        "",
        "Every recorded measurement that the [results](../RESULTS.md) no longer show, in the tables of the topic it "
        "belongs to: those a newer batch of the same task, settings and library replaced, and those that "
        "`docs/results/page.json` moved off the page, each with the reason in its last column. Each keeps the "
        "date, commit, machine and command of its batch as recorded. Why the page was arranged so: the "
        "[journal](benchmarks.md).",
    ]
    for name in [*TOPICS, *sorted(set(history) - set(TOPICS))]:
        if not history.get(name):
            continue
        topic = TOPICS.get(name) or Topic(name, "", "")
        out += ["", f"## {topic.title}", ""]
        out += tables(topic, history[name])
    if len(out) == 6:
        out += ["", "Nothing yet: every measurement is on the results page."]
    return "\n".join(out) + "\n"


def readme_table(batches: list[dict], page: dict | None = None) -> str:
    """The solve topic, one row per task: proxima's preset and result, then each peer's, side by side. proxima's
    row of a task is the one the page's summary names, else the newest."""
    page = page or {"summary": [], "moved": []}
    solve = split(batches, page)[0].get("solve", [])
    if not solve:
        return (
            "| task | preset | proxima | SB3 (zoo settings) | PureJaxRL |\n|---|---|---|---|---|\n"
            "| to be measured | | `python benchmarks/solve_suite.py --record` | | |"
        )
    chosen = {
        (s["task"], name)
        for s in page["summary"]
        if s.get("topic") == "solve"
        for name in s.get("proxima", [])
    }
    peers = sorted({g["key"][2] for g in solve if g["key"][2] is not None})

    def rank(g: dict) -> tuple:
        return (g["key"][2] is None and (g["key"][0], g["key"][1]) in chosen, g["batch"]["date"])

    tasks: dict[str, dict] = {}
    for g in (
        solve
    ):  # a task's rows may come from several presets or settings: keep the chosen one, else the newest
        task, _, peer = g["key"]
        current = tasks.setdefault(task, {}).get(peer)
        if current is None or rank(g) >= rank(current):
            tasks[task][peer] = g

    def cell(g: dict | None) -> str:
        if g is None:
            return ""
        rows = g["rows"]
        parts = [f"{solved_cell(rows)} solved" if solved_cell(rows) else score_cell(rows),
                 span([r.get("steps") for r in rows], _steps), span([r.get("wall_s") for r in rows], _seconds)]  # fmt: skip
        return ", ".join(p for p in parts if p)

    head = ["task", "preset", PROXIMA, *peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task, by_peer in tasks.items():
        ours = by_peer.get(None)
        preset = f"`{ours['key'][1]}`" if ours and ours["key"][1] else ""
        lines.append(
            "| " + " | ".join([task, preset, cell(ours), *(cell(by_peer.get(p)) for p in peers)]) + " |"
        )
    shown = [g for by_peer in tasks.values() for g in by_peer.values()]
    dates = sorted({g["batch"]["date"][:10] for g in shown})
    machines = sorted({machine_cell(g["batch"]["machine"]) for g in shown})
    lines += ["", f"Seeds solved (100 deterministic episodes at or above the task's threshold), steps and wall time "
              f"(ranges over the seeds); measured {', '.join(dates)} on {'; '.join(machines)}. Commands, commits "
              f"and the day's raw rate: [docs/RESULTS.md](docs/RESULTS.md)."]  # fmt: skip
    return "\n".join(lines)


def render_readme(path: str, table: str) -> None:
    with open(path) as f:
        text = f.read()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no {START} ... {END} lines to put the results table between")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(f"{head}{START}\n{table}\n{END}{tail}")


def render_all(
    data_dir: str = records.DATA_DIR, results: str = RESULTS_MD, readme: str | None = README
) -> None:
    """Write ``results``, its history page (journal/results-history.md beside it) and the README's table, from
    the records in ``data_dir`` and the page's choices in page.json beside that folder."""
    batches = records.load(data_dir)
    page = load_page(os.path.join(os.path.dirname(os.path.abspath(data_dir)), "page.json"))
    with open(results, "w") as f:
        f.write(results_page(batches, page))
    history = os.path.join(os.path.dirname(os.path.abspath(results)), HISTORY)
    os.makedirs(os.path.dirname(history), exist_ok=True)
    with open(history, "w") as f:
        f.write(history_page(batches, page))
    if readme:
        render_readme(readme, readme_table(batches, page))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=records.DATA_DIR, help="the records' folder")
    parser.add_argument("--results", default=RESULTS_MD, help="the results page to write")
    parser.add_argument("--readme", default=README, help="the README whose table to replace ('' for none)")
    args = parser.parse_args()
    render_all(args.data, args.results, args.readme or None)
    print(f"wrote {args.results}" + (f" and the table in {args.readme}" if args.readme else ""))


if __name__ == "__main__":
    main()
