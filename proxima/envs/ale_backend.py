"""The ``ale`` backend: ale-py's own multithreaded C++ vector env (``ale_py.vector_env.AtariVectorEnv``).

It steps all games in C++ threads and does the whole preprocessing of ``proxima.envs.atari`` there, with the
observation written straight into one ``(N, 4, 84, 84)`` uint8 array: no Python wrapper runs per game or per
frame. It is ``auto``'s choice for ALE ids; video and ``--async-envs`` fall back to the Gymnasium wrappers.

Two things are done here rather than in C++: rewards are clipped from the raw score, which the statistics
need; and a termination is told apart as a lost life or the game's end by the lives counter, which the C++
env reports after its same-step reset (a new game has all its lives back).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import Tensor

from proxima.base.errors import UserError
from proxima.base.spaces import ObsLayout

# Registered after Gymnasium's backend, so that `auto` prefers this one for ALE ids and falls back to the
# Gymnasium wrappers for what it cannot do (video, --async-envs).
from proxima.envs import gymnasium_backend  # noqa: F401
from proxima.envs.atari import FRAME_SKIP, NOOP_MAX, SIZE, STACK, atari_game
from proxima.envs.interface import NoEnvObjects, Seeds, Step, Unrestorable, row_seeds
from proxima.envs.registry import register_backend

NO_ENV_OBJECTS = (
    "the ale backend's games run inside ale-py's C++ vector env, with no Python object per env for call and "
    "set_attr to reach; use --env-backend gymnasium (env_backend='gymnasium') to call env methods or set env "
    "attributes"
)


class AleVecEnv(NoEnvObjects, Unrestorable):  # the emulators' state is in C++
    """``num_envs`` games of one ALE id in ale-py's C++ vector env, in same-step autoreset, speaking tensors."""

    no_env_objects = NO_ENV_OBJECTS

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        seed: Seeds = None,
        device: torch.device | str = "cpu",
        noop_max: int = NOOP_MAX,
        **_,
    ):
        from ale_py.vector_env import AtariVectorEnv

        game = atari_game(env_id)
        if game is None:  # --env-backend ale named for an id of another backend
            raise UserError(f"the ale backend runs ALE game ids only, not {env_id!r}")
        # C++ threads: one per core the process may use, never more than games (the learner waits while the envs
        # step, so they do not compete with torch for the cores). episodic_life would reset the whole game at a
        # lost life in C++; life_loss_info does not.
        threads = max(1, min(num_envs, len(os.sched_getaffinity(0))))
        self.envs = AtariVectorEnv(
            game["game"],
            num_envs,
            num_threads=threads,
            repeat_action_probability=game["repeat_action_probability"],
            full_action_space=game["full_action_space"],
            autoreset_mode="SameStep",
            max_num_frames_per_episode=game["max_num_frames_per_episode"],
            img_height=SIZE,
            img_width=SIZE,
            grayscale=True,
            stack_num=STACK,
            frameskip=FRAME_SKIP,
            maxpool=True,
            noop_max=noop_max,
            use_fire_reset=True,
            episodic_life=False,
            life_loss_info=True,
            reward_clipping=False,
        )
        self.num_envs = num_envs
        self.single_observation_space = self.envs.single_observation_space
        self.single_action_space = self.envs.single_action_space
        self.obs_layout = ObsLayout(self.single_observation_space)
        self.device = torch.device(device)
        self._seed = row_seeds(seed, num_envs)
        self._lives = np.zeros(num_envs, dtype=np.int64)

    def _tensor(self, array: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def reset(self, seed: Seeds = None) -> Tensor:
        seed, self._seed = row_seeds(self._seed if seed is None else seed, self.num_envs), None
        # ale-py takes one seed per game as an array, and only an int as a consecutive range
        obs, info = self.envs.reset(seed=np.array(seed, dtype=np.int64) if isinstance(seed, list) else seed)
        self._lives = info["lives"].astype(np.int64)
        return self._tensor(obs)

    def step(self, actions: Tensor) -> Step:
        obs, raw, terminated, truncated, info = self.envs.step(actions.cpu().numpy().astype(np.int64))
        lives = info["lives"].astype(np.int64)
        done = terminated | truncated
        # After a game's end the C++ env has already reset it, and a new game has all its lives; a lost life
        # leaves the game running with one fewer. Pong-like games have no lives: every termination ends them.
        life_lost = terminated & (lives < self._lives)
        self._lives = lives
        game_over = done & ~life_lost
        obs_t = self._tensor(obs)
        final_obs = obs_t  # after a lost life the game goes on: its last observation is the next one
        if game_over.any():
            # Only where a game was reset: after a lost life, ale-py 0.12's info["final_obs"] holds an older
            # stack than the frame the life was lost on (tests/test_atari.py compares the two paths).
            final_obs = obs_t.clone()
            ended = np.flatnonzero(game_over)
            final_obs[ended] = self._tensor(info["final_obs"][ended])
        score = torch.as_tensor(raw, dtype=torch.float32, device=self.device)
        return Step(
            obs_t,
            score.sign(),  # reward clipping: -1, 0 or +1 for training
            torch.as_tensor(terminated, device=self.device),
            torch.as_tensor(truncated, device=self.device),
            final_obs,
            score=score,
            game_over=torch.as_tensor(game_over, device=self.device),
        )

    def close(self) -> None:
        self.envs.close()


register_backend("ale", AleVecEnv, handles=lambda env_id: atari_game(env_id) is not None)
