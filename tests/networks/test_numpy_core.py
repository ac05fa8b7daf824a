"""The numpy acting path gives the Sonnet core's outputs."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from launch.training import create_variables
from networks.cores import ActorCriticCore, CoreInputs
from networks.distributions import ActionSpace
from networks.numpy_core import NumpyCore
from networks.observations import observation_spec

B = 5
OBS = gym.spaces.Box(-2, 2, (3,), np.float32)
ACTIONS = {
    'discrete': gym.spaces.Discrete(3),
    'tuple': gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,)))),
    'box': gym.spaces.Box(-1, 1, (2,)),
    # SAC's actor: tanh-squashed, no previous action / reward input.
    'squashed_tuple': gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-3, 3, (2,)))),
}


def build(action_space, lstm_size, name=''):
    squashed = name.startswith('squashed')
    space = ActionSpace(action_space, squash=squashed)
    core = ActorCriticCore(OBS, space, hidden_sizes=(16, 8), lstm_size=lstm_size,
                           condition_on_previous=not squashed, baseline=not squashed,
                           normalize_observations=squashed)
    create_variables(core, observation_spec(OBS), space)
    if squashed:  # statistics far from the unit prior
        core.update_normalizer(tf.constant(np.random.default_rng(2).normal(
            [1.0, -1.0, 0.0], [0.5, 2.0, 0.1], (50, 3)), tf.float32))
    # Non-trivial weights everywhere (the policy head starts near zero).
    rng = np.random.default_rng(1)
    for v in core.trainable_variables:
        v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    return core, space


def random_inputs(space, rng, first):
    obs = rng.uniform(-2, 2, (B, 3)).astype(np.float32)
    prev_action = tuple(
        rng.integers(0, l.size, B).astype(np.int32) if l.kind == 'categorical'
        else rng.normal(size=(B, l.size)).astype(np.float32) for l in space.leaves)
    return obs, prev_action, rng.normal(size=B).astype(np.float32), first


@pytest.mark.parametrize('lstm_size', [6, 0])
@pytest.mark.parametrize('name', sorted(ACTIONS))
def test_numpy_step_matches_sonnet_core(name, lstm_size):
    core, space = build(ACTIONS[name], lstm_size, name)
    numpy_core = NumpyCore(core, space, seed=0)
    rng = np.random.default_rng(0)
    np_state = numpy_core.initial_state(B)
    tf_state = core.initial_state(B)
    for t in range(4):
        first = np.array([t == 0, False, t == 2, False, t == 3])
        obs, prev_action, prev_reward, first = random_inputs(space, rng, first)
        action, params, log_prob, baseline, np_state = numpy_core.step(
            obs, prev_action, prev_reward, first, np_state)
        out, tf_state = core(CoreInputs(obs, prev_action, prev_reward, first), tf_state)
        for p_np, p_tf in zip(params, out.policy_params):
            np.testing.assert_allclose(p_np, p_tf.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(baseline, out.baseline.numpy(), rtol=1e-4, atol=1e-5)
        # The log-probability is the TF distribution's, at the sampled action (away
        # from tanh saturation, where atanh of a stored action loses the sample).
        rows = np.ones(B, bool)
        for a, leaf in zip(action, space.leaves):
            if leaf.kind == 'tanh_gaussian':
                rows &= np.all(np.abs(a) < 0.99, axis=-1)
        np.testing.assert_allclose(
            log_prob[rows], space.log_prob(out.policy_params, action).numpy()[rows],
            rtol=1e-4, atol=1e-4)
        for a, spec in zip(action, space.action_specs()):
            assert a.dtype == spec.dtype.as_numpy_dtype and a.shape == (B, *spec.shape)
        tf.nest.map_structure(
            lambda x, y: np.testing.assert_allclose(x, y.numpy(), rtol=1e-4, atol=1e-5),
            np_state, tf_state)


def test_refresh_picks_up_new_weights():
    core, space = build(ACTIONS['discrete'], 4)
    numpy_core = NumpyCore(core, space, seed=0)
    inputs = random_inputs(space, np.random.default_rng(0), np.zeros(B, bool))
    before = numpy_core.step(*inputs, numpy_core.initial_state(B))[3]
    for v in core.variables:
        v.assign(v + 0.1)
    numpy_core.refresh()
    after = numpy_core.step(*inputs, numpy_core.initial_state(B))[3]
    out, _ = core(CoreInputs(*inputs), core.initial_state(B))
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, out.baseline.numpy(), rtol=1e-4, atol=1e-5)


def test_deterministic_takes_the_mode_and_sampling_follows_softmax():
    core, space = build(gym.spaces.Discrete(3), 0)
    inputs = random_inputs(space, np.random.default_rng(0), np.zeros(B, bool))
    greedy = NumpyCore(core, space, seed=0, deterministic=True)
    action, params, *_ = greedy.step(*inputs, ())
    np.testing.assert_array_equal(action[0], params[0].argmax(-1))
    sampler = NumpyCore(core, space, seed=0)
    counts = np.zeros((B, 3))
    for _ in range(4000):
        a = sampler.step(*inputs, ())[0][0]
        counts[np.arange(B), a] += 1
    probs = tf.nn.softmax(params[0]).numpy()
    np.testing.assert_allclose(counts / 4000, probs, atol=0.03)


def test_image_cores_are_not_supported():
    space = ActionSpace(gym.spaces.Discrete(2))
    image = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    core = ActorCriticCore(image, space, lstm_size=4)
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match='vector observation'):
        NumpyCore(core, space, seed=0)
