"""Learner weights through the `max_size=1` `variables` table.

The learner inserts the current values (replacing the previous item); actors
sample the single item and assign it to their own copy of the network. The
first fetch blocks (with a timeout) until the learner has published once;
later fetches are cheap and happen off the per-step path, and one with
nothing published since the last (the table's insert count unchanged) reads
and assigns nothing.

The item's priority, which `variables`' FIFO sampler ignores, carries one
number from the learner to the actors: under prioritized replay, the
priority new items enter `replay` at (`replay.priorities`).
"""

import time
from typing import Callable, List, Optional

import numpy as np
import reverb
import tensorflow as tf

from reverb_agents.replay import tables


class VariablePublisher:
    """Inserts the learner's variables into `variables`."""

    def __init__(self, client: reverb.Client, variables: List[tf.Variable],
                 table: str = tables.VARIABLES,
                 new_item_priority: Optional[Callable[[], float]] = None):
        """`new_item_priority()`: what actors' new `replay` items get, sent along."""
        self._client = client
        self._variables = list(variables)
        self._table = table
        self._new_item_priority = new_item_priority or (lambda: 1.0)
        # One call reads them all: an eager read per variable costs about 3x as much.
        self._read = tf.function(lambda: [v.read_value() for v in self._variables],
                                 autograph=False).get_concrete_function()

    def publish(self):
        self._client.insert([value.numpy() for value in self._read()],
                            {self._table: float(self._new_item_priority())})


class VariableFetcher:
    """Copies the published weights into the actor's variables."""

    def __init__(self, client: reverb.Client, variables: List[tf.Variable],
                 table: str = tables.VARIABLES):
        self._client = client
        self._variables = list(variables)
        self._table = table
        self.num_fetches = 0
        self.new_item_priority = 1.0  # as the learner published it with the weights
        # The table's count of completed inserts at the last fetch: the same count, the
        # same weights (an actor fetches more often than a learner publishes).
        self._inserts_seen: Optional[int] = None
        # As tuples: comparing a numpy shape with a `TensorShape` converts it each time.
        self._shapes = [tuple(v.shape) for v in self._variables]
        # One call assigns them all (an eager assign per variable costs about 5x as much),
        # a concrete function of the flat values: a `tf.function`'s handling of a list
        # argument costs as much again as the assigns.
        def assign(*values):
            for variable, value in zip(self._variables, values):
                variable.assign(value, read_value=False)

        self._assign = tf.function(assign, autograph=False).get_concrete_function(
            *[tf.TensorSpec(v.shape, v.dtype) for v in self._variables])

    def fetch(self, timeout_s: Optional[float] = None) -> bool:
        """Assigns the latest weights if they are new; True when it did. False when none
        arrived within `timeout_s`, or when the learner has published nothing since the
        last fetch (those weights are already assigned).

        With `timeout_s=None` it waits as long as it takes for the first weights.
        """
        # Client.sample cannot time out, so wait for the table to be non-empty first.
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            info = self._client.server_info(timeout=10)[self._table]
            if info.current_size:
                break
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        # A restarted server counts from its own start: at worst one publication is
        # taken for the last one seen, and the next is fetched.
        inserts = info.rate_limiter_info.insert_stats.completed
        if inserts == self._inserts_seen:
            return False
        sample = next(self._client.sample(self._table, num_samples=1, emit_timesteps=False))
        values = sample.data
        if len(values) != len(self._variables):
            raise ValueError(f'published weights have {len(values)} tensors, '
                             f'the actor network has {len(self._variables)}')
        self._assign(*[tf.constant(np.squeeze(value, 0) if value.shape != shape else value)
                       for shape, value in zip(self._shapes, values)])
        self.new_item_priority = float(np.asarray(sample.info.priority).reshape(-1)[0])
        self._inserts_seen = inserts
        self.num_fetches += 1
        return True
