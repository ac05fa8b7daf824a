"""The learner's data: a stream of batches built from the agent's data plan.

How fresh and replayed sequences make batches is the data plan's strategy
(`DataPlan.batch_mixing`, `replay/mixing.py`: CLEAR's mixed batches, ACER's
`ReplaySchedule`, or an agent's own); this module gives it `read(replay_fraction)`,
a stream of batches taking that share from `replay` (`replay.dataset.mixed_dataset`),
and the size of `replay`, read without blocking.

Either stream ends (StopIteration, or `tf.errors.OutOfRangeError` inside a
compiled step) when a table gave no data for `timeout_ms`, so a learner
whose actors died gets control back.

A deterministic run (`SeededReads`) reads the same batches, mixed or
scheduled, without `tf.data`: one batch when it is due, `replay` in a seeded
order (`replay.seeded`).
"""

import dataclasses
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import reverb
import tensorflow as tf

from reverb_agents.agents.contract import PRIORITIES, DataPlan, Learner
from reverb_agents.replay import dataset as dataset_lib
from reverb_agents.replay import seeded, tables, trajectory
from reverb_agents.replay.priorities import PriorityUpdater

DATA_TIMEOUT_MS = 20_000  # a learner's dataset ends after this long without data

Batches = Union[tf.data.Iterator, Iterator[dataset_lib.Batch]]


@dataclasses.dataclass(frozen=True)
class SeededReads:
    """How a deterministic run reads its batches (`launch/runners/deterministic.py`): one when
    due, `replay` in `clock`'s order, `act()` to make data until the tables can give it;
    `schedule_rng` draws for the data plan's mixing (a `ReplaySchedule`'s Poisson
    counts)."""
    server_tables: Mapping[str, reverb.Table]  # the server's own tables, by name
    clock: seeded.SampleClock
    act: Callable[[], bool]
    schedule_rng: np.random.Generator


def open_batches(address: str, signature: trajectory.Sequence, plan: DataPlan,
                 client: reverb.Client, timeout_ms: int = DATA_TIMEOUT_MS,
                 seeded_reads: Optional[SeededReads] = None) -> Batches:
    """The learner's batches from the server at `address` (`client` talks to it); with
    `seeded_reads`, in the order they fix (`replay.seeded`) instead of a `tf.data` stream."""
    if seeded_reads is None:
        def read(replay_fraction: float) -> Batches:
            return iter(dataset_lib.mixed_dataset(address, signature, plan.batch_sequences,
                                                  replay_fraction, timeout_ms))
    else:
        def read(replay_fraction: float) -> Batches:
            return seeded.SeededBatches(client, seeded_reads.server_tables, signature,
                                        plan.batch_sequences, replay_fraction,
                                        seeded_reads.clock, seeded_reads.act)
    rng = np.random.default_rng() if seeded_reads is None else seeded_reads.schedule_rng
    return plan.batch_mixing.batches(read, lambda: _replay_sequences(client, signature), rng)


def _replay_sequences(client: reverb.Client, signature: trajectory.Sequence) -> int:
    """Sequences `replay` holds, read without blocking."""
    items = client.server_info(timeout=10)[tables.REPLAY].current_size
    return items * max(1, trajectory.envs_per_item(signature))


def make_learn(learner: Learner, action_names: Optional[Sequence[str]] = None,
               priorities: Optional[PriorityUpdater] = None
               ) -> Callable[[Batches], Dict[str, tf.Tensor]]:
    """`learn(batches)`: one learner step on the next batch.

    A `tf.data` iterator is read inside the compiled step, which saves the
    Python-side handling of every batch (a noticeable share of a small SAC step:
    docs/benchmarks.md#sac-learner-fed-from-reverb); any other
    iterator (a schedule) is read in Python. Raises StopIteration when the
    data ends.

    With `action_names` (one per action leaf, `launch.runs.metrics.action_names`)
    the result also holds `action/<name>`: that leaf's actions in the batch,
    flattened, for histograms. They are the only non-scalar entries; the
    agent's own metrics stay as its `metric_names` declare.

    A prioritized learner's `PRIORITIES` go, with the batch's item keys, to
    `priorities` (which writes them back to `replay`) and not into the result.
    """
    # Long: its docstring says what one learn call does with priorities and action names.

    def with_actions(batch, metrics):
        if not action_names:
            return metrics
        steps = batch.sequence.steps
        # Valid steps: not the last of a sequence (it only bootstraps, and is the
        # next sequence's first), and not one followed by `first` (the actor's
        # placeholder step that reset a finished environment: no real action).
        valid = tf.logical_not(steps.first[1:])
        actions = {f'action/{name}': tf.reshape(tf.boolean_mask(a[:-1], valid), [-1])
                   for name, a in zip(action_names, steps.action)}
        return {**metrics, **actions}

    def learn_on(batch):
        metrics = with_actions(batch, learner.step(batch))
        if PRIORITIES in metrics:  # out of the graph with what they belong to
            metrics.update({'_keys': batch.keys, '_replayed': batch.replayed})
        return metrics

    def send_priorities(metrics):
        new = metrics.pop(PRIORITIES, None)
        if new is not None:
            keys, replayed = metrics.pop('_keys'), metrics.pop('_replayed')
            if priorities is not None:
                priorities.update(keys.numpy(), new.numpy(), replayed.numpy())
        return metrics

    def learn_in_graph(iterator):
        return learn_on(iterator.get_next())

    # A learner whose step changes with its progress (`Learner.phase`) is compiled
    # once per phase: its step is traced with the phase it is in. A batch read in
    # Python goes through a compiled `learn_on` too, so that the action histograms'
    # masking is not a dozen eager ops per step (most of a small ACER step's time
    # outside its own graph: docs/benchmarks.md#start-up).
    # An iterator's step is called as the concrete function of its trace, which skips the
    # `tf.function`'s argument handling on every call (any iterator of the same spec).
    compiled = {}

    def compiled_for(iterator: Optional[tf.data.Iterator] = None):
        key = (iterator is not None, learner.phase())
        if key not in compiled:
            compiled[key] = (tf.function(learn_on, autograph=False) if iterator is None else
                             tf.function(learn_in_graph, autograph=False).get_concrete_function(
                                 iterator))
        return compiled[key]

    def learn(batches):
        if isinstance(batches, tf.data.Iterator):
            try:
                return send_priorities(compiled_for(batches)(batches))
            except tf.errors.OutOfRangeError:
                raise StopIteration from None
        return send_priorities(compiled_for()(next(batches)))

    return learn
