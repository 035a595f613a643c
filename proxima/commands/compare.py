"""``proxima compare``: train several algorithms over several seeds and plot their learning curves."""

from __future__ import annotations

from proxima.base.errors import TrainingInterrupted
from proxima.commands.common import flag_value, interrupted, parse_command, print_results, sets_itself

COMPARE_ABOUT = """Trains every algorithm of --algos with every seed on one env, each as an ordinary `proxima train`
run in its own directory under the output directory (a sweep over the algorithms: Ray Tune trials where Ray is
installed), then writes a table of the final returns over seeds per algorithm with their IQM and its 95% CI
(results.md), the learning curves with bands (learning_curves.png) and results.json. Exit status 1 if a run
failed or did not run."""


def run(argv: list[str]) -> int:
    from proxima.scale.compare import TOTAL_TIMESTEPS, CompareFlags, check_algos, compare
    from proxima.scale.sweeps import default_output_dir

    flags, _ = parse_command(argv, "proxima compare", CompareFlags, description=COMPARE_ABOUT)
    sets_itself(argv, "compare", {"--algo": "--algos", "--seed": "--seeds", "--run-dir": "--output-dir"})
    check_algos(flags.algos)
    if flag_value(argv, "--total-timesteps") is None and flag_value(argv, "--config") is None:
        argv = ["--total-timesteps", str(TOTAL_TIMESTEPS), *argv]
    settings = [
        (algo, parse_command([*argv, "--algo", algo], "proxima compare", CompareFlags)[1])
        for algo in flags.algos
    ]
    out = flags.output_dir or default_output_dir(settings[0][1].env.env_id, "compare")
    try:
        return print_results(compare(flags, settings, out), "compare")
    except TrainingInterrupted as e:  # a comparison is a sweep: it finishes as one
        return interrupted(e, "compare", out)
