"""Action masks (`networks.observations.ACTION_MASK`): masked actions have probability 0
when acting (TF core and numpy mirror, sampled and greedy) and in the losses' terms."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import MASKED_LOGIT, ActionSpace, UnsupportedSpaceError
from reverb_agents.networks.numpy_core import NumpyCore
from reverb_agents.networks.observations import ACTION_MASK

N = 4
OBSERVATION = gym.spaces.Dict({'observation': gym.spaces.Box(-1, 1, (5,), np.float32),
                               ACTION_MASK: gym.spaces.MultiBinary(N)})
ACTIONS = ActionSpace(gym.spaces.Discrete(N))


def _core(lstm_size=8):
    core = ActorCriticCore(OBSERVATION, ACTIONS, hidden_sizes=(16,), lstm_size=lstm_size)
    core.create_variables()
    # The unmasked policy would pick action 3 almost always: the mask must overrule it.
    core.parts.policy_head.b.assign([0.0, 0.0, 0.0, 8.0])
    return core


def _inputs(batch, mask_row, rng):
    observation = {'observation': rng.uniform(-1, 1, (batch, 5)).astype(np.float32),
                   ACTION_MASK: np.tile(np.asarray(mask_row, np.float32), (batch, 1))}
    return observation, (np.zeros(batch, np.int32),), np.zeros(batch, np.float32), np.ones(
        batch, bool)


@pytest.mark.parametrize('mask_row', [[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0]])
def test_masked_actions_are_never_taken(mask_row):
    core, rng, batch = _core(), np.random.default_rng(0), 2000
    observation, prev_action, prev_reward, first = _inputs(batch, mask_row, rng)
    allowed = np.flatnonzero(mask_row)
    outputs, _ = core(CoreInputs(observation, prev_action, prev_reward, first),
                      core.initial_state(batch))
    sampled = ACTIONS.sample(outputs.policy_params)[0].numpy()
    greedy = ACTIONS.mode(outputs.policy_params)[0].numpy()
    assert set(sampled) == set(allowed) and set(greedy) <= set(allowed)
    for deterministic in (False, True):
        mirror = NumpyCore(core, ACTIONS, seed=1, deterministic=deterministic)
        actions, params, log_prob, _, _ = mirror.step(observation, prev_action, prev_reward,
                                                      first, mirror.initial_state(batch))
        assert set(actions[0]) <= set(allowed)
        assert np.isfinite(log_prob).all()
        np.testing.assert_allclose(params[0], outputs.policy_params[0].numpy(), atol=1e-5)
    uniform, uniform_log_prob = ACTIONS.sample_uniform(batch, rng, observation[ACTION_MASK])
    assert set(uniform[0]) == set(allowed)
    np.testing.assert_allclose(uniform_log_prob, -np.log(len(allowed)), rtol=1e-6)


def test_masked_probability_is_zero_and_entropy_is_over_allowed_actions():
    core, rng = _core(lstm_size=0), np.random.default_rng(1)
    mask_row = [1, 0, 1, 0]
    observation, prev_action, prev_reward, first = _inputs(6, mask_row, rng)
    # The learner's view: [T, B] sequences through `unroll`.
    inputs = tf.nest.map_structure(lambda x: tf.reshape(x, (2, 3) + x.shape[1:]),
                                   CoreInputs(observation, prev_action, prev_reward, first))
    outputs, _ = core.unroll(inputs, core.initial_state(3))
    logits = outputs.policy_params[0].numpy()  # [T, B, N]
    np.testing.assert_array_equal(logits[..., [1, 3]], MASKED_LOGIT)
    for action in range(N):
        log_prob = ACTIONS.log_prob(outputs.policy_params,
                                    (tf.fill([2, 3], action),)).numpy()
        if mask_row[action]:
            assert (log_prob > -10).all()
        else:
            np.testing.assert_array_equal(np.exp(log_prob), 0.0)
    # The entropy (and a KL) over the allowed actions only, by hand.
    allowed = logits[..., [0, 2]]
    p = np.exp(allowed - allowed.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(ACTIONS.entropy(outputs.policy_params).numpy(),
                               -(p * np.log(p)).sum(-1), rtol=1e-5)
    kl = ACTIONS.kl_divergence(outputs.policy_params, outputs.policy_params).numpy()
    np.testing.assert_allclose(kl, 0.0, atol=1e-6)
    # No gradient reaches the head through a masked action's logit.
    with tf.GradientTape() as tape:
        outputs, _ = core.unroll(inputs, core.initial_state(3))
        loss = -tf.reduce_sum(ACTIONS.entropy(outputs.policy_params))
    bias_grad = tape.gradient(loss, core.parts.policy_head.b).numpy()
    np.testing.assert_array_equal(bias_grad[[1, 3]], 0.0)
    assert np.abs(bias_grad[[0, 2]]).sum() > 0


def test_a_mask_of_the_wrong_length_or_continuous_actions_is_refused():
    wrong = gym.spaces.Dict({'observation': gym.spaces.Box(-1, 1, (5,), np.float32),
                             ACTION_MASK: gym.spaces.MultiBinary(N + 1)})
    with pytest.raises(UnsupportedSpaceError, match='mask has 5 entries'):
        ActorCriticCore(wrong, ACTIONS)
    with pytest.raises(UnsupportedSpaceError, match='purely discrete'):
        ActorCriticCore(OBSERVATION, ActionSpace(gym.spaces.Box(-1, 1, (2,), np.float32)))


def test_multidiscrete_masks_each_branch_with_its_own_slice():
    actions = ActionSpace(gym.spaces.MultiDiscrete([3, 2]))
    observation_space = gym.spaces.Dict({
        'observation': gym.spaces.Box(-1, 1, (5,), np.float32),
        ACTION_MASK: gym.spaces.MultiBinary(5)})  # 3 + 2 entries, branches concatenated
    core = ActorCriticCore(observation_space, actions, hidden_sizes=(16,), lstm_size=0)
    core.create_variables()
    core.parts.policy_head.b.assign([0.0, 0.0, 8.0, 0.0, 8.0])  # would pick 2 and 1
    rng, batch = np.random.default_rng(2), 1000
    mask = np.tile(np.array([1, 1, 0, 1, 0], np.float32), (batch, 1))
    observation = {'observation': rng.uniform(-1, 1, (batch, 5)).astype(np.float32),
                   ACTION_MASK: mask}
    prev_action = tuple(np.zeros(batch, np.int32) for _ in range(2))
    outputs, _ = core(CoreInputs(observation, prev_action, np.zeros(batch, np.float32),
                                 np.ones(batch, bool)), ())
    first, second = (tf.nn.softmax(p).numpy() for p in outputs.policy_params)
    np.testing.assert_array_equal(first[:, 2], 0.0)
    np.testing.assert_array_equal(second[:, 1], 0.0)
    np.testing.assert_allclose(second[:, 0], 1.0)
    np.testing.assert_allclose(first[:, :2].sum(-1), 1.0, rtol=1e-6)
    sampled = [a.numpy() for a in actions.sample(outputs.policy_params)]
    assert set(sampled[0]) == {0, 1} and set(sampled[1]) == {0}
    mirror = NumpyCore(core, actions, seed=0, deterministic=False)
    taken, _, log_prob, _, _ = mirror.step(observation, prev_action,
                                           np.zeros(batch, np.float32), np.ones(batch, bool), ())
    assert set(taken[0]) == {0, 1} and set(taken[1]) == {0} and np.isfinite(log_prob).all()
    uniform, _ = actions.sample_uniform(batch, rng, mask)
    assert set(uniform[0]) == {0, 1} and set(uniform[1]) == {0}
    wrong = gym.spaces.Dict({'observation': gym.spaces.Box(-1, 1, (5,), np.float32),
                             ACTION_MASK: gym.spaces.MultiBinary(3)})  # one branch's width
    with pytest.raises(UnsupportedSpaceError, match='mask has 3 entries'):
        ActorCriticCore(wrong, actions)
