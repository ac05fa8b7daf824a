"""Batches in an order the seed fixes, for deterministic runs (`--deterministic`).

Reverb's `Uniform` selector draws from a generator no seed reaches, and a
`tf.data` stream prefetches whenever its threads get to it. Here one caller
reads one batch when it is due, and `replay` samples in a seeded order:

- **`SampleClock`.** `replay` is a `MinHeap` table (`replay.tables`,
  `seeded_sampling`) and an item's priority is the time of its next sample on
  a clock that sampling advances: an item enters at the current time plus an
  Exp(1) draw, and a sampled item, whose priority is the current time, moves
  on by another draw. The heap yields the item whose next sample comes first.
  Exponential waits forget how long they have lasted, so each sample is
  uniform over the items the table holds at that moment, with replacement:
  the `Uniform` selector's distribution, drawn from a seeded numpy generator.
  The price: one priority write per replayed row before the next can be
  sampled.
- **`SeededBatches`.** `queue` is FIFO, so its items come in the order the
  actor wrote them; a batch is read only once both tables can give it (the
  rate limiters answer from the tables' state, not from a timeout), and until
  then the caller's `act()` produces data.

The rows go through `replay.dataset.batch_assembler`, as a `tf.data` batch
does, so a learner sees the same `Batch` either way.
"""

from typing import Callable, List, Mapping, Sequence, Tuple, Union

import numpy as np
import reverb
import tensorflow as tf

from reverb_agents.replay import dataset, tables, trajectory
from reverb_agents.replay.packing import Packing


_INFO = len(reverb.replay_sample.SampleInfo._fields)  # a sample's leading info tensors


class SampleClock:
    """Priorities of `replay` items: each item's next sample time (see the module doc)."""

    def __init__(self, seed: Union[int, np.random.SeedSequence]):
        self._rng = np.random.default_rng(seed)
        self.now = 0.0  # the time of the last sample

    def new_item_priority(self) -> float:
        """The first sample time of an item inserted now."""
        return self.now + float(self._rng.exponential())

    def sampled(self, priority: float) -> float:
        """Advances the clock to a sampled item's `priority` (its sample time, the
        lowest in the table); returns that item's next sample time."""
        self.now = priority
        return priority + float(self._rng.exponential())


class SeededBatches:
    """An iterator of `replay.dataset.Batch`es: `batch_size` rows, `replay_fraction` of
    them from `replay` (sampled by `clock`), the rest the oldest items of `queue`.

    `act()` is called while the tables cannot give the next batch; it returns
    False when no more data will come, which ends the iteration (StopIteration).
    `server_tables`: the server's own `reverb.Table`s by name (this process runs
    the server), whose rate limiters say whether a sample can be taken.
    """

    def __init__(self, client: reverb.Client, server_tables: Mapping[str, reverb.Table],
                 signature: trajectory.Sequence, batch_size: int, replay_fraction: float,
                 clock: SampleClock, act: Callable[[], bool]):
        self._client = client
        self._queue = server_tables.get(tables.QUEUE)
        self._replay = server_tables.get(tables.REPLAY)
        self._clock = clock
        self._act = act
        self._num_fresh, self._num_replayed = dataset.items_per_batch(
            signature, batch_size, replay_fraction)
        packing = Packing(signature)
        assemble = dataset.batch_assembler(signature, self._num_fresh, self._num_replayed)

        def to_batch(parts):
            return assemble(*[(packing.unpack(columns), info) for columns, info in parts])

        # One graph for the unpacking and concatenation: eager, they cost ~1 ms a batch.
        self._to_batch = tf.function(to_batch, autograph=False)

    def __iter__(self) -> 'SeededBatches':
        return self

    def _available(self) -> bool:
        return ((not self._num_fresh or self._queue.can_sample(self._num_fresh))
                and (not self._num_replayed or self._replay.can_sample(self._num_replayed)))

    def __next__(self) -> dataset.Batch:
        while not self._available():
            if not self._act():
                raise StopIteration
        parts = []
        if self._num_fresh:
            parts.append(_stack(self._sample(tables.QUEUE, self._num_fresh)))
        if self._num_replayed:
            parts.append(_stack([self._sample_replay() for _ in range(self._num_replayed)]))
        return self._to_batch(parts)

    def _sample(self, table: str, n: int) -> List[reverb.ReplaySample]:
        """`n` items of `table` in one request. `Client.sample` asks for them one at a
        time, each a hand-over to a sampler thread (~0.6 ms on a loaded 2-core machine);
        the client behind it (dm-reverb 0.14, pinned) takes the request size, and
        without it the public API is used."""
        native = getattr(self._client, '_client', None)
        if native is None:
            return list(self._client.sample(table, num_samples=n, emit_timesteps=False))
        sampler = native.NewSampler(table, n, n)
        samples = []
        for _ in range(n):
            flat = sampler.GetNextTrajectory()
            samples.append(reverb.ReplaySample(
                info=reverb.replay_sample.SampleInfo(*(x.item() for x in flat[:_INFO])),
                data=flat[_INFO:]))
        return samples

    def _sample_replay(self) -> reverb.ReplaySample:
        """One item of `replay`: the next due on the clock, which then moves it on."""
        sample = self._sample(tables.REPLAY, 1)[0]
        # Uniform over the table, as the clock's waits make it (for importance weights).
        sample = sample._replace(info=sample.info._replace(
            probability=1.0 / sample.info.table_size))
        self._client.mutate_priorities(
            tables.REPLAY, updates={sample.info.key: self._clock.sampled(sample.info.priority)})
        return sample


def _stack(samples: Sequence[reverb.ReplaySample]
           ) -> Tuple[List[np.ndarray], reverb.replay_sample.SampleInfo]:
    """Items -> (packed columns `[n, ...]`, `reverb.SampleInfo` of `[n]` arrays)."""
    columns: List[np.ndarray] = [np.stack(column) for column in zip(*[s.data for s in samples])]
    info = reverb.replay_sample.SampleInfo(
        key=np.array([s.info.key for s in samples], np.uint64),
        probability=np.array([s.info.probability for s in samples], np.float64),
        table_size=np.array([s.info.table_size for s in samples], np.int64),
        priority=np.array([s.info.priority for s in samples], np.float64),
        times_sampled=np.array([s.info.times_sampled for s in samples], np.int32))
    return columns, info
