"""The CLEAR learner step on small hand-made batches.

Tracing a learner's step is most of a test's time here (a step on these batches takes
milliseconds), so tests of one configuration share a learner built once per module and
put back as built (`Rebuilt.fresh`) rather than building and tracing their own.
"""

import re

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents import network_config
from reverb_agents.agents.signals import config as signals_config
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.clear.learning import CLEARLearner
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import demos, trajectory
from reverb_agents.replay.dataset import Batch
from tests.learners import Rebuilt, check_policy_average, numpy_discounted_returns

T, B = 5, 4
OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
METRICS = ['loss/policy_gradient', 'loss/baseline', 'loss/entropy', 'loss/policy_cloning',
           'loss/value_cloning', 'loss/total_loss', 'grad_norm', 'learning_rate', 'entropy_cost']


def make_learner(lstm_size=8, normalize_observations=False, **config):
    action_space = ActionSpace(gym.spaces.Discrete(3))
    config = configs.from_flat(CLEARConfig, dict(lstm_size=lstm_size, hidden_sizes=(8,),
                                                  unroll_length=T, batch_size=B, **config))
    core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(8,), lstm_size=lstm_size,
                           value_normalization=config.value_normalization == 'popart',
                           num_tasks=max(1, config.num_tasks),
                           normalize_observations=normalize_observations)
    core.create_variables()
    return CLEARLearner(core, action_space, config), core, action_space


def make_batch(core, action_space, num_replayed, seed=0, on_policy=True):
    """A batch whose behaviour outputs are the core's own (so rho = 1)."""
    rng = np.random.default_rng(seed)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), action_space.action_specs(),
                                action_space.param_specs())
    steps = trajectory.zeros(spec, (T + 1, B))
    steps = steps._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        action=(rng.integers(0, 3, (T + 1, B)).astype(np.int32),),
        reward=rng.uniform(0, 1, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32),
        first=np.zeros((T + 1, B), bool))
    steps.first[0] = True
    state = core.initial_state(B)
    if on_policy:
        out, _ = core.unroll(CoreInputs(steps.observation, steps.prev_action,
                                        steps.prev_reward, steps.first), state)
        steps = steps._replace(
            behaviour_params=tuple(p.numpy() for p in out.policy_params),
            behaviour_log_prob=action_space.log_prob(out.policy_params, steps.action).numpy(),
            behaviour_baseline=out.baseline.numpy())
    replayed = tf.constant([False] * (B - num_replayed) + [True] * num_replayed)
    return Batch(trajectory.Sequence(steps, state), replayed)


@pytest.fixture(scope='module')
def recurrent():
    return Rebuilt(make_learner)


@pytest.fixture
def shared(recurrent):
    """The module's recurrent learner of the default configuration, as built."""
    return recurrent.fresh()


@pytest.fixture(scope='module')
def feedforward():
    """No LSTM, observations normalised (the configuration's default)."""
    return Rebuilt(make_learner, 0, normalize_observations=True)


@pytest.fixture(scope='module')
def popart_learner():
    """PopArt on raw rewards, statistics moved fully to each batch (step size 1)."""
    return Rebuilt(make_learner, 0, reward_clipping='none', popart_step_size=1.0)


@pytest.mark.parametrize('lstm_size', [8, 0])
def test_every_metric_is_a_finite_scalar(lstm_size, shared, feedforward):
    learner, core, space = shared if lstm_size else feedforward.fresh()
    steps_before = int(learner.num_steps.numpy())
    metrics = learner.step(make_batch(core, space, num_replayed=2))
    for name in METRICS:
        assert metrics[name].shape == (), name
        assert np.isfinite(metrics[name].numpy()), name
    assert int(learner.num_steps.numpy()) == steps_before + 1


def test_cloning_losses_vanish_without_replayed_rows(shared):
    learner, core, space = shared
    metrics = learner.step(make_batch(core, space, num_replayed=0))
    assert metrics['loss/policy_cloning'].numpy() == 0.0
    assert metrics['loss/value_cloning'].numpy() == 0.0


def test_cloning_losses_vanish_when_behaviour_equals_current(shared):
    learner, core, space = shared
    metrics = learner.step(make_batch(core, space, num_replayed=B))
    np.testing.assert_allclose(metrics['loss/policy_cloning'].numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(metrics['loss/value_cloning'].numpy(), 0.0, atol=1e-8)


def test_cloning_losses_positive_with_stale_behaviour(shared):
    learner, core, space = shared
    batch = make_batch(core, space, num_replayed=2, on_policy=False)  # mu: logits 0, V_mu 0
    metrics = learner.step(batch)
    assert metrics['loss/policy_cloning'].numpy() > 0
    assert metrics['loss/value_cloning'].numpy() > 0


def test_env_frames_count_fresh_rows_only(shared):
    learner, core, space = shared
    before = int(learner.num_env_frames.numpy())
    learner.step(make_batch(core, space, num_replayed=3))
    assert int(learner.num_env_frames.numpy()) - before == T * (B - 3)


def test_placeholder_steps_contribute_nothing(shared):
    """Action and reward at a step followed by `first` (a final observation) are ignored."""
    learner_a, core_a, space = shared
    learner_a.learning_rate.assign(0.0)  # both steps see the same weights
    head = core_a.parts.baseline_head
    head_values = [v.numpy() for v in head.variables]  # PopArt rescales w, b
    batch = make_batch(core_a, space, num_replayed=0)
    steps = batch.sequence.steps
    steps.first[3, 1] = True  # step 2 of env 1 holds a final observation
    metrics_a = learner_a.step(batch)
    for variable, value in zip(head.variables, head_values):
        variable.assign(value)  # and the same PopArt statistics
    steps.reward[2, 1] = 100.0
    steps.action[0][2, 1] = (steps.action[0][2, 1] + 1) % 3
    metrics_b = learner_a.step(batch)
    for name in ['loss/policy_gradient', 'loss/baseline', 'loss/entropy', 'loss/total_loss']:
        np.testing.assert_allclose(metrics_a[name].numpy(), metrics_b[name].numpy(),
                                   rtol=1e-5, err_msg=name)


def test_linear_learning_rate_schedule(shared):
    learner, _, _ = shared
    learner.set_progress(0.25)
    np.testing.assert_allclose(learner.learning_rate.numpy(), 0.75 * learner.config.optimizer.learning_rate)
    learner.set_progress(2.0)
    assert learner.learning_rate.numpy() == 0.0
    learner.set_progress(0.0)


@pytest.fixture(scope='module')
def undiscounted():
    """`undiscounted(reward_scaling, reward_clipping)`: as built, a learner without LSTM
    or discounting, values in the reward's units (PopArt's normalised loss changes units
    as sigma moves), no entropy bonus; one per reward transform, built when first asked
    for. With discount 0 the V-trace target is the transformed reward itself."""
    built = {}

    def get(scaling, clipping):
        if (scaling, clipping) not in built:
            built[scaling, clipping] = Rebuilt(
                make_learner, 0, discounting=0.0, reward_scaling=scaling, reward_clipping=clipping,
                entropy_cost=0.0, value_normalization='none')
        return built[scaling, clipping].fresh()

    return get


def test_steps_fit_the_baseline_to_rewards_without_discounting(undiscounted):
    # A fixed regression target (with discounting, bootstrapping on a fixed random batch
    # need not converge): here 0.5 r, rewards in [0, 1).
    learner, core, space = undiscounted(0.5, 'abs_one')
    learner.learning_rate.assign(1e-2)
    batch = make_batch(core, space, num_replayed=0)
    first = float(learner.step(batch)['loss/baseline'].numpy())
    for _ in range(30):
        last = float(learner.step(batch)['loss/baseline'].numpy())
    assert last < 0.2 * first


@pytest.mark.parametrize('scaling, clipping', [(0.5, 'abs_one'), (1.0, 'none'), (0.1, 'soft_asymmetric')])
def test_rewards_are_scaled_then_clipped_as_in_the_seed(scaling, clipping, undiscounted):
    # With discount 0 the V-trace target is the transformed reward, so the baseline
    # loss is 0.5 * sum (f(r) - V)^2 over valid steps with f the seed's transform:
    # clip(scaling * r). Rewards of 3 and -4 tell the orders apart (clip-then-scale
    # gives 0.5 and -0.5 for abs_one at 0.5; the seed gives 1 and -1).
    learner, core, space = undiscounted(scaling, clipping)
    batch = make_batch(core, space, num_replayed=0)
    steps = batch.sequence.steps
    reward = np.where(np.arange(B)[None] % 2 == 0, 3.0, -4.0) * np.ones((T + 1, B))
    batch = Batch(trajectory.Sequence(steps._replace(reward=reward.astype(np.float32)),
                                      batch.sequence.core_state), batch.replayed)
    scaled = scaling * reward[:-1]
    if clipping == 'abs_one':
        expected_r = np.clip(scaled, -1.0, 1.0)
    elif clipping == 'soft_asymmetric':
        squeezed = np.tanh(scaled / 5.0)
        expected_r = np.where(scaled < 0, 0.3 * squeezed, squeezed) * 5.0
    else:
        expected_r = scaled
    out, _ = core.unroll(CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                                    steps.first), batch.sequence.core_state)
    v = out.baseline.numpy()[:-1]
    mask = trajectory.valid_mask(tf.constant(steps.first)).numpy()
    expected = 0.5 * np.sum(mask * (expected_r - v) ** 2)
    got = learner.step(batch)['loss/baseline'].numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def _set_statistics(head, mean, std):
    head.mean.assign([mean])
    head.second_moment.assign([std ** 2 + mean ** 2])


def test_popart_targets_losses_and_statistics_match_numpy(popart_learner):
    """On-policy (rho = 1), lambda 1: V-trace's targets are the discounted returns
    bootstrapped from V, in the reward's units; the baseline loss compares them
    with V in sigma units; the statistics then move to the targets' moments."""
    learner, core, space = popart_learner.fresh()
    head = core.parts.baseline_head
    _set_statistics(head, 2.0, 3.0)
    batch = make_batch(core, space, num_replayed=0)
    steps = batch.sequence.steps
    out, _ = core.unroll(CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                                    steps.first), batch.sequence.core_state)
    v = out.baseline.numpy()
    vs = numpy_discounted_returns(steps.reward[:-1], 0.99 * steps.discount[:-1], v[-1])
    expected = 0.5 * np.sum(((vs - 2.0) / 3.0 - (v[:-1] - 2.0) / 3.0) ** 2)
    metrics = learner.step(batch)
    np.testing.assert_allclose(metrics['loss/baseline'].numpy(), expected, rtol=1e-4)
    # A step size of 1 and a first update: the batch's own moments.
    np.testing.assert_allclose(metrics['popart/mean'].numpy(), vs.mean(), rtol=1e-4)
    np.testing.assert_allclose(metrics['popart/std'].numpy(), vs.std(), rtol=1e-3)


def test_per_task_popart_puts_each_step_in_its_tasks_units():
    """Two tasks in one batch (columns 0-1 task 0, rewards x1; 2-3 task 1, x100): each
    step's baseline loss is in its own task's sigma units, the advantages too (the
    policy loss is the same as with both tasks at x1), and each task's statistics
    move to its own targets' moments (a first update: the batch's own)."""
    task = np.tile(np.array([0, 0, 1, 1], np.int32), (T + 1, 1))
    scale = np.where(task == 1, 100.0, 1.0).astype(np.float32)
    results = []
    rebuilt = Rebuilt(make_learner, 0, reward_clipping='none', popart_step_size=1.0,
                      num_tasks=2)
    for rewards_scale in (scale, np.ones_like(scale)):
        learner, core, space = rebuilt.fresh()  # the same start for both
        head = core.parts.baseline_head
        head.b.assign(head.b * 0.0)  # values 0 at first, whatever the task's scale
        stats = (np.array([2.0, 2.0 * rewards_scale[0, 2]]),
                 np.array([3.0, 3.0 * rewards_scale[0, 2]]))
        head.mean.assign(stats[0])
        head.second_moment.assign(stats[1] ** 2 + stats[0] ** 2)
        batch = make_batch(core, space, num_replayed=0)
        steps = batch.sequence.steps
        steps = steps._replace(task=task, reward=steps.reward * rewards_scale)
        out, _ = core.unroll(CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                                        steps.first, steps.task), batch.sequence.core_state)
        v = out.baseline.numpy()
        vs = numpy_discounted_returns(steps.reward[:-1], 0.99 * steps.discount[:-1], v[-1])
        mu, sigma = stats[0][task[:-1]], stats[1][task[:-1]]
        expected = 0.5 * np.sum(((vs - mu) / sigma - (v[:-1] - mu) / sigma) ** 2)
        metrics = learner.step(Batch(trajectory.Sequence(steps, batch.sequence.core_state),
                                     batch.replayed))
        results.append((metrics, expected, vs))
    (metrics, expected, vs), (unscaled, _, _) = results
    np.testing.assert_allclose(metrics['loss/baseline'].numpy(), expected, rtol=1e-4)
    for name in ('loss/baseline', 'loss/policy_gradient'):
        np.testing.assert_allclose(metrics[name].numpy(), unscaled[name].numpy(), rtol=1e-3,
                                   atol=1e-6, err_msg=name)
    for k, columns in ((0, slice(0, 2)), (1, slice(2, 4))):
        np.testing.assert_allclose(metrics[f'popart/task{k}/mean'].numpy(),
                                   vs[:, columns].mean(), rtol=1e-4)
        np.testing.assert_allclose(metrics[f'popart/task{k}/std'].numpy(),
                                   vs[:, columns].std(), rtol=1e-3)
    assert float(metrics['popart/mean']) == float(metrics['popart/task0/mean'])


def test_popart_learns_the_same_update_at_any_reward_scale(popart_learner):
    """Rewards x100 with statistics x100 give the same normalised losses, the same
    update of every trainable weight, and statistics x100."""
    results = []
    for scale in (1.0, 100.0):
        learner, core, space = popart_learner.fresh()  # the same weights for both
        learner.learning_rate.assign(1e-2)
        _set_statistics(core.parts.baseline_head, 2.0 * scale, 3.0 * scale)
        batch = make_batch(core, space, num_replayed=2)
        steps = batch.sequence.steps
        batch = Batch(trajectory.Sequence(
            steps._replace(reward=steps.reward * np.float32(scale)),
            batch.sequence.core_state), batch.replayed)
        metrics = learner.step(batch)
        results.append(([v.numpy() for v in core.trainable_variables], metrics))
    (weights_a, metrics_a), (weights_b, metrics_b) = results
    for name in ('loss/baseline', 'loss/policy_gradient', 'loss/value_cloning'):
        np.testing.assert_allclose(metrics_a[name].numpy(), metrics_b[name].numpy(),
                                   rtol=1e-3, atol=1e-6, err_msg=name)
    for a, b, v in zip(weights_a, weights_b, core.trainable_variables):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=v.name)
    np.testing.assert_allclose(100.0 * metrics_a['popart/std'].numpy(),
                               metrics_b['popart/std'].numpy(), rtol=1e-4)


def test_discounted_returns_match_a_numpy_loop():
    from reverb_agents.agents import returns
    rng = np.random.default_rng(3)
    rewards = rng.normal(size=(7, 5)).astype(np.float32)
    discounts = (0.9 * (rng.uniform(size=(7, 5)) > 0.2)).astype(np.float32)  # some ends
    bootstrap = rng.normal(size=5).astype(np.float32)
    np.testing.assert_allclose(
        returns.discounted_returns(rewards, discounts, bootstrap).numpy(),
        numpy_discounted_returns(rewards, discounts, bootstrap), rtol=1e-5)


def _numpy_gae(rewards, discounts, values, bootstrap, lambda_):
    """A_t = sum_k (prod_{i<k} d_{t+i} lambda) delta_{t+k}, summed term by term."""
    T, B = rewards.shape
    v_next = np.concatenate([values[1:], bootstrap[None]])
    delta = rewards + discounts * v_next - values
    out = np.zeros_like(rewards)
    for b in range(B):
        for t in range(T):
            weight = 1.0
            for k in range(t, T):
                out[t, b] += weight * delta[k, b]
                weight *= discounts[k, b] * lambda_
    return out


@pytest.mark.parametrize('lambda_', [0.0, 0.8, 1.0])
def test_generalized_advantages_match_a_numpy_sum_across_episode_ends(lambda_):
    from reverb_agents.agents import returns
    rng = np.random.default_rng(4)
    rewards = rng.normal(size=(9, 4))
    discounts = 0.9 * (rng.uniform(size=(9, 4)) > 0.25)  # terminations inside the unroll
    values, bootstrap = rng.normal(size=(9, 4)), rng.normal(size=4)
    got = returns.generalized_advantages(rewards, discounts, values, bootstrap, lambda_).numpy()
    np.testing.assert_allclose(got, _numpy_gae(rewards, discounts, values, bootstrap, lambda_),
                               rtol=1e-10, atol=1e-10)
    if lambda_ == 1.0:  # A + V is the Monte-Carlo return
        np.testing.assert_allclose(got + values, numpy_discounted_returns(
            rewards, discounts, bootstrap), rtol=1e-10)


def test_gae_learner_fits_its_values_and_anneals_the_entropy_weight():
    tf.random.set_seed(0)
    # Values in the reward's units (no PopArt), so the baseline loss compares across steps.
    learner, core, space = make_learner(0, advantage='gae', gae_lambda=0.9, entropy_cost=0.05,
                                        entropy_cost_final=0.01, entropy_anneal_steps=4,
                                        value_normalization='none', learning_rate=5e-3)
    batch = make_batch(core, space, num_replayed=2)
    metrics = [learner.step(batch) for _ in range(60)]
    # Linear over learner steps from 0.05 to 0.01, then held.
    np.testing.assert_allclose([float(m['entropy_cost']) for m in metrics[:6]],
                               [0.05, 0.04, 0.03, 0.02, 0.01, 0.01], atol=1e-6)
    assert all(np.isfinite(float(v)) for m in metrics for v in m.values())
    # The baseline fits the batch's lambda-returns (the policy's side: the V-trace
    # learner tests; GAE changes only the advantages it is given).
    baseline = [float(m['loss/baseline']) for m in metrics]
    assert baseline[-1] < 0.9 * baseline[0], baseline


@pytest.mark.parametrize('overrides,message', [
    (dict(advantage='td'), 'advantage must be one of'),
    (dict(gae_lambda=1.5), 'gae_lambda must be in [0, 1]'),
    (dict(entropy_anneal_steps=10), 'entropy annealing needs both'),
    (dict(entropy_cost_final=0.0), 'entropy annealing needs both'),
])
def test_bad_advantage_and_annealing_settings(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CLEARConfig(**overrides)


def _policy_variables(core):
    """Everything the policy's output depends on: all but the baseline head."""
    baseline = {id(v) for v in core.parts.baseline_head.variables}
    return [v for v in core.variables if id(v) not in baseline]


def _mc_error(learner, core, batch):
    """Mean squared error of the baseline to the batch's Monte-Carlo returns (numpy)."""
    steps = batch.sequence.steps
    out, _ = core.unroll(CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                                    steps.first), batch.sequence.core_state)
    v = out.baseline.numpy()
    config = learner.config
    r = np.clip(steps.reward[:-1] * config.reward_scaling, -1, 1)
    g = numpy_discounted_returns(r, steps.discount[:-1] * config.discounting, v[-1])
    return float(np.mean((g - v[:-1]) ** 2))


def test_critic_pretraining_moves_only_the_baseline_then_learning_goes_on():
    # With an LSTM: everything but the baseline head (torso, memory, policy head) stays
    # bit-identical; a core without one has a subset of those variables and the same step.
    learner, core, action_space = make_learner(8, critic_pretrain_steps=30, learning_rate=0.05)
    batch = make_batch(core, action_space, num_replayed=2)
    # Episodes end at the last step: the targets are pure Monte-Carlo returns, a fixed
    # regression target (a bootstrapped one moves with the baseline it trains).
    batch.sequence.steps.discount[T - 1] = 0.0
    policy_before = [v.numpy().copy() for v in _policy_variables(core)]
    error_before = _mc_error(learner, core, batch)
    for step in range(30):
        assert learner.phase() == 'critic_pretrain'
        metrics = learner.step(batch)
        assert sorted(metrics) == sorted(['critic_pretrain/baseline_loss',
                                          'critic_pretrain/grad_norm',
                                          'critic_pretrain/learning_rate',
                                          'popart/mean', 'popart/std'])
        assert all(np.isfinite(float(m)) for m in metrics.values())
    for before, v in zip(policy_before, _policy_variables(core)):
        np.testing.assert_array_equal(before, v.numpy())  # bit-identical
    assert _mc_error(learner, core, batch) < 0.5 * error_before
    assert int(learner.num_steps.numpy()) == 30  # counted: a checkpoint resumes the phase
    assert learner.phase() == 'learn'
    metrics = learner.step(batch)
    assert set(METRICS) <= set(metrics)
    assert any(not np.array_equal(b, v.numpy())
               for b, v in zip(policy_before, _policy_variables(core)))


def test_critic_pretraining_of_all_variables_moves_torso_and_lstm():
    """`critic_pretrain_variables='all'`: the seed's gradient of the baseline loss with
    respect to every trainable variable. The torso and the LSTM move with the baseline
    head, the policy head gets no gradient, and the baseline fits the returns."""
    assert CLEARConfig().critic_pretrain.critic_pretrain_variables == 'baseline'
    learner, core, action_space = make_learner(8, critic_pretrain_steps=30, learning_rate=0.05,
                                               critic_pretrain_variables='all')
    batch = make_batch(core, action_space, num_replayed=2)
    batch.sequence.steps.discount[T - 1] = 0.0  # pure Monte-Carlo returns, as above
    parts = core.parts
    moving = {'torso': parts.torso.variables, 'lstm': parts.memory.variables,
              'baseline_head': parts.baseline_head.trainable_variables}
    before = {name: [v.numpy().copy() for v in vs] for name, vs in moving.items()}
    policy_head = [v.numpy().copy() for v in parts.policy_head.variables]
    error_before = _mc_error(learner, core, batch)
    for _ in range(30):
        assert learner.phase() == 'critic_pretrain'
        metrics = learner.step(batch)
        assert all(np.isfinite(float(m)) for m in metrics.values())
    for name, vs in moving.items():
        assert all(not np.array_equal(b, v.numpy()) for b, v in zip(before[name], vs)), name
    for b, v in zip(policy_head, parts.policy_head.variables):
        np.testing.assert_array_equal(b, v.numpy())
    assert _mc_error(learner, core, batch) < 0.5 * error_before
    assert learner.phase() == 'learn'
    assert set(METRICS) <= set(learner.step(batch))


def test_critic_pretrain_variables_is_checked():
    with pytest.raises(ValueError, match='critic_pretrain_variables'):
        configs.from_flat(CLEARConfig, {'critic_pretrain_variables': 'torso'})


def test_a_restored_learner_resumes_in_its_phase(tmp_path):
    learner, core, action_space = make_learner(0, critic_pretrain_steps=3)
    batch = make_batch(core, action_space, num_replayed=0)
    learner.step(batch)
    path = tf.train.Checkpoint(learner=learner).save(str(tmp_path / 'ckpt'))
    restored, _, _ = make_learner(0, critic_pretrain_steps=3)
    tf.train.Checkpoint(learner=restored).restore(path).assert_existing_objects_matched()
    assert restored.phase() == 'critic_pretrain'
    restored.num_steps.assign(3)
    assert restored.phase() == 'learn'


def test_reward_signals_learn_in_the_step_with_their_own_value_outputs(tmp_path, write_episode):
    rng = np.random.default_rng(0)
    path = write_episode(tmp_path / 'demos.npz', rng.uniform(-1, 1, (50, 3)).astype(np.float32),
                         rng.integers(0, 3, 50), OBS_SPACE, gym.spaces.Discrete(3))
    # No LSTM: the signals do not depend on it (cloning over recurrent windows is
    # the BC pre-training test's).
    learner, core, space = make_learner(
        0, curiosity_strength=0.5, curiosity_gamma=0.9, gail_strength=0.5, gail_gamma=0.5,
        gail_demos=path, bc_demos=path, bc_strength=0.5)
    names = METRICS + list(signals_config.CURIOSITY_METRICS + signals_config.GAIL_METRICS
                           + signals_config.BC_METRICS)
    values_before = [v.numpy().copy() for v in learner.signal_values.trainable_variables]
    icm_before = learner.signals.curiosity.trainable_variables[0].numpy().copy()
    metrics = learner.step(make_batch(core, space, num_replayed=2))
    for name in names:
        assert metrics[name].shape == () and np.isfinite(metrics[name].numpy()), name
    assert learner.signal_values(tf.zeros([1, core.features_size])).shape == (1, 2)
    for old, new in zip(values_before, learner.signal_values.trainable_variables):
        assert not np.allclose(old, new.numpy())
    assert not np.allclose(icm_before, learner.signals.curiosity.trainable_variables[0].numpy())
    assert metrics['bc/strength'].numpy() == 0.5

    # The signals' models, optimisers, values and pre-training count are checkpointed.
    learner.signals.pretrained_steps.assign(7)
    saved = tf.train.Checkpoint(learner=learner).save(str(tmp_path / 'ckpt'))
    restored, _, _ = make_learner(
        0, curiosity_strength=0.5, curiosity_gamma=0.9, gail_strength=0.5, gail_gamma=0.5,
        gail_demos=path, bc_demos=path, bc_strength=0.5)
    tf.train.Checkpoint(learner=restored).restore(saved).assert_existing_objects_matched()
    for get in (lambda l: l.signal_values, lambda l: l.signals.curiosity,
                lambda l: l.signals.gail):  # models (optimiser slots restore when built)
        for a, b in zip(get(learner).variables, get(restored).variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
    assert int(restored.signals.pretrained_steps.numpy()) == 7
    # None of it is in the acting core that actors run and the export writes.
    assert not {v.ref() for v in learner.signals.variables} & {v.ref() for v in core.variables}


@pytest.mark.parametrize('num_tasks', [2, 1])
def test_signal_values_have_statistics_per_task(num_tasks):
    """With one value output per task, each intrinsic component's value has one set of
    PopArt statistics per task, moved by that task's targets only (a first update with
    step size 1: the task's own moments); with one for all, every step moves the one
    set whatever its task. A step on a batch of both tasks runs either way."""
    learner, core, space = make_learner(0, curiosity_strength=1.0, popart_step_size=1.0,
                                        num_tasks=num_tasks)
    head = learner.signal_values
    assert head.output_size == num_tasks and head.groups == num_tasks
    rng = np.random.default_rng(0)
    task = np.tile(np.array([0, 0, 1, 1], np.int32), (T, 1))
    signal_vs = np.where(task == 1, rng.normal(100.0, 10.0, (T, B)),
                         rng.normal(1.0, 1.0, (T, B))).astype(np.float32)[..., None]
    features = tf.constant(rng.normal(size=(6, core.features_size)), tf.float32)
    before = head(features).numpy()
    learner._update_statistics(tf.zeros([T, B]), tf.ones([T, B]), tf.constant(task),
                               tf.constant(signal_vs))
    np.testing.assert_allclose(head(features).numpy(), before, rtol=1e-4, atol=1e-4)
    mean, std = (x.numpy() for x in head.statistics())
    groups = [signal_vs[task == k] for k in (0, 1)] if num_tasks == 2 else [signal_vs]
    for k, targets in enumerate(groups):
        np.testing.assert_allclose(mean[k], targets.mean(), rtol=1e-4)
        np.testing.assert_allclose(std[k], targets.std(), rtol=1e-3)

    batch = make_batch(core, space, num_replayed=2)
    steps = batch.sequence.steps._replace(task=np.tile(task[:1], (T + 1, 1)))
    metrics = learner.step(Batch(trajectory.Sequence(steps, batch.sequence.core_state),
                                 batch.replayed))
    assert all(np.isfinite(m.numpy()).all() for m in metrics.values())


def test_extrinsic_strength_zero_ignores_the_environment_reward():
    learner, core, space = make_learner(0, extrinsic_strength=0.0, curiosity_strength=1.0)
    learner.learning_rate.assign(0.0)
    batch = make_batch(core, space, num_replayed=0)
    tf.random.set_seed(0)
    first = learner.step(batch)
    batch.sequence.steps.reward[:] = 100.0
    second = learner.step(batch)
    # ICM trains with its own optimiser, so only the extrinsic part can be compared: the
    # baseline's targets (vs = V there) and hence its loss on the extrinsic component
    # must not see the reward at all. With the reward counted they would be ~1e4.
    assert second['loss/baseline'].numpy() < 100.0
    assert first['loss/baseline'].numpy() < 100.0


def test_bc_pretraining_imitates_demonstrations_before_any_interaction(cartpole_rule_demos):
    path = cartpole_rule_demos
    env = gym.make('CartPole-v1')
    action_space = ActionSpace(env.action_space)
    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=8, hidden_sizes=(32,), unroll_length=10, batch_size=16, bc_demos=path,
        bc_pretrain_steps=300, learning_rate=3e-3))
    core = ActorCriticCore(env.observation_space, action_space, hidden_sizes=(32,), lstm_size=8)
    core.create_variables()
    learner = CLEARLearner(core, action_space, config)
    assert learner.pretrain() < 0.3  # the last BC loss (nats)
    assert int(learner.signals.pretrained_steps.numpy()) == 300
    assert int(learner.num_steps.numpy()) == 0  # pre-training is not learning from the env
    assert learner.pretrain() is None  # done once, also after a restore
    # The core now follows the rule on the demonstrations, step by step from its start.
    steps = demos.transitions(demos.load_demos(path))
    inputs = CoreInputs(steps['observation'][:, None], (steps['prev_action'][:, None],),
                        steps['prev_reward'][:, None], steps['first'][:, None])
    # Compiled: unrolled eagerly, the loop over the 2500 steps takes seconds.
    outputs, _ = tf.function(core.unroll, autograph=False)(inputs, core.initial_state(1))
    greedy = action_space.mode(outputs.policy_params)[0].numpy()[:, 0]
    assert np.mean(greedy == steps['action']) > 0.9  # the rule is ambiguous near 0


def test_observation_normalisation_follows_the_batches(feedforward):
    """`normalize` (the default): the core standardises vector observations with
    statistics each step updates from its batch before learning from it."""
    learner, core, action_space = feedforward.fresh()
    config = learner.config
    assert config.normalize and network_config.normalizes(config.normalize, OBS_SPACE)
    assert configs.from_flat(CLEARConfig, {}).normalize
    batch = make_batch(core, action_space, num_replayed=0)
    observation = batch.sequence.steps.observation * 1000.0 + 50.0
    batch = Batch(trajectory.Sequence(batch.sequence.steps._replace(observation=observation),
                                      batch.sequence.core_state), batch.replayed)
    learner.step(batch)
    normalizer = core.parts.normalizer
    np.testing.assert_allclose(normalizer.mean.numpy(),
                               observation[:-1].reshape(-1, 3).mean(0), rtol=1e-4)
    assert float(normalizer.count.numpy()) == T * B


def test_only_vector_observations_are_normalised():
    image = gym.spaces.Box(0, 255, (8, 8, 1), np.uint8)
    mapping = gym.spaces.Dict({'x': OBS_SPACE})
    assert network_config.normalizes(True, OBS_SPACE)
    assert not network_config.normalizes(True, image) and not network_config.normalizes(True, mapping)
    assert not network_config.normalizes(False, OBS_SPACE)


def test_policy_average_is_off_by_default_and_is_the_final_policy_when_set():
    learner, _, _ = make_learner()
    assert learner.policy_average is None and learner.final_policy() is None
    learner, core, action_space = make_learner(policy_average_tau=0.5)
    check_policy_average(learner, make_batch(core, action_space, num_replayed=B // 2))
