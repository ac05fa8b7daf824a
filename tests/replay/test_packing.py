"""Tests for replay/packing.py: the packed layout round-trips every field."""

import numpy as np
import pytest
import tensorflow as tf
import tree

from reverb_agents.replay import trajectory
from reverb_agents.replay.packing import Packing

# Every dtype the library stores, nested observations, a scalar and a [2, 3] field.
OBS_SPEC = {'pixels': tf.TensorSpec([2, 3], tf.uint8), 'vector': tf.TensorSpec([4], tf.float32)}
ACTION_SPECS = (tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32))
PARAM_SPECS = (tf.TensorSpec([3], tf.float32), tf.TensorSpec([4], tf.float32))
STEP_SPEC = trajectory.step_spec(OBS_SPEC, ACTION_SPECS, PARAM_SPECS, reward_size=2)
STATE_SPEC = (tf.TensorSpec([5], tf.float32), tf.TensorSpec([5], tf.float32))
LENGTH, ENVS = 3, 4


def _random(spec, lead, rng):
    shape = (*lead, *spec.shape)
    if spec.dtype == tf.bool:
        return rng.random(shape) < 0.5
    return (rng.random(shape) * 100).astype(spec.dtype.as_numpy_dtype)


def _random_item(signature, rng, extra=()):
    """Random arrays for `signature`'s fields, with `extra` leading dims."""
    return tree.map_structure(lambda s: _random(s, extra, rng), signature)


@pytest.mark.parametrize('group', [0, ENVS])
def test_unpack_inverts_pack(group):
    signature = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH, group)
    packing = Packing(signature)
    # steps: float32, uint8, int32, bool; core state: float32.
    assert packing.num_columns == 5
    item = _random_item(signature, np.random.default_rng(0))
    columns = packing.pack(tree.flatten(item))
    assert [(c.shape, c.dtype) for c in columns] == [
        (tuple(s.shape), s.dtype.as_numpy_dtype) for s in packing.packed_signature()]
    # unpack takes any extra leading (batch) dims, as a dataset's batches have.
    batched = [np.stack([c, c + 1 if c.dtype != bool else ~c]) for c in columns]
    unpacked = packing.unpack(batched)
    for x, got, spec in zip(tree.flatten(item), tree.flatten(unpacked), tree.flatten(signature)):
        assert got.dtype == spec.dtype
        np.testing.assert_array_equal(got[0], x)
        np.testing.assert_array_equal(got[1], x + 1 if x.dtype != bool else ~x)


def test_environment_items_from_buffers_packed_at_once():
    signature = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH)
    packing = Packing(signature)
    rng = np.random.default_rng(1)
    # The writer's buffers: steps [L, B, ...], core state [B, ...].
    steps = tree.map_structure(lambda s: np.swapaxes(_random(s, (ENVS,), rng), 0, 1),
                               signature.steps)
    state = tree.map_structure(lambda s: _random(s, (ENVS,), rng), signature.core_state)
    columns = packing.pack(tree.flatten(trajectory.Sequence(steps, state)), extra_dims=1)
    for b in range(ENVS):
        item = packing.unpack(packing.environment(columns, b))
        expected = trajectory.Sequence(
            steps=tree.map_structure(lambda x: x[:, b], steps),
            core_state=tree.map_structure(lambda x: x[b], state))
        for got, x in zip(tree.flatten(item), tree.flatten(expected)):
            np.testing.assert_array_equal(got, x)


def test_unpack_with_unknown_batch_dim_in_a_graph():
    signature = trajectory.sequence_signature(STEP_SPEC, STATE_SPEC, LENGTH, ENVS)
    packing = Packing(signature)
    specs = [tf.TensorSpec([None, *s.shape], s.dtype) for s in packing.packed_signature()]
    unpack = tf.function(lambda *columns: packing.unpack(columns), input_signature=specs)
    item = _random_item(signature, np.random.default_rng(2), extra=(2,))
    columns = packing.pack(tree.flatten(item), extra_dims=1)
    got = unpack(*columns)
    for x, y in zip(tree.flatten(item), tree.flatten(got)):
        np.testing.assert_array_equal(y, x)
