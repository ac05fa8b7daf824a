"""The CLEAR learner: a `tf.Module` with one `@tf.function` step.

The step unrolls the core over a mixed batch (`replay.dataset.Batch`),
computes V-trace targets, and applies the weighted sum of the losses in
`agents.clear.losses`. Losses are summed over time and batch as in the seed.
Placeholder steps (the final observation of an episode, see
`replay.trajectory`) contribute nothing: their V-trace target is their own
value and every loss is masked there. `advantage='gae'` replaces V-trace by
generalised advantage estimation (the A3C meta-RL seed); the entropy weight
may be annealed linearly over learner steps (`entropy_cost`).

Critic pre-training (`--critic_pretrain_steps`, the seed's `build_critic_learner`) is
an extra the config declares (`agents.extras.critic_pretrain`): the base's `step` runs
it on the rewards as `transformed_rewards` gives them, then this learner's `learn`.

Value normalisation (`value_normalization='popart'`, `networks.popart`): the
baseline head (and each intrinsic component's value) is learned in normalised
units. Targets are computed from unnormalised values as always; the baseline
and value-cloning losses compare normalised values, the policy gradient's
advantages are divided by sigma, and after each update the batch's targets
move the statistics (the head is rescaled so its values do not change).
With a task sequence (`num_tasks > 1`) the baseline (and each intrinsic
component's value) has one output and one set of statistics per task (PopArt's
multi-task form): each step's value, target,
advantage and loss are in its own task's units (`Step.task`), and a batch
moves each task's statistics with that task's targets only.

Reward signals (`agents.signals`): curiosity and GAIL rewards are extra
components, each with its own value output (`signal_values`, a linear head on
the core's features, owned by the learner and not exported) and discount;
V-trace (or GAE) runs per component with the same importance weights (a
non-episodic component's return runs on into the next episode,
`signals.losses.across_episode_ends`), the policy gradient follows the sum of
the components' advantages, and value cloning keeps to the extrinsic
component (the only one actors record).
Behavioural cloning adds the demonstrations' negative log-likelihood, and
`pretrain()` trains the policy on demonstrations alone before any actor acts.
"""

from typing import Dict, Optional, Tuple

import tensorflow as tf

from reverb_agents.agents import returns, vtrace
from reverb_agents.agents.signals import losses as signal_losses
from reverb_agents.agents.clear import losses
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.learner_base import LearnerBase
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.popart import PopArtLinear, update_by_task, update_statistics
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch


METRICS = ('loss/policy_gradient', 'loss/baseline', 'loss/entropy', 'loss/policy_cloning',
           'loss/value_cloning', 'loss/total_loss', 'grad_norm', 'learning_rate', 'entropy_cost',
           'mean_rho')


class CLEARLearner(LearnerBase):
    """Owns the core, the optimiser and the counters; `step(batch)` learns (`learn`, after
    critic pre-training's steps when the config declares them)."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: CLEARConfig):
        super().__init__(config, name='clear_learner')
        self.core = core
        self._action_space = action_space
        signals = config.signals
        self.attach_extras(core, action_space, config.unroll_length, config.batch_size)
        self._gammas = tf.constant(signals.gammas, tf.float32)
        if signals.intrinsic:
            # One value per intrinsic component (and per task, as the baseline's), on the
            # core's features; outputs task-major: task t's component k is t * n + k.
            tasks, n = max(1, config.num_tasks), len(signals.intrinsic)
            self.signal_values = PopArtLinear(
                n * tasks, normalized=config.value_normalization == 'popart',
                groups=n * tasks, step_size=config.popart_step_size,
                count_per_group=tasks > 1, name='signal_values')
            self.signal_values(tf.zeros([1, core.features_size]))
        create_slots(self.optimizer, self._learned_variables())

    def _learned_variables(self) -> Tuple[tf.Variable, ...]:
        """What the learning step (and BC pre-training, the core's prefix of it) trains."""
        variables = self.core.trainable_variables
        if self.config.signals.intrinsic:
            variables += self.signal_values.trainable_variables
        return variables

    def transformed_rewards(self, steps, v_t: tf.Tensor, mask_t: tf.Tensor
                            ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(rewards, discounts) `[T, B]` as the losses see them: scaled, clipped rewards
        times `extrinsic_strength`, gamma; at placeholder steps r = V and discount 0
        (their target is their value)."""
        config = self.config
        r_t = returns.transform_rewards(steps.reward[:-1], config.reward_scaling,
                                        config.reward_clipping) * config.signals.extrinsic_strength
        discount_t = steps.discount[:-1] * config.discounting
        return tf.where(mask_t > 0, r_t, tf.stop_gradient(v_t)), discount_t * mask_t

    def _targets(self, log_rhos: tf.Tensor, discount_t: tf.Tensor, r_t: tf.Tensor,
                 v_t: tf.Tensor, bootstrap_value: tf.Tensor) -> vtrace.VTraceReturns:
        """Value targets and policy-gradient advantages `[T, B]`: V-trace (with its
        lambda), or GAE (`advantage='gae'`: lambda-returns, no off-policy correction)."""
        config = self.config
        if config.advantage == 'vtrace':
            return vtrace.from_importance_weights(
                log_rhos=log_rhos, discounts=discount_t, rewards=r_t, values=v_t,
                bootstrap_value=bootstrap_value, lambda_=config.vtrace_lambda)
        advantages = tf.stop_gradient(returns.generalized_advantages(
            r_t, discount_t, v_t, bootstrap_value, config.gae_lambda))
        return vtrace.VTraceReturns(vs=advantages + tf.stop_gradient(v_t),
                                    pg_advantages=advantages)

    def entropy_cost(self) -> tf.Tensor:
        """The entropy weight at this learner step: `entropy_cost`, or annealed linearly
        to `entropy_cost_final` over `entropy_anneal_steps` steps."""
        config = self.config
        if config.entropy_anneal_steps <= 0:
            return tf.constant(config.entropy_cost, tf.float32)
        fraction = tf.minimum(tf.cast(self.num_steps, tf.float32)
                              / float(config.entropy_anneal_steps), 1.0)
        return config.entropy_cost + (config.entropy_cost_final - config.entropy_cost) * fraction

    def _normalizer(self, steps):
        """Unnormalised values `[T, B]` (steps `[T + 1, B]`) -> PopArt's normalised
        units, each step in its task's (the identity without normalisation)."""
        head = self.core.parts.baseline_head
        group = head.group_of(steps.task[:-1])
        return lambda values: head.normalize(values, group)

    def _update_statistics(self, vs_t: tf.Tensor, mask_t: tf.Tensor, task_t: tf.Tensor,
                           signal_vs_t: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        """PopArt: the targets `vs_t` `[T, B]` (and `signal_vs_t` `[T, B, n]`) of the
        valid steps `mask_t` `[T, B]` move the statistics, each of the task `task_t`
        `[T, B]` its step is in; returns their metrics (none without normalisation)."""
        head = self.core.parts.baseline_head
        metrics = update_statistics(head, vs_t, mask_t, task_t)
        if head.normalized_output and signal_vs_t is not None:
            update_by_task(self.signal_values, signal_vs_t, mask_t, task_t)
        return metrics

    @tf.function(autograph=False)  # no tensor-dependent Python control flow; tracing is ~3x faster
    def learn(self, batch: Batch) -> Dict[str, tf.Tensor]:
        # Long: one traced step read top to bottom: unroll, targets, V-trace, the three losses,
        # extras, apply.
        config = self.config
        steps = batch.sequence.steps  # [T + 1, B, ...]
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first,
                            steps.task)
        mask_t = trajectory.valid_mask(steps.first)  # [T, B]
        replayed = tf.cast(batch.replayed, tf.float32)[None, :]  # [1, B]
        weights = self.importance_weights(batch)  # [B]: 1 unless replay is prioritized
        loss_mask_t = mask_t * weights[None, :]
        action_t = tf.nest.map_structure(lambda x: x[:-1], steps.action)
        behaviour_params_t = tf.nest.map_structure(lambda x: x[:-1], steps.behaviour_params)
        self.core.update_normalizer(  # statistics first, as SAC
            tf.nest.map_structure(lambda x: x[:-1], steps.observation))
        signal_metrics = {}
        if config.signals.intrinsic:  # the models as they are, then one update of each
            signal_r_t, signal_metrics = self.extras.signal_rewards(
                steps.observation, steps.action, mask_t, self.num_steps)

        with tf.GradientTape() as tape:
            outputs, _ = self.core.unroll(inputs, batch.sequence.core_state)
            params_t = tf.nest.map_structure(lambda x: x[:-1], outputs.policy_params)
            v_t = outputs.baseline[:-1]  # [T, B]
            bootstrap_value = outputs.baseline[-1]  # [B]
            log_pi_t = self._action_space.log_prob(params_t, action_t)  # [T, B]

            # At placeholder steps, r = V and discount = 0 make vs = V and A = 0.
            r_t, discount_t = self.transformed_rewards(steps, v_t, mask_t)
            log_rhos = log_pi_t - steps.behaviour_log_prob[:-1]
            targets = self._targets(log_rhos, discount_t, r_t, v_t, bootstrap_value)
            entropy_cost = self.entropy_cost()
            head = self.core.parts.baseline_head
            # Normalised units (PopArt; the identity without it), each step its task's.
            normalize = self._normalizer(steps)
            pg_advantages = targets.pg_advantages / head.std(head.group_of(steps.task[:-1]))
            baseline = tf.reduce_sum(loss_mask_t * losses.baseline_loss(
                normalize(targets.vs), normalize(v_t)))
            if not config.signals.extrinsic_strength:
                # No extrinsic reward: its targets are the baseline's own noise, which
                # sigma would scale up to the size of a real signal's advantages.
                pg_advantages, baseline = tf.zeros_like(pg_advantages), tf.zeros_like(baseline)
            signal_vs = None
            if config.signals.intrinsic:
                signal_advantages, signal_baseline, signal_vs = self._signal_targets(
                    steps, outputs.features, mask_t, log_rhos, signal_r_t)
                pg_advantages += signal_advantages
                baseline += signal_baseline

            pg = tf.reduce_sum(loss_mask_t * losses.policy_gradient_loss(
                log_pi_t, pg_advantages, config.clip_advantage))
            entropy = tf.reduce_sum(loss_mask_t * losses.entropy_loss(
                self._action_space.entropy(params_t)))
            cloning_mask_t = loss_mask_t * replayed
            policy_cloning = tf.reduce_sum(cloning_mask_t * losses.policy_cloning_loss(
                self._action_space, behaviour_params_t, params_t))
            value_cloning = tf.reduce_sum(cloning_mask_t * losses.value_cloning_loss(
                normalize(v_t), normalize(steps.behaviour_baseline[:-1])))
            total = (pg + config.baseline_cost * baseline + entropy_cost * entropy
                     + config.policy_cloning_cost * policy_cloning
                     + config.value_cloning_cost * value_cloning)
            total, extra_metrics = self.extras.added_to(total, steps, -1, params_t, loss_mask_t,
                                                        mask_t, self.num_steps)
            signal_metrics.update(extra_metrics)

        variables = self._learned_variables()
        grad_norm = self._apply(tape.gradient(total, variables), variables, batch.replayed,
                                tf.shape(mask_t)[0])
        signal_metrics.update(self._update_statistics(targets.vs, mask_t, steps.task[:-1],
                                                      signal_vs))
        return {
            'loss/policy_gradient': pg,
            'loss/baseline': baseline,
            'loss/entropy': entropy,
            'loss/policy_cloning': policy_cloning,
            'loss/value_cloning': value_cloning,
            'loss/total_loss': total,
            'grad_norm': grad_norm,
            'learning_rate': tf.identity(self.learning_rate),
            'entropy_cost': entropy_cost,
            'mean_rho': tf.reduce_sum(mask_t * tf.exp(log_pi_t - steps.behaviour_log_prob[:-1]))
                        / tf.maximum(tf.reduce_sum(mask_t), 1.0),
            **signal_metrics,
            **self.priority_outputs(batch, weights, tf.abs(targets.vs - v_t), mask_t),
        }

    def _signal_targets(self, steps, features: tf.Tensor, mask_t: tf.Tensor,
                        log_rhos: tf.Tensor, signal_r_t: tf.Tensor):
        """(summed policy-gradient advantages `[T, B]`, summed baseline loss `[]`, value
        targets `[T, B, n]`) of the intrinsic components: `signal_r_t` `[T, B, n]`, each
        discounted by its own gamma and valued by its `signal_values` output over
        `features` `[T + 1, B, H]` (each step's task's); advantages and losses in
        normalised units, each step's in its task's."""
        n = signal_r_t.shape[-1]
        group = self._signal_task(steps.task)[..., None] * n + tf.range(n)  # [T + 1, B, n]
        values = tf.gather(self.signal_values(features), group, axis=2, batch_dims=2)
        v_t, bootstrap_value = values[:-1], values[-1]
        episodic = self.config.signals.episodic
        r_t, discount_t, learned = signal_losses.across_episode_ends(
            mask_t[..., None], signal_r_t, v_t,
            signal_losses.component_discounts(steps.discount[:-1], self._gammas, episodic),
            episodic)
        # A placeholder's action was never taken: the move to the next episode is on-policy.
        log_rhos = tf.where(mask_t > 0, log_rhos, tf.zeros_like(log_rhos))
        vs, advantages = signal_losses.component_targets(
            self._targets, log_rhos, discount_t, r_t, v_t, bootstrap_value)
        group = group[:-1]
        normalize = self.signal_values.normalize
        baseline = tf.reduce_sum(learned * losses.baseline_loss(normalize(vs, group),
                                                                normalize(v_t, group)))
        advantages = tf.reduce_sum(advantages / self.signal_values.std(group), -1)
        return advantages, baseline, vs

    def _signal_task(self, task: tf.Tensor) -> tf.Tensor:
        """Each step's block of `signal_values` outputs (`task`, any shape): its task's
        with one block per task, else the one block (0)."""
        return task if self.signal_values.groups > len(self.config.signals.intrinsic) \
            else tf.zeros_like(task)

