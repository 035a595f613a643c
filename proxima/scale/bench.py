"""``proxima bench SUITE``: a suite's tasks × seeds, each task trained with its preset, each seed's agent scored on
deterministic episodes of Gymnasium's env, and one page (``bench.md``, ``bench.json``) of the statistics of
``proxima.run.scores`` beside the PPO numbers that CleanRL (Open RL Benchmark) and the RL Zoo published.

Both are data shipped here: ``bench_suites.json`` (each task's preset and steps budget) and
``published_scores.json`` (the peers' numbers, each row's cells as its source writes them, with the file and
commit they come from).

The bench directory is the bench's memory, as a sweep's is. ``bench.json`` holds what was asked, which a rerun
must ask again. A task's seeds train as one batched run (``--num-seeds``) in ``OUT/TASK``, its seeds' runs in
``OUT/TASK/seedS`` (one seed, or a preset that a batched run cannot train: one run per seed there), each a
trial of ``proxima.scale.sweeps.run_trial``: its ``trial.json`` says it ended, and an interrupted one resumes
from its checkpoint. A seed's ``eval.json``, marked as the bench's, says it was scored. So the same command
again trains and scores only what is missing.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shlex
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from proxima.base import files
from proxima.base.errors import UserError
from proxima.run.config import PPOArgs, resolve_args
from proxima.run.report import read_run, write_report
from proxima.run.scores import Group, RunScore, number, summarize, with_interval
from proxima.scale.seedgroup import check_seeds
from proxima.scale.sweeps import run_trial, trial_row

SUITES_FILE = "bench_suites.json"
PUBLISHED_FILE = "published_scores.json"
BENCH_JSON, BENCH_MD = "bench.json", "bench.md"
FORMAT, VERSION = "proxima-bench", 1
SEEDS = 10  # rliable's advice: fewer seeds leave intervals too wide to tell settings apart
EPISODES = 100  # as proxima solve scores a task
SETTING = "proxima"  # the one setting of every task, so that the statistics over the tasks are of all of them


@dataclass(frozen=True)
class Task:
    env_id: str
    preset: str
    total_timesteps: int
    settings: dict = field(default_factory=dict)  # over the preset's, by their flat names

    @property
    def dir_name(self) -> str:
        return self.env_id.replace("/", "_").replace(":", "_")


def _data(name: str) -> dict:
    return json.loads((resources.files("proxima.scale") / name).read_text(encoding="utf-8"))


def suites() -> dict[str, dict]:
    """The suites by name, each with its description and tasks (``bench_suites.json``)."""
    return _data(SUITES_FILE)["suites"]


def published() -> list[dict]:
    """The peers' tables of published PPO scores (``published_scores.json``), each with its source."""
    return _data(PUBLISHED_FILE)["tables"]


def suite_tasks(suite: str, only: list[str] | tuple[str, ...] = ()) -> list[Task]:
    """The tasks of ``suite``, in its order; ``only``: those of them alone."""
    known = suites()
    if suite not in known:
        raise UserError(f"unknown suite {suite!r}; accepted: {', '.join(known)}")
    tasks = [Task(**t) for t in known[suite]["tasks"]]
    ids = [t.env_id for t in tasks]
    for env_id in only:
        if env_id not in ids:
            raise UserError(
                f"--tasks: {env_id!r} is not a task of the {suite} suite; its tasks: {', '.join(ids)}"
            )
    if len(set(only)) < len(only):
        raise UserError("--tasks names a task twice; give each once")
    return [t for t in tasks if not only or t.env_id in only]


@dataclass(frozen=True)
class Unit:
    """One training of a task: a batched run of all its seeds, or one seed's run."""

    task: Task
    name: str  # its directory, relative to the bench directory
    args: PPOArgs

    @property
    def seeds(self) -> list[int]:
        first = self.args.run.seed
        return list(range(first, first + self.args.run.num_seeds))


def plan(tasks: list[Task], seeds: int, total_timesteps: int | None, out: str) -> list[Unit]:
    """Every task's trainings, each setting checked: bad input fails here, before anything is written."""
    units = []
    for task in tasks:
        try:
            units += _units(task, seeds, total_timesteps, out)
        except UserError as e:
            raise UserError(f"{task.env_id} ({task.preset}): {e}") from None
    return units


def _units(task: Task, seeds: int, total_timesteps: int | None, out: str) -> list[Unit]:
    base = resolve_args(
        config=task.preset,
        env_id=task.env_id,
        total_timesteps=total_timesteps or task.total_timesteps,
        quiet=True,  # the bench says what each task did; each run's report.html shows it live
        **task.settings,
    ).validate()
    if seeds > 1:
        group = base.replace(num_seeds=seeds, run_dir=os.path.join(out, task.dir_name)).validate()
        try:
            check_seeds(group, None)
            return [Unit(task, task.dir_name, group)]
        except UserError:  # what a batched run cannot train yet: one run per seed
            pass
    names = [os.path.join(task.dir_name, f"seed{seed}") for seed in range(1, seeds + 1)]
    return [
        Unit(task, name, base.replace(seed=seed, run_dir=os.path.join(out, name)))
        for seed, name in enumerate(names, 1)
    ]


def check_envs(tasks: list[Task]) -> None:
    """Make each task's Gymnasium env once, the one its agents are scored on: an env that its extra would
    install (Box2D, MuJoCo, ALE) is said in one line now, not as a failed run after an hour of others."""
    from proxima.envs import make_envs

    for task in tasks:
        try:
            make_envs(task.env_id, 1, backend="gymnasium").close()
        except UserError as e:
            raise UserError(f"{task.env_id}: {e}") from None


def command_line(request: dict, output_dir: str) -> str:
    """The command that asks ``request`` into ``output_dir``, as a reader can paste it."""
    words = ["proxima", "bench", request["suite"], "--seeds", str(request["seeds"])]
    if request["tasks"] is not None:
        words += ["--tasks", *request["tasks"]]
    if request["total_timesteps"] is not None:
        words += ["--total-timesteps", str(request["total_timesteps"])]
    if request["episodes"] != EPISODES:
        words += ["--episodes", str(request["episodes"])]
    return shlex.join([*words, "--output-dir", output_dir])


def _request(suite: str, seeds: int, tasks, total_timesteps: int | None, episodes: int) -> dict:
    if type(seeds) is not int or seeds < 1:
        raise UserError(f"--seeds must be a positive number of seeds per task, got {seeds!r}")
    if type(episodes) is not int or episodes < 1:
        raise UserError(f"--episodes must be a positive integer, got {episodes!r}")
    if total_timesteps is not None and (type(total_timesteps) is not int or total_timesteps < 1):
        raise UserError(f"--total-timesteps must be a positive integer, got {total_timesteps!r}")
    return {
        "suite": suite,
        "seeds": seeds,
        "tasks": list(tasks) if tasks else None,
        "total_timesteps": total_timesteps,
        "episodes": episodes,
    }


def _check_same(out: str, request: dict) -> bool:
    """Whether ``out`` holds this bench already (a rerun); a ``UserError`` where it holds another, or anything
    that is not a bench's."""
    if not os.path.exists(out):
        return False
    if not os.path.isdir(out):
        raise UserError(f"output directory {out!r} is a file; give a directory for --output-dir")
    path = os.path.join(out, BENCH_JSON)
    if not os.path.exists(path):
        if set(os.listdir(out)) - {files.LOCK}:
            raise UserError(
                f"output directory {out!r} holds no bench and is not empty; give a new --output-dir"
            )
        return False
    held = files.read_json(path)
    if held.get("format") != FORMAT or held.get("version") != VERSION:
        raise UserError(f"{path} is not a proxima bench of version {VERSION}; give a new --output-dir")
    if held.get("request") != request:
        said = held.get("command") if isinstance(held.get("command"), str) else "another bench"
        raise UserError(
            f"{out} holds another bench ({said}); rerun that command to finish it, or give a new --output-dir"
        )
    return True


def bench(
    suite: str,
    *,
    seeds: int = SEEDS,
    output_dir: str | None = None,
    tasks: list[str] | tuple[str, ...] = (),
    total_timesteps: int | None = None,
    episodes: int = EPISODES,
) -> dict:
    """Train and score ``suite``'s tasks (``tasks``: some of them) × ``seeds`` in ``output_dir`` (default
    ``runs/bench_SUITE``), finishing what a bench of the same request left there, and write its page; return
    ``bench.json``'s content. ``total_timesteps``: every task's budget instead of the suite's."""
    request = _request(suite, seeds, tasks, total_timesteps, episodes)
    chosen = suite_tasks(suite, request["tasks"] or ())
    given_dir = output_dir or default_output_dir(suite)
    out = os.path.abspath(given_dir)
    units = plan(chosen, seeds, total_timesteps, out)
    rerun = _check_same(out, request)
    if not rerun:
        check_envs(chosen)
    command = command_line(request, given_dir)
    record = {
        "format": FORMAT,
        "version": VERSION,
        "request": request,
        "command": command,
        "tasks": [
            {
                "task": t.env_id,
                "preset": t.preset,
                "settings": t.settings,
                "total_timesteps": total_timesteps or t.total_timesteps,
                "runs": [u.name for u in units if u.task == t],
                "batched": any(len(u.seeds) > 1 for u in units if u.task == t),
            }
            for t in chosen
        ],
        "results": None,
    }
    with files.lock_directory(out, "bench directory", "--output-dir"):
        _check_same(out, request)  # again, held: of two benches started into it, the second finds it taken
        if rerun:  # the runs resume and are scored in place: nothing may lead out of the directory
            files.links_inside(out)
        else:
            files.write_json(os.path.join(out, BENCH_JSON), record)
        for task in chosen:
            _train(out, task, [u for u in units if u.task == task])
            for unit in (u for u in units if u.task == task):
                for seed in unit.seeds:
                    _score(task, _seed_dir(out, unit, seed), seed, episodes)
        record["results"] = results(out, chosen, units, episodes)
        files.write_json(os.path.join(out, BENCH_JSON), record)
        files.write_text(os.path.join(out, BENCH_MD), page(record))
        # the plots: each task's performance profile and IQM over steps, with the runs' curves
        write_report([out], os.path.join(out, files.REPORT))
    return record


def default_output_dir(suite: str) -> str:
    """The same for every run of a suite's bench, so that the same command again finishes it."""
    return os.path.join("runs", f"bench_{suite}")


def _seed_dir(out: str, unit: Unit, seed: int) -> str:
    name = os.path.join(unit.name, f"seed{seed}") if unit.args.run.num_seeds > 1 else unit.name
    return os.path.join(out, name)


def _train(out: str, task: Task, units: list[Unit]) -> None:
    """Train the task's units that have not ended (``run_trial`` resumes an interrupted one), saying so."""
    todo = [u for u in units if trial_row(os.path.join(out, u.name)) is None]
    if not todo:
        return
    seeds = sum(len(u.seeds) for u in todo)
    how = (
        "as one batched run"
        if len(todo) == 1 and seeds > 1
        else "each a run of its own"
        if seeds > 1
        else "as one run"
    )
    started = any(os.path.exists(os.path.join(out, u.name, files.CHECKPOINT)) for u in todo)
    print(
        f"{task.env_id}: {'resuming' if started else 'training'} {seeds} seed{'s' if seeds > 1 else ''} {how}, "
        f"preset {task.preset}, at most "
        f"{todo[0].args.algorithm.total_timesteps:,} steps each (its page: proxima report {os.path.join(out, task.dir_name)})",
        flush=True,
    )
    for unit in todo:
        row = run_trial(unit.args.to_json())
        if row["status"] == "failed":
            print(f"{unit.name}: failed: {row.get('error')}", flush=True)


def _bench_evaluation(seed_dir: str, seed: int, episodes: int) -> dict | None:
    """The seed's eval.json where it is this bench's scoring of it, whole; else None. The file may come from a
    stranger: its numbers are checked before they count."""
    path = os.path.join(seed_dir, files.EVAL_JSON)
    if not os.path.exists(path):
        return None
    try:
        done = files.read_json(path)
    except UserError:
        return None
    returns = done.get("returns")
    whole = (
        done.get("bench") == VERSION
        and done.get("deterministic") is True
        and done.get("seed") == seed
        and done.get("episodes") == episodes
        and isinstance(returns, list)
        and len(returns) == episodes
        and all(type(r) in (int, float) and math.isfinite(r) for r in returns)
    )
    return done if whole else None


def _score(task: Task, seed_dir: str, seed: int, episodes: int) -> None:
    """Score a seed that trained on ``episodes`` deterministic episodes of Gymnasium's env, seeded with the
    seed (as ``proxima solve`` does: apart from the evaluations during training, which chose any best agent),
    into its eval.json; a seed scored already is left as it is."""
    row = trial_row(seed_dir)
    if (
        row is None
        or row.get("status") != "finished"
        or _bench_evaluation(seed_dir, seed, episodes) is not None
    ):
        return
    import torch

    from proxima.run.agent import load
    from proxima.run.evaluate import evaluate, save_evaluation

    best = os.path.join(seed_dir, files.BEST)
    # PPO's policy can get worse late in a run: where the preset keeps its best agent, that one is scored, as
    # proxima solve scores it
    scored = best if os.path.exists(os.path.join(best, files.AGENT_JSON)) else seed_dir
    agent = load(scored, "cuda" if torch.cuda.is_available() else "cpu")
    returns = evaluate(agent, episodes, deterministic=True, seed=seed)
    print(
        f"{task.env_id} seed {seed}: {returns.mean():.2f} ± {returns.std():.2f} over {episodes} deterministic "
        f"episodes ({'its best agent' if scored == best else 'its final agent'})",
        flush=True,
    )
    step = files.read_json(os.path.join(scored, files.AGENT_JSON)).get("global_step")
    save_evaluation(
        seed_dir,
        returns,
        deterministic=True,
        seed=seed,
        bench=VERSION,
        agent="best" if scored == best else "final",
        agent_step=step if type(step) is int else None,
    )


def _count(value) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _seconds(value) -> float | None:
    return float(value) if type(value) in (int, float) and math.isfinite(value) else None


def _seed_row(out: str, seed_dir: str, seed: int, episodes: int) -> tuple[dict, RunScore | None]:
    """A seed's row of the page, and its score for the statistics where the bench scored it."""
    trial = trial_row(seed_dir) or {"status": "not run"}
    done = _bench_evaluation(seed_dir, seed, episodes)
    row = {
        "seed": seed,
        "run_dir": os.path.relpath(seed_dir, out),
        "status": trial.get("status") if done is None else "scored",
        "error": trial.get("error"),
        "score": None,
        "std": None,
        "agent": None,
        "agent_step": None,
        "steps": None,
        "wall_s": _seconds(trial.get("wall_s")),
    }
    if done is None:
        return row, None
    returns = np.asarray(done["returns"], dtype=np.float64)
    steps = _count(files.read_json(os.path.join(seed_dir, files.AGENT_JSON)).get("global_step"))
    row |= {
        "score": float(returns.mean()),
        "std": float(returns.std()),
        "agent": done.get("agent"),
        "agent_step": _count(done.get("agent_step")),
        "steps": steps,
    }
    return row, RunScore(seed_dir, float(returns.mean()), "eval", steps or 0, "finished", read_run(seed_dir))


def results(out: str, tasks: list[Task], units: list[Unit], episodes: int) -> dict:
    """The page's numbers: each seed's score, each task's statistics and the statistics over the tasks
    (``proxima.run.scores.summarize``), beside the published scores of each task."""
    groups, rows = [], []
    for task in tasks:
        mine = [u for u in units if u.task == task]
        seeds, scored = [], []
        for unit in mine:
            for seed in unit.seeds:
                row, score = _seed_row(out, _seed_dir(out, unit, seed), seed, episodes)
                seeds.append(row)
                scored += [score] if score is not None else []
        if scored:
            groups.append(Group(SETTING, task.env_id, scored))
        # a batched run's seeds train together: its time is the run's; runs of their own add up
        walls = [
            w
            for w in (_seconds((trial_row(os.path.join(out, u.name)) or {}).get("wall_s")) for u in mine)
            if w is not None
        ]
        rows.append(
            {
                "task": task.env_id,
                "preset": task.preset,
                "settings": task.settings,
                "total_timesteps": mine[0].args.algorithm.total_timesteps,
                "wall_s": sum(walls) if walls else None,
                "seeds": seeds,
                "statistics": None,
                "published": published_rows(task.env_id),
            }
        )
    summary = summarize(groups) if groups else None
    for row in rows:
        found = [g for g in (summary["groups"] if summary else []) if g["task"] == row["task"]]
        if found:
            row["statistics"] = {k: v for k, v in found[0].items() if k not in ("setting", "task", "per_run")}
    import torch

    from proxima.version import __version__

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "proxima": __version__,
        "machine": _machine(torch),
        "episodes": episodes,
        "confidence": summary["confidence"] if summary else None,
        "interval": summary["interval"] if summary else None,
        "tasks": rows,
        "aggregate": summary["aggregates"][0] if summary and summary["aggregates"] else None,
        "notes": summary["notes"] if summary else [],
    }


def _machine(torch) -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{cores} CPU cores{gpu}"


def published_rows(task: str) -> list[dict]:
    """The published scores that stand beside ``task``, one per peer's table that has one."""
    found = []
    for table in published():
        row = table["rows"].get(task)
        if row is not None:
            found.append(
                {
                    "table": table["id"],
                    "peer": table["peer"],
                    "env_id": row["env_id"],
                    "mean": row["mean"],
                    "std": row["std"],
                    "text": _as_written(row),
                    "runs": table["runs"],
                    "steps": row.get("steps", table["steps"]),
                }
            )
    return found


def _as_written(row: dict) -> str:
    """The score as its source writes it: CleanRL's cell, the RL Zoo's mean and std cells."""
    cells = row["cells"]
    return cells[1] if len(cells) == 2 else f"{cells[2]} ± {cells[3]}"


def _steps(values: list[int]) -> str:
    if not values:
        return "–"
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _preset(task: dict) -> str:
    """The preset and the task's own settings over it, as train flags."""
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in task["settings"].items()]
    return " ".join([f"`{task['preset']}`", *(f"`{f}`" for f in flags)])


def _peer(task: str, found: list[dict], peer: str) -> str:
    mine = [p for p in found if p["peer"] == peer]
    if not mine:
        return "none published"
    p = mine[0]
    env = "" if p["env_id"] == task else f", on {p['env_id']}"
    return f"{p['text']} ({p['runs']} run{'s' if p['runs'] > 1 else ''}, {p['steps']:,} steps{env})"


def page(record: dict) -> str:
    """``bench.md``: the summary table first, then each task's statistics, the statistics over the tasks, the
    published numbers with their sources, and each seed."""
    res = record["results"]
    request = record["request"]
    lines = [
        f"# proxima bench {request['suite']}",
        "",
        f"`{record['command']}`",
        "",
        f"proxima {res['proxima']}, {res['date']}, {res['machine']}. Each task's {request['seeds']} seeds trained "
        f"with its preset; each seed's agent (its best, where the preset keeps one, else its final agent) scored on "
        f"{res['episodes']} deterministic episodes of Gymnasium's env. [95% CI]: {res['interval'] or 'none'}. The "
        "published numbers are of other kinds of score, and some of other versions of the env (below). The plots "
        "(each task's performance profile and IQM over steps, with every seed's curves) are on `report.html`.",
        "",
        "| task | preset | steps (budget) | seeds scored | IQM [95% CI] | CleanRL PPO | RL Zoo PPO |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in res["tasks"]:
        scored = [s for s in t["seeds"] if s["status"] == "scored"]
        stats = t["statistics"] or {}
        steps = _steps([s["steps"] for s in scored if s["steps"] is not None])
        lines.append(
            f"| {t['task']} | {_preset(t)} | {steps} ({t['total_timesteps']:,}) | {len(scored)}/{len(t['seeds'])} "
            f"| {with_interval(stats.get('iqm'))} | {_peer(t['task'], t['published'], 'CleanRL')} | {_peer(t['task'], t['published'], 'RL Zoo')} |"
        )
    lines += [
        "",
        "## Each task, in its units",
        "",
        "Optimality gap: how far the scores fall short of the task's reference score on average (– where it has "
        "none; docs/STATISTICS.md). Time: the task's training, its seeds together.",
        "",
        "| task | IQM | median | mean | optimality gap (reference) | training s |",
        "|---|---|---|---|---|---|",
    ]
    for t in res["tasks"]:
        s = t["statistics"] or {}
        reference = f" ({number(s['reference'])})" if s.get("reference") is not None else ""
        wall = "–" if t["wall_s"] is None else f"{t['wall_s']:.1f}"
        lines.append(
            f"| {t['task']} | {with_interval(s.get('iqm'))} | {with_interval(s.get('median'))} | "
            f"{with_interval(s.get('mean'))} | {with_interval(s.get('optimality_gap'))}{reference} | {wall} |"
        )
    lines += ["", "## Over the tasks, normalized (0: random, 1: the reference score)", ""]
    a = res["aggregate"]
    if a is None:
        said = "; ".join(res["notes"]) or "none: a statistic over the tasks needs two or more tasks"
        lines.append(said[0].upper() + said[1:] + ".")
    else:
        lines += [
            "| tasks | runs | IQM | median | mean | optimality gap |",
            "|---|---|---|---|---|---|",
            f"| {len(a['tasks'])} | {a['runs']} | {with_interval(a['iqm'])} | {with_interval(a['median'])} | "
            f"{with_interval(a['mean'])} | {with_interval(a['optimality_gap'])} |",
        ]
    lines += _published_section(res["tasks"])
    lines += [
        "",
        "## Each seed",
        "",
        f"| task | seed | score (mean ± std of {res['episodes']} episodes) | agent scored (its step) | steps | run directory |",
        "|---|---|---|---|---|---|",
    ]
    for t in res["tasks"]:
        for s in t["seeds"]:
            if s["status"] == "scored":
                score = f"{number(s['score'])} ± {number(s['std'], s['score'])}"
                agent = f"{s['agent']} ({'–' if s['agent_step'] is None else format(s['agent_step'], ',')})"
            else:
                score, agent = s["status"] + (f": {s['error']}" if s["error"] else ""), "–"
            steps = "–" if s["steps"] is None else f"{s['steps']:,}"
            lines.append(f"| {t['task']} | {s['seed']} | {score} | {agent} | {steps} | `{s['run_dir']}` |")
    return "\n".join(lines) + "\n"


def _published_section(tasks: list[dict]) -> list[str]:
    lines = [
        "",
        "## The published numbers",
        "",
        "| task | peer | env | score, as published | runs | steps |",
        "|---|---|---|---|---|---|",
    ]
    missing: dict[str, list[str]] = {}
    peers = list(dict.fromkeys(t["peer"] for t in published()))
    for t in tasks:
        for p in t["published"]:
            lines.append(
                f"| {t['task']} | {p['peer']} | {p['env_id']} | {p['text']} | {p['runs']} | {p['steps']:,} |"
            )
        for peer in peers:
            if peer not in {p["peer"] for p in t["published"]}:
                missing.setdefault(peer, []).append(t["task"])
    used = {p["table"] for t in tasks for p in t["published"]}
    lines += ["", "Sources:", ""]
    for table in published():
        if table["id"] in used:
            lines.append(
                f"- {table['peer']}, {table['algorithm']}: {table['repository']}/blob/{table['commit']}/{table['file']}, "
                f"{table['table']}. {table['score']}. Runs: {table['runs_source']}. Steps: {table['steps_source']}."
            )
    for peer, names in missing.items():
        lines.append(f"- {peer}: no PPO number is published for {', '.join(names)}, so none is shown.")
    return lines
