"""A try, not a feature: IPPO on VMAS navigation at BenchMARL's published settings (the journal's side by side,
issue 35) with every ``nn.Linear`` computing under bf16 autocast, against float32, for the wall time and the
learning curve of the same seed.

    .venv/bin/python benchmarks/vmas_bf16_try.py bf16|fp32 RUN_DIR [--frames 180000] [--algo ippo]

proxima's ``--precision`` covers CNN encoders only; this script patches ``nn.Linear.forward`` in its own process
(the products in bf16, the outputs back to float32, weights and Adam in float32) to see what wiring it in for MLPs
would buy before doing so. It pays only on CPUs that multiply bf16 natively (AVX512-BF16 or AMX).
"""

from __future__ import annotations

import argparse
import time

import torch

from proxima.commands import main as proxima

# benchmarks/peers/benchmarl_vmas.py's settings, as proxima's flags express them (the journal lists what differs)
SETTINGS = (
    "--num-envs 600 --num-steps 100 --update-epochs 45 --num-minibatches 15 --learning-rate 5e-5 --no-anneal-lr "
    "--max-grad-norm 5 --clip-coef 0.2 --ent-coef 0 --gamma 0.9 --gae-lambda 0.9 --vf-coef 1 --no-norm-adv "
    "--no-norm-value --hidden-sizes 256 256 --activation tanh --no-plot --no-report --quiet"
)


def bf16_linears() -> None:
    plain = torch.nn.Linear.forward

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return plain(self, x).float()

    torch.nn.Linear.forward = forward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["bf16", "fp32"])
    parser.add_argument("run_dir")
    parser.add_argument("--frames", type=int, default=180_000)
    parser.add_argument("--algo", default="ippo", choices=["ippo", "mappo"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "bf16":
        bf16_linears()
    flags = ["train", "--env-id", "vmas:navigation", "--algo", args.algo, "--total-timesteps", str(args.frames),
             "--seed", str(args.seed), *SETTINGS.split(), "--run-dir", args.run_dir]  # fmt: skip
    start = time.perf_counter()
    status = proxima(flags)
    print(
        f"{args.mode}: exit {status}, {time.perf_counter() - start:.1f} s; metrics in {args.run_dir}/metrics.jsonl"
    )


if __name__ == "__main__":
    main()
