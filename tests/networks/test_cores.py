"""Tests for networks/cores.py (and the observation handling it relies on)."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.networks import observations, torsos
from reverb_agents.networks.cores import (
    REWARD_CLIPPINGS, ActorCriticCore, AgentOutput, CoreInputs, CoreParts, LSTMMemory,
    transform_reward)
from reverb_agents.networks.critics import CriticEnsemble
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError

T, B = 5, 3
HIDDEN = (8,)
LSTM = 8

CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
DISCRETE_ACTIONS = gym.spaces.Discrete(2)
TUPLE_ACTIONS = gym.spaces.Tuple(
    (gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))

# Row 0: no reset inside the sequence; row 1: reset at t=2; row 2: resets at t=0 and t=3.
FIRST = np.array([[0, 0, 1],
                  [0, 0, 0],
                  [0, 1, 0],
                  [0, 0, 1],
                  [0, 0, 0]], bool)


def _core(action_space, lstm_size, observation_space=CARTPOLE_OBS, memory_skip=False):
    return ActorCriticCore(observation_space, ActionSpace(action_space),
                           hidden_sizes=HIDDEN, lstm_size=lstm_size, memory_skip=memory_skip)


def _random_observation(space, lead_shape, rng):
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_random_observation(s, lead_shape, rng) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: _random_observation(s, lead_shape, rng) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Discrete):
        return tf.constant(rng.randint(0, space.n, lead_shape) + space.start, tf.int32)
    if isinstance(space, gym.spaces.Box) and space.dtype == np.uint8:
        return tf.constant(rng.randint(0, 256, lead_shape + space.shape), tf.uint8)
    return tf.constant(rng.randn(*(lead_shape + space.shape)), tf.float32)


def _random_inputs(core, observation_space, lead_shape, seed, first=None):
    rng = np.random.RandomState(seed)
    action_space = core._action_space
    prev_action = tuple(
        tf.constant(rng.randint(0, leaf.size, lead_shape), tf.int32)
        if leaf.discrete
        else tf.constant(rng.randn(*(lead_shape + (leaf.size,))), tf.float32)
        for leaf in action_space.leaves)
    if first is None:
        first = np.zeros(lead_shape, bool)
    return CoreInputs(
        observation=_random_observation(observation_space, lead_shape, rng),
        prev_action=prev_action,
        prev_reward=tf.constant(rng.randn(*lead_shape), tf.float32),
        first=tf.constant(first))


def _random_state(core, seed):
    """A non-trivial recurrent state, so that a reset is observable."""
    rng = np.random.RandomState(seed)
    return tf.nest.map_structure(
        lambda s: tf.constant(rng.randn(*s.shape), tf.float32), core.initial_state(B))


def _at(inputs, t):
    return tf.nest.map_structure(lambda x: x[t], inputs)


def _step_loop(core, inputs, state):
    outputs = []
    for t in range(inputs.first.shape[0]):
        out, state = core(_at(inputs, t), state)
        outputs.append(out)
    return tf.nest.map_structure(lambda *xs: tf.stack(xs), *outputs), state


def _assert_close(a, b, atol=1e-5):
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=atol)


CORE_CASES = [
    pytest.param(DISCRETE_ACTIONS, LSTM, id='discrete-lstm'),
    pytest.param(DISCRETE_ACTIONS, 0, id='discrete-ff'),
    pytest.param(TUPLE_ACTIONS, LSTM, id='tuple-lstm'),
    pytest.param(TUPLE_ACTIONS, 0, id='tuple-ff'),
]


def _param_shapes(action_space):
    return [leaf.param_size for leaf in ActionSpace(action_space).leaves]


# --- shapes --------------------------------------------------------------------

@pytest.mark.parametrize('action_space, lstm_size', CORE_CASES)
def test_call_and_unroll_shapes(action_space, lstm_size):
    core = _core(action_space, lstm_size)
    assert core.recurrent == (lstm_size > 0)

    out, state = core(_random_inputs(core, CARTPOLE_OBS, (B,), seed=0), core.initial_state(B))
    assert isinstance(out, AgentOutput)
    assert isinstance(out.policy_params, tuple)
    assert [p.shape.as_list() for p in out.policy_params] == [
        [B, n] for n in _param_shapes(action_space)]
    assert out.baseline.shape.as_list() == [B]
    assert all(p.dtype == tf.float32 for p in out.policy_params)
    tf.nest.assert_same_structure(state, core.initial_state(B))
    if lstm_size:
        assert [s.shape.as_list() for s in tf.nest.flatten(state)] == [[B, LSTM]] * 2

    out, state = core.unroll(_random_inputs(core, CARTPOLE_OBS, (T, B), seed=1, first=FIRST),
                             core.initial_state(B))
    assert [p.shape.as_list() for p in out.policy_params] == [
        [T, B, n] for n in _param_shapes(action_space)]
    assert out.baseline.shape.as_list() == [T, B]
    tf.nest.assert_same_structure(state, core.initial_state(B))
    if lstm_size:
        assert [s.shape.as_list() for s in tf.nest.flatten(state)] == [[B, LSTM]] * 2
    for x in tf.nest.flatten(out):
        assert np.all(np.isfinite(x.numpy()))


def test_gaussian_log_std_is_clipped_in_outputs():
    core = _core(TUPLE_ACTIONS, LSTM)
    inputs = _random_inputs(core, CARTPOLE_OBS, (B,), seed=0)
    inputs = inputs._replace(observation=inputs.observation * 1e4)
    out, _ = core(inputs, core.initial_state(B))
    log_std = out.policy_params[1].numpy()[:, 2:]
    assert np.all(log_std >= -5.0) and np.all(log_std <= 2.0)


# --- unroll == stepping --------------------------------------------------------

@pytest.mark.parametrize('action_space, lstm_size, memory_skip',
                         [pytest.param(*case.values, False, id=case.id) for case in CORE_CASES]
                         + [pytest.param(TUPLE_ACTIONS, LSTM, True, id='tuple-lstm-skip')])
@pytest.mark.parametrize('first', [np.zeros([T, B], bool), FIRST], ids=['no-reset', 'resets'])
def test_unroll_equals_stepping(action_space, lstm_size, memory_skip, first):
    core = _core(action_space, lstm_size, memory_skip=memory_skip)
    inputs = _random_inputs(core, CARTPOLE_OBS, (T, B), seed=2, first=first)
    state = _random_state(core, seed=3)

    unrolled, unroll_state = core.unroll(inputs, state)
    stepped, step_state = _step_loop(core, inputs, state)
    _assert_close(unrolled, stepped)
    _assert_close(unroll_state, step_state)


def test_memory_skip_gives_the_heads_torso_and_memory():
    # The features are [torso and previous step, memory]: the memory's part is the
    # LSTM's output, the rest what a core without the skip feeds its LSTM.
    core = _core(TUPLE_ACTIONS, LSTM, memory_skip=True)
    inputs = _random_inputs(core, CARTPOLE_OBS, (T, B), seed=2, first=FIRST)
    state = _random_state(core, seed=3)
    unrolled, _ = core.unroll(inputs, state)
    plain = _core(TUPLE_ACTIONS, LSTM)
    plain.create_variables()
    for mine, theirs in zip(plain.parts.torso.variables + plain.parts.memory.variables,
                            core.parts.torso.variables + core.parts.memory.variables):
        mine.assign(theirs)  # (the previous step's embedding has no variables)
    plain_out, _ = plain.unroll(inputs, state)
    assert core.features_size > plain.features_size == LSTM
    np.testing.assert_allclose(unrolled.features[..., -LSTM:].numpy(),
                               plain_out.features.numpy(), rtol=1e-5, atol=1e-6)
    # Without a memory the option changes nothing.
    assert not _core(TUPLE_ACTIONS, 0, memory_skip=True).memory_skip


def test_unroll_equals_stepping_in_tf_function():
    core = _core(TUPLE_ACTIONS, LSTM)
    inputs = _random_inputs(core, CARTPOLE_OBS, (T, B), seed=4, first=FIRST)
    state = _random_state(core, seed=5)
    # The first call happens inside tf.function: variables are created there.
    unrolled, unroll_state = tf.function(core.unroll)(inputs, state)
    stepped, step_state = _step_loop(core, inputs, state)
    _assert_close(unrolled, stepped)
    _assert_close(unroll_state, step_state)


def test_unroll_single_step_equals_call():
    core = _core(DISCRETE_ACTIONS, LSTM)
    inputs = _random_inputs(core, CARTPOLE_OBS, (1, B), seed=6, first=FIRST[2:3])
    state = _random_state(core, seed=7)
    unrolled, unroll_state = core.unroll(inputs, state)
    called, call_state = core(_at(inputs, 0), state)
    _assert_close(tf.nest.map_structure(lambda x: x[0], unrolled), called)
    _assert_close(unroll_state, call_state)


# --- resets --------------------------------------------------------------------

def _perturb_before(inputs, t_reset, row, seed):
    """New inputs whose observation/prev_action/prev_reward differ at `[:t_reset, row]`."""
    rng = np.random.RandomState(seed)

    def change(x):
        x = x.numpy()
        noise = rng.randn(*x[:t_reset, row].shape) * 3.0
        if np.issubdtype(x.dtype, np.integer):
            x[:t_reset, row] = (x[:t_reset, row] + 1) % 2
        else:
            x[:t_reset, row] = x[:t_reset, row] + noise
        return tf.constant(x)

    return inputs._replace(observation=change(inputs.observation),
                           prev_action=tuple(change(a) for a in inputs.prev_action),
                           prev_reward=change(inputs.prev_reward))


@pytest.mark.parametrize('action_space, lstm_size', CORE_CASES)
def test_outputs_after_first_ignore_earlier_inputs(action_space, lstm_size):
    core = _core(action_space, lstm_size)
    inputs = _random_inputs(core, CARTPOLE_OBS, (T, B), seed=8, first=FIRST)
    state = _random_state(core, seed=9)
    base, _ = core.unroll(inputs, state)

    for row, t_reset in [(1, 2), (2, 3)]:
        changed = _perturb_before(inputs, t_reset, row, seed=10 + row)
        # A different initial state for this row only.
        mask = (np.arange(B) == row)[:, None]
        other_state = tf.nest.map_structure(
            lambda s, o: tf.where(mask, o, s), state, _random_state(core, seed=20 + row))
        for out, _ in (core.unroll(changed, other_state),
                       _step_loop(core, changed, other_state)):
            for x, y in zip(tf.nest.flatten(base), tf.nest.flatten(out)):
                x, y = x.numpy(), y.numpy()
                # From the reset onwards nothing earlier matters...
                np.testing.assert_allclose(x[t_reset:, row], y[t_reset:, row],
                                           rtol=1e-5, atol=1e-6)
                # ...other rows are untouched...
                others = [r for r in range(B) if r != row]
                np.testing.assert_allclose(x[:, others], y[:, others], rtol=1e-5, atol=1e-6)
            # ...and before the reset the perturbation does change the outputs.
            assert not np.allclose(base.baseline.numpy()[:t_reset, row],
                                   out.baseline.numpy()[:t_reset, row])


@pytest.mark.parametrize('action_space, lstm_size', CORE_CASES)
def test_first_step_ignores_prev_action_reward_and_state(action_space, lstm_size):
    core = _core(action_space, lstm_size)
    first = np.array([True, False, True])
    inputs = _random_inputs(core, CARTPOLE_OBS, (B,), seed=12, first=first)
    out, new_state = core(inputs, _random_state(core, seed=13))

    # Other prev action, prev reward and state: same outputs where `first` is true.
    other = inputs._replace(
        prev_action=tuple(
            (a + 1) % leaf.size if leaf.discrete else a * -2.0 + 1.0
            for leaf, a in zip(core._action_space.leaves, inputs.prev_action)),
        prev_reward=inputs.prev_reward * -3.0 + 1.0)
    other_out, other_state = core(other, _random_state(core, seed=14))
    for x, y in zip(tf.nest.flatten((out, new_state)), tf.nest.flatten((other_out, other_state))):
        np.testing.assert_allclose(x.numpy()[first], y.numpy()[first], rtol=1e-5, atol=1e-6)
        if x.numpy().size:  # the empty Q values of a core without a Q head are equal
            assert not np.allclose(x.numpy()[~first], y.numpy()[~first])


def test_lstm_reset_equals_initial_state():
    core = _core(DISCRETE_ACTIONS, LSTM)
    inputs = _random_inputs(core, CARTPOLE_OBS, (B,), seed=15, first=np.ones([B], bool))
    from_random, random_next = core(inputs, _random_state(core, seed=16))
    from_initial, initial_next = core(inputs, core.initial_state(B))
    _assert_close(from_random, from_initial)
    _assert_close(random_next, initial_next)
    # Without `first` the state matters.
    no_reset = inputs._replace(first=tf.zeros([B], tf.bool))
    a, _ = core(no_reset, _random_state(core, seed=16))
    b, _ = core(no_reset, core.initial_state(B))
    assert not np.allclose(a.baseline.numpy(), b.baseline.numpy())


# --- feed-forward core ---------------------------------------------------------

@pytest.mark.parametrize('action_space', [DISCRETE_ACTIONS, TUPLE_ACTIONS])
def test_feed_forward_state_is_empty_and_ignored(action_space):
    core = _core(action_space, 0)
    assert core.initial_state(B) == ()
    assert not core.recurrent
    inputs = _random_inputs(core, CARTPOLE_OBS, (B,), seed=17)
    out, state = core(inputs, ())
    assert state == ()
    fake_state = tf.random.normal([B, 5])
    out2, state2 = core(inputs, fake_state)
    _assert_close(out, out2)
    assert state2 is fake_state

    seq = _random_inputs(core, CARTPOLE_OBS, (T, B), seed=18, first=FIRST)
    unrolled, final = core.unroll(seq, ())
    assert final == ()
    unrolled2, _ = core.unroll(seq, (tf.ones([B, 3]),))
    _assert_close(unrolled, unrolled2)
    # Each step is independent of the others: shuffling time changes nothing per step.
    perm = [3, 0, 4, 1, 2]
    shuffled, _ = core.unroll(tf.nest.map_structure(lambda x: tf.gather(x, perm), seq), ())
    _assert_close(tf.nest.map_structure(lambda x: tf.gather(x, perm), unrolled), shuffled)


# --- observation spaces ----------------------------------------------------------

DICT_OBS = gym.spaces.Dict({
    'position': gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    'grid': gym.spaces.Box(0.0, 1.0, (2, 2), np.float32),
})
DISCRETE_OBS = gym.spaces.Discrete(6, start=2)
MIXED_OBS = gym.spaces.Tuple((
    gym.spaces.Discrete(4),
    gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    gym.spaces.MultiBinary(3),
    gym.spaces.MultiDiscrete([2, 3]),
))


@pytest.mark.parametrize('observation_space', [DICT_OBS, DISCRETE_OBS, MIXED_OBS],
                         ids=['dict', 'discrete', 'tuple'])
@pytest.mark.parametrize('lstm_size', [LSTM, 0])
def test_observation_spaces_shapes(observation_space, lstm_size):
    core = _core(TUPLE_ACTIONS, lstm_size, observation_space)
    inputs = _random_inputs(core, observation_space, (B,), seed=19)
    out, _ = core(inputs, core.initial_state(B))
    assert out.baseline.shape.as_list() == [B]
    assert [p.shape.as_list() for p in out.policy_params] == [[B, 3], [B, 4]]

    seq = _random_inputs(core, observation_space, (T, B), seed=20, first=FIRST)
    state = core.initial_state(B)
    unrolled, _ = core.unroll(seq, state)
    assert unrolled.baseline.shape.as_list() == [T, B]
    assert [p.shape.as_list() for p in unrolled.policy_params] == [[T, B, 3], [T, B, 4]]
    stepped, _ = _step_loop(core, seq, state)
    _assert_close(unrolled, stepped)


def test_discrete_observation_is_one_hot_with_start():
    torso = observations.ObservationTorso(DISCRETE_OBS, hidden_sizes=HIDDEN)
    obs = tf.constant([2, 7, 4])
    out = torso(obs)
    assert out.shape.as_list() == [B, 8]
    # Equivalent to the MLP applied to the one-hot of `obs - start`.
    np.testing.assert_allclose(out, torso._net(tf.one_hot(obs - 2, 6)), rtol=1e-6)


@pytest.mark.parametrize('space, observation', [
    # Crashes: the Box member is one-hot encoded as if it were the Discrete one.
    (gym.spaces.Dict(b=gym.spaces.Discrete(3), a=gym.spaces.Box(-1.0, 1.0, (2,))),
     {'a': [[0.5, -0.5], [1.0, 0.0], [0.0, 0.0]], 'b': [0, 2, 1]}),
    # Silently wrong: 'a' (5 values) is one-hot encoded with b's depth 3.
    (gym.spaces.Dict(b=gym.spaces.Discrete(3), a=gym.spaces.Discrete(5)),
     {'a': [4, 3, 0], 'b': [0, 2, 1]}),
], ids=['discrete-box', 'discrete-discrete'])
def test_dict_observation_keyword_order(space, observation):
    """A Dict built from keywords keeps insertion order (not sorted) in gymnasium.

    The torso must still pair each member with its own space.
    """
    assert list(space.spaces) == ['b', 'a']
    torso = observations.ObservationTorso(space, hidden_sizes=HIDDEN)
    observation = {'a': tf.constant(observation['a']), 'b': tf.constant(observation['b'])}

    def encode(key):
        s = space.spaces[key]
        if isinstance(s, gym.spaces.Discrete):
            return tf.one_hot(observation[key], int(s.n))
        return tf.cast(observation[key], tf.float32)

    # Either order of the members is acceptable, as long as each member is
    # encoded according to its own space.
    candidates = [torso._net(tf.concat([encode('b'), encode('a')], -1)),
                  torso._net(tf.concat([encode('a'), encode('b')], -1))]
    try:
        out = torso(observation)
    except tf.errors.InvalidArgumentError as e:
        out = e
    assert not isinstance(out, Exception) and any(
        np.allclose(out, c, rtol=1e-5, atol=1e-6) for c in candidates), (
        'BUG networks/observations.py ObservationTorso._flat_vector: zips '
        '_flat_spaces(space) (Dict insertion order) with tf.nest.flatten(observation) '
        f'(sorted keys), so members of {space} are encoded with the wrong space; got {out!r}')


@pytest.mark.parametrize('space, expected', [
    (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), tf.TensorSpec([84, 84, 4], tf.uint8)),
    (gym.spaces.Box(-1.0, 1.0, (4,), np.float32), tf.TensorSpec([4], tf.float32)),
    (gym.spaces.Box(-1.0, 1.0, (4,), np.float64), tf.TensorSpec([4], tf.float32)),
    (gym.spaces.Box(0, 10, (2,), np.int64), tf.TensorSpec([2], tf.float32)),
    (gym.spaces.Discrete(5), tf.TensorSpec([], tf.int32)),
    (gym.spaces.MultiBinary(3), tf.TensorSpec([3], tf.float32)),
    (gym.spaces.MultiDiscrete([2, 3]), tf.TensorSpec([2], tf.float32)),
    (gym.spaces.Tuple((gym.spaces.Box(0, 255, (8, 8, 3), np.uint8), gym.spaces.Discrete(2))),
     (tf.TensorSpec([8, 8, 3], tf.uint8), tf.TensorSpec([], tf.int32))),
    (DICT_OBS, {'grid': tf.TensorSpec([2, 2], tf.float32),
                'position': tf.TensorSpec([3], tf.float32)}),
])
def test_observation_spec(space, expected):
    assert observations.observation_spec(space) == expected


def test_to_numpy_casts_to_spec():
    space = gym.spaces.Dict({'image': gym.spaces.Box(0, 255, (2, 2, 1), np.uint8),
                             'count': gym.spaces.Discrete(3)})
    converted = observations.to_numpy(
        space, {'image': np.full([B, 2, 2, 1], 7, np.int64), 'count': np.array([0, 1, 2])})
    assert converted['image'].dtype == np.uint8
    assert converted['count'].dtype == np.int32


@pytest.mark.parametrize('space, names', [
    (gym.spaces.Text(5), ['Text', 'observation space']),
    (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(5))), ['Text', '[1]']),
    (gym.spaces.Dict({'ok': gym.spaces.Discrete(2), 'words': gym.spaces.Text(5)}),
     ['Text', "['words']"]),
])
def test_unsupported_observation_space(space, names):
    with pytest.raises(UnsupportedSpaceError) as info:
        observations.observation_spec(space)
    for name in names:
        assert name in str(info.value), str(info.value)
    with pytest.raises(UnsupportedSpaceError):
        _core(DISCRETE_ACTIONS, LSTM, space)


# --- images inside a Tuple / Dict -------------------------------------------------

# Two images of different sizes, channels and dtypes, and a vector.
IMAGES_OBS = gym.spaces.Dict({
    'camera': gym.spaces.Box(0, 255, (24, 20, 3), np.uint8),
    'depth': gym.spaces.Box(0.0, 1.0, (36, 40, 1), np.float32),
    'speed': gym.spaces.Box(-1.0, 1.0, (5,), np.float32),
})


def _features(torso, observation_space, seed=0):
    rng = np.random.RandomState(seed)
    return torso(_random_observation(observation_space, (B,), rng))


@pytest.mark.parametrize('kind, image_size', [('simple', 128), ('auto', 512),
                                              ('nature_cnn', 512)])
def test_images_in_a_dict_each_get_their_own_torso(kind, image_size):
    space = IMAGES_OBS if kind == 'simple' else gym.spaces.Dict({
        'camera': gym.spaces.Box(0, 255, (36, 44, 3), np.uint8),
        'depth': gym.spaces.Box(0.0, 1.0, (40, 36, 1), np.float32),
        'speed': IMAGES_OBS['speed']})
    torso = observations.ObservationTorso(space, kind, hidden_sizes=HIDDEN)
    assert torso.nested and torso.kind == torsos.resolve_kind(kind, 3)
    # Members in tf.nest order (sorted keys): camera, depth are images; speed a vector.
    assert [i for i, _ in torso.image_nets] == [0, 1]
    assert [type(net) for _, net in torso.image_nets] == [
        torsos.SimpleVisualEncoder if kind == 'simple' else torsos.NatureCNN] * 2
    assert torso.image_nets[0][1] is not torso.image_nets[1][1]
    out = _features(torso, space)
    assert out.shape.as_list() == [B, 2 * image_size + HIDDEN[-1]]
    # The features are the images' encodings, then the MLP over the vectors.
    rng = np.random.RandomState(0)
    observation = _random_observation(space, (B,), rng)
    expected = tf.concat([torso.image_nets[0][1](observation['camera']),
                          torso.image_nets[1][1](observation['depth']),
                          torso.net(observation['speed'])], -1)
    np.testing.assert_allclose(torso(observation).numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize('lstm_size', [LSTM, 0])
def test_core_over_images_and_a_vector_unrolls(lstm_size):
    core = ActorCriticCore(IMAGES_OBS, ActionSpace(TUPLE_ACTIONS), torso='simple',
                           hidden_sizes=HIDDEN, lstm_size=lstm_size, name='core')
    core.create_variables()
    inputs = _random_inputs(core, IMAGES_OBS, (T, B), seed=21, first=FIRST)
    state = core.initial_state(B)
    unrolled, _ = core.unroll(inputs, state)
    assert [p.shape.as_list() for p in unrolled.policy_params] == [[T, B, 3], [T, B, 4]]
    # Torso features: two 128-wide image encodings and the MLP's 8; + previous step 3 + 2 + 1.
    embedded, _ = core._embed(tf.nest.map_structure(
        lambda x: tf.reshape(x, [T * B, *x.shape[2:]]), inputs))
    assert embedded.shape.as_list() == [T * B, 128 + 128 + HIDDEN[-1] + 6]
    assert core.features_size == (lstm_size or embedded.shape[-1])
    stepped, _ = _step_loop(core, inputs, state)
    _assert_close(unrolled, stepped, atol=1e-4)
    names = {v.name for v in core.variables}
    assert {'core/observation_torso/image_torso_0/conv_0/w:0',
            'core/observation_torso/image_torso_1/linear/w:0',
            'core/observation_torso/mlp/linear_0/w:0'} <= names
    # Each image reaches the outputs.
    for key in ('camera', 'depth'):
        changed = inputs._replace(observation={
            **inputs.observation, key: tf.cast(
                255 - tf.cast(inputs.observation[key], tf.int32), inputs.observation[key].dtype)
            if inputs.observation[key].dtype == tf.uint8 else -inputs.observation[key]})
        other, _ = core.unroll(changed, state)
        assert not np.allclose(other.baseline.numpy(), unrolled.baseline.numpy())


def test_tuple_of_image_and_discrete_and_images_only():
    space = gym.spaces.Tuple((gym.spaces.Box(0, 255, (20, 20, 3), np.uint8),
                              gym.spaces.Discrete(2)))
    torso = observations.ObservationTorso(space, 'simple', hidden_sizes=HIDDEN)
    assert _features(torso, space).shape.as_list() == [B, 128 + HIDDEN[-1]]
    only_images = gym.spaces.Tuple((space[0], gym.spaces.Box(0.0, 1.0, (21, 30, 2), np.float32)))
    torso = observations.ObservationTorso(only_images, 'simple', hidden_sizes=HIDDEN)
    assert torso.net is None
    assert _features(torso, only_images).shape.as_list() == [B, 2 * 128]


def test_auto_gives_each_image_of_a_nest_the_torso_its_size_takes():
    space = gym.spaces.Tuple((gym.spaces.Box(0, 255, (10, 10, 4), np.uint8),
                              gym.spaces.Box(0, 255, (36, 40, 2), np.uint8),
                              gym.spaces.Discrete(2)))
    torso = observations.ObservationTorso(space, 'auto', hidden_sizes=HIDDEN)
    assert [type(net).__name__ for _, net in torso.image_nets] == ['MinAtarCNN', 'NatureCNN']
    assert torso.kind == 'minatar'
    assert _features(torso, space).shape.as_list() == [B, 128 + 512 + HIDDEN[-1]]


def test_mlp_torso_flattens_images_inside_a_nest():
    torso = observations.ObservationTorso(IMAGES_OBS, 'mlp', hidden_sizes=HIDDEN)
    assert torso.kind == 'mlp' and torso.image_nets == ()
    assert _features(torso, IMAGES_OBS).shape.as_list() == [B, HIDDEN[-1]]
    assert torso.net.layers[0].w.shape[0] == 24 * 20 * 3 + 36 * 40 + 5


@pytest.mark.parametrize('space, kind, match', [
    (gym.spaces.Tuple((gym.spaces.Box(0, 255, (20, 20, 3), np.uint8), gym.spaces.Discrete(2))),
     'nature', r"observation\[0\] \(20, 20, 3\): torso 'nature_cnn' needs images of at least "
               r"36x36"),
    (IMAGES_OBS, 'nature_cnn', r"observation\['camera'\] \(24, 20, 3\)"),
    (gym.spaces.Box(0, 255, (19, 40, 3), np.uint8), 'simple', r"at least 20x20.*got 19x40"),
    (DICT_OBS, 'simple', 'needs an image observation'),
], ids=['tuple-nature', 'dict-nature', 'single-simple', 'no-image'])
def test_images_a_torso_cannot_take_are_one_clear_line(space, kind, match):
    with pytest.raises(UnsupportedSpaceError, match=match) as info:
        ActorCriticCore(space, ActionSpace(DISCRETE_ACTIONS), torso=kind, lstm_size=LSTM)
    assert '\n' not in str(info.value)


def test_observation_spec_of_images_and_a_vector():
    assert observations.observation_spec(IMAGES_OBS) == {
        'camera': tf.TensorSpec([24, 20, 3], tf.uint8),
        'depth': tf.TensorSpec([36, 40, 1], tf.float32),
        'speed': tf.TensorSpec([5], tf.float32)}
    converted = observations.to_numpy(IMAGES_OBS, {
        'camera': np.full([B, 24, 20, 3], 9, np.int64),
        'depth': np.zeros([B, 36, 40, 1], np.float64),
        'speed': np.zeros([B, 5], np.float64)})
    assert {k: (v.dtype, v.shape) for k, v in converted.items()} == {
        'camera': (np.uint8, (B, 24, 20, 3)), 'depth': (np.float32, (B, 36, 40, 1)),
        'speed': (np.float32, (B, 5))}


def test_critics_encode_images_and_vectors():
    critics = CriticEnsemble(IMAGES_OBS, num_replicas=2, hidden_sizes=(8,), num_outputs=3,
                             torso='simple')
    observation = _random_observation(IMAGES_OBS, (B,), np.random.RandomState(0))
    assert critics(observation, tf.zeros([B, 0])).shape.as_list() == [2, B, 3]


def test_critics_memory_restarts_at_first_and_passes_no_gradient_to_the_burn_in():
    """`remember` over 7 steps with 2 of burn-in: the same outputs as without burn-in
    (it holds back gradients, not values); from a `first` step on, a row's outputs are
    those of the sequence that starts there; no gradient reaches the burn-in's inputs."""
    critics = CriticEnsemble(CARTPOLE_OBS, num_replicas=2, hidden_sizes=(8,), num_outputs=1,
                             memory_size=5)
    observation = tf.constant(np.random.RandomState(0).normal(size=[7, 2, 4]), tf.float32)
    first = np.zeros([7, 2], bool)
    first[0], first[4, 0] = True, True
    with tf.GradientTape() as tape:
        tape.watch(observation)
        out = critics.remember(observation, tf.constant(first), burn_in=2)
        total = tf.reduce_sum(out)
    assert out.shape.as_list() == [5, 2, 5]
    np.testing.assert_allclose(out, critics.remember(observation, tf.constant(first), 0)[2:],
                               rtol=1e-6)
    restart = np.zeros([3, 2], bool)
    restart[0] = True
    fresh = critics.remember(observation[4:], tf.constant(restart), 0)
    np.testing.assert_allclose(out[2:, 0], fresh[:, 0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(out[2:, 1], fresh[:, 1], atol=1e-4)  # row 1 carries its state
    gradient = np.abs(tape.gradient(total, observation).numpy()).sum(axis=(1, 2))
    assert np.all(gradient[:2] == 0) and np.all(gradient[2:] > 0), gradient


def test_unsupported_action_space_in_core():
    with pytest.raises(UnsupportedSpaceError, match='Text'):
        ActorCriticCore(CARTPOLE_OBS, ActionSpace(gym.spaces.Text(5)))


# --- the previous reward's transform ------------------------------------------------

REWARDS = [-400.0, -50.0, -7.5, -1.5, -1.0, -0.3, 0.0, 0.2, 1.0, 1.7, 12.0, 400.0]


@pytest.mark.parametrize('mode', REWARD_CLIPPINGS)
@pytest.mark.parametrize('scaling', [1.0, 0.1, 3.0])
def test_transform_reward_is_the_learners(mode, scaling):
    """networks may not import agents: the core's copy must compute what the learner's does."""
    assert REWARD_CLIPPINGS == returns.REWARD_CLIPPINGS
    r = tf.constant(REWARDS, tf.float32)
    np.testing.assert_allclose(transform_reward(r, scaling, mode).numpy(),
                               returns.transform_rewards(r, scaling, mode).numpy(), rtol=1e-6)


def _same_weights(source, target):
    assert [v.shape for v in source.variables] == [v.shape for v in target.variables]
    for s, t in zip(source.variables, target.variables):
        t.assign(s)


@pytest.mark.parametrize('reward_transform', [(1.0, 'none'), (0.1, 'abs_one'),
                                              (3.0, 'abs_one'), (2.0, 'soft_asymmetric')],
                         ids=lambda t: f'{t[0]}-{t[1]}')
@pytest.mark.parametrize('lstm_size', [LSTM, 0])
def test_reward_transform_equals_feeding_the_transformed_reward(reward_transform, lstm_size):
    space = ActionSpace(TUPLE_ACTIONS)
    transformed = ActorCriticCore(CARTPOLE_OBS, space, hidden_sizes=HIDDEN,
                                  lstm_size=lstm_size, reward_transform=reward_transform)
    raw = ActorCriticCore(CARTPOLE_OBS, space, hidden_sizes=HIDDEN, lstm_size=lstm_size)
    transformed.create_variables()
    raw.create_variables()
    _same_weights(transformed, raw)
    inputs = _random_inputs(transformed, CARTPOLE_OBS, (T, B), seed=30, first=FIRST)
    inputs = inputs._replace(prev_reward=inputs.prev_reward * 10.0)  # clipping matters
    by_hand = inputs._replace(prev_reward=returns.transform_rewards(
        inputs.prev_reward, *reward_transform))
    state = _random_state(transformed, seed=31)

    out, out_state = transformed.unroll(inputs, state)
    expected, expected_state = raw.unroll(by_hand, state)
    _assert_close((out, out_state), (expected, expected_state))
    stepped, _ = _step_loop(transformed, inputs, state)
    _assert_close(stepped, expected)
    untransformed, _ = raw.unroll(inputs, state)
    assert np.allclose(untransformed.baseline, out.baseline) == (reward_transform == (1.0, 'none'))


def test_reward_transform_defaults_to_raw_and_is_on_the_part():
    space = ActionSpace(DISCRETE_ACTIONS)
    assert ActorCriticCore(CARTPOLE_OBS, space).parts.previous_step.reward_transform is None
    core = ActorCriticCore(CARTPOLE_OBS, space, reward_transform=(2, 'abs_one'))
    assert core.parts.previous_step.reward_transform == (2.0, 'abs_one')


@pytest.mark.parametrize('reward_transform', [
    (1.0, 'abs_two'), (float('nan'), 'none'), 'abs_one', (1.0,), ('x', 'none')])
def test_a_bad_reward_transform_is_refused(reward_transform):
    with pytest.raises(ValueError, match='reward_transform'):
        ActorCriticCore(CARTPOLE_OBS, ActionSpace(DISCRETE_ACTIONS),
                        reward_transform=reward_transform)


# --- parts and variables -----------------------------------------------------------

def test_parts_follow_the_constructor_arguments():
    space = ActionSpace(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    full = ActorCriticCore(CARTPOLE_OBS, space, hidden_sizes=HIDDEN, lstm_size=LSTM,
                           num_q_values=3, advantage_hidden_sizes=(4,),
                           normalize_observations=True)
    assert all(part is not None for part in full.parts)
    assert isinstance(full.parts, CoreParts) and isinstance(full.parts.memory, LSTMMemory)
    bare = ActorCriticCore(CARTPOLE_OBS, space, hidden_sizes=HIDDEN, lstm_size=0,
                           condition_on_previous=False, baseline=False)
    assert [field for field, part in zip(CoreParts._fields, bare.parts) if part is not None] == [
        'torso', 'policy_head']
    assert not bare.recurrent and not bare.has_advantage_head


@pytest.mark.parametrize('observation_space', [CARTPOLE_OBS, MIXED_OBS,
                                               gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)],
                         ids=['vector', 'tuple', 'image'])
def test_create_variables_builds_every_variable(observation_space):
    space = ActionSpace(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    core = ActorCriticCore(observation_space, space, hidden_sizes=HIDDEN, lstm_size=LSTM,
                           num_q_values=2, advantage_hidden_sizes=(4,))
    core.create_variables()
    names = sorted(v.name for v in core.variables)
    # Using the core (including the advantage head) creates nothing new.
    out, _ = core.unroll(_random_inputs(core, observation_space, (T, B), seed=0, first=FIRST),
                         core.initial_state(B))
    core.advantage(tf.reshape(out.features, [T * B, -1]), tf.zeros([T * B, 2]))
    assert sorted(v.name for v in core.variables) == names
    assert core.features_size == LSTM


def test_variable_names_name_the_parts():
    """Learners and tests select variables by these names (e.g. ACER's 'baseline_head')."""
    space = ActionSpace(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    core = ActorCriticCore(CARTPOLE_OBS, space, hidden_sizes=HIDDEN, lstm_size=LSTM,
                           num_q_values=2, advantage_hidden_sizes=(4,),
                           normalize_observations=True, name='core')
    core.create_variables()
    names = {v.name for v in core.variables}
    assert {'core/policy_head/w:0', 'core/baseline_head/w:0', 'core/q_head/w:0',
            'core/advantage_head/linear_0/w:0', 'core/observation_normalizer/mean:0',
            'core/lstm/w_i:0', 'core/observation_torso/mlp/linear_0/w:0'} <= names
