"""The ACER learner: a `tf.Module` with one `@tf.function` step.

One step is one ACER update on a batch of sequences (on-policy from `queue`
or replayed; the schedule is declared in `agents/acer/agent.py`):

- discrete actions: Q(x, .) from the core's Q head, V = sum_a pi(a) Q(a);
- continuous actions, the stochastic dueling network (SDN): V from the
  baseline head, Q(x, a) = V(x) + A(x, a) - mean_i A(x, u_i), u_i ~ pi, with
  `sdn_samples` draws u_i of its own for each evaluation (the taken action's Q
  and the bias correction's Q(x, a'), as chainerrl evaluates its SDN); the trace
  coefficient is rho ** (1 / action_dim), and V is regressed on
  min(1, rho) (Q_ret - Q) + V;
- Retrace targets Q_ret from the behaviour policy mu stored with the data:
  the Q loss (and the continuous V target) always regress on Q_ret; the
  policy's advantage is Q_ret - V, or Q_opc - V (unit traces) with
  `use_Q_opc`, as in chainerrl (the paper's choice for continuous actions);
- the policy loss (truncated importance sampling + bias correction: exact
  over actions when discrete, one sampled action when continuous) is taken
  with respect to the distribution statistics (logits, or mean and log-std),
  projected by the efficient trust region against an exponential moving
  average of the network, and applied through the surrogate -sum(z . stats);
  the average network unrolls from the stored core state, as the network does,
  from zeros (`average_network_state='reset'`, chainerrl's replay), or, with
  'acted', from its own state carried while acting (the actors run it:
  `networks.shadowed`), and replayed sequences then start both networks from
  zeros, as chainerrl's do;
- loss = pi_loss_coef * (surrogate - beta * entropy) + Q_loss_coef * Q loss:
  chainerrl subtracts the entropy after the projection and weights both by
  `pi_loss_coef`;
- value normalisation (`value_normalization='popart'`, `networks.popart`): the
  value head (the Q head, or the SDN's V head, whose advantage head is scaled
  by the same sigma) is learned in normalised units: Retrace runs on
  unnormalised values, the Q and V losses and the policy's advantages are
  divided by sigma, and Q_ret then moves the statistics (the heads are
  rescaled so their outputs do not change); in a task sequence (`num_tasks >
  1`) each task has its own outputs and statistics, and each step is in its
  task's units (`Step.task`);
- rewards are scaled, then clipped (`agents.returns.transform_rewards`;
  the defaults leave them unchanged, as chainerrl does);
- placeholder steps (an episode's final observation, see `replay.trajectory`)
  are masked and cut the traces.
"""

from typing import Callable, Dict, List, Tuple

import tensorflow as tf

from reverb_agents.agents.acer import losses
from reverb_agents.agents.acer.config import ACERConfig
from reverb_agents.agents.returns import transform_rewards
from reverb_agents.agents.learner_base import LearnerBase
from reverb_agents.agents.policy_average import soft_update
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import ActorCriticCore, AgentOutput, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.popart import scale_layer, task_metrics, update_by_task
from reverb_agents.networks.shadowed import ShadowedCore
from reverb_agents.networks.user import reset_state
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch


METRICS = ('loss/policy', 'loss/q', 'loss/total_loss', 'average_value', 'average_entropy',
           'average_kl', 'mean_rho', 'fraction_truncated', 'grad_norm', 'learning_rate')


def _gather(x: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """x `[T, B, A]`, index `[T, B]` -> `[T, B]`."""
    return tf.gather(x, index, batch_dims=2)


class ACERLearner(LearnerBase):
    """Owns the core, its running average, the optimiser and the counters."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: ACERConfig,
                 make_core: Callable[[], ActorCriticCore]):
        super().__init__(config, name='acer_learner')
        leaves = action_space.leaves
        if len(leaves) != 1:
            raise ValueError('acer supports one Discrete or one Box action space, '
                             f'got {action_space.space}')
        self.core = core
        self._actions = action_space
        self._discrete = leaves[0].discrete
        self._action_dim = leaves[0].size
        acted = config.average_network_state == 'acted'
        if acted != isinstance(core, ShadowedCore):
            raise ValueError(f"average_network_state={config.average_network_state!r} needs "
                             f"{'a' if acted else 'no'} ShadowedCore, got {type(core).__name__}")
        self._acted = acted
        # With 'acted' the actors step the average network: it is the core's shadow.
        self.average_core = core.shadow if acted else make_core()
        self.attach_extras(core, action_space)  # the prior's KL
        for average, variable in zip(self.average_core.variables, self._averaged()):
            average.assign(variable)
        parts = core.parts
        # The head PopArt normalises: Q(x, .) when discrete, the SDN's V otherwise.
        self._value_head = parts.q_head if self._discrete else parts.baseline_head
        create_slots(self.optimizer, core.trainable_variables)

    def _update_statistics(self, q_ret_t: tf.Tensor, mask_t: tf.Tensor,
                           task_t: tf.Tensor) -> Dict[str, tf.Tensor]:
        """PopArt: Q_ret `[T, B]` of the valid steps `mask_t` moves the value head's
        statistics, each step its task's (`task_t` `[T, B]`; the SDN's advantage head is
        rescaled with them); returns the metrics (none without normalisation)."""
        head = self._value_head
        if not head.normalized_output:
            return {}
        old_std = head.std()
        update_by_task(head, q_ret_t, mask_t, task_t)
        if not self._discrete:  # A(x, a) = sigma * net(x, a): keep sigma * net fixed
            scale_layer(self.core.parts.advantage_head.output_layer, old_std / head.std())
        return {**head.metrics(), **task_metrics(head)}

    def _averaged(self) -> List[tf.Variable]:
        """The network's variables the average network's follow, in its order."""
        return self.core.own_variables if self._acted else list(self.core.variables)

    def _update_average(self) -> None:
        """The average network's variables move towards the network's by
        1 - `trust_region_alpha`."""
        soft_update(self.average_core.variables, self._averaged(),
                    1.0 - self.config.trust_region_alpha)

    def _states(self, batch: Batch):
        """(the network's, the average network's) core state at the sequences' first step
        (`[B, ...]` leaves). 'stored': the stored one for both; 'reset': zeros for the
        average network; 'acted': each its own, as the actors stored them, and zeros for
        both in replayed rows.

        chainerrl replays a random window of an episode from a reset state (both
        models'), so zeros where a sequence starts mid-episode are its approximation
        too; its on-policy updates use each model's own state, carried since the
        episode began.
        """
        state = batch.sequence.core_state
        mode = self.config.average_network_state
        if mode == 'reset':
            return state, tf.nest.map_structure(tf.zeros_like, state)
        if mode == 'stored':
            return state, state
        return reset_state(batch.replayed, state, tf.nest.map_structure(tf.zeros_like, state))

    def _policy_surrogate(self, stats_t, average_stats_t, pi_loss_fn, mask_t, loss_mask_t):
        """The trust-region-projected policy loss through the statistics.

        `pi_loss_fn(stats)` -> per-step loss `[T, B]`, summed with weights
        `loss_mask_t`; the KL constraint is over the valid steps `mask_t`. Returns
        (surrogate, unprojected policy loss sum, KL sum).
        """
        phi = tf.stop_gradient(stats_t)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(phi)
            pi_loss = tf.reduce_sum(loss_mask_t * pi_loss_fn(phi))
            kl = tf.reduce_sum(mask_t * self._actions.kl_divergence((average_stats_t,), (phi,)))
        z = -tape.gradient(pi_loss, phi)  # ascent direction, one row per step
        if self.config.use_trust_region:
            z = losses.trust_region_projection(z, tape.gradient(kl, phi),
                                               self.config.trust_region_delta)
        return -tf.reduce_sum(tf.stop_gradient(z) * stats_t), pi_loss, kl

    def _policy_target(self, q_ret_t: tf.Tensor, r_t: tf.Tensor, discount_t: tf.Tensor,
                       q_t: tf.Tensor, v_t: tf.Tensor, bootstrap_value: tf.Tensor,
                       mask_t: tf.Tensor) -> tf.Tensor:
        """What the policy's advantage subtracts V from: `[T, B]`, gradient stopped.

        All inputs `[T, B]` but `bootstrap_value` `[B]`, as `losses.retrace_targets`.

        Q_ret itself, or with `use_Q_opc` Q_opc: Retrace with every trace 1
        (chainerrl's `Q_opc = Q_opc - Q + V`), still cut at placeholder steps.
        The Q loss keeps Q_ret either way.
        """
        if not self.config.use_Q_opc:
            return q_ret_t
        return losses.retrace_targets(
            r_t, discount_t, tf.stop_gradient(q_t), tf.stop_gradient(v_t),
            tf.stop_gradient(bootstrap_value), mask_t)

    def _discrete_terms(self, out: AgentOutput, average_stats_t, steps, r_t, discount_t,
                        mask_t, loss_mask_t) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        config = self.config
        action_t = steps.action[0][:-1]
        logits = out.policy_params[0]  # [T + 1, B, A]
        q = out.q_values  # [T + 1, B, A]
        logits_t, q_all_t = logits[:-1], q[:-1]
        pi_t, log_pi_t = tf.nn.softmax(logits_t), tf.nn.log_softmax(logits_t)
        v_t = tf.reduce_sum(pi_t * q_all_t, -1)  # [T, B]
        bootstrap_value = tf.reduce_sum(tf.nn.softmax(logits[-1]) * q[-1], -1)  # [B]
        q_t = _gather(q_all_t, action_t)
        mu_log_t = tf.nn.log_softmax(steps.behaviour_params[0][:-1])
        rho_all_t = tf.stop_gradient(tf.exp(log_pi_t - mu_log_t))  # [T, B, A]
        rho_t = _gather(rho_all_t, action_t)
        # A zero trace at placeholder steps: the step before bootstraps from V(final).
        trace_t = rho_t * mask_t  # min(1, rho_t) inside retrace_targets
        q_ret_t = losses.retrace_targets(
            r_t, discount_t, tf.stop_gradient(q_t), tf.stop_gradient(v_t),
            tf.stop_gradient(bootstrap_value), trace_t)
        head = self._value_head
        group = head.group_of(steps.task[:-1])  # [T, B], or None: one set of statistics
        std = head.std(group)  # [T, B] or []

        def normalize(values):
            return head.normalize(values, group)

        value_loss = tf.reduce_sum(loss_mask_t * 0.5 * tf.square(normalize(q_ret_t)
                                                                 - normalize(q_t)))
        target_t = self._policy_target(q_ret_t, r_t, discount_t, q_t, v_t, bootstrap_value,
                                       mask_t)
        advantage_t = tf.stop_gradient((target_t - v_t) / std)
        advantage_all_t = tf.stop_gradient((q_all_t - v_t[..., None])
                                           / (std if group is None else std[..., None]))

        def pi_loss_fn(phi):
            log_pi = tf.nn.log_softmax(phi)
            loss = losses.truncated_policy_loss(_gather(log_pi, action_t), rho_t, advantage_t,
                                                config.truncation_threshold)
            if config.truncation_threshold is not None:
                loss += losses.bias_correction_loss(log_pi, rho_all_t, advantage_all_t,
                                                    config.truncation_threshold)
            return loss

        surrogate, pi_loss, kl = self._policy_surrogate(logits_t, average_stats_t, pi_loss_fn,
                                                        mask_t, loss_mask_t)
        entropy_t = -tf.reduce_sum(pi_t * log_pi_t, -1)
        return (surrogate, value_loss, entropy_t,
                {'pi_loss': pi_loss, 'kl': kl, 'v_t': v_t, 'rho_t': rho_t,
                 'abs_td_t': tf.abs(q_ret_t - q_t), 'q_ret_t': q_ret_t})

    def _continuous_terms(self, out: AgentOutput, average_stats_t, steps, r_t, discount_t,
                          mask_t, loss_mask_t):
        # Long: ACER's continuous terms (Retrace with Q-opc, truncation with bias correction, trust
        # region) share their tensors.
        config = self.config
        space = self._actions
        action_t = steps.action[0][:-1]  # [T, B, d]
        stats = out.policy_params[0]  # [T + 1, B, 2 d]: mean, log-std
        stats_t = stats[:-1]
        v = out.baseline  # [T + 1, B]
        v_t, bootstrap_value = v[:-1], v[-1]
        features_t = out.features[:-1]  # [T, B, H]
        shape_tb = tf.shape(v_t)
        flat_features = tf.reshape(features_t, [-1, features_t.shape[-1]])  # [T * B, H]
        group = self._value_head.group_of(steps.task[:-1])  # [T, B], or None
        flat_task = None if group is None else tf.reshape(group, [-1])

        def advantage(actions):  # [T, B, d] -> [T, B]
            flat = tf.reshape(actions, [-1, self._action_dim])
            return tf.reshape(self.core.advantage(flat_features, flat, flat_task), shape_tb)

        def sample():  # one action per step from the current policy, held fixed: [T, B, d]
            flat_stats = tf.reshape(stats_t, [-1, 2 * self._action_dim])
            return tf.reshape(tf.stop_gradient(space.sample((flat_stats,))[0]),
                              tf.shape(action_t))

        def mean_advantage():  # mean_i A(x, u_i), u_i ~ pi drawn afresh at each call: [T, B]
            return tf.add_n([advantage(sample()) for _ in range(config.sdn_samples)]
                            ) / config.sdn_samples

        q_t = v_t + advantage(action_t) - mean_advantage()  # [T, B]
        log_pi_t = space.log_prob((stats_t,), (action_t,))
        log_mu_t = steps.behaviour_log_prob[:-1]
        rho_t = tf.stop_gradient(tf.exp(log_pi_t - log_mu_t))
        trace_t = tf.minimum(1.0, rho_t ** (1.0 / self._action_dim)) * mask_t
        q_ret_t = losses.retrace_targets(
            r_t, discount_t, tf.stop_gradient(q_t), tf.stop_gradient(v_t),
            tf.stop_gradient(bootstrap_value), trace_t)
        v_target_t = tf.stop_gradient(tf.minimum(1.0, rho_t) * (q_ret_t - q_t) + v_t)
        # PopArt's sigma (1 without it), [] or each step's task's [T, B]: normalised losses.
        std = self._value_head.std(group)
        value_loss = tf.reduce_sum(loss_mask_t * 0.5 * (tf.square(q_ret_t - q_t)
                                                   + tf.square(v_target_t - v_t)) / std ** 2)
        # Bias correction with one action a' ~ pi.
        a_prime = sample()
        log_pi_prime = space.log_prob((stats_t,), (a_prime,))
        # mu(a') from the stored behaviour statistics.
        log_mu_prime = space.log_prob((steps.behaviour_params[0][:-1],), (a_prime,))
        rho_prime = tf.stop_gradient(tf.exp(log_pi_prime - log_mu_prime))
        # Q(x, a') - V with its own draws u_i, as chainerrl evaluates the SDN anew for a'.
        advantage_prime = tf.stop_gradient((advantage(a_prime) - mean_advantage()) / std)
        # The paper's continuous policy gradient uses Q_opc (`--use_Q_opc`, as the
        # Pendulum preset sets it); chainerrl's default is Q_ret.
        target_t = self._policy_target(q_ret_t, r_t, discount_t, q_t, v_t, bootstrap_value,
                                       mask_t)
        advantage_t = tf.stop_gradient((target_t - v_t) / std)

        def pi_loss_fn(phi):
            loss = losses.truncated_policy_loss(space.log_prob((phi,), (action_t,)), rho_t,
                                                advantage_t, config.truncation_threshold)
            if config.truncation_threshold is not None:
                loss += losses.continuous_bias_correction_loss(
                    space.log_prob((phi,), (a_prime,)), rho_prime, advantage_prime,
                    config.truncation_threshold)
            return loss

        surrogate, pi_loss, kl = self._policy_surrogate(stats_t, average_stats_t, pi_loss_fn,
                                                        mask_t, loss_mask_t)
        entropy_t = space.entropy((stats_t,))
        return (surrogate, value_loss, entropy_t,
                {'pi_loss': pi_loss, 'kl': kl, 'v_t': v_t, 'rho_t': rho_t,
                 'abs_td_t': tf.abs(q_ret_t - q_t), 'q_ret_t': q_ret_t})

    @tf.function(autograph=False)  # no tensor-dependent Python control flow
    def learn(self, batch: Batch) -> Dict[str, tf.Tensor]:
        config = self.config
        steps = batch.sequence.steps  # [T + 1, B, ...]
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first,
                            steps.task)
        mask_t = trajectory.valid_mask(steps.first)  # [T, B]
        weights = self.importance_weights(batch)  # [B]: 1 unless replay is prioritized
        loss_mask_t = mask_t * weights[None, :]
        self.core.update_normalizer(  # statistics first, as SAC
            tf.nest.map_structure(lambda x: x[:-1], steps.observation))
        state, average_state = self._states(batch)
        average_out, _ = self.average_core.unroll(inputs, average_state)
        average_stats_t = tf.stop_gradient(average_out.policy_params[0][:-1])
        r_t = transform_rewards(steps.reward[:-1], config.reward_scaling, config.reward_clipping)
        discount_t = steps.discount[:-1] * config.discounting * mask_t

        with tf.GradientTape() as tape:
            out, _ = (self.core.unroll_own if self._acted else self.core.unroll)(inputs, state)
            terms = self._discrete_terms if self._discrete else self._continuous_terms
            surrogate, value_loss, entropy_t, info = terms(
                out, average_stats_t, steps, r_t, discount_t, mask_t, loss_mask_t)
            entropy = tf.reduce_sum(loss_mask_t * entropy_t)
            # As chainerrl: the entropy joins the policy loss after the trust-region
            # projection (it is not projected) and before pi_loss_coef weights it.
            total = (config.pi_loss_coef * (surrogate - config.beta * entropy)
                     + config.Q_loss_coef * value_loss)
            total, prior_metrics = self.extras.added_to(
                total, steps, -1, lambda: tuple(p[:-1] for p in out.policy_params), loss_mask_t,
                mask_t, self.num_steps)
            num_valid = tf.maximum(tf.reduce_sum(mask_t), 1.0)
            if config.normalize_loss_by_steps:
                total = total / num_valid

        variables = self.core.trainable_variables
        grad_norm = self._apply(tape.gradient(total, variables), variables, batch.replayed,
                                tf.shape(mask_t)[0])
        popart_metrics = self._update_statistics(info['q_ret_t'], mask_t, steps.task[:-1])
        self._update_average()

        def mean(x):
            return tf.reduce_sum(mask_t * x) / num_valid

        rho_t = info['rho_t']
        truncated = tf.cast(rho_t > (config.truncation_threshold or float('inf')), tf.float32)
        return {
            'loss/policy': info['pi_loss'] / num_valid,
            'loss/q': value_loss / num_valid,
            'loss/total_loss': total,
            'average_value': mean(info['v_t']),
            'average_entropy': mean(entropy_t),
            'average_kl': info['kl'] / num_valid,
            'mean_rho': mean(rho_t),
            'fraction_truncated': mean(truncated),
            'grad_norm': grad_norm,
            'learning_rate': tf.identity(self.learning_rate),
            **prior_metrics,
            **popart_metrics,
            **self.priority_outputs(batch, weights, info['abs_td_t'], mask_t),
        }
