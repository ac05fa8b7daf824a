"""Prioritized replay (Schaul et al. 2016) as pure functions over time-major tensors.

With `--replay_sampler=prioritized` the `replay` table samples item i with
probability P(i) = p_i^alpha / sum_j p_j^alpha (Reverb's `Prioritized` selector
applies alpha = `priority_exponent` to the priorities the learner sets). The
learner corrects the bias this adds with importance weights
w_i = (N P(i))^-beta / max_j w_j over the batch's replayed rows, beta annealed
linearly from `importance_sampling_exponent` to 1, and after each step sets
each replayed item's priority from its TD errors: for a sequence, as R2D2,
p = eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over its learned steps.
New items enter at the largest priority the learner has set so far
(`replay.priorities`). Fresh (on-policy) rows have weight 1.
"""

import tensorflow as tf

# The key of a learner step's result holding its rows' new priorities `[B]`
# (`agents.contract`); only under prioritized sampling.
PRIORITIES = 'priorities'

# Items whose priority would be 0 are never sampled again; this floor keeps them alive.
MIN_PRIORITY = 1e-6


def annealed_exponent(initial: float, anneal_steps: int, step: tf.Tensor) -> tf.Tensor:
    """beta after `step` learner steps: linear from `initial` to 1 over `anneal_steps`
    (0: 1 from the start)."""
    if anneal_steps <= 0:
        return tf.constant(1.0)
    fraction = tf.minimum(tf.cast(step, tf.float32) / float(anneal_steps), 1.0)
    return initial + (1.0 - initial) * fraction


def importance_weights(probabilities: tf.Tensor, table_size: tf.Tensor, replayed: tf.Tensor,
                       beta: tf.Tensor) -> tf.Tensor:
    """Normalised importance weights `[B]` of a batch's rows.

    probabilities: `[B]` P(i) with which each replayed row's item was sampled;
    table_size: `[B]` N, the table's size at that sample; replayed: `[B]` bool.
    Replayed rows get (N P(i))^-beta divided by the largest of them (so every
    weight is in (0, 1]); fresh rows get 1.
    """
    replayed = tf.cast(replayed, tf.bool)
    n_p = tf.cast(table_size, tf.float32) * tf.cast(probabilities, tf.float32)
    # Fresh rows carry no sampling probability: 1 keeps them out of the max.
    n_p = tf.where(replayed, tf.maximum(n_p, 1e-12), 1.0)
    weights = tf.pow(n_p, -beta)
    largest = tf.reduce_max(tf.where(replayed, weights, 0.0))
    return tf.where(replayed, weights / tf.maximum(largest, 1e-12), 1.0)


def sequence_priorities(abs_td_t: tf.Tensor, mask_t: tf.Tensor, eta: float) -> tf.Tensor:
    """Each sequence's priority `[B]` from its absolute TD errors `[T, B]`.

    eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over the valid steps (`mask_t`
    1); a sequence with none gets `MIN_PRIORITY`. Never below `MIN_PRIORITY`.
    """
    abs_td_t = tf.stop_gradient(abs_td_t) * mask_t
    count = tf.reduce_sum(mask_t, 0)
    mean = tf.reduce_sum(abs_td_t, 0) / tf.maximum(count, 1.0)
    largest = tf.reduce_max(abs_td_t, 0)
    return tf.maximum(eta * largest + (1.0 - eta) * mean, MIN_PRIORITY)
