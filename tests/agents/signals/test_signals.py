"""Reward signals: ICM, GAIL, behavioural cloning and per-component targets, against
numpy written here."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import vtrace
from reverb_agents.agents.signals import demos, losses
from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.agents.signals.models import ICM
from reverb_agents.agents.signals.signals import RewardSignals
from reverb_agents.networks.distributions import ActionSpace
from tests.learners import numpy_discounted_returns

OBS_SPACE = gym.spaces.Box(np.array([-1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32))
ACTIONS = ActionSpace(gym.spaces.Discrete(3))


def _relu(x):
    return np.maximum(x, 0.0)


def _linear(layer, x):
    return x @ layer.w.numpy() + layer.b.numpy()


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_icm_losses_follow_its_networks_written_in_numpy():
    tf.random.set_seed(3)
    icm = ICM(OBS_SPACE, ACTIONS, encoding_size=4, hidden_size=5)
    rng = np.random.default_rng(0)
    obs = rng.uniform(OBS_SPACE.low, OBS_SPACE.high, (6, 2)).astype(np.float32)
    next_obs = rng.uniform(OBS_SPACE.low, OBS_SPACE.high, (6, 2)).astype(np.float32)
    action = rng.integers(0, 3, 6).astype(np.int32)
    forward, inverse = icm.losses(obs, (action,), next_obs)

    torso_layer = icm.encoder._layers[0]._net.layers[0]  # ObservationTorso's MLP
    encoding = icm.encoder._layers[1]

    def encode(x):  # scaled to [-1, 1] by the Box bounds, then Linear+relu, Linear
        scaled = 2 * (x - OBS_SPACE.low) / (OBS_SPACE.high - OBS_SPACE.low) - 1
        return _linear(encoding, _relu(_linear(torso_layer, scaled)))

    def mlp(net, x):
        first, second = net._layers  # snt.nets.MLP
        return _linear(second, _relu(_linear(first, x)))

    phi, phi_next = encode(obs), encode(next_obs)
    one_hot = np.eye(3)[action]
    predicted = mlp(icm.forward_model, np.concatenate([phi, one_hot], -1))
    expected_forward = 0.5 * ((predicted - phi_next) ** 2).sum(-1)
    logits = mlp(icm.inverse_model, np.concatenate([phi, phi_next], -1))
    expected_inverse = -_log_softmax(logits)[np.arange(6), action]
    np.testing.assert_allclose(forward.numpy(), expected_forward, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(inverse.numpy(), expected_inverse, rtol=1e-4, atol=1e-6)


def _signals(**overrides):
    config = SignalsConfig(**overrides)
    signals = RewardSignals(config, OBS_SPACE, ACTIONS)
    signals.create_variables(*demos.zeros_like_specs(OBS_SPACE, ACTIONS))
    return signals


def _time_major_batch(rng, T=4, B=8, low=-1.0, high=1.0):
    observation = rng.uniform(low, high, (T + 1, B, 2)).astype(np.float32)
    action = (rng.integers(0, 3, (T + 1, B)).astype(np.int32),)
    return observation, action, np.ones((T, B), np.float32)


def test_curiosity_rewards_fall_where_icm_has_learned_and_stay_high_elsewhere():
    tf.random.set_seed(0)
    signals = _signals(curiosity_strength=2.0, curiosity_learning_rate=3e-3)
    rng = np.random.default_rng(0)
    seen = _time_major_batch(rng)
    step = tf.function(signals.rewards_and_train)
    first_rewards, metrics = step(*seen)
    assert first_rewards.shape == (4, 8, 1)
    # The reward is the strength times the forward error, as the metric says.
    np.testing.assert_allclose(metrics['curiosity/reward'].numpy(),
                               first_rewards.numpy().mean(), rtol=1e-5)
    for _ in range(300):
        rewards, metrics = step(*seen)
    assert rewards.numpy().mean() < 0.3 * first_rewards.numpy().mean()
    unseen = _time_major_batch(np.random.default_rng(1), low=-3.0, high=3.0)
    novel, _ = step(*unseen)
    assert novel.numpy().mean() > 3 * rewards.numpy().mean()


def test_curiosity_strength_anneals_over_curiosity_steps():
    rng = np.random.default_rng(0)
    batch = _time_major_batch(rng)
    for step, strength in [(0, 2.0), (30, 0.5), (40, 0.0), (400, 0.0)]:
        signals = _signals(curiosity_strength=2.0, curiosity_steps=40)
        rewards, metrics = signals.rewards_and_train(*batch, step=tf.constant(step, tf.int64))
        # All steps real: the mean reward is the strength then times the forward error.
        np.testing.assert_allclose(rewards.numpy().mean(),
                                   strength * metrics['curiosity/forward_loss'].numpy(),
                                   rtol=1e-5, atol=1e-7)
    constant = _signals(curiosity_strength=2.0)
    rewards, metrics = constant.rewards_and_train(*batch, step=tf.constant(400, tf.int64))
    np.testing.assert_allclose(rewards.numpy().mean(),
                               2.0 * metrics['curiosity/forward_loss'].numpy(), rtol=1e-5)


def test_bounded_curiosity_caps_steps_at_a_multiple_of_the_running_rms():
    reward = tf.constant([0.5, 2.0, 40.0])
    np.testing.assert_allclose(  # RMS 2: at most 5 x 2 = 10
        losses.bounded_curiosity(reward, 5.0, tf.constant(4.0), tf.constant(3.0)),
        [0.5, 2.0, 10.0])
    for clip, updates in [(0.0, 3.0), (5.0, 0.0)]:  # off, or no RMS yet
        np.testing.assert_array_equal(losses.bounded_curiosity(
            reward, clip, tf.constant(4.0), tf.constant(updates)), reward.numpy())


def test_one_unpredictable_step_neither_dominates_nor_inflates_the_rms():
    """A wall hit: one step whose next observation is far outside what ICM has seen.
    Its reward is capped at curiosity_clip RMS, and the RMS barely moves."""
    tf.random.set_seed(0)
    signals = _signals(curiosity_strength=1.0, curiosity_learning_rate=3e-3)
    rng = np.random.default_rng(0)
    batch = _time_major_batch(rng)
    step = tf.function(signals.rewards_and_train)
    for _ in range(50):
        step(*batch)
    mean_square = float(signals.curiosity_mean_square.numpy())
    observation, action, mask = batch
    observation = observation.copy()
    observation[2, 3] = 1e3  # the next observation of step 1 in env 3
    rewards, _ = step(observation, action, mask)
    rewards = rewards.numpy()[..., 0]
    assert rewards[1, 3] <= 5.0 * np.sqrt(mean_square) * (1 + 1e-5)
    assert rewards[1, 3] > 4.0 * np.sqrt(mean_square)  # capped, not dropped
    # Unbounded it would be ~1e6 times the others; bounded, the RMS moves little.
    assert float(signals.curiosity_mean_square.numpy()) < 2.0 * mean_square


def test_masked_steps_do_not_train_or_count():
    signals = _signals(curiosity_strength=1.0)
    rng = np.random.default_rng(0)
    observation, action, mask = _time_major_batch(rng)
    mask[:] = 0.0
    before = [v.numpy().copy() for v in signals.curiosity.trainable_variables]
    _, metrics = signals.rewards_and_train(observation, action, mask)
    for old, new in zip(before, signals.curiosity.trainable_variables):
        np.testing.assert_array_equal(old, new.numpy())
    assert float(metrics['curiosity/forward_loss']) == 0.0


def test_gail_loss_and_reward_against_numpy():
    demo_logits = np.array([2.0, -1.0, 0.5], np.float32)
    policy_logits = np.array([-3.0, 0.0, 1.0, 4.0], np.float32)
    mask = np.array([1.0, 1.0, 1.0, 0.0], np.float32)
    sigmoid = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    expected = (-np.log(sigmoid(demo_logits)).mean()
                - (mask * np.log(1 - sigmoid(policy_logits))).sum() / mask.sum())
    loss = losses.gail_discriminator_loss(demo_logits, policy_logits, mask)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)
    reward = losses.gail_reward(policy_logits).numpy()
    np.testing.assert_allclose(reward, -np.log(1 - sigmoid(policy_logits)), rtol=1e-4)
    assert np.all(reward > 0) and np.all(np.diff(reward) > 0)  # more demo-like, more reward


def test_gail_rewards_demonstration_like_steps(tmp_path, write_episode):
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    # Demonstrations sit at x0 > 0.5; the policy's steps at x0 < -0.5.
    demo_obs = np.stack([rng.uniform(0.5, 1.0, 200), rng.uniform(-2, 2, 200)], -1)
    path = write_episode(tmp_path / 'demos.npz', demo_obs.astype(np.float32),
                         rng.integers(0, 3, 200), OBS_SPACE, ACTIONS.space)
    signals = _signals(gail_strength=1.0, gail_demos=path, gail_learning_rate=3e-3)
    observation, action, mask = _time_major_batch(rng)
    observation[..., 0] = rng.uniform(-1.0, -0.5, observation.shape[:2])
    step = tf.function(signals.rewards_and_train)
    for _ in range(150):
        rewards, metrics = step(observation, action, mask)
    # The gradient penalty keeps |grad D| near 1: the two sets, one unit apart after
    # scaling, end about 1 logit apart.
    assert metrics['gail/demo_estimate'].numpy() > 0.6
    assert metrics['gail/policy_estimate'].numpy() < 0.4
    demo_like = observation.copy()
    demo_like[..., 0] *= -1.0
    demo_rewards, _ = step(demo_like, action, mask)
    assert demo_rewards.numpy().mean() > 1.5 * rewards.numpy().mean()


def test_component_targets_discount_each_component_by_its_own_gamma():
    # On-policy V-trace (rho = 1) is the n-step return to the bootstrap; by hand, T = 3:
    # gamma 0.5: r = 1, 1, 1, V(x_3) = 4 -> vs_2 = 1 + 0.5 * 4 = 3, vs_1 = 2.5, vs_0 = 2.25
    # gamma 0.9: r = 0, 0, 1, V(x_3) = 0 -> vs_2 = 1, vs_1 = 0.9, vs_0 = 0.81
    rewards = np.array([[[1.0, 0.0]], [[1.0, 0.0]], [[1.0, 1.0]]], np.float32)  # [T, B, k]
    discounts = np.broadcast_to(np.array([0.5, 0.9], np.float32), (3, 1, 2))
    values = np.zeros((3, 1, 2), np.float32)
    bootstrap = np.array([[4.0, 0.0]], np.float32)

    def targets(log_rhos, discounts, rewards, values, bootstrap_value):
        return vtrace.from_importance_weights(log_rhos, discounts, rewards, values,
                                              bootstrap_value)

    vs, advantages = losses.component_targets(
        targets, np.zeros((3, 1), np.float32), discounts, rewards, values, bootstrap)
    np.testing.assert_allclose(vs.numpy()[:, 0], [[2.25, 0.81], [2.5, 0.9], [3.0, 1.0]],
                               rtol=1e-6)
    # Advantage: r_t + gamma * vs_{t+1} - V(x_t) with V = 0.
    np.testing.assert_allclose(advantages.numpy()[:, 0], [[2.25, 0.81], [2.5, 0.9], [3.0, 1.0]],
                               rtol=1e-6)


def test_a_non_episodic_return_runs_across_a_termination():
    discount = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)  # [T, B]: 0 = terminated
    gammas = np.array([0.9, 0.5], np.float32)
    got = losses.component_discounts(discount, gammas, (True, False)).numpy()
    np.testing.assert_allclose(got[..., 0], discount * 0.9)  # episodic (GAIL's default)
    np.testing.assert_allclose(got[..., 1], np.full((2, 2), 0.5))  # curiosity's default
    assert SignalsConfig(curiosity_strength=1.0, gail_strength=1.0,
                         gail_demos='x.npz').episodic == (False, True)


def test_a_non_episodic_return_runs_on_into_the_next_episode():
    # Steps 0-1 end an episode (step 1's action terminates it), step 2 holds its final
    # observation (a placeholder), step 3 starts the next episode, V(x_4) bootstraps.
    mask = np.array([1, 1, 0, 1], np.float32)[:, None, None]  # [T, B, 1]
    rewards = np.repeat(np.array([1.0, 2.0, 99.0, 3.0], np.float32)[:, None, None], 2, -1)
    values = np.repeat(np.array([0.5, 0.6, 7.0, 0.8], np.float32)[:, None, None], 2, -1)
    episode_discount = np.array([1.0, 0.0, 0.0, 1.0], np.float32)[:, None]
    gammas = np.array([0.9, 0.9], np.float32)
    episodic = (True, False)
    r, d, learned = losses.across_episode_ends(
        mask, rewards, values, losses.component_discounts(episode_discount, gammas, episodic),
        episodic)
    vs, _ = losses.component_targets(
        lambda *a: vtrace.from_importance_weights(*a), np.zeros((4, 1), np.float32),
        d.numpy(), r.numpy(), values, np.array([[1.0, 1.0]], np.float32))

    def returns(rewards, discounts):  # on-policy V-trace is the discounted return
        return numpy_discounted_returns(np.array(rewards), np.array(discounts), 1.0)

    # Episodic: the return ends at the termination; the placeholder keeps its own value.
    np.testing.assert_allclose(vs.numpy()[:, 0, 0],
                               returns([1.0, 2.0, 7.0, 3.0], [0.9, 0.0, 0.0, 0.9]), rtol=1e-6)
    # Non-episodic: the final observation is worth the next episode's first step (reward
    # 0, discount 1), and that target is learned; the placeholder's 99 is never paid.
    np.testing.assert_allclose(vs.numpy()[:, 0, 1],
                               returns([1.0, 2.0, 0.0, 3.0], [0.9, 0.9, 1.0, 0.9]), rtol=1e-6)
    np.testing.assert_array_equal(learned.numpy()[:, 0], [[1, 1], [1, 1], [0, 1], [1, 1]])


def test_bc_loss_and_its_decay_against_numpy():
    per_step = -np.log(np.array([[0.5, 0.25], [1.0, 0.125]], np.float32))
    mask = np.array([[1.0, 1.0], [0.0, 1.0]], np.float32)
    np.testing.assert_allclose(losses.bc_loss(per_step).numpy(),
                               -np.log([0.5, 0.25, 1.0, 0.125]).mean(), rtol=1e-6)
    np.testing.assert_allclose(losses.bc_loss(per_step, mask).numpy(),
                               -np.log([0.5, 0.25, 0.125]).mean(), rtol=1e-6)
    decay = [losses.linear_decay(2.0, 100, tf.constant(s, tf.int64)).numpy()
             for s in (0, 50, 100, 200)]
    np.testing.assert_allclose(decay, [2.0, 1.0, 0.0, 0.0])
    assert losses.linear_decay(2.0, 0, tf.constant(10_000, tf.int64)).numpy() == 2.0


def test_cloning_losses_on_a_demo_batch_against_numpy():
    # A discrete leaf and a squashed continuous one (a mixed action, as SAC's).
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(3),
                                          gym.spaces.Box(-1, 1, (2,), np.float32))), squash=True)
    logits = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]], np.float32)
    gaussian = np.array([[0.5, -1.0, 0.0, 0.0], [2.0, 0.0, -1.0, 1.0]], np.float32)  # mean, log-std
    demo = (np.array([1, 0], np.int32), np.array([[0.0, -0.5], [1.0, 0.0]], np.float32))
    got = losses.cloning_losses(space, (logits, gaussian), demo).numpy()
    nll = -_log_softmax(logits)[[0, 1], [1, 0]]
    squared = ((np.tanh(gaussian[:, :2]) - demo[1]) ** 2).sum(-1)
    np.testing.assert_allclose(got, nll + squared, rtol=1e-5)


@pytest.mark.parametrize('overrides, message', [
    (dict(curiosity_strength=-0.1), 'curiosity_strength must be >= 0'),
    (dict(extrinsic_strength=-1.0), 'extrinsic_strength must be >= 0'),
    (dict(gail_strength=1.0), 'needs --gail_demos'),
    (dict(bc_demos='demos.npz'), 'needs one of them'),
    (dict(bc_strength=0.5), 'needs --bc_demos'),
    (dict(extrinsic_strength=0.0), 'every reward signal is off'),
    (dict(curiosity_gamma=1.5), 'curiosity_gamma must be in [0, 1]'),
])
def test_bad_signal_settings_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message.replace('[', r'\[').replace(']', r'\]')):
        SignalsConfig(**overrides)
