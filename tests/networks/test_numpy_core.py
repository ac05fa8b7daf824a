"""The numpy acting path gives the Sonnet core's outputs."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.networks import numpy_core as numpy_core_lib
from reverb_agents.networks import observations
from reverb_agents.networks.cores import (
    REWARD_CLIPPINGS, ActorCriticCore, BaselineHead, CoreInputs, transform_reward)
from reverb_agents.networks.distributions import ActionSpace, Gaussian, TanhGaussian
from reverb_agents.networks.numpy_core import NumpyCore

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
    'box_standardized': (gym.spaces.Box(-1, 1, (2,)),
                         dict(normalize_observations=True, observation_map='standardize')),
    # ACER's cores: the Q and advantage heads are not used when acting.
    'discrete_q': (gym.spaces.Discrete(3), dict(num_q_values=3)),
    'box_advantage': (gym.spaces.Box(-1, 1, (2,)), dict(advantage_hidden_sizes=(4,))),
    # The previous reward scaled and clipped as the learner sees it (rewards here are
    # N(0, 3^2): the clipping matters).
    'discrete_reward_abs_one': (gym.spaces.Discrete(3), dict(reward_transform=(0.5, 'abs_one'))),
    'tuple_reward_soft_asymmetric': (
        gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,)))),
        dict(reward_transform=(4.0, 'soft_asymmetric'))),
    'box_reward_none': (gym.spaces.Box(-1, 1, (2,)), dict(reward_transform=(0.1, 'none'))),
}


def build(action_space, lstm_size, name='', observation_space=OBS, fan_in_scaled=False,
          **core_kwargs):
    squashed = name.startswith('squashed')
    space = ActionSpace(action_space, squash=squashed)
    core = ActorCriticCore(observation_space, space, hidden_sizes=(16, 8), lstm_size=lstm_size,
                           **core_kwargs)
    core.create_variables()
    if core_kwargs.get('normalize_observations'):  # statistics far from the unit prior
        core.update_normalizer(tf.constant(np.random.default_rng(2).normal(
            [1.0, -1.0, 0.0], [0.5, 2.0, 0.1], (50, 3)), tf.float32))
    # Non-trivial weights everywhere (the policy head starts near zero). `fan_in_scaled`:
    # weights of std 1/sqrt(fan in) at most, so wide inputs (images) keep features of
    # order 1 (large ones make float32 sums, in another order, differ by more than the
    # tolerances, and the log-density of a wide Gaussian sample lose precision).
    rng = np.random.default_rng(1)
    for v in core.trainable_variables:
        std = 0.5
        if fan_in_scaled and len(v.shape) >= 2:
            std = min(std, 1.0 / np.sqrt(np.prod(v.shape[:-1])))
        v.assign(rng.normal(0, std, v.shape).astype(np.float32))
    return core, space


def random_observation(observation_space, rng):
    """A batch `[B, ...]` of observations, in `observation_spec`'s dtypes."""
    def leaf(space):
        if isinstance(space, gym.spaces.Discrete):
            return rng.integers(space.start, space.start + space.n, B)
        if isinstance(space, gym.spaces.MultiDiscrete):
            return rng.integers(0, space.nvec, (B, *space.shape))
        if isinstance(space, gym.spaces.MultiBinary):
            return rng.integers(0, 2, (B, *space.shape))
        if space.dtype == np.uint8:
            return rng.integers(0, 256, (B, *space.shape))
        return rng.uniform(-2, 2, (B, *space.shape))

    nest = observations._space_nest(observation_space)
    return observations.to_numpy(observation_space, tf.nest.map_structure(leaf, nest))


def random_inputs(space, rng, first, observation_space=OBS):
    obs = random_observation(observation_space, rng)
    prev_action = tuple(
        rng.integers(0, l.size, B).astype(np.int32) if l.discrete
        else rng.normal(size=(B, l.size)).astype(np.float32) for l in space.leaves)
    return obs, prev_action, rng.normal(0, 3, size=B).astype(np.float32), first


def assert_numpy_matches_sonnet(core, space, observation_space=OBS, steps=4):
    """Steps both cores side by side; outputs, log-probabilities and states agree."""
    numpy_core = NumpyCore(core, space, seed=0)
    rng = np.random.default_rng(0)
    np_state = numpy_core.initial_state(B)
    tf_state = core.initial_state(B)
    for t in range(steps):
        first = np.array([t == 0, False, t == 2, False, t == 3])
        obs, prev_action, prev_reward, first = random_inputs(space, rng, first,
                                                             observation_space)
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


@pytest.mark.parametrize('lstm_size', [6, 0])
@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_numpy_step_matches_sonnet_core(name, lstm_size):
    action_space, core_kwargs = CONFIGS[name]
    core, space = build(action_space, lstm_size, name, **core_kwargs)
    assert NumpyCore.supports(core)
    assert_numpy_matches_sonnet(core, space)


def test_numpy_step_matches_sonnet_core_with_memory_skip():
    core, space = build(gym.spaces.Discrete(3), 6, memory_skip=True)
    assert NumpyCore.supports(core) and core.memory_skip
    assert_numpy_matches_sonnet(core, space)


@pytest.mark.parametrize('action_space', [gym.spaces.Discrete(3),
                                          gym.spaces.Box(-1, 1, (2,), np.float32)])
def test_numpy_step_matches_sonnet_core_with_policy_hidden_layers(action_space):
    core, space = build(action_space, 6, memory_skip=True, policy_hidden_sizes=(5, 4))
    assert NumpyCore.supports(core)
    assert [l.w.shape.as_list() for l in core.parts.policy_head.hidden.layers] == [
        [core.features_size, 5], [5, 4]]
    assert_numpy_matches_sonnet(core, space)


@pytest.mark.parametrize('mode', REWARD_CLIPPINGS)
@pytest.mark.parametrize('scaling', [1.0, 0.3, 5.0])
def test_numpy_reward_transform_is_the_cores(mode, scaling):
    r = np.array([-400, -50, -7.5, -1.5, -1, -0.3, 0, 0.2, 1, 1.7, 12, 400], np.float32)
    np.testing.assert_allclose(numpy_core_lib._transform_reward(r, scaling, mode),
                               transform_reward(tf.constant(r), scaling, mode).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_the_mirror_reads_the_reward_transform_from_the_part():
    core, space = build(gym.spaces.Discrete(3), 0, reward_transform=(0.5, 'abs_one'))
    numpy_core = NumpyCore(core, space, seed=0)
    inputs = random_inputs(space, np.random.default_rng(0), np.zeros(B, bool))
    before = numpy_core.step(*inputs, ())[3]
    # The mirror holds no copy of its own: changing the part changes both cores alike.
    core.parts.previous_step.reward_transform = (3.0, 'soft_asymmetric')
    after = numpy_core.step(*inputs, ())[3]
    out, _ = core(CoreInputs(*inputs), ())
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, out.baseline.numpy(), rtol=1e-4, atol=1e-5)


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


IMAGES_OBS = gym.spaces.Dict({
    'camera': gym.spaces.Box(0, 255, (24, 20, 3), np.uint8),
    'depth': gym.spaces.Box(-1.0, 1.0, (36, 40, 1), np.float32),
    'speed': gym.spaces.Box(-1.0, 1.0, (5,), np.float32),
})
# id -> (observation space, torso, acting goes through the mirror: NumpyCore.supports)
OBSERVATION_CASES = {
    'dict_two_images_and_vector': (IMAGES_OBS, 'simple', False),
    'dict_two_images_and_vector_nature': (gym.spaces.Dict({
        'a': gym.spaces.Box(0, 255, (36, 36, 2), np.uint8),
        'b': gym.spaces.Box(0, 255, (40, 37, 3), np.uint8),
        'c': gym.spaces.Discrete(3, start=1)}), 'auto', False),
    'tuple_images_only': (gym.spaces.Tuple((IMAGES_OBS['camera'], IMAGES_OBS['depth'])),
                          'simple', False),
    'simple_image': (gym.spaces.Box(0, 255, (21, 25, 4), np.uint8), 'simple', False),
    'nature_image': (gym.spaces.Box(-1.0, 1.0, (36, 38, 2), np.float32), 'nature_cnn', False),
    'minatar_image': (gym.spaces.Box(0, 255, (10, 10, 4), np.uint8), 'auto', False),
    'image_as_mlp': (gym.spaces.Box(-1.0, 1.0, (6, 5, 2), np.float32), 'mlp', True),
    'dict_of_vectors': (gym.spaces.Dict({'b': gym.spaces.Discrete(2), 'a': OBS}), 'auto', True),
    'tuple_mixed': (gym.spaces.Tuple((
        gym.spaces.Discrete(4), gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32),
        gym.spaces.MultiBinary(3), gym.spaces.MultiDiscrete([2, 3]))), 'auto', True),
    'discrete': (gym.spaces.Discrete(4, start=-1), 'auto', True),
    'multi_binary': (gym.spaces.MultiBinary(5), 'auto', True),
}


@pytest.mark.parametrize('lstm_size', [6, 0])
@pytest.mark.parametrize('case', sorted(OBSERVATION_CASES))
def test_numpy_torso_matches_sonnet_core(case, lstm_size):
    observation_space, torso, acts_through_mirror = OBSERVATION_CASES[case]
    core, space = build(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,)))),
                        lstm_size, observation_space=observation_space, torso=torso,
                        fan_in_scaled=True, reward_transform=(0.5, 'abs_one'))
    assert NumpyCore.supports(core) == acts_through_mirror
    assert_numpy_matches_sonnet(core, space, observation_space, steps=3)


def test_images_and_a_vector_give_the_torsos_features():
    core, space = build(gym.spaces.Discrete(2), 4, observation_space=IMAGES_OBS, torso='simple',
                        fan_in_scaled=True)
    mirror = NumpyCore(core, space, seed=0)
    obs = random_observation(IMAGES_OBS, np.random.default_rng(3))
    features = mirror._torso(obs)
    assert features.shape == (B, 128 + 128 + 8)
    np.testing.assert_allclose(features, core.parts.torso(obs).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('observation_space, torso, message', [
    (gym.spaces.Box(0, 255, (36, 36, 3), np.uint8), 'impala_resnet',
     'no mirror of a impala_resnet torso'),
    (gym.spaces.Dict({'image': gym.spaces.Box(0, 255, (16, 16, 3), np.uint8), 'b': OBS}),
     'impala_resnet', 'no mirror of a impala_resnet torso'),
], ids=['impala_resnet', 'dict_impala_resnet'])
def test_a_torso_without_a_mirror_is_refused_by_name(observation_space, torso, message):
    space = ActionSpace(gym.spaces.Discrete(2))
    core = ActorCriticCore(observation_space, space, torso=torso, lstm_size=4)
    core.create_variables()
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match=message):
        NumpyCore(core, space, seed=0)


def test_a_torso_net_of_another_activation_is_refused_by_name():
    core, space = build(gym.spaces.Discrete(2), 0)
    core.parts.torso.net._activation = tf.tanh
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match='no mirror of an mlp torso with activation'):
        NumpyCore(core, space, seed=0)


def test_a_part_of_another_type_is_refused_by_name():
    class ScaledBaseline(BaselineHead):
        """A subclass may compute something else: the mirror must not assume it does not."""

        def __call__(self, features, task=None):
            return 2.0 * super().__call__(features, task)

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
