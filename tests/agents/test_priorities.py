"""Prioritized replay's pure functions against hand computations and numpy loops."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, priorities


def test_importance_weights_by_hand():
    # Three replayed rows of a table of 4 items sampled with P = 0.1, 0.4, 0.2, and one
    # fresh row; beta = 0.5: w_i = (N P_i)^-0.5 = 0.4^-0.5, 1.6^-0.5, 0.8^-0.5.
    probabilities = np.array([1.0, 0.1, 0.4, 0.2])
    table_size = np.array([1, 4, 4, 4])
    replayed = np.array([False, True, True, True])
    raw = np.array([0.4, 1.6, 0.8]) ** -0.5
    expected = np.concatenate([[1.0], raw / raw.max()])  # the largest is 1
    got = priorities.importance_weights(probabilities, table_size, replayed, 0.5).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got[1] == pytest.approx(1.0)  # the rarest row gets the largest weight
    # beta = 0: no correction; uniform sampling: every weight 1.
    np.testing.assert_allclose(
        priorities.importance_weights(probabilities, table_size, replayed, 0.0).numpy(), 1.0)
    np.testing.assert_allclose(priorities.importance_weights(
        np.full(3, 0.25), np.full(3, 4), np.ones(3, bool), 1.0).numpy(), 1.0, rtol=1e-6)


def test_sequence_priorities_against_a_loop():
    rng = np.random.default_rng(0)
    abs_td = np.abs(rng.normal(size=(5, 3))).astype(np.float32)
    mask = np.ones((5, 3), np.float32)
    mask[3:, 1] = 0.0  # the second sequence's last two steps are placeholders
    mask[:, 2] = 0.0  # the third has no valid step
    eta = 0.9
    expected = []
    for b in range(3):
        valid = [abs_td[t, b] for t in range(5) if mask[t, b]]
        expected.append(eta * max(valid) + (1 - eta) * sum(valid) / len(valid) if valid
                        else priorities.MIN_PRIORITY)
    got = priorities.sequence_priorities(tf.constant(abs_td), tf.constant(mask), eta).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_beta_anneals_linearly_to_one():
    assert float(priorities.annealed_exponent(0.4, 100, 0)) == pytest.approx(0.4)
    assert float(priorities.annealed_exponent(0.4, 100, 50)) == pytest.approx(0.7)
    assert float(priorities.annealed_exponent(0.4, 100, 500)) == pytest.approx(1.0)
    assert float(priorities.annealed_exponent(0.4, 0, 0)) == pytest.approx(1.0)


@pytest.mark.parametrize('values,message', [
    ({'priority_exponent': -0.1}, 'priority_exponent must be >= 0'),
    ({'replay_sampler': 'rank'}, 'replay_sampler must be one of'),
    ({'importance_sampling_exponent': 1.5}, 'importance_sampling_exponent must be in'),
    ({'replay_sampler': 'prioritized', 'replay_eviction': 'reservoir'}, 'one or the other'),
])
def test_replay_config_refuses_bad_priority_settings(values, message):
    with pytest.raises(ValueError, match=message):
        configs.ReplayConfig(**values)
