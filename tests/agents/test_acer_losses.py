"""ACER's returns and corrections against plain numpy and hand-computed values."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents.acer import losses


def retrace_reference(rewards, discounts, q_taken, values, bootstrap_value, rhos, c_bar):
    """chainerrl's per-step loop, ported to numpy one environment at a time."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        q_ret = bootstrap_value[b]
        for t in reversed(range(T)):
            q_ret = rewards[t, b] + discounts[t, b] * q_ret
            out[t, b] = q_ret
            q_ret = min(c_bar, rhos[t, b]) * (q_ret - q_taken[t, b]) + values[t, b]
    return out


def random_inputs(seed, T=7, B=3, terminals=True):
    rng = np.random.default_rng(seed)
    discounts = np.full((T, B), 0.9)
    if terminals:
        discounts[2, 0] = 0.0
        discounts[5, 2] = 0.0
    return dict(rewards=rng.normal(size=(T, B)), discounts=discounts,
                q_taken=rng.normal(size=(T, B)), values=rng.normal(size=(T, B)),
                bootstrap_value=rng.normal(size=B), rhos=rng.uniform(0.1, 3.0, (T, B)))


@pytest.mark.parametrize('c_bar', [1.0, 0.5, 10.0])
@pytest.mark.parametrize('seed', [0, 1])
def test_retrace_matches_numpy_loop(seed, c_bar):
    inputs = random_inputs(seed)
    got = losses.retrace_targets(**{k: tf.constant(v) for k, v in inputs.items()}, c_bar=c_bar)
    np.testing.assert_allclose(got.numpy(), retrace_reference(**inputs, c_bar=c_bar), rtol=1e-10)


def test_retrace_continuous_trace_coefficient():
    inputs = random_inputs(3)
    action_dim = 3
    inputs['rhos'] = inputs['rhos'] ** (1.0 / action_dim)
    got = losses.retrace_targets(**{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(got.numpy(), retrace_reference(**inputs, c_bar=1.0), rtol=1e-10)


def test_retrace_terminal_cuts_the_sequence():
    inputs = random_inputs(4, terminals=False)
    inputs['discounts'][3] = 0.0
    full = losses.retrace_targets(**{k: tf.constant(v) for k, v in inputs.items()}).numpy()
    head = {k: (v[:4] if k != 'bootstrap_value' else np.full(3, 123.0)) for k, v in inputs.items()}
    head_targets = losses.retrace_targets(**{k: tf.constant(v) for k, v in head.items()}).numpy()
    np.testing.assert_allclose(full[:4], head_targets, rtol=1e-10)


def test_retrace_wrong_rank():
    inputs = {k: tf.constant(v) for k, v in random_inputs(0).items()}
    inputs['rewards'] = inputs['rewards'][..., None]
    with pytest.raises(ValueError, match='rewards'):
        losses.retrace_targets(**inputs)


def test_q_opc_is_retrace_with_unit_traces():
    inputs = random_inputs(5)
    inputs['rhos'] = np.ones_like(inputs['rhos'])
    got = losses.retrace_targets(**{k: tf.constant(v) for k, v in inputs.items()}).numpy()
    np.testing.assert_allclose(got, retrace_reference(**inputs, c_bar=1.0), rtol=1e-10)


def test_bias_correction_three_actions_by_hand():
    # pi = (0.5, 0.3, 0.2), rho = (2, 20, 40), c = 10, Q - V = (1, -2, 3):
    # weights max(0, 1 - 10/rho) = (0, 0.5, 0.75).
    pi = np.array([0.5, 0.3, 0.2])
    log_pi = tf.constant(np.log(pi)[None])
    loss = losses.bias_correction_loss(log_pi, tf.constant([[2.0, 20.0, 40.0]], tf.float64),
                                       tf.constant([[1.0, -2.0, 3.0]], tf.float64), 10.0)
    expected = -(0.0 + 0.5 * 0.3 * np.log(0.3) * -2.0 + 0.75 * 0.2 * np.log(0.2) * 3.0)
    np.testing.assert_allclose(loss.numpy(), [expected], rtol=1e-12)


def test_bias_correction_gradient_flows_through_log_pi_only():
    logits = tf.Variable([[0.1, -0.2, 0.3]])
    advantage = tf.Variable([[1.0, -2.0, 3.0]])
    with tf.GradientTape() as tape:
        log_pi = tf.nn.log_softmax(logits)
        loss = losses.bias_correction_loss(log_pi, tf.constant([[20.0, 20.0, 20.0]]), advantage, 10.0)
    g_logits, g_adv = tape.gradient(loss, [logits, advantage])
    assert g_adv is None
    assert np.abs(g_logits.numpy()).sum() > 0


def test_truncated_policy_loss():
    log_pi = tf.constant([[-1.0, -2.0]])
    rho = tf.constant([[20.0, 0.5]])
    advantage = tf.constant([[1.0, 2.0]])
    np.testing.assert_allclose(
        losses.truncated_policy_loss(log_pi, rho, advantage, 10.0).numpy(), [[10.0, 2.0]])
    np.testing.assert_allclose(
        losses.truncated_policy_loss(log_pi, rho, advantage, None).numpy(), [[20.0, 2.0]])


def test_continuous_bias_correction():
    loss = losses.continuous_bias_correction_loss(
        tf.constant([-1.0, -1.0]), tf.constant([5.0, 20.0]), tf.constant([2.0, 2.0]), 10.0)
    np.testing.assert_allclose(loss.numpy(), [0.0, 0.5 * 2.0 * 1.0])


def test_trust_region_inactive_constraint_returns_g():
    g = tf.constant([[1.0, 2.0]])
    k = tf.constant([[0.1, 0.1]])  # k.g = 0.3 < delta
    np.testing.assert_allclose(losses.trust_region_projection(g, k, 1.0).numpy(), g.numpy())


def test_trust_region_active_constraint_meets_delta():
    rng = np.random.default_rng(0)
    g = tf.constant(rng.normal(size=(5, 4)) * 5)
    k = tf.constant(rng.normal(size=(5, 4)))
    delta = 0.5
    z = losses.trust_region_projection(g, k, delta).numpy()
    kg = np.sum(k.numpy() * g.numpy(), -1)
    kz = np.sum(k.numpy() * z, -1)
    active = kg > delta
    assert active.any() and (~active).any()
    np.testing.assert_allclose(kz[active], delta, rtol=1e-10)
    np.testing.assert_allclose(z[~active], g.numpy()[~active])
