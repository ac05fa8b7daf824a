"""Reward transforms and n-step targets shared by the agents (pure functions)."""

from typing import Optional

import tensorflow as tf

from reverb_agents.networks.cores import REWARD_CLIPPINGS, transform_reward

__all__ = ['REWARD_CLIPPINGS', 'clip_rewards', 'transform_rewards', 'n_step_targets',
           'discounted_returns', 'generalized_advantages']

def clip_rewards(r_t: tf.Tensor, mode: str) -> tf.Tensor:
    """`abs_one`: clip to [-1, 1]; `soft_asymmetric`: IMPALA's squashing (negative
    rewards penalised more than positive ones are rewarded); `none`. Any shape."""
    return transform_reward(r_t, 1.0, mode)


def transform_rewards(r_t: tf.Tensor, scaling: float, mode: str) -> tf.Tensor:
    """The seeds' reward transform: multiply by `scaling`, then clip (`clip_rewards`).

    The CLEAR/IMPALA seed scales before it clips, so `abs_one` bounds the
    scaled reward; with `scaling=1` and `mode='none'` rewards pass unchanged.
    The acting core applies the same function to its previous-reward input
    (`networks.cores.PreviousStep`), so there is one formula.
    """
    return transform_reward(r_t, scaling, mode)


def n_step_targets(rewards: tf.Tensor, discounts: tf.Tensor, first: tf.Tensor,
                   next_values: tf.Tensor, discounting: float,
                   entropy_rewards: Optional[tf.Tensor] = None) -> tf.Tensor:
    """TD targets of the first transition of each sequence.

    Args:
      rewards: `[n, N]` rewards of steps 0..n-1 (or `[n, N, k]`: k components).
      discounts: `[n, N]` 0 where the episode terminated at that step (a
        time-limit truncation keeps 1 and bootstraps); `[n, N, 1]` with components.
      first: `[n + 1, N]` bool, steps 0..n; `first[k]` means step k-1 held an
        episode's final observation (the trajectory's placeholder step), so
        step k-2's transition bootstraps from step k-1's observation; `[n + 1, N, 1]`
        with components.
      next_values: `[n, N]` (or `[n, N, k]`) values V(s_k) of steps k = 1..n:
        soft values without `entropy_rewards`, plain values Q(s_k, a ~ pi) with them.
      discounting: gamma.
      entropy_rewards: optional `[n, N]` (or `[n, N, 1]`): `entropy_rewards[k]` is the
        entropy reward -alpha log pi(.|s_{k+1}) of the observation at step k + 1,
        as in ALF's SAC, which adds gamma d_k times it to the reward r_k of every
        step of the sum (not only to the bootstrap value): the target is
        sum_k gamma^k D_k (r_k + gamma d_k e_k) + gamma^m D_m Q(s_m), D_k the product
        of d_0..d_{k-1}, m the first episode end or n.
    Returns:
      `[N]` (or `[N, k]`): r_0 + gamma d_0 (e_0 + r_1 + gamma d_1 (e_1 + ...)) up to
      the first episode end or step n, bootstrapped there with the stored value.
    """
    n = int(rewards.shape[0])
    if entropy_rewards is not None:
        # ALF's indices: its reward of step k + 1 (this library's r_k, stored at the
        # step it was earned from) gains gamma d times the entropy reward of step
        # k + 1's observation; a termination (d_k = 0) drops it with the bootstrap.
        rewards = rewards + discounting * discounts * entropy_rewards
    target = next_values[n - 1]
    for k in reversed(range(n)):
        bootstrap = next_values[k]
        if k + 2 <= n:
            # Step k+1 is a placeholder (its successor starts an episode): it holds
            # the final observation, whose value is the bootstrap; nothing after it
            # belongs to this episode.
            target = tf.where(tf.broadcast_to(first[k + 2], tf.shape(target)), bootstrap, target)
        else:
            target = bootstrap
        target = rewards[k] + discounting * discounts[k] * target
    return target


def discounted_returns(rewards: tf.Tensor, discounts: tf.Tensor,
                       bootstrap_value: tf.Tensor) -> tf.Tensor:
    """Monte-Carlo returns within sequences, bootstrapped at their ends.

    rewards, discounts: `[T, B]` (`discounts` holds gamma, times 0 where an
    episode terminated); bootstrap_value: `[B]`, the value of step T.
    Returns `[T, B]`: G_t = r_t + discounts_t G_{t+1}, G_T = bootstrap_value.
    """
    def backward(g_next, inputs):
        r, d = inputs
        return r + d * g_next

    return tf.scan(backward, (rewards, discounts), initializer=bootstrap_value, reverse=True)


def generalized_advantages(rewards: tf.Tensor, discounts: tf.Tensor, values: tf.Tensor,
                           bootstrap_value: tf.Tensor, lambda_: float) -> tf.Tensor:
    """Generalised advantage estimation (Schulman et al. 2016), within sequences.

    rewards, discounts, values: `[T, B]` (`discounts` holds gamma, times 0 where
    an episode terminated); bootstrap_value: `[B]`, V of step T.
    Returns `[T, B]`: A_t = delta_t + discounts_t lambda A_{t+1}, A_T = 0, with
    delta_t = r_t + discounts_t V_{t+1} - V_t; A_t + V_t is the lambda-return.
    """
    v_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    delta_t = rewards + discounts * v_tp1 - values

    def backward(a_next, inputs):
        delta, d = inputs
        return delta + d * lambda_ * a_next

    return tf.scan(backward, (delta_t, discounts), initializer=tf.zeros_like(bootstrap_value),
                   reverse=True)
