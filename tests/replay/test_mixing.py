"""Batch-mixing strategies (`replay/mixing.py`) on a real Reverb server, read through the
wiring's `launch.learning.data.open_batches`: ACER's `ReplaySchedule`, and a strategy a test
declares itself (a replay-only warm-up, then mixed batches) with nothing in
`launch/` changed."""

import dataclasses

import numpy as np
import pytest
import reverb
import tensorflow as tf

from reverb_agents.agents import contract
from reverb_agents.launch.learning import data
from reverb_agents.replay import mixing, tables, trajectory
from reverb_agents.replay.writer import SequenceWriter

LENGTH, ENVS = 3, 2  # steps per sequence, environments written side by side


def write_sequences(client, step_spec, state_spec, num_sequences):
    """`num_sequences` sequences per environment into `queue` and `replay` (rewards
    name the item: 100 b + t)."""
    writer = SequenceWriter(client, step_spec, state_spec, ENVS, LENGTH,
                            [tables.QUEUE, tables.REPLAY])
    steps = trajectory.zeros(step_spec, (ENVS,))
    state = tf.nest.map_structure(lambda s: np.zeros([ENVS, *s.shape], np.float32), state_spec)
    for t in range(1 + num_sequences * (LENGTH - 1)):
        writer.append(steps._replace(reward=np.arange(ENVS, dtype=np.float32) * 100 + t,
                                     first=np.full([ENVS], t == 0)), state)
    writer.flush(timeout_ms=2000)
    writer.close()


@pytest.fixture
def filled(reverb_server):
    """(address, client, signature) of a server whose `queue` and `replay` each hold 8
    sequences (4 per environment)."""
    step_spec = trajectory.step_spec(tf.TensorSpec([3], tf.float32),
                                     (tf.TensorSpec([], tf.int32),),
                                     (tf.TensorSpec([2], tf.float32),))
    state_spec = (tf.TensorSpec([4], tf.float32),)
    signature = trajectory.sequence_signature(step_spec, state_spec, LENGTH)
    server = reverb_server(tables.make_tables(signature, (tf.TensorSpec([1], tf.float32),),
                                              queue_size=100, replay_size=100))
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    write_sequences(client, step_spec, state_spec, num_sequences=4)
    return address, client, signature


def plan_with(strategy: mixing.Mixing, replay_fraction: float = 0.0) -> contract.DataPlan:
    return contract.DataPlan(
        sequence_length=LENGTH, sequence_period=LENGTH - 1, learned_steps=LENGTH - 1,
        batch_sequences=2, replay_fraction=replay_fraction, replay_size=100, queue_size=100,
        min_replay_size=1, mixing=strategy)


def replayed_rows(batches) -> list:
    return [tuple(bool(r) for r in b.replayed.numpy()) for b in batches]


@pytest.mark.parametrize('learn_fresh', [True, False])
def test_schedule_without_online_update_drains_the_queue(filled, learn_fresh):
    """4 on-policy batches in `queue`, 2 replayed batches after each. learn_fresh=False
    yields the 8 replayed batches only, and still empties `queue`."""
    address, client, signature = filled
    plan = plan_with(mixing.ReplaySchedule(ratio=2, poisson=False, start_size=1,
                                           learn_fresh=learn_fresh))
    rows = replayed_rows(data.open_batches(address, signature, plan, client, timeout_ms=500))
    fresh, replayed = (False, False), (True, True)
    if learn_fresh:
        assert rows == [fresh, replayed, replayed] * 4
    else:
        assert rows == [replayed] * 8
    assert client.server_info(timeout=10)[tables.QUEUE].current_size == 0


@dataclasses.dataclass(frozen=True)
class WarmUpThenMixed(mixing.Mixing):
    """A strategy of a test's own: `warm_up` replay-only batches, then mixed batches of
    `replay_fraction`."""
    warm_up: int
    replay_fraction: float

    def batches(self, read, replay_sequences, rng):
        replayed = read(1.0)
        for _ in range(self.warm_up):
            yield next(replayed)
        yield from read(self.replay_fraction)


def test_a_strategy_of_ones_own_needs_nothing_of_the_wiring(filled):
    address, client, signature = filled
    plan = plan_with(WarmUpThenMixed(warm_up=2, replay_fraction=0.5), replay_fraction=0.5)
    assert plan.batch_mixing.batches.__qualname__.startswith('WarmUpThenMixed')
    assert plan.tables == ('queue', 'replay')
    batches = data.open_batches(address, signature, plan, client, timeout_ms=500)
    rows = replayed_rows(next(batches) for _ in range(5))
    assert rows[:2] == [(True, True)] * 2  # the warm-up: replay only
    assert all(sorted(r) == [False, True] for r in rows[2:]), rows  # then one of each


def test_mixed_batches_write_only_the_tables_they_read():
    assert mixing.MixedBatches(0.0).tables(4) == ('queue',)
    assert mixing.MixedBatches(1.0).tables(4) == ('replay',)
    assert mixing.MixedBatches(0.5).tables(4) == ('queue', 'replay')
    with pytest.raises(ValueError, match='replay_fraction must be in'):
        mixing.MixedBatches(1.5)
