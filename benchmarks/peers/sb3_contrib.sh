#!/usr/bin/env bash
# sb3-contrib's RecurrentPPO, set up OUTSIDE proxima's .venv for the side-by-side recurrent benchmark
# (benchmarks/recurrent.py --peer-python PEERS/sb3/venv/bin/python). Nothing of it enters the project.
#
#   benchmarks/peers/sb3_contrib.sh [PEERS_DIR]      # default /work/peers; torch pinned by constraints.txt
set -euo pipefail
peers=${1:-/work/peers}
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$peers/sb3"
mkdir -p "$dest"
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/python" -m pip install -q -c "$here/constraints.txt" torch==2.13.0 "gymnasium>=1.1" \
  "stable-baselines3>=2.4" "sb3-contrib>=2.4"
echo "sb3-contrib ready: $dest/venv/bin/python benchmarks/peers/sb3_recurrent_cartpole.py --seed 1"
