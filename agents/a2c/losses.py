"""A2C's losses: pure functions over time-major `[T, B]` tensors, each the per-step
loss `[T, B]` that the learner masks and sums."""

import tensorflow as tf


def policy_gradient_loss(log_pi_t: tf.Tensor, advantage_t: tf.Tensor) -> tf.Tensor:
    """-log pi(a_t|x_t) * A_t, the advantage held fixed."""
    return -log_pi_t * tf.stop_gradient(advantage_t)


def baseline_loss(return_t: tf.Tensor, v_t: tf.Tensor) -> tf.Tensor:
    """0.5 * (G_t - V(x_t))^2, the return held fixed."""
    return 0.5 * tf.square(tf.stop_gradient(return_t) - v_t)
