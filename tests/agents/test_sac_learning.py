"""The SAC learner step on small hand-made batches, for every action type."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from agents.sac.config import SACConfig
from agents.sac.learning import SACLearner
from networks.cores import ActorCriticCore, CoreInputs
from networks.distributions import ActionSpace
from networks.observations import observation_spec
from replay import trajectory
from replay.dataset import Batch

B = 6
OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
SPACES = {
    'continuous': gym.spaces.Box(-2, 2, (2,), np.float32),
    'discrete': gym.spaces.Discrete(3),
    'multi_discrete': gym.spaces.MultiDiscrete([2, 4]),
    'mixed': gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32))),
}


def make_learner(space, **overrides):
    action_space = ActionSpace(space, squash=True)
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(16,), lstm_size=0,
                           condition_on_previous=False, baseline=False,
                           normalize_observations=overrides.get('normalize', False))
    core.create_variables()
    config = SACConfig(**{'hidden_sizes': (16,), 'critic_hidden_sizes': (16, 16),
                          'batch_size': B, **overrides})
    return SACLearner(core, action_space, config), action_space


def make_batch(action_space, n=1, seed=0, reward_size=0):
    rng = np.random.default_rng(seed)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), action_space.action_specs(),
                                action_space.param_specs(), reward_size)
    steps = trajectory.zeros(spec, (n + 1, B))
    actions, _ = action_space.sample_uniform((n + 1) * B, rng)
    steps = steps._replace(
        observation=rng.uniform(-1, 1, (n + 1, B, 3)).astype(np.float32),
        action=tuple(a.reshape((n + 1, B) + a.shape[1:]) for a in actions),
        reward=rng.normal(size=(n + 1, B) + ((reward_size,) if reward_size else ())
                          ).astype(np.float32),
        discount=(rng.uniform(size=(n + 1, B)) > 0.3).astype(np.float32),
        first=np.zeros((n + 1, B), bool))
    return Batch(trajectory.Sequence(steps, ()), tf.constant([True] * B))


@pytest.mark.parametrize('name', sorted(SPACES))
def test_step_learns_finite_metrics_with_one_temperature_per_group(name):
    learner, space = make_learner(SPACES[name])
    batch = make_batch(space)
    groups = {'continuous': 1, 'discrete': 1, 'multi_discrete': 2, 'mixed': 2}[name]
    assert learner.log_alpha.shape == (groups,)
    before = [v.numpy().copy() for v in learner.core.trainable_variables]
    critics_before = [v.numpy().copy() for v in learner.critics.trainable_variables]
    for _ in range(3):
        metrics = learner.step(batch)
    values = {k: float(v.numpy()) for k, v in metrics.items()}
    assert all(np.isfinite(v) for v in values.values()), values
    assert {'losses/actor', 'losses/alpha', 'losses/critic_0', 'losses/critic_1',
            'policy/q_mean'} <= set(values)
    assert int(learner.num_steps.numpy()) == 3
    # Every actor and critic variable moved; the actor has no value head.
    assert all(not np.allclose(b, v.numpy()) for b, v in
               zip(before, learner.core.trainable_variables))
    assert not any('baseline' in v.name for v in learner.core.variables)
    assert all(not np.allclose(b, v.numpy()) for b, v in
               zip(critics_before, learner.critics.trainable_variables))


def test_target_entropy_defaults_and_overrides():
    learner, _ = make_learner(SPACES['mixed'])
    np.testing.assert_allclose(learner.target_entropy.numpy(), [-2.0, 0.2 * np.log(3)],
                               rtol=1e-6)
    learner, _ = make_learner(SPACES['multi_discrete'], target_entropy=0.1)
    np.testing.assert_allclose(learner.target_entropy.numpy(), [0.1, 0.1])
    learner, _ = make_learner(SPACES['multi_discrete'],
                              target_entropy=lambda kind, size: float(size))
    np.testing.assert_allclose(learner.target_entropy.numpy(), [2.0, 4.0])
    learner, _ = make_learner(SPACES['continuous'], init_entcoef=0.5)
    np.testing.assert_allclose(np.exp(learner.log_alpha.numpy()), [0.5], rtol=1e-6)


def test_target_critics_follow_with_tau_every_period_steps():
    learner, space = make_learner(SPACES['continuous'], target_update_tau=0.5,
                                  target_update_period=2)
    batch = make_batch(space)
    start = [v.numpy().copy() for v in learner.target_critics.variables]
    np.testing.assert_allclose(start[0], learner.critics.variables[0].numpy())
    learner.step(batch)  # step 1: no update
    for s, v in zip(start, learner.target_critics.variables):
        np.testing.assert_allclose(v.numpy(), s)
    learner.step(batch)  # step 2: target <- 0.5 critic + 0.5 target
    for s, v, c in zip(start, learner.target_critics.variables, learner.critics.variables):
        np.testing.assert_allclose(v.numpy(), 0.5 * c.numpy() + 0.5 * s, rtol=1e-5, atol=1e-6)


def _np_log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.parametrize('entropy', [True, False])
def test_discrete_critic_targets_match_numpy(entropy):
    """Discrete targets are deterministic (exact expectations): recompute them from
    the learner's own networks with numpy, with a termination and a truncation."""
    learner, space = make_learner(SPACES['multi_discrete'], use_entropy_reward=entropy,
                                  discounting=0.9, reward_scaling=2.0)
    learner.log_alpha.assign([np.log(0.3), np.log(0.7)])
    batch = make_batch(space, seed=3)
    steps = batch.sequence.steps
    steps.discount[0, :2] = [0.0, 1.0]  # row 0 terminated; row 1 truncated (next: placeholder)
    steps.first[1, :] = False
    alphas = [tf.constant(0.3), tf.constant(0.7)]
    got = learner.critic_targets(steps, alphas).numpy()[0]  # [T = 1, B]

    next_obs = steps.observation[1]
    out, _ = learner.core.unroll(CoreInputs(
        steps.observation[1:], tuple(a[1:] for a in steps.prev_action),
        steps.prev_reward[1:], steps.first[1:]), ())
    logits = [p.numpy()[0] for p in out.policy_params]
    q = learner.target_critics(next_obs, np.zeros([B, 0], np.float32)).numpy()  # [R, B, 6]
    q_min = q.min(0)
    branches = [q_min[:, :2], q_min[:, 2:]]
    value = np.zeros(B)
    for qb, lb, alpha in zip(branches, logits, [0.3, 0.7]):
        lp = _np_log_softmax(lb)
        value += (np.exp(lp) * (qb - (alpha * lp if entropy else 0.0))).sum(-1) / 2
    expected = 2.0 * steps.reward[0] + 0.9 * steps.discount[0] * value
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert got[0] == pytest.approx(2.0 * steps.reward[0, 0])


@pytest.mark.parametrize('reward_weights', [None, (0.5, 2.0)])
def test_continuous_critic_targets_match_numpy(reward_weights):
    """Row by row: r + gamma d (min over target critics at a' ~ pi(s') - alpha log pi(a'|s')),
    with the same random draw for a' (the global seed is reset before each)."""
    k = len(reward_weights) if reward_weights else 0
    learner, space = make_learner(SPACES['continuous'], discounting=0.9,
                                  reward_weights=reward_weights)
    steps = make_batch(space, seed=6, reward_size=k).sequence.steps
    steps.discount[0, 0] = 0.0
    tf.random.set_seed(11)
    got = learner.critic_targets(steps, [tf.constant(0.4)]).numpy()[0]

    tf.random.set_seed(11)
    out, _ = learner.core.unroll(CoreInputs(
        steps.observation[1:], tuple(a[1:] for a in steps.prev_action),
        steps.prev_reward[1:], steps.first[1:]), ())
    action, log_prob, _ = learner._policy((out.policy_params[0][0],))
    q = learner.target_critics(steps.observation[1], action).numpy()  # [R, B, max(k, 1)]
    value = q.min(0) - 0.4 * log_prob.numpy()[:, None]
    reward = steps.reward[0] if k else steps.reward[0][:, None]
    expected = reward + 0.9 * steps.discount[0][:, None] * value
    np.testing.assert_allclose(got, expected if k else expected[:, 0], rtol=1e-4, atol=1e-5)


def test_vector_reward_targets_are_per_component_and_the_step_learns():
    """With reward_weights the critics output a value per component and discrete
    action; each component's target is its own reward plus the discounted
    min-over-replicas soft value of that component (entropy bonus included)."""
    learner, space = make_learner(SPACES['multi_discrete'], reward_weights=(0.25, 0.75),
                                  discounting=0.9)
    learner.log_alpha.assign([np.log(0.3), np.log(0.7)])
    batch = make_batch(space, seed=4, reward_size=2)
    steps = batch.sequence.steps
    steps.discount[0, 0] = 0.0
    got = learner.critic_targets(steps, [tf.constant(0.3), tf.constant(0.7)]).numpy()[0]
    assert got.shape == (B, 2)

    out, _ = learner.core.unroll(CoreInputs(
        steps.observation[1:], tuple(a[1:] for a in steps.prev_action),
        steps.prev_reward[1:], steps.first[1:]), ())
    logits = [p.numpy()[0] for p in out.policy_params]
    q = learner.target_critics(steps.observation[1], np.zeros([B, 0], np.float32)).numpy()
    q_min = q.reshape(q.shape[:2] + (6, 2)).min(0)  # [B, actions, components]
    for c in range(2):
        value = np.zeros(B)
        for qb, lb, alpha in zip([q_min[:, :2, c], q_min[:, 2:, c]], logits, [0.3, 0.7]):
            lp = _np_log_softmax(lb)
            value += (np.exp(lp) * (qb - alpha * lp)).sum(-1) / 2
        expected = steps.reward[0, :, c] + 0.9 * steps.discount[0] * value
        np.testing.assert_allclose(got[:, c], expected, rtol=1e-4, atol=1e-5)
    metrics = learner.step(batch)
    assert all(np.isfinite(float(v.numpy())) for v in metrics.values())


def test_learner_needs_a_squashed_action_space():
    learner, _ = make_learner(SPACES['mixed'])
    with pytest.raises(ValueError, match='squashed'):
        SACLearner(learner.core, ActionSpace(SPACES['mixed']), learner.config)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match='n_step'):
        SACConfig(n_step=0)
    with pytest.raises(ValueError, match='target_update_tau'):
        SACConfig(target_update_tau=0.0)
    with pytest.raises(ValueError, match='online_fraction'):
        SACConfig(online_fraction=1.0)


def test_normalize_updates_the_statistics_the_actor_and_critics_see():
    learner, space = make_learner(SPACES['continuous'], normalize=True)
    batch = make_batch(space)
    learner.step(batch)
    learner.step(batch)
    normalizer = learner.core._normalizer
    assert float(normalizer.count.numpy()) == 2 * B
    np.testing.assert_allclose(normalizer.mean.numpy(),
                               batch.sequence.steps.observation[0].mean(0), rtol=1e-5)
    assert 'observation_normalizer/mean:0' in [v.name.split('/', 1)[1]
                                               for v in learner.core.variables]


def test_n_step_learner_uses_longer_sequences():
    learner, space = make_learner(SPACES['continuous'], n_step=3)
    assert learner.config.sequence_length == 4
    metrics = learner.step(make_batch(space, n=3))
    assert all(np.isfinite(float(v)) for v in metrics.values())


def test_recurrent_sac_learns_from_burned_in_sequences():
    burn_in, unroll = 2, 3
    action_space = ActionSpace(SPACES['continuous'], squash=True)
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(16,), lstm_size=8,
                           condition_on_previous=True, baseline=False)
    core.create_variables()
    config = SACConfig(hidden_sizes=(16,), critic_hidden_sizes=(16, 16), lstm_size=8,
                       burn_in=burn_in, unroll_length=unroll, batch_size=unroll * B)
    assert config.sequence_length == burn_in + unroll + 1
    learner = SACLearner(core, action_space, config)
    batch = make_batch(action_space, n=config.sequence_length - 1)
    state = core.initial_state(B)
    batch = batch._replace(sequence=batch.sequence._replace(core_state=state))
    lstm_before = [v.numpy().copy() for v in core.trainable_variables if 'lstm' in v.name]
    metrics = learner.step(batch)
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert lstm_before and all(
        not np.allclose(b, v.numpy()) for b, v in
        zip(lstm_before, [v for v in core.trainable_variables if 'lstm' in v.name]))
    targets = learner.critic_targets(
        tf.nest.map_structure(lambda x: x[burn_in:], batch.sequence.steps),
        [tf.constant(1.0)],
        next_params=tuple(np.zeros((unroll, B, 4), np.float32) for _ in range(1)),
        next_memory=np.zeros((unroll, B, 8), np.float32))
    assert targets.shape == (unroll, B)
    with pytest.raises(ValueError, match='multiple of unroll_length'):
        SACConfig(unroll_length=3, batch_size=256)


def _recurrent_learner(**overrides):
    action_space = ActionSpace(SPACES['continuous'], squash=True)
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(16,), lstm_size=8,
                           condition_on_previous=True, baseline=False)
    core.create_variables()
    config = SACConfig(hidden_sizes=(16,), critic_hidden_sizes=(16, 16), lstm_size=8,
                       unroll_length=2, batch_size=2 * B, **overrides)
    return SACLearner(core, action_space, config), action_space


def test_memory_learns_from_critics_adds_the_td_gradient_to_the_lstm():
    """Same start, same batch, same random draws: the LSTM moves the same way twice
    without the option and differently with it (the critics' loss reaches it)."""
    def lstm_after_one_step(memory_learns_from_critics):
        tf.random.set_seed(3)
        learner, space = _recurrent_learner(
            memory_learns_from_critics=memory_learns_from_critics)
        for v in learner.core.variables + learner.critics.variables:
            v.assign(tf.random.stateless_normal(v.shape, [1, len(v.name)]) * 0.3)
        batch = make_batch(space, n=2, seed=1)
        batch = batch._replace(sequence=batch.sequence._replace(
            core_state=learner.core.initial_state(B)))
        tf.random.set_seed(4)
        learner.step(batch)
        return [v.numpy() for v in learner.core.trainable_variables if 'lstm' in v.name]

    plain, again, with_critics = (lstm_after_one_step(False), lstm_after_one_step(False),
                                  lstm_after_one_step(True))
    for a, b, c in zip(plain, again, with_critics):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        assert not np.allclose(a, c, rtol=1e-6, atol=1e-7)
