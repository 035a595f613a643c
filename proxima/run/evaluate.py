"""Evaluation: complete episodes of a policy, on Gymnasium's own env or on any ``VecEnv`` during training."""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from proxima.base import seeding, trust
from proxima.base.errors import UserError
from proxima.base.files import EVAL_JSON, write_json
from proxima.base.spaces import space_to_json
from proxima.envs import VecEnv, make_envs
from proxima.envs.interface import Seeds, env_call, obs_layout
from proxima.envs.user import describe_env, load_env_factory, unknown_id_hint
from proxima.policy.networks import ActorCritic
from proxima.policy.protocol import Player
from proxima.policy.stacked import StackedPolicies
from proxima.run.agent import Agent

# An evaluation episode longer than this is taken for one that never ends (an env without a time limit).
EPISODE_STEP_LIMIT = 100_000


@torch.no_grad()
def run_episodes(
    model: Player,
    envs: VecEnv,
    episodes: int,
    *,
    deterministic: bool,
    seed: Seeds,
    name: str = "the env",
    quota: np.ndarray | None = None,
    generator: torch.Generator | None = None,
) -> np.ndarray:
    """Returns of exactly ``episodes`` complete episodes of ``model`` in ``envs``, ordered by env; sampled
    actions draw from ``generator`` (``action_generator``).

    Each env is given a fixed quota of episodes before it starts (``episode_quota``; or ``quota``, one count per
    env), so short episodes are not over-counted (taking the first N episodes to finish across envs would favour
    them). Observations are raw; the model normalizes them with its frozen statistics.
    """
    n = envs.num_envs
    quota = episode_quota(episodes, n) if quota is None else quota
    returns: list[list[float]] = [[] for _ in range(n)]
    missing = int(sum(quota))  # episodes still to finish (a plain count: no per-env check at every step)
    running = torch.zeros(n, dtype=torch.float64, device=envs.device)
    length = torch.zeros(n, dtype=torch.int64, device=envs.device)
    obs = env_call(envs.reset, seed=seed)
    # a recurrent agent carries its memory from step to step, zeroed where an episode starts
    memory = model.initial_memory(n, envs.device) if model.lstm is not None else None
    starts = torch.ones(n, device=envs.device)
    steps = 0
    while missing:
        if memory is None:
            actions = model.predict(obs, deterministic, generator)
        else:
            actions, memory = model.predict_recurrent(obs, starts, memory, deterministic, generator)
        step = env_call(envs.step, actions)
        score, done = step.stats()  # whole games with their raw scores (Atari: every life, no clipping)
        if memory is not None:
            starts = step.done.float()
        running += score
        length = (length + 1).masked_fill_(done, 0)
        steps += 1
        # no episode is longer than the steps played so far: the lengths are read only past the limit
        if steps > EPISODE_STEP_LIMIT and int(length.max()) > EPISODE_STEP_LIMIT:
            raise UserError(
                f"an episode of {name} went on for {EPISODE_STEP_LIMIT} steps without ending: it has no time limit; "
                "register it with max_episode_steps, or wrap it in gymnasium.wrappers.TimeLimit"
            )
        if done.any():
            for i in done.nonzero().flatten().tolist():
                if len(returns[i]) < quota[i]:
                    returns[i].append(float(running[i]))
                    missing -= 1
            running.masked_fill_(done, 0.0)
        obs = step.obs
    return np.array([r for env_returns in returns for r in env_returns])


def action_generator(seed: int, device: torch.device, deterministic: bool) -> torch.Generator | None:
    """The sampled actions' own stream for an evaluation seeded ``seed`` (apart from its envs' ``seed + i``),
    so that it repeats and leaves torch's global generator as it was; None where nothing is sampled."""
    return None if deterministic else torch.Generator(device).manual_seed(seeding.action_noise(seed))


def episode_quota(episodes: int, envs: int) -> np.ndarray:
    """How many of ``episodes`` each of ``envs`` envs plays: as even as can be, the first ones one more."""
    return np.array([episodes // envs + (i < episodes % envs) for i in range(envs)])


def evaluate(
    agent: Agent,
    episodes: int = 10,
    *,
    deterministic: bool = False,
    seed: int = 0,
    env_id: str | None = None,
    max_envs: int = 16,
    video_dir: str | None = None,
    video_episodes: int | None = None,
    env=None,
    env_kwargs: dict | None = None,
) -> np.ndarray:
    """Returns of exactly ``episodes`` complete episodes on Gymnasium's own implementation of the env, run in
    up to ``max_envs`` envs at once; with ``video_dir``, every episode env 0 plays is recorded there as an
    MP4 (through the env's rgb_array rendering).

    ``video_episodes``: record this many episodes (games, for several agents), env 0's first ones. The
    episodes then run on at most ``episodes // video_episodes`` envs, so that env 0 plays that many; envs
    seeded otherwise play other episodes, so the returns differ from those without it. A ``VectorEnv`` given
    keeps its count, and records at most env 0's share.

    The env is the agent's own (its id, with the ``env_kwargs`` or the factory it was trained with), or
    ``env``/``env_id``: another id, a class or function that returns a ``gymnasium.Env``, or a
    ``gymnasium.vector.VectorEnv`` (whose env count is then the number of envs). An id gets the agent's
    ``env_kwargs`` unless others are given (``{}``: none)."""
    if episodes < 1:
        raise UserError(f"episodes must be a positive integer, got {episodes}")
    if video_episodes is not None:
        if video_dir is None:
            raise UserError("video_episodes records episodes: give video_dir too")
        if not 1 <= video_episodes <= episodes:
            raise UserError(
                f"video_episodes must be from 1 to the {episodes} episodes played, got {video_episodes}"
            )
    if env is not None and env_id is not None:
        raise UserError("give the env once: as env= or as env_id=, not both")
    env = env if env is not None else env_id
    source, own = agent.env_source, env is None
    if own:  # the agent's own env, which agent.json may name code to make (docs/SECURITY.md)
        trust.check(agent.source, {"env_id": agent.env_id, "env_factory": source.get("env_factory")})
        env = agent.env_id
        if "env_factory" in source:
            env = load_env_factory(source["env_factory"], "the agent")
        elif env.startswith("object:"):
            raise UserError(
                f"the agent was trained on an env object ({env}), which it cannot make again; give it: "
                "evaluate(agent, env=...), or an id: proxima eval --env-id ID"
            )
    if env_kwargs is None and (own or isinstance(env, str)):
        env_kwargs = source.get("env_kwargs")  # another id too: re-registered under a module:ID, say
    env_id = env if isinstance(env, str) else describe_env(env)[0]
    n = env.num_envs if isinstance(env, gym.vector.VectorEnv) else min(episodes, max_envs)
    if video_episodes is not None and not isinstance(env, gym.vector.VectorEnv):
        n = min(n, max(1, episodes // video_episodes))  # env 0's share of the episodes is then video_episodes
    agents = agent.model.spec.agents
    per_game = 1 if agents is None else len(agents["names"])  # each agent's episode is one of the episodes
    n = -(-n // per_game)
    share = -(-episodes // (n * per_game))  # env 0's games: no stray start recorded after the last
    try:
        envs = make_envs(
            env,
            n,
            env_kwargs=env_kwargs,
            device=agent.device,
            video_dir=video_dir,
            backend="gymnasium" if agents is None else "auto",  # many agents: the backend that has the id
            video_episodes=share if video_episodes is None else min(video_episodes, share),
        )
    except UserError as e:
        if isinstance(env, str) and env == agent.env_id and str(e).startswith("unknown env id"):
            raise UserError(f"{e}{unknown_id_hint(env, source)}") from None
        raise
    try:
        if obs_layout(envs).describe() != agent.layout.describe():
            raise UserError(
                f"{env_id} has observations {_observations(obs_layout(envs))}, but the agent was trained on "
                f"observations {_observations(agent.layout)}"
            )
        if space_to_json(envs.single_action_space) != space_to_json(agent.action_space):
            raise UserError(
                f"{env_id} has actions {envs.single_action_space}, but the agent was trained on {agent.action_space}"
            )
        return run_episodes(
            agent.model,
            envs,
            episodes,
            deterministic=deterministic,
            seed=seed,
            name=env_id,
            generator=action_generator(seed, agent.device, deterministic),
        )
    finally:
        envs.close()


def save_evaluation(
    run_dir: str, returns: np.ndarray, *, deterministic: bool, seed: int, into: str = EVAL_JSON, **extra
) -> None:
    """``RUN_DIR/eval.json``: the last evaluation on Gymnasium's env (``proxima eval``), which ``proxima
    report`` shows; ``into``: another of the run's files (``proxima solve``'s ``solve.json``); ``extra`` adds
    keys (a threshold, the videos)."""
    write_json(
        os.path.join(run_dir, into),
        {
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "episodes": len(returns),
            "deterministic": deterministic,
            "seed": seed,
            "mean": float(returns.mean()),
            "std": float(returns.std()),
            "returns": [float(r) for r in returns],
            **extra,
        },
    )


def _observations(layout) -> str:
    if not layout.packed:
        return f"of shape {layout.shape}"
    mask = f", with its action mask from {layout.mask}" if layout.mask else ""
    return f"{layout.space}{mask}"


def deterministic_returns(
    models: list[ActorCritic],
    envs: Callable[[int], VecEnv],
    episodes: int,
    rows: int,
    seeds: list[int],
    name: str,
) -> list[np.ndarray]:
    """Each model's returns of ``episodes`` deterministic episodes on ``rows`` envs seeded ``seeds[j]`` + k, as
    ``run_episodes`` gives them for one model alone, from one vector env of all (``envs(n)`` makes one of
    ``n`` envs) and one stacked forward pass per step."""
    quota = episode_quota(episodes, rows)
    returns = run_episodes(
        StackedPolicies(models, rows),
        envs(len(models) * rows),
        episodes * len(models),
        deterministic=True,
        seed=[s + k for s in seeds for k in range(rows)],
        name=name,
        quota=np.tile(quota, len(models)),
    )
    return list(returns.reshape(len(models), episodes))
