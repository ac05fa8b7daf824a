"""Polyak averages: `soft_update` (SAC's target critics, ACER's average network) and a
slow average of a core's trainable weights, for the evaluations and the export.

Polyak (exponential) averaging: after each update `average <- rate * weights +
(1 - rate) * average`, with `rate = max(tau, 1 / (RECENT * n))` after the `n`-th
update (at most 1): about the last `1 / tau` updates, or in a run of fewer than
`1 / (RECENT * tau)` updates about its last tenth, so that neither the initial
weights nor the run's early ones weigh on a short run's average. Learning never
reads it.
`swapped_into` puts the average in the core for a block (an evaluation, scheduled or
final, the export) and the learned weights back after it, so a run that learns on
(the Python API, a resume) learns from its own weights. A learner offers it through the
contract's `final_policy` (`agents.contract.Learner`).

Why: a run's last update can leave a policy that its recent past did not have (a
"broken snapshot", docs/benchmarks.md#an-average-of-the-actors-weights); the
average is the policy of the last few hundred updates instead of the last one.
"""

import contextlib
from typing import Iterator, Sequence, Union

import tensorflow as tf


def soft_update(targets: Sequence[tf.Variable], sources: Sequence[tf.Variable],
                tau: Union[float, tf.Tensor]) -> None:
    """target <- tau * source + (1 - tau) * target, variable by variable (`tau` a float
    or a scalar tensor; graph-safe)."""
    for target, source in zip(targets, sources):
        target.assign(tau * source + (1.0 - tau) * target)


TAU_DOC = ("every evaluation (scheduled or final) and the export use a Polyak average of "
           "the policy's weights over about the last 1 / tau updates "
           "(agents/policy_average.py); 0: the learned weights")

# The part of the updates so far that the average covers while `1 / tau` is more: the
# rate 1 / (RECENT * n) leaves the update k of n about (k / n) ** (1 / RECENT - 1) of
# the last one's weight.
RECENT = 0.1


class PolicyAverage(tf.Module):
    """`weights`: one non-trainable copy of each of the averaged variables, in order,
    starting at their values, and `updates` (both part of the learner's checkpoint)."""

    def __init__(self, variables: Sequence[tf.Variable], tau: float,
                 name: str = 'policy_average'):
        super().__init__(name=name)
        if not 0.0 < tau <= 1.0:
            raise ValueError(f'the average needs tau in (0, 1], got {tau}')
        self.tau = tau
        self.updates = tf.Variable(0.0, trainable=False, name='updates')
        # Only copies are kept: the sources come with each call, so the core's variables
        # are not tracked a second time under this module.
        self.weights = [tf.Variable(v, trainable=False, name=f'average_{i}')
                        for i, v in enumerate(variables)]

    def _check(self, sources: Sequence[tf.Variable]) -> None:
        shapes = [tuple(v.shape) for v in sources]
        if shapes != [tuple(w.shape) for w in self.weights]:
            raise ValueError(f'the average holds {len(self.weights)} variables of other '
                             f'shapes than the {len(shapes)} given')

    def update(self, sources: Sequence[tf.Variable]) -> None:
        """Moves the average `rate` of the way to `sources` (graph-safe: call it inside
        the learner's step)."""
        self._check(sources)
        n = self.updates.assign_add(1.0)
        rate = tf.minimum(1.0, tf.maximum(self.tau, 1.0 / (RECENT * n)))
        soft_update(self.weights, sources, rate)

    @contextlib.contextmanager
    def swapped_into(self, sources: Sequence[tf.Variable]) -> Iterator[None]:
        """`sources` hold the average inside the block and their own values again after
        it, whatever the block raised (eager, outside any step)."""
        self._check(sources)
        learned = [v.numpy() for v in sources]
        for source, average in zip(sources, self.weights):
            source.assign(average)
        try:
            yield
        finally:
            for source, value in zip(sources, learned):
                source.assign(value)
