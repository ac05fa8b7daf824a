"""The reward signals' pure losses and targets (`agents.signals`): ICM's, GAIL's, the
cloning loss, per-component targets and discounts, the curiosity reward's bound."""

from typing import Any, Callable, Optional, Tuple

import tensorflow as tf

from reverb_agents.networks.distributions import ActionSpace

# --- pure losses -----------------------------------------------------------------------


def icm_losses(phi_next: tf.Tensor, predicted_next: tf.Tensor,
               inverse_log_prob: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """ICM's per-step losses: (forward error 0.5 * ||f - phi(s')||^2, inverse NLL) `[N]`.

    phi_next, predicted_next: `[N, E]` the encoding of s' and the forward model's
    prediction of it from (phi(s), a); inverse_log_prob: `[N]` log-probability of
    the taken action under the inverse model. The forward error is also the reward.
    """
    forward = 0.5 * tf.reduce_sum(tf.square(predicted_next - phi_next), -1)
    return forward, -inverse_log_prob


def gail_discriminator_loss(demo_logits: tf.Tensor, policy_logits: tf.Tensor,
                            policy_mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Binary cross-entropy `[]`: demonstrations `[M]` labelled 1, the policy's steps
    `[N]` 0 (D = sigmoid(logit) is the probability of a demonstration); each part is
    a mean, the policy's over `policy_mask`ed steps if given."""
    demo = tf.nn.sigmoid_cross_entropy_with_logits(tf.ones_like(demo_logits), demo_logits)
    policy = tf.nn.sigmoid_cross_entropy_with_logits(tf.zeros_like(policy_logits),
                                                     policy_logits)
    if policy_mask is None:
        policy_mask = tf.ones_like(policy)
    return (tf.reduce_mean(demo) + tf.reduce_sum(policy_mask * policy)
            / tf.maximum(tf.reduce_sum(policy_mask), 1.0))


def gail_reward(logits: tf.Tensor, kind: str = 'positive') -> tf.Tensor:
    """The reward of steps whose discriminator logits are `logits` (D = sigmoid(logits)).

    'positive': -log(1 - D), computed stably as softplus(logits); > 0, and larger the
    more a step looks like a demonstration's. Being > 0 it also pays for every step
    an episode lasts, whatever the step (the survival bias of Kostrikov et al. 2019).
    'logit': log D - log(1 - D) = logits (AIRL's form), negative where a step looks
    like the policy's rather than a demonstration's.
    """
    return tf.nn.softplus(logits) if kind == 'positive' else tf.identity(logits)


def bc_loss(per_step: tf.Tensor, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Behavioural cloning `[]`: the mean of per-step losses (`cloning_losses`) over
    `mask`ed steps if given."""
    if mask is None:
        return tf.reduce_mean(per_step)
    return tf.reduce_sum(mask * per_step) / tf.maximum(tf.reduce_sum(mask), 1.0)


def cloning_losses(action_space: ActionSpace, params: Tuple[tf.Tensor, ...],
                   actions: Tuple[tf.Tensor, ...]) -> tf.Tensor:
    """Per-step behavioural-cloning loss `[...]` of demonstrated `actions` under the
    policy's per-leaf `params`, summed over leaves: -log pi(a) for a discrete leaf, the
    squared error of the policy's most likely action for a continuous one (ML-Agents'
    choice; a demonstrator's saturated actions would make a squashed Gaussian's
    likelihood unbounded)."""
    total = 0.0
    for leaf, p, a in zip(action_space.leaves, params, actions):
        if leaf.discrete:
            total += -leaf.log_prob(p, a)
        else:
            total += tf.reduce_sum(tf.square(leaf.mode(p) - a), -1)
    return total


def component_targets(targets: Callable[..., Any], log_rhos: tf.Tensor, discounts: tf.Tensor,
                      rewards: tf.Tensor, values: tf.Tensor, bootstrap_value: tf.Tensor
                      ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Per-component value targets and advantages, (vs, pg_advantages) `[T, B, k]`.

    `targets(log_rhos, discounts, rewards, values, bootstrap_value)` is a `[T, B]`
    target function returning `.vs` and `.pg_advantages` (V-trace, GAE); each of
    the k components (discounts, rewards, values `[T, B, k]`, bootstrap_value
    `[B, k]`) runs through it with the same `log_rhos` `[T, B]`, as k more columns.
    """
    shape = tf.shape(values)
    k = values.shape[-1]
    flat = lambda x: tf.reshape(x, [shape[0], -1])  # noqa: E731 - [T, B, k] -> [T, B * k]
    out = targets(tf.repeat(log_rhos, k, axis=1), flat(discounts), flat(rewards), flat(values),
                  tf.reshape(bootstrap_value, [-1]))
    return tf.reshape(out.vs, shape), tf.reshape(out.pg_advantages, shape)


def component_discounts(discount: tf.Tensor, gammas: Any,
                        episodic: Tuple[bool, ...]) -> tf.Tensor:
    """The intrinsic components' discounts `[..., n]`: each gamma (`[n]`) times the
    episode's `discount` `[...]` (0 at a termination) where that component is
    `episodic`, else times 1, so a termination bootstraps like a time limit
    (non-episodic returns, as RND's)."""
    episodic = tf.constant(episodic, tf.bool)
    discount = tf.cast(discount, tf.float32)[..., None]
    return tf.where(episodic, discount, tf.ones_like(discount)) * gammas


def across_episode_ends(mask: tf.Tensor, rewards: tf.Tensor, values: tf.Tensor,
                        discounts: tf.Tensor, episodic: Tuple[bool, ...]
                        ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(rewards, discounts, learned) `[T, B, n]` of the intrinsic components, with the
    placeholder steps (`mask` `[T, B, 1]` 0: the step holding an episode's final
    observation, `replay.trajectory`) filled in.

    An episodic component ends its return there: reward V, discount 0, nothing
    learned, so its target is its own `values`. A non-episodic one runs on into the
    next episode: the final observation moves to the next episode's first with
    reward 0 and discount 1, and its value is learned (`learned` 1) towards that
    first step's. Why learned: the episode's last real step bootstraps from the
    final observation's value; left untrained (the terminal observation of a goal
    is seen nowhere else), it is extrapolated, the steps before the goal learn
    towards it, it follows them, and the returns diverge.
    `rewards`, `discounts` `[T, B, n]` hold the real steps' (`component_discounts`).
    """
    real = mask > 0
    runs_on = tf.logical_not(tf.constant(episodic, tf.bool))  # [n]
    # At a placeholder: discount 1 and learned where the return runs on, 0 where it ends.
    placeholder = tf.broadcast_to(tf.cast(runs_on, tf.float32), tf.shape(rewards))
    rewards = tf.where(real, rewards,
                       tf.where(runs_on, tf.zeros_like(rewards), tf.stop_gradient(values)))
    return (rewards, tf.where(real, discounts, placeholder),
            tf.broadcast_to(learned_mask(mask, episodic), tf.shape(rewards)))


def learned_mask(mask: tf.Tensor, episodic: Tuple[bool, ...]) -> tf.Tensor:
    """`[..., n]`: where each intrinsic component's value is learned, from `mask`
    `[..., 1]` (1 at real steps, 0 at placeholders): at every real step, and at the
    placeholders too where the component's return runs on into the next episode
    (non-episodic, `across_episode_ends`)."""
    runs_on = 1.0 - tf.constant(episodic, tf.float32)  # [n]
    return tf.maximum(tf.cast(mask, tf.float32), runs_on)


def bounded_curiosity(reward: tf.Tensor, clip: float, mean_square: tf.Tensor,
                      updates: tf.Tensor) -> tf.Tensor:
    """Per-step curiosity rewards `[N]` capped at `clip` times the running RMS
    `sqrt(mean_square)` of earlier (bounded) rewards; unchanged with `clip` 0 or
    before the first update (`updates` 0: no RMS yet)."""
    if not clip:
        return reward
    bound = tf.where(updates > 0, clip * tf.sqrt(mean_square), float('inf'))
    return tf.minimum(reward, bound)


def linear_decay(strength: float, steps: int, step: tf.Tensor) -> tf.Tensor:
    """`strength` annealed linearly to 0 over `steps` (constant when `steps` is 0)."""
    if steps <= 0:
        return tf.constant(strength, tf.float32)
    fraction = tf.minimum(tf.cast(step, tf.float32) / float(steps), 1.0)
    return strength * (1.0 - fraction)
