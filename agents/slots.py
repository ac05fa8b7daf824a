"""Optimiser slots created before a learner's first step (no Reverb, no agent: the
reward signals' models use it too, and agent configs import those)."""

from typing import Optional, Sequence

import sonnet as snt
import tensorflow as tf


def create_slots(optimizer: Optional[snt.Optimizer], variables: Sequence[tf.Variable]) -> None:
    """Creates `optimizer`'s slot variables for `variables` now, outside any `tf.function`,
    in the order its step will apply them (a step that applies a prefix of them uses the
    prefix's slots). A `tf.function` that creates variables on its first call traces
    twice, and a step's trace is most of a small run's start-up
    (docs/benchmarks.md#start-up). Sonnet's optimisers create their slots in `_initialize`
    on the first `apply`, and only then."""
    if optimizer is not None:
        optimizer._initialize(list(variables))  # pylint: disable=protected-access
