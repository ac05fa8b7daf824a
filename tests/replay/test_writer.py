"""Tests for replay/writer.py against a real in-process Reverb server.

Every step gets values that name it: environment `b`, step `t` has
`reward = 100 b + t` and the core state before it is filled with
`1000 b + t`, so each stored item can be checked field by field.
"""

import numpy as np
import pytest
import reverb
import tensorflow as tf
import tree

from reverb_agents.replay import dataset as dataset_lib
from reverb_agents.replay import tables, trajectory
from reverb_agents.replay.packing import Packing
from reverb_agents.replay.writer import SequenceWriter

OBS_SPEC = tf.TensorSpec([3], tf.float32)
ACTION_SPECS = (tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32))
PARAM_SPECS = (tf.TensorSpec([4], tf.float32), tf.TensorSpec([4], tf.float32))
STEP_SPEC = trajectory.step_spec(OBS_SPEC, ACTION_SPECS, PARAM_SPECS)
STATE_SPEC = (tf.TensorSpec([5], tf.float32), tf.TensorSpec([5], tf.float32))
VARIABLES_SIGNATURE = (tf.TensorSpec([2], tf.float32),)
TIMEOUT_MS = 2000


def _signature(sequence_length):
    return trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, sequence_length)


def _make_server(sequence_length, size=100):
    return reverb.Server(tables.make_tables(
        _signature(sequence_length), VARIABLES_SIGNATURE, queue_size=size, replay_size=size))


@pytest.fixture
def make_client():
    servers = []

    def make(sequence_length, size=100):
        server = _make_server(sequence_length, size)
        servers.append(server)
        return reverb.Client(f'localhost:{server.port}'), f'localhost:{server.port}'

    yield make
    for server in servers:
        server.stop()


# --- known values -------------------------------------------------------------

def _step_value(b, t, first=None):
    """The `Step` of environment `b` at time `t` (no batch dimension)."""
    return trajectory.Step(
        observation=np.array([100 * b + t, t, b], np.float32),
        action=(np.int32(10 * b + t), np.array([b, -t], np.float32)),
        reward=np.float32(100 * b + t),
        discount=np.float32((t % 3) != 2),
        first=np.bool_(t == 0 if first is None else first),
        prev_action=(np.int32(10 * b + t - 1), np.array([b, 1 - t], np.float32)),
        prev_reward=np.float32(100 * b + t - 1),
        behaviour_params=(np.full([4], b + 0.5 * t, np.float32),
                          np.arange(4, dtype=np.float32) * (t + 1) + b),
        behaviour_log_prob=np.float32(-(b + t) / 8.0),
        behaviour_baseline=np.float32(b * 7 + t / 4.0),
        task=np.int32(b + t))


def _state_value(b, t):
    """The core state of environment `b` before step `t`."""
    return (np.full([5], 1000 * b + t, np.float32), np.full([5], -1000 * b - t, np.float32))


def _batched(values):
    return tf.nest.map_structure(lambda *xs: np.stack(xs), *values)


def _append_steps(writer, num_envs, num_steps, first_at=None):
    """Appends `num_steps` known steps; `first_at`: {b: set of t} with `first` True."""
    written = []
    for t in range(num_steps):
        steps, states = [], []
        for b in range(num_envs):
            first = None if first_at is None else (t in first_at.get(b, ()))
            steps.append(_step_value(b, t, first))
            states.append(_state_value(b, t))
        written.append(writer.append(_batched(steps), _batched(states)))
    return written


def _expected_item(b, t0, length, first_at=None):
    steps = [_step_value(b, t, None if first_at is None else (t in first_at.get(b, ())))
             for t in range(t0, t0 + length)]
    return trajectory.Sequence(steps=_batched(steps), core_state=_state_value(b, t0))


def _assert_item_equal(actual, expected):
    tf.nest.assert_same_structure(actual, expected)
    paths = [path for path, _ in tree.flatten_with_path(expected)]
    for path, a, e in zip(paths, tf.nest.flatten(actual), tf.nest.flatten(expected)):
        a = np.asarray(a)
        assert a.dtype == e.dtype, (path, a.dtype, e.dtype)
        np.testing.assert_array_equal(a, e, err_msg=f'field {path}')


def _drain(address, table, sequence_length, timeout_ms=300, max_samples=-1):
    """Items of `table` in sampling order (one worker: FIFO for the queue).

    Ends when the rate limiter has blocked for `timeout_ms` (the queue is
    empty) or after `max_samples`.
    """
    signature = _signature(sequence_length)
    dataset = dataset_lib.item_dataset(
        address, table, signature, max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
        rate_limiter_timeout_ms=timeout_ms, max_samples=max_samples)
    return [(sample.info, tf.nest.map_structure(lambda x: x.numpy(), sample.data))
            for sample in dataset]


def _table_sizes(client):
    info = client.server_info(timeout=10)
    return info[tables.QUEUE].current_size, info[tables.REPLAY].current_size


# --- steps in -> items out -----------------------------------------------------

# (num_envs B, sequence_length L, steps appended)
STEPS_TO_ITEMS_CASES = [
    dict(testcase_name='b2_l4_10steps', num_envs=2, length=4, num_steps=10),
    dict(testcase_name='b2_l4_fewer_than_l', num_envs=2, length=4, num_steps=3),
    dict(testcase_name='b2_l4_exactly_l', num_envs=2, length=4, num_steps=4),
    dict(testcase_name='b2_l4_one_short_of_second', num_envs=2, length=4, num_steps=6),
    dict(testcase_name='b1_l4_7steps', num_envs=1, length=4, num_steps=7),
    dict(testcase_name='b3_l2_9steps', num_envs=3, length=2, num_steps=9),
    dict(testcase_name='b2_l5_13steps', num_envs=2, length=5, num_steps=13),
]


@pytest.mark.parametrize('case', STEPS_TO_ITEMS_CASES, ids=lambda c: c['testcase_name'])
def test_steps_to_items(make_client, case):
    num_envs, length, num_steps = case['num_envs'], case['length'], case['num_steps']
    client, address = make_client(length)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length,
                            [tables.QUEUE, tables.REPLAY])
    written = _append_steps(writer, num_envs, num_steps)
    writer.flush(timeout_ms=TIMEOUT_MS)

    # Period L - 1: a sequence completes at steps L, 2L - 1, 3L - 2, ...
    period = length - 1
    num_sequences = max(0, (num_steps - 1) // period)
    assert written == [t + 1 >= length and (t + 1 - length) % period == 0
                       for t in range(num_steps)]
    assert writer.sequences_written == num_envs * num_sequences
    assert _table_sizes(client) == (num_envs * num_sequences, num_envs * num_sequences)

    # The queue is FIFO: sequence k of env 0, of env 1, ..., then sequence k + 1.
    items = _drain(address, tables.QUEUE, length)
    assert len(items) == num_envs * num_sequences
    for i, (info, data) in enumerate(items):
        k, b = divmod(i, num_envs)
        _assert_item_equal(data, _expected_item(b, k * period, length))
        assert info.priority == 1.0
    # Consecutive items of one env overlap by exactly one step.
    for i in range(num_envs, len(items)):
        previous, current = items[i - num_envs][1], items[i][1]
        np.testing.assert_array_equal(current.steps.reward[0], previous.steps.reward[-1])
        np.testing.assert_array_equal(current.steps.observation[0],
                                      previous.steps.observation[-1])
        assert not np.isin(current.steps.reward[1:], previous.steps.reward).any()
    assert _table_sizes(client) == (0, num_envs * num_sequences)
    writer.close()


def test_replay_holds_the_same_items(make_client):
    num_envs, length, num_steps = 2, 4, 10
    client, address = make_client(length)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length,
                            [tables.QUEUE, tables.REPLAY])
    _append_steps(writer, num_envs, num_steps)
    writer.flush(timeout_ms=TIMEOUT_MS)
    expected = {(b, t0): _expected_item(b, t0, length)
                for b in range(num_envs) for t0 in (0, 3, 6)}
    assert _table_sizes(client)[1] == len(expected)
    seen = set()
    for _, data in _drain(address, tables.REPLAY, length, max_samples=300):
        key = divmod(int(data.steps.reward[0]), 100)
        assert key in expected
        _assert_item_equal(data, expected[key])
        seen.add(key)
    assert seen == set(expected)  # 300 uniform samples of 6 items miss one with p ~ 1e-23
    writer.close()


# --- episode boundaries ----------------------------------------------------------

def test_episode_boundary_inside_a_sequence(make_client):
    """`first` is stored as given; core_state stays the state before steps[0]."""
    num_envs, length, num_steps = 2, 5, 9  # sequences start at t = 0 and t = 4
    # env 0: new episode in the middle of sequence 0; env 1: at the shared step
    # t = 4 (last step of sequence 0, first step of sequence 1) and at t = 6.
    first_at = {0: {0, 2}, 1: {0, 4, 6}}
    client, address = make_client(length)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length, [tables.QUEUE])
    _append_steps(writer, num_envs, num_steps, first_at)
    writer.flush(timeout_ms=TIMEOUT_MS)
    items = _drain(address, tables.QUEUE, length)
    assert len(items) == 4
    for i, (_, data) in enumerate(items):
        k, b = divmod(i, num_envs)
        t0 = 4 * k
        _assert_item_equal(data, _expected_item(b, t0, length, first_at))
        np.testing.assert_array_equal(
            data.steps.first, [t in first_at[b] for t in range(t0, t0 + length)])
        # Not the state at the boundary, not a reset state: the one before steps[0].
        np.testing.assert_array_equal(data.core_state[0], np.full([5], 1000 * b + t0))
    assert list(items[0][1].steps.first) == [True, False, True, False, False]
    assert list(items[1][1].steps.first) == [True, False, False, False, True]
    assert list(items[3][1].steps.first) == [True, False, True, False, False]
    writer.close()


# --- tables ---------------------------------------------------------------------

@pytest.mark.parametrize('written_tables', [
    (tables.REPLAY,), (tables.QUEUE,), (tables.QUEUE, tables.REPLAY)])
def test_items_only_in_given_tables(make_client, written_tables):
    num_envs, length = 2, 4
    client, _ = make_client(length)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length, written_tables)
    _append_steps(writer, num_envs, 7)  # two sequences per env
    writer.flush(timeout_ms=TIMEOUT_MS)
    queue_size, replay_size = _table_sizes(client)
    assert queue_size == (4 if tables.QUEUE in written_tables else 0)
    assert replay_size == (4 if tables.REPLAY in written_tables else 0)
    assert client.server_info(timeout=10)[tables.VARIABLES].current_size == 0
    writer.close()


def test_priority_fn_per_table(make_client):
    length = 3
    client, address = make_client(length)
    priorities = {tables.QUEUE: 1.5, tables.REPLAY: 4.0}
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, 1, length,
                            [tables.QUEUE, tables.REPLAY], priority_fn=priorities.get)
    _append_steps(writer, 1, 5)
    writer.flush(timeout_ms=TIMEOUT_MS)
    for table in (tables.QUEUE, tables.REPLAY):
        samples = _drain(address, table, length, max_samples=2)
        assert [info.priority for info, _ in samples] == [priorities[table]] * 2
    writer.close()


# --- errors ---------------------------------------------------------------------

# Writers whose specs disagree with the table signature: Reverb rejects the
# item when the first sequence completes, before anything reaches the table.
SPEC_MISMATCH_CASES = [
    dict(testcase_name='reward_float64',
         step_spec=STEP_SPEC._replace(reward=tf.TensorSpec([], tf.float64)),
         state_spec=STATE_SPEC),
    dict(testcase_name='action_int64',
         step_spec=STEP_SPEC._replace(
             action=(tf.TensorSpec([], tf.int64), ACTION_SPECS[1])),
         state_spec=STATE_SPEC),
    dict(testcase_name='observation_shape',
         step_spec=STEP_SPEC._replace(observation=tf.TensorSpec([4], tf.float32)),
         state_spec=STATE_SPEC),
    dict(testcase_name='params_shape',
         step_spec=STEP_SPEC._replace(
             behaviour_params=(tf.TensorSpec([3], tf.float32), PARAM_SPECS[1])),
         state_spec=STATE_SPEC),
    dict(testcase_name='core_state_dtype',
         step_spec=STEP_SPEC,
         state_spec=(tf.TensorSpec([5], tf.float64), tf.TensorSpec([5], tf.float32))),
    dict(testcase_name='core_state_shape',
         step_spec=STEP_SPEC,
         state_spec=(tf.TensorSpec([6], tf.float32), tf.TensorSpec([5], tf.float32))),
]


@pytest.mark.parametrize('case', SPEC_MISMATCH_CASES, ids=lambda c: c['testcase_name'])
def test_spec_mismatch_raises(make_client, case):
    num_envs, length = 2, 3
    client, _ = make_client(length)
    writer = SequenceWriter(client, case['step_spec'], case['state_spec'], num_envs, length,
                            [tables.QUEUE, tables.REPLAY])
    step = trajectory.zeros(case['step_spec'], (num_envs,))
    state = trajectory.zeros(case['state_spec'], (num_envs,))
    assert writer.append(step, state) is False
    assert writer.append(step, state) is False
    with pytest.raises(ValueError, match='signature'):
        writer.append(step, state)
        writer.flush(timeout_ms=TIMEOUT_MS)
    assert _table_sizes(client) == (0, 0)


# Steps whose arrays do not fit the writer's own spec.
BAD_STEP_CASES = [
    dict(testcase_name='observation_shape',
         step=lambda s: s._replace(observation=np.zeros([2, 4], np.float32))),
    dict(testcase_name='params_shape',
         step=lambda s: s._replace(behaviour_params=(np.zeros([2, 3], np.float32),
                                                      s.behaviour_params[1]))),
    dict(testcase_name='batch_size',
         step=lambda s: s._replace(reward=np.zeros([3], np.float32))),
    dict(testcase_name='missing_action_leaf',
         step=lambda s: s._replace(action=s.action[:1])),
]


@pytest.mark.parametrize('case', BAD_STEP_CASES, ids=lambda c: c['testcase_name'])
def test_bad_step_raises(make_client, case):
    client, _ = make_client(3)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, 2, 3, [tables.QUEUE])
    step = case['step'](trajectory.zeros(STEP_SPEC, (2,)))
    with pytest.raises((ValueError, TypeError)):
        writer.append(step, trajectory.zeros(STATE_SPEC, (2,)))
        writer.append(step, trajectory.zeros(STATE_SPEC, (2,)))
        writer.append(step, trajectory.zeros(STATE_SPEC, (2,)))
        writer.flush(timeout_ms=TIMEOUT_MS)
    writer.close()


def test_sequence_length_below_two_raises(make_client):
    client, _ = make_client(2)
    with pytest.raises(ValueError, match='sequence_length'):
        SequenceWriter(client, STEP_SPEC, STATE_SPEC, 2, 1, [tables.QUEUE])


# --- periods shorter than L - 1, and items grouping all environments --------------

@pytest.mark.parametrize('length,period', [(3, 1), (4, 2), (2, 1)])
def test_period_sets_the_overlap(make_client, length, period):
    num_envs, num_steps = 2, 9
    client, address = make_client(length)
    writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length,
                            [tables.QUEUE], period=period)
    _append_steps(writer, num_envs, num_steps)
    writer.flush(timeout_ms=TIMEOUT_MS)
    num_sequences = (num_steps - length) // period + 1
    items = _drain(address, tables.QUEUE, length)
    assert len(items) == num_envs * num_sequences
    for i, (_, data) in enumerate(items):
        k, b = divmod(i, num_envs)
        _assert_item_equal(data, _expected_item(b, k * period, length))


def test_period_outside_range_raises(make_client):
    client, _ = make_client(3)
    with pytest.raises(ValueError, match='period'):
        SequenceWriter(client, STEP_SPEC, STATE_SPEC, 1, 3, [tables.QUEUE], period=3)


def test_grouped_items_hold_every_environment(make_client):
    num_envs, length, num_steps = 3, 2, 5
    signature = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, length,
                                              envs_per_item=num_envs)
    assert trajectory.envs_per_item(signature) == num_envs
    assert trajectory.envs_per_item(_signature(length)) == 0
    server = reverb.Server(tables.make_tables(signature, VARIABLES_SIGNATURE, 100, 100))
    try:
        client = reverb.Client(f'localhost:{server.port}')
        writer = SequenceWriter(client, STEP_SPEC, STATE_SPEC, num_envs, length,
                                [tables.QUEUE], period=1, group_envs=True)
        _append_steps(writer, num_envs, num_steps)
        writer.flush(timeout_ms=TIMEOUT_MS)
        assert writer.sequences_written == num_envs * (num_steps - 1)
        items = list(client.sample(tables.QUEUE, num_samples=num_steps - 1,
                                   emit_timesteps=False, unpack_as_table_signature=True))
        for k, sample in enumerate(items):  # FIFO: item k starts at step k
            data = tf.nest.map_structure(np.asarray, Packing(signature).unpack(sample.data))
            for b in range(num_envs):
                env_b = trajectory.Sequence(
                    steps=tf.nest.map_structure(lambda x: x[:, b], data.steps),
                    core_state=tf.nest.map_structure(lambda x: x[b], data.core_state))
                _assert_item_equal(env_b, _expected_item(b, k, length))
    finally:
        server.stop()
