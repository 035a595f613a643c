"""Check that a refactor changed no result: run fixed-seed trainings at two commits and compare their outputs.

    .venv/bin/python benchmarks/compare_commits.py BASE [OTHER]      # OTHER: a commit, or the work tree (default)

Each commit is exported to a temporary directory (``git archive``) and its ``proxima`` runs from there with this
checkout's ``.venv``. ``metrics.jsonl`` (without ``time_s`` and ``sps``), ``episodes.jsonl`` and
``model.safetensors`` must be byte-identical; the script prints one line per run and exits 1 on any difference.
``--keep DIR`` keeps the outputs of every run in DIR/<label>/<run>; ``--runs NAME ...`` picks some of ``RUNS``. ``--other-flags "FLAGS"`` adds train flags to
OTHER's runs only: where a change of default is meant, the flag that restores the old one shows that nothing
else changed (``--other-flags "--value-norm-horizon 0"``). ``--flags "FLAGS"`` adds train flags to both sides'
runs: on a machine where other processes run, ``--flags "--torch-threads 2"``, since the automatic thread count
follows the load (``proxima.run.threads``) and two counts round differently.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable  # the interpreter this script runs with (the docs: .venv/bin/python)
# A preset passed by its file in this checkout, so that a commit from before its name reads the same settings.
PRESETS = os.path.join(ROOT, "proxima", "presets", "")

RUNS = {  # name: flags of `proxima train` (the issue-12 set)
    "ppo-cartpole": ["--env-id", "CartPole-v1", "--seed", "1", "--total-timesteps", "20480"],
    "reinforce-cartpole": ["--env-id", "CartPole-v1", "--seed", "1", "--total-timesteps", "20480", "--algo", "reinforce"],
    "vpg-cartpole": ["--env-id", "CartPole-v1", "--seed", "1", "--total-timesteps", "20480", "--algo", "vpg"],
    "pendulum": ["--config", "pendulum", "--total-timesteps", "10240"],
    "pendulum-discrete-single-env": ["--config", PRESETS + "pendulum-discrete-single-env.json", "--total-timesteps", "4096"],
    "acrobot-gymnasium": ["--env-id", "Acrobot-v1", "--env-backend", "gymnasium", "--total-timesteps", "8192"],
    # many agents (issue 35): the native probe's games, and VMAS's (commits before it: --runs without these)
    "mappo-probe": ["--env-id", "proxima/ProbeCoordination-v0", "--algo", "mappo", "--total-timesteps", "4096"],
    "ippo-vmas": ["--env-id", "vmas:navigation", "--algo", "ippo", "--num-envs", "8", "--num-steps", "32", "--total-timesteps", "1024"],
    "mappo-vmas": ["--env-id", "vmas:navigation", "--algo", "mappo", "--num-envs", "8", "--num-steps", "32", "--total-timesteps", "1024"],
    # issue 64's redesign: a batched run (each seed's directory compared), an LSTM, a turn-based self-play game
    # with action masks (commits before them: --runs without these)
    "seeds-cartpole": ["--env-id", "CartPole-v1", "--seed", "1", "--num-seeds", "2", "--total-timesteps", "8192"],
    "seeds-lstm": ["--env-id", "proxima/ProbeMemory-v0", "--recurrent", "lstm", "--num-seeds", "2", "--total-timesteps", "4096"],
    "lstm-memory": ["--env-id", "proxima/ProbeMemory-v0", "--recurrent", "lstm", "--total-timesteps", "4096"],
    "selfplay-connect4": ["--config", PRESETS + "connect4-selfplay.json", "--total-timesteps", "8192", "--eval-every", "0"],
}  # fmt: skip
IGNORED_METRICS = ("time_s", "sps")


def export(commit: str | None, into: str) -> str:
    """The tree of ``commit`` (None: the work tree, tracked and untracked files) in ``into``."""
    os.makedirs(into)
    if commit is None:
        files = (
            subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard", "-z"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, files):
            if os.path.isfile(os.path.join(ROOT, name)):
                os.makedirs(os.path.join(into, os.path.dirname(name)), exist_ok=True)
                shutil.copy2(os.path.join(ROOT, name), os.path.join(into, name))
        return into
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def run_all(tree: str, out: str, extra: list[str], names: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": tree}  # the exported proxima, not the checkout's editable install
    for name in names:
        flags = RUNS[name]
        run_dir = os.path.join(out, name)
        cmd = [
            PYTHON,
            "-m",
            "proxima",  # the command at every commit
            "train",
            *flags,
            *extra,
            "--run-dir",
            run_dir,
            "--quiet",
            "--no-plot",
        ]
        result = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed in {tree}:\n{result.stderr}")


def metrics(path: str) -> list[dict]:
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in IGNORED_METRICS} for line in f]


def differences(a: str, b: str) -> list[str]:
    """The files of run ``a`` that differ from run ``b``'s; a batched run's (``--num-seeds``) are each seed's."""
    seeds = sorted(
        name for name in os.listdir(a) if name.startswith("seed") and os.path.isdir(os.path.join(a, name))
    )
    if seeds:
        return [
            f"{seed}/{name}"
            for seed in seeds
            for name in differences(os.path.join(a, seed), os.path.join(b, seed))
        ]
    found = []
    if metrics(os.path.join(a, "metrics.jsonl")) != metrics(os.path.join(b, "metrics.jsonl")):
        found.append("metrics.jsonl")
    for name in ("episodes.jsonl", "model.safetensors"):
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            if fa.read() != fb.read():
                found.append(name)
    return found


def settings_only(tmp: str) -> None:
    """Point RUNS at copies of their preset files without the presets' own metadata (``load_preset`` drops it
    before training), so that a commit from before a metadata key (``typical``) reads the same settings."""
    for flags in RUNS.values():
        for i, flag in enumerate(flags):
            if flag.startswith(PRESETS):
                with open(flag) as f:
                    data = {
                        k: v for k, v in json.load(f).items() if k not in ("description", "typical", "solve")
                    }
                flags[i] = os.path.join(tmp, os.path.basename(flag))
                with open(flags[i], "w") as f:
                    json.dump(data, f)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", help="the commit to compare against")
    parser.add_argument("other", nargs="?", default=None, help="another commit (default: the work tree)")
    parser.add_argument("--keep", default=None, help="keep every run's outputs under this directory")
    parser.add_argument("--other-flags", default="", help="train flags added to OTHER's runs only")
    parser.add_argument("--flags", default="", help="train flags added to both sides' runs")
    parser.add_argument(
        "--runs", nargs="+", choices=list(RUNS), default=list(RUNS), help="which runs (default: all)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings_only(tmp)
        root = args.keep or tmp
        outputs = {}
        for label, commit in (("base", args.base), ("other", args.other)):
            tree = export(commit, os.path.join(tmp, "tree-" + label))
            outputs[label] = os.path.join(root, label)
            flags = args.flags.split() + (args.other_flags.split() if label == "other" else [])
            run_all(tree, outputs[label], flags, args.runs)
        failed = False
        for name in args.runs:
            diff = differences(os.path.join(outputs["base"], name), os.path.join(outputs["other"], name))
            failed |= bool(diff)
            print(f"{name:30s} {'differs: ' + ', '.join(diff) if diff else 'identical'}")
    print(f"{args.base} vs {args.other or 'work tree'}: {'DIFFERENT' if failed else 'all identical'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
