#!/usr/bin/env bash
# PureJaxRL's PPO (ppo.py, ppo_continuous_action.py, wrappers.py), set up OUTSIDE proxima's .venv for the
# side-by-side classic-control benchmark (benchmarks/peers/purejaxrl_solve.py). Nothing of PureJaxRL enters
# the project: this script copies its three files into $PEERS/purejaxrl/src and patches them there; CPU jax,
# flax, optax, distrax and gymnax go into $PEERS/purejaxrl/venv. Never run by `make test`.
#
#   benchmarks/peers/purejaxrl.sh [PUREJAXRL_CHECKOUT] [PEERS_DIR]   # PEERS_DIR default /work/peers
#
# PUREJAXRL_CHECKOUT: a clone of github.com/luchris429/purejaxrl (measured at 31756b19), or a bare git dir
# (default: the search tool's fetch mirror, /work/.mirror/luchris429+purejaxrl/repo).
# Then: $PEERS/purejaxrl/venv/bin/python benchmarks/peers/purejaxrl_solve.py --tasks CartPole-v1 --seeds 1
#
# The patch, and why (the algorithm is untouched):
#   1. wrappers.py: `from brax ...` and `import navix` are wrapped in try/except ImportError. They are needed
#      only by BraxGymnaxWrapper / NavixGymnaxWrapper, and brax (with mujoco) and navix are not installed.
#   2. ppo_continuous_action.py builds its env with BraxGymnaxWrapper only. For a gymnax id (Pendulum-v1,
#      MountainCarContinuous-v0) it now uses gymnax.make(ENV_NAME) with the same LogWrapper/ClipAction/VecEnv/
#      Normalize* stack, and ClipAction clips to the env's own action bounds (Pendulum: [-2, 2]) instead of the
#      Brax default [-1, 1] (the upstream TODO in ClipAction says the same). Brax ids keep the upstream path.
set -euo pipefail
src=${1:-/work/.mirror/luchris429+purejaxrl/repo}
peers=${2:-/work/peers}
dest="$peers/purejaxrl"
mkdir -p "$dest/src"
show() {  # a file from a work tree or a bare git dir
  if [ -f "$src/$1" ]; then cat "$src/$1"; else git --git-dir="$src" show "HEAD:$1"; fi
}
for f in ppo.py ppo_continuous_action.py wrappers.py; do
  show "purejaxrl/$f" > "$dest/src/$f"
done
python3 - "$dest/src" <<'PY'
import sys
d = sys.argv[1]

def patch(name, old, new):
    path = f"{d}/{name}"
    s = open(path).read()
    assert old in s, f"{name} changed upstream: update the patch"
    open(path, "w").write(s.replace(old, new, 1))

patch("wrappers.py",
      "from brax import envs\nfrom brax.envs.wrappers.training import EpisodeWrapper, AutoResetWrapper\n"
      "import navix as nx\n",
      "try:  # patched: brax/navix are optional (only BraxGymnaxWrapper/NavixGymnaxWrapper need them)\n"
      "    from brax import envs\n    from brax.envs.wrappers.training import EpisodeWrapper, AutoResetWrapper\n"
      "except ImportError:\n    envs = None\n"
      "try:\n    import navix as nx\nexcept ImportError:\n    nx = None\n")
patch("ppo_continuous_action.py", "import distrax\n", "import distrax\nimport gymnax  # patched\n")
patch("ppo_continuous_action.py",
      '    env, env_params = BraxGymnaxWrapper(config["ENV_NAME"]), None\n'
      "    env = LogWrapper(env)\n    env = ClipAction(env)\n",
      '    if config["ENV_NAME"] in gymnax.registered_envs:  # patched: gymnax ids, clip to their own bounds\n'
      '        env, env_params = gymnax.make(config["ENV_NAME"])\n'
      "        space = env.action_space(env_params)\n"
      "        env = LogWrapper(env)\n        env = ClipAction(env, low=space.low, high=space.high)\n"
      "    else:\n"
      '        env, env_params = BraxGymnaxWrapper(config["ENV_NAME"]), None\n'
      "        env = LogWrapper(env)\n        env = ClipAction(env)\n")
PY
if [ ! -x "$dest/venv/bin/python" ]; then
  python3.11 -m venv "$dest/venv"
fi
# jax 0.10.2 CPU wheels; distrax 0.1.9 requires tfp-nightly. gymnax stays at 0.0.9: 1.0 changed env.step to
# Gymnasium's 6-tuple (terminated, truncated), which PureJaxRL's wrappers and make_train do not unpack.
"$dest/venv/bin/python" -m pip install -q "jax[cpu]==0.10.2" jaxlib==0.10.2 flax==0.12.8 optax==0.2.8 \
  distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 chex==0.1.92 gymnax==0.0.9 numpy==2.4.6
echo "PureJaxRL ready: $dest/venv/bin/python benchmarks/peers/purejaxrl_solve.py --tasks CartPole-v1 --seeds 1"
