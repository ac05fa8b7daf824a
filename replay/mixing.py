"""How fresh and replayed sequences combine into the learner's batches: one object per
strategy, named in the agent's `DataPlan` (`mixing`). Plain Python, no Reverb or
TensorFlow: the wiring (`launch/learning/data.py`) gives a strategy the means to read and it
returns the stream of batches, so a new strategy needs nothing of the wiring.

- `MixedBatches` (CLEAR, SAC): every batch takes `round(replay_fraction x batch)`
  sequences from `replay` (one fewer where that is all of them below 1:
  `replay.batches.split_batch`) and the rest from `queue` (`replay.dataset.mixed_dataset`).
- `ReplaySchedule` (ACER): whole batches alternate between the tables: one on-policy
  batch, then `ratio` replayed ones once `replay` holds `start_size` sequences.

A strategy's `batches(read, replay_sequences, rng)` gets `read(replay_fraction)`: a
new stream of batches each taking that share from `replay` (0: all from `queue`; 1:
all replayed); `replay_sequences()`: the sequences `replay` holds, read without
blocking (the actors wait on the very queue on-policy batches drain); `rng`: a
generator for any draw (seeded in a deterministic run). It returns an iterator of
batches: the stream a `read` gave as it is (read inside the learner's compiled step),
or a Python iterator of batches. The stream ends when a read does.
"""

import dataclasses
from typing import Any, Callable, Iterator, Tuple

import numpy as np

from reverb_agents.replay.batches import QUEUE, REPLAY, split_batch

Read = Callable[[float], Iterator[Any]]


class Mixing:
    """A batch-mixing strategy (the module doc)."""

    def batches(self, read: Read, replay_sequences: Callable[[], int],
                rng: np.random.Generator) -> Iterator[Any]:
        raise NotImplementedError

    def tables(self, batch_sequences: int) -> Tuple[str, ...]:
        """The tables every written sequence goes into (default both)."""
        return (QUEUE, REPLAY)


@dataclasses.dataclass(frozen=True)
class MixedBatches(Mixing):
    """Each batch mixes `replay_fraction` of its sequences from `replay` with the rest
    from `queue` (CLEAR's mixed batches; SAC's replay with `online_fraction`)."""
    replay_fraction: float

    def __post_init__(self):
        split_batch(1, self.replay_fraction)  # the one check of its range

    def batches(self, read: Read, replay_sequences: Callable[[], int],
                rng: np.random.Generator) -> Iterator[Any]:
        return read(self.replay_fraction)

    def tables(self, batch_sequences: int) -> Tuple[str, ...]:
        fresh, replayed = split_batch(batch_sequences, self.replay_fraction)
        return ((QUEUE,) if fresh else ()) + ((REPLAY,) if replayed else ())


@dataclasses.dataclass(frozen=True)
class ReplaySchedule(Mixing):
    """Batches alternate between tables: one on-policy batch from `queue`, then
    `ratio` fully replayed batches from `replay` (ACER's `n_times_replay`).

    With `learn_fresh=False` (ACER's `disable_online_update`) the on-policy
    batch is still read from `queue`, which the actors block on when it is
    full, but dropped: the learner only sees replayed batches.
    """
    ratio: float  # replayed batches after each on-policy one (mean, if poisson)
    poisson: bool  # draw each count from Poisson(ratio) instead of round(ratio)
    start_size: int  # sequences in `replay` before replayed batches begin (never blocks)
    learn_fresh: bool = True  # False: drain each on-policy batch without learning from it

    def replayed_batches(self, rng: np.random.Generator) -> int:
        return int(rng.poisson(self.ratio)) if self.poisson else int(round(self.ratio))

    def batches(self, read: Read, replay_sequences: Callable[[], int],
                rng: np.random.Generator) -> Iterator[Any]:
        fresh = read(0.0)
        replayed = None
        while True:
            batch = next(fresh, None)
            if batch is None:  # the queue gave nothing for the timeout, or the actor stopped
                return
            if self.learn_fresh:
                yield batch
            # else: read only to drain `queue` (the actors block on it when full), dropped.
            if replayed is None:
                if replay_sequences() < self.start_size:
                    continue
                replayed = read(1.0)
            for _ in range(self.replayed_batches(rng)):
                batch = next(replayed, None)
                if batch is None:
                    return
                yield batch
