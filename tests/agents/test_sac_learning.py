"""The SAC learner step on small hand-made batches, for every action type.

Tracing a learner's step is most of a test's time here, so tests of one configuration
share a learner built once per module and put back as built (`Rebuilt.fresh`).
"""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents.signals import config as signals_config
from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.agents.sac.learning import SACLearner
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch
from tests.conftest import SAC_CRITIC_POLICY, SAC_FEED_FORWARD
from tests.learners import Rebuilt, check_policy_average

B = 6
OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
SPACES = {
    'continuous': gym.spaces.Box(-2, 2, (2,), np.float32),
    'discrete': gym.spaces.Discrete(3),
    'multi_discrete': gym.spaces.MultiDiscrete([2, 4]),
    'mixed': gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32))),
}


# The numpy checks are written for raw observations and the uncentred entropy reward;
# a test that wants either default (both on) asks for it.
UNNORMALIZED = {'normalize': False, 'normalize_entropy_reward': False}


def make_learner(space, **overrides):
    action_space = ActionSpace(space, squash=True)
    overrides = {**UNNORMALIZED, **overrides}
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(16,), lstm_size=0,
                           condition_on_previous=False, baseline=False,
                           normalize_observations=overrides['normalize'])
    core.create_variables()
    config = SACConfig(**{'hidden_sizes': (16,), 'critic_hidden_sizes': (16, 16),
                          'batch_size': B, **SAC_FEED_FORWARD, **overrides})
    return SACLearner(core, action_space, config), action_space


@pytest.fixture(scope='module')
def learners():
    """Per action type, a learner of the default configuration but for the actor's and
    the temperature's learning rates, raw observations and an uncentred entropy reward
    (the continuous one's: target updates half way every second step, observations
    normalised), each built when a test first asks for it."""
    built = {}
    special = {'continuous': dict(target_update_tau=0.5, target_update_period=2,
                                  normalize=True)}

    def get(name):
        if name not in built:
            built[name] = Rebuilt(make_learner, SPACES[name], actor_learning_rate=2e-3,
                                  alpha_learning_rate=3e-3, **special.get(name, {}))
        return built[name].fresh()

    return get


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
def test_step_learns_finite_metrics_with_one_temperature_per_group(name, learners):
    learner, space = learners(name)
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


def test_target_critics_follow_with_tau_every_period_steps(learners):
    learner, space = learners('continuous')
    assert (learner.config.target_update_tau, learner.config.target_update_period) == (0.5, 2)
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
    # The default actor is recurrent; without its memory, burn-in has nothing to warm.
    assert SACConfig().lstm_size > 0 and SACConfig().burn_in > 0
    with pytest.raises(ValueError, match='--burn_in=0'):
        SACConfig(lstm_size=0)
    assert SACConfig(**SAC_FEED_FORWARD).sequence_length == 2
    # Options for the critics' gradient on the memory need one to reach it.
    for options in (dict(memory_optimizer=True), dict(memory_critic_scale=0.1)):
        with pytest.raises(ValueError, match='needs a recurrent SAC'):
            SACConfig(**SAC_FEED_FORWARD, **options)
        with pytest.raises(ValueError, match='needs a recurrent SAC'):
            SACConfig(memory_learns_from_critics=False, **options)
    with pytest.raises(ValueError, match='own does not'):
        SACConfig(memory_optimizer=True, memory_critic_scale=0.1)
    with pytest.raises(ValueError, match='critic_memory gives the critics an LSTM'):
        SACConfig(**SAC_FEED_FORWARD, critic_memory=True)
    with pytest.raises(ValueError, match='no critic_memory'):  # the actor's memory is its own
        SACConfig(critic_memory=True, memory_optimizer=True)
    with pytest.raises(ValueError, match='memory_critic_scale must be positive'):
        SACConfig(memory_critic_scale=0.0)


def test_normalize_updates_the_statistics_the_actor_and_critics_see(learners):
    learner, space = learners('continuous')
    assert learner.config.normalize
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


BURN_IN, UNROLL = 2, 3


def _recurrent_learner(**overrides):
    """An LSTM actor that warms its state up over `BURN_IN` steps and learns from
    `UNROLL`."""
    action_space = ActionSpace(SPACES['continuous'], squash=True)
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(16,), lstm_size=8,
                           condition_on_previous=True, baseline=False,
                           policy_hidden_sizes=overrides.get('policy_hidden_sizes', ()))
    core.create_variables()
    config = SACConfig(hidden_sizes=(16,), critic_hidden_sizes=(16, 16), lstm_size=8,
                       burn_in=BURN_IN, unroll_length=UNROLL, batch_size=UNROLL * B,
                       **overrides)
    return SACLearner(core, action_space, config), action_space


@pytest.fixture(scope='module')
def recurrent():
    """`_recurrent_learner()`, its initial values seeded as the memory test seeds the
    other learner it compares this one with."""
    tf.random.set_seed(3)
    return Rebuilt(_recurrent_learner)


def _recurrent_batch(learner, action_space, seed=0):
    batch = make_batch(action_space, n=learner.config.sequence_length - 1, seed=seed)
    return batch._replace(sequence=batch.sequence._replace(
        core_state=learner.core.initial_state(B)))


def test_recurrent_sac_learns_from_burned_in_sequences(recurrent):
    burn_in, unroll = BURN_IN, UNROLL
    learner, action_space = recurrent.fresh()
    core, config = learner.core, learner.config
    assert config.sequence_length == burn_in + unroll + 1
    batch = _recurrent_batch(learner, action_space)
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


def _randomized(learner, space):
    """The learner with its core and critics drawn from a seed of their own (so two
    learners start alike), and every variable's starting value."""
    for v in learner.core.variables + learner.critics.variables:
        v.assign(tf.random.stateless_normal(v.shape, [1, len(v.name)]) * 0.3)
    return learner, space, [(v, v.numpy()) for v in learner.variables]


def _lstm_after_one_step(learner, space, start):
    """The LSTM's weights after one step from `start`, on a fixed batch and draws."""
    for variable, value in start:  # every variable as it started, optimiser included
        variable.assign(value)
    batch = _recurrent_batch(learner, space, seed=1)
    tf.random.set_seed(4)
    learner.step(batch)
    return [v.numpy() for v in learner.core.trainable_variables if 'lstm' in v.name]


def test_memory_learns_from_critics_adds_the_td_gradient_to_the_lstm(recurrent):
    """Same start, same batch, same random draws: the LSTM moves the same way twice
    without the option and differently with it (the critics' loss reaches it)."""
    option = _randomized(*recurrent.fresh())
    assert option[0].config.memory_learns_from_critics  # the default
    tf.random.set_seed(3)  # as `recurrent` built its learner
    without = _randomized(*_recurrent_learner(memory_learns_from_critics=False))
    # The two learners start from the same values, variable for variable.
    assert len(without[2]) == len(option[2])
    for (a, x), (b, y) in zip(without[2], option[2]):
        np.testing.assert_array_equal(x, y, err_msg=f'{a.name} {b.name}')
    plain, again, with_critics = (_lstm_after_one_step(*without), _lstm_after_one_step(*without),
                                  _lstm_after_one_step(*option))
    for a, b, c in zip(plain, again, with_critics):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        assert not np.allclose(a, c, rtol=1e-6, atol=1e-7)


def test_one_backward_pass_gives_the_two_passes_step():
    """With one Adam (the default) the actor's loss and the critics' (through the
    memory they read) reach the actor's torso and LSTM in one backward pass of their
    weighted sum. Against a backward pass for each, summed after: the same step, every
    variable after it (Adam's moments, which hold the gradients, included) equal to float
    precision."""
    def after_one_step(one_backward, **overrides):
        tf.random.set_seed(3)
        learner, space, start = _randomized(*_recurrent_learner(**overrides))
        assert learner._one_backward
        learner._one_backward = one_backward  # read when the step is traced
        _lstm_after_one_step(learner, space, start)
        return [(v.name, v.numpy()) for v in learner.variables]

    for overrides in ({}, {'memory_critic_scale': 0.1}):
        one, two = after_one_step(True, **overrides), after_one_step(False, **overrides)
        assert [a for a, _ in one] == [b for b, _ in two]
        for (name, a), (_, b) in zip(one, two):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7, err_msg=name)


def test_memory_critic_scale_weighs_the_critics_gradient_in_the_actors_adam():
    """Adam's first step moves each weight by lr times the sign of its gradient, here
    actor gradient + scale * critics' gradient. The share of LSTM weights that move
    otherwise than without the critics' gradient (by 2 lr: the sign flipped) grows with
    the scale, from none at 1e-6."""
    def moved(**overrides):
        tf.random.set_seed(3)
        lstm = _lstm_after_one_step(*_randomized(*_recurrent_learner(**overrides)))
        return np.concatenate([v.ravel() for v in lstm])

    lr = SACConfig().actor_learning_rate
    plain = moved(memory_learns_from_critics=False)
    flipped = [np.mean(np.abs(moved(memory_critic_scale=scale) - plain) > lr)
               for scale in (1e-6, 0.1, 1.0)]
    assert flipped[0] == 0 and 0 < flipped[1] < flipped[2], flipped


def test_critic_memory_learns_from_the_td_loss_and_keeps_it_off_the_actors_lstm():
    """With `critic_memory` the critics' LSTM moves by Adam's first step (lr) and the
    target's moves tau of the way to it; the actor's LSTM moves the same whether or not
    `memory_learns_from_critics` is set: the critics' loss does not reach it."""
    def after_one_step(**overrides):
        tf.random.set_seed(3)
        learner, space, start = _randomized(*_recurrent_learner(critic_memory=True,
                                                                **overrides))
        memory = [v for v in learner.critics.trainable_variables if '/memory/' in v.name]
        target = [v for v in learner.target_critics.variables if '/memory/' in v.name]
        values = [[v.numpy() for v in memory], [v.numpy() for v in target]]
        actor_lstm = _lstm_after_one_step(learner, space, start)
        return learner, actor_lstm, values, [[v.numpy() for v in memory],
                                             [v.numpy() for v in target]]

    learner, actor_lstm, (critic_0, target_0), (critic_1, target_1) = after_one_step()
    config, tau = learner.config, learner.config.target_update_tau
    assert len(critic_0) == 3 and learner._critic_memory and not learner._learn_memory
    moves = np.abs(np.concatenate([(a - b).ravel() for a, b in zip(critic_1, critic_0)]))
    assert np.mean(np.isclose(moves, config.optimizer.learning_rate, rtol=0.05)) > 0.8
    for c, t0, t1 in zip(critic_1, target_0, target_1):
        np.testing.assert_allclose(t1, (1 - tau) * t0 + tau * c, rtol=1e-5, atol=1e-6)
    _, same_lstm, _, _ = after_one_step(memory_learns_from_critics=False)
    for a, b in zip(actor_lstm, same_lstm):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_policys_hidden_layers_learn_from_the_actors_loss_alone():
    """`policy_hidden_sizes`: the actor's own layers after the features move at the first
    step, and the same whether or not the critics' TD loss trains the features: it does
    not reach them."""
    def after_one_step(**overrides):
        tf.random.set_seed(3)
        learner, space, start = _randomized(*_recurrent_learner(policy_hidden_sizes=(8,),
                                                                **overrides))
        hidden = [v for v in learner.core.trainable_variables if '/hidden/' in v.name]
        before = [v.numpy() for v in hidden]
        _lstm_after_one_step(learner, space, start)
        return before, [v.numpy() for v in hidden]

    before, with_critics = after_one_step()
    _, without_critics = after_one_step(memory_learns_from_critics=False)
    assert len(before) == 2  # one layer's w and b
    for b, a, c in zip(before, with_critics, without_critics):
        assert not np.allclose(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('own_adam', [False, True])
def test_memory_optimizer_steps_the_critics_gradient_through_its_own_adam(own_adam):
    """Adam's first step moves each parameter by the learning rate times the sign of its
    gradient. One Adam over the summed gradients: every LSTM parameter moves by lr;
    an Adam for each part: by 2 lr where the two gradients agree in sign, 0 where not."""
    learner, space = _recurrent_learner(memory_optimizer=own_adam)
    assert (learner.memory_optimizer is not None) == own_adam
    lstm = [v for v in learner.core.trainable_variables if 'lstm' in v.name]
    before = [v.numpy() for v in lstm]
    learner.step(_recurrent_batch(learner, space))
    lr = learner.config.actor_learning_rate
    moves = np.abs(np.concatenate([(v.numpy() - b).ravel() for v, b in zip(lstm, before)])) / lr
    share = {k: np.mean(np.isclose(moves, k, atol=0.02)) for k in (0, 1, 2)}
    if own_adam:  # (some weights meet only zero inputs in this batch: 0 either way)
        assert share[1] < 0.02 and share[2] > 0.3 and share[0] > 0.3, share
    else:
        assert share[1] > 0.85 and share[2] == 0 and share[0] < 0.15, share


# --- ALF's semantics: entropy reward at every step, masking, signed replica
# minimum, normalised entropy reward; the ML-Agents-style metrics -------------

def _randomize(learner, scale=0.5):
    """Spread the actor's near-uniform initial policy (and the critics), so
    per-row entropies and values differ enough for the tests to tell means apart."""
    for v in learner.core.trainable_variables + learner.critics.trainable_variables:
        v.assign(tf.random.stateless_normal(v.shape, [7, len(v.name)]) * scale)
    for target, source in zip(learner.target_critics.variables, learner.critics.variables):
        target.assign(source)


def _logits(learner, steps, rows):
    """The actor's per-branch params `[t, B, p]` at the steps `rows` (feed-forward)."""
    out, _ = learner.core.unroll(CoreInputs(
        steps.observation[rows], tuple(a[rows] for a in steps.prev_action),
        steps.prev_reward[rows], steps.first[rows]), ())
    return [p.numpy() for p in out.policy_params]


def _np_entropy(log_p):
    return -(np.exp(log_p) * log_p).sum(-1)


@pytest.mark.parametrize('name', ['multi_discrete', 'continuous'])
def test_three_step_targets_add_the_entropy_reward_at_every_step(name):
    """ALF adds gamma d_k alpha H(pi(.|s_{k+1})) to every reward r_k of an n-step sum,
    not only to the bootstrap value. Row 0 terminates at step 1, row 1's step 2 and
    row 2's step 1 are placeholders (a truncation before them), rows 3.. run on."""
    n, gamma = 3, 0.9
    learner, space = make_learner(SPACES[name], n_step=n, discounting=gamma)
    _randomize(learner)
    alphas = [0.3, 0.7] if name == 'multi_discrete' else [0.4]
    learner.log_alpha.assign(np.log(alphas))
    steps = make_batch(space, n=n, seed=5).sequence.steps
    steps.discount[:] = 1.0
    steps.discount[1, 0] = 0.0
    steps.first[3, 1] = True
    steps.first[2, 2] = True
    tf.random.set_seed(11)
    got = learner.critic_targets(steps, [tf.constant(a) for a in alphas]).numpy()[0]

    # Per observation step j = 1..3: E_pi Q (min over the target critics) and the
    # entropy reward alpha H (discrete: exact, branch mean; continuous: -alpha log pi).
    tf.random.set_seed(11)
    params = _logits(learner, steps, slice(1, n + 1))
    obs = steps.observation[1:].reshape(n * B, 3)
    if name == 'continuous':
        action, log_prob, _ = learner._policy((params[0].reshape(n * B, -1),))
        q = learner.target_critics(obs, action).numpy().min(0)[:, 0].reshape(n, B)
        entropy_reward = (-alphas[0] * log_prob.numpy()).reshape(n, B)
    else:
        q_min = learner.target_critics(obs, np.zeros([n * B, 0], np.float32)).numpy().min(0)
        q_min = q_min.reshape(n, B, 6)
        q = np.zeros((n, B))
        entropy_reward = np.zeros((n, B))
        for qb, pb, alpha in zip([q_min[..., :2], q_min[..., 2:]], params, alphas):
            log_p = _np_log_softmax(pb)
            q += (np.exp(log_p) * qb).sum(-1) / 2
            entropy_reward += alpha * _np_entropy(log_p) / 2

    expected = np.zeros(B)
    for b in range(B):
        total, scale = 0.0, 1.0
        for k in range(n):
            # r_k plus the entropy reward of step k + 1's observation, discounted by d_k.
            total += scale * (steps.reward[k, b] + gamma * steps.discount[k, b]
                              * entropy_reward[k, b])
            scale *= gamma * steps.discount[k, b]
            if k == n - 1 or steps.first[k + 2, b]:
                total += scale * q[k, b]
                break
        expected[b] = total
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # Row 0 by hand: r_0 + gamma (alpha H(s_1) + r_1) and nothing after the termination.
    assert got[0] == pytest.approx(steps.reward[0, 0] + gamma * (
        entropy_reward[0, 0] + steps.reward[1, 0]), rel=1e-4, abs=1e-4)


def test_actor_and_temperature_losses_average_over_valid_rows_only(learners):
    """Rows 1 and 4 start at an episode's final observation (placeholders): the actor
    and temperature losses (and the metrics) are means over the four other rows."""
    learner, space = learners('multi_discrete')
    _randomize(learner)
    alphas = np.array([0.5, 0.2])
    learner.log_alpha.assign(np.log(alphas))
    batch = make_batch(space, seed=2)
    steps = batch.sequence.steps
    steps.first[1, [1, 4]] = True
    valid = np.array([1, 0, 1, 1, 0, 1], bool)

    params = _logits(learner, steps, slice(0, 1))
    q_min = learner.critics(steps.observation[0], np.zeros([B, 0], np.float32)).numpy().min(0)
    actor_rows = np.zeros(B)
    entropies = []
    for qb, pb, alpha in zip([q_min[:, :2], q_min[:, 2:]], params, alphas):
        log_p = _np_log_softmax(pb[0])
        actor_rows += (np.exp(log_p) * (alpha * log_p - qb)).sum(-1) / 2
        entropies.append(_np_entropy(log_p))
    target_entropy = learner.target_entropy.numpy()
    expected_alpha = sum(np.log(a) * (h[valid] - t).mean()
                         for a, h, t in zip(alphas, entropies, target_entropy))

    metrics = {k: float(v) for k, v in learner.step(batch).items()}
    assert metrics['losses/actor'] == pytest.approx(actor_rows[valid].mean(), rel=1e-4)
    assert metrics['losses/alpha'] == pytest.approx(expected_alpha, rel=1e-4)
    assert metrics['policy/value_estimate'] == pytest.approx(-actor_rows[valid].mean(),
                                                             rel=1e-4)
    assert metrics['policy/entropy_branch_1'] == pytest.approx(entropies[1][valid].mean(),
                                                               rel=1e-4)
    # The placeholder rows do differ: the unmasked means are other numbers.
    assert abs(actor_rows.mean() - actor_rows[valid].mean()) > 1e-3


def test_negative_reward_weight_takes_the_replica_max_of_its_component():
    """ALF's rule: per component, the minimum over replicas of sign(w) Q, times
    sign(w). Component 1 has a negative weight, so targets and the actor use the
    maximum over replicas of its Q (the minimum of its weighted value)."""
    weights = np.array([0.5, -2.0])
    learner, space = make_learner(SPACES['multi_discrete'], reward_weights=tuple(weights),
                                  discounting=0.9)
    _randomize(learner)
    alphas = [0.3, 0.7]
    learner.log_alpha.assign(np.log(alphas))
    batch = make_batch(space, seed=8, reward_size=2)
    steps = batch.sequence.steps

    def signed_min(q):  # [R, B, 12] -> [B, 6, 2], by hand per component
        q = q.reshape(q.shape[:2] + (6, 2))
        return np.stack([q[..., 0].min(0), q[..., 1].max(0)], -1)

    got = learner.critic_targets(steps, [tf.constant(a) for a in alphas]).numpy()[0]
    next_params = _logits(learner, steps, slice(1, 2))
    q_next = signed_min(learner.target_critics(steps.observation[1],
                                               np.zeros([B, 0], np.float32)).numpy())
    for c in range(2):
        value = np.zeros(B)
        for qb, pb, alpha in zip([q_next[:, :2, c], q_next[:, 2:, c]], next_params, alphas):
            log_p = _np_log_softmax(pb[0])
            value += (np.exp(log_p) * (qb - alpha * log_p)).sum(-1) / 2
        expected = steps.reward[0, :, c] + 0.9 * steps.discount[0] * value
        np.testing.assert_allclose(got[:, c], expected, rtol=1e-4, atol=1e-4)

    # The actor maximises the weighted sum of the signed minima.
    params = _logits(learner, steps, slice(0, 1))
    q_now = signed_min(learner.critics(steps.observation[0],
                                       np.zeros([B, 0], np.float32)).numpy())
    q_weighted = (q_now * weights).sum(-1)  # [B, 6]
    actor_rows = np.zeros(B)
    for qb, pb, alpha in zip([q_weighted[:, :2], q_weighted[:, 2:]], params, alphas):
        log_p = _np_log_softmax(pb[0])
        actor_rows += (np.exp(log_p) * (alpha * log_p - qb)).sum(-1) / 2
    metrics = learner.step(batch)
    assert float(metrics['losses/actor']) == pytest.approx(actor_rows.mean(), rel=1e-4)


def test_normalize_entropy_reward_subtracts_an_adaptive_mean_of_the_entropy():
    """ALF's ScalarAdaptiveNormalizer(unit_std=True), per temperature group: each call
    first moves the mean toward the batch's mean entropy by 8 / (8 + updates so
    far) (the first call sets it), then the entropy reward is alpha (H - mean)."""
    learner, space = make_learner(SPACES['multi_discrete'], normalize_entropy_reward=True,
                                  discounting=0.9)
    _randomize(learner)
    alphas = [0.3, 0.7]
    mean = np.zeros(2)
    for call, seed in enumerate([1, 2]):
        steps = make_batch(space, seed=seed).sequence.steps
        got = learner.critic_targets(steps, [tf.constant(a) for a in alphas]).numpy()[0]
        params = _logits(learner, steps, slice(1, 2))
        q_min = learner.target_critics(steps.observation[1],
                                       np.zeros([B, 0], np.float32)).numpy().min(0)
        log_ps = [_np_log_softmax(p[0]) for p in params]
        batch_mean = np.array([_np_entropy(lp).mean() for lp in log_ps])
        mean += 8.0 / (8.0 + call) * (batch_mean - mean)
        value = np.zeros(B)
        for g, (qb, log_p, alpha) in enumerate(zip([q_min[:, :2], q_min[:, 2:]], log_ps,
                                                   alphas)):
            value += ((np.exp(log_p) * qb).sum(-1) + alpha * (_np_entropy(log_p) - mean[g])) / 2
        expected = steps.reward[0] + 0.9 * steps.discount[0] * value
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(learner.entropy_mean.numpy(), mean, rtol=1e-5)
    assert all(np.isfinite(float(v)) for v in learner.step(make_batch(space)).values())
    assert SACConfig().normalize_entropy_reward  # the default here (ALF's is off)


@pytest.mark.parametrize('name', sorted(SPACES))
def test_step_reports_learning_rates_value_estimate_and_value_loss(name, learners):
    from reverb_agents.agents.sac.learning import metric_names
    learner, space = learners(name)
    metrics = {k: float(v) for k, v in learner.step(make_batch(space)).items()}
    assert set(metrics) == set(metric_names(learner.config, space))
    assert {'policy/learning_rate', 'policy/actor_learning_rate',
            'policy/alpha_learning_rate', 'policy/value_estimate', 'losses/value'} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert metrics['policy/learning_rate'] == pytest.approx(1e-3)
    assert metrics['policy/actor_learning_rate'] == pytest.approx(2e-3)
    assert metrics['policy/alpha_learning_rate'] == pytest.approx(3e-3)
    assert metrics['losses/value'] == pytest.approx(
        (metrics['losses/critic_0'] + metrics['losses/critic_1']) / 2, rel=1e-5)
    # V(s) = E_pi[Q - alpha log pi] is minus the actor's loss (same sample, same rows).
    assert metrics['policy/value_estimate'] == pytest.approx(-metrics['losses/actor'],
                                                             rel=1e-5, abs=1e-6)


# --- discrete_policy='critic': ALF's softmax(Q / alpha) policy, no actor ----------

def make_critic_policy_learner(space, **overrides):
    """A SAC learner whose core is built by the agent with discrete_policy='critic'."""
    from reverb_agents.agents import registry
    agent = registry.get('sac')
    action_space = ActionSpace(space, squash=True)
    config = SACConfig(**{'hidden_sizes': (16,), 'critic_hidden_sizes': (16, 16),
                          'batch_size': B, **SAC_CRITIC_POLICY, **UNNORMALIZED,
                          **SAC_FEED_FORWARD, **overrides})

    def make_core():
        core = agent.build_core(OBS_SPACE, action_space, config)
        core.create_variables()
        return core

    return agent.build_learner(make_core, action_space, config), action_space


def _np_critics(ensemble, observation):
    """A `CriticEnsemble` over a vector observation, in numpy: `[R, N, outputs]`."""
    by_name = {v.name.split('/')[-1].split(':')[0]: v.numpy() for v in ensemble.variables}
    layers = len([k for k in by_name if k.startswith('w_')])
    x = np.broadcast_to(observation, (by_name['w_0'].shape[0],) + observation.shape)
    for i in range(layers):
        x = x @ by_name[f'w_{i}'] + by_name[f'b_{i}']
        if i < layers - 1:
            x = np.maximum(x, 0.0)
    return x


def _randomize_critic_policy(learner, alphas):
    """Different online and target critics (so the test tells them apart), spread
    enough that the soft-Q policies are far from uniform."""
    for i, v in enumerate(learner.critics.trainable_variables):
        v.assign(tf.random.stateless_normal(v.shape, [3, i]) * 0.8)
    for i, v in enumerate(learner.target_critics.variables):
        v.assign(tf.random.stateless_normal(v.shape, [5, i]) * 0.8)
    learner.log_alpha.assign(np.log(alphas))


BRANCHES = {'discrete': [3], 'multi_discrete': [2, 4]}
ALPHAS = {'discrete': [0.4], 'multi_discrete': [0.3, 0.7]}


def _np_soft_q_log_policy(q, alphas, sizes):
    """ALF's policy per branch: log softmax(min_r Q_r / alpha_b) from `[R, N, sum n]`."""
    q_min = q.min(0)
    branches = np.split(q_min, np.cumsum(sizes)[:-1], axis=-1)
    return [_np_log_softmax(qb / a) for qb, a in zip(branches, alphas)], branches


@pytest.fixture(scope='module')
def critic_policy_learners():
    """Per action type, a critic-policy learner that discounts by 0.9 and scales the
    rewards by 2, each built when a test first asks for it."""
    built = {}

    def get(name):
        if name not in built:
            built[name] = Rebuilt(make_critic_policy_learner, SPACES[name], discounting=0.9,
                                  reward_scaling=2.0)
        return built[name].fresh()

    return get


@pytest.mark.parametrize('name', sorted(BRANCHES))
def test_critic_policy_targets_and_temperature_loss_match_alf_in_numpy(name,
                                                                       critic_policy_learners):
    """discrete_policy='critic', against a numpy port of ALF's formulas: pi_b(.|s) =
    softmax(min_r Q_r,b(s, .) / alpha_b) of the *online* critics, V(s') = sum_a pi(a|s')
    (min_r Q'_r(s', a) - alpha log pi(a|s')) of the *target* critics (branch mean),
    y = scale r + gamma d V(s'); the temperature loss sum_b log alpha_b mean(H_b(s) -
    target_b) over valid rows; no actor loss. Row 0 terminates, row 2 is a placeholder."""
    sizes, alphas = BRANCHES[name], ALPHAS[name]
    learner, space = critic_policy_learners(name)
    _randomize_critic_policy(learner, alphas)
    batch = make_batch(space, seed=3)
    steps = batch.sequence.steps
    steps.discount[0, 0] = 0.0
    steps.first[1, 2] = True
    valid = np.arange(B) != 2

    # numpy: the next observation's soft value from the target critics under the policy
    # of the online critics.
    next_log_pi, _ = _np_soft_q_log_policy(_np_critics(learner.critics, steps.observation[1]),
                                           alphas, sizes)
    _, target_q = _np_soft_q_log_policy(
        _np_critics(learner.target_critics, steps.observation[1]), alphas, sizes)
    value = sum((np.exp(lp) * (qb - a * lp)).sum(-1)
                for lp, qb, a in zip(next_log_pi, target_q, alphas)) / len(sizes)
    expected = 2.0 * steps.reward[0] + 0.9 * steps.discount[0] * value
    got = learner.critic_targets(steps, [tf.constant(a) for a in alphas]).numpy()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert got[0] == pytest.approx(2.0 * steps.reward[0, 0])

    log_pi, q_branches = _np_soft_q_log_policy(_np_critics(learner.critics,
                                                           steps.observation[0]), alphas, sizes)
    entropies = [-(np.exp(lp) * lp).sum(-1) for lp in log_pi]
    target_entropy = [0.2 * np.log(n) for n in sizes]
    expected_alpha_loss = sum(np.log(a) * (h[valid] - t).mean()
                              for a, h, t in zip(alphas, entropies, target_entropy))
    soft_value = sum((np.exp(lp) * (qb - a * lp)).sum(-1)
                     for lp, qb, a in zip(log_pi, q_branches, alphas)) / len(sizes)
    metrics = {k: float(v) for k, v in learner.step(batch).items()}
    assert metrics['losses/actor'] == 0.0
    assert metrics['losses/alpha'] == pytest.approx(expected_alpha_loss, rel=1e-4)
    assert metrics['policy/target_mean'] == pytest.approx(expected[valid].mean(), rel=1e-4)
    assert metrics['policy/value_estimate'] == pytest.approx(soft_value[valid].mean(),
                                                             rel=1e-4)
    for b, h in enumerate(entropies):
        assert metrics[f'policy/entropy_branch_{b}'] == pytest.approx(h[valid].mean(),
                                                                      rel=1e-4)
    # The entropies are far from uniform and from each other's rows (the test can fail).
    assert abs(entropies[0][valid].mean() - np.log(sizes[0])) > 0.05


@pytest.mark.parametrize('name', sorted(BRANCHES))
def test_critic_policy_core_logits_are_min_q_over_alpha(name):
    """The acting core's logits are min over replicas of its own critics' Q / alpha, per
    branch, when acting (`__call__`) and when unrolled; it has no actor variables, and the
    numpy mirror refuses it (actors act through TF)."""
    from reverb_agents.networks.cores import SoftQPolicyHead
    from reverb_agents.networks.numpy_core import NumpyCore
    sizes, alphas = BRANCHES[name], ALPHAS[name]
    learner, space = make_critic_policy_learner(SPACES[name])
    _randomize_critic_policy(learner, alphas)
    core = learner.core
    head = core.parts.policy_head
    assert isinstance(head, SoftQPolicyHead)
    assert head.critics is learner.critics and head.log_alpha is learner.log_alpha
    assert core.parts.torso is head.critics.encoder
    assert {v.ref() for v in core.variables} == (
        {v.ref() for v in learner.critics.variables} | {learner.log_alpha.ref()})
    assert not any('target' in v.name for v in core.variables)

    observation = np.random.default_rng(0).uniform(-1, 1, (B, 3)).astype(np.float32)
    q = _np_critics(head.critics, observation)  # [R, B, sum n], by hand
    expected = np.split(q.min(0), np.cumsum(sizes)[:-1], axis=-1)
    inputs = CoreInputs(observation, tuple(np.zeros([B], np.int32) for _ in sizes),
                        np.zeros([B], np.float32), np.zeros([B], bool))
    out, _ = core(inputs, ())
    for got, qb, a in zip(out.policy_params, expected, alphas):
        np.testing.assert_allclose(got.numpy(), qb / a, rtol=1e-5, atol=1e-5)
    unrolled, _ = core.unroll(tf.nest.map_structure(lambda x: x[None], inputs), ())
    for got, qb, a in zip(unrolled.policy_params, expected, alphas):
        np.testing.assert_allclose(got.numpy()[0], qb / a, rtol=1e-5, atol=1e-5)
    assert not NumpyCore.supports(core)
    with pytest.raises(ValueError, match='SoftQPolicyHead'):
        NumpyCore(core, space, seed=0)


def test_critic_policy_trains_the_cores_critics_and_temperatures_and_checkpoints(
        tmp_path, critic_policy_learners):
    learner, space = critic_policy_learners('multi_discrete')
    batch = make_batch(space)
    before = [v.numpy().copy() for v in learner.core.trainable_variables]
    targets_before = [v.numpy().copy() for v in learner.target_critics.variables]
    for _ in range(3):
        metrics = learner.step(batch)
    assert all(np.isfinite(float(v)) for v in metrics.values())
    # What the actors receive (the core's variables) is what the learner trained.
    assert all(not np.allclose(b, v.numpy()) for b, v in
               zip(before, learner.core.trainable_variables))
    assert all(not np.allclose(b, v.numpy()) for b, v in
               zip(targets_before, learner.target_critics.variables))
    assert learner.actor_optimizer is None
    path = tf.train.Checkpoint(learner=learner).save(str(tmp_path / 'ckpt'))
    # A new learner (its optimiser slots are made when it is built), never stepped.
    restored, _ = make_critic_policy_learner(SPACES['multi_discrete'], discounting=0.9,
                                             reward_scaling=2.0)
    tf.train.Checkpoint(learner=restored).restore(path).assert_consumed()
    for a, b in zip(learner.variables, restored.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert restored.core.parts.policy_head.critics is restored.critics


def test_critic_policy_is_refused_where_alf_has_no_such_policy():
    from reverb_agents.agents import registry
    from reverb_agents.networks.distributions import UnsupportedSpaceError
    with pytest.raises(ValueError, match='discrete_policy'):
        SACConfig(discrete_policy='q')
    with pytest.raises(ValueError, match='lstm_size'):
        SACConfig(discrete_policy='critic', lstm_size=8)
    with pytest.raises(ValueError, match='reward_weights'):
        SACConfig(discrete_policy='critic', reward_weights=(1.0, 1.0), **SAC_FEED_FORWARD)
    for option in (dict(policy_hidden_sizes=(8,)), dict(temperature_unit='action_gap'),
                   dict(temperature_unit='value_with_gap_floor')):
        with pytest.raises(ValueError, match='--policy_hidden_sizes= --temperature_unit=value'):
            SACConfig(**dict(SAC_CRITIC_POLICY, **option), **SAC_FEED_FORWARD)
    config = SACConfig(**SAC_CRITIC_POLICY, **SAC_FEED_FORWARD)
    for name in ('continuous', 'mixed'):
        with pytest.raises(UnsupportedSpaceError, match='discrete_policy'):
            registry.get('sac').build_core(OBS_SPACE, ActionSpace(SPACES[name], squash=True),
                                           config)


def test_entropy_penalty_adds_the_branch_mean_of_the_squared_entropy_gap():
    """Stable Discrete SAC: the actor's loss gains beta times the valid rows' mean of
    (H_mu - H)^2, averaged over the branches, H_mu from the stored acting logits; with
    those logits the policy's own it adds nothing. Checked against numpy."""
    beta = 0.7
    learner, space = make_learner(SPACES['multi_discrete'], entropy_penalty=beta)
    _randomize(learner)
    steps = make_batch(space, seed=3).sequence.steps
    params = [p[0] for p in _logits(learner, steps, slice(0, 1))]  # [B, n_b]
    rng = np.random.default_rng(4)
    behaviour = [rng.normal(0, 2, p.shape).astype(np.float32) for p in params]
    mask = np.ones(B, np.float32)
    mask[1] = 0.0
    obs = steps.observation[0]
    alphas = [tf.constant(0.3), tf.constant(0.6)]

    def actor_loss(acting):
        _, loss, *_ = learner._actor_and_alpha_losses(
            tuple(tf.constant(p) for p in params), tuple(tf.constant(p) for p in acting),
            learner._critic_observation(obs), None, obs, alphas, tf.constant(mask),
            tf.constant(mask.sum()))
        return float(loss)

    gap = np.mean([(_np_entropy(_np_log_softmax(b)) - _np_entropy(_np_log_softmax(p))) ** 2
                   for b, p in zip(behaviour, params)], 0)  # [B]
    expected = beta * (gap * mask).sum() / mask.sum()
    assert expected > 0.01
    np.testing.assert_allclose(actor_loss(behaviour) - actor_loss(params), expected,
                               rtol=1e-4)


def test_slow_entropy_anchor_penalises_the_batch_mean_entropy_and_follows_it():
    """entropy_anchor='slow': the actor's loss gains beta times the branch mean of
    (anchor - the valid rows' mean entropy)^2, the anchor starting at each branch's
    uniform entropy; after a step it has moved tau of the way to that batch's mean
    entropy. Checked against numpy."""
    beta, tau = 0.7, 0.25
    learner, space = make_learner(SPACES['multi_discrete'], entropy_penalty=beta,
                                  entropy_anchor='slow', entropy_anchor_tau=tau)
    _randomize(learner)
    sizes = [leaf.size for leaf in space.leaves]
    np.testing.assert_allclose(learner.entropy_anchor.numpy(), np.log(sizes), rtol=1e-6)
    steps = make_batch(space, seed=3).sequence.steps
    params = [p[0] for p in _logits(learner, steps, slice(0, 1))]  # [B, n_b]
    mask = np.ones(B, np.float32)
    mask[1] = 0.0
    obs = steps.observation[0]
    alphas = [tf.constant(0.3), tf.constant(0.6)]

    def actor_loss():
        _, loss, *_ = learner._actor_and_alpha_losses(
            tuple(tf.constant(p) for p in params), tuple(tf.constant(p) for p in params),
            learner._critic_observation(obs), None, obs, alphas, tf.constant(mask),
            tf.constant(mask.sum()))
        return float(loss)

    means = np.array([(_np_entropy(_np_log_softmax(p)) * mask).sum() / mask.sum()
                      for p in params])
    anchor = np.array([1.0, 0.2], np.float32)  # one branch's anchor above its entropy, one below
    learner.entropy_anchor.assign(anchor)
    with_penalty = actor_loss()
    learner.entropy_anchor.assign(means)  # no gap: no penalty
    expected = beta * np.mean((anchor - means) ** 2)
    assert expected > 0.01
    np.testing.assert_allclose(with_penalty - actor_loss(), expected, rtol=1e-4)

    learner.entropy_anchor.assign(anchor)
    metrics = learner.step(make_batch(space, seed=5))
    stepped = np.array([metrics[f'policy/entropy_branch_{k}'] for k in range(len(sizes))])
    np.testing.assert_allclose(
        [metrics[f'policy/entropy_anchor_branch_{k}'] for k in range(len(sizes))],
        (1 - tau) * anchor + tau * stepped, rtol=1e-5)
    np.testing.assert_allclose(learner.entropy_anchor.numpy(), (1 - tau) * anchor + tau * stepped,
                               rtol=1e-5)


def _np_branch_spreads(learner, observation, mask):
    """Each discrete branch's mean over the rows where `mask` is 1 of the std of the
    online critics' replica-minimum Q over its actions (purely discrete, scalar rewards)."""
    q = learner.critics(observation, tf.zeros([observation.shape[0], 0])).numpy().min(0)
    sizes = learner._branch_sizes
    bounds = np.cumsum([0] + sizes)
    return np.array([(q[:, lo:hi].std(-1) * mask).sum() / mask.sum()
                     for lo, hi in zip(bounds[:-1], bounds[1:])])


def test_action_gap_temperature_scales_each_branchs_alpha_by_the_critics_spread():
    """temperature_unit='action_gap': the actor's loss reports each discrete branch's
    mean spread of the critics' action values over the valid rows; a step's first
    update sets the scale to its batch's spread and the next moves it by tau toward a
    smaller one; the alphas a step uses are exp(log alpha) times the scale (the
    continuous group's of a mixed space untouched). Checked against numpy."""
    tau = 0.25
    learner, space = make_learner(SPACES['multi_discrete'], temperature_unit='action_gap',
                                  action_gap_tau=tau)
    _randomize(learner)
    np.testing.assert_array_equal(learner.action_gap_scale.numpy(), [1.0, 1.0])
    steps = make_batch(space, seed=3).sequence.steps
    params = [p[0] for p in _logits(learner, steps, slice(0, 1))]
    mask = np.ones(B, np.float32)
    mask[1] = 0.0
    obs = steps.observation[0]
    *_, gaps = learner._actor_and_alpha_losses(
        tuple(tf.constant(p) for p in params), tuple(tf.constant(p) for p in params),
        learner._critic_observation(obs), None, obs, learner._alphas(), tf.constant(mask),
        tf.constant(mask.sum()))
    np.testing.assert_allclose(gaps, _np_branch_spreads(learner, obs, mask), rtol=1e-5)

    batch = make_batch(space, seed=5)
    first_mask = 1.0 - batch.sequence.steps.first[1].astype(np.float32)
    expected = _np_branch_spreads(learner, batch.sequence.steps.observation[0], first_mask)
    assert expected.min() > 0.05
    metrics = learner.step(batch)
    np.testing.assert_allclose(
        [metrics[f'policy/action_gap_scale_branch_{k}'] for k in range(2)], expected, rtol=1e-5)
    np.testing.assert_allclose(learner._alphas(), np.exp(learner.log_alpha.numpy()) * expected,
                               rtol=1e-5)
    learner._move_action_gap_scale(tf.constant(expected * [0.5, 2.0], tf.float32))
    np.testing.assert_allclose(learner.action_gap_scale.numpy(),
                               [(1 - tau) * expected[0] + tau * 0.5 * expected[0],
                                2.0 * expected[1]], rtol=1e-5)

    mixed, _ = make_learner(SPACES['mixed'], temperature_unit='action_gap')
    mixed.log_alpha.assign([0.3, -0.2])
    mixed.action_gap_scale.assign([4.0])
    np.testing.assert_allclose(mixed._alphas(), np.exp([0.3, -0.2]) * [1.0, 4.0], rtol=1e-6)


def test_log_alpha_is_clipped_to_its_floor_and_ceiling_after_a_step():
    """min_log_alpha / max_log_alpha clip each temperature after its Adam step;
    action_gap_min_log_alpha floors only the branches measured in action gaps (a mixed
    space's continuous group, in the critics' units, keeps the lower floor); a floor
    above the ceiling is refused."""
    learner, space = make_learner(SPACES['multi_discrete'], min_log_alpha=-0.5,
                                  max_log_alpha=0.25)
    learner.log_alpha.assign([-3.0, 2.0])
    learner.step(make_batch(space, seed=2))
    np.testing.assert_allclose(learner.log_alpha.numpy(), [-0.5, 0.25])
    learner, space = make_learner(SPACES['mixed'], temperature_unit='action_gap',
                                  min_log_alpha=-4.0, action_gap_min_log_alpha=-1.2)
    learner.log_alpha.assign([-6.0, -6.0])  # [continuous, branch_0]
    learner.step(make_batch(space, seed=2))
    np.testing.assert_allclose(learner.log_alpha.numpy(), [-4.0, -1.2])
    for floor in ('min_log_alpha', 'action_gap_min_log_alpha'):
        with pytest.raises(ValueError, match=floor):
            SACConfig(**{floor: 1.0}, max_log_alpha=0.0)


def test_value_temperature_with_a_gap_floor_is_the_larger_of_alpha_and_the_floor():
    """temperature_unit='value_with_gap_floor': a discrete branch's alpha is exp(log
    alpha) in the critics' units, never below exp(action_gap_min_log_alpha) times its
    action-gap scale, and a step leaves log alpha no lower than that floor (with the
    scale the step set); a mixed space's continuous group is untouched; the unit needs
    the floor. Checked against numpy (a floor that stays: no halflife)."""
    learner, space = make_learner(SPACES['mixed'], temperature_unit='value_with_gap_floor',
                                  action_gap_min_log_alpha=-1.2, action_gap_floor_halflife=0.0)
    learner.log_alpha.assign([-6.0, -6.0])  # [continuous, branch_0]
    # Before a batch has set the scale there is no floor.
    np.testing.assert_allclose(learner._alphas(), np.exp([-6.0, -6.0]), rtol=1e-6)
    learner.action_gap_updates.assign(1.0)
    learner.action_gap_scale.assign([4.0])
    np.testing.assert_allclose(learner._alphas(), [np.exp(-6.0), np.exp(-1.2) * 4.0],
                               rtol=1e-6)
    learner.log_alpha.assign([-6.0, 2.0])
    np.testing.assert_allclose(learner._alphas(), np.exp([-6.0, 2.0]), rtol=1e-6)

    learner.log_alpha.assign([-6.0, -6.0])
    metrics = learner.step(make_batch(space, seed=2))
    scale = metrics['policy/action_gap_scale_branch_0']
    assert learner.log_alpha.numpy()[0] < -5.9
    np.testing.assert_allclose(learner.log_alpha.numpy()[1], -1.2 + np.log(scale), rtol=1e-5)
    np.testing.assert_allclose(learner._alphas()[1], np.exp(-1.2) * scale, rtol=1e-5)
    with pytest.raises(ValueError, match='action_gap_min_log_alpha'):
        SACConfig(temperature_unit='value_with_gap_floor', action_gap_min_log_alpha=None)


def test_gap_floor_with_a_halflife_falls_after_the_largest_spread_so_far():
    """action_gap_floor_halflife h: n updates after a batch's spread last set a record,
    the gap floor is exp(action_gap_min_log_alpha) times the scale times h / (h + n); a
    step counts on (or restarts the count with a new record) and clips log alpha up to
    that floor; h < 0 is refused and h = 0 keeps the floor. Checked against numpy."""
    learner, space = make_learner(SPACES['mixed'], temperature_unit='value_with_gap_floor',
                                  action_gap_min_log_alpha=-1.2, action_gap_floor_halflife=4.0)
    learner.log_alpha.assign([-6.0, -6.0])  # [continuous, branch_0]
    learner.action_gap_updates.assign(1.0)
    learner.action_gap_scale.assign([4.0])
    for n, factor in ((0.0, 1.0), (1.0, 0.8), (4.0, 0.5), (12.0, 0.25)):
        learner.action_gap_since_peak.assign([n])
        np.testing.assert_allclose(learner._alphas(), [np.exp(-6.0), np.exp(-1.2) * 4.0 * factor],
                                   rtol=1e-6)
    batch = make_batch(space, seed=2)
    for peak, since in ((1e6, 4.0), (0.0, 0.0)):  # no record, then a record
        learner.action_gap_peak.assign([peak])
        learner.action_gap_since_peak.assign([3.0])
        learner.log_alpha.assign([-6.0, -6.0])
        metrics = learner.step(batch)
        scale = metrics['policy/action_gap_scale_branch_0']
        np.testing.assert_allclose(learner.action_gap_since_peak.numpy(), [since])
        np.testing.assert_allclose(learner.log_alpha.numpy()[1],
                                   -1.2 + np.log(scale) + np.log(4.0 / (4.0 + since)),
                                   rtol=1e-5)
    assert learner.action_gap_peak.numpy()[0] > 0.0
    with pytest.raises(ValueError, match='action_gap_floor_halflife'):
        SACConfig(action_gap_floor_halflife=-1.0)
    # 0: the floor stays, with nothing counted.
    staying, _ = make_learner(SPACES['mixed'], temperature_unit='value_with_gap_floor',
                              action_gap_floor_halflife=0.0)
    assert not hasattr(staying, 'action_gap_since_peak')


def test_entropy_options_are_refused_without_an_actor_or_a_discrete_branch():
    from reverb_agents.agents import registry
    from reverb_agents.networks.distributions import UnsupportedSpaceError
    with pytest.raises(ValueError, match='entropy_penalty'):
        SACConfig(entropy_penalty=-1.0)
    with pytest.raises(ValueError, match='entropy_anchor'):
        SACConfig(entropy_penalty=0.5, entropy_anchor='target')
    with pytest.raises(ValueError, match='entropy_anchor_tau'):
        SACConfig(entropy_penalty=0.5, entropy_anchor='slow', entropy_anchor_tau=0.0)
    with pytest.raises(ValueError, match='entropy_penalty'):
        SACConfig(**SAC_CRITIC_POLICY, entropy_penalty=0.5, **SAC_FEED_FORWARD)
    with pytest.raises(UnsupportedSpaceError, match='entropy_penalty'):
        registry.get('sac').build_core(OBS_SPACE, ActionSpace(SPACES['continuous'], squash=True),
                                       SACConfig(entropy_penalty=0.5))
    with pytest.raises(ValueError, match='temperature_unit'):
        SACConfig(temperature_unit='nats')
    with pytest.raises(ValueError, match='action_gap_tau'):
        SACConfig(temperature_unit='action_gap', action_gap_tau=1.5)


def _soft_values_of_step_one(learner, steps, alpha):
    """`[B, k]`: each reward component's soft value at step 1 of `[2, B]` steps, the
    target critics' replica minimum at a policy action drawn as `critic_targets` draws
    it (after `tf.random.set_seed(11)`), the entropy bonus in every component."""
    tf.random.set_seed(11)
    out, _ = learner.core.unroll(CoreInputs(
        steps.observation[1:], tuple(a[1:] for a in steps.prev_action),
        steps.prev_reward[1:], steps.first[1:]), ())
    action, log_prob, _ = learner._policy((out.policy_params[0][0],))
    q = learner.target_critics(steps.observation[1], action).numpy()  # [R, B, k]
    return q.min(0) - alpha * log_prob.numpy()[:, None]


@pytest.mark.parametrize('episodic', [False, True])
def test_a_non_episodic_signal_runs_on_from_an_episodes_end(episodic):
    """Row 2 holds an episode's final observation (a placeholder: its step 1 is the
    next episode's first). Non-episodic curiosity (the default) is learned there,
    towards reward 0 plus the discounted value of the next episode's first step; the
    environment's component is not. Episodic curiosity is not learned there either."""
    learner, space = make_learner(SPACES['continuous'], discounting=0.9,
                                  signals=SignalsConfig(curiosity_strength=1.0,
                                                        curiosity_gamma=0.5,
                                                        curiosity_episodic=episodic))
    steps = make_batch(space, seed=3).sequence.steps
    steps.first[1, 2] = True
    steps.discount[0, 2] = 0.0  # as the actor writes a placeholder
    signal_rewards = np.random.default_rng(1).uniform(0.5, 1, (1, B, 1)).astype(np.float32)
    tf.random.set_seed(11)
    got = learner.critic_targets(steps, [tf.constant(0.4)],
                                 signal_rewards=signal_rewards).numpy()[0]  # [B, 2]

    value = _soft_values_of_step_one(learner, steps, 0.4)[:, 1]  # curiosity's
    curiosity = signal_rewards[0, :, 0].copy()
    curiosity[2] = 0.0  # the placeholder's action was never taken
    discount = np.ones(B) if not episodic else steps.discount[0]
    np.testing.assert_allclose(got[:, 1], curiosity + 0.5 * discount * value, rtol=1e-4,
                               atol=1e-5)

    mask = learner._critic_mask(tf.constant(1.0 - steps.first[1].astype(np.float32))).numpy()
    expected = np.ones([B, 2], np.float32)
    expected[2] = [0.0, 1.0 if not episodic else 0.0]
    np.testing.assert_array_equal(mask, expected)


def test_reward_signals_are_components_with_their_own_discount(tmp_path, write_episode):
    """Curiosity is a second component: its target discounts by curiosity_gamma (0.5)
    where the environment's uses gamma (0.9), and the actor weighs it by 1."""
    rng = np.random.default_rng(0)
    path = write_episode(tmp_path / 'demos.npz', rng.uniform(-1, 1, (40, 3)).astype(np.float32),
                         rng.uniform(-2, 2, (40, 2)).astype(np.float32), OBS_SPACE,
                         SPACES['continuous'])
    learner, space = make_learner(SPACES['continuous'], discounting=0.9,
                                  signals=SignalsConfig(curiosity_strength=2.0, curiosity_gamma=0.5,
                                                        extrinsic_strength=0.5, bc_demos=path,
                                                        bc_strength=1.0))
    np.testing.assert_allclose(learner._reward_weights.numpy(), [0.5, 1.0])
    steps = make_batch(space, seed=6).sequence.steps
    steps.discount[0, 0] = 0.0
    signal_rewards = rng.uniform(0, 1, (1, B, 1)).astype(np.float32)  # steps 0..T + n - 2
    tf.random.set_seed(11)
    got = learner.critic_targets(steps, [tf.constant(0.4)], signal_rewards=signal_rewards)
    got = got.numpy()[0]  # [B, 2]

    value = _soft_values_of_step_one(learner, steps, 0.4)
    rewards = np.stack([steps.reward[0], signal_rewards[0, :, 0]], -1)
    # Row 0 terminated: the environment's return stops there, curiosity's runs on
    # (non-episodic by default) and stops too with curiosity_episodic.
    discounts = np.stack([steps.discount[0], np.ones(B)], -1)
    expected = rewards + np.array([0.9, 0.5]) * discounts * value
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    learner.config = dataclasses.replace(
        learner.config, signals=dataclasses.replace(learner.config.signals,
                                                    curiosity_episodic=True))
    tf.random.set_seed(11)
    episodic = learner.critic_targets(steps, [tf.constant(0.4)],
                                      signal_rewards=signal_rewards).numpy()[0]
    expected = rewards + np.array([0.9, 0.5]) * steps.discount[0][:, None] * value
    np.testing.assert_allclose(episodic, expected, rtol=1e-4, atol=1e-5)

    metrics = learner.step(make_batch(space))
    for name in signals_config.CURIOSITY_METRICS + signals_config.BC_METRICS:
        assert np.isfinite(float(metrics[name].numpy())), name
    assert learner.pretrain() is None  # no pre-training asked for


def test_policy_average_follows_the_actor_and_is_the_final_policy():
    learner, space = make_learner(SPACES['discrete'], policy_average_tau=0.5)
    no_average, _ = make_learner(SPACES['discrete'], policy_average_tau=0.0)
    assert no_average.final_policy() is None
    check_policy_average(learner, make_batch(space))
    with pytest.raises(ValueError, match='policy_average_tau'):
        SACConfig(policy_average_tau=1.5)
