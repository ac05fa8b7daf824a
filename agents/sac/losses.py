"""SAC's losses and targets as pure functions of tensors.

Shapes: `N` is the batch of transitions, `R` the critic replicas, `n` the
actions of one discrete branch. Discrete branches follow ML-Agents: the Q
value of a joint action is the mean over branches of each branch's Q, and a
state's soft value is the mean over branches of the exact expectation over
that branch's actions (no sampling).
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf


def masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Mean of `x` `[N]` over the rows where `mask` `[N]` is 1 (0 when none is)."""
    return tf.reduce_sum(x * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def replica_min(q: tf.Tensor, reward_weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The pessimistic value over critic replicas, `[R, ..., k]` -> `[..., k]`.

    Scalar rewards (`reward_weights` None): the minimum over replicas. Reward
    components (ALF's rule): the minimum of sign(w_c) Q_c, times sign(w_c), per
    component c: a component with a negative weight takes its maximum, so each
    component is pessimistic for the weighted value the actor maximises. A weight
    of 0 counts as positive (ALF's sign(0) = 0 would zero that component's
    bootstrap value, leaving it to learn the immediate reward only).
    """
    if reward_weights is None:
        return tf.reduce_min(q, 0)
    sign = tf.where(reward_weights < 0, -1.0, 1.0)
    return tf.reduce_min(q * sign, 0) * sign


def discrete_soft_value(q_values: Sequence[tf.Tensor], log_probs: Sequence[tf.Tensor],
                        alphas: Sequence[tf.Tensor], entropy: bool = True) -> tf.Tensor:
    """Mean over branches of sum_a pi_b(a) (Q_b(a) - alpha_b log pi_b(a)), exact.

    q_values, log_probs: per branch `[N, n_b]`; alphas: per branch scalars.
    `entropy=False` drops the alpha terms. Returns `[N]`.
    """
    values = []
    for q, log_p, alpha in zip(q_values, log_probs, alphas):
        inside = q - alpha * log_p if entropy else q
        values.append(tf.reduce_sum(tf.exp(log_p) * inside, -1))
    return tf.add_n(values) / len(values)


def critic_loss(q_taken: tf.Tensor, targets: tf.Tensor, mask: tf.Tensor,
                weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Per replica 0.5 * mean (Q_r - y)^2 over valid rows.

    q_taken `[R, N]`, targets `[N]` (not differentiated), mask `[N]` -> `[R]`.
    With reward components, q_taken `[R, N, k]` and targets `[N, k]`: the
    squared errors of a row's components add up; a mask `[N, k]` says which
    components each row learns (a row counts as valid if any). `weights` `[N]`
    (prioritized replay's importance weights) scale each row's error; the mean
    still divides by the number of valid rows.
    """
    error = q_taken - tf.stop_gradient(targets)[None]
    squared = tf.square(error)
    if len(mask.shape) == 2:
        squared = squared * mask[None]
        mask = tf.reduce_max(mask, -1)
    if len(squared.shape) == 3:
        squared = tf.reduce_sum(squared, -1)
    count = tf.maximum(tf.reduce_sum(mask), 1.0)
    if weights is not None:
        mask = mask * weights
    return 0.5 * tf.reduce_sum(squared * mask[None], -1) / count


def abs_td_errors(q_taken: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Each row's |TD error| `[N]`: the mean over replicas of |Q_r - y| (summed over
    reward components); shapes as `critic_loss`."""
    error = tf.abs(q_taken - tf.stop_gradient(targets)[None])
    if len(error.shape) == 3:
        error = tf.reduce_sum(error, -1)
    return tf.reduce_mean(error, 0)


def continuous_actor_loss(q_values: tf.Tensor, log_prob: tf.Tensor,
                          alpha: tf.Tensor) -> tf.Tensor:
    """alpha log pi(a|s) - Q(s, a) per row, a a reparameterised sample: `[N]`."""
    return alpha * log_prob - q_values


def discrete_actor_loss(q_values: Sequence[tf.Tensor], log_probs: Sequence[tf.Tensor],
                        alphas: Sequence[tf.Tensor]) -> tf.Tensor:
    """Mean over branches of sum_a pi_b(a) (alpha_b log pi_b(a) - Q_b(a)): `[N]`.

    The actor's gradient flows through pi and, for mixed actions, through the
    continuous action inside Q; the caller differentiates the actor only.
    """
    return -discrete_soft_value(q_values, log_probs, alphas)


def entropy_penalty(entropy: tf.Tensor, anchor: tf.Tensor) -> tf.Tensor:
    """Stable Discrete SAC's penalty (H_mu - H)^2, the anchor H_mu (the acting policy's
    entropy per row, or a slow average of the entropy) a constant: it slows the
    entropy's fall once the critics tell the actions apart, where a low temperature
    alone would let it collapse in tens of updates. `[N]` or `[]` both (broadcast);
    returns their shape."""
    return tf.square(tf.stop_gradient(anchor) - entropy)


def action_spread(q: tf.Tensor, allowed: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Each row's standard deviation of a branch's action values, over the actions
    `allowed` (`[N, n]`, 1 where an action mask allows one; None: all): q `[N, n]` ->
    `[N]`, not differentiated. The scale of the critics' action gaps."""
    q = tf.stop_gradient(q)
    if allowed is None:
        allowed = tf.ones_like(q)
    weights = allowed / tf.maximum(tf.reduce_sum(allowed, -1, keepdims=True), 1.0)
    mean = tf.reduce_sum(weights * q, -1, keepdims=True)
    return tf.sqrt(tf.reduce_sum(weights * tf.square(q - mean), -1))


def rising_scale(scale: tf.Tensor, batch: tf.Tensor, tau: float, first: tf.Tensor) -> tf.Tensor:
    """A running scale's next value, elementwise: `batch` at the `first` update and
    wherever it is larger (it rises at once), else `tau` of the way down toward it, so
    a jump in the action values is followed in one update and a lull only slowly."""
    moved = tf.maximum(batch, (1.0 - tau) * scale + tau * batch)
    return tf.where(first, batch, moved)


def temperature_loss(log_alpha: tf.Tensor, entropy: tf.Tensor, target_entropy: float,
                     mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """log_alpha * mean (H - target), H not differentiated: alpha rises while the
    policy's entropy is below the target and falls while above. entropy `[N]`;
    `mask` `[N]` (optional): the mean is over the rows where it is 1."""
    gap = tf.stop_gradient(entropy) - target_entropy
    return log_alpha * (tf.reduce_mean(gap) if mask is None else masked_mean(gap, mask))


def masked_target_entropy(target_entropy: tf.Tensor, allowed: tf.Tensor) -> tf.Tensor:
    """A discrete branch's entropy target per row under an action mask: `[N]`.

    `target_entropy` (scalar) is the target of the whole branch of n actions
    (`allowed` `[N, n]`, 1 where the mask allows an action); a row that allows k
    actions can reach at most log k, so its target is scaled by log k / log n: the
    same fraction of its largest entropy (0 where one action is left). Without
    this, a default target of 0.2 log n would exceed log k for k = 1 and drive
    alpha up without bound.
    """
    n = allowed.shape[-1]
    if n is None or n < 2:
        return tf.zeros_like(allowed[:, 0]) + target_entropy
    k = tf.maximum(tf.reduce_sum(tf.cast(allowed > 0, tf.float32), -1), 1.0)
    return target_entropy * tf.math.log(k) / float(np.log(n))


def clip_gradient(x: tf.Tensor, limit: float) -> tf.Tensor:
    """Identity forward; the gradient reaching `x` is clipped to [-limit, limit]."""

    @tf.custom_gradient
    def identity(y):
        return tf.identity(y), lambda dy: tf.clip_by_value(dy, -limit, limit)

    return identity(x)
