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
