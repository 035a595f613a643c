#!/usr/bin/env bash
# BenchMARL (MAPPO and IPPO on VMAS), set up OUTSIDE proxima's .venv for the side-by-side multi-agent benchmark
# (benchmarks/peers/benchmarl_vmas.py). Nothing of it enters the project. Never run by `make test`.
#
#   benchmarks/peers/benchmarl.sh [PEERS_DIR]      # default /work/peers; torch pinned by constraints.txt
#
# BenchMARL 1.5.2 is the newest release; it requires torchrl>=0.10,<0.12, so torchrl 0.11.1 and its tensordict
# 0.11.0. torch stays proxima's 2.13.0 CPU build (a bare torch requirement would pull a multi-GB CUDA build), and
# torchvision (a BenchMARL requirement, unused on VMAS) its matching 0.28.0. torchrl 0.11.1's C++ extension
# (_torchrl: the segment trees of prioritized replay buffers) was built for an older torch and does not load
# against 2.13 (an undefined symbol); torchrl then goes on without it, and nothing that BenchMARL's MAPPO and
# IPPO use needs it (collectors, GAE, ClipPPOLoss, the MLPs). tensordict's extension loads.
set -euo pipefail
peers=${1:-/work/peers}
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$peers/benchmarl"
mkdir -p "$dest"
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/python" -m pip install -q -c "$here/constraints.txt" torch==2.13.0 torchvision==0.28.0 \
  benchmarl==1.5.2 torchrl==0.11.1 tensordict==0.11.0 vmas==1.5.2
if "$dest/venv/bin/python" -m pip list 2>/dev/null | grep -qiE '^nvidia-|^triton '; then
  echo "benchmarl.sh: CUDA wheels were pulled in; torch must stay the CPU build" >&2
  exit 1
fi
echo "BenchMARL ready: $dest/venv/bin/python benchmarks/peers/benchmarl_vmas.py --task navigation --algo mappo --seeds 0"
