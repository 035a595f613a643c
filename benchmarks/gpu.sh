#!/bin/bash
# proxima on a lent GPU machine, whose image has PyTorch but not Gymnasium, ale-py, tyro or VMAS, and reaches no
# package registry. Those travel as Python 3.12 wheels in the checkout's ignored .whl/, made here with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#       gymnasium==1.4.0 ale-py==0.12.1 tyro==1.0.17 docstring_parser==0.18.0 Farama-Notifications==0.0.6 \
#       typeguard==4.6.1 shtab pettingzoo==1.27.0 gym-notices==0.0.8 pyglet==1.5.27
#   python3 -m pip wheel --no-deps -w .whl vmas==1.5.2 gym==0.26.2     # source-only on PyPI; pure Python
# and proxima runs from the checkout through PYTHONPATH.
#
#   benchmarks/gpu.sh check          # GPU facts, raw CartPole rate, a phase-split Atari loop of 30,720 steps
#   benchmarks/gpu.sh tests          # every CUDA test (the ones CI and the development machines skip)
#   benchmarks/gpu.sh seeds DIR [N..] # many seeds on the GPU (issue 36): benchmarks/num_seeds.py, cartpole-fast,
#                                    # batched, --cuda, N seeds (default 1 16 64); its record goes into DIR
#   benchmarks/gpu.sh profile DIR [N..] # cProfile of cartpole-fast with N seeds (default 1 16 64), on the GPU and
#                                    # (N <= 16) on the host's CPU, 32,768 steps each, no early stop: DIR/*.pstats
#   benchmarks/gpu.sh start [SEED]   # the 10M-step Breakout run, detached (setsid), into /tmp/breakout10m-SEED
#   benchmarks/gpu.sh resume DIR     # continue a run brought back (its checkpoint.safetensors rejoined)
#   benchmarks/gpu.sh wait SECONDS   # until the run ends or SECONDS pass, then its progress
#   benchmarks/gpu.sh stop           # Ctrl-C the run: it writes a checkpoint and exits
#   benchmarks/gpu.sh pack DIR       # the run (no TensorBoard events) as DIR/RUN.tar.gz, its checkpoint
#                                    # cut into 12 MB parts (a file comes back only under 16 MiB)
set -u
if [ ! -d /tmp/site/gymnasium ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
# Bytecode goes to one writable place: else, where the image's packages are read-only, every process compiles
# its imports again (seconds). The first process to import a module writes it.
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pycache
unset PYTHONDONTWRITEBYTECODE
proxima() { python3 -c 'import sys; from proxima.commands import main; sys.exit(main())' "$@"; }
progress() {
    python3 - "$1" <<'EOF'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
lines = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
if lines:
    last = json.loads(lines[-1])
    print(f"step {last['global_step']:,}, {last['time_s']:.0f} s, {last['sps']:.0f} steps/s")
games = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()] if (run / "episodes.jsonl").exists() else []
if games:
    last20 = [g.get("return", g.get("score")) for g in games[-20:]]
    print(f"{len(games)} games; mean of the last {len(last20)}: {sum(last20) / len(last20):.1f}")
EOF
}
case "$1" in
check)
    nvidia-smi -L; nproc; python3 -c 'import torch; print("torch", torch.__version__)'
    python3 -c 'from benchmarks.reference import raw_cartpole_sps as r; print(f"raw CartPole (SyncVectorEnv of 4, random actions): {r():,.0f} steps/s")'
    python3 benchmarks/atari_throughput.py loop --steps 30720 --cuda
    ;;
tests)
    # the files that hold CUDA tests, by name: collecting all of tests/ would import Ray, which does not travel
    python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py tests/test_resume.py tests/test_num_seeds.py \
        tests/test_vmas_backend.py tests/test_multiagent.py -k "cuda or gpu" --tb=short 2>&1
    ;;
seeds)
    out=$2; shift 2
    python3 benchmarks/num_seeds.py --presets cartpole-fast --ways batched --num-seeds ${@:-1 16 64} \
        --record "$out" -- --cuda
    ;;
profile)
    out=$2; shift 2
    python3 -c 'from benchmarks.reference import raw_cartpole_sps as r; print(f"raw CartPole: {r():,.0f} steps/s")'
    for n in ${@:-1 16 64}; do
        for dev in cuda no-cuda; do
            [ "$dev" = no-cuda ] && [ "$n" -gt 16 ] && continue
            start=$SECONDS
            python3 -m cProfile -o "$out/seeds$n-$dev.pstats" -m proxima train --config cartpole-fast --seed 1 \
                --num-seeds "$n" --total-timesteps 32768 --stop-return 100000 --run-dir "/tmp/profile-$n-$dev" \
                --quiet --no-plot --no-report "--$dev" || exit 1
            echo "$n seeds, --$dev: $((SECONDS - start)) s"
        done
    done
    ;;
start)
    seed=${2:-1}
    setsid nohup bash -c "$(declare -f proxima); export PYTHONPATH=$PYTHONPATH; proxima train --config atari --cuda --seed $seed --quiet --run-dir /tmp/breakout10m-$seed" \
        >/tmp/breakout10m-$seed.log 2>&1 </dev/null &
    sleep 20; cat /tmp/breakout10m-$seed.log
    ;;
resume)
    run=/tmp/$(basename "$2")
    [ "$(realpath "$2")" = "$run" ] || cp -r "$2" "$run"
    setsid nohup bash -c "$(declare -f proxima); export PYTHONPATH=$PYTHONPATH; proxima train --resume $run --quiet" \
        >"$run.log" 2>&1 </dev/null &
    sleep 20; cat "$run.log"
    ;;
stop)
    # the runs' own command lines (python3 -c '...proxima.commands import main...' train ... --run-dir /tmp/breakout10m-*)
    pkill -INT -f "proxima.commands import main.*breakout10m" && while pgrep -f "proxima.commands import main.*breakout10m" >/dev/null; do sleep 1; done
    tail -2 /tmp/breakout10m-*.log
    ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ] && pgrep -f "breakout10m" >/dev/null; do sleep 5; done
    for run in /tmp/breakout10m-*/; do echo "$run"; progress "$run"; done; tail -3 /tmp/breakout10m-*.log
    ;;
pack)
    for run in /tmp/breakout10m-*/; do
        name=$(basename "$run")
        tar -czf "$2/$name.tar.gz" -C /tmp --exclude='*.tfevents*' --exclude=checkpoint.safetensors "$name"
        [ ! -f "$run/checkpoint.safetensors" ] || split -b 12M "$run/checkpoint.safetensors" "$2/$name.checkpoint.part."
    done
    ls -la "$2"
    ;;
esac
