"""Atari: which ids are ALE games, and the Gymnasium-wrapper path that preprocesses them (docs/ATARI.md).

Every ALE id (``BreakoutNoFrameskip-v4``, ``ALE/Breakout-v5``, ...) gets the same preprocessing, CleanRL's
and the DQN paper's, whichever backend runs it:

- up to 30 no-op frames after each reset, FIRE first for games that need it to start;
- one action repeated for 4 frames, the observation the max of the last two frames;
- grayscale, resized to 84x84 (area interpolation), the last 4 frames stacked channels-first, ``uint8``;
- a lost life is a termination for training (its future value is 0) but the game goes on: no frame or
  action is inserted, the next observation is the game's next one;
- rewards clipped to their sign for training; the raw score is kept for the statistics.

The id keeps its own semantics otherwise: v5 ids repeat the previous action with probability 0.25 (sticky
actions), v4 ids never do; the game, its action set and its 108k-frame limit come from the id.

Episode statistics count whole games: a backend's ``Step`` carries ``game_over`` (all lives lost, or the
frame limit) and ``score`` (the unclipped reward), so returns are game scores, not per-life clipped sums.

The C++ vector env of ale-py (``proxima.envs.ale_backend``) does the same in its own threads; this module's
wrappers are the path for video, for Gymnasium's evaluation envs, and for ``--env-backend gymnasium``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from proxima.base.errors import UserError

STACK = 4  # frames per observation
SIZE = 84  # pixels per side
FRAME_SKIP = 4
NOOP_MAX = 30
INSTALL = "ale-py is not installed: pip install 'proxima[atari]' (make installs it)"


@functools.cache
def _ale_registered() -> bool:
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)  # registers ALE/*-v5 and the v4 ids with Gymnasium
    return True


def atari_game(env_id: str) -> dict | None:
    """The ALE settings of an Atari id (``game``, ``repeat_action_probability``, ``full_action_space``,
    ``max_num_frames_per_episode``), or None for any other id, including the RAM ids (their observation is a
    vector, which the ordinary path handles)."""
    looks_atari = env_id.startswith("ALE/") or env_id.endswith(("NoFrameskip-v4", "NoFrameskip-v0"))
    if not _ale_registered():
        if looks_atari:
            raise UserError(f"{env_id} is an Atari game, and {INSTALL}")
        return None
    if ":" in env_id:
        return None  # module:Id ids belong to the user's module
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        return None
    if spec.entry_point != "ale_py.env:AtariEnv" or spec.kwargs.get("obs_type", "rgb") != "rgb":
        return None
    return {
        "game": spec.kwargs["game"],
        "repeat_action_probability": float(spec.kwargs.get("repeat_action_probability", 0.25)),
        "full_action_space": bool(spec.kwargs.get("full_action_space", False)),
        "max_num_frames_per_episode": int(spec.kwargs.get("max_num_frames_per_episode") or 108_000),
    }


class FireOnReset(gym.Wrapper):
    """Press FIRE for one frame after each reset, in games whose action set has it: many (Breakout) wait for it
    before the play starts. It wraps the raw one-frame env, so the no-ops that follow come after it, as in
    ale-py's C++ vector env."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        game: Any = env.unwrapped  # ale-py's AtariEnv, which has the action meanings
        meanings = game.get_action_meanings()
        self._fire = meanings.index("FIRE") if "FIRE" in meanings else None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if self._fire is not None:
            obs, _, terminated, truncated, info = self.env.step(self._fire)
            if terminated or truncated:  # never seen in practice; start over rather than return a dead game
                obs, info = self.env.reset()
        return obs, info


class LifeLossTermination(gym.Wrapper):
    """A lost life ends the training episode (``terminated``, so its future value is 0) but not the game: the
    reset that follows continues the game from where it was, inserting nothing. The last life's loss is the
    game's own end. ``info["game_over"]`` says when the whole game ended, for the statistics."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._game_over = True
        self._obs = None

    def reset(self, **kwargs):
        if self._game_over:
            self._obs, info = self.env.reset(**kwargs)
            self._game_over = False
            self._lives = self.env.unwrapped.ale.lives()
            return self._obs, {**info, "game_over": False}
        return self._obs, {"game_over": False}  # the game goes on after a lost life

    def step(self, action):
        self._obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        life_lost = 0 < lives < self._lives  # losing the last life is the game's own termination
        self._lives = lives
        self._game_over = bool(terminated or truncated)
        return (
            self._obs,
            reward,
            bool(terminated or life_lost),
            truncated,
            {**info, "game_over": self._game_over},
        )


class ClipReward(gym.Wrapper):
    """Rewards clipped to their sign (-1, 0, +1) for training, so that one learning rate suits every game;
    ``info["score"]`` keeps the unclipped reward for the statistics."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(np.sign(reward)), terminated, truncated, {**info, "score": float(reward)}


def make_atari_env(
    env_id: str,
    render_mode: str | None = None,
    *,
    noop_max: int = NOOP_MAX,
    record: Callable[[gym.Env], gym.Env] | None = None,
) -> gym.Env:
    """One Atari env with the full preprocessing of the module docstring. ``record`` wraps the env of whole
    games (inside the life-loss wrapper, so that a video is one game), with ``render_mode="rgb_array"``
    giving the real RGB screen."""
    game = atari_game(env_id)
    if game is None:
        raise UserError(f"{env_id} is not an ALE game id")
    kwargs: dict[str, Any] = {"frameskip": 1}  # AtariPreprocessing repeats the action itself
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    env = FireOnReset(env)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=FRAME_SKIP, screen_size=SIZE, grayscale_obs=True, scale_obs=False
    )
    # Zeros before the first frame, as the C++ env does (Gymnasium's default repeats the first frame).
    env = gym.wrappers.FrameStackObservation(env, STACK, padding_type="zero")
    # A video shows every 4th frame of a 60 Hz game: 15 frames a second plays it at its real speed.
    env.metadata = {**env.metadata, "render_fps": 60 // FRAME_SKIP}
    if record is not None:
        env = record(env)
    return ClipReward(LifeLossTermination(env))
