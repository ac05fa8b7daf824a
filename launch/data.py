"""The learner's data: a stream of batches built from the agent's data plan.

Mixed batches (`DataPlan.schedule is None`): each batch takes
`plan.num_replayed` sequences from `replay` and the rest from `queue`
(`replay.dataset.mixed_dataset`). A `ReplaySchedule` (ACER) alternates whole
batches instead: one on-policy batch, then `schedule.replayed_batches()`
replayed ones once `replay` holds `schedule.start_size` sequences. That
size is read without blocking, because the actors wait on the very queue the
on-policy batches drain.

Either stream ends (StopIteration, or `tf.errors.OutOfRangeError` inside a
compiled step) when a table gave no data for `timeout_ms`, so a learner
whose actors died gets control back.
"""

from typing import Callable, Dict, Iterator, Union

import numpy as np
import reverb
import tensorflow as tf

from agents.contract import DataPlan
from replay import dataset as dataset_lib
from replay import tables, trajectory

DATA_TIMEOUT_MS = 20_000  # a learner's dataset ends after this long without data

Batches = Union[tf.data.Iterator, Iterator[dataset_lib.Batch]]


def open_batches(address: str, signature: trajectory.Sequence, plan: DataPlan,
                 client: reverb.Client, timeout_ms: int = DATA_TIMEOUT_MS) -> Batches:
    """The learner's batches from the server at `address` (`client` talks to it)."""
    if plan.schedule is None:
        return iter(dataset_lib.mixed_dataset(address, signature, plan.batch_sequences,
                                              plan.replay_fraction, timeout_ms))
    return _scheduled(address, signature, plan, client, timeout_ms)


def _scheduled(address: str, signature: trajectory.Sequence, plan: DataPlan,
               client: reverb.Client, timeout_ms: int) -> Iterator[dataset_lib.Batch]:
    schedule = plan.schedule
    fresh = iter(dataset_lib.mixed_dataset(address, signature, plan.batch_sequences, 0.0,
                                           timeout_ms))
    replayed = None
    rng = np.random.default_rng()
    while True:
        batch = next(fresh, None)
        if batch is None:  # the queue gave nothing for timeout_ms
            return
        yield batch
        if replayed is None:
            items = client.server_info(timeout=10)[tables.REPLAY].current_size
            if items * max(1, trajectory.envs_per_item(signature)) < schedule.start_size:
                continue
            replayed = iter(dataset_lib.mixed_dataset(address, signature, plan.batch_sequences,
                                                      1.0, timeout_ms))
        for _ in range(schedule.replayed_batches(rng)):
            batch = next(replayed, None)
            if batch is None:
                return
            yield batch


def make_learn(learner) -> Callable[[Batches], Dict[str, tf.Tensor]]:
    """`learn(batches)`: one learner step on the next batch.

    A `tf.data` iterator is read inside the compiled step, which saves the
    Python-side handling of every batch (~15% of a SAC step here); any other
    iterator (a schedule) is read in Python. Raises StopIteration when the
    data ends.
    """

    @tf.function(autograph=False)
    def learn_in_graph(iterator):
        return learner.step(iterator.get_next())

    def learn(batches):
        if isinstance(batches, tf.data.Iterator):
            try:
                return learn_in_graph(batches)
            except tf.errors.OutOfRangeError:
                raise StopIteration from None
        return learner.step(next(batches))

    return learn
