"""CUDA path: runs where a GPU exists, skipped cleanly elsewhere (CI and the development machines have none)."""

import numpy as np
import pytest
import torch

import proxima

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_train_on_cuda_and_load_anywhere(tmp_path):
    agent = proxima.train(total_timesteps=1024, run_dir=str(tmp_path / "run"), cuda=True)
    assert agent.device.type == "cuda"
    loaded = proxima.load(str(tmp_path / "run"))  # loads onto the CPU by default
    assert loaded.device.type == "cpu"
    obs = np.zeros((3, 4), dtype=np.float32)
    np.testing.assert_array_equal(
        agent.predict(obs, deterministic=True), loaded.predict(obs, deterministic=True)
    )


def test_no_cuda_flag_stays_on_cpu(tmp_path):
    agent = proxima.train(total_timesteps=512, run_dir=str(tmp_path / "run"), cuda=False)
    assert agent.device.type == "cpu"


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_atari_pixels_train_on_cuda_with_uint8_frames_and_load_on_the_cpu(precision, tmp_path):
    """The pixel path on the GPU: the C++ vector env's uint8 stacks go to the device as uint8 (the CNN divides
    by 255), and the weights load onto the CPU with the same outputs."""
    pytest.importorskip("ale_py")
    run_dir = str(tmp_path / "run")
    agent = proxima.train(config="atari", num_envs=4, num_steps=32, total_timesteps=512, run_dir=run_dir,
                          cuda=True, quiet=True, plot=False, precision=precision)  # fmt: skip
    assert agent.device.type == "cuda"
    loaded = proxima.load(run_dir)
    for name, tensor in agent.model.state_dict().items():
        torch.testing.assert_close(tensor.cpu(), loaded.model.state_dict()[name], rtol=0, atol=0)
    obs = np.random.default_rng(0).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    tolerance = 1e-4 if precision == "float32" else 2e-2  # bf16: 8 bits of mantissa, and TF32 on the GPU
    with torch.no_grad():  # cuDNN's and the CPU's convolutions agree to rounding (greedy actions could tie)
        on_gpu = agent.model.logits(torch.as_tensor(obs, device="cuda")).cpu()
        torch.testing.assert_close(
            on_gpu, loaded.model.logits(torch.as_tensor(obs)), rtol=tolerance, atol=tolerance
        )
    assert loaded.predict(obs[0]) in range(4)


def test_vmas_games_and_mappo_train_on_cuda_and_load_on_the_cpu(tmp_path):
    """VMAS steps its games on the GPU beside the model: nothing goes through the CPU, and the shared actor's
    weights load onto the CPU with the same outputs."""
    pytest.importorskip("vmas")
    run_dir = str(tmp_path / "run")
    agent = proxima.train(env_id="vmas:navigation", algo="mappo", num_envs=4, num_steps=16, total_timesteps=256,
                          run_dir=run_dir, cuda=True, quiet=True, plot=False, report=False)  # fmt: skip
    assert agent.device.type == "cuda"
    loaded = proxima.load(run_dir)
    assert loaded.device.type == "cpu"
    for name, tensor in agent.model.state_dict().items():
        torch.testing.assert_close(tensor.cpu(), loaded.model.state_dict()[name], rtol=0, atol=0)
