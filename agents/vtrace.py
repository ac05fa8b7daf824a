"""V-trace off-policy return targets (Espeholt et al., 2018, IMPALA).

Same semantics as deepmind/scalable_agent `vtrace.py`, written in plain TF2.

All sequence tensors are time-major, `[T, B]`. `t` indexes the step within the
unroll and names carry their time offset relative to it:

  * `v_t`        value estimate V(x_t) (the `values` argument).
  * `v_tp1`      V(x_{t+1}); its last entry is `bootstrap_value`.
  * `r_t`        reward received after taking a_t in x_t.
  * `discount_t` discount applied to the value at t+1 (0 where an episode ends).
  * `rho_t`      importance weight pi(a_t|x_t) / mu(a_t|x_t).
  * `c_t`        trace-cutting weight min(1, rho_t).
  * `vs_t`       the V-trace target v_s at s = t; `vs_tp1` is v_{s+1}.
"""

import collections
from typing import Optional

import tensorflow as tf

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])


def _check_rank(name: str, tensor: tf.Tensor, rank: int) -> None:
    actual = tensor.shape.rank
    if actual is not None and actual != rank:
        raise ValueError(
            f"vtrace: `{name}` must have rank {rank}, got rank {actual} "
            f"(shape {tensor.shape})."
        )


def _clip(rho_t: tf.Tensor, threshold: Optional[float]) -> tf.Tensor:
    if threshold is None:
        return rho_t
    return tf.minimum(tf.constant(threshold, dtype=rho_t.dtype), rho_t)


def from_importance_weights(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    lambda_: float = 1.0,
) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages.

    Args:
      log_rhos: `[T, B]` log pi(a_t|x_t) - log mu(a_t|x_t) (target minus
        behaviour log-probability of the taken action).
      discounts: `[T, B]` discount_t applied to V(x_{t+1}); 0 at episode ends.
      rewards: `[T, B]` r_t.
      values: `[T, B]` V(x_t).
      bootstrap_value: `[B]` V(x_T), the value of the state after the unroll.
      clip_rho_threshold: rho-bar; clips rho_t in the TD errors. None: no clip.
      clip_pg_rho_threshold: clips rho_t in the policy-gradient advantages.
        None: no clip.
      lambda_: Espeholt et al.'s lambda (their Remark 2, scalable_agent's
        `lambda_`): the traces become c_t = lambda * min(1, rho_t), mixing
        multi-step and one-step targets; 1.0 is plain V-trace.

    Returns:
      `VTraceReturns(vs, pg_advantages)`, both `[T, B]`, with gradients stopped.

    Raises:
      ValueError: if an argument has the wrong static rank.
    """
    # Long: its docstring gives the paper's definitions beside the arguments; the code is half of
    # it.
    log_rhos = tf.convert_to_tensor(log_rhos)
    dtype = log_rhos.dtype
    discounts = tf.convert_to_tensor(discounts, dtype=dtype)
    rewards = tf.convert_to_tensor(rewards, dtype=dtype)
    values = tf.convert_to_tensor(values, dtype=dtype)
    bootstrap_value = tf.convert_to_tensor(bootstrap_value, dtype=dtype)
    _check_rank("log_rhos", log_rhos, 2)
    _check_rank("discounts", discounts, 2)
    _check_rank("rewards", rewards, 2)
    _check_rank("values", values, 2)
    _check_rank("bootstrap_value", bootstrap_value, 1)

    rho_t = tf.exp(log_rhos)
    clipped_rho_t = _clip(rho_t, clip_rho_threshold)
    c_t = lambda_ * _clip(rho_t, 1.0)

    v_t = values
    v_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    delta_t = clipped_rho_t * (rewards + discounts * v_tp1 - v_t)

    # (vs_t - v_t) = delta_t + discount_t * c_t * (vs_tp1 - v_tp1).
    def _step(acc_tp1, elems):
        delta, discount, c = elems
        return delta + discount * c * acc_tp1

    vs_minus_v_t = tf.scan(
        _step,
        (delta_t, discounts, c_t),
        initializer=tf.zeros_like(bootstrap_value),
        reverse=True,
    )
    vs_t = v_t + vs_minus_v_t

    vs_tp1 = tf.concat([vs_t[1:], bootstrap_value[None]], axis=0)
    clipped_pg_rho_t = _clip(rho_t, clip_pg_rho_threshold)
    pg_advantages = clipped_pg_rho_t * (rewards + discounts * vs_tp1 - v_t)

    return VTraceReturns(
        vs=tf.stop_gradient(vs_t), pg_advantages=tf.stop_gradient(pg_advantages)
    )
