"""The pixel path: the Nature CNN encoder, uint8 images kept as bytes until the network, and image probes."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.spaces import ObsLayout
from proxima.envs.native import probe_images
from proxima.policy import encoders
from proxima.policy.encoders import NatureCNN, encoder_for, hardware_notes, resolve_precision


def _images() -> torch.Tensor:
    """The two observations of the image probes: left half bright, right half bright."""
    return torch.as_tensor(probe_images())


def test_the_nature_cnn_has_the_papers_layers_and_orthogonal_init():
    torch.manual_seed(0)
    cnn = NatureCNN((4, 84, 84))
    shapes = [tuple(p.shape) for p in cnn.parameters()]
    assert shapes == [(32, 4, 8, 8), (32,), (64, 32, 4, 4), (64,), (64, 64, 3, 3), (64,), (512, 3136), (512,)]
    for name, p in cnn.named_parameters():
        if name.endswith("weight"):  # orthogonal rows with gain sqrt(2) (detail 2, docs/SEEDS.md)
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

    class Spy(proxima.run.callbacks.Callback):
        def on_update_end(self, run, result):
            seen.append(run.collector.buffer.obs.dtype)

    run_dir = tmp_path / "run"
    agent = proxima.train(
        env_id="proxima/ProbeImagePolicy-v0", total_timesteps=256, num_steps=64, run_dir=str(run_dir),
        plot=False, quiet=True, callbacks=[Spy()],
    )  # fmt: skip
    assert seen == [torch.uint8]
    meta = json.loads((run_dir / "agent.json").read_text())
    assert meta["network"]["network"]["encoder"] == "nature-cnn" and meta["network"]["obs_shape"] == [
        1,
        36,
        36,
    ]
    assert meta["observation_space"]["dtype"] == "uint8"
    loaded = proxima.load(str(run_dir))
    images = _images().numpy()
    np.testing.assert_array_equal(
        loaded.predict(images, deterministic=True), agent.predict(images, deterministic=True)
    )
    assert loaded.predict(images[0], deterministic=True) in (0, 1)  # one observation, as the env gives it


def test_bfloat16_precision_runs_the_cnn_in_bf16_and_hands_float32_on():
    torch.manual_seed(0)
    full, half = NatureCNN((4, 84, 84)), NatureCNN((4, 84, 84), "bfloat16")
    half.load_state_dict(full.state_dict())
    pixels = torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8)
    out, reference = half(pixels), full(pixels)
    assert out.dtype == torch.float32  # the heads, the losses and Adam never see bf16
    assert not torch.equal(out, reference)  # it did compute in bf16: 8 bits of mantissa
    torch.testing.assert_close(out, reference, rtol=0.05, atol=0.05)  # features of order 1
    out.sum().backward()
    assert (
        {p.dtype for p in half.parameters()} == {p.grad.dtype for p in half.parameters()} == {torch.float32}
    )


def test_bfloat16_convolutions_compute_in_bf16_under_vmap_as_a_batched_runs_seeds_call_them():
    """torch.autocast does not reach into torch.func.vmap (a --num-seeds run's update): the CNN casts its weights
    itself, so each seed computes what the CNN alone computes, in bf16, where it once raised a dtype error."""
    from torch.func import functional_call, stack_module_state, vmap

    torch.manual_seed(0)
    seeds = [NatureCNN((4, 84, 84), "bfloat16") for _ in range(2)]
    for cnn in seeds:  # vmap's batched tensors are plain strided ones
        cnn.convs.to(memory_format=torch.contiguous_format)
        cnn.memory_format = torch.contiguous_format
    params, buffers = stack_module_state(seeds)
    pixels = torch.randint(0, 256, (2, 8, 4, 84, 84), dtype=torch.uint8)

    def one(p, b, x):
        return functional_call(seeds[0], (p, b), (x,))

    out = vmap(one)(params, buffers, pixels)
    full = NatureCNN((4, 84, 84))
    for k, cnn in enumerate(seeds):
        torch.testing.assert_close(out[k], cnn(pixels[k]), rtol=0.02, atol=0.02)  # bf16: 8 bits of mantissa
        full.load_state_dict(cnn.state_dict())
        assert not torch.equal(out[k], full(pixels[k]))  # in bf16, not float32


def test_auto_precision_is_bfloat16_only_where_the_hardware_computes_it(monkeypatch, tmp_path):
    cpu = torch.device("cpu")
    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(encoders, "CPUINFO", str(cpuinfo))
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    assert resolve_precision("auto", cpu) == "float32"  # AVX-512 alone emulates bf16
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    assert resolve_precision("auto", cpu) == "bfloat16"
    cpuinfo.unlink()  # not Linux
    assert resolve_precision("auto", cpu) == "float32"
    assert resolve_precision("bfloat16", cpu) == "bfloat16" and resolve_precision("float32", cpu) == "float32"


def test_bfloat16_where_the_hardware_emulates_it_is_said_at_the_start(monkeypatch, tmp_path, capsys):
    cpu = torch.device("cpu")
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: False)
    assert hardware_notes("float32", cpu, images=True) == []
    proxima.train(
        env_id="proxima/ProbeImagePolicy-v0", total_timesteps=256, num_steps=64, run_dir=str(tmp_path / "run"),
        plot=False, precision="bfloat16",
    )  # fmt: skip
    shown = "".join(capsys.readouterr())
    assert "note: --precision bfloat16 on a CPU (no AVX512-BF16 or AMX) is emulated" in shown
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: True)
    assert hardware_notes("bfloat16", cpu, images=True) == []


def test_an_agent_without_images_on_a_gpu_is_told_the_cpu_may_be_faster(monkeypatch):
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: True)
    gpu = torch.device("cuda")  # a device object only: nothing runs on it
    (note,) = hardware_notes("float32", gpu, images=False)
    assert note.startswith("note: ") and "--no-cuda" in note
    assert hardware_notes("float32", gpu, images=True) == []  # convolutions are what a GPU is for
    assert hardware_notes("float32", torch.device("cpu"), images=False) == []


def test_a_run_saves_the_precision_auto_chose_and_its_agent_computes_in_it(monkeypatch, tmp_path):
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: True)
    run_dir = tmp_path / "run"
    agent = proxima.train(
        env_id="proxima/ProbeImagePolicy-v0", total_timesteps=256, num_steps=64, run_dir=str(run_dir),
        plot=False, quiet=True, precision="auto",
    )  # fmt: skip
    # config.json holds the choice, not "auto": a resume on a machine without bf16 computes as this run did
    assert json.loads((run_dir / "config.json").read_text())["network"]["precision"] == "bfloat16"
    assert json.loads((run_dir / "agent.json").read_text())["network"]["network"]["precision"] == "bfloat16"
    loaded = proxima.load(str(run_dir))
    assert agent.model.encoder.autocast is loaded.model.encoder.autocast is torch.bfloat16
    images = _images().numpy()
    np.testing.assert_array_equal(
        loaded.predict(images, deterministic=True), agent.predict(images, deterministic=True)
    )


def test_a_dict_with_an_image_computes_its_cnn_in_bfloat16_and_the_rest_in_float32():
    from proxima.policy.encoders import MultiInputEncoder

    space = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (1, 36, 36), dtype=np.uint8), "speed": gym.spaces.Box(-1, 1, (2,))}
    )
    layout = ObsLayout(space)
    torch.manual_seed(0)
    full, half = MultiInputEncoder(layout), MultiInputEncoder(layout, "bfloat16")
    half.load_state_dict(full.state_dict())
    obs = torch.as_tensor(np.stack([layout.pack(space.sample()) for _ in range(4)]))
    out, reference = half(obs), full(obs)
    assert out.dtype == torch.float32 and not torch.equal(out, reference)
    torch.testing.assert_close(out, reference, rtol=0.05, atol=0.05)
    # the vector part (the Dict's last key) passes through untouched in either precision
    torch.testing.assert_close(out[:, -2:], reference[:, -2:], rtol=0, atol=0)


def test_a_precision_that_does_not_exist_is_one_clear_error(tmp_path):
    with pytest.raises(proxima.UserError, match="precision must be float32, bfloat16 or auto, got 'bf16'"):
        proxima.train(env_id="proxima/ProbeImagePolicy-v0", precision="bf16", run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
