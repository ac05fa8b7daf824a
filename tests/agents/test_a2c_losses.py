"""A2C's losses against numpy loops written here, and its advantages: GAE's
lambda-returns, which the learner's baseline target is."""

import numpy as np
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.a2c import losses


def test_losses_match_numpy_loops():
    rng = np.random.default_rng(0)
    log_pi, advantage, target, value = (rng.normal(size=(4, 3)).astype(np.float32)
                                        for _ in range(4))
    pg = np.zeros((4, 3), np.float32)
    baseline = np.zeros((4, 3), np.float32)
    for t in range(4):
        for b in range(3):
            pg[t, b] = -log_pi[t, b] * advantage[t, b]
            baseline[t, b] = 0.5 * (target[t, b] - value[t, b]) ** 2
    np.testing.assert_allclose(losses.policy_gradient_loss(log_pi, advantage), pg, rtol=1e-6)
    np.testing.assert_allclose(losses.baseline_loss(target, value), baseline, rtol=1e-6)


def test_gradients_hold_the_advantage_and_the_target_fixed():
    log_pi, advantage = tf.Variable([[0.5]]), tf.Variable([[2.0]])
    with tf.GradientTape(persistent=True) as tape:
        pg = losses.policy_gradient_loss(log_pi, advantage)
        baseline = losses.baseline_loss(advantage, log_pi)
    assert tape.gradient(pg, advantage) is None
    np.testing.assert_allclose(tape.gradient(pg, log_pi), [[-2.0]])
    np.testing.assert_allclose(tape.gradient(baseline, log_pi), [[0.5 - 2.0]])


def test_the_baseline_target_is_the_lambda_return():
    # G^lambda_t = r_t + d_t ((1 - lambda) V_{t+1} + lambda G^lambda_{t+1}), G_T = V_T.
    rng = np.random.default_rng(1)
    r, v = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    d, bootstrap, lam = 0.9 * (rng.random((5, 2)) > 0.2), rng.normal(size=2), 0.8
    g = np.zeros((5, 2))
    next_g, next_v = bootstrap, bootstrap
    for t in reversed(range(5)):
        g[t] = r[t] + d[t] * ((1 - lam) * next_v + lam * next_g)
        next_g, next_v = g[t], v[t]
    advantage = returns.generalized_advantages(*(tf.constant(x, tf.float32)
                                                 for x in (r, d, v, bootstrap)), lam)
    np.testing.assert_allclose(advantage.numpy() + v, g, rtol=1e-5, atol=1e-5)
