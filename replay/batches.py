"""How one learner batch divides between the tables, and how the replay table may
evict: plain Python, no Reverb or TensorFlow, so agent configs can size their
batches and check their choices without loading either."""

from typing import Tuple

# `reservoir` keeps a random subset of everything seen (CLEAR keeps old tasks'
# data this way): items get a uniform random priority and the lowest is evicted
# (`replay.tables.make_tables`).
REPLAY_EVICTIONS = ('fifo', 'reservoir')
QUEUE = 'queue'  # fresh sequences, each read once (`replay.tables`)
REPLAY = 'replay'  # sequences sampled again and again


def split_batch(batch_size: int, replay_fraction: float) -> Tuple[int, int]:
    """(fresh rows from `queue`, replayed rows from `replay`) of a batch of `batch_size`
    rows: `round(replay_fraction * batch_size)` replayed (Python's round, half to even),
    but below 1 never the whole batch. A learner of mixed batches is paced by its fresh
    rows (each is read once, and the actors wait on a full `queue`): a batch that
    rounded to none would leave the actors running free while the learner replays.
    So 0.9375 of 8 replays 7, not round(7.5) = 8; only 1.0 replays every row, which
    needs a pace of its own (`DataPlan.samples_per_insert`, as SAC's).

    The one check of `replay_fraction`'s range: a ValueError (one line) outside [0, 1]
    (NaN included); configs and the data plan call this rather than repeat it.
    """
    if not 0.0 <= replay_fraction <= 1.0:
        raise ValueError(f'replay_fraction must be in [0, 1], got {replay_fraction}')
    num_replayed = int(round(replay_fraction * batch_size))
    if replay_fraction < 1.0:
        num_replayed = min(num_replayed, max(batch_size - 1, 0))
    return batch_size - num_replayed, num_replayed
