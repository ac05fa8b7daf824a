"""Tests for networks/torsos.py."""
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import network_config
from reverb_agents.networks import torsos


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
    (lambda: torsos.SimpleVisualEncoder(), _uint8_images([2, 84, 84, 3]), [2, 128]),
    (lambda: torsos.SimpleVisualEncoder(output_size=32),
     np.random.rand(3, 20, 27, 5).astype(np.float32), [3, 32]),
    (lambda: torsos.MinAtarCNN(), _uint8_images([2, 10, 10, 4]), [2, 128]),
])
def test_output_shapes(module_fn, inputs, expected):
    out = module_fn()(tf.constant(inputs))
    assert out.shape.as_list() == expected
    assert out.dtype == tf.float32
    assert np.all(np.isfinite(out.numpy()))


def test_mlp_tanh_bounded():
    out = torsos.MLP(activation=tf.tanh)(tf.random.normal([4, 3]) * 100.0)
    assert np.all(np.abs(out.numpy()) <= 1.0)


@pytest.mark.parametrize("module_fn", [torsos.NatureCNN, torsos.ImpalaResNet,
                                       torsos.SimpleVisualEncoder, torsos.MinAtarCNN])
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
    ((20, 20, 3), tf.uint8, "simple", torsos.SimpleVisualEncoder),
    ((8, 8, 1), tf.float32, "mlp", torsos.MLP),
    # 'auto' for images under the Nature CNN's 36x36: the MinAtar network.
    ((10, 10, 4), tf.uint8, "auto", torsos.MinAtarCNN),
    ((35, 84, 3), tf.uint8, "auto", torsos.MinAtarCNN),
    ((36, 36, 3), tf.uint8, "auto", torsos.NatureCNN),
    ((10, 10, 4), tf.uint8, "minatar", torsos.MinAtarCNN),
    # The short names.
    ((84, 84, 4), tf.uint8, "nature", torsos.NatureCNN),
    ((10, 10, 4), tf.uint8, "impala", torsos.ImpalaResNet),
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
    ((84, 84), "simple"),
])
def test_make_torso_raises(shape, kind):
    with pytest.raises(ValueError):
        torsos.make_torso(shape, tf.uint8, kind=kind)


@pytest.mark.parametrize("module_fn, inputs", [
    (torsos.MLP, np.random.rand(3, 4).astype(np.float32)),
    (torsos.NatureCNN, _uint8_images([2, 36, 36, 3])),
    (lambda: torsos.ImpalaResNet(channels=(8, 8), output_size=16),
     _uint8_images([2, 16, 16, 3])),
    (torsos.SimpleVisualEncoder, _uint8_images([2, 20, 20, 3])),
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
    (torsos.SimpleVisualEncoder, tf.TensorSpec([None, 24, 24, 2], tf.uint8), 128),
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


# --- ML-Agents' simple visual encoder -------------------------------------------------

def test_simple_visual_encoder_layers_are_ml_agents():
    """Conv 16 8x8 s4 -> conv 32 4x4 s2 (VALID) -> Linear(hidden) with LeakyReLU after each,
    as `mlagents.trainers.torch_entities.encoders.SimpleVisualEncoder`."""
    torso = torsos.SimpleVisualEncoder(output_size=64)
    torso(tf.zeros([1, 84, 84, 3], tf.uint8))
    assert torso.conv_layers == ((16, 8, 4), (32, 4, 2))
    assert [c.w.shape.as_list() for c in torso.convs] == [[8, 8, 3, 16], [4, 4, 16, 32]]
    # 84 -> (84 - 8) // 4 + 1 = 20 -> (20 - 4) // 2 + 1 = 9: ML-Agents' final_flat 9 * 9 * 32.
    assert torso.linear.w.shape.as_list() == [9 * 9 * 32, 64]
    assert torso.activation is torsos.leaky_relu
    assert torso.min_image_size == 20


def test_leaky_relu_has_pytorchs_slope():
    x = tf.constant([-2.0, -0.5, 0.0, 3.0])
    np.testing.assert_allclose(torsos.leaky_relu(x).numpy(), [-0.02, -0.005, 0.0, 3.0],
                               rtol=1e-6)


@pytest.mark.parametrize("kind, smallest", [("simple", 20), ("nature_cnn", 36)])
def test_min_image_size_is_ml_agents(kind, smallest):
    """ML-Agents' MIN_RESOLUTION_FOR_ENCODER: SIMPLE 20, NATURE_CNN 36."""
    cls = {"simple": torsos.SimpleVisualEncoder, "nature_cnn": torsos.NatureCNN}[kind]
    assert torsos.min_image_size(cls.CONV_LAYERS) == smallest
    torso = torsos.make_torso((smallest, smallest, 3), tf.uint8, kind=kind)
    assert torso(tf.zeros([2, smallest, smallest, 3], tf.uint8)).shape[0] == 2


@pytest.mark.parametrize("kind, shape", [
    ("simple", (19, 30, 3)), ("simple", (30, 19, 3)), ("simple", (8, 8, 1)),
    ("nature_cnn", (35, 84, 4)),
])
def test_too_small_image_is_a_clear_error(kind, shape):
    smallest = {"simple": 20, "nature_cnn": 36}[kind]
    with pytest.raises(torsos.ImageTooSmallError) as info:
        torsos.make_torso(shape, tf.uint8, kind=kind)
    message = str(info.value)
    assert f"{smallest}x{smallest}" in message and f"{shape[0]}x{shape[1]}" in message, message
    assert repr(kind) in message
    assert isinstance(info.value, ValueError)


def test_too_small_image_called_directly_is_a_clear_error():
    with pytest.raises(torsos.ImageTooSmallError, match="at least 20x20"):
        torsos.SimpleVisualEncoder()(tf.zeros([1, 16, 40, 3]))


def test_the_configs_offer_every_torso_kind():
    assert set(network_config.TORSOS) == set(torsos.KINDS)


@pytest.mark.parametrize("kind, shape", [("nature_cnn", (84, 84, 4)), ("minatar", (10, 10, 4)),
                                         ("simple", (40, 40, 3))])
def test_bfloat16_computes_the_float32_torso_from_the_same_float32_weights(kind, shape):
    """The same variables (float32, as created by the float32 path: checkpoints are
    the same); features within bfloat16's 8 bits of mantissa of the float32 ones, in
    float32; gradients reach every weight, in float32."""
    images = tf.constant(np.random.RandomState(0).randint(0, 256, (6, *shape)), tf.uint8)
    bf16_first = torsos.make_torso(shape, tf.uint8, kind=kind)
    with torsos.precision_scope("bfloat16"):
        bf16_first(images)  # its variables created on the bfloat16 path
    torso = torsos.make_torso(shape, tf.uint8, kind=kind)
    expected = torso(images)
    assert ([(v.name, v.shape, v.dtype) for v in bf16_first.variables]
            == [(v.name, v.shape, v.dtype) for v in torso.variables])
    assert all(v.dtype == tf.float32 for v in torso.variables)
    with tf.GradientTape() as tape:
        with torsos.precision_scope("bfloat16"):
            features = torso(images)
        loss = tf.reduce_sum(features ** 2)
    assert torsos.precision() == "float32"  # the scope ended
    assert features.dtype == tf.float32 and features.shape == expected.shape
    scale = float(tf.reduce_max(tf.abs(expected)))
    assert scale > 0 and float(tf.reduce_max(tf.abs(features - expected))) < 0.03 * scale
    gradients = tape.gradient(loss, torso.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 and float(tf.reduce_sum(tf.abs(g))) > 0
               for g in gradients)


def test_a_precision_that_does_not_exist_is_refused():
    from reverb_agents.launch.runs.options import TORSO_PRECISIONS, RunOptions
    assert TORSO_PRECISIONS == torsos.PRECISIONS
    with pytest.raises(ValueError, match="torso precision must be one of"):
        torsos.set_precision("float16")
    with pytest.raises(ValueError, match="torso_precision must be one of"):
        RunOptions(torso_precision="float16")
