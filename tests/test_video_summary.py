"""Videos in TensorBoard: GIF image summaries read back by TensorBoard's own reader, and MP4 decoding."""

import io
import sys

import numpy as np
import pytest
from PIL import Image, ImageSequence
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from proxima.base.errors import UserError
from proxima.run.video_summary import gif_bytes, log_video, read_mp4

# Pure colours: a per-frame GIF palette holds each of them exactly, so pixels must round-trip bit for bit.
PALETTE = np.array(
    [[255, 0, 0], [0, 255, 0], [0, 0, 255], [0, 0, 0], [255, 255, 255], [255, 255, 0]], dtype=np.uint8
)


def _frames(num, height, width):
    """Frame i is PALETTE[i] with a 10x10 block of the next colour in its top-left corner (catches flips)."""
    frames = np.empty((num, height, width, 3), dtype=np.uint8)
    for i in range(num):
        frames[i] = PALETTE[i % len(PALETTE)]
        frames[i, :10, :10] = PALETTE[(i + 1) % len(PALETTE)]
    return frames


def _decode(gif):
    """Every frame of a GIF as uint8 (H, W, 3), with each frame's delay in milliseconds."""
    im = Image.open(io.BytesIO(gif))
    pairs = [(np.asarray(f.convert("RGB")), f.info["duration"]) for f in ImageSequence.Iterator(im)]
    return np.stack([p for p, _ in pairs]), [d for _, d in pairs]


def test_video_round_trips_through_tensorboards_reader(tmp_path):
    frames = _frames(6, 40, 60)
    writer = SummaryWriter(str(tmp_path))
    log_video(writer, "videos/episode", frames, fps=10, step=7)
    writer.close()

    acc = EventAccumulator(str(tmp_path), size_guidance={"images": 0})
    acc.Reload()
    assert acc.Tags()["images"] == ["videos/episode"]
    [event] = acc.Images("videos/episode")
    assert (event.step, event.width, event.height) == (7, 60, 40)

    gif = Image.open(io.BytesIO(event.encoded_image_string))
    assert gif.format == "GIF" and gif.n_frames == 6 and gif.info["loop"] == 0
    decoded, durations = _decode(event.encoded_image_string)
    np.testing.assert_array_equal(decoded, frames)
    assert durations == [100] * 6  # 10 fps


def test_wide_frames_are_downscaled_keeping_the_aspect_ratio():
    frames = _frames(3, 400, 600)
    decoded, _ = _decode(gif_bytes(frames, fps=30, max_width=320))
    _, height, width, _ = decoded.shape
    assert width <= 320 and abs(height - 400 * width / 600) <= 1
    # solid regions away from the block's scaled edge keep their exact colours
    np.testing.assert_array_equal(decoded[:, -1, -1], PALETTE[:3])
    np.testing.assert_array_equal(decoded[:, 0, 0], PALETTE[1:4])


def test_identical_consecutive_frames_merge_but_keep_playback_time():
    # Pillow writes a run of identical frames once with the summed delay; the viewer sees the same video.
    frames = np.stack([np.full((8, 8, 3), PALETTE[i], np.uint8) for i in [0, 0, 0, 1]])
    decoded, durations = _decode(gif_bytes(frames, fps=10))
    np.testing.assert_array_equal(decoded[:, 0, 0], PALETTE[:2])
    assert durations == [300, 100]


def test_fast_videos_are_capped_at_50_fps():
    # browsers play GIF delays under 20 ms as 100 ms, so 120 fps (10 ms) would play slower than 50 fps
    _, durations = _decode(gif_bytes(_frames(2, 8, 8), fps=120))
    assert durations == [20, 20]


def test_bad_frames_are_a_user_error():
    with pytest.raises(UserError, match=r"\(T, H, W, 3\)"):
        gif_bytes(np.zeros((4, 8, 8, 3), dtype=np.float32), fps=10)
    with pytest.raises(UserError, match="fps must be positive"):
        gif_bytes(np.zeros((4, 8, 8, 3), dtype=np.uint8), fps=0)


def test_read_mp4_decodes_what_imageio_ffmpeg_wrote(tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = str(tmp_path / "episode.mp4")
    colours = [PALETTE[i % len(PALETTE)] for i in range(10)]
    writer = imageio_ffmpeg.write_frames(path, (64, 48), fps=10)
    writer.send(None)  # the generator must be primed before it takes frames
    for colour in colours:
        writer.send(np.ascontiguousarray(np.broadcast_to(colour, (48, 64, 3))))
    writer.close()

    frames, fps = read_mp4(path)
    assert frames.shape == (10, 48, 64, 3) and frames.dtype == np.uint8 and fps == 10
    # H.264 with 4:2:0 chroma is lossy: solid colours come back close, not exact
    error = np.abs(frames.astype(int) - np.array(colours, dtype=int)[:, None, None, :])
    assert error.max() <= 10, error.max()


def test_read_mp4_without_imageio_ffmpeg_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # makes the import raise ImportError
    with pytest.raises(UserError, match=r"pip install 'proxima\[video\]'"):
        read_mp4(str(tmp_path / "episode.mp4"))
