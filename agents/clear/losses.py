"""CLEAR's losses: pure functions over time-major `[T, B]` tensors.

Each returns the per-step loss `[T, B]`; the learner masks, weights and sums.
Cloning losses compare the behaviour policy mu and baseline V_mu stored with
replayed data to the current pi and V (Rolnick et al., 2019, "Experience
Replay for Continual Learning").
"""

from typing import Sequence

import tensorflow as tf

from reverb_agents.networks.distributions import ActionSpace


def policy_gradient_loss(log_pi_t: tf.Tensor, advantage_t: tf.Tensor,
                         clip_advantage: bool = False) -> tf.Tensor:
    """-log pi(a_t|x_t) * A_t with A_t held fixed. `[T, B]` -> `[T, B]`.

    `clip_advantage` keeps only positive advantages (the seed's option).
    """
    advantage_t = tf.stop_gradient(advantage_t)
    if clip_advantage:
        advantage_t = tf.nn.relu(advantage_t)
    return -log_pi_t * advantage_t


def baseline_loss(vs_t: tf.Tensor, v_t: tf.Tensor) -> tf.Tensor:
    """0.5 * (vs_t - V(x_t))^2 with the target held fixed. `[T, B]` -> `[T, B]`."""
    return 0.5 * tf.square(tf.stop_gradient(vs_t) - v_t)


def entropy_loss(entropy_t: tf.Tensor) -> tf.Tensor:
    """Negative entropy (minimising it maximises entropy). `[T, B]` -> `[T, B]`."""
    return -entropy_t


def policy_cloning_loss(action_space: ActionSpace,
                        behaviour_params_t: Sequence[tf.Tensor],
                        params_t: Sequence[tf.Tensor]) -> tf.Tensor:
    """KL(mu(.|x_t) || pi(.|x_t)), mu held fixed. Per-leaf `[T, B, P]` -> `[T, B]`."""
    behaviour_params_t = tf.nest.map_structure(tf.stop_gradient, behaviour_params_t)
    return action_space.kl_divergence(behaviour_params_t, params_t)


def value_cloning_loss(v_t: tf.Tensor, behaviour_v_t: tf.Tensor) -> tf.Tensor:
    """(V(x_t) - V_mu(x_t))^2, V_mu held fixed. `[T, B]` -> `[T, B]`."""
    return tf.square(v_t - tf.stop_gradient(behaviour_v_t))
