"""A2C's learner: advantages by GAE on the batch's fresh sequences, one `@tf.function`
step; the prior's KL, behavioural cloning and critic pre-training come from
`agents.extras` through the config's `prior`, `signals` and `critic_pretrain`
sub-configs, with one call in the step."""

from typing import Dict

import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.a2c import losses
from reverb_agents.agents.a2c.config import A2CConfig
from reverb_agents.agents.learner_base import LearnerBase
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch

METRICS = ('loss/policy_gradient', 'loss/baseline', 'loss/entropy', 'loss/total_loss',
           'grad_norm', 'learning_rate')


class A2CLearner(LearnerBase):
    """Owns the core, the optimiser and the counters; `step(batch)` learns."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: A2CConfig):
        super().__init__(config, name='a2c_learner')
        self.core, self._actions = core, action_space
        self.attach_extras(core, action_space, config.unroll_length, config.batch_size)
        create_slots(self.optimizer, core.trainable_variables)

    @tf.function(autograph=False)
    def learn(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One update from `[T + 1, B]` sequences (the last step bootstraps)."""
        config = self.config
        steps = batch.sequence.steps
        mask_t = trajectory.valid_mask(steps.first)  # [T, B]: 0 at episodes' placeholders
        self.core.update_normalizer(tf.nest.map_structure(lambda x: x[:-1], steps.observation))
        with tf.GradientTape() as tape:
            outputs, _ = self.core.unroll(
                CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                           steps.first), batch.sequence.core_state)
            params_t = tf.nest.map_structure(lambda x: x[:-1], outputs.policy_params)
            v_t = outputs.baseline[:-1]  # [T, B]
            # At placeholder steps r = V and discount 0: their advantage is 0.
            r_t, discount_t = self.transformed_rewards(steps, v_t, mask_t)
            advantage_t = tf.stop_gradient(returns.generalized_advantages(
                r_t, discount_t, v_t, outputs.baseline[-1], config.gae_lambda))
            action_t = tf.nest.map_structure(lambda x: x[:-1], steps.action)
            pg = tf.reduce_sum(mask_t * losses.policy_gradient_loss(
                self._actions.log_prob(params_t, action_t), advantage_t))
            baseline = tf.reduce_sum(mask_t * losses.baseline_loss(advantage_t + v_t, v_t))
            entropy = -tf.reduce_sum(mask_t * self._actions.entropy(params_t))
            total = pg + config.baseline_cost * baseline + config.entropy_cost * entropy
            total, extra_metrics = self.extras.added_to(total, steps, -1, params_t, mask_t,
                                                        mask_t, self.num_steps)
        variables = self.core.trainable_variables
        grad_norm = self._apply(tape.gradient(total, variables), variables, batch.replayed,
                                tf.shape(mask_t)[0])
        return {'loss/policy_gradient': pg, 'loss/baseline': baseline, 'loss/entropy': entropy,
                'loss/total_loss': total, 'grad_norm': grad_norm,
                'learning_rate': tf.identity(self.learning_rate), **extra_metrics}
