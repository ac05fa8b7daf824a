"""Networks of the user's own (`networks.user`, `networks.user_spec`): the config text,
the checks, and cores built with a Keras or Sonnet torso and a Keras or Sonnet memory
that step as they unroll and reset where `first` is true."""

import os
import re

import gymnasium as gym
import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from network_examples import my_networks
from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.networks import user, user_spec
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.numpy_core import NumpyCore

CARTPOLE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DICT = gym.spaces.Dict({'position': gym.spaces.Box(0.0, 1.0, (2,), np.float32),
                        'goal': gym.spaces.Discrete(5),
                        'action_mask': gym.spaces.MultiBinary(3)})


# --- the config text -------------------------------------------------------------

def test_kwargs_split_outside_brackets_and_read_literals():
    assert user_spec.parse_kwargs('x', 'units=64,sizes=(8, 8),act=relu,name="a,b"') == {
        'units': 64, 'sizes': (8, 8), 'act': 'relu', 'name': 'a,b'}
    assert user_spec.parse_kwargs('x', '') == {}
    with pytest.raises(ValueError, match='expected key=value'):
        user_spec.parse_kwargs('torso_kwargs', 'units')
    with pytest.raises(ValueError, match='given twice'):
        user_spec.parse_kwargs('torso_kwargs', 'a=1,a=2')


def test_a_dict_of_literals_round_trips_as_text():
    text = user_spec.format_kwargs('torso_kwargs', {'units': 32, 'sizes': (4, 4), 'act': 'tanh'})
    assert user_spec.parse_kwargs('torso_kwargs', text) == {'units': 32, 'sizes': (4, 4),
                                                           'act': 'tanh'}
    with pytest.raises(ValueError, match='Python literals'):
        user_spec.format_kwargs('torso_kwargs', {'activation': tf.nn.relu})


def test_config_takes_module_function_and_refuses_the_rest():
    config = configs.from_flat(CLEARConfig, dict(torso='network_examples.my_networks:mlp',
                                                 torso_kwargs='units=8'))
    assert config.network.core_options()['torso'] == 'network_examples.my_networks:mlp'
    for values, message in [
            (dict(torso='mlpp'), 'torso must be one of'),
            (dict(torso='my nets:f'), 'expected MODULE:FUNCTION'),
            (dict(torso_kwargs='units=8'), 'for a torso of your own'),
            (dict(memory='m:f', lstm_size=8), "takes the LSTM's place"),
            (dict(memory_kwargs='units=8'), 'for a memory of your own')]:
        with pytest.raises(ValueError, match=message):
            configs.from_flat(CLEARConfig, values)


def test_functions_are_named_by_module_and_the_rest_is_local():
    assert user.spec_of('torso', my_networks.mlp) == 'network_examples.my_networks:mlp'
    spec = user.spec_of('torso', lambda space: tf.keras.layers.Dense(4))
    assert spec == '<local>:lambda' and user_spec.is_local(spec)
    layer = user.resolve('torso', user.spec_of('torso', tf.keras.layers.Dense(4)))(CARTPOLE)
    assert isinstance(layer, tf.keras.layers.Dense)  # a copy of the object each call
    with pytest.raises(user.NetworkError, match='given to train'):
        user.resolve('torso', '<local>:never_registered')


# --- the parts ------------------------------------------------------------------------

def core_inputs(space, t, b, seed=0, first=None):
    rng = np.random.default_rng(seed)

    def leaf(s):
        if isinstance(s, gym.spaces.Discrete):
            return tf.constant(rng.integers(0, s.n, [t, b]), tf.int32)
        return tf.constant(rng.uniform(0, 1, [t, b, *s.shape]), tf.float32)

    observation = ({k: leaf(s) for k, s in space.spaces.items()}
                   if isinstance(space, gym.spaces.Dict) else leaf(space))
    if isinstance(space, gym.spaces.Dict):
        observation['action_mask'] = tf.ones([t, b, 3])
    first = np.zeros([t, b], bool) if first is None else first
    return CoreInputs(observation, (tf.constant(rng.integers(0, 3, [t, b]), tf.int32),),
                      tf.constant(rng.normal(size=[t, b]), tf.float32), tf.constant(first))


@pytest.mark.parametrize('torso, memory', [
    ('network_examples.my_networks:mlp', 'network_examples.my_networks:gru'),
    ('network_examples.my_networks:sonnet_mlp', 'tests.user_networks:sonnet_lstm'),
    ('network_examples.my_networks:mlp', 'tests.user_networks:stacked'),
])
def test_a_core_steps_as_it_unrolls_and_resets_at_first(torso, memory):
    """The step loop and the unroll agree; a row whose `first` is true at t starts
    again from the initial state, as a fresh core's first step."""
    core = ActorCriticCore(CARTPOLE, ActionSpace(gym.spaces.Discrete(3)), torso=torso,
                           memory=memory, lstm_size=0)
    core.create_variables()
    first = np.zeros([5, 2], bool)
    first[0] = True
    first[3, 1] = True
    inputs = core_inputs(CARTPOLE, 5, 2, first=first)
    state = core.initial_state(2)
    unrolled, final = core.unroll(inputs, state)
    stepped = []
    for t in range(5):
        out, state = core(tf.nest.map_structure(lambda x: x[t], inputs), state)
        stepped.append(out.policy_params[0])
    np.testing.assert_allclose(np.stack(stepped), unrolled.policy_params[0], rtol=1e-5,
                               atol=1e-6)
    tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                          final, state)
    # Row 1 restarted at t=3: its outputs from there are those of a fresh start.
    fresh, _ = core.unroll(tf.nest.map_structure(lambda x: x[3:, 1:], inputs),
                           core.initial_state(1))
    np.testing.assert_allclose(unrolled.policy_params[0][3:, 1:], fresh.policy_params[0],
                               rtol=1e-5, atol=1e-6)


def test_per_key_layers_see_their_key_without_the_mask():
    core = ActorCriticCore(DICT, ActionSpace(gym.spaces.Discrete(3)),
                           torso='network_examples.my_networks:per_key', torso_kwargs='units=4',
                           lstm_size=0)
    core.create_variables()
    torso = core.parts.torso
    assert sorted(torso._per_key) == ['goal', 'position']
    out = torso({'position': tf.zeros([2, 2]), 'goal': tf.zeros([2], tf.int32)})
    assert out.shape == (2, 64)  # the combiner's


def test_a_core_of_the_users_own_acts_through_tensorflow_and_says_why():
    core = ActorCriticCore(CARTPOLE, ActionSpace(gym.spaces.Discrete(2)),
                           torso='network_examples.my_networks:mlp', lstm_size=0)
    core.create_variables()
    assert not NumpyCore.supports(core)
    assert 'UserTorso' in NumpyCore.unsupported(core)
    rows = dict((part, kind) for part, kind, _ in core.describe())
    assert rows['torso'] == 'Sequential (network_examples.my_networks:mlp)'


def test_copies_have_layers_of_their_own():
    """Every core calls the factory again: the learner's copies never share variables."""
    make = lambda: ActorCriticCore(CARTPOLE, ActionSpace(gym.spaces.Discrete(2)),  # noqa: E731
                                   torso='network_examples.my_networks:mlp',
                                   memory='network_examples.my_networks:gru', lstm_size=0)
    a, b = make(), make()
    a.create_variables()
    b.create_variables()
    assert not {id(v) for v in a.variables} & {id(v) for v in b.variables}
    assert [v.shape for v in a.variables] == [v.shape for v in b.variables]


@pytest.mark.parametrize('spec, message', [
    ('tests.user_networks:NOT_A_FUNCTION', 'not a function'),
    ('tests.user_networks:raises', 'raised RuntimeError: no GPU for this torso'),
    ('tests.user_networks:not_a_layer', 'returned a str'),
    ('tests.user_networks:flat_output', r'got float32 of shape \[3\]'),
    ('tests.user_networks:integer_output', 'got int32'),
    ('tests.user_networks:no_variables', 'creates no trainable variable'),
    ('tests.user_networks:dropout', 'Dropout behaves differently'),
    ('tests.user_networks:regularized', 'regularizers'),
    ('no_such_module_here:f', 'cannot import no_such_module_here'),
])
def test_a_bad_torso_is_one_line(spec, message):
    with pytest.raises(user.NetworkError, match=message) as error:
        user.UserTorso(CARTPOLE, spec)
    assert '\n' not in str(error.value)


@pytest.mark.parametrize('spec, message', [
    ('tests.user_networks:rnn_layer', 'return its cell'),
    ('tests.user_networks:no_state', 'no state_size'),
])
def test_a_bad_memory_is_one_line(spec, message):
    with pytest.raises(user.NetworkError, match=message):
        user.UserMemory(spec)


def test_sonnet_objects_copy_before_they_have_variables():
    module = snt.nets.MLP([4])
    factory = user.resolve('torso', user.spec_of('torso', module))
    assert factory(CARTPOLE) is not module
    module(tf.zeros([1, 4]))
    with pytest.raises(ValueError, match='cannot be copied'):
        user.spec_of('torso', module)


def test_the_docs_examples_are_the_ones_the_tests_run():
    """Every Python block of docs/networks.md's worked examples is in
    network_examples/my_networks.py as it is shown."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, 'docs', 'networks.md')) as f:
        examples = f.read().split('## Worked examples', 1)[1]
    with open(os.path.join(root, 'network_examples', 'my_networks.py')) as f:
        source = f.read()
    blocks = re.findall(r'```python\n(.*?)```', examples, re.S)
    assert len(blocks) == 5
    for block in blocks:
        assert block in source, block


def test_a_compiled_models_optimizer_is_ignored_with_one_line(caplog):
    """Said once per process, however many copies the run builds."""
    for _ in range(3):
        user.UserTorso(CARTPOLE, 'tests.user_networks:compiled')
    said = [r for r in caplog.records if 'optimizer and loss are ignored' in r.getMessage()]
    assert len(said) == 1


def _loop_ops(function) -> set:
    return {op.type for op in function.graph.get_operations()} & {'While', 'StatelessWhile'}


@pytest.mark.parametrize('steps', [5, user.STATIC_UNROLL_MAX_STEPS + 1])
def test_the_traced_unroll_and_the_while_loop_agree(steps):
    """A length known when traced (up to STATIC_UNROLL_MAX_STEPS) unrolls as a Python
    loop, longer or unknown ones as a while loop; outputs, final state and gradients
    are the same either way."""
    memory = user.LSTMMemory(8)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=[steps, 3, 4]), tf.float32)
    first = np.zeros([steps, 3], bool)
    first[0] = True
    first[2, 1] = True
    first = tf.constant(first)
    memory.unroll(x[:1], first[:1], memory.initial_state(3))  # creates the variables

    def unroll(x, first):
        with tf.GradientTape() as tape:
            outputs, state = memory.unroll(x, first, memory.initial_state(3))
            loss = tf.reduce_sum(tf.square(outputs)) + tf.reduce_sum(state.cell)
        return outputs, state, tape.gradient(loss, memory.trainable_variables)

    known = tf.function(unroll).get_concrete_function(x, first)
    unknown = tf.function(unroll).get_concrete_function(
        tf.TensorSpec([None, 3, 4]), tf.TensorSpec([None, 3], tf.bool))
    assert bool(_loop_ops(known)) == (steps > user.STATIC_UNROLL_MAX_STEPS)
    assert _loop_ops(unknown)
    tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                          known(x, first), unknown(x, first))
