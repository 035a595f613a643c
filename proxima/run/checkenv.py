"""``proxima check-env ENV_ID`` (or ``--env-factory module:name``): will proxima train on this env, and what will
it make of it?

Runs proxima's own checks (those the Gymnasium backend makes before a run: the step API, the observation
layout and its mask, an encoder and a head for the spaces), then some random steps through the backend a run
would use, then Gymnasium's ``check_env``. Gymnasium's checker is stricter than proxima needs (an observation a
little outside its Box trains fine): what it finds is a warning. What proxima cannot train on is a problem, each
in one line, and the exit status is 2.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import torch

from proxima.base.errors import EnvError, UserError, raised
from proxima.base.spaces import MASK_KEY
from proxima.envs import make_envs
from proxima.envs.gymnasium_backend import EnvMaker, MaskMethod, check_step_api, find_obs_layout
from proxima.envs.interface import agent_spec, obs_layout
from proxima.envs.registry import resolve_backend
from proxima.envs.user import describe_env, factory_backend
from proxima.policy.distributions import make_head
from proxima.policy.encoders import check_spaces, encoder_for

RANDOM_STEPS = 200  # per env, through the backend, with random actions


def _time_limit(env: gym.Env) -> int | None:
    """The step limit of a TimeLimit wrapper in ``env``'s chain (``gym.make`` adds one for an id registered
    with ``max_episode_steps``; a factory may wrap its env in its own), else the spec's."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return env._max_episode_steps
        env = env.env
    return env.spec.max_episode_steps if env.spec is not None else None


def check_env(
    source, env_kwargs: dict | None = None, num_envs: int = 4
) -> tuple[list[str], list[str], list[str]]:
    """``(report, warnings, problems)``: lines saying what proxima will do with ``source`` (an id, or a class or
    function that makes one env, as ``--env-factory`` and ``train(env=...)`` take), what Gymnasium's checker
    found, and why proxima cannot train on it (empty: it will train)."""
    if isinstance(source, gym.vector.VectorEnv):
        raise UserError(
            "check_env takes an env id, or a class or function that makes one env; not a VectorEnv"
        )
    if isinstance(source, str):
        env_id, factory = source, None
        backend = resolve_backend(source, num_envs=num_envs, env_kwargs=bool(env_kwargs))
    else:
        env_id, factory = describe_env(source)[0], source
        backend = factory_backend(source, env_kwargs)
    if backend not in ("gymnasium", "native"):  # a backend of its own: what its vector env says
        return _own_backend(source, env_id, env_kwargs, backend, num_envs)
    env = EnvMaker(env_id, env_kwargs or {}, factory)(checked=True)  # a bad id or constructor: one line
    try:
        limit = _time_limit(env)
        report = [
            f"observation space: {env.observation_space}",
            f"action space: {env.action_space}",
            f"time limit: {limit} steps (truncated episodes bootstrap from V(final_obs))"
            if limit
            else "time limit: none: episodes end only when the env says so",
        ]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                infos = check_step_api(env, env_id)
            layout = find_obs_layout(env_id, env, *infos)
            check_spaces(layout, env.action_space)
        except (UserError, EnvError) as e:
            return report, [], [str(e)]
        except Exception as e:  # the env's own reset or step raised
            return report, [], [f"{env_id} raised {raised(e)}"]
        masks = "action_masks()" if isinstance(env, MaskMethod) and env.supplied else None
        report += [
            *_observations(layout, masks),
            f"action head: {type(make_head(env.action_space)).__name__}",
            f"backend: {backend} (auto's choice at {num_envs} envs; --env-backend picks another)",
        ]
        problems, end_keys = _random_steps(source, env_id, env_kwargs, backend, num_envs)
        found = _gymnasium_check(env)  # what Gymnasium's checker says
    finally:
        env.close()
    return report + _info_keys(end_keys), found, problems


def _own_backend(env, env_id: str, env_kwargs: dict | None, backend: str, num_envs: int):
    """``check_env``'s answer for an env (``env_id``: its name) that a backend other than Gymnasium's runs: a
    game of many agents (docs/MULTIAGENT.md), or one agent's env such as a self-play game, from what its vector
    env says."""
    envs = make_envs(env, num_envs, backend=backend, seed=0, env_kwargs=env_kwargs)
    try:
        agents, layout = agent_spec(envs), obs_layout(envs)
        if agents is None:
            report = [
                f"observation space: {envs.single_observation_space}",
                f"action space: {envs.single_action_space}",
                *_observations(layout),
                f"backend: {backend} (the only one that runs {env_id})",
            ]
        else:
            sizes = {p.name: p.size for p in layout.parts}
            report = [
                f"backend: {backend}: {agents.num_agents} agents a game ({', '.join(agents.names)}), "
                f"{agents.num_kinds} kind(s) (one network each); {num_envs} games are {envs.num_envs} rows"
                + ("; turn-based: one agent moves at a time, the others wait" if agents.turns else ""),
                f"each agent observes {sizes['obs']} values (its own, padded to the largest kind's) and its "
                f"index; MAPPO's critic sees a global state of {sizes['state']}",
                f"action space: {envs.single_action_space}"
                + (", with per-agent action masks" if layout.mask_part is not None else ""),
            ]
    finally:
        envs.close()
    problems, end_keys = _random_steps(env, env_id, env_kwargs, backend, num_envs)
    return report + _info_keys(end_keys), [], problems


def _observations(layout, mask_origin: str | None = None) -> list[str]:
    """The report's lines of what the observations become, and the encoder they go through."""
    mask = f", action mask from {mask_origin or layout.mask}" if layout.mask else ""
    packed = f"packed into one vector of {layout.shape[0]}" if layout.packed else "as they are"
    return [f"observations: {packed}{mask}", f"encoder: {encoder_for(layout)} (--encoder picks another)"]


def _info_keys(end_keys: list[str] | None) -> list[str]:
    """The report's line of what --log-info and a callback's info_keys can ask for (none: no line)."""
    return [] if end_keys is None else [f"info keys at an episode's end: {', '.join(end_keys) or 'none'}"]


def _random_steps(
    env, env_id: str, env_kwargs: dict | None, backend: str, num_envs: int
) -> tuple[list[str], list[str] | None]:
    """Problems seen in ``RANDOM_STEPS`` random steps of ``env`` (``env_id``: its name) through the backend a
    run would use, and the info keys of the episodes that ended in them (None where the backend reports no
    info, or no episode ended)."""
    try:
        envs = make_envs(env, num_envs, backend=backend, seed=0, env_kwargs=env_kwargs)
    except (UserError, EnvError) as e:
        return [str(e)], None
    ended, keys = 0, set[str]()
    try:
        if hasattr(envs, "keep_infos"):
            envs.keep_infos("all")
        obs = envs.reset(seed=0)
        space, mask = envs.single_action_space, obs_layout(envs).mask_part
        # an env with an action mask may refuse a masked action (a board game's illegal move): draw valid ones
        masked = mask if isinstance(space, gym.spaces.Discrete) else None
        for t in range(RANDOM_STEPS):
            if masked is not None:
                # a row with no legal move draws among all, as the policy's masked logits would
                legal = obs[:, masked.span] > 0
                legal |= ~legal.any(1, keepdim=True)
                actions = torch.multinomial(legal.float(), 1).squeeze(1)
            else:  # a row each: an agent of many; as indices, to which the envs add a Discrete's start
                drawn = np.stack([space.sample() for _ in range(envs.num_envs)])
                actions = torch.as_tensor(drawn - getattr(space, "start", 0))
            step = envs.step(actions)
            obs = step.obs
            for name, value in (("observation", step.obs), ("reward", step.reward)):
                if value.is_floating_point() and not torch.isfinite(value).all():
                    return [
                        f"{env_id} gave a non-finite {name} (NaN or infinity) at random step {t + 1}"
                    ], None
            for info in (step.infos or {}).values():
                ended, keys = ended + 1, keys | {str(k) for k in info}
    except (UserError, EnvError) as e:
        return [str(e)], None
    except Exception as e:
        return [f"{env_id} raised {raised(e)} within {RANDOM_STEPS} random steps"], None
    finally:
        envs.close()
    return [], sorted(keys - {MASK_KEY}) if ended else None


def _gymnasium_check(env: gym.Env) -> list[str]:
    """Gymnasium's ``check_env`` on the unwrapped env, as its docs advise: its failure and its warnings, a line each."""
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gymnasium_check_env(env.unwrapped, skip_render_check=True)
        except Exception as e:
            lines.append(f"Gymnasium's check_env failed: {_one_line(e)}")
    for w in caught:
        text = _one_line(w.message)
        if text and text not in lines:
            lines.append(text)
    return lines


def _one_line(message) -> str:
    text = " ".join(str(message).split())
    return text.removeprefix("\x1b[33mWARN: ").removesuffix("\x1b[0m")
