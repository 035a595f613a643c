#!/usr/bin/env bash
# CleanRL's ppo_atari.py, set up OUTSIDE proxima's .venv for the side-by-side Atari benchmark
# (benchmarks/atari_throughput.py). Nothing of CleanRL enters the project: this script copies its two files
# into $PEERS/cleanrl and patches them there for Gymnasium 1.x.
#
#   benchmarks/peers/cleanrl_atari.sh CLEANRL_CHECKOUT [PEERS_DIR]
#
# CLEANRL_CHECKOUT: a clone of github.com/vwxyzjn/cleanrl (measured at fe8d8a03), or a bare git dir.
# The patch, and why:
#   1. `import ale_py; gym.register_envs(ale_py)`: Gymnasium 1.x no longer finds the ALE ids by itself.
#   2. GrayScaleObservation -> GrayscaleObservation, FrameStack -> FrameStackObservation: renamed in 1.x.
#   3. Episode logging reads infos["episode"] with its "_episode" mask: 1.x has no "final_info" list in the
#      default (next-step) autoreset mode. Logging only; the algorithm is untouched.
set -euo pipefail
src=${1:?give a CleanRL checkout}
peers=${2:-/work/peers}
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$peers/cleanrl"
mkdir -p "$dest/cleanrl_utils"
show() {  # a file from a work tree or a bare git dir
  if [ -f "$src/$1" ]; then cat "$src/$1"; else git --git-dir="$src" show "HEAD:$1"; fi
}
show cleanrl/ppo_atari.py > "$dest/ppo_atari.py"
show cleanrl_utils/atari_wrappers.py > "$dest/cleanrl_utils/atari_wrappers.py"
touch "$dest/cleanrl_utils/__init__.py"
python3 - "$dest/ppo_atari.py" <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
s = s.replace("import gymnasium as gym\n", "import ale_py\nimport gymnasium as gym\n\ngym.register_envs(ale_py)\n", 1)
s = s.replace("gym.wrappers.GrayScaleObservation(", "gym.wrappers.GrayscaleObservation(")
s = s.replace("gym.wrappers.FrameStack(env, 4)", "gym.wrappers.FrameStackObservation(env, 4)")
old = '''            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
                        writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
                        writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)'''
new = '''            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    print(f"global_step={global_step}, episodic_return={infos['episode']['r'][i]}")
                    writer.add_scalar("charts/episodic_return", infos["episode"]["r"][i], global_step)
                    writer.add_scalar("charts/episodic_length", infos["episode"]["l"][i], global_step)'''
assert old in s, "ppo_atari.py changed upstream: update the patch"
s = s.replace(old, new)
open(path, "w").write(s)
PY
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/python" -m pip install -q -c "$here/constraints.txt" torch==2.13.0 "gymnasium>=1.1" "ale-py>=0.11" \
  opencv-python-headless tensorboard tyro
echo "CleanRL ready: cd $dest && venv/bin/python ppo_atari.py --no-cuda --total-timesteps 20480"
