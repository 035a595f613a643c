"""Episode videos in TensorBoard without moviepy.

TensorBoard shows a video as an *image* summary whose encoded image is an animated GIF; that is what
``SummaryWriter.add_video`` writes. ``add_video`` encodes the GIF with moviepy 1.x's API, which moviepy 2 removed
(pytorch/pytorch#147317), so here the GIF is made with Pillow and the summary proto is built by hand.

Frames are uint8 arrays of shape ``(T, H, W, 3)``, time first, as gymnasium's ``render()`` stacks them.
"""

from __future__ import annotations

import io
import logging
import os

import numpy as np
from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary

from proxima.base.errors import UserError

# GIF stores each frame's delay in centiseconds, and browsers play delays under 2 cs as 10 cs (a legacy of
# early GIFs), so a 60 fps video would crawl at 10 fps. Capping at 50 fps keeps playback speed honest.
MIN_FRAME_CS = 2


def read_mp4(path: str, max_width: int | None = None) -> tuple[np.ndarray, float]:
    """The frames of a video file as uint8 ``(T, H, W, 3)`` and its frame rate, decoded by imageio-ffmpeg's
    bundled ffmpeg; with ``max_width``, scaled down by ffmpeg as it decodes (a 500-frame 600x400 episode is
    360 MB at full size, 58 MB at 240 wide)."""
    try:
        import imageio_ffmpeg  # lazy: an optional extra, needed only when videos are logged
    except ImportError as e:
        raise UserError("reading videos needs imageio-ffmpeg: pip install 'proxima[video]'") from e
    if not os.path.isfile(path):
        raise UserError(f"video file {path!r} does not exist")
    scale = ["-vf", f"scale='min({max_width},iw)':-2"] if max_width else []  # -2: an even height, aspect kept
    reader = imageio_ffmpeg.read_frames(path, pix_fmt="rgb24", output_params=scale)
    quiet = logging.getLogger("imageio_ffmpeg")
    level = quiet.level
    # its warning that the frames differ in size from the file's: we asked for that
    quiet.setLevel(logging.ERROR)
    try:
        meta = next(reader)  # the first item is metadata; the rest are raw frames
        (width, height), fps = meta["size"], float(meta["fps"])
        frames = [np.frombuffer(raw, dtype=np.uint8).reshape(height, width, 3) for raw in reader]
    finally:
        quiet.setLevel(level)
        reader.close()  # stops the ffmpeg subprocess even if decoding failed halfway
    return (np.stack(frames) if frames else np.zeros((0, height, width, 3), dtype=np.uint8)), fps


def _check_frames(frames: np.ndarray, fps: float, max_width: int) -> None:
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4):
        got = f"{type(frames).__name__} {getattr(frames, 'dtype', '')} {getattr(frames, 'shape', '')}"
        raise UserError(f"video frames must be a uint8 numpy array of shape (T, H, W, 3), got {got}")
    if frames.shape[0] == 0 or frames.shape[3] != 3:
        raise UserError(f"video frames must have shape (T, H, W, 3) with T >= 1, got {frames.shape}")
    if not fps > 0:
        raise UserError(f"video fps must be positive, got {fps}")
    if max_width < 1:
        raise UserError(f"video max_width must be at least 1, got {max_width}")


def scaled_size(height: int, width: int, max_width: int) -> tuple[int, int]:
    """(height, width) after shrinking to at most ``max_width`` wide with the aspect ratio kept; never enlarges."""
    if width <= max_width:
        return height, width
    return max(1, round(height * max_width / width)), max_width


def gif_bytes(frames: np.ndarray, fps: float, max_width: int = 320) -> bytes:
    """An endlessly looping animated GIF of ``frames`` (uint8 ``(T, H, W, 3)``), at most ``max_width`` wide.

    Each frame gets its own 256-colour palette, so frames with few colours round-trip exactly. Pillow merges
    identical consecutive frames into one and adds up their delays, so playback time is kept but the GIF may
    hold fewer frames than ``T``.
    """
    _check_frames(frames, fps, max_width)
    height, width = scaled_size(frames.shape[1], frames.shape[2], max_width)
    # BOX averages each source area: no aliasing of thin lines (unlike striding), and solid colours stay exact.
    images = [Image.fromarray(f).resize((width, height), Image.Resampling.BOX) for f in frames]
    duration_ms = 10 * max(MIN_FRAME_CS, round(100 / fps))  # whole centiseconds, so merged delays add exactly
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=duration_ms, loop=0)
    return out.getvalue()


def video_summary(
    tag: str, frames: np.ndarray, fps: float, max_width: int = 320, max_frames: int | None = None
) -> Summary:
    """A TensorBoard summary that shows ``frames`` as a video, the same proto ``add_video`` writes. With
    ``max_frames``, a longer video keeps every k-th frame at 1/k of the frame rate (the same playback time):
    encoding the GIF costs time in the training loop, for every frame."""
    _check_frames(frames, fps, max_width)
    if max_frames is not None and len(frames) > max_frames:
        stride = -(-len(frames) // max_frames)
        frames, fps = frames[::stride], fps / stride
    height, width = scaled_size(frames.shape[1], frames.shape[2], max_width)
    image = Summary.Image(
        height=height, width=width, colorspace=3, encoded_image_string=gif_bytes(frames, fps, max_width)
    )
    return Summary(value=[Summary.Value(tag=tag, image=image)])


def log_video(writer, tag: str, frames: np.ndarray, fps: float, step: int, **options) -> None:
    """Write ``frames`` to a torch ``SummaryWriter`` as a video at ``step`` (``options``: ``video_summary``'s), not
    through ``writer.add_video``, which needs moviepy 1.x (the module's docstring)."""
    writer._get_file_writer().add_summary(video_summary(tag, frames, fps, **options), step)
