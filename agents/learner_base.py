"""What every learner owns besides its networks: an annealed optimiser, counters, extras,
and the average of the policy's weights that evaluations and the export use.

A learner subclasses `LearnerBase` (one level, no further hierarchy; it is the
contract's `agents.contract.Learner`) and writes its own `@tf.function` `learn`, its
algorithm's update; the base's `step` runs the declared extras' phases around it
(`agents.extras`). The attribute names here are part of the checkpoints.
"""

from typing import Any, ContextManager, Dict, List, Optional, Tuple

import sonnet as snt
import tensorflow as tf

from reverb_agents.agents import contract, priorities
from reverb_agents.agents.extras import CRITIC_PRETRAIN, CriticPretraining, LearnerExtras
from reverb_agents.agents.extras.cloning import BehaviourCloning
from reverb_agents.agents.extras.prior_kl import PriorKL
from reverb_agents.agents.optimizers import Adam, RMSProp
from reverb_agents.agents.policy_average import PolicyAverage
from reverb_agents.agents.signals.demos import zeros_like_specs
from reverb_agents.agents.signals.signals import RewardSignals


class LearnerBase(contract.Learner):
    """`learning_rate` (a variable the launcher anneals), `optimizer`, `num_steps`,
    `num_env_frames` (fresh, non-replayed frames consumed, as in the seeds)."""

    def __init__(self, config: Any, name: str):
        """`config`: the agent's config; its `optimizer` (`OptimizerConfig`) picks and sets
        the optimiser."""
        super().__init__(name=name)
        self.config = config
        # A variable, so the launcher can anneal it without retracing the step.
        self.learning_rate = tf.Variable(config.optimizer.learning_rate, dtype=tf.float32,
                                         trainable=False, name='learning_rate')
        self.optimizer = self.make_optimizer(self.learning_rate)
        self.num_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_steps')
        self.num_env_frames = tf.Variable(0, dtype=tf.int64, trainable=False,
                                          name='num_env_frames')
        self._assigned = {}  # variable name -> the value `assign_rate` last gave it
        self.extras = LearnerExtras()  # none until `attach_extras`
        self.policy_average = None  # until `attach_extras`, with `policy_average_tau`

    def attach_extras(self, core: Any, action_space: Any, bc_length: int = 0,
                      bc_rows: int = 0) -> None:
        """Builds what the config's sub-configs declare (`agents.extras`): `signals` (the
        reward signals' models and demonstrations, from `signals`; None when it sets no
        signal and no cloning), `critic_optimizer` (with `critic_pretrain_steps` > 0)
        and `extras`: the prior's KL, behavioural cloning on `bc_length` x `bc_rows`
        demonstration windows, the signals' rewards and critic pre-training of `core`'s
        baseline; and `policy_average`, an average of `core`'s trainable weights when the
        config's `policy_average_tau` is above 0 (`final_policy`). `core`'s variables
        must exist (the optimisers' slots are made here)."""
        tau = getattr(self.config, 'policy_average_tau', 0.0)
        self.policy_average = PolicyAverage(core.trainable_variables, tau) if tau else None
        signals = getattr(self.config, 'signals', None)
        self.signals = None
        if signals is not None and (signals.intrinsic or signals.uses_bc):
            self.signals = RewardSignals(signals, core.observation_space, action_space)
            self.signals.create_variables(*zeros_like_specs(core.observation_space,
                                                            action_space))
        critic_config = getattr(self.config, 'critic_pretrain', None)
        critic = None
        if critic_config is not None and critic_config.critic_pretrain_steps > 0:
            # Its own slots, as the seed's critic learner has.
            self.critic_optimizer = self.make_optimizer(self.learning_rate)
            critic = CriticPretraining(critic_config, core, self.critic_optimizer,
                                       self.learning_rate, self._apply,
                                       self.transformed_rewards)
        prior = getattr(self.config, 'prior', None)
        self.extras = LearnerExtras(
            prior_kl=(PriorKL(prior, core.observation_space, action_space)
                      if prior is not None and prior.prior_actor else None),
            cloning=(BehaviourCloning(signals, core, action_space, self.signals, bc_length,
                                      bc_rows) if self.signals is not None and signals.uses_bc
                     else None),
            signals=self.signals if signals is not None and signals.intrinsic else None,
            critic_pretrain=critic)

    def phase(self) -> str:
        """`CRITIC_PRETRAIN` while critic pre-training is due, then `LEARN`."""
        critic = self.extras.critic_pretrain
        return CRITIC_PRETRAIN if critic is not None and critic.due(self.num_steps) \
            else contract.LEARN

    def step(self, batch: Any) -> Dict[str, tf.Tensor]:
        """One update of the current phase: critic pre-training's step while it is due,
        else the learner's `learn` and then the average's update, if the config keeps
        one (`final_policy`); scalar metrics by name."""
        if tf.executing_eagerly():  # traced in a caller's function: it asked `phase`
            self.phase()
        critic = self.extras.critic_pretrain
        if critic is not None and critic.pending:
            return critic.step(batch)
        metrics = self.learn(batch)
        if self.policy_average is not None:  # graph-safe, so traced with the caller's step
            self.policy_average.update(self.core.trainable_variables)
        return metrics

    def final_policy(self) -> Optional[ContextManager[None]]:
        """The average of the core's weights (`policy_average_tau`) in the core, if the
        config keeps one and it has averaged a learning step (before, it holds the
        initial weights, not those a pre-training on demonstrations left)."""
        if self.policy_average is None or not self.policy_average.updates.numpy():
            return None
        return self.policy_average.swapped_into(self.core.trainable_variables)

    def learn(self, batch: Any) -> Dict[str, tf.Tensor]:
        """The algorithm's update on a `replay.dataset.Batch` (`contract.Learner.step`'s
        result), one `@tf.function`."""
        raise NotImplementedError(f'{type(self).__name__} has no learn step')

    def transformed_rewards(self, steps: Any, v_t: tf.Tensor, mask_t: tf.Tensor
                            ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(rewards, discounts) `[T, B]` as the losses see them, from the batch's steps
        `[T + 1, B]`: the rewards and `discounting` times the discounts; at placeholder
        steps (`mask_t` 0) r = V (`v_t` `[T, B]`) and discount 0, so their target is
        their own value. A learner that transforms rewards overrides it."""
        r_t = tf.where(mask_t > 0, steps.reward[:-1], tf.stop_gradient(v_t))
        return r_t, steps.discount[:-1] * self.config.discounting * mask_t

    def pretrain(self) -> Optional[float]:
        """Behavioural cloning before any actor acts (`agents.extras`), each update the
        learner's clipped step; nothing without cloning. A learner whose policy has an
        optimiser of its own applies with that one instead."""
        return self.extras.pretrain(self.clip_and_apply)

    def make_optimizer(self, learning_rate: tf.Variable) -> snt.Optimizer:
        """The optimizer config's Adam or RMSProp with step size `learning_rate`."""
        c = self.config.optimizer
        if c.optimizer == 'rmsprop':
            return RMSProp(learning_rate=learning_rate, decay=c.rmsprop_decay,
                           momentum=c.rmsprop_momentum, epsilon=c.rmsprop_epsilon,
                           centered=c.rmsprop_centered)
        return Adam(learning_rate=learning_rate, beta1=c.adam_beta1, beta2=c.adam_beta2,
                    epsilon=c.adam_epsilon)

    def set_progress(self, fraction: float) -> None:
        """Anneals the learning rate: `fraction` of the env-step budget is done."""
        c = self.config.optimizer
        self.assign_rate(self.learning_rate, c.annealed(c.learning_rate, fraction))

    def assign_rate(self, variable: tf.Variable, value: float) -> None:
        """`variable.assign(value)` when `value` changed: the learner loop sets the rates
        before every step, and an eager assign costs about as much as 2% of a SAC step."""
        if self._assigned.get(variable.name) != value:
            variable.assign(value)
            self._assigned[variable.name] = value

    def clip_and_apply(self, gradients: List[tf.Tensor], variables: List[tf.Variable],
                       optimizer: Optional[snt.Optimizer] = None) -> tf.Tensor:
        """Clips by global norm and applies `optimizer` (default the learner's), counting
        nothing; returns the pre-clip global norm."""
        optimizer = optimizer or self.optimizer
        slots = getattr(optimizer, 'm', None) or getattr(optimizer, 'mom', None)
        if slots and len(slots) < len(variables):  # Sonnet would skip the rest silently
            raise ValueError(f'the optimiser has slots for {len(slots)} variables, the step '
                             f'applies {len(variables)}: create_slots() saw fewer')
        grad_norm = tf.linalg.global_norm(gradients)
        if self.config.optimizer.clip_grad_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.optimizer.clip_grad_norm,
                                                  use_norm=grad_norm)
        optimizer.apply(gradients, variables)
        return grad_norm

    def _apply(self, gradients: List[tf.Tensor], variables: List[tf.Variable],
               replayed: tf.Tensor, unroll_length: tf.Tensor,
               optimizer: Optional[snt.Optimizer] = None) -> tf.Tensor:
        """Clips by global norm, applies the optimiser (`optimizer`, default the
        learner's), counts the step and its fresh frames.

        replayed: `[B]` bool rows of the batch; returns the pre-clip global norm.
        """
        grad_norm = self.clip_and_apply(gradients, variables, optimizer)
        self.num_steps.assign_add(1)
        fresh_rows = tf.reduce_sum(1.0 - tf.cast(replayed, tf.float32))
        self.num_env_frames.assign_add(
            tf.cast(fresh_rows * tf.cast(unroll_length, tf.float32), tf.int64))
        return grad_norm

    def importance_weights(self, batch: Any) -> tf.Tensor:
        """`[B]` weights of the batch's rows in the losses: prioritized replay's
        normalised importance weights (`agents.priorities`) on replayed rows, 1
        elsewhere and under uniform sampling."""
        replay = self.config.replay
        if not replay.prioritized:
            return tf.ones_like(tf.cast(batch.replayed, tf.float32))
        beta = priorities.annealed_exponent(replay.importance_sampling_exponent,
                                            replay.importance_sampling_anneal_steps,
                                            self.num_steps)
        return priorities.importance_weights(batch.probabilities, batch.table_size,
                                             batch.replayed, beta)

    def priority_outputs(self, batch: Any, weights: tf.Tensor, abs_td_t: tf.Tensor,
                         mask_t: tf.Tensor) -> Dict[str, tf.Tensor]:
        """What a step adds to its result under prioritized sampling (nothing under
        uniform): each row's new priority from its absolute TD errors `[T, B]` over
        the valid steps `mask_t` `[T, B]` (`priorities.PRIORITIES`), and the
        replayed rows' mean priority and importance weight."""
        replay = self.config.replay
        if not replay.prioritized:
            return {}
        new = priorities.sequence_priorities(abs_td_t, mask_t, replay.priority_eta)
        replayed = tf.cast(batch.replayed, tf.float32)
        count = tf.maximum(tf.reduce_sum(replayed), 1.0)
        return {priorities.PRIORITIES: new,
                'replay/priority_mean': tf.reduce_sum(new * replayed) / count,
                'replay/is_weight_mean': tf.reduce_sum(weights * replayed) / count}
