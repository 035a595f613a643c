"""The pixel path: the Nature CNN encoder, uint8 images kept as bytes until the network, and image probes."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.encoders import NatureCNN, encoder_for
from proxima.envs.probes import ProbeImageValue
from proxima.spaces import ObsLayout


def _images() -> torch.Tensor:
    """The two observations of the image probes: left half bright, right half bright."""
    env, images = ProbeImageValue(), []
    for side in (0, 1):
        env.side = side
        images.append(env._image())
    return torch.as_tensor(np.stack(images))


def test_the_nature_cnn_has_the_papers_layers_and_orthogonal_init():
    torch.manual_seed(0)
    cnn = NatureCNN((4, 84, 84))
    shapes = [tuple(p.shape) for p in cnn.parameters()]
    assert shapes == [(32, 4, 8, 8), (32,), (64, 32, 4, 4), (64,), (64, 64, 3, 3), (64,), (512, 3136), (512,)]
    for name, p in cnn.named_parameters():
        if name.endswith("weight"):  # rows of an orthogonal matrix with gain sqrt(2) (detail #2)
            norms = p.reshape(p.shape[0], -1).norm(dim=1)
            torch.testing.assert_close(norms, torch.full_like(norms, 2**0.5))
        else:
            assert (p == 0).all()
    out = cnn(torch.zeros(3, 4, 84, 84, dtype=torch.uint8))
    assert out.shape == (3, 512) and (out >= 0).all()  # ReLU after the 512 units


def test_uint8_pixels_are_divided_by_255_inside_the_network():
    torch.manual_seed(0)
    cnn = NatureCNN((4, 84, 84))
    pixels = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(cnn(pixels), cnn(pixels.float() / 255.0), rtol=0, atol=0)


def test_channels_last_images_are_read_as_their_channels():
    torch.manual_seed(0)
    first, last = NatureCNN((3, 40, 48)), NatureCNN((40, 48, 3))
    last.load_state_dict(first.state_dict())
    pixels = torch.randint(0, 256, (2, 3, 40, 48), dtype=torch.uint8)
    torch.testing.assert_close(last(pixels.permute(0, 2, 3, 1)), first(pixels), rtol=0, atol=0)


def test_the_observation_space_picks_the_encoder():
    assert encoder_for(ObsLayout(gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8))) == "nature-cnn"
    assert encoder_for(ObsLayout(gym.spaces.Box(0, 255, (64, 64, 3), dtype=np.uint8))) == "nature-cnn"
    # smaller than the CNN's field: pixels as a vector
    assert encoder_for(ObsLayout(gym.spaces.Box(0, 255, (3, 16, 16), dtype=np.uint8))) == "flatten-mlp"


def test_an_image_agent_keeps_bytes_in_the_buffer_and_round_trips(tmp_path):
    seen = []

    class Spy(proxima.callbacks.Callback):
        def on_update_end(self, run, result):
            seen.append(run.collector.buffer.obs.dtype)

    run_dir = tmp_path / "run"
    agent = proxima.train(
        env_id="proxima/ProbeImagePolicy-v0", total_timesteps=256, num_steps=64, run_dir=str(run_dir),
        plot=False, quiet=True, callbacks=[Spy()],
    )  # fmt: skip
    assert seen == [torch.uint8]
    meta = json.loads((run_dir / "agent.json").read_text())
    assert meta["network"]["encoder"] == "nature-cnn" and meta["network"]["obs_shape"] == [1, 36, 36]
    assert meta["observation_space"]["dtype"] == "uint8"
    loaded = proxima.load(str(run_dir))
    images = _images().numpy()
    np.testing.assert_array_equal(
        loaded.predict(images, deterministic=True), agent.predict(images, deterministic=True)
    )
    assert loaded.predict(images[0], deterministic=True) in (0, 1)  # one observation, as the env gives it


@pytest.mark.slow
def test_the_image_probes_learn_through_the_cnn(tmp_path):
    """Seed 000's probes 2 and 5, in pixels: the value and the policy must both read the image."""
    images = _images()
    value = proxima.train(
        env_id="proxima/ProbeImageValue-v0", total_timesteps=10_000, run_dir=str(tmp_path / "v"), plot=False,
        quiet=True, norm_value=False,
    )  # fmt: skip
    with torch.no_grad():
        torch.testing.assert_close(value.model.value(images), torch.tensor([1.0, -1.0]), rtol=0, atol=1e-3)
    policy = proxima.train(
        env_id="proxima/ProbeImagePolicy-v0", total_timesteps=20_000, run_dir=str(tmp_path / "p"), plot=False,
        quiet=True, norm_value=False,
    )  # fmt: skip
    with torch.no_grad():
        probs = policy.model.head.probs(policy.model.logits(images))
        values = policy.model.value(images)
    assert probs[0, 0] >= 0.99 and probs[1, 1] >= 0.99, probs
    torch.testing.assert_close(values, torch.ones(2), rtol=0, atol=1e-2)
