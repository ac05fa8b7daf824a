"""Running observation statistics against numpy over everything seen."""

import numpy as np
import tensorflow as tf

from reverb_agents.networks.normalizer import RunningNormalizer


def test_running_statistics_match_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    normalizer = RunningNormalizer(3)
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
