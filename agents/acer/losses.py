"""ACER's returns and corrections: pure functions over time-major `[T, B]` tensors.

Wang et al. 2017, "Sample Efficient Actor-Critic with Experience Replay",
as in chainerrl's `acer` (the seed), rebuilt over whole sequences. Names carry
their time offset: `r_t`, `discount_t`, `q_t` (Q(x_t, a_t)), `v_t` (V(x_t)),
`rho_t` (pi(a_t|x_t) / mu(a_t|x_t)).
"""

from typing import Optional

import tensorflow as tf


def _check_rank(name: str, x: tf.Tensor, rank: int) -> None:
    if x.shape.rank is not None and x.shape.rank != rank:
        raise ValueError(f'acer: `{name}` must have rank {rank}, got shape {x.shape}')


def retrace_targets(rewards: tf.Tensor, discounts: tf.Tensor, q_taken: tf.Tensor,
                    values: tf.Tensor, bootstrap_value: tf.Tensor, rhos: tf.Tensor,
                    c_bar: float = 1.0) -> tf.Tensor:
    """Q_ret targets `[T, B]`, computed backward from `bootstrap_value`.

    For t = T-1 .. 0:
      Q_ret = r_t + discount_t * Q_ret;  emit Q_ret for step t;
      Q_ret = min(c_bar, rho_t) * (Q_ret - q_t) + v_t.

    Args:
      rewards, discounts, q_taken, values, rhos: `[T, B]` (discount already
        includes gamma; 0 where the episode terminated).
      bootstrap_value: `[B]`, V(x_T).
      rhos: importance weights of the taken actions; for continuous actions
        pass `rho ** (1 / action_dim)` (the paper's trace coefficient).
      c_bar: truncation of the trace coefficient (`Q_opc` is `rhos=1`, `c_bar=1`).
    Returns:
      `[T, B]` targets, gradient stopped.
    """
    for name, x in [('rewards', rewards), ('discounts', discounts), ('q_taken', q_taken),
                    ('values', values), ('rhos', rhos)]:
        _check_rank(name, x, 2)
    _check_rank('bootstrap_value', bootstrap_value, 1)
    c_t = tf.minimum(tf.cast(c_bar, rhos.dtype), rhos)

    def step(q_ret, inputs):
        r_t, discount_t, q_t, v_t, c = inputs
        target = r_t + discount_t * q_ret
        return c * (target - q_t) + v_t, target

    # scan carries the pair (next Q_ret, emitted target); only the latter is returned.
    _, targets = tf.scan(
        lambda carry, inputs: step(carry[0], inputs),
        (rewards, discounts, q_taken, values, c_t),
        initializer=(bootstrap_value, tf.zeros_like(bootstrap_value)), reverse=True)
    return tf.stop_gradient(targets)


def truncated_policy_loss(log_pi_t: tf.Tensor, rho_t: tf.Tensor, advantage_t: tf.Tensor,
                          truncation_threshold: Optional[float]) -> tf.Tensor:
    """-min(c, rho_t) * log pi(a_t|x_t) * A_t, weight and advantage held fixed. `[T, B]`.

    `truncation_threshold=None` disables the truncation (weight rho_t).
    """
    weight = rho_t if truncation_threshold is None else tf.minimum(
        tf.cast(truncation_threshold, rho_t.dtype), rho_t)
    return -tf.stop_gradient(weight * advantage_t) * log_pi_t


def bias_correction_loss(log_pi: tf.Tensor, rho: tf.Tensor, advantage: tf.Tensor,
                         truncation_threshold: float) -> tf.Tensor:
    """The discrete bias-correction term, exact over all actions: `[..., A]` -> `[...]`.

    -sum_a max(0, 1 - c / rho(a)) * pi(a) * log pi(a) * (Q(a) - V), with the
    weight and advantage held fixed (`advantage` is Q(a) - V per action).
    """
    weight = tf.nn.relu(1.0 - truncation_threshold / rho) * tf.exp(log_pi)
    return -tf.reduce_sum(tf.stop_gradient(weight * advantage) * log_pi, -1)


def continuous_bias_correction_loss(log_pi_sampled: tf.Tensor, rho_sampled: tf.Tensor,
                                    advantage_sampled: tf.Tensor,
                                    truncation_threshold: float) -> tf.Tensor:
    """Bias correction with one action a' ~ pi: -max(0, 1 - c/rho(a')) log pi(a') A(a'). `[...]`."""
    weight = tf.nn.relu(1.0 - truncation_threshold / rho_sampled)
    return -tf.stop_gradient(weight * advantage_sampled) * log_pi_sampled


def trust_region_projection(g: tf.Tensor, k: tf.Tensor, delta: float) -> tf.Tensor:
    """z = g - max(0, (k.g - delta) / |k|^2) k, per row of the last axis. `[..., P]`.

    g: gradient of the policy objective w.r.t. the distribution statistics;
    k: gradient of KL(average policy || current policy) w.r.t. the same.
    """
    dot = tf.reduce_sum(k * g, -1, keepdims=True)
    norm_sq = tf.reduce_sum(k * k, -1, keepdims=True)
    scale = tf.nn.relu(dot - delta) / tf.maximum(norm_sq, 1e-12)
    return g - scale * k
