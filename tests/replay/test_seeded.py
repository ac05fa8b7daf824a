"""Tests for replay/seeded.py: seeded uniform sampling of `replay`, batches when due.

Items are written with the real `SequenceWriter` into a real in-process Reverb
server whose `replay` samples by `SampleClock` priorities; environment `b`'s
sequence starting at step `t0` has `reward[0] = 100 b + t0`, so each row names
its item.
"""

import collections

import numpy as np
import pytest
import reverb
import tensorflow as tf

from reverb_agents.replay import seeded, tables, trajectory
from reverb_agents.replay.writer import SequenceWriter

STEP_SPEC = trajectory.step_spec(tf.TensorSpec([2], tf.float32), (tf.TensorSpec([], tf.int32),),
                                 (tf.TensorSpec([2], tf.float32),))
STATE_SPEC = (tf.TensorSpec([3], tf.float32),)
LENGTH = 3
SIGNATURE = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH)
NUM_ENVS = 2


def _steps(t):
    """All environments' step `t`, `[B]` leading."""
    b = np.arange(NUM_ENVS)
    zeros = np.zeros([NUM_ENVS], np.float32)
    return trajectory.Step(
        observation=np.stack([b, np.full(NUM_ENVS, t)], -1).astype(np.float32),
        action=(np.full(NUM_ENVS, t, np.int32),), reward=(100 * b + t).astype(np.float32),
        discount=zeros + 1, first=np.full(NUM_ENVS, t == 0), prev_action=(np.zeros(
            NUM_ENVS, np.int32),), prev_reward=zeros,
        behaviour_params=(np.zeros([NUM_ENVS, 2], np.float32),), behaviour_log_prob=zeros,
        behaviour_baseline=zeros, task=np.zeros([NUM_ENVS], np.int32))


class Tables:
    """A server with `queue` and a seeded `replay`, a writer feeding both."""

    def __init__(self, seed: int, replay_size: int = 100, min_replay_size: int = 1):
        self.server_tables = {t.name: t for t in tables.make_tables(
            SIGNATURE, (tf.TensorSpec([1], tf.float32),), queue_size=100,
            replay_size=replay_size, min_replay_size=min_replay_size, seeded_sampling=True)}
        self.server = reverb.Server(list(self.server_tables.values()))
        self.client = reverb.Client(f'localhost:{self.server.port}')
        self.clock = seeded.SampleClock(seed)
        self.writer = SequenceWriter(
            self.client, STEP_SPEC, STATE_SPEC, NUM_ENVS, LENGTH, [tables.QUEUE, tables.REPLAY],
            lambda table: self.clock.new_item_priority() if table == tables.REPLAY else 1.0)
        self.t = 0

    def write_round(self) -> bool:
        """Steps until every environment wrote its next sequence; True (`act`'s answer)."""
        while not self.writer.append(_steps(self.t), (np.zeros([NUM_ENVS, 3], np.float32),)):
            self.t += 1
        self.t += 1
        self.writer.flush(timeout_ms=2000)
        return True

    def batches(self, batch_size: int, replay_fraction: float, act=None):
        return seeded.SeededBatches(self.client, self.server_tables, SIGNATURE, batch_size,
                                    replay_fraction, self.clock, act or (lambda: False))

    def close(self):
        self.writer.close()
        self.server.stop()


@pytest.fixture
def make_tables():
    made = []

    def make(seed: int, **kwargs) -> Tables:
        made.append(Tables(seed, **kwargs))
        return made[-1]

    yield make
    for t in made:
        t.close()


def rows(batch):
    """(b, t0) of each row: its item."""
    return [divmod(int(r), 100) for r in batch.sequence.steps.reward.numpy()[0]]


def test_fresh_rows_in_write_order_replayed_rows_the_same_for_the_same_seed(make_tables):
    seen = []
    for seed in (3, 3, 4):
        t = make_tables(seed)
        for _ in range(6):
            t.write_round()
        batches = t.batches(4, 0.5)
        got = [rows(next(batches)) for _ in range(6)]
        seen.append(got)
        fresh = [row for batch_rows in got for row in batch_rows[:2]]
        assert fresh == [(b, 2 * k) for k in range(6) for b in range(NUM_ENVS)]
    assert seen[0] == seen[1]
    assert seen[0] != seen[2]


def test_a_batch_acts_until_the_tables_can_give_it_and_stops_when_act_stops(make_tables):
    t = make_tables(0, min_replay_size=6)
    acted = []

    def act():
        acted.append(len(acted))
        return len(acted) <= 3 and t.write_round()

    batches = t.batches(2, 0.5, act)
    batch = next(batches)  # replay needs 6 items: three rounds of 2
    assert len(acted) == 3
    assert rows(batch)[0] == (0, 0)
    assert batch.replayed.numpy().tolist() == [False, True]
    assert rows(next(batches))[0] == (1, 0)  # no acting: the queue holds it
    assert len(acted) == 3
    for _ in range(4):  # the rest of the queue
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)
    assert len(acted) == 4


def test_replay_is_sampled_uniformly_with_replacement(make_tables):
    t = make_tables(1, replay_size=8)
    for _ in range(6):  # 12 items written, the 8 newest kept (FIFO)
        t.write_round()
    batches = t.batches(8, 1.0)
    counts = collections.Counter(row for _ in range(250) for row in rows(next(batches)))
    assert set(counts) == {(b, 2 * k) for k in range(2, 6) for b in range(NUM_ENVS)}
    # 2,000 draws of 8 items: 250 each expected, sd ~15; a FIFO or stuck order would
    # give 0 or 2,000.
    assert all(180 < n < 320 for n in counts.values()), counts
    batch = next(batches)
    np.testing.assert_allclose(batch.probabilities.numpy(), 1 / 8)
    assert batch.table_size.numpy().tolist() == [8] * 8


@pytest.mark.parametrize('kwargs', [dict(priority_exponent=0.6),
                                    dict(replay_eviction='reservoir')])
def test_seeded_sampling_refuses_what_draws_from_reverbs_generator(kwargs):
    with pytest.raises(ValueError, match='unseeded'):
        tables.make_tables(SIGNATURE, (tf.TensorSpec([1], tf.float32),), queue_size=4,
                           replay_size=4, seeded_sampling=True, **kwargs)
