"""The learners' optimisers: Sonnet's RMSProp started as IMPALA's, and Sonnet's Adam
applied with one fused kernel per parameter. Imports neither Reverb nor an agent, so
that the reward signals and the agents' configs can use it."""

from typing import Sequence

import sonnet as snt
import tensorflow as tf


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

    def apply(self, updates: Sequence[tf.Tensor], parameters: Sequence[tf.Variable]) -> None:
        if any(isinstance(u, tf.IndexedSlices) for u in updates):
            return super().apply(updates, parameters)
        if len(updates) != len(parameters) or not parameters:
            raise ValueError(f'Adam needs as many updates as parameters (at least one), got '
                             f'{len(updates)} and {len(parameters)}')
        self._initialize(parameters)
        self.step.assign_add(1)
        step = tf.cast(self.step, tf.float32)
        beta1, beta2 = tf.cast(self.beta1, tf.float32), tf.cast(self.beta2, tf.float32)
        beta2_power = tf.pow(beta2, step)
        scalars = dict(beta1_power=tf.pow(beta1, step), beta2_power=beta2_power,
                       lr=tf.cast(self.learning_rate, tf.float32), beta1=beta1, beta2=beta2,
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
