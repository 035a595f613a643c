#!/usr/bin/env bash
# Stable-Baselines3 PPO with the rl-baselines3-zoo's tuned hyperparameters, set up OUTSIDE proxima's .venv for
# the side-by-side solve benchmark (benchmarks/solve_suite.py on proxima's side). Nothing of it enters the
# project; it shares the venv of sb3_contrib.sh and adds Box2D (LunarLander, BipedalWalker).
#
#   benchmarks/peers/sb3_zoo.sh [PEERS_DIR]      # default /work/peers; torch pinned by constraints.txt
set -euo pipefail
peers=${1:-/work/peers}
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$peers/sb3"
mkdir -p "$dest"
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/python" -m pip install -q -c "$here/constraints.txt" torch==2.13.0 "gymnasium[box2d]>=1.1" \
  "stable-baselines3>=2.4" "sb3-contrib>=2.4"
echo "sb3 zoo PPO ready: $dest/venv/bin/python benchmarks/peers/sb3_zoo_solve.py --tasks CartPole-v1 --seeds 1 2 3 4 5"
