#!/usr/bin/env bash
# Stable-Baselines3 PPO with the rl-baselines3-zoo's tuned hyperparameters, set up OUTSIDE proxima's .venv for
# the side-by-side solve benchmark (benchmarks/solve_suite.py on proxima's side). Nothing of it enters the
# project: it is sb3_contrib.sh's venv, plus Box2D (LunarLander, BipedalWalker).
#
#   benchmarks/peers/sb3_zoo.sh [PEERS_DIR]      # default /work/peers; torch pinned by constraints.txt
set -euo pipefail
peers=${1:-/work/peers}
here=$(cd "$(dirname "$0")/../.." && pwd)
"$here/benchmarks/peers/sb3_contrib.sh" "$peers"
"$peers/sb3/venv/bin/python" -m pip install -q -c "$here/constraints.txt" torch==2.13.0 "gymnasium[box2d]>=1.1"
echo "sb3 zoo PPO ready: $peers/sb3/venv/bin/python benchmarks/peers/sb3_zoo_solve.py --tasks CartPole-v1 --seeds 1 2 3 4 5"
