"""What a run's page costs: the time to write ``report.html`` and its size, for runs of 100k to 10M steps.

    .venv/bin/python benchmarks/report_cost.py

The runs are written the way training writes them (``tests/test_report.py``'s ``fake_run``: the default 512
steps per update, 12 episodes per update as CartPole's early episodes give), without training, so that a 10M-step
run's logs take seconds to make. Training rewrites its page every 30 s, or 50 times the page's cost apart when
that is longer (``proxima.run.callbacks.ReportPageWriter``): this table says what that costs a long run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proxima.run.report import write_report  # noqa: E402
from tests.test_report import fake_run  # noqa: E402


def main() -> None:
    print("| env steps | metrics lines | episodes | page write, s (best of 3) | page size, kB |")
    print("|---|---|---|---|---|")
    for steps in (100_000, 1_000_000, 10_000_000):
        with tempfile.TemporaryDirectory() as tmp:
            updates = steps // 512
            run = fake_run(
                os.path.join(tmp, "run"), updates=updates, episodes_per_update=12, spike_at=updates // 2
            )
            out = os.path.join(tmp, "report.html")
            times = []
            for _ in range(3):
                start = time.perf_counter()
                write_report([run], out)
                times.append(time.perf_counter() - start)
            print(
                f"| {steps:,} | {updates:,} | {12 * updates:,} | {min(times):.3f} | {os.path.getsize(out) / 1000:.0f} |"
            )


if __name__ == "__main__":
    main()
