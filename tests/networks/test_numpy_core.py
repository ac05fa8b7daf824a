"""The numpy acting path gives the Sonnet core's outputs."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from networks.cores import ActorCriticCore, BaselineHead, CoreInputs
from networks.distributions import ActionSpace, Gaussian, TanhGaussian
from networks.numpy_core import NumpyCore

B = 5
OBS = gym.spaces.Box(-2, 2, (3,), np.float32)
# name -> (action space, ActorCriticCore keyword arguments); names starting with
# 'squashed' use tanh-squashed Gaussians. Together they cover every part and
# action leaf class the mirror knows.
CONFIGS = {
    'discrete': (gym.spaces.Discrete(3), {}),
    'tuple': (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,)))), {}),
    'box': (gym.spaces.Box(-1, 1, (2,)), {}),
    # SAC's actor: tanh-squashed, no previous action / reward input, no baseline.
    'squashed_tuple': (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-3, 3, (2,)))),
                       dict(condition_on_previous=False, baseline=False,
                            normalize_observations=True)),
    'squashed_box_conditioned': (gym.spaces.Box(-3, 3, (2,)),
                                 dict(normalize_observations=True)),
    # ACER's cores: the Q and advantage heads are not used when acting.
    'discrete_q': (gym.spaces.Discrete(3), dict(num_q_values=3)),
    'box_advantage': (gym.spaces.Box(-1, 1, (2,)), dict(advantage_hidden_sizes=(4,))),
}


def build(action_space, lstm_size, name='', **core_kwargs):
    squashed = name.startswith('squashed')
    space = ActionSpace(action_space, squash=squashed)
    core = ActorCriticCore(OBS, space, hidden_sizes=(16, 8), lstm_size=lstm_size,
                           **core_kwargs)
    core.create_variables()
    if core_kwargs.get('normalize_observations'):  # statistics far from the unit prior
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
        rng.integers(0, l.size, B).astype(np.int32) if l.discrete
        else rng.normal(size=(B, l.size)).astype(np.float32) for l in space.leaves)
    return obs, prev_action, rng.normal(size=B).astype(np.float32), first


@pytest.mark.parametrize('lstm_size', [6, 0])
@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_numpy_step_matches_sonnet_core(name, lstm_size):
    action_space, core_kwargs = CONFIGS[name]
    core, space = build(action_space, lstm_size, name, **core_kwargs)
    assert NumpyCore.supports(core)
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
            if isinstance(leaf, TanhGaussian):
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
    core, space = build(CONFIGS['discrete'][0], 4)
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


@pytest.mark.parametrize('observation_space, torso, message', [
    (gym.spaces.Box(0, 255, (36, 36, 3), np.uint8), 'auto', 'no mirror of a nature_cnn torso'),
    (gym.spaces.Box(0, 255, (36, 36, 3), np.uint8), 'impala_resnet',
     'no mirror of a impala_resnet torso'),
    (gym.spaces.Dict({'a': gym.spaces.Discrete(2), 'b': OBS}), 'auto',
     'no mirror of a torso over a Dict observation space'),
    (gym.spaces.Discrete(4), 'auto', 'no mirror of a torso over a Discrete observation space'),
], ids=['nature_cnn', 'impala_resnet', 'dict', 'discrete'])
def test_a_torso_without_a_mirror_is_refused_by_name(observation_space, torso, message):
    space = ActionSpace(gym.spaces.Discrete(2))
    core = ActorCriticCore(observation_space, space, torso=torso, lstm_size=4)
    core.create_variables()
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match=message):
        NumpyCore(core, space, seed=0)


def test_a_part_of_another_type_is_refused_by_name():
    class ScaledBaseline(BaselineHead):
        """A subclass may compute something else: the mirror must not assume it does not."""

        def __call__(self, features):
            return 2.0 * super().__call__(features)

    core, space = build(CONFIGS['discrete'][0], 4)
    core._baseline_head = ScaledBaseline()
    core.create_variables()
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match='no mirror of the baseline_head part ScaledBaseline'):
        NumpyCore(core, space, seed=0)


def test_an_action_leaf_class_without_a_mirror_is_refused_by_name():
    class ClippedGaussian(Gaussian):
        pass

    space = ActionSpace(gym.spaces.Box(-1, 1, (2,)))
    space.leaves = (ClippedGaussian(2),)
    core = ActorCriticCore(OBS, space, hidden_sizes=(8,), lstm_size=0)
    core.create_variables()
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match='no mirror of a ClippedGaussian action leaf'):
        NumpyCore(core, space, seed=0)


def test_another_action_space_than_the_cores_is_refused():
    core, _ = build(CONFIGS['discrete'][0], 0)
    with pytest.raises(ValueError, match='action leaves'):
        NumpyCore(core, ActionSpace(gym.spaces.Discrete(4)), seed=0)
