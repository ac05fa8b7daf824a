"""Running observation statistics against numpy over everything seen."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.networks.normalizer import RunningNormalizer


def test_running_statistics_match_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    normalizer = RunningNormalizer(3, map='standardize')
    batches = [rng.normal([1.0, -2.0, 5.0], [0.5, 3.0, 0.1], size=(n, 3)).astype(np.float32)
               for n in (7, 64, 1, 30)]
    for batch in batches:
        normalizer.update(tf.constant(batch))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(normalizer.count.numpy(), len(everything))
    np.testing.assert_allclose(normalizer.mean.numpy(), everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(normalizer.variance.numpy(), everything.var(0), rtol=1e-4)
    x = rng.normal(size=(4, 3)).astype(np.float32) * 10
    expected = np.clip((x - everything.mean(0)) / np.sqrt(everything.var(0) + 1e-8), -5, 5)
    np.testing.assert_allclose(normalizer(tf.constant(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_before_any_update_it_is_the_identity_up_to_clipping():
    normalizer = RunningNormalizer(2)
    np.testing.assert_allclose(normalizer(tf.constant([[0.5, -7.0]])).numpy(), [[0.5, -5.0]],
                               rtol=1e-6)


def _rms_map(x, mean, variance, clip=5.0):
    """The 'rms' map, one feature at a time: divided by sqrt(mean^2 + variance), never
    centred."""
    out = np.empty_like(x)
    for d in range(x.shape[1]):
        out[:, d] = np.clip(x[:, d] / np.sqrt(mean[d] ** 2 + variance[d]), -clip, clip)
    return out


def test_the_rms_map_scales_a_centred_feature_as_standardising_does_and_keeps_an_offset_one():
    # cos of a pendulum near rest (mean 0.98, std 0.04), a velocity (std 3), an
    # observation scaled by 1000 and one offset by 1000 (std 1).
    rng = np.random.default_rng(1)
    normalizer = RunningNormalizer(4, map='rms')
    batch = rng.normal([0.98, 0.0, 0.0, 1000.0], [0.04, 3.0, 1000.0, 1.0],
                       size=(4096, 4)).astype(np.float32)
    normalizer.update(tf.constant(batch))
    x = batch[:8]
    got = normalizer(tf.constant(x)).numpy()
    np.testing.assert_allclose(got, _rms_map(x, batch.mean(0), batch.var(0)),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[:, 0], x[:, 0], atol=0.05)  # cos stays near its value
    standardized = (x - batch.mean(0)) / batch.std(0)
    np.testing.assert_allclose(got[:, 1:3], standardized[:, 1:3], atol=0.05)
    np.testing.assert_allclose(got[:, 3], 1.0, atol=0.01)  # the offset one: its spread lost
    # Standardising would clip cos at a swing (cos 0.5 is 12 stds below the mean);
    # this map keeps it.
    swing = np.array([[0.5, 0.0, 0.0, 1000.0]], np.float32)
    assert 0.4 < normalizer(tf.constant(swing)).numpy()[0, 0] < 0.6


def test_an_unknown_map_is_refused():
    with pytest.raises(ValueError, match='observation map'):
        RunningNormalizer(2, map='whiten')
