"""What every learner owns besides its networks: an annealed optimiser and counters.

A learner subclasses `LearnerBase` (one level, no further hierarchy; it is the
contract's `agents.contract.Learner`) and writes its own `@tf.function` `step`;
the attribute names here are part of the checkpoints.
"""

from typing import Any, Dict, List, Optional

import sonnet as snt
import tensorflow as tf

from reverb_agents.agents import contract, priorities


class RMSProp(snt.optimizers.RMSProp):
    """Sonnet's RMSProp with the mean square starting at 1, as `tf.compat.v1.train.
    RMSPropOptimizer` (IMPALA's) does: from 0 the first updates are up to
    1 / sqrt(1 - decay) (10x at decay 0.99) larger than the later ones.

    ms <- decay ms + (1 - decay) g^2;  mom <- momentum mom + lr g / sqrt(ms + eps);
    w <- w - mom.
    """

    def _initialize(self, parameters):
        if self.mom:  # Sonnet creates the slots on the first `apply`
            return

        def slot(p, value):
            with tf.init_scope():  # created once, outside any traced step
                return tf.Variable(tf.fill(p.shape, tf.constant(value, p.dtype)),
                                   trainable=False, name=p.name.split(':')[0])

        with tf.name_scope('momentum'):
            self.mom.extend(slot(p, 0.0) for p in parameters)
        with tf.name_scope('rms'):
            self.ms.extend(slot(p, 1.0) for p in parameters)
        if self.centered:
            with tf.name_scope('mg'):
                self.mg.extend(slot(p, 0.0) for p in parameters)


class Adam(snt.optimizers.Adam):
    """Sonnet's Adam (its slots, its update) with each parameter's update one fused
    `ResourceApplyAdam` kernel: Sonnet builds about 36 ops a parameter, which every trace
    of a step pays for in Python (docs/benchmarks.md#the-test-suite).

    The kernel's epsilon is scaled by sqrt(1 - beta2^t), so that its update
    lr sqrt(1 - beta2^t) / (1 - beta1^t) m / (sqrt(v) + epsilon') is Sonnet's
    lr m_hat / (sqrt(v_hat) + epsilon).
    """

    def apply(self, updates, parameters):
        if any(isinstance(u, tf.IndexedSlices) for u in updates):
            return super().apply(updates, parameters)
        if len(updates) != len(parameters) or not parameters:
            raise ValueError(f'Adam needs as many updates as parameters (at least one), got '
                             f'{len(updates)} and {len(parameters)}')
        self._initialize(parameters)
        self.step.assign_add(1)
        step = tf.cast(self.step, tf.float32)
        beta1_power = tf.pow(tf.cast(self.beta1, tf.float32), step)
        beta2_power = tf.pow(tf.cast(self.beta2, tf.float32), step)
        scalars = dict(beta1_power=beta1_power, beta2_power=beta2_power,
                       lr=tf.cast(self.learning_rate, tf.float32),
                       beta1=tf.cast(self.beta1, tf.float32),
                       beta2=tf.cast(self.beta2, tf.float32),
                       epsilon=self.epsilon * tf.sqrt(1.0 - beta2_power))
        for update, param, m, v in zip(updates, parameters, self.m, self.v):
            if update is None:
                continue
            if update.dtype != param.dtype:
                raise ValueError(f'an update of {update.dtype.name} for the parameter '
                                 f'{param.name} of {param.dtype.name}')
            typed = {k: tf.cast(x, param.dtype) for k, x in scalars.items()}
            tf.raw_ops.ResourceApplyAdam(var=param.handle, m=m.handle, v=v.handle,
                                         grad=update, **typed)


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
