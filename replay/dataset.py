"""Mixed on-policy / replayed batches for the learner, time-major.

`round(replay_fraction * batch_size)` sequences come from `replay`, the rest
from `queue` (`replay.batches.split_batch`, which keeps one fresh below 1);
each table is batched separately and the two are concatenated on the batch
axis, with a mask of the replayed rows (CLEAR's cloning losses apply to those
rows only).
"""

from typing import Callable, NamedTuple, Optional, Tuple

import reverb
import tensorflow as tf

from reverb_agents.replay import tables, trajectory
from reverb_agents.replay.batches import split_batch
from reverb_agents.replay.packing import Packing


class Batch(NamedTuple):
    """What a learner step gets. The sampling information is per row: a replayed
    row's item, the probability it was sampled with and the table's size then
    (prioritized replay's importance weights and priority updates need them);
    fresh rows hold key 0, probability 1, size 1."""
    sequence: trajectory.Sequence  # steps [L, B, ...] (time-major), core_state [B, ...]
    replayed: tf.Tensor  # [B] bool: the row came from `replay`
    keys: Optional[tf.Tensor] = None  # [B] uint64 item keys
    probabilities: Optional[tf.Tensor] = None  # [B] float64 sampling probabilities
    table_size: Optional[tf.Tensor] = None  # [B] int64 items in the table at sampling


def _as_graph(function: Callable) -> Callable:
    """`function` traced as written: these maps hold no Python control flow on tensors,
    and AutoGraph's conversion of them (and of everything they call) was most of a
    small run's dataset set-up (docs/benchmarks.md#start-up)."""
    return tf.autograph.experimental.do_not_convert(function)


def item_dataset(server_address: str, table: str, signature: trajectory.Sequence,
                 **kwargs) -> tf.data.Dataset:
    """`reverb.ReplaySample`s of one table, one item each, `data` a `Sequence`.

    kwargs go to `reverb.TrajectoryDataset` (e.g. `max_in_flight_samples_per_worker`,
    `rate_limiter_timeout_ms`, `max_samples`). For tests and tools; learners
    read `table_dataset`, which unpacks once per batch.
    """
    packing = Packing(signature)
    return _packed_items(server_address, table, packing, **kwargs).map(_as_graph(
        lambda sample: sample._replace(data=packing.unpack(sample.data))))


def _packed_items(server_address: str, table: str, packing: Packing,
                  **kwargs) -> reverb.TrajectoryDataset:
    packed = packing.packed_signature()
    return reverb.TrajectoryDataset(
        server_address=server_address,
        table=table,
        dtypes=tuple(s.dtype for s in packed),
        shapes=tuple(s.shape for s in packed),
        **kwargs)


def table_dataset(server_address: str, table: str, signature: trajectory.Sequence,
                  batch_size: int, rate_limiter_timeout_ms: int = -1) -> tf.data.Dataset:
    """Batches of (`Sequence`s batch-major `[batch_size, L, ...]`, their
    `reverb.SampleInfo` `[batch_size]`) from one table."""
    packing = Packing(signature)
    dataset = _packed_items(
        server_address, table, packing,
        max_in_flight_samples_per_worker=2 * batch_size,
        # One worker: more cost CPU the learner needs and add little here.
        num_workers_per_iterator=1,
        rate_limiter_timeout_ms=rate_limiter_timeout_ms)
    # Unpacking once per batch, not per item.
    return dataset.batch(batch_size, drop_remainder=True).map(_as_graph(
        lambda sample: (packing.unpack(sample.data), sample.info)))


def _time_major(sequence: trajectory.Sequence, envs_per_item: int) -> trajectory.Sequence:
    """`[n, L, ...]` -> `[L, n, ...]`; grouped `[n, L, E, ...]` -> `[L, n * E, ...]`."""
    steps = tf.nest.map_structure(
        lambda x: tf.transpose(x, [1, 0] + list(range(2, x.shape.rank))), sequence.steps)
    core_state = sequence.core_state
    if envs_per_item:
        def merge(x, axis):
            if x.shape.is_fully_defined():  # a constant shape: 2 ops to trace, not ~12
                dims = x.shape.as_list()
                return tf.reshape(x, dims[:axis] + [-1] + dims[axis + 2:])
            shape = tf.shape(x)
            return tf.reshape(x, tf.concat([shape[:axis], [-1], shape[axis + 2:]], 0))
        steps = tf.nest.map_structure(lambda x: merge(x, 1), steps)
        core_state = tf.nest.map_structure(lambda x: merge(x, 0), core_state)
    return trajectory.Sequence(steps=steps, core_state=core_state)


def mixed_dataset(server_address: str,
                  signature: trajectory.Sequence,
                  batch_size: int,
                  replay_fraction: float,
                  rate_limiter_timeout_ms: int = -1,
                  prefetch: int = 2) -> tf.data.Dataset:
    """A dataset of `Batch`es: fresh rows first, then replayed rows.

    With grouped items (`trajectory.envs_per_item(signature) = E > 0`) a batch is
    `batch_size / E` items, each contributing its E environments as rows.
    """
    num_fresh, num_replayed = items_per_batch(signature, batch_size, replay_fraction)
    parts = []
    if num_fresh:
        parts.append(table_dataset(server_address, tables.QUEUE, signature, num_fresh,
                                   rate_limiter_timeout_ms))
    if num_replayed:
        parts.append(table_dataset(server_address, tables.REPLAY, signature, num_replayed,
                                   rate_limiter_timeout_ms))
    return tf.data.Dataset.zip(tuple(parts)).map(
        _as_graph(batch_assembler(signature, num_fresh, num_replayed))).prefetch(prefetch)


def items_per_batch(signature: trajectory.Sequence, batch_size: int,
                    replay_fraction: float) -> Tuple[int, int]:
    """(items from `queue`, items from `replay`) in one batch of `batch_size` rows."""
    group = trajectory.envs_per_item(signature)
    if group and batch_size % group:
        raise ValueError(f'batch_size ({batch_size}) must be a multiple of the environments '
                         f'per item ({group}, the actor\'s num_envs)')
    return split_batch(batch_size // max(group, 1), replay_fraction)


def batch_assembler(signature: trajectory.Sequence, num_fresh: int,
                    num_replayed: int) -> Callable[..., Batch]:
    """`assemble(*parts)` -> `Batch`: one part per table read, `queue`'s first, each
    (`Sequence` batch-major `[n, L, ...]`, its `reverb.SampleInfo` `[n]`) of `n` items
    (`num_fresh`, then `num_replayed`; a table with 0 items has no part)."""
    group = trajectory.envs_per_item(signature)
    rows = max(group, 1)
    replayed = tf.constant([False] * num_fresh * rows + [True] * num_replayed * rows)
    fresh_rows = num_fresh * rows

    def assemble(*batches) -> Batch:
        sequences, infos = zip(*batches)
        sequence = tf.nest.map_structure(lambda *xs: tf.concat(xs, 0), *sequences)
        info = infos[-1]  # each row of an item carries that item's information
        # Each item's value on each of its rows (`[n] -> [n * rows]`; tf.repeat builds ~28 ops).
        per_row = ((lambda x: tf.reshape(tf.tile(x[:, None], [1, rows]), [-1])) if group
                   else (lambda x: x))
        keys, probabilities, table_size = (per_row(info.key), per_row(info.probability),
                                           per_row(info.table_size))
        if num_replayed and fresh_rows:
            keys = tf.concat([tf.zeros([fresh_rows], tf.uint64), keys], 0)
            probabilities = tf.concat([tf.ones([fresh_rows], tf.float64), probabilities], 0)
            table_size = tf.concat([tf.ones([fresh_rows], tf.int64), table_size], 0)
        elif not num_replayed:
            keys = tf.zeros([fresh_rows], tf.uint64)
            probabilities = tf.ones([fresh_rows], tf.float64)
            table_size = tf.ones([fresh_rows], tf.int64)
        return Batch(_time_major(sequence, group), replayed, keys, probabilities, table_size)

    return assemble
