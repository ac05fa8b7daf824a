"""CLEAR's losses against hand-computed values."""

import math

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.clear import losses
from reverb_agents.networks.distributions import ActionSpace


def test_policy_cloning_is_kl_behaviour_to_current_by_hand():
    space = ActionSpace(gym.spaces.Discrete(2))
    # mu = (0.5, 0.5) (logits 0, 0); pi = (0.2, 0.8) (logits log .2, log .8).
    mu_logits = tf.constant([[[0.0, 0.0]]])  # [T=1, B=1, 2]
    pi_logits = tf.constant([[[math.log(0.2), math.log(0.8)]]])
    kl = losses.policy_cloning_loss(space, (mu_logits,), (pi_logits,))
    expected = 0.5 * math.log(0.5 / 0.2) + 0.5 * math.log(0.5 / 0.8)
    assert kl.shape == (1, 1)
    np.testing.assert_allclose(kl.numpy()[0, 0], expected, rtol=1e-6)


def test_policy_cloning_gaussian_by_hand():
    space = ActionSpace(gym.spaces.Box(-1, 1, (1,)))
    # mu = N(0, 1), pi = N(1, e^1): KL = log(s_pi/s_mu) + (s_mu^2 + (m_mu-m_pi)^2)/(2 s_pi^2) - 1/2.
    mu = tf.constant([[[0.0, 0.0]]])
    pi = tf.constant([[[1.0, 1.0]]])
    kl = losses.policy_cloning_loss(space, (mu,), (pi,))
    expected = 1.0 + (1.0 + 1.0) / (2 * math.e ** 2) - 0.5
    np.testing.assert_allclose(kl.numpy()[0, 0], expected, rtol=1e-6)


def test_policy_cloning_gradient_flows_only_to_current_policy():
    space = ActionSpace(gym.spaces.Discrete(3))
    mu = tf.Variable([[[0.1, 0.2, 0.3]]])
    pi = tf.Variable([[[1.0, -1.0, 0.0]]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(losses.policy_cloning_loss(space, (mu,), (pi,)))
    g_mu, g_pi = tape.gradient(loss, [mu, pi])
    assert g_mu is None
    assert np.abs(g_pi.numpy()).sum() > 0


def test_value_cloning_by_hand():
    v = tf.constant([[1.0, 2.0], [3.0, -1.0]])  # [T=2, B=2]
    v_mu = tf.constant([[0.5, 2.0], [1.0, 1.0]])
    np.testing.assert_allclose(losses.value_cloning_loss(v, v_mu).numpy(),
                               [[0.25, 0.0], [4.0, 4.0]])


def test_value_cloning_gradient_is_two_times_difference():
    v = tf.Variable([[3.0]])
    v_mu = tf.Variable([[1.0]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(losses.value_cloning_loss(v, v_mu))
    g_v, g_mu = tape.gradient(loss, [v, v_mu])
    np.testing.assert_allclose(g_v.numpy(), [[4.0]])
    assert g_mu is None


def test_baseline_loss_by_hand_and_target_fixed():
    vs = tf.Variable([[2.0, 0.0]])
    v = tf.Variable([[1.0, 1.0]])
    with tf.GradientTape() as tape:
        loss = losses.baseline_loss(vs, v)
        total = tf.reduce_sum(loss)
    np.testing.assert_allclose(loss.numpy(), [[0.5, 0.5]])
    g_vs, g_v = tape.gradient(total, [vs, v])
    assert g_vs is None
    np.testing.assert_allclose(g_v.numpy(), [[-1.0, 1.0]])


@pytest.mark.parametrize('clip_advantage,expected', [(False, [[0.5, -0.5]]), (True, [[0.5, 0.0]])])
def test_policy_gradient_loss(clip_advantage, expected):
    log_pi = tf.constant([[-0.5, -0.5]])
    advantage = tf.constant([[1.0, -1.0]])
    np.testing.assert_allclose(
        losses.policy_gradient_loss(log_pi, advantage, clip_advantage).numpy(), expected)


def test_entropy_loss_is_negative_entropy():
    np.testing.assert_allclose(losses.entropy_loss(tf.constant([[0.7]])).numpy(), [[-0.7]])


@pytest.mark.parametrize('mode,expected', [
    ('abs_one', [-1.0, -0.5, 0.0, 0.5, 1.0]),
    ('none', [-3.0, -0.5, 0.0, 0.5, 3.0]),
    ('soft_asymmetric', [0.3 * 5 * math.tanh(-3 / 5), 0.3 * 5 * math.tanh(-0.1), 0.0,
                         5 * math.tanh(0.1), 5 * math.tanh(3 / 5)]),
])
def test_clip_rewards(mode, expected):
    r = tf.constant([-3.0, -0.5, 0.0, 0.5, 3.0])
    np.testing.assert_allclose(returns.clip_rewards(r, mode).numpy(), expected, rtol=1e-6)


def test_clip_rewards_unknown_mode():
    with pytest.raises(ValueError, match='reward_clipping'):
        returns.clip_rewards(tf.constant([1.0]), 'bogus')
