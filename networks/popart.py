"""PopArt: value outputs learned in normalised units, predicted in the reward's.

van Hasselt et al. 2016, "Learning values across many orders of magnitude";
Hessel et al. 2019, "Multi-task deep reinforcement learning with PopArt"
(IMPALA + PopArt). A value head is a linear layer whose output `n(x)` is
normalised; the value is `sigma * n(x) + mu` with running statistics mu,
sigma of the value targets. When the statistics move, the layer's weights
and bias are rescaled so that every unnormalised prediction stays exactly
what it was ("preserving outputs precisely"):

    w' = w * sigma / sigma',    b' = (sigma * b + mu - mu') / sigma'.

The learner computes its targets in unnormalised units, then takes the value
loss and the policy's advantages in normalised ones (divided by sigma), so
the size of the gradients no longer follows the size of the rewards.

The statistics are non-trainable variables of the head, so they travel to the
actors with the weights, are checkpointed and are part of an exported policy,
which therefore predicts values in the reward's units. A head without
normalisation (`normalized=False`) has mu = 0, sigma = 1 fixed: it is a plain
linear layer.

Statistics are first and second moments, tracked per "group" of outputs (one
shared by all of a Q head's actions, one per reward component, or one per task
of a task sequence: PopArt's multi-task form), with a step size
`max(step_size, 1 / count)`: the first batches are averaged exactly (no bias
towards the initial mu = 0, sigma = 1), then an exponential moving average
takes over. Groups that always see targets together share one count; groups
seen at different times (tasks) count their own batches, so a task met late
in a run is still averaged exactly at first.
"""

from typing import Dict, Optional, Tuple

import sonnet as snt
import tensorflow as tf

# What a learner adds to its metrics with PopArt (the value head's target statistics).
METRICS = ('popart/mean', 'popart/std')

# sigma's bounds: below, a constant target would divide by ~0; above, float32 loses
# the normalised output's precision.
STD_MIN = 1e-4
STD_MAX = 1e6


def std_from_moments(mean: tf.Tensor, second_moment: tf.Tensor) -> tf.Tensor:
    """sigma = sqrt(second - mean^2), clipped to [STD_MIN, STD_MAX]."""
    return tf.clip_by_value(tf.sqrt(tf.maximum(second_moment - tf.square(mean), 0.0)),
                            STD_MIN, STD_MAX)


def updated_moments(mean: tf.Tensor, second_moment: tf.Tensor, count: tf.Tensor,
                    targets: tf.Tensor, mask: tf.Tensor, step_size: float
                    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One batch of targets merged into the moments.

    mean, second_moment `[G]`; count `[]` (batches merged so far) or `[G]` (batches
    each group had a valid entry in); targets and mask `[N, G]` (mask 0 drops an
    entry; a group with no valid entry keeps its moments and its count). Returns
    (mean, second_moment, count): each group moves by `max(step_size, 1 / count')`
    towards the batch's masked moments, count' being its count after this batch.
    """
    targets = tf.cast(targets, tf.float32)
    mask = tf.cast(mask, tf.float32)
    valid = tf.reduce_sum(mask, 0)  # [G]
    safe = tf.maximum(valid, 1.0)
    batch_mean = tf.reduce_sum(mask * targets, 0) / safe
    batch_second = tf.reduce_sum(mask * tf.square(targets), 0) / safe
    seen = tf.cast(valid > 0, tf.float32)
    count = count + (1.0 if count.shape.rank == 0 else seen)
    rate = tf.maximum(step_size, 1.0 / tf.maximum(count, 1.0)) * seen
    return (mean + rate * (batch_mean - mean),
            second_moment + rate * (batch_second - second_moment), count)


def rescaled(w: tf.Tensor, b: tf.Tensor, old_mean: tf.Tensor, old_std: tf.Tensor,
             new_mean: tf.Tensor, new_std: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """The output layer (w `[H, O]`, b `[O]`) that makes the same unnormalised
    predictions under (new_mean, new_std) as (w, b) under the old ones; the
    statistics `[O]` (already broadcast from their groups to the outputs)."""
    return w * (old_std / new_std), (old_std * b + old_mean - new_mean) / new_std


class PopArtLinear(snt.Linear):
    """A linear value output `[N, H] -> [N, O]` with PopArt statistics over `groups`
    groups of outputs, each a block of O / groups consecutive outputs (1: one shared
    by all outputs; O: one per output; a task's block of a Q head's actions).

    `__call__` gives unnormalised values, `normalized` the layer's own output;
    `update(targets, mask)` merges a batch of unnormalised targets into the
    statistics and rescales the layer so that `__call__` is unchanged.
    `count_per_group`: each group counts the batches it had targets in (groups
    that are not updated together, such as tasks).
    """

    def __init__(self, output_size: int, normalized: bool = False, groups: int = 1,
                 step_size: float = 3e-4, w_init: Optional[snt.initializers.Initializer] = None,
                 count_per_group: bool = False, name: Optional[str] = None):
        super().__init__(output_size, w_init=w_init, name=name)
        if groups < 1 or output_size % groups:
            raise ValueError(f'PopArt groups must divide the output size {output_size}, '
                             f'got {groups}')
        if not 0.0 < step_size <= 1.0:
            raise ValueError(f'PopArt step_size must be in (0, 1], got {step_size}')
        self.normalized_output = bool(normalized)
        self.groups = groups
        self.step_size = float(step_size)
        if self.normalized_output:
            # Moments of (0, 1): mu = 0, sigma = 1 until the first update.
            self.mean = tf.Variable(tf.zeros([groups]), trainable=False, name='popart_mean')
            self.second_moment = tf.Variable(tf.ones([groups]), trainable=False,
                                             name='popart_second_moment')
            self.count = tf.Variable(tf.zeros([groups] if count_per_group else []),
                                     trainable=False, name='popart_count')

    def statistics(self) -> Tuple[tf.Tensor, tf.Tensor]:
        """(mu, sigma) per group `[G]`: (0, 1) without normalisation."""
        if not self.normalized_output:
            return tf.zeros([self.groups]), tf.ones([self.groups])
        return tf.identity(self.mean), std_from_moments(self.mean, self.second_moment)

    def metrics(self) -> Dict[str, tf.Tensor]:
        """`METRICS` of the first group: its mu and sigma `[]`."""
        mean, std = self.statistics()
        return dict(zip(METRICS, (mean[0], std[0])))

    def _per_output(self, x: tf.Tensor) -> tf.Tensor:
        """A group statistic `[G]` repeated over its block of outputs: `[O]` (`[1]`, which
        broadcasts as `[O]` does, with one group)."""
        block = self.output_size // self.groups
        if self.groups == 1 or block == 1:
            return x  # tf.repeat builds ~28 ops, and every trace of a value head pays them
        return tf.reshape(tf.tile(x[:, None], [1, block]), [-1])

    def group_of(self, task: tf.Tensor) -> Optional[tf.Tensor]:
        """The group of each entry of `task` (any shape) for `normalize` and `std`: the
        task itself with one group per task, None (the one group) otherwise."""
        return task if self.groups > 1 else None

    def normalized(self, features: tf.Tensor) -> tf.Tensor:
        """features `[N, H]` -> the normalised output `[N, O]`."""
        return super().__call__(features)

    def __call__(self, features: tf.Tensor) -> tf.Tensor:
        """features `[N, H]` -> unnormalised values `[N, O]`."""
        out = snt.Linear.__call__(self, features)
        if not self.normalized_output:
            return out
        mean, std = self.statistics()
        return out * self._per_output(std) + self._per_output(mean)

    def normalize(self, values: tf.Tensor, group: Optional[tf.Tensor] = None) -> tf.Tensor:
        """Unnormalised values -> normalised: any shape with one group, else `[..., G]`;
        with `group` (int, the shape of `values`), each value in its own group's units."""
        mean, std = self.statistics()
        if group is not None:
            return (values - tf.gather(mean, group)) / tf.gather(std, group)
        if self.groups == 1:
            return (values - mean[0]) / std[0]
        return (values - mean) / std

    def std(self, group: Optional[tf.Tensor] = None) -> tf.Tensor:
        """sigma: `[]` with one group, else `[G]` (1 without normalisation); with
        `group` (int, any shape), each entry's group's sigma (that shape)."""
        std = self.statistics()[1]
        if group is not None:
            return tf.gather(std, group)
        return std[0] if self.groups == 1 else std

    def update(self, targets: tf.Tensor, mask: tf.Tensor) -> None:
        """Merges unnormalised `targets` `[N, G]` (mask `[N, G]`) into the statistics and
        rescales the layer so that unnormalised outputs are preserved. A no-op without
        normalisation."""
        if not self.normalized_output:
            return
        old_mean, old_std = self.statistics()
        mean, second, count = updated_moments(self.mean, self.second_moment, self.count,
                                              targets, mask, self.step_size)
        new_std = std_from_moments(mean, second)
        w, b = rescaled(self.w, self.b, self._per_output(old_mean), self._per_output(old_std),
                        self._per_output(mean), self._per_output(new_std))
        self.w.assign(w)
        self.b.assign(b)
        self.mean.assign(mean)
        self.second_moment.assign(second)
        self.count.assign(count)


def update_by_task(layer: PopArtLinear, targets: tf.Tensor, mask: tf.Tensor,
                   task: tf.Tensor) -> None:
    """Merges a batch of targets `[T, B]`, or `[T, B, n]` of n components (valid where
    `mask` `[T, B]` is 1), into `layer`'s statistics: component k's into group k, or,
    when the layer has a block of n groups per task (`groups` = tasks x n, task-major),
    each into its component's group in the block of its task (`task` `[T, B]`)."""
    n = targets.shape[-1] if targets.shape.rank == 3 else 1
    tasks = layer.groups // n
    # Every target offered to its component's group in every block, valid in its task's.
    targets = tf.tile(tf.reshape(targets, [-1, n]), [1, tasks])
    valid = tf.reshape(mask, [-1, 1, 1]) * tf.ones([1, 1, n])
    if tasks > 1:
        valid *= tf.one_hot(tf.reshape(task, [-1]), tasks)[:, :, None]
    layer.update(targets, tf.reshape(valid, [-1, tasks * n]))


def task_metric_names(num_tasks: int) -> Tuple[str, ...]:
    """With one value output per task (`num_tasks > 1`), each task's mu and sigma:
    `popart/task0/mean`, `popart/task0/std`, ...; none otherwise."""
    if num_tasks <= 1:
        return ()
    return tuple(f'popart/task{k}/{m}' for k in range(num_tasks) for m in ('mean', 'std'))


def task_metrics(layer: PopArtLinear) -> Dict[str, tf.Tensor]:
    """`task_metric_names(layer.groups)` of a normalised layer whose groups are tasks."""
    names = task_metric_names(layer.groups) if layer.normalized_output else ()
    if not names:
        return {}
    mean, std = layer.statistics()
    return dict(zip(names, [x for k in range(layer.groups) for x in (mean[k], std[k])]))


def update_statistics(layer: PopArtLinear, targets: tf.Tensor, mask: tf.Tensor,
                      task: tf.Tensor) -> Dict[str, tf.Tensor]:
    """`update_by_task` for a layer whose groups are tasks, then its metrics (its mean
    and std, and each task's); nothing, and no metric, when the layer is unnormalised."""
    if not layer.normalized_output:
        return {}
    update_by_task(layer, targets, mask, task)
    return {**layer.metrics(), **task_metrics(layer)}


def scale_layer(layer: snt.Linear, factor: tf.Tensor) -> None:
    """Multiplies a linear layer's outputs by `factor` `[]` (w and b alike): what an
    output that is sigma times another network's (ACER's SDN advantage) needs when
    sigma becomes sigma' (factor sigma / sigma')."""
    layer.w.assign(layer.w * factor)
    layer.b.assign(layer.b * factor)
