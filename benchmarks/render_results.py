"""Render docs/RESULTS.md and the README's results table from the records in docs/results/data.

One table per topic. Each row is the newest batch's measurement of one (task, preset or settings, peer), its
seeds together: numbers over several seeds read as their range. Peers sit in the rows just below proxima's for
the same task. The README's table (between its `<!-- results:start -->` and `<!-- results:end -->` lines) is the
solve topic with the peers side by side in one row per task. Standard library only, like benchmarks/records.py.

    .venv/bin/python benchmarks/render_results.py [--data DIR] [--results FILE] [--readme FILE]

The benchmark scripts run it themselves after a `--record` batch; by hand it is needed only after editing or
removing a record.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import records  # noqa: E402

RESULTS_MD = os.path.join(records.ROOT, "docs", "RESULTS.md")
README = os.path.join(records.ROOT, "README.md")
START, END = "<!-- results:start -->", "<!-- results:end -->"
PROXIMA = "proxima"


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


def num_seeds_table(topic_groups: list[dict]) -> list[str]:
    """One row per (task, number of seeds, who, preset, way): the ways of training N seeds together for each N.
    "× 1 seed": the wall time over that of the same way's one seed in the same batch."""
    head = ["task", "who", "preset", "how", "seeds", "wall time", "× 1 seed", "steps", "steps/s", "solved",
            "date", "commit", "machine", "raw CartPole steps/s", "command"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ordered = []
    for g in topic_groups:
        ones = [r["wall_s"] for r in g["rows"] if r["extra"].get("num_seeds") == 1 and r.get("wall_s")]
        for row in g["rows"]:
            ordered.append((g, row, ones[0] if ones else None))
    ordered.sort(key=lambda x: (x[1]["task"], x[1]["extra"].get("num_seeds") or 0, x[1].get("peer") or "",
                                x[1].get("preset") or "", x[1].get("settings") or ""))  # fmt: skip
    for g, row, one in ordered:
        n, solved = row["extra"].get("num_seeds"), row["extra"].get("seeds_solved")
        cells = [
            row["task"],
            row.get("peer") or PROXIMA,
            f"`{row['preset']}`" if row.get("preset") else "",
            row.get("settings") or "",
            str(n),
            span([row.get("wall_s")], _seconds),
            f"{row['wall_s'] / one:.1f}×" if one and row.get("wall_s") else "",
            span([row.get("steps")], _steps),
            span([row["extra"].get("sps")], _int),
            "" if solved is None else f"{solved}/{n}",
            *batch_cells(g["batch"]),
            f"`{row['command']}`" if row.get("command") else "",
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


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
        "final policy reaches the task's threshold on 100 deterministic episodes.",
        "`python benchmarks/num_seeds.py --peers --record`",
        table=num_seeds_table,
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


def groups(batches: list[dict], topic: str) -> list[dict]:
    """The newest batch's rows for each (task, preset or settings, peer) of ``topic``, with that batch."""
    newest: dict[tuple, tuple[dict, list[dict]]] = {}
    for batch in batches:  # oldest first: a newer batch replaces the rows of the same key
        if batch["topic"] != topic:
            continue
        keyed: dict[tuple, list[dict]] = {}
        for row in batch["rows"]:
            keyed.setdefault((row["task"], label(row), row.get("peer")), []).append(row)
        for key, rows in keyed.items():
            newest[key] = (batch, rows)
    out = [{"key": key, "batch": batch, "rows": rows} for key, (batch, rows) in newest.items()]
    return sorted(out, key=lambda g: (g["key"][0], g["key"][2] is not None, g["key"][2] or "", g["key"][1]))


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
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
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
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def results_page(batches: list[dict]) -> str:
    out = [
        "# Results",
        "",
        "<!-- Written by benchmarks/render_results.py from docs/results/data: edit the scripts, not this page. -->",
        "",
        "The current numbers, one table per topic, written by the benchmark scripts themselves: each script run "
        "with `--record` adds one JSON file to `docs/results/data/` (the format is in `benchmarks/records.py`), "
        "and this page shows each task's newest measurement. Numbers over several seeds read as their range. "
        "Every row names the command that measured it, the commit, the date, the machine and the raw Gymnasium "
        "CartPole rate measured in the same batch (`benchmarks/reference.py`): these machines' speed varies up "
        "to 4x from day to day, so compare times only beside that rate. How the numbers came about, and older "
        "ones, are in the [journal](journal/benchmarks.md).",
    ]
    for name, topic in TOPICS.items():
        topic_groups = groups(batches, name)
        out += ["", f"## {topic.title}", "", topic.about, ""]
        if not topic_groups:
            out.append(f"To be measured: {topic.measure}.")
        else:
            out += topic.table(topic_groups) if topic.table else topic_table(topic, topic_groups)
    extra_topics = sorted({b["topic"] for b in batches} - set(TOPICS))
    for name in extra_topics:  # a topic recorded by a script this renderer has no description for
        out += ["", f"## {name}", ""] + topic_table(Topic(name, "", ""), groups(batches, name))
    return "\n".join(out) + "\n"


def readme_table(batches: list[dict]) -> str:
    """The solve topic, one row per task: proxima's preset and result, then each peer's, side by side."""
    solve = groups(batches, "solve")
    if not solve:
        return (
            "| task | preset | proxima | SB3 (zoo settings) | PureJaxRL |\n|---|---|---|---|---|\n"
            "| to be measured | | `python benchmarks/solve_suite.py --record` | | |"
        )
    peers = sorted({g["key"][2] for g in solve if g["key"][2] is not None})
    tasks: dict[str, dict] = {}
    for g in solve:  # a task's rows may come from several presets or settings: keep the newest batch's
        task, preset, peer = g["key"]
        current = tasks.setdefault(task, {}).get(peer)
        if current is None or g["batch"]["date"] >= current["batch"]["date"]:
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
    dates = sorted({g["batch"]["date"][:10] for g in solve})
    machines = sorted({machine_cell(g["batch"]["machine"]) for g in solve})
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
    batches = records.load(data_dir)
    with open(results, "w") as f:
        f.write(results_page(batches))
    if readme:
        render_readme(readme, readme_table(batches))


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
