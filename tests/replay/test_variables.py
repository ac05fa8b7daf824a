"""Tests for replay/variables.py through a real in-process Reverb server."""

import time

import numpy as np
import pytest
import reverb
import tensorflow as tf

from reverb_agents.replay import tables, trajectory
from reverb_agents.replay.variables import VariableFetcher, VariablePublisher

# Scalars and size-1 dimensions included: fetch must not squeeze them away.
SHAPES = [(2, 3), (4,), (), (1,), (1, 2), (3, 1)]
DTYPES = [tf.float32, tf.float32, tf.float32, tf.float32, tf.float32, tf.int32]


def _variables(fill):
    return [tf.Variable(np.full(shape, fill(i), dtype.as_numpy_dtype), dtype=dtype)
            for i, (shape, dtype) in enumerate(zip(SHAPES, DTYPES))]


def _random_variables(seed):
    rng = np.random.default_rng(seed)
    return [tf.Variable((rng.normal(size=shape) * 10).astype(dtype.as_numpy_dtype), dtype=dtype)
            for shape, dtype in zip(SHAPES, DTYPES)]


@pytest.fixture
def server():
    step = trajectory.step_spec(tf.TensorSpec([1], tf.float32), (tf.TensorSpec([], tf.int32),),
                                (tf.TensorSpec([2], tf.float32),))
    signature = trajectory.sequence_signature(step, (), 2)
    server = reverb.Server(tables.make_tables(
        signature, tables.variables_signature(_variables(lambda i: 0)),
        queue_size=10, replay_size=10) + [
            # No signature: lets a publisher and a fetcher disagree.
            reverb.Table('unsigned', sampler=reverb.selectors.Fifo(),
                         remover=reverb.selectors.Fifo(), max_size=1,
                         rate_limiter=reverb.rate_limiters.MinSize(1))])
    yield server
    server.stop()


@pytest.fixture
def client(server):
    return reverb.Client(f'localhost:{server.port}')


def _assert_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_publish_then_fetch(client):
    published = _random_variables(0)
    fetched = _variables(lambda i: -1)
    VariablePublisher(client, published).publish()
    fetcher = VariableFetcher(client, fetched)
    assert fetcher.fetch(timeout_s=5)
    _assert_equal(fetched, published)
    assert fetcher.num_fetches == 1
    # Nothing published since: nothing read or assigned (the zeros stay).
    for v in fetched:
        v.assign(tf.zeros_like(v))
    assert fetcher.fetch(timeout_s=5) is False
    _assert_equal(fetched, _variables(lambda i: 0))
    assert fetcher.num_fetches == 1
    # Fetching does not consume the item: another actor's first fetch sees the weights.
    other = _variables(lambda i: -1)
    assert VariableFetcher(client, other).fetch(timeout_s=5)
    _assert_equal(other, published)
    assert client.server_info(timeout=10)[tables.VARIABLES].current_size == 1
    # A publication of the same values is new: read and assigned.
    VariablePublisher(client, published).publish()
    assert fetcher.fetch(timeout_s=0)
    _assert_equal(fetched, published)
    assert fetcher.num_fetches == 2


def test_fetch_sees_latest_publication(client):
    published = _random_variables(1)
    publisher = VariablePublisher(client, published)
    fetched = _variables(lambda i: 0)
    fetcher = VariableFetcher(client, fetched)
    publisher.publish()
    assert fetcher.fetch(timeout_s=5)
    _assert_equal(fetched, published)
    for step in range(3):
        for i, v in enumerate(published):
            v.assign(tf.cast(tf.fill(v.shape, 7 * step + i + 1), v.dtype))
        publisher.publish()
        assert client.server_info(timeout=10)[tables.VARIABLES].current_size == 1
        assert fetcher.fetch(timeout_s=5)
        _assert_equal(fetched, published)
        assert float(tf.reduce_sum(tf.cast(fetched[2], tf.float32))) == 7 * step + 3


def test_fetch_times_out_on_empty_table(client):
    fetched = _variables(lambda i: i + 0.5)
    fetcher = VariableFetcher(client, fetched)
    start = time.monotonic()
    assert fetcher.fetch(timeout_s=0.2) is False
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 1.0
    assert fetcher.num_fetches == 0
    _assert_equal(fetched, _variables(lambda i: i + 0.5))  # untouched
    start = time.monotonic()
    assert fetcher.fetch(timeout_s=0) is False
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize('num_published, num_fetched', [(2, 3), (3, 2), (1, 2)])
def test_mismatched_number_of_tensors_raises(client, num_published, num_fetched):
    publisher = VariablePublisher(
        client, [tf.Variable(np.full([2], i, np.float32)) for i in range(num_published)],
        table='unsigned')
    fetched = [tf.Variable(np.zeros([2], np.float32)) for _ in range(num_fetched)]
    publisher.publish()
    fetcher = VariableFetcher(client, fetched, table='unsigned')
    with pytest.raises(ValueError, match=f'{num_published} tensors'):
        fetcher.fetch(timeout_s=5)
    assert fetcher.num_fetches == 0
    for v in fetched:
        np.testing.assert_array_equal(v.numpy(), np.zeros([2]))


def test_publish_against_signature_mismatch_raises(client):
    """The `variables` table's signature rejects weights of another network."""
    wrong = _variables(lambda i: 0)[:-1]
    with pytest.raises(ValueError, match='signature'):
        VariablePublisher(client, wrong).publish()
    assert client.server_info(timeout=10)[tables.VARIABLES].current_size == 0
