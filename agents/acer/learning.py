"""The ACER learner (discrete actions): a `tf.Module` with one `@tf.function` step.

One step is one ACER update on a batch of sequences (on-policy from `queue`
or replayed; the schedule is the data stream, see `launch/registry.py`):

- Q(x, .) from the core's Q head, pi from its policy head, V = sum_a pi Q;
- Retrace (or Q_opc) targets from the behaviour policy mu stored with the data;
- the policy loss (truncated importance sampling + bias correction) is taken
  with respect to the logits, projected by the efficient trust region
  against an exponential moving average of the network, and applied through
  the surrogate -sum(z . logits);
- placeholder steps (an episode's final observation, see `replay.trajectory`)
  are masked and cut the traces.
"""

from typing import Callable, Dict

import sonnet as snt
import tensorflow as tf

from agents.acer import losses
from agents.acer.config import ACERConfig
from agents.clear.losses import clip_rewards
from networks.cores import ActorCriticCore, CoreInputs
from networks.distributions import ActionSpace
from replay import trajectory
from replay.dataset import Batch


class ACERLearner(tf.Module):
    """Owns the core, its running average, the optimiser and the counters."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: ACERConfig,
                 make_core: Callable[[], ActorCriticCore]):
        super().__init__(name='acer_learner')
        if len(action_space.leaves) != 1 or action_space.leaves[0].kind != 'categorical':
            raise ValueError('acer supports one Discrete action space for now, '
                             f'got {action_space.space}')
        self.core = core
        self.config = config
        self._num_actions = action_space.leaves[0].size
        self.average_core = make_core()
        for average, variable in zip(self.average_core.variables, core.variables):
            average.assign(variable)
        self.learning_rate = tf.Variable(config.learning_rate, dtype=tf.float32,
                                         trainable=False, name='learning_rate')
        self.optimizer = snt.optimizers.Adam(
            learning_rate=self.learning_rate, beta1=config.adam_beta1,
            beta2=config.adam_beta2, epsilon=config.adam_epsilon)
        self.num_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_steps')
        self.num_env_frames = tf.Variable(0, dtype=tf.int64, trainable=False,
                                          name='num_env_frames')

    def set_progress(self, fraction: float) -> None:
        """Anneals the learning rate: `fraction` of the env-step budget is done."""
        if self.config.learning_rate_schedule == 'linear':
            self.learning_rate.assign(self.config.learning_rate * max(0.0, 1.0 - fraction))

    @tf.function(autograph=False)  # no tensor-dependent Python control flow
    def step(self, batch: Batch) -> Dict[str, tf.Tensor]:
        config = self.config
        steps = batch.sequence.steps  # [T + 1, B, ...]
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first)
        mask_t = trajectory.valid_mask(steps.first)  # [T, B]
        action_t = steps.action[0][:-1]  # [T, B]
        mu_log_t = tf.nn.log_softmax(steps.behaviour_params[0][:-1])  # [T, B, A]
        average_out, _ = self.average_core.unroll(inputs, batch.sequence.core_state)
        average_logits_t = tf.stop_gradient(average_out.policy_params[0][:-1])

        with tf.GradientTape() as tape:
            out, _ = self.core.unroll(inputs, batch.sequence.core_state)
            logits = out.policy_params[0]  # [T + 1, B, A]
            q = out.q_values  # [T + 1, B, A]
            logits_t, q_t_all = logits[:-1], q[:-1]
            pi_t = tf.nn.softmax(logits_t)
            log_pi_t = tf.nn.log_softmax(logits_t)
            v_t = tf.reduce_sum(pi_t * q_t_all, -1)  # [T, B]
            bootstrap_value = tf.reduce_sum(tf.nn.softmax(logits[-1]) * q[-1], -1)  # [B]
            q_t = tf.gather(q_t_all, action_t, batch_dims=2)  # [T, B]
            rho_all_t = tf.stop_gradient(tf.exp(log_pi_t - mu_log_t))  # [T, B, A]
            rho_t = tf.gather(rho_all_t, action_t, batch_dims=2)

            r_t = clip_rewards(steps.reward[:-1], config.reward_clipping) * config.reward_scaling
            discount_t = steps.discount[:-1] * config.discounting * mask_t
            # A zero trace at placeholder steps: the step before bootstraps from V(final).
            trace_t = (tf.ones_like(rho_t) if config.use_Q_opc else rho_t) * mask_t
            q_ret_t = losses.retrace_targets(
                r_t, discount_t, tf.stop_gradient(q_t), tf.stop_gradient(v_t),
                tf.stop_gradient(bootstrap_value), trace_t)
            q_loss = tf.reduce_sum(mask_t * 0.5 * tf.square(q_ret_t - q_t))

            # Policy loss as a function of the logits, for the trust region.
            phi = tf.stop_gradient(logits_t)
            advantage_t = tf.stop_gradient(q_ret_t - v_t)
            advantage_all_t = tf.stop_gradient(q_t_all - v_t[..., None])
            with tf.GradientTape(persistent=True) as statistics_tape:
                statistics_tape.watch(phi)
                log_pi_phi = tf.nn.log_softmax(phi)
                pi_loss_t = losses.truncated_policy_loss(
                    tf.gather(log_pi_phi, action_t, batch_dims=2), rho_t, advantage_t,
                    config.truncation_threshold)
                if config.truncation_threshold is not None:
                    pi_loss_t += losses.bias_correction_loss(
                        log_pi_phi, rho_all_t, advantage_all_t, config.truncation_threshold)
                pi_loss = tf.reduce_sum(mask_t * pi_loss_t)
                average_log_pi = tf.nn.log_softmax(average_logits_t)
                kl_t = tf.reduce_sum(tf.exp(average_log_pi) * (average_log_pi - log_pi_phi), -1)
                kl = tf.reduce_sum(mask_t * kl_t)
            g = -statistics_tape.gradient(pi_loss, phi)  # ascent direction, per row
            z = g
            if config.use_trust_region:
                k = statistics_tape.gradient(kl, phi)
                z = losses.trust_region_projection(g, k, config.trust_region_delta)
            surrogate = -tf.reduce_sum(tf.stop_gradient(z) * logits_t)
            entropy_t = -tf.reduce_sum(pi_t * log_pi_t, -1)
            entropy = tf.reduce_sum(mask_t * entropy_t)
            total = (config.pi_loss_coef * surrogate - config.beta * entropy
                     + config.Q_loss_coef * q_loss)
            num_valid = tf.maximum(tf.reduce_sum(mask_t), 1.0)
            if config.normalize_loss_by_steps:
                total = total / num_valid

        variables = [v for v in self.core.trainable_variables
                     if 'baseline_head' not in v.name]  # ACER's V is sum_a pi Q
        gradients = tape.gradient(total, variables)
        grad_norm = tf.linalg.global_norm(gradients)
        if config.clip_grad_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, config.clip_grad_norm,
                                                  use_norm=grad_norm)
        self.optimizer.apply(gradients, variables)
        alpha = config.trust_region_alpha
        for average, variable in zip(self.average_core.variables, self.core.variables):
            average.assign(alpha * average + (1.0 - alpha) * variable)
        self.num_steps.assign_add(1)
        fresh_rows = tf.reduce_sum(1.0 - tf.cast(batch.replayed, tf.float32))
        self.num_env_frames.assign_add(
            tf.cast(fresh_rows * tf.cast(tf.shape(mask_t)[0], tf.float32), tf.int64))

        def mean(x):
            return tf.reduce_sum(mask_t * x) / num_valid

        truncated = tf.cast(rho_t > (config.truncation_threshold or float('inf')), tf.float32)
        return {
            'loss/policy': pi_loss / num_valid,
            'loss/q': q_loss / num_valid,
            'loss/total_loss': total,
            'average_value': mean(v_t),
            'average_entropy': mean(entropy_t),
            'average_kl': kl / num_valid,
            'mean_rho': mean(rho_t),
            'fraction_truncated': mean(truncated),
            'grad_norm': grad_norm,
            'learning_rate': tf.identity(self.learning_rate),
        }
