"""The shared optimiser settings reach the optimiser: numpy ports of the updates."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.learner_base import LearnerBase


def apply_twice(**optimizer):
    """A one-variable learner; two updates with fixed gradients. Returns the values."""
    config = configs.from_flat(CLEARConfig, {'learning_rate_schedule': 'constant',
                                             'clip_grad_norm': 0.0, **optimizer})
    learner = LearnerBase(config, name='test_learner')
    w = tf.Variable([1.0, -2.0, 3.0])
    replayed = tf.constant([False])
    values = []

    @tf.function
    def step(g):
        learner._apply([g], [w], replayed, tf.constant(1))

    for g in GRADIENTS:
        step(tf.constant(g))
        values.append(w.numpy().copy())
    return values


GRADIENTS = [np.array([0.5, -3.0, 0.0], np.float32), np.array([2.0, 1.0, -0.1], np.float32)]


@pytest.mark.parametrize('momentum, centered', [(0.0, False), (0.9, False), (0.0, True)])
def test_rmsprop_is_impalas(momentum, centered):
    lr, decay, eps = 0.01, 0.99, 0.1
    got = apply_twice(optimizer='rmsprop', learning_rate=lr, rmsprop_decay=decay,
                      rmsprop_epsilon=eps, rmsprop_momentum=momentum, rmsprop_centered=centered)
    # tf.compat.v1.train.RMSPropOptimizer: the mean square starts at 1.
    w = np.array([1.0, -2.0, 3.0])
    ms, mg, mom = np.ones(3), np.zeros(3), np.zeros(3)
    for g, value in zip(GRADIENTS, got):
        ms = decay * ms + (1 - decay) * g ** 2
        mg = decay * mg + (1 - decay) * g
        denominator = ms - mg ** 2 if centered else ms
        mom = momentum * mom + lr * g / np.sqrt(denominator + eps)
        w = w - mom
        np.testing.assert_allclose(value, w, rtol=1e-5)


def test_adam_takes_the_configured_moments():
    lr, b1, b2, eps = 0.01, 0.5, 0.9, 1e-3
    got = apply_twice(optimizer='adam', learning_rate=lr, adam_beta1=b1, adam_beta2=b2,
                      adam_epsilon=eps)
    w = np.array([1.0, -2.0, 3.0])
    m, v = np.zeros(3), np.zeros(3)
    for t, (g, value) in enumerate(zip(GRADIENTS, got), start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(value, w, rtol=1e-5)
