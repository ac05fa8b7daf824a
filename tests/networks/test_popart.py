"""PopArt (networks/popart.py) against numpy ports written here, and the heads using it."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.networks import popart
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.numpy_core import NumpyCore


def _numpy_moments(batches, masks, step_size):
    """The moments after merging `batches` `[N, G]` one at a time, as a plain loop."""
    groups = batches[0].shape[1]
    mean, second, count = np.zeros(groups), np.ones(groups), 0
    for targets, mask in zip(batches, masks):
        count += 1
        for g in range(groups):
            valid = [t for t, m in zip(targets[:, g], mask[:, g]) if m]
            if not valid:
                continue
            rate = max(step_size, 1.0 / count)
            mean[g] += rate * (np.mean(valid) - mean[g])
            second[g] += rate * (np.mean(np.square(valid)) - second[g])
    return mean, second


@pytest.mark.parametrize('step_size', [1e-3, 0.5])
def test_moments_match_a_numpy_loop(step_size):
    rng = np.random.default_rng(0)
    batches = [rng.normal(5.0 * i, 2.0 + i, (7, 3)).astype(np.float32) for i in range(6)]
    masks = [rng.uniform(size=(7, 3)) < 0.7 for _ in range(6)]
    masks[2][:, 1] = False  # a group with no valid entry keeps its moments
    mean, second, count = tf.zeros([3]), tf.ones([3]), tf.constant(0.0)
    for targets, mask in zip(batches, masks):
        mean, second, count = popart.updated_moments(mean, second, count, targets, mask,
                                                     step_size)
    want_mean, want_second = _numpy_moments(batches, masks, step_size)
    np.testing.assert_allclose(mean.numpy(), want_mean, rtol=1e-5)
    np.testing.assert_allclose(second.numpy(), want_second, rtol=1e-5)
    np.testing.assert_allclose(
        popart.std_from_moments(mean, second).numpy(),
        np.clip(np.sqrt(want_second - want_mean ** 2), popart.STD_MIN, popart.STD_MAX),
        rtol=1e-4)


@pytest.mark.parametrize('groups', [1, 4])
def test_an_update_preserves_every_unnormalised_output(groups):
    rng = np.random.default_rng(1)
    layer = popart.PopArtLinear(4, normalized=True, groups=groups, step_size=0.3)
    features = tf.constant(rng.normal(size=(16, 5)), tf.float32)
    for scale in (1.0, 100.0, 1e-2, 1e4):
        before = layer(features).numpy()
        targets = rng.normal(scale, scale, (32, groups)).astype(np.float32)
        layer.update(targets, np.ones_like(targets))
        mean, std = layer.statistics()
        # Exact up to float32 rounding at the statistics' scale.
        tolerance = 1e-5 * float(tf.reduce_max(tf.abs(mean) + std)) + 1e-6
        np.testing.assert_allclose(layer(features).numpy(), before, rtol=0, atol=tolerance)
    mean, std = layer.statistics()
    # The normalised output is the unnormalised one in sigma units.
    np.testing.assert_allclose(layer.normalized(features).numpy(),
                               layer.normalize(layer(features)).numpy()
                               if groups == 4 else (layer(features).numpy() - mean[0]) / std[0],
                               rtol=1e-3, atol=1e-3)
    assert std.numpy().min() > 1.0  # the statistics followed the large targets


def test_without_normalisation_the_layer_is_plain_linear():
    layer = popart.PopArtLinear(2)
    features = tf.ones([3, 4])
    out = layer(features)
    layer.update(tf.fill([3, 1], 50.0), tf.ones([3, 1]))  # a no-op
    np.testing.assert_array_equal(layer(features).numpy(), out.numpy())
    np.testing.assert_array_equal(out.numpy(), (features @ layer.w + layer.b).numpy())
    assert layer.std().numpy() == 1.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match='groups'):
        popart.PopArtLinear(3, normalized=True, groups=2)
    with pytest.raises(ValueError, match='step_size'):
        popart.PopArtLinear(1, normalized=True, step_size=0.0)


def test_rescaled_matches_the_paper_formula():
    rng = np.random.default_rng(2)
    w, b = rng.normal(size=(3, 2)), rng.normal(size=2)
    old_mean, old_std, new_mean, new_std = 1.0, 2.0, -3.0, 0.5
    w2, b2 = popart.rescaled(tf.constant(w), tf.constant(b), old_mean, old_std, new_mean,
                             new_std)
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(new_std * (x @ w2.numpy() + b2.numpy()) + new_mean,
                               old_std * (x @ w + b) + old_mean, rtol=1e-10)


def _core(**kwargs):
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    core = ActorCriticCore(space, ActionSpace(gym.spaces.Discrete(2)), hidden_sizes=(8,),
                           lstm_size=4, value_normalization=True, **kwargs)
    core.create_variables()
    return core


def test_the_core_and_its_numpy_mirror_give_values_in_the_rewards_units():
    core = _core()
    head = core.parts.baseline_head
    head.update(tf.fill([10, 1], 200.0) + tf.range(10.0)[:, None] * 30.0, tf.ones([10, 1]))
    rng = np.random.default_rng(3)
    obs = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    first = np.ones(5, bool)
    prev_action = (np.zeros(5, np.int32),)
    prev_reward = np.zeros(5, np.float32)
    out, _ = core(CoreInputs(obs, prev_action, prev_reward, first), core.initial_state(5))
    mean, std = head.statistics()
    np.testing.assert_allclose(out.baseline.numpy(),
                               std[0] * head.normalized(out.features).numpy() + mean[0],
                               rtol=1e-5)
    assert np.abs(out.baseline.numpy() - 335.0).max() < 10 * std[0]  # near the targets
    mirror = NumpyCore(core, core.action_space, seed=0)
    baseline = mirror.step(obs, prev_action, prev_reward, first, mirror.initial_state(5))[3]
    np.testing.assert_allclose(baseline, out.baseline.numpy(), rtol=1e-4)
