"""``--precision bfloat16`` for an agent without images: its MLPs' hidden layers compute under bf16 autocast."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import proxima
from proxima.policy import encoders
from proxima.policy.networks import Bf16Linear
from proxima.policy.stacked import StackedModels, plain_mlps

TINY = dict(env_id="CartPole-v1", num_envs=4, num_steps=32, total_timesteps=256, quiet=True, plot=False,
            report=False, torch_threads=1)  # fmt: skip


def test_bfloat16_computes_the_hidden_layers_in_bf16_and_hands_float32_on(tmp_path):
    half = proxima.train(
        run_dir=str(tmp_path / "half"), precision="bfloat16", hidden_sizes=(256, 256), **TINY
    )
    full = proxima.train(run_dir=str(tmp_path / "full"), precision="float32", hidden_sizes=(256, 256), **TINY)
    model, reference = half.model, full.model
    for net in (model.actor, model.critic):  # the output layers stay float32
        assert [type(m) for m in net if isinstance(m, nn.Linear)] == [Bf16Linear, Bf16Linear, nn.Linear]
    assert not any(isinstance(m, Bf16Linear) for m in reference.modules())
    reference.load_state_dict(model.state_dict())
    obs = torch.randn(64, 4)
    (logits, values), (ref_logits, ref_values) = model(obs), reference(obs)
    assert logits.dtype == values.dtype == torch.float32  # the heads, the losses and Adam never see bf16
    assert not torch.equal(values, ref_values)  # it did compute in bf16: 8 bits of mantissa
    torch.testing.assert_close(values, ref_values, rtol=0.05, atol=0.05)
    torch.testing.assert_close(logits, ref_logits, rtol=0.05, atol=0.05)
    (logits.sum() + values.sum()).backward()
    assert {p.grad.dtype for p in model.parameters()} == {torch.float32}
    # the saved agent computes as the run did; --num-seeds puts bf16 layers through vmap
    loaded = proxima.load(str(tmp_path / "half"))
    assert json.loads((tmp_path / "half" / "config.json").read_text())["network"]["precision"] == "bfloat16"
    np.testing.assert_array_equal(loaded.predict(obs.numpy(), deterministic=True),
                                  half.predict(obs.numpy(), deterministic=True))  # fmt: skip
    assert plain_mlps(model)  # --num-seeds computes its rollouts with batched matmuls, the products in bf16
    with torch.no_grad():
        batched = StackedModels([model, model], share=False).call("forward", torch.stack([obs, obs]))[1][0]
    torch.testing.assert_close(batched, values.detach(), rtol=1e-2, atol=1e-2)
    assert not torch.allclose(batched, ref_values.detach(), rtol=1e-5, atol=1e-5)  # not float32's products


def test_auto_keeps_an_mlp_agent_in_float32_even_where_bf16_is_native(monkeypatch, tmp_path):
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: True)
    agent = proxima.train(run_dir=str(tmp_path / "run"), precision="auto", **TINY)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["network"]["precision"] == "float32"
    assert not any(isinstance(m, Bf16Linear) for m in agent.model.modules())


def test_a_batched_run_takes_bfloat16_mlps(tmp_path):
    agents = proxima.train(run_dir=str(tmp_path / "run"), precision="bfloat16", num_seeds=2, **TINY)
    assert all(isinstance(a.model.actor[0], Bf16Linear) for a in agents)
    assert [
        len((tmp_path / "run" / s / "metrics.jsonl").read_text().splitlines()) for s in ("seed1", "seed2")
    ] == [2, 2]


@pytest.mark.slow
def test_cartpole_fast_solves_with_bfloat16_mlps(tmp_path):
    """The learning check: the cartpole-fast preset with its MLPs in bf16 reaches its stop return (498 on 64
    evaluation episodes) well within its budget, as it does in float32 (seed 1: 65,536 steps)."""
    proxima.train(config="cartpole-fast", seed=1, precision="bfloat16", run_dir=str(tmp_path / "run"), quiet=True,
                  report=False)  # fmt: skip
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["global_step"] < 300_000 and last["eval_return"] >= 498


def test_a_batched_run_says_where_bf16_is_emulated(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(encoders, "native_bfloat16", lambda device: False)
    proxima.train(
        run_dir=str(tmp_path / "run"), precision="bfloat16", num_seeds=2, **{**TINY, "quiet": False}
    )
    assert "note: --precision bfloat16 on a CPU (no AVX512-BF16 or AMX) is emulated" in "".join(
        capsys.readouterr()
    )
