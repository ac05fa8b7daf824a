"""Polyak averages (`agents.policy_average`) against numpy loops."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents.policy_average import RECENT, PolicyAverage, soft_update


def np_rate(tau, n):
    """The average's step after the n-th update (the module's doc)."""
    return min(1.0, max(tau, 1.0 / (RECENT * n)))


def _variables(seed=0):
    rng = np.random.default_rng(seed)
    return [tf.Variable(rng.normal(size=(3, 2)).astype(np.float32)),
            tf.Variable(rng.normal(size=(2,)).astype(np.float32))]


def test_soft_update_moves_targets_by_tau():
    source = [tf.Variable([1.0, 2.0])]
    target = [tf.Variable([0.0, 10.0])]
    soft_update(target, source, 0.25)
    np.testing.assert_allclose(target[0].numpy(), [0.25, 0.25 * 2.0 + 0.75 * 10.0])


@pytest.mark.parametrize('tau', [0.25, 0.02])
def test_update_is_the_exponential_average_of_the_weights_after_each_update(tau):
    variables = _variables()
    average = PolicyAverage(variables, tau=tau)
    expected = [v.numpy().copy() for v in variables]
    rng = np.random.default_rng(1)
    update = tf.function(lambda: average.update(variables), autograph=False)
    for n in range(1, 61):  # the rate is 1, then 1 / (RECENT * n), then tau (at 0.25)
        for v in variables:  # a learner's update
            v.assign_add(rng.normal(size=v.shape).astype(np.float32))
        update()
        rate = np_rate(tau, n)
        expected = [rate * v.numpy() + (1 - rate) * e for v, e in zip(variables, expected)]
        if n <= 1 / RECENT:  # the first updates: the weights themselves
            np.testing.assert_allclose(average.weights[0].numpy(), variables[0].numpy())
    for e, a in zip(expected, average.weights):
        np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-5)
    assert float(average.updates.numpy()) == 60
    assert not any(a.trainable for a in average.weights)


def test_swapped_into_holds_the_average_inside_and_the_learned_weights_after():
    variables = _variables()
    average = PolicyAverage(variables, tau=0.5)
    learned = [v.numpy() + 1.0 for v in variables]
    for v, value in zip(variables, learned):
        v.assign(value)
    with pytest.raises(RuntimeError):  # even a block that raises puts them back
        with average.swapped_into(variables):
            for v, a in zip(variables, average.weights):
                np.testing.assert_array_equal(v.numpy(), a.numpy())
            raise RuntimeError('evaluation failed')
    for v, value in zip(variables, learned):
        np.testing.assert_array_equal(v.numpy(), value)


def test_bad_tau_and_other_variables_are_refused():
    with pytest.raises(ValueError, match='tau in'):
        PolicyAverage(_variables(), tau=0.0)
    average = PolicyAverage(_variables(), tau=0.1)
    with pytest.raises(ValueError, match='other shapes'):
        average.update(_variables()[:1])
