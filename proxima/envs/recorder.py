"""Video of one game of a multi-agent backend (PettingZoo, VMAS), where Gymnasium's RecordVideo wrapper cannot
go: game 0's episodes as ``rl-video-episode-N.mp4``, the names RecordVideo gives, through Gymnasium's own
``save_video``."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from proxima.envs.interface import VideoDirs, video_dirs
from proxima.errors import UserError


def game_zero_dir(video_dir: VideoDirs, num_envs: int, backend: str) -> str | None:
    """The directory game 0 records into, or None; these backends render one game, so any other is refused."""
    videos = video_dirs(video_dir, num_envs)
    if set(videos) - {0}:
        raise UserError(f"the {backend} backend records game 0 only, not games {sorted(set(videos) - {0})}")
    return videos.get(0)


class GameRecorder:
    """The first ``episodes`` episodes of one game (or Gymnasium's 0, 1, 8, 27, ... schedule): ``start`` at its
    reset, ``frame`` after each step, ``save`` once it ended (or the env closes). ``render()`` returns the game's
    current frame, ``(H, W, 3)``; ``label`` names the game in the error where it cannot."""

    def __init__(
        self, video_dir: str, episodes: int | None, render: Callable[[], object], fps: float, label: str
    ):
        from gymnasium.utils.save_video import capped_cubic_video_schedule

        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array needs no display; keeps SDL quiet
        self.dir, self.render, self.fps, self.label = video_dir, render, fps, label
        self.episode, self.frames = -1, None
        self.trigger = capped_cubic_video_schedule if episodes is None else (lambda n: n < episodes)

    def start(self) -> None:
        self.episode += 1
        self.frames = [self._frame()] if self.trigger(self.episode) else None

    def frame(self) -> None:
        if self.frames is not None:
            self.frames.append(self._frame())

    def save(self) -> None:
        if not self.frames:
            return
        from gymnasium.utils.save_video import save_video

        save_video(
            self.frames, self.dir, fps=self.fps, episode_index=self.episode, episode_trigger=lambda _: True
        )
        self.frames = None

    def _frame(self) -> np.ndarray:
        frame = self.render()
        if not (isinstance(frame, np.ndarray) and frame.ndim == 3):
            raise UserError(f"{self.label} cannot render rgb_array frames, which video needs")
        return frame
