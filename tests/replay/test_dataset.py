"""Tests for replay/dataset.py: mixed, time-major batches.

Items are written with the real `SequenceWriter` into a real in-process
Reverb server; environment `b`'s step `t` has `reward = 100 b + t`, so each
batch row names the item it came from.
"""

import numpy as np
import pytest
import reverb
import tensorflow as tf

from reverb_agents.replay import dataset, tables, trajectory
from reverb_agents.replay.batches import split_batch
from reverb_agents.replay.writer import SequenceWriter

OBS_SPEC = tf.TensorSpec([3], tf.float32)
ACTION_SPECS = (tf.TensorSpec([], tf.int32),)
PARAM_SPECS = (tf.TensorSpec([2], tf.float32),)
STEP_SPEC = trajectory.step_spec(OBS_SPEC, ACTION_SPECS, PARAM_SPECS)
STATE_SPEC = (tf.TensorSpec([5], tf.float32), tf.TensorSpec([5], tf.float32))
LENGTH = 3
SIGNATURE = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH)
NUM_ENVS = 2
TIMEOUT_MS = 300


def test_mixed_dataset_rejects_bad_fraction_before_connecting():
    with pytest.raises(ValueError, match='replay_fraction'):
        dataset.mixed_dataset('localhost:1', SIGNATURE, 4, 1.5, rate_limiter_timeout_ms=0)


# --- mixed_dataset -------------------------------------------------------------

@pytest.fixture
def server():
    server = reverb.Server(tables.make_tables(
        SIGNATURE, (tf.TensorSpec([1], tf.float32),), queue_size=100, replay_size=100))
    yield server
    server.stop()


def _step(b, t):
    return trajectory.Step(
        observation=np.array([100 * b + t, t, b], np.float32),
        action=(np.int32(10 * b + t),),
        reward=np.float32(100 * b + t),
        discount=np.float32(1.0),
        first=np.bool_(t == 0),
        prev_action=(np.int32(10 * b + t - 1),),
        prev_reward=np.float32(100 * b + t - 1),
        behaviour_params=(np.array([b, t], np.float32),),
        behaviour_log_prob=np.float32(-t / 4.0),
        behaviour_baseline=np.float32(b + t / 8.0),
        task=np.int32(t % 2))


def _state(b, t):
    return (np.full([5], 1000 * b + t, np.float32), np.full([5], -1000 * b - t, np.float32))


def _stack(values):
    return tf.nest.map_structure(lambda *xs: np.stack(xs), *values)


def _write(client, num_sequences):
    """`num_sequences` per environment into `queue` and `replay`; returns their keys."""
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, NUM_ENVS, LENGTH,
                            [tables.QUEUE, tables.REPLAY])
    for t in range(1 + num_sequences * (LENGTH - 1)):
        writer.append(_stack([_step(b, t) for b in range(NUM_ENVS)]),
                      _stack([_state(b, t) for b in range(NUM_ENVS)]))
    writer.flush(timeout_ms=2000)
    writer.close()
    # In writing order: sequence k of env 0, env 1, then sequence k + 1.
    return [(b, k * (LENGTH - 1)) for k in range(num_sequences) for b in range(NUM_ENVS)]


def _check_row(batch, row):
    """Row `row` of a time-major batch equals the item it names; returns (b, t0)."""
    b, t0 = divmod(int(batch.sequence.steps.reward[0, row]), 100)
    expected_steps = _stack([_step(b, t) for t in range(t0, t0 + LENGTH)])
    actual_steps = tf.nest.map_structure(lambda x: x.numpy()[:, row], batch.sequence.steps)
    for a, e in zip(tf.nest.flatten(actual_steps), tf.nest.flatten(expected_steps)):
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)
    for a, e in zip(batch.sequence.core_state, _state(b, t0)):
        np.testing.assert_array_equal(a.numpy()[row], e)
    return b, t0


@pytest.mark.parametrize('replay_fraction', [0.0, 0.5, 1.0])
def test_mixed_dataset(server, replay_fraction):
    batch_size = 4
    num_fresh, num_replayed = split_batch(batch_size, replay_fraction)
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    written = _write(client, num_sequences=4)  # 8 items in each table
    ds = dataset.mixed_dataset(address, SIGNATURE, batch_size, replay_fraction,
                               rate_limiter_timeout_ms=TIMEOUT_MS)

    # Without fresh rows nothing ends the dataset: `replay` is sampled uniformly.
    batches = list(ds.take(6)) if num_fresh == 0 else list(ds)
    if num_fresh:
        assert len(batches) == len(written) // num_fresh
    assert batches
    fresh_rows = []
    for batch in batches:
        steps = batch.sequence.steps
        assert steps.observation.shape == (LENGTH, batch_size, 3)
        assert steps.action[0].shape == (LENGTH, batch_size)
        assert steps.action[0].dtype == tf.int32
        assert steps.behaviour_params[0].shape == (LENGTH, batch_size, 2)
        for field in ('reward', 'discount', 'first', 'prev_reward', 'behaviour_log_prob',
                      'behaviour_baseline'):
            assert getattr(steps, field).shape == (LENGTH, batch_size), field
        assert steps.first.dtype == tf.bool
        assert [s.shape for s in batch.sequence.core_state] == [(batch_size, 5)] * 2
        np.testing.assert_array_equal(batch.replayed.numpy(),
                                      [False] * num_fresh + [True] * num_replayed)
        assert int(np.sum(batch.replayed.numpy())) == round(replay_fraction * batch_size)
        for row in range(batch_size):
            key = _check_row(batch, row)
            assert key in written
            if row < num_fresh:
                fresh_rows.append(key)

    info = client.server_info(timeout=10)
    if num_fresh:
        # Every queue item exactly once, in the order written, and then gone.
        assert fresh_rows == written
        assert info[tables.QUEUE].current_size == 0
    else:
        assert info[tables.QUEUE].current_size == len(written)  # never touched
    assert info[tables.REPLAY].current_size == len(written)  # sampling does not remove


def test_mixed_dataset_queue_rows_come_in_batch_order_when_written_between_batches(server):
    """Fresh rows follow the queue: a batch never holds an item written after a later one."""
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    ds = iter(dataset.mixed_dataset(address, SIGNATURE, 2, 0.0,
                                    rate_limiter_timeout_ms=1000, prefetch=1))
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, NUM_ENVS, LENGTH, [tables.QUEUE])
    seen = []
    t = 0
    for _ in range(3):
        for _ in range(LENGTH - 1 if t else LENGTH):
            writer.append(_stack([_step(b, t) for b in range(NUM_ENVS)]),
                          _stack([_state(b, t) for b in range(NUM_ENVS)]))
            t += 1
        writer.flush(timeout_ms=2000)
        batch = next(ds)
        seen.append([_check_row(batch, row) for row in range(2)])
    writer.close()
    assert seen == [[(0, 0), (1, 0)], [(0, 2), (1, 2)], [(0, 4), (1, 4)]]


def test_mixed_dataset_times_out_on_empty_tables(server):
    address = f'localhost:{server.port}'
    ds = dataset.mixed_dataset(address, SIGNATURE, 2, 0.5, rate_limiter_timeout_ms=100)
    assert list(ds) == []


# --- grouped items (all of an actor's environments in one item) -----------------------

def test_grouped_items_become_time_major_rows_per_environment():
    signature = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH,
                                              envs_per_item=NUM_ENVS)
    server = reverb.Server(tables.make_tables(
        signature, (tf.TensorSpec([1], tf.float32),), queue_size=100, replay_size=100))
    try:
        address = f'localhost:{server.port}'
        client = reverb.Client(address)
        writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, NUM_ENVS, LENGTH,
                                [tables.QUEUE, tables.REPLAY], group_envs=True)
        num_sequences = 4
        for t in range(1 + num_sequences * (LENGTH - 1)):
            writer.append(_stack([_step(b, t) for b in range(NUM_ENVS)]),
                          _stack([_state(b, t) for b in range(NUM_ENVS)]))
        writer.flush(timeout_ms=2000)
        batch_size = 2 * NUM_ENVS  # two items
        ds = dataset.mixed_dataset(address, signature, batch_size, 0.5,
                                   rate_limiter_timeout_ms=TIMEOUT_MS)
        batches = list(ds)
        assert len(batches) == num_sequences  # one fresh item per batch
        fresh = []
        for batch in batches:
            assert batch.sequence.steps.observation.shape == (LENGTH, batch_size, 3)
            np.testing.assert_array_equal(batch.replayed.numpy(),
                                          [False] * NUM_ENVS + [True] * NUM_ENVS)
            keys = [_check_row(batch, row) for row in range(batch_size)]
            # An item's environments sit next to each other, in order, from one time.
            for item in range(2):
                rows = keys[item * NUM_ENVS:(item + 1) * NUM_ENVS]
                assert [b for b, _ in rows] == list(range(NUM_ENVS))
                assert len({t0 for _, t0 in rows}) == 1
            fresh.append(keys[0][1])
        assert fresh == [k * (LENGTH - 1) for k in range(num_sequences)]
        with pytest.raises(ValueError, match='multiple'):
            dataset.mixed_dataset(address, signature, NUM_ENVS + 1, 1.0)
    finally:
        server.stop()
