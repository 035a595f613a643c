import dataclasses
import math

import pytest
import torch

from proxima.algo.algorithms import ppo_policy_loss
from proxima.algo.losses import explained_variance
from proxima.algo.optim import make_adam
from proxima.algo.storage import Batch
from proxima.algo.update import UpdateSettings, update
from proxima.policy.distributions import CategoricalHead
from proxima.policy.networks import ActorCritic, NetworkSettings, NetworkSpec
from proxima.run.config import PPOArgs


def _setup(seed=0, shared=False):
    torch.manual_seed(seed)
    model = ActorCritic(
        NetworkSpec(2, (3,), NetworkSettings(shared_network=shared, norm_value=False)), CategoricalHead(2)
    )
    obs = torch.randn(64, 3)
    with torch.no_grad():
        actions, logprobs, values = model.act(obs)
    batch = Batch(obs, actions, logprobs, values, torch.randn(64), values + torch.randn(64))
    return model, make_adam(model.parameters(), 1e-2), batch


def _steps_taken(optimizer):
    return int(next(iter(optimizer.state.values()))["step"].item())


def _settings(**kw):
    """The update settings of a PPO run with a batch of 8 envs x 8 steps, the 64 samples of ``_setup``; ``kw``
    may hold values a run refuses (a negative ent_coef), set on the update's own settings."""
    own = {name: kw.pop(name) for name in ("ent_coef",) if name in kw}
    return dataclasses.replace(UpdateSettings.from_args(PPOArgs.of(num_envs=8, num_steps=8, **kw)), **own)


def test_every_minibatch_of_every_epoch_takes_a_step():
    model, opt, batch = _setup()
    stats = update(model, opt, batch, _settings(num_minibatches=4, update_epochs=3), torch.Generator())
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


def test_settings_from_args_are_the_runs_settings():
    args = PPOArgs.of(
        num_envs=8, num_steps=8, num_minibatches=4, update_epochs=3, clip_coef=0.3, target_kl=0.02
    )
    settings = UpdateSettings.from_args(args)
    assert settings == UpdateSettings(
        ppo_policy_loss, update_epochs=3, num_minibatches=4, clip_coef=0.3, target_kl=0.02
    )


def test_a_policy_that_has_not_moved_reports_no_clipping_and_no_kl():
    """One epoch of one minibatch: the diagnostics are taken before its gradient step, when the policy is the
    one that collected the batch, so every ratio is 1."""
    model, opt, batch = _setup()
    stats = update(model, opt, batch, _settings(num_minibatches=1, update_epochs=1), torch.Generator())
    assert _steps_taken(opt) == 1
    assert stats["clipfrac"] == 0.0
    assert abs(stats["approx_kl"]) < 1e-7 and abs(stats["old_approx_kl"]) < 1e-7


# Ratios new/old, each far from the clip range's edges 0.8 and 1.2: five of every eight leave it.
RATIOS = [0.5, 0.7, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]


def _batch_with_ratios(model, batch):
    """``batch`` with old log-probs set so that the model's ratio on sample i is ``RATIOS[i % 8]``."""
    with torch.no_grad():
        logprobs, _, _ = model.evaluate(batch.obs, batch.actions)
    ratios = torch.tensor(RATIOS).repeat(len(batch) // len(RATIOS))
    return Batch(
        batch.obs, batch.actions, logprobs - ratios.log(), *(batch.values, batch.advantages, batch.returns)
    )


@pytest.mark.parametrize("epochs, minibatches", [(1, 1), (3, 4)])
def test_clipfrac_and_kl_of_hand_built_ratios(epochs, minibatches):
    """With a learning rate of 0 the policy never moves, so every minibatch sees the hand-built ratios:
    clipfrac is 5/8 whichever way the batch is cut, and the KL estimates of the last minibatch are known
    exactly when it is the whole batch."""
    model, _, batch = _setup()
    opt = make_adam(model.parameters(), 0.0)
    stats = update(
        model,
        opt,
        _batch_with_ratios(model, batch),
        _settings(num_minibatches=minibatches, update_epochs=epochs),
        torch.Generator(),
    )
    assert _steps_taken(opt) == epochs * minibatches
    assert stats["clipfrac"] == pytest.approx(5 / 8, abs=1e-7)
    if minibatches == 1:
        approx_kl = sum((r - 1) - math.log(r) for r in RATIOS) / len(RATIOS)
        old_approx_kl = sum(-math.log(r) for r in RATIOS) / len(RATIOS)
        assert stats["approx_kl"] == pytest.approx(approx_kl, rel=1e-5)
        assert stats["old_approx_kl"] == pytest.approx(old_approx_kl, rel=1e-5)


def test_clipfrac_counts_only_ratios_outside_the_clip_range():
    """The same ratios with a clip coefficient of 0.6: only 2.0 leaves [0.4, 1.6], one sample in eight."""
    model, _, batch = _setup()
    stats = update(
        model,
        make_adam(model.parameters(), 0.0),
        _batch_with_ratios(model, batch),
        _settings(num_minibatches=1, update_epochs=1, clip_coef=0.6),
        torch.Generator(),
    )
    assert stats["clipfrac"] == pytest.approx(1 / 8, abs=1e-7)


def test_target_kl_stops_after_the_first_epoch():
    model, opt, batch = _setup()
    stats = update(
        model, opt, batch, _settings(num_minibatches=4, update_epochs=3, target_kl=1e-12), torch.Generator()
    )
    assert stats["approx_kl"] > 1e-12
    assert _steps_taken(opt) == 4  # one epoch of 4 minibatches, then early stop


def test_clipped_value_loss_and_shared_trunk_train():
    for shared, clip_vloss in [(True, False), (False, True)]:
        model, opt, batch = _setup(shared=shared)
        before = [p.detach().clone() for p in model.parameters()]
        update(
            model,
            opt,
            batch,
            _settings(num_minibatches=2, update_epochs=2, clip_vloss=clip_vloss),
            torch.Generator(),
        )
        assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_gradient_norm_is_clipped_globally():
    model, _, batch = _setup()
    from proxima.algo.optim import clip_grad_norm

    (model.value(batch.obs).pow(2).sum() * 1e3).backward()
    clip_grad_norm(list(model.parameters()), 0.5)
    total = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None))
    assert abs(total.item() - 0.5) < 1e-4


def _norm_value_model(seed=0, norm_value=True):
    torch.manual_seed(seed)
    return ActorCritic(NetworkSpec(2, (4,), NetworkSettings(norm_value=norm_value)), CategoricalHead(2))


def test_value_normalization_keeps_values_in_reward_units():
    model = _norm_value_model()
    obs = torch.randn(8, 4)
    raw = model.critic(obs).squeeze(-1)
    assert torch.equal(model.value(obs), raw)  # statistics start at mean 0, std 1
    targets = 100.0 + 10.0 * torch.randn(100_000, dtype=torch.float64)
    model.normalization.update_value(targets)
    mean, std = targets.mean().item(), targets.std(correction=0).item()
    assert abs(model.normalization.value_mean.item() - mean) < 1e-3
    assert abs(model.normalization.value_std.item() - std) < 1e-3
    torch.testing.assert_close(model.value(obs), raw * std + mean, rtol=1e-5, atol=1e-4)
    assert _norm_value_model(norm_value=False).normalization.value_scale() is None


def test_value_normalization_measures_the_value_loss_in_stds_of_the_targets():
    """With a learning rate of 0 nothing moves, so the reported loss is the one of the initial critic."""
    model = _norm_value_model()
    obs = torch.randn(64, 4)
    returns = 50.0 + 5.0 * torch.randn(64)
    with torch.no_grad():
        actions, logprobs, values = model.act(obs)
    stats = update(
        model,
        make_adam(model.parameters(), 0.0),
        Batch(obs, actions, logprobs, values, returns, returns),
        _settings(num_minibatches=1, update_epochs=1),
        torch.Generator(),
    )
    std = returns.double().std(correction=0).item()
    with torch.no_grad():
        expected = 0.5 * ((model.value(obs) - returns) / std).pow(2).mean().item()
    # 1e-3: the running statistics start from a prior of mean 0 and variance 1 with a weight of 1e-4 samples
    assert abs(stats["value_loss"] - expected) < 1e-3 * expected


def test_value_normalization_lets_the_critic_fit_targets_far_from_zero(one_thread):
    """A critic without value normalization, at CleanRL's learning rate, cannot reach targets of about 100 with
    a bias that Adam moves by at most about the learning rate per step; standardized targets are in reach at
    once."""
    args = PPOArgs.of(num_envs=4, num_steps=128, ent_coef=0.0)
    settings = UpdateSettings.from_args(args)
    explained = {}
    for norm_value in (False, True):
        model = _norm_value_model(norm_value=norm_value)
        optimizer = make_adam(model.parameters(), args.algorithm.learning_rate)
        for _ in range(30):
            obs = torch.randn(512, 4)
            returns = 100.0 + 20.0 * torch.tanh(obs[:, 0])
            with torch.no_grad():
                actions, logprobs, values = model.act(obs)
            update(
                model,
                optimizer,
                Batch(obs, actions, logprobs, values, torch.zeros(512), returns),
                settings,
                torch.Generator(),
            )
        obs = torch.randn(4096, 4)
        with torch.no_grad():
            explained[norm_value] = explained_variance(model.value(obs), 100.0 + 20.0 * torch.tanh(obs[:, 0]))
    assert explained[True] > 0.95 and explained[False] < 0.2, explained


def test_value_is_in_reward_units_where_the_critic_network_is_standardized():
    """Probe 1 without training: its targets are all 1, and a critic that has learned them standardized outputs 0.
    ``value`` is then 1, in the rewards' units, while ``critic`` says 0 (the PPO tutorial's check written with it
    would fail); with statistics of mean 100 and std 10, a network output of 0.5 is the value 105."""
    model = _norm_value_model()
    obs = torch.zeros(3, 4)
    last = model.critic[-1]
    with torch.no_grad():
        last.weight.zero_(), last.bias.zero_()  # the network outputs 0 for every observation
        model.update_value_normalization(torch.ones(512))  # probe 1's targets
        critic = model.critic(obs).squeeze(-1)
        assert critic.tolist() == [0.0, 0.0, 0.0]
        torch.testing.assert_close(model.value(obs), torch.ones(3), rtol=0, atol=1e-6)
        model.normalization.value_mean.fill_(100.0), model.normalization.value_std.fill_(10.0)
        last.bias.fill_(0.5)
        assert model.critic(obs).squeeze(-1).tolist() == [0.5, 0.5, 0.5]
        assert model.value(obs).tolist() == [105.0, 105.0, 105.0]
        raw = _norm_value_model(norm_value=False)  # no statistics: the critic's network outputs the value
        torch.testing.assert_close(raw.value(obs), raw.critic(obs).squeeze(-1), rtol=0, atol=0)


def test_value_statistics_change_without_moving_any_value():
    """PopArt's output preservation: the critic's last layer absorbs each change of mean and std."""
    for shared in (False, True):
        torch.manual_seed(0)
        spec = NetworkSpec(2, (4,), NetworkSettings(shared_network=shared, norm_value=True))
        model = ActorCritic(spec, CategoricalHead(2))
        obs = torch.randn(16, 4)
        model.update_value_normalization(100.0 + 10.0 * torch.randn(512))  # the first: nothing to preserve
        assert abs(model.normalization.value_mean.item() - 100.0) < 2.0
        for targets in (300.0 + 50.0 * torch.randn(512), -3.0 + 0.01 * torch.randn(512)):
            before, mean = model.value(obs), model.normalization.value_mean.item()
            model.update_value_normalization(targets)
            assert abs(model.normalization.value_mean.item() - mean) > 50.0  # the statistics moved
            torch.testing.assert_close(model.value(obs), before, rtol=1e-5, atol=1e-4)


def test_value_statistics_forget_the_early_spread_of_the_targets():
    """Each batch weighs 1/10 (--value-norm-horizon's default) once the statistics are full, so after 50 batches of spread 1 and 50 of
    spread 0.01 the std is sqrt(0.9 ** 50 + (1 - 0.9 ** 50) * 0.01 ** 2) = 0.0725. Statistics of every target
    since the start would say 0.707, 28 times the late targets' own spread, which left the reach task's critic
    unable to tell its states apart (docs/HEALTH.md, explained_variance)."""
    assert (
        PPOArgs().network.value_norm_horizon == UpdateSettings.from_args(PPOArgs()).value_norm_horizon == 10
    )
    norm = _norm_value_model().normalization
    signs = torch.tensor([1.0, -1.0]).repeat(256)  # mean 0, variance exactly spread ** 2
    for spread in [1.0] * 50 + [0.01] * 50:
        norm.update_value(spread * signs, 10)
    expected = math.sqrt(0.9**50 + (1 - 0.9**50) * 0.01**2 + norm.eps)
    assert abs(norm.value_std.item() - expected) < 1e-5 * expected
    assert norm.value_mean.item() == 0.0
    every = _norm_value_model().normalization  # --value-norm-horizon 0: every target since the start
    for spread in [1.0] * 50 + [0.01] * 50:
        every.update_value(spread * signs, 0)
    assert abs(every.value_std.item() - math.sqrt((1 + 0.01**2) / 2)) < 1e-3


def test_the_total_loss_adds_the_value_term_and_subtracts_the_entropy_bonus():
    """Detail 10: ``policy + vf_coef * value - ent_coef * entropy`` is minimized, so a positive ent_coef raises
    the policy's entropy where a negative one lowers it, and vf_coef moves the critic towards the returns."""
    entropies, errors = {}, {}
    for ent_coef, vf_coef in ((1.0, 0.0), (-1.0, 0.0), (0.0, 1.0)):
        model, opt, batch = _setup()
        # Zero advantages: no policy gradient, so only the entropy bonus moves the actor.
        batch = Batch(batch.obs, batch.actions, batch.logprobs, batch.values, torch.zeros(64), batch.returns)
        update(
            model,
            opt,
            batch,
            _settings(ent_coef=ent_coef, vf_coef=vf_coef, norm_value=False),
            torch.Generator(),
        )
        with torch.no_grad():
            _, entropy, values = model.evaluate(batch.obs, batch.actions)
        entropies[ent_coef] = entropy.mean().item()
        errors[vf_coef] = (values - batch.returns).pow(2).mean().item()
    assert entropies[1.0] > entropies[-1.0]
    assert errors[1.0] < errors[0.0]
