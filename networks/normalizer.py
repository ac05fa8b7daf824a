"""Running observation normalisation (ML-Agents' `normalize`, or by the root mean square).

The statistics are variables of the actor's core, so they travel to actors
with the weights (the `variables` table), are checkpointed, and are part of
an exported policy. The learner updates them from the observations of its
batches; actors only read them.
"""

from typing import Optional

import sonnet as snt
import tensorflow as tf


MAPS = ('rms', 'standardize')


class RunningNormalizer(snt.Module):
    """A running map of `[N, D]` vectors, clipped to [-clip, clip]; stats merged batch by
    batch (Chan et al.'s parallel update of count, mean and variance).

    `map`:
    - 'standardize': (x - mean) / std (ML-Agents).
    - 'rms': x / sqrt(mean^2 + std^2), each feature divided by its root mean square and
      never centred. A feature centred on zero is scaled as 'standardize' scales it;
      one that sits near a value keeps it (Acrobot's cos at rest stays near 1, where
      'standardize' magnifies its small early spread and clips every later swing).
      Standardising loses Acrobot where this map learns it
      (docs/benchmarks.md#the-observation-map). The cost: a feature with a large
      offset and a small spread (a mean of 1000, std 1) is left near 1, its spread a
      thousandth; 'standardize' suits it.
    """

    def __init__(self, size: int, clip: float = 5.0, epsilon: float = 1e-8,
                 map: str = 'rms', name: Optional[str] = None):
        super().__init__(name=name)
        if map not in MAPS:
            raise ValueError(f'observation map must be one of {MAPS}, got {map!r}')
        self._clip = clip
        self._epsilon = epsilon
        self._map = map
        self.count = tf.Variable(0.0, trainable=False, name='count')
        self.mean = tf.Variable(tf.zeros([size]), trainable=False, name='mean')
        self.variance = tf.Variable(tf.ones([size]), trainable=False, name='variance')

    @property
    def clip(self) -> float:
        return self._clip

    @property
    def epsilon(self) -> float:
        return self._epsilon

    @property
    def map(self) -> str:
        return self._map

    def update(self, x: tf.Tensor) -> None:
        """Merges the statistics of `x` `[N, D]` into the running ones."""
        x = tf.cast(x, tf.float32)
        n = tf.cast(tf.shape(x)[0], tf.float32)
        batch_mean = tf.reduce_mean(x, 0)
        batch_variance = tf.reduce_mean(tf.square(x - batch_mean), 0)
        total = self.count + n
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * n / total
        # The first batch replaces the unit prior instead of averaging with it.
        old_m2 = self.variance * self.count
        m2 = old_m2 + batch_variance * n + tf.square(delta) * self.count * n / total
        self.mean.assign(new_mean)
        self.variance.assign(m2 / total)
        self.count.assign(total)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        if self._map == 'standardize':
            z = (x - self.mean) * tf.math.rsqrt(self.variance + self._epsilon)
        else:
            z = x * tf.math.rsqrt(self.variance + tf.square(self.mean) + self._epsilon)
        return tf.clip_by_value(z, -self._clip, self._clip)
