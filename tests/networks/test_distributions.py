"""Tests for networks/distributions.py."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from reverb_agents.networks.distributions import (
    LOG_STD_MAX, LOG_STD_MIN, ActionSpace, Categorical, Gaussian, Leaf, TanhGaussian,
    UnsupportedSpaceError, env_action_tensor)

tfd = tfp.distributions

B = 3


def _box(*shape, low=-1.0, high=1.0):
    return gym.spaces.Box(low, high, shape, np.float32)


def _random_params(space: ActionSpace, batch_shape, seed):
    """Random per-leaf params (log-stds kept in the clipping range)."""
    rng = np.random.RandomState(seed)
    params = []
    for leaf in space.leaves:
        if leaf.discrete:
            params.append(tf.constant(rng.randn(*batch_shape, leaf.size) * 2.0, tf.float32))
        else:
            mean = rng.randn(*batch_shape, leaf.size)
            log_std = rng.uniform(-1.5, 1.0, size=batch_shape + (leaf.size,))
            params.append(tf.constant(np.concatenate([mean, log_std], -1), tf.float32))
    return tuple(params)


def _random_actions(space: ActionSpace, batch_shape, seed):
    rng = np.random.RandomState(seed)
    return tuple(
        tf.constant(rng.randint(0, leaf.size, size=batch_shape), tf.int32)
        if leaf.discrete
        else tf.constant(rng.randn(*batch_shape, leaf.size), tf.float32)
        for leaf in space.leaves)


def _tfp_leaf(leaf: Leaf, p: tf.Tensor) -> tfd.Distribution:
    if leaf.discrete:
        return tfd.Categorical(logits=p)
    mean, log_std = tf.split(p, 2, axis=-1)
    return tfd.MultivariateNormalDiag(loc=mean, scale_diag=tf.exp(log_std))


def _tfp_leaf_independent(leaf: Leaf, p: tf.Tensor) -> tfd.Distribution:
    if leaf.discrete:
        return tfd.Categorical(logits=p)
    mean, log_std = tf.split(p, 2, axis=-1)
    return tfd.Independent(tfd.Normal(mean, tf.exp(log_std)), reinterpreted_batch_ndims=1)


# --- leaves -------------------------------------------------------------------

@pytest.mark.parametrize('space, expected', [
    (gym.spaces.Discrete(4), [Categorical(4, 0)]),
    (gym.spaces.Discrete(3, start=2), [Categorical(3, 2)]),
    (gym.spaces.Discrete(5, start=-1), [Categorical(5, -1)]),
    (gym.spaces.MultiDiscrete([2, 3, 4]),
     [Categorical(2), Categorical(3), Categorical(4)]),
    (gym.spaces.MultiDiscrete([2, 3], start=[1, -1]),
     [Categorical(2, 1), Categorical(3, -1)]),
    (gym.spaces.MultiDiscrete([[2, 3], [4, 5]]),
     [Categorical(n) for n in (2, 3, 4, 5)]),
    (_box(2), [Gaussian(2)]),
    (_box(2, 3), [Gaussian(6)]),
    (gym.spaces.Box(-1.0, 1.0, (2,), np.float64), [Gaussian(2)]),
    (gym.spaces.Tuple((gym.spaces.Discrete(3), _box(2))),
     [Categorical(3), Gaussian(2)]),
    (gym.spaces.Tuple((gym.spaces.MultiDiscrete([2, 2]),
                       gym.spaces.Tuple((_box(1), gym.spaces.Discrete(2, start=1))))),
     [Categorical(2), Categorical(2), Gaussian(1),
      Categorical(2, 1)]),
    (gym.spaces.Dict({'move': _box(2), 'fire': gym.spaces.Discrete(2)}),
     # gymnasium sorts the keys of a plain dict: 'fire' < 'move'.
     [Categorical(2), Gaussian(2)]),
    (gym.spaces.Dict({'a': gym.spaces.Tuple((gym.spaces.Discrete(3), _box(4))),
                      'b': gym.spaces.MultiDiscrete([5])}),
     [Categorical(3), Gaussian(4), Categorical(5)]),
])
def test_leaves(space, expected):
    action_space = ActionSpace(space)
    assert list(action_space.leaves) == expected
    assert action_space.space is space


def test_leaf_classes():
    assert Categorical(3).discrete
    assert not Gaussian(2).discrete and not TanhGaussian(2).discrete
    # The kind is the type: a squashed and a plain Gaussian of one size differ.
    assert Gaussian(2) != TanhGaussian(2)
    assert [l.param_size for l in (Categorical(3, 1), Gaussian(2), TanhGaussian(2))] == [3, 4, 4]
    assert [l.action_spec() for l in (Categorical(3), TanhGaussian(2))] == [
        tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32)]


def test_sizes_and_specs():
    space = ActionSpace(gym.spaces.Tuple(
        (gym.spaces.Discrete(3), _box(2), gym.spaces.MultiDiscrete([4, 5]))))
    assert space.param_sizes == [3, 4, 4, 5]
    assert space.encoding_size == 3 + 2 + 4 + 5
    assert not space.is_discrete
    assert ActionSpace(gym.spaces.MultiDiscrete([2, 3])).is_discrete
    assert ActionSpace(gym.spaces.Discrete(2)).is_discrete
    assert space.action_specs() == (
        tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32),
        tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32))
    assert space.param_specs() == tuple(
        tf.TensorSpec([n], tf.float32) for n in (3, 4, 4, 5))


@pytest.mark.parametrize('space, names', [
    (gym.spaces.Text(5), ['Text']),
    (gym.spaces.Box(0, 10, (3,), np.int64), ['Box', 'int64', 'integer']),
    (gym.spaces.MultiBinary(3), ['MultiBinary']),
    (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(5))), ['Text', '[1]']),
    (gym.spaces.Dict({'ok': gym.spaces.Discrete(2),
                      'bad': gym.spaces.Box(0, 255, (2,), np.uint8)}),
     ["['bad']", 'uint8']),
])
def test_unsupported_spaces(space, names):
    with pytest.raises(UnsupportedSpaceError) as info:
        ActionSpace(space)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert '\n' not in message
    for name in names:
        assert name in message, message


# --- log_prob / entropy / kl against tensorflow_probability ----------------------

LEAF_SPACES = [
    gym.spaces.Discrete(5),
    gym.spaces.Discrete(3, start=1),
    _box(3),
    _box(2, 2),
]


@pytest.mark.parametrize('space', LEAF_SPACES)
@pytest.mark.parametrize('batch_shape', [(B,), (4, B)])
@pytest.mark.parametrize('tfp_fn', [_tfp_leaf, _tfp_leaf_independent])
def test_single_leaf_matches_tfp(space, batch_shape, tfp_fn):
    action_space = ActionSpace(space)
    (leaf,) = action_space.leaves
    (p,) = _random_params(action_space, batch_shape, seed=1)
    (q,) = _random_params(action_space, batch_shape, seed=2)
    (a,) = _random_actions(action_space, batch_shape, seed=3)
    dp, dq = tfp_fn(leaf, p), tfp_fn(leaf, q)

    log_prob = action_space.log_prob((p,), (a,))
    entropy = action_space.entropy((p,))
    kl = action_space.kl_divergence((p,), (q,))
    for value in (log_prob, entropy, kl):
        assert value.shape.as_list() == list(batch_shape)
        assert value.dtype == tf.float32
    np.testing.assert_allclose(log_prob, dp.log_prob(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(entropy, dp.entropy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kl, dp.kl_divergence(dq), rtol=1e-4, atol=1e-5)


def test_log_prob_unbatched_categorical():
    action_space = ActionSpace(gym.spaces.Discrete(4))
    logits = tf.constant([0.1, -1.0, 2.0, 0.5])
    log_prob = action_space.log_prob((logits,), (tf.constant(2),))
    assert log_prob.shape.as_list() == []
    np.testing.assert_allclose(log_prob, tfd.Categorical(logits=logits).log_prob(2), rtol=1e-6)


NEST_SPACES = [
    gym.spaces.Tuple((gym.spaces.Discrete(3), _box(2))),
    gym.spaces.MultiDiscrete([2, 3]),
    gym.spaces.Dict({'x': gym.spaces.MultiDiscrete([4, 2], start=[1, 0]),
                     'y': gym.spaces.Tuple((_box(1), gym.spaces.Discrete(2)))}),
]


@pytest.mark.parametrize('space', NEST_SPACES)
def test_nest_sums_over_leaves(space):
    action_space = ActionSpace(space)
    assert len(action_space.leaves) > 1
    p = _random_params(action_space, (B,), seed=4)
    q = _random_params(action_space, (B,), seed=5)
    a = _random_actions(action_space, (B,), seed=6)
    dps = [_tfp_leaf(l, x) for l, x in zip(action_space.leaves, p)]
    dqs = [_tfp_leaf(l, x) for l, x in zip(action_space.leaves, q)]

    expected_log_prob = sum(d.log_prob(x) for d, x in zip(dps, a))
    expected_entropy = sum(d.entropy() for d in dps)
    expected_kl = sum(d.kl_divergence(e) for d, e in zip(dps, dqs))
    np.testing.assert_allclose(action_space.log_prob(p, a), expected_log_prob, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(action_space.entropy(p), expected_entropy, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(action_space.kl_divergence(p, q), expected_kl, rtol=1e-4, atol=1e-5)

    # And each equals the sum of the single-leaf computations of the library.
    leaf_spaces = [ActionSpace(gym.spaces.Discrete(l.size)) if l.discrete
                   else ActionSpace(_box(l.size)) for l in action_space.leaves]
    np.testing.assert_allclose(
        action_space.log_prob(p, a),
        sum(s.log_prob((x,), (y,)) for s, x, y in zip(leaf_spaces, p, a)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        action_space.entropy(p),
        sum(s.entropy((x,)) for s, x in zip(leaf_spaces, p)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        action_space.kl_divergence(p, q),
        sum(s.kl_divergence((x,), (y,)) for s, x, y in zip(leaf_spaces, p, q)),
        rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('space', LEAF_SPACES + NEST_SPACES)
def test_kl_zero_for_identical_and_nonnegative(space):
    action_space = ActionSpace(space)
    p = _random_params(action_space, (16,), seed=7)
    np.testing.assert_allclose(action_space.kl_divergence(p, p), np.zeros(16), atol=1e-5)
    for seed in range(8, 12):
        q = _random_params(action_space, (16,), seed=seed)
        kl = action_space.kl_divergence(p, q).numpy()
        assert np.all(kl >= -1e-6), kl
        assert np.all(kl > 0.0)  # Random params differ, so strictly positive.


# --- split_params --------------------------------------------------------------

def test_split_params_clips_log_std_only():
    action_space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(2), _box(2))))
    flat = tf.constant([[100.0, -100.0, 50.0, -50.0, 10.0, -10.0]])
    logits, gaussian = action_space.split_params(flat)
    np.testing.assert_array_equal(logits, [[100.0, -100.0]])
    np.testing.assert_array_equal(gaussian, [[50.0, -50.0, LOG_STD_MAX, LOG_STD_MIN]])


# --- sample / mode -------------------------------------------------------------

def test_sample_shapes_and_dtypes():
    space = ActionSpace(gym.spaces.Tuple(
        (gym.spaces.Discrete(3), _box(2, 2), gym.spaces.MultiDiscrete([4, 5]))))
    params = _random_params(space, (B,), seed=0)
    actions = space.sample(params)
    assert len(actions) == 4
    for action, spec in zip(actions, space.action_specs()):
        assert action.dtype == spec.dtype
        assert action.shape.as_list() == [B] + spec.shape.as_list()
    for leaf, action in zip(space.leaves, actions):
        if leaf.discrete:
            assert np.all((action.numpy() >= 0) & (action.numpy() < leaf.size))
    assert space.log_prob(params, actions).shape.as_list() == [B]


def test_mode_is_argmax_and_mean():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(4), _box(3))))
    params = _random_params(space, (B,), seed=0)
    logits_mode, gaussian_mode = space.mode(params)
    assert logits_mode.dtype == tf.int32
    np.testing.assert_array_equal(logits_mode, np.argmax(params[0].numpy(), -1))
    np.testing.assert_array_equal(gaussian_mode, params[1].numpy()[:, :3])
    # The mode is the most likely action.
    best = space.log_prob(params, (logits_mode, gaussian_mode))
    for other in range(4):
        other_action = (tf.fill([B], other), gaussian_mode + 0.1)
        assert np.all(best.numpy() > space.log_prob(params, other_action).numpy())


def test_categorical_sample_frequencies_match_softmax():
    tf.random.set_seed(1234)
    logits = np.array([1.0, 0.0, -1.0, 2.0], np.float32)
    n = 20000
    space = ActionSpace(gym.spaces.MultiDiscrete([4]))
    (actions,) = space.sample((tf.tile(logits[None], [n, 1]),))
    frequencies = np.bincount(actions.numpy(), minlength=4) / n
    expected = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(frequencies, expected, atol=0.02)


def test_gaussian_sample_moments():
    tf.random.set_seed(4321)
    n = 20000
    mean = np.array([1.0, -2.0], np.float32)
    log_std = np.array([0.0, -1.0], np.float32)
    space = ActionSpace(_box(2))
    params = tf.tile(np.concatenate([mean, log_std])[None], [n, 1])
    (actions,) = space.sample((params,))
    np.testing.assert_allclose(actions.numpy().mean(0), mean, atol=0.05)
    np.testing.assert_allclose(actions.numpy().std(0), np.exp(log_std), rtol=0.05)


# --- encode --------------------------------------------------------------------

def test_encode_one_hot_and_raw():
    space = ActionSpace(gym.spaces.Tuple(
        (gym.spaces.Discrete(3), _box(2), gym.spaces.MultiDiscrete([2, 4]))))
    actions = (tf.constant([0, 2, 1]),
               tf.constant([[0.5, -1.5], [2.0, 3.0], [0.0, 0.25]]),
               tf.constant([1, 0, 1]),
               tf.constant([3, 0, 2]))
    encoded = space.encode(actions)
    assert encoded.dtype == tf.float32
    assert encoded.shape.as_list() == [B, space.encoding_size]
    expected = np.array([
        [1, 0, 0, 0.5, -1.5, 0, 1, 0, 0, 0, 1],
        [0, 0, 1, 2.0, 3.0, 1, 0, 1, 0, 0, 0],
        [0, 1, 0, 0.0, 0.25, 0, 1, 0, 0, 1, 0],
    ], np.float32)
    np.testing.assert_array_equal(encoded, expected)


def test_encode_time_batch():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(3), _box(2))))
    actions = _random_actions(space, (4, B), seed=0)
    encoded = space.encode(actions)
    assert encoded.shape.as_list() == [4, B, 5]
    np.testing.assert_array_equal(encoded[..., :3], tf.one_hot(actions[0], 3))
    np.testing.assert_array_equal(encoded[..., 3:], actions[1])


# --- to_env / from_env ---------------------------------------------------------

def _assert_nest_equal(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            _assert_nest_equal(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_nest_equal(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _batched_env_sample(space, batch, seed):
    """`batch` env actions from `space.sample()`, stacked into one batched nest."""
    space.seed(seed)
    samples = [space.sample() for _ in range(batch)]

    def stack(s, xs):
        if isinstance(s, gym.spaces.Tuple):
            return tuple(stack(sub, [x[i] for x in xs]) for i, sub in enumerate(s.spaces))
        if isinstance(s, gym.spaces.Dict):
            return {k: stack(sub, [x[k] for x in xs]) for k, sub in s.spaces.items()}
        return np.stack([np.asarray(x) for x in xs])

    return stack(space, samples)


ROUND_TRIP_SPACES = [
    gym.spaces.Discrete(4, start=1),
    gym.spaces.Discrete(3, start=-2),
    gym.spaces.MultiDiscrete([2, 3, 4]),
    gym.spaces.MultiDiscrete([3, 5], start=[1, -2]),
    gym.spaces.MultiDiscrete([[2, 3], [4, 5]]),
    gym.spaces.Box(-2.0, 3.0, (2,), np.float32),
    gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32),
    gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), _box(2),
                      gym.spaces.MultiDiscrete([2, 2]))),
    gym.spaces.Dict({'b': gym.spaces.Discrete(2, start=1), 'a': _box(3),
                     'c': gym.spaces.Tuple((gym.spaces.MultiDiscrete([3]), _box(1)))}),
    gym.spaces.Dict(b=gym.spaces.Discrete(2, start=1), a=_box(3)),  # insertion order
]


@pytest.mark.parametrize('space', ROUND_TRIP_SPACES)
def test_env_round_trip(space):
    action_space = ActionSpace(space)
    env_actions = _batched_env_sample(space, B, seed=0)
    leaves = action_space.from_env(env_actions)
    assert len(leaves) == len(action_space.leaves)
    for leaf, x in zip(action_space.leaves, leaves):
        if leaf.discrete:
            assert x.dtype == np.int32 and x.shape == (B,)
            assert np.all((x >= 0) & (x < leaf.size)), x
        else:
            assert x.dtype == np.float32 and x.shape == (B, leaf.size)
    back = action_space.to_env(leaves)
    _assert_nest_equal(back, env_actions)
    # Each of the B rows is a valid action of the environment space.
    for i in range(B):
        assert space.contains(_row(space, back, i)), _row(space, back, i)
    # Library -> env -> library is the identity too.
    again = action_space.from_env(back)
    for x, y in zip(leaves, again):
        np.testing.assert_array_equal(x, y)


def _row(space, batched, i):
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_row(s, x, i) for s, x in zip(space.spaces, batched))
    if isinstance(space, gym.spaces.Dict):
        return {k: _row(s, batched[k], i) for k, s in space.spaces.items()}
    x = np.asarray(batched[i])
    return x.astype(space.dtype) if space.dtype is not None else x


def test_to_env_applies_start_offsets():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(3, start=1),
                                          gym.spaces.MultiDiscrete([2, 3], start=[5, -1]))))
    env = space.to_env((np.array([0, 1, 2], np.int32), np.array([0, 1, 1], np.int32),
                        np.array([2, 0, 1], np.int32)))
    np.testing.assert_array_equal(env[0], [1, 2, 3])
    np.testing.assert_array_equal(env[1], [[5, 1], [6, -1], [6, 0]])
    assert env[1].dtype == space.space.spaces[1].dtype


def test_to_env_clips_box_to_bounds():
    box = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32))
    space = ActionSpace(gym.spaces.Dict({'move': box, 'fire': gym.spaces.Discrete(2)}))
    samples = (np.array([0, 1, 1], np.int32),
               np.array([[-5.0, 5.0], [0.5, 1.5], [3.0, -3.0]], np.float32))
    env = space.to_env(samples)
    assert set(env) == {'move', 'fire'}
    np.testing.assert_array_equal(env['fire'], [0, 1, 1])
    np.testing.assert_array_equal(env['move'], [[-1.0, 2.0], [0.5, 1.5], [1.0, 0.0]])
    assert env['move'].dtype == np.float32
    # The library's own copy is not modified.
    np.testing.assert_array_equal(samples[1], [[-5.0, 5.0], [0.5, 1.5], [3.0, -3.0]])


def test_to_env_reshapes_multidim_box():
    space = ActionSpace(gym.spaces.Box(-10.0, 10.0, (2, 3), np.float32))
    flat = np.arange(B * 6, dtype=np.float32).reshape(B, 6) - 5.0
    env = space.to_env((flat,))
    assert env.shape == (B, 2, 3)
    np.testing.assert_array_equal(env.reshape(B, 6), np.clip(flat, -10.0, 10.0))


def test_to_env_accepts_tensors_from_sample():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), _box(2))))
    actions = space.sample(_random_params(space, (B,), seed=0))
    env = space.to_env(tuple(a.numpy() for a in actions))
    assert env[0].shape == (B,) and np.all((env[0] >= 1) & (env[0] <= 3))
    assert env[1].shape == (B, 2) and np.all(np.abs(env[1]) <= 1.0)


def test_rescaled_box_actions_are_in_unit_range_and_map_to_the_bounds():
    """`rescale`: a Box with finite bounds is a Gaussian in [-1, 1] units, clipped there
    and mapped onto the bounds (Pendulum's [-2, 2] shifted to [-10, 30] acts the same);
    an infinite bound keeps the Box's own units."""
    box = gym.spaces.Box(np.array([-10.0, 0.0], np.float32), np.array([30.0, 2.0], np.float32))
    space = ActionSpace(gym.spaces.Tuple((box, gym.spaces.Box(-np.inf, np.inf, (1,)))),
                        rescale=True)
    assert space.leaves == (Gaussian(2, unit=True), Gaussian(1, unit=False))
    assert [leaf.rescaled for leaf in space.leaves] == [True, False]
    unit = np.array([[-1.0, 1.0], [0.0, 0.5], [3.0, -7.0]], np.float32)
    raw = np.array([[5.0], [-3.0], [100.0]], np.float32)
    env = space.to_env((unit, raw))
    np.testing.assert_allclose(env[0], [[-10.0, 2.0], [10.0, 1.5], [30.0, 0.0]])
    np.testing.assert_array_equal(env[1], raw)
    back = space.from_env(env)
    np.testing.assert_allclose(back[0], np.clip(unit, -1.0, 1.0), atol=1e-6)
    np.testing.assert_array_equal(back[1], raw)
    graph = env_action_tensor(box, True, (tf.constant(unit),)).numpy()
    np.testing.assert_allclose(graph, env[0], atol=1e-6)
    assert space.policy_spec() == [
        {'kind': 'Gaussian', 'param_size': 4, 'units': '[-1, 1]'},
        {'kind': 'Gaussian', 'param_size': 2}]
    assert ActionSpace(box).leaves == (Gaussian(2),)  # without `rescale`: its own units


# --- tanh-squashed Gaussian leaves (SAC) ----------------------------------------

def _squashed_reference(params, action):
    """log N(atanh(a)) - sum log(1 - a^2) via TFP's Tanh bijector."""
    mean, log_std = tf.split(params, 2, axis=-1)
    dist = tfd.TransformedDistribution(
        tfd.Independent(tfd.Normal(mean, tf.exp(log_std)), 1), tfp.bijectors.Tanh())
    return dist.log_prob(action)


def test_squashed_box_leaves_and_bounds():
    space = ActionSpace(gym.spaces.Box(-2.0, 2.0, (3,), np.float32), squash=True)
    assert space.leaves == (TanhGaussian(3),)
    with pytest.raises(UnsupportedSpaceError, match='infinite bounds'):
        ActionSpace(gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), squash=True)


def test_squashed_log_prob_matches_tfp_tanh_transform():
    space = ActionSpace(_box(2), squash=True)
    params = _random_params(space, (5,), 0)
    actions = space.sample(params)
    assert np.all(np.abs(actions[0].numpy()) < 1.0)
    np.testing.assert_allclose(space.log_prob(params, actions).numpy(),
                               _squashed_reference(params[0], actions[0]).numpy(),
                               rtol=1e-4, atol=1e-4)


def test_sample_squashed_log_prob_matches_and_is_differentiable():
    from reverb_agents.networks.distributions import sample_squashed
    params = tf.Variable(_random_params(ActionSpace(_box(2), squash=True), (6,), 1)[0])
    with tf.GradientTape() as tape:
        action, log_prob = sample_squashed(params)
        loss = tf.reduce_sum(action) + tf.reduce_sum(log_prob)
    np.testing.assert_allclose(log_prob.numpy(), _squashed_reference(params, action).numpy(),
                               rtol=1e-4, atol=1e-4)
    assert np.all(np.isfinite(tape.gradient(loss, params).numpy()))


def test_squashed_mode_to_env_and_back():
    box = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))
    space = ActionSpace(box, squash=True)
    params = (tf.constant([[0.0, 100.0, 0.0, 0.0]]),)
    mode = space.mode(params)[0].numpy()
    np.testing.assert_allclose(mode, [[0.0, 1.0]])
    np.testing.assert_allclose(space.to_env((mode,)), [[0.0, 10.0]])
    env_actions = np.array([[-2.0, 2.5], [1.0, 10.0]], np.float32)
    np.testing.assert_allclose(space.to_env(space.from_env(env_actions)), env_actions, atol=1e-6)
    np.testing.assert_allclose(space.from_env(env_actions)[0], [[-1.0, -0.5], [0.5, 1.0]])


def test_squashed_spaces_have_no_closed_form_entropy():
    space = ActionSpace(_box(2), squash=True)
    with pytest.raises(ValueError, match='closed-form'):
        space.entropy(_random_params(space, (2,), 0))


def test_sample_uniform_covers_each_leaf_kind():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(3), _box(2))), squash=True)
    actions, log_prob = space.sample_uniform(1000, np.random.default_rng(0))
    assert set(np.unique(actions[0])) == {0, 1, 2}
    assert actions[1].shape == (1000, 2) and np.all(np.abs(actions[1]) <= 1.0)
    np.testing.assert_allclose(log_prob, -np.log(3) - 2 * np.log(2), rtol=1e-6)
    with pytest.raises(ValueError, match='bounded'):
        ActionSpace(_box(2)).sample_uniform(2, np.random.default_rng(0))
