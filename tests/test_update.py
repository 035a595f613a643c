import torch

from proxima.config import PPOArgs
from proxima.distributions import CategoricalHead
from proxima.networks import ActorCritic, NetworkSpec
from proxima.optim import make_adam
from proxima.storage import Batch
from proxima.update import update


def _setup(seed=0, shared=False):
    torch.manual_seed(seed)
    model = ActorCritic(NetworkSpec(obs_dim=3, logits_dim=2, shared=shared), CategoricalHead(2))
    obs = torch.randn(64, 3)
    with torch.no_grad():
        actions, logprobs, values = model.act(obs)
    batch = Batch(obs, actions, logprobs, values, torch.randn(64), values + torch.randn(64))
    return model, make_adam(model.parameters(), 1e-2), batch


def _steps_taken(optimizer):
    return int(next(iter(optimizer.state.values()))["step"].item())


def test_every_minibatch_of_every_epoch_takes_a_step():
    model, opt, batch = _setup()
    args = PPOArgs(num_envs=8, num_steps=8, num_minibatches=4, update_epochs=3)
    stats = update(model, opt, batch, args)
    assert _steps_taken(opt) == 12
    assert set(stats) == {
        "value_loss",
        "policy_loss",
        "entropy",
        "old_approx_kl",
        "approx_kl",
        "clipfrac",
        "grad_norm",
    }
    assert 0.0 <= stats["clipfrac"] <= 1.0 and stats["approx_kl"] >= 0.0


def test_target_kl_stops_after_the_first_epoch():
    model, opt, batch = _setup()
    args = PPOArgs(num_envs=8, num_steps=8, num_minibatches=4, update_epochs=3, target_kl=1e-12)
    stats = update(model, opt, batch, args)
    assert stats["approx_kl"] > 1e-12
    assert _steps_taken(opt) == 4  # one epoch of 4 minibatches, then early stop


def test_clipped_value_loss_and_shared_trunk_train():
    for shared, clip_vloss in [(True, False), (False, True)]:
        model, opt, batch = _setup(shared=shared)
        before = [p.detach().clone() for p in model.parameters()]
        args = PPOArgs(num_envs=8, num_steps=8, num_minibatches=2, update_epochs=2, clip_vloss=clip_vloss)
        update(model, opt, batch, args)
        assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_gradient_norm_is_clipped_globally():
    model, _, batch = _setup()
    from proxima.optim import clip_grad_norm

    (model.value(batch.obs).pow(2).sum() * 1e3).backward()
    clip_grad_norm(model, 0.5)
    total = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None))
    assert abs(total.item() - 0.5) < 1e-4
