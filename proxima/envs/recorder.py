"""Video of one game of a multi-agent backend (PettingZoo, VMAS), where Gymnasium's RecordVideo wrapper cannot
go: game 0's episodes as ``rl-video-episode-N.mp4``, the names RecordVideo gives, through Gymnasium's own
``save_video``."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from proxima.base.errors import UserError, raised
from proxima.envs.interface import VideoDirs, video_dirs

# Frames wait in memory until their episode ends (Gymnasium's save_video takes them all at once): a video stops
# at this many, so that a game that never ends cannot fill the memory (a 700 x 700 VMAS frame is 1.5 MB).
MAX_FRAMES = 1000


def quiet_display() -> None:
    """Rendering to rgb_array needs no display: keep SDL (pygame's) from looking for one."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def game_zero_dir(video_dir: VideoDirs, num_envs: int, backend: str) -> str | None:
    """The directory game 0 records into, or None; these backends render one game, so any other is refused."""
    videos = video_dirs(video_dir, num_envs)
    if set(videos) - {0}:
        raise UserError(f"the {backend} backend records game 0 only, not games {sorted(set(videos) - {0})}")
    return videos.get(0)


class GameRecorder:
    """The first ``episodes`` episodes of one game (or Gymnasium's 0, 1, 8, 27, ... schedule), each up to
    ``MAX_FRAMES`` frames: ``start`` at its reset, ``frame`` after each step, ``save`` once it ended (or the env
    closes), ``redraw`` where the game was put in another state mid-episode (a resume). ``render()`` returns the
    game's current frame, ``(H, W, 3)``; ``label`` names the game in the error where it cannot."""

    def __init__(
        self, video_dir: str, episodes: int | None, render: Callable[[], object], fps: float, label: str
    ):
        from gymnasium.utils.save_video import capped_cubic_video_schedule

        quiet_display()
        self.dir, self.render, self.fps, self.label = video_dir, render, fps, label
        self.episode = -1
        self.frames: list[np.ndarray] | None = None
        self.trigger = capped_cubic_video_schedule if episodes is None else (lambda n: n < episodes)

    def start(self) -> None:
        self.episode += 1
        self.frames = [self._frame()] if self.trigger(self.episode) else None

    def frame(self) -> None:
        if self.frames is not None:
            self.frames.append(self._frame())
            if len(self.frames) == MAX_FRAMES:
                self.save()

    def redraw(self) -> None:  # the episode's video starts again from the game as it is now
        if self.frames is not None:
            self.frames = [self._frame()]

    def save(self) -> None:
        if not self.frames:
            return
        from gymnasium.utils.save_video import save_video

        save_video(
            self.frames, self.dir, fps=self.fps, episode_index=self.episode, episode_trigger=lambda _: True
        )
        self.frames = None

    def _frame(self) -> np.ndarray:
        try:
            frame = self.render()
        except UserError:
            raise
        except Exception as e:  # the env's renderer, not proxima: say so in one line
            raise UserError(
                f"{self.label} could not render a frame for the video ({raised(e)}); drop --capture-video"
            ) from None
        if not (isinstance(frame, np.ndarray) and frame.ndim == 3):
            raise UserError(f"{self.label} cannot render rgb_array frames, which video needs")
        return frame
