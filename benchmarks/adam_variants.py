"""proxima's ``Adam`` (the function ``torch.optim.adam.adam(fused=True)``) against ``torch.optim.Adam`` (default,
``foreach=True``, ``fused=True``) on proxima's own update, in one process, interleaved; and the last of these with
``torch.nn.utils.clip_grad_norm_(foreach=True)`` called directly rather than through ``proxima.algo.optim.clip_grad_norm``
(the same call), so that row is torch's optimizer step whole.

Each repeat times ``--updates`` updates of each variant from the same model and the same rollout (native
CartPole-v1 at the default settings: 4 envs x 128 steps, 4 epochs of 4 minibatches, so 16 optimizer steps per
update), in a rotating order; the table gives the median time per update and its ratio to proxima's, and whether
the variant's weights after the updates are bit for bit proxima's. A fresh process also times what building the
first optimizer costs (``torch.optim`` imports ``torch._dynamo`` then; a fixed cost per process).

    .venv/bin/python benchmarks/adam_variants.py [--repeats 15] [--updates 5] [--preset cartpole-fast]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import time

import torch

from proxima.algo import update as update_module
from proxima.algo.advantages import estimate_advantages
from proxima.algo.optim import clip_grad_norm, make_adam
from proxima.algo.update import UpdateSettings, update
from proxima.envs import make_vec_env
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic
from proxima.run.config import resolve_args
from proxima.run.loop import network_spec
from proxima.run.rollout import RolloutCollector


def _torch_adam(**options):
    return lambda params, lr: torch.optim.Adam(params, lr=lr, eps=1e-5, **options)


def _torch_clip(params, max_norm):
    return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)


VARIANTS = {  # name: (optimizer, gradient clipping)
    "proxima Adam and clipping": (make_adam, clip_grad_norm),
    "torch.optim.Adam()": (_torch_adam(), clip_grad_norm),
    "torch.optim.Adam(foreach=True)": (_torch_adam(foreach=True), clip_grad_norm),
    "torch.optim.Adam(fused=True)": (_torch_adam(fused=True), clip_grad_norm),
    "the same, torch's clip_grad_norm_": (_torch_adam(fused=True), _torch_clip),
}

FIRST_BUILD = """
import time, torch
from proxima.algo.optim import make_adam
p = [torch.nn.Parameter(torch.ones(2))]
start = time.perf_counter()
{build}
print(time.perf_counter() - start)
"""


def setup(preset: str | None):
    args = resolve_args(config=preset, env_backend="native") if preset else resolve_args(env_backend="native")
    args = args.validate()
    env, algo, seed = args.env, args.algorithm, args.run.seed
    envs = make_vec_env(env.env_id, env.num_envs, backend="native", seed=seed)
    torch.manual_seed(seed)
    model = ActorCritic(network_spec(args, envs), make_head(envs.single_action_space))
    collector = RolloutCollector(envs, algo.num_steps, algo.gamma, model, seed=seed)
    next_value, next_done = collector.collect(model)
    buf = collector.buffer
    advantages = estimate_advantages(
        algo.advantage, buf.rewards, buf.values, buf.dones, next_value, next_done, algo.gamma, algo.gae_lambda
    )
    return args, model, buf.flatten(advantages, advantages + buf.values), UpdateSettings.from_args(args)


def run(variant, args, model, batch, settings, updates: int) -> tuple[float, list[torch.Tensor]]:
    make, update_module.clip_grad_norm = variant
    model = copy.deepcopy(model)
    optimizer = make(
        model.param_groups(args.algorithm.learning_rate, args.algorithm.value_learning_rate),
        args.algorithm.learning_rate,
    )
    generator = torch.Generator().manual_seed(0)  # the same minibatch order for every variant
    start = time.perf_counter()
    for _ in range(updates):
        update(model, optimizer, batch, settings, generator)
    return (time.perf_counter() - start) / updates, [p.detach().clone() for p in model.parameters()]


def first_build_s(build: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", FIRST_BUILD.format(build=build)], capture_output=True, text=True
    )
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--updates", type=int, default=5, help="updates per timed run")
    parser.add_argument("--preset", default=None, help="a preset's settings instead of the defaults")
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    args, model, batch, settings = setup(options.preset)
    names = list(VARIANTS)
    times: dict[str, list[float]] = {name: [] for name in names}
    identical = dict.fromkeys(names, True)
    for repeat in range(options.repeats + 1):  # the first round warms up and is not counted
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        weights = {}
        for name in order:
            seconds, weights[name] = run(VARIANTS[name], args, model, batch, settings, options.updates)
            if repeat:
                times[name].append(seconds)
        for name in names:
            same = all(torch.equal(a, b) for a, b in zip(weights[name], weights[names[0]], strict=True))
            identical[name] &= same
    base = statistics.median(times[names[0]])
    print(f"torch {torch.__version__}, {options.threads} thread(s), {options.repeats} repeats x {options.updates} "
          f"updates of {len(batch)} samples ({settings.update_epochs} epochs x {settings.num_minibatches} "
          "minibatches)")  # fmt: skip
    print(f"{'variant':36} {'ms/update':>10} {'ratio':>7}  weights as proxima's")
    update_module.clip_grad_norm = clip_grad_norm
    for name in names:
        median = statistics.median(times[name])
        print(
            f"{name:36} {1e3 * median:10.2f} {median / base:7.3f}  {'identical' if identical[name] else 'DIFFER'}"
        )
    builds = {
        "proxima make_adam": "make_adam(p, 1e-3)",
        "torch.optim.Adam(fused=True)": "torch.optim.Adam(p, lr=1e-3, fused=True)",
    }
    for name, build in builds.items():
        print(f"first optimizer built in a fresh process, {name}: {first_build_s(build):.3f} s")


if __name__ == "__main__":
    main()
