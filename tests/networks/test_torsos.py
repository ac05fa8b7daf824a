"""Tests for networks/torsos.py."""
import numpy as np
import pytest
import tensorflow as tf

from networks import torsos


def _uint8_images(shape, seed=0):
    return np.random.RandomState(seed).randint(0, 256, size=shape).astype(np.uint8)


@pytest.mark.parametrize("module_fn, inputs, expected", [
    (lambda: torsos.MLP(), np.ones([5, 4], np.float32), [5, 64]),
    (lambda: torsos.MLP(hidden_sizes=(32,), activation=tf.tanh),
     np.ones([3, 2, 5], np.float64), [3, 32]),
    (lambda: torsos.NatureCNN(), _uint8_images([2, 84, 84, 4]), [2, 512]),
    (lambda: torsos.ImpalaResNet(), _uint8_images([2, 64, 64, 3]), [2, 256]),
    (lambda: torsos.ImpalaResNet(channels=(8,), num_blocks=1, output_size=16),
     np.random.rand(2, 16, 16, 3).astype(np.float32), [2, 16]),
])
def test_output_shapes(module_fn, inputs, expected):
    out = module_fn()(tf.constant(inputs))
    assert out.shape.as_list() == expected
    assert out.dtype == tf.float32
    assert np.all(np.isfinite(out.numpy()))


def test_mlp_tanh_bounded():
    out = torsos.MLP(activation=tf.tanh)(tf.random.normal([4, 3]) * 100.0)
    assert np.all(np.abs(out.numpy()) <= 1.0)


@pytest.mark.parametrize("module_fn", [torsos.NatureCNN, torsos.ImpalaResNet])
def test_uint8_scaling(module_fn):
    images = _uint8_images([2, 84, 84, 4])
    module = module_fn()
    from_uint8 = module(tf.constant(images))
    from_float = module(tf.constant(images.astype(np.float32) / 255.0))
    np.testing.assert_allclose(from_uint8.numpy(), from_float.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, dtype, kind, expected", [
    ((4,), tf.float32, "auto", torsos.MLP),
    ((3, 5), np.float64, "auto", torsos.MLP),
    ((84, 84, 4), tf.uint8, "auto", torsos.NatureCNN),
    ((84, 84, 4), np.uint8, "nature_cnn", torsos.NatureCNN),
    ((64, 64, 3), tf.uint8, "impala_resnet", torsos.ImpalaResNet),
    ((8, 8, 1), tf.float32, "mlp", torsos.MLP),
])
def test_make_torso_picks_class(shape, dtype, kind, expected):
    assert type(torsos.make_torso(shape, dtype, kind=kind)) is expected


def test_make_torso_forwards_kwargs():
    torso = torsos.make_torso((4,), tf.float32, kind="mlp", hidden_sizes=(7,))
    assert torso(tf.zeros([2, 4])).shape.as_list() == [2, 7]


@pytest.mark.parametrize("shape, kind", [
    ((4,), "transformer"),
    ((4,), "nature_cnn"),
    ((84, 84), "impala_resnet"),
    ((1, 84, 84, 4), "nature_cnn"),
])
def test_make_torso_raises(shape, kind):
    with pytest.raises(ValueError):
        torsos.make_torso(shape, tf.uint8, kind=kind)


@pytest.mark.parametrize("module_fn, inputs", [
    (torsos.MLP, np.random.rand(3, 4).astype(np.float32)),
    (torsos.NatureCNN, _uint8_images([2, 36, 36, 3])),
    (lambda: torsos.ImpalaResNet(channels=(8, 8), output_size=16),
     _uint8_images([2, 16, 16, 3])),
])
def test_gradients_reach_all_variables(module_fn, inputs):
    module = module_fn()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(module(tf.constant(inputs))))
    variables = module.trainable_variables
    assert variables
    grads = tape.gradient(loss, variables)
    for var, grad in zip(variables, grads):
        assert grad is not None, var.name
    assert any(np.any(g.numpy() != 0) for g in grads)


@pytest.mark.parametrize("module_fn, spec, feature_size", [
    (torsos.MLP, tf.TensorSpec([None, 6], tf.float32), 64),
    (torsos.NatureCNN, tf.TensorSpec([None, 36, 36, 1], tf.uint8), 512),
    (lambda: torsos.ImpalaResNet(channels=(8,), output_size=32),
     tf.TensorSpec([None, 16, 16, 3], tf.uint8), 32),
])
def test_tf_function_dynamic_batch(module_fn, spec, feature_size):
    module = module_fn()
    forward = tf.function(module.__call__, input_signature=[spec])
    for batch in (1, 3):
        shape = [batch] + spec.shape.as_list()[1:]
        x = tf.cast(tf.random.uniform(shape, maxval=255.0), spec.dtype)
        traced = forward(x)  # The first call creates the variables inside the trace.
        eager = module(x)
        assert traced.shape.as_list() == [batch, feature_size]
        np.testing.assert_allclose(traced.numpy(), eager.numpy(), rtol=1e-5, atol=1e-5)
    concrete = forward.get_concrete_function()
    assert concrete.output_shapes.as_list() == [None, feature_size]
