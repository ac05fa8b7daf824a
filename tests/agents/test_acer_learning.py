"""The ACER learner step on small hand-made batches.

Tracing a learner's step is most of a test's time here, so a test that compares two
steps of one configuration takes both with one learner, put back as built in between
(`Rebuilt.fresh`), rather than building and tracing a second.
"""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents.acer import losses as acer_losses
from reverb_agents.agents.acer.agent import ACER
from reverb_agents.agents.acer.config import ACERConfig
from reverb_agents.agents.acer.learning import ACERLearner
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import observation_spec
from reverb_agents.networks.shadowed import ShadowedCore
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch
from tests.learners import Rebuilt, check_policy_average

T, B, A = 5, 4, 3
OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
METRICS = ['loss/policy', 'loss/q', 'loss/total_loss', 'average_value', 'average_entropy',
           'average_kl', 'mean_rho', 'fraction_truncated', 'grad_norm', 'learning_rate']


def make_learner(lstm_size=8, **config):
    action_space = ActionSpace(gym.spaces.Discrete(A))

    config = configs.from_flat(ACERConfig, dict(lstm_size=lstm_size, hidden_sizes=(8,),
                                                 unroll_length=T, batch_size=B, **config))

    def make_core():
        # As the agent builds it: Q head, no value head (V = sum_a pi(a) Q(a)); with
        # 'acted' the average network is the core's shadow.
        core_class = (ShadowedCore if config.average_network_state == 'acted'
                      else ActorCriticCore)
        core = core_class(OBS_SPACE, action_space, hidden_sizes=(8,), lstm_size=lstm_size,
                          num_q_values=A, baseline=False,
                          value_normalization=config.value_normalization == 'popart',
                          num_tasks=max(1, config.num_tasks))
        core.create_variables()
        return core

    core = make_core()
    return ACERLearner(core, action_space, config, make_core), core, action_space


def make_batch(core, action_space, seed=0):
    rng = np.random.default_rng(seed)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), action_space.action_specs(),
                                action_space.param_specs())
    steps = trajectory.zeros(spec, (T + 1, B))
    steps = steps._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        action=(rng.integers(0, A, (T + 1, B)).astype(np.int32),),
        reward=rng.uniform(0, 1, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32),
        first=np.zeros((T + 1, B), bool),
        behaviour_params=(rng.normal(size=(T + 1, B, A)).astype(np.float32),))
    steps.first[0] = True
    return Batch(trajectory.Sequence(steps, core.initial_state(B)), tf.constant([False] * B))


@pytest.fixture(scope='module')
def recurrent():
    """The default configuration (the average network unrolls from the stored state),
    seeded so that its initial weights do not depend on the tests run before."""
    tf.random.set_seed(0)
    return Rebuilt(make_learner)


@pytest.fixture
def shared(recurrent):
    return recurrent.fresh()


def test_every_metric_is_a_finite_scalar(shared):
    learner, core, space = shared
    metrics = learner.step(make_batch(core, space))
    for name in METRICS:
        assert metrics[name].shape == (), name
        assert np.isfinite(metrics[name].numpy()), name


def test_average_network_moves_towards_the_network(shared):
    learner, core, space = shared
    before = [v.numpy() for v in learner.average_core.variables]
    learner.step(make_batch(core, space, seed=1))
    alpha = learner.config.trust_region_alpha
    for b, average, variable in zip(before, learner.average_core.variables, core.variables):
        np.testing.assert_allclose(average.numpy(), alpha * b + (1 - alpha) * variable.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_baseline_head_is_not_trained(shared):
    learner, core, space = shared
    heads = [v for v in core.variables if 'baseline_head' in v.name]
    before = [v.numpy() for v in heads]
    learner.step(make_batch(core, space, seed=2))
    for b, v in zip(before, heads):
        np.testing.assert_array_equal(b, v.numpy())


@pytest.fixture(scope='module')
def undiscounted():
    """No LSTM, no discounting, no entropy bonus, Q in the reward's units (PopArt's
    normalised loss changes units as sigma moves), rewards scaled by 0.5 then clipped
    to [-1, 1]. Seeded, so the initial weights do not depend on the tests run before
    in the worker (one order ended at 0.22 of the first loss)."""
    tf.random.set_seed(0)
    return Rebuilt(make_learner, 0, learning_rate=1e-2, discounting=0.0, beta=0.0,
                   value_normalization='none', reward_clipping='abs_one', reward_scaling=0.5)


def test_q_values_fit_rewards_without_discounting(undiscounted):
    # Seeds 0-5 of the initial weights end at 0.06-0.07 of the first loss.
    learner, core, space = undiscounted.fresh()
    batch = make_batch(core, space)  # rewards in [0, 1): targets 0.5 r
    first = float(learner.step(batch)['loss/q'].numpy())
    for _ in range(40):
        last = float(learner.step(batch)['loss/q'].numpy())
    assert last < 0.2 * first


def _set_statistics(head, mean, std):
    head.mean.assign(np.broadcast_to(mean, [head.groups]))
    head.second_moment.assign(np.broadcast_to(np.square(std) + np.square(mean), [head.groups]))


@pytest.mark.parametrize('num_tasks', [1, 2])
def test_popart_learns_the_same_update_at_any_reward_scale(num_tasks):
    """Rewards x100 with the Q head's statistics x100: the same normalised Q loss and
    policy loss, the same update of every trainable weight, statistics x100. With a
    Q block per task, the same when only task 1's columns (and statistics) are x100."""
    results = []
    task = np.tile(np.array([0, 0, 1, 1], np.int32) if num_tasks == 2 else np.zeros(B, np.int32),
                   (T + 1, 1))
    rebuilt = Rebuilt(make_learner, 0, learning_rate=1e-2, num_tasks=num_tasks)
    for scale in (1.0, 100.0):
        learner, core, space = rebuilt.fresh()  # the same start for both
        task_scale = np.array([1.0, scale])[-num_tasks:]  # x100: the last task's
        _set_statistics(core.parts.q_head, 2.0 * task_scale, 3.0 * task_scale)
        batch = make_batch(core, space)
        steps = batch.sequence.steps
        batch = batch._replace(sequence=batch.sequence._replace(steps=steps._replace(
            reward=steps.reward * task_scale[task].astype(np.float32)
            if num_tasks == 2 else steps.reward * np.float32(scale), task=task)))
        metrics = learner.step(batch)
        results.append(([v.numpy() for v in core.trainable_variables], metrics))
    (weights_a, metrics_a), (weights_b, metrics_b) = results
    for name in ('loss/q', 'loss/policy'):
        np.testing.assert_allclose(metrics_a[name].numpy(), metrics_b[name].numpy(),
                                   rtol=1e-3, err_msg=name)
    for a, b, v in zip(weights_a, weights_b, core.trainable_variables):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=v.name)
    name = 'popart/task1/std' if num_tasks == 2 else 'popart/std'
    np.testing.assert_allclose(100.0 * metrics_a[name].numpy(), metrics_b[name].numpy(),
                               rtol=1e-4)
    if num_tasks == 2:
        np.testing.assert_allclose(metrics_a['popart/task0/std'].numpy(),
                                   metrics_b['popart/task0/std'].numpy(), rtol=1e-5)


@pytest.mark.parametrize('num_tasks', [1, 2])
def test_popart_update_preserves_the_sdn_values(num_tasks):
    """Continuous actions: moving V's statistics rescales V's head and the advantage
    head, so V(x) and Q(x, a) = V + A(x, a) stay what they were; with one output per
    task, every task's, while the statistics of a task with no targets stay put."""
    space = ActionSpace(gym.spaces.Box(-2, 2, (2,)))

    def make_core():
        core = ActorCriticCore(OBS_SPACE, space, hidden_sizes=(8,), lstm_size=0,
                               advantage_hidden_sizes=(8,), value_normalization=True,
                               num_tasks=num_tasks)
        core.create_variables()
        return core

    core = make_core()
    learner = ACERLearner(core, space, ACERConfig(lstm_size=0, hidden_sizes=(8,),
                                                  unroll_length=T, batch_size=B,
                                                  num_tasks=num_tasks), make_core)
    rng = np.random.default_rng(0)
    features = tf.constant(rng.normal(size=(6, core.features_size)), tf.float32)
    actions = tf.constant(rng.normal(size=(6, 2)), tf.float32)
    tasks = [tf.fill([6], k) for k in range(num_tasks)]

    def values():
        return [(core.parts.baseline_head(features, task).numpy(),
                 core.advantage(features, actions, task).numpy()) for task in tasks]

    before = values()
    learner._update_statistics(tf.constant(rng.normal(50.0, 20.0, (T, B)), tf.float32),
                               tf.ones([T, B]), tf.fill([T, B], num_tasks - 1))
    std = core.parts.baseline_head.std(tf.range(num_tasks)).numpy()
    assert std[-1] > 5.0 and (num_tasks == 1 or std[0] == 1.0)
    for (v_after, a_after), (v_before, a_before) in zip(values(), before):
        np.testing.assert_allclose(v_after, v_before, atol=1e-4)
        np.testing.assert_allclose(a_after, a_before, atol=1e-4)


def test_rejects_action_nests():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))))
    core = ActorCriticCore(OBS_SPACE, space, hidden_sizes=(8,), lstm_size=0)
    with pytest.raises(ValueError, match='one Discrete or one Box action space'):
        ACERLearner(core, space, ACERConfig(), lambda: core)


def test_continuous_sdn_step():
    # With an LSTM; the SDN's step without one is traced (and its losses checked against
    # chainerrl's) by test_continuous_use_Q_opc_changes_only_the_policy_advantage.
    lstm_size = 8
    space = ActionSpace(gym.spaces.Box(-2, 2, (2,)))

    def make_core():
        core = ActorCriticCore(OBS_SPACE, space, hidden_sizes=(8,), lstm_size=lstm_size,
                               advantage_hidden_sizes=(8,))
        core.create_variables()
        return core

    core = make_core()
    learner = ACERLearner(core, space, ACERConfig(lstm_size=lstm_size, hidden_sizes=(8,),
                                                  unroll_length=T, batch_size=B), make_core)
    rng = np.random.default_rng(0)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), space.action_specs(),
                                space.param_specs())
    steps = trajectory.zeros(spec, (T + 1, B))._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        action=(rng.normal(size=(T + 1, B, 2)).astype(np.float32),),
        reward=rng.uniform(-1, 0, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32),
        first=np.zeros((T + 1, B), bool))
    params = np.zeros((T + 1, B, 4), np.float32)
    steps = steps._replace(
        behaviour_params=(params,),
        behaviour_log_prob=space.log_prob((params,), steps.action).numpy())
    steps.first[0] = True
    batch = Batch(trajectory.Sequence(steps, core.initial_state(B)), tf.constant([False] * B))
    advantage_head = [v for v in core.variables if 'advantage_head' in v.name]
    assert advantage_head
    before = [v.numpy() for v in advantage_head]
    metrics = learner.step(batch)
    for name in METRICS:
        assert np.isfinite(metrics[name].numpy()), name
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, advantage_head))


# --- chainerrl's ACER, ported to numpy loops ---------------------------------------
#
# `chainerrl/agents/acer.py` (`ACER.compute_loss`, `compute_one_step_pi_loss`,
# `compute_policy_gradient_loss`, `compute_loss_with_kl_constraint`), one sequence
# and one step at a time, on the network outputs the learner sees before its update.
# The tests build batches with no episode boundary (`first` only at step 0), so every
# step is real and the sequence bootstraps from V(x_T), as chainerrl's does.

def _softmax(x):
    e = np.exp(x - np.max(x, -1, keepdims=True))
    return e / np.sum(e, -1, keepdims=True)


def _reward_transform(r, scaling, clipping):
    """The seeds' order: scale, then clip."""
    r = r * scaling
    if clipping == 'abs_one':
        return min(1.0, max(-1.0, r))
    assert clipping == 'none'
    return r


def _unroll(core, batch, state=None):
    """The core's outputs on `batch`, as the learner computes them (float64 numpy), from
    `state` (default: the stored one)."""
    steps = batch.sequence.steps
    inputs = tf.nest.map_structure(
        tf.convert_to_tensor,
        CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first))
    out, _ = core.unroll(inputs, batch.sequence.core_state if state is None else state)
    return tf.nest.map_structure(lambda x: x.numpy().astype(np.float64), out)


def chainerrl_discrete(logits, q, avg_logits, mu_logits, actions, rewards, config):
    """chainerrl's `compute_loss` for a categorical policy and Q(x, .).

    logits, q: `[T + 1, B, A]`; avg_logits, mu_logits: `[T, B, A]`; actions,
    rewards: `[T, B]` (raw rewards). Returns sums over the batch of the
    unprojected policy loss, the Q loss (without Q_loss_coef), and the total
    loss as chainerrl's `update` differentiates it, all divided by T * B, and
    the number of steps where the trust region was active.
    """
    T, B = actions.shape
    c, delta, gamma = config.truncation_threshold, config.trust_region_delta, config.discounting
    pi_loss_sum = q_loss_sum = total = 0.0
    active = 0
    for b in range(B):
        pi_last = _softmax(logits[T, b])
        q_ret = q_opc = float(pi_last @ q[T, b])  # R = V(x_T)
        pi_loss = q_loss = 0.0
        for t in reversed(range(T)):
            a = actions[t, b]
            r = _reward_transform(rewards[t, b], config.reward_scaling, config.reward_clipping)
            pi = _softmax(logits[t, b])
            mu = _softmax(mu_logits[t, b])
            log_pi = np.log(pi)
            v = float(pi @ q[t, b])
            rho = pi[a] / mu[a]
            q_ret = r + gamma * q_ret
            q_opc = r + gamma * q_opc
            advantage = (q_opc if config.use_Q_opc else q_ret) - v
            # g_loss: truncated importance sampling + bias correction over all actions.
            weight = min(c, rho)
            correction = np.maximum(0.0, 1.0 - c * mu / pi) * pi * (q[t, b] - v)
            g_loss = -weight * log_pi[a] * advantage - np.sum(correction * log_pi)
            pi_loss_sum += g_loss
            # Its gradient w.r.t. the logits (d log pi_j / d logits = onehot(j) - pi).
            onehot = np.eye(len(pi))[a]
            g = -weight * advantage * (onehot - pi) - (correction - pi * np.sum(correction))
            # k: gradient of -KL(avg || pi) w.r.t. the logits.
            avg = _softmax(avg_logits[t, b])
            k = avg - pi
            kk = k @ k
            k_factor = max(0.0, (k @ g - delta) / kk) if kk > 0 else 0.0
            active += k_factor > 0
            z = g - k_factor * k
            entropy = -np.sum(pi * log_pi)
            # compute_one_step_pi_loss: projected loss, then the entropy.
            pi_loss += np.sum(logits[t, b] * z) - config.beta * entropy
            q_taken = q[t, b, a]
            q_loss += (q_ret - q_taken) ** 2 / 2
            q_ret = min(1.0, rho) * (q_ret - q_taken) + v
            q_opc = q_opc - q_taken + v
        q_loss_sum += q_loss
        total += config.pi_loss_coef * pi_loss + config.Q_loss_coef * q_loss
    n = T * B
    return pi_loss_sum / n, q_loss_sum / n, total / n, active


def discrete_case(seed=3, **config):
    """A learner whose average network differs from its network (so the trust
    region acts), a batch with rewards in [-3, 3], and chainerrl's losses on it
    (`expected(**overrides)`: with config fields replaced)."""
    config = dict(dict(truncation_threshold=1.5, trust_region_delta=1e-3,
                       reward_clipping='none', reward_scaling=1.0), **config)
    # No LSTM: the losses are compared on the network's outputs, whatever computes them
    # (the average network's recurrent state has its own test below).
    learner, core, space = make_learner(0, **config)
    rng = np.random.default_rng(seed)
    for v in learner.average_core.variables:
        if 'policy_head' in v.name:
            v.assign(v + rng.normal(scale=0.5, size=v.shape).astype(np.float32))
    batch = make_batch(core, space, seed=seed)
    steps = batch.sequence.steps._replace(
        reward=rng.uniform(-3, 3, (T + 1, B)).astype(np.float32))
    batch = batch._replace(sequence=batch.sequence._replace(steps=steps))
    out = _unroll(core, batch)
    average = _unroll(learner.average_core, batch)

    def expected(**overrides):
        return chainerrl_discrete(
            out.policy_params[0], out.q_values, average.policy_params[0][:-1],
            steps.behaviour_params[0][:-1].astype(np.float64), steps.action[0][:-1],
            steps.reward[:-1].astype(np.float64),
            dataclasses.replace(learner.config, **overrides))

    return learner, batch, expected


@pytest.mark.parametrize('use_Q_opc', [False, True])
def test_discrete_use_Q_opc_changes_only_the_policy_advantage(use_Q_opc):
    """chainerrl: Q_opc replaces Q_ret in the policy's advantage only; the Q loss
    regresses on Retrace Q_ret either way. The total is pi_loss_coef * (projected
    policy loss - beta * entropy) + Q_loss_coef * Q loss: the entropy is inside
    pi_loss_coef."""
    learner, batch, expected = discrete_case(use_Q_opc=use_Q_opc, pi_loss_coef=2.5, beta=0.3,
                                             Q_loss_coef=0.7)
    pi_loss, q_loss, total, active = expected()
    assert 0 < active < T * B  # the projection acts on some steps, not all
    # The batch tells the two targets apart, and only in the policy loss.
    other_pi_loss, other_q_loss, _, _ = expected(use_Q_opc=not use_Q_opc)
    assert abs(other_pi_loss - pi_loss) > 1e-2 * abs(pi_loss)
    np.testing.assert_allclose(other_q_loss, q_loss, rtol=1e-12)
    # By hand: pi_loss_coef 0 leaves the Q loss only, entropy included.
    np.testing.assert_allclose(expected(pi_loss_coef=0.0)[2], 0.7 * q_loss, rtol=1e-12)
    metrics = learner.step(batch)
    np.testing.assert_allclose(metrics['loss/q'].numpy(), q_loss, rtol=1e-4)
    np.testing.assert_allclose(metrics['loss/policy'].numpy(), pi_loss, rtol=1e-4)
    np.testing.assert_allclose(metrics['loss/total_loss'].numpy(), total, rtol=1e-4)


def _mean_kl(p_logits, q_logits):
    """Mean over steps of KL(p || q) between categoricals `[T, B, A]`."""
    p, q = _softmax(p_logits), _softmax(q_logits)
    return float(np.mean(np.sum(p * (np.log(p) - np.log(q)), -1)))


def _mid_episode_batch(learner, core, space):
    """An average network that differs from the network (its policy head moved), and a
    batch whose sequences start mid-episode from a random stored state."""
    rng = np.random.default_rng(4)
    for v in learner.average_core.variables:
        if 'policy_head' in v.name:
            v.assign(v + rng.normal(scale=0.2, size=v.shape).astype(np.float32))
    batch = make_batch(core, space, seed=4)
    batch.sequence.steps.first[0] = False  # no reset at the first step
    stored = tf.nest.map_structure(
        lambda x: rng.normal(scale=2.0, size=x.shape).astype(np.float32),
        batch.sequence.core_state)
    return batch._replace(sequence=batch.sequence._replace(core_state=stored))


@pytest.mark.parametrize('average_network_state', ['stored', 'reset'])
def test_average_network_unrolls_from_the_stored_state_or_from_zeros(average_network_state,
                                                                     recurrent):
    """Sequences that start mid-episode with a stored LSTM state: the trust region's
    KL(average || pi) is the average network's unrolled from that state ('stored', as
    the network), or from zeros ('reset', as chainerrl's replay resets its model)."""
    if average_network_state == recurrent.made[0].config.average_network_state:
        learner, core, space = recurrent.fresh()  # seeded as below
    else:
        tf.random.set_seed(0)  # initial weights independent of the tests run before
        learner, core, space = make_learner(average_network_state=average_network_state)
    batch = _mid_episode_batch(learner, core, space)
    zeros = batch._replace(sequence=batch.sequence._replace(
        core_state=tf.nest.map_structure(np.zeros_like, batch.sequence.core_state)))
    logits = _unroll(core, batch).policy_params[0][:-1]
    expected = {name: _mean_kl(_unroll(learner.average_core, b).policy_params[0][:-1], logits)
                for name, b in (('stored', batch), ('reset', zeros))}
    assert abs(expected['stored'] - expected['reset']) > 0.1 * expected[average_network_state]
    metrics = learner.step(batch)  # every step is valid: the metric is the mean KL
    np.testing.assert_allclose(metrics['average_kl'].numpy(), expected[average_network_state],
                               rtol=1e-4)


def test_acted_average_state_is_the_average_networks_own_and_replay_starts_from_zeros():
    """'acted' (chainerrl's): the actors store each network's own state (the core's and its
    shadow's, the average network); on-policy rows unroll each from its own, replayed rows
    both from zeros, as chainerrl's replay resets both models."""
    tf.random.set_seed(0)
    learner, core, space = make_learner(average_network_state='acted')
    assert learner.average_core is core.shadow
    batch = _mid_episode_batch(learner, core, space)
    stored = batch.sequence.core_state  # (the network's, the average network's)
    replayed = np.array([False, True, False, True])
    batch = Batch(batch.sequence, tf.constant(replayed))
    fresh = (~replayed).astype(np.float32)
    own, average = tf.nest.map_structure(
        lambda x: x * fresh.reshape([-1] + [1] * (x.ndim - 1)), stored)
    logits = _unroll(_Own(core), batch, own).policy_params[0][:-1]
    average_logits = _unroll(learner.average_core, batch, average).policy_params[0][:-1]
    expected = _mean_kl(average_logits, logits)
    # Each part of the rule shows in the metric (checked to 1e-4 below): replayed rows'
    # network state zeroed (small: the LSTM's state moves these logits little), and
    # the average network from its own state, not the network's.
    unzeroed = _unroll(_Own(core), batch, stored[0]).policy_params[0][:-1]
    from_own = _unroll(learner.average_core, batch, own).policy_params[0][:-1]
    for other in (_mean_kl(average_logits, unzeroed), _mean_kl(from_own, logits)):
        assert abs(other - expected) > 2e-3 * expected, (other, expected)
    metrics = learner.step(batch)
    np.testing.assert_allclose(metrics['average_kl'].numpy(), expected, rtol=1e-4)
    # The average network follows the network's own variables, not its own.
    alpha = learner.config.trust_region_alpha
    shadow_before = [v.numpy() for v in core.shadow.variables]
    learner.step(batch)
    for shadow, old, mine in zip(core.shadow.variables, shadow_before, core.own_variables):
        np.testing.assert_allclose(shadow.numpy(), alpha * old + (1 - alpha) * mine.numpy(),
                                   rtol=1e-5, atol=1e-6)


class _Own:
    """The network of a `ShadowedCore` alone, as the learner unrolls it."""

    def __init__(self, core):
        self.unroll = core.unroll_own


def test_average_network_state_is_checked():
    assert ACERConfig().average_network_state == 'stored'
    with pytest.raises(ValueError, match='average_network_state'):
        ACERConfig(average_network_state='zeros')


def _gaussian_log_prob(stats, action):
    """Diagonal Gaussian, stats `[..., 2 d]` = (mean, log-std), summed over d."""
    mean, log_std = np.split(stats, 2, -1)
    z = (action - mean) * np.exp(-log_std)
    return np.sum(-0.5 * z * z - log_std - 0.5 * np.log(2 * np.pi), -1)


def chainerrl_continuous_sdn(stats, v, log_mu, actions, rewards, config):
    """chainerrl's `compute_loss` for the SDN when A(x, a) = 0 (so Q = V) and without
    truncation (`truncation_threshold=None`: g_loss = -rho log pi(a) A, no sampled
    bias correction). stats `[T + 1, B, 2 d]`, v `[T + 1, B]`, log_mu `[T, B]`,
    actions `[T, B, d]`, rewards `[T, B]`. Returns the policy loss and the Q loss
    (Q and V terms) summed and divided by T * B."""
    T, B, d = actions.shape
    gamma = config.discounting
    pi_loss = q_loss = 0.0
    for b in range(B):
        q_ret = q_opc = v[T, b]
        for t in reversed(range(T)):
            r = _reward_transform(rewards[t, b], config.reward_scaling, config.reward_clipping)
            log_pi = _gaussian_log_prob(stats[t, b], actions[t, b])
            rho = np.exp(log_pi - log_mu[t, b])
            q = v[t, b]  # V + A(a) - mean A(u) with A = 0
            q_ret = r + gamma * q_ret
            q_opc = r + gamma * q_opc
            advantage = (q_opc if config.use_Q_opc else q_ret) - v[t, b]
            pi_loss += -rho * log_pi * advantage
            v_target = min(1.0, rho) * (q_ret - q) + v[t, b]
            q_loss += (q_ret - q) ** 2 / 2 + (v_target - v[t, b]) ** 2 / 2
            q_ret = min(1.0, rho ** (1.0 / d)) * (q_ret - q) + v[t, b]
            q_opc = q_opc - q + v[t, b]
    return pi_loss / (T * B), q_loss / (T * B)


@pytest.mark.parametrize('use_Q_opc', [False, True])
def test_continuous_use_Q_opc_changes_only_the_policy_advantage(use_Q_opc):
    """The SDN as the discrete case: Q_ret for the Q and V losses, the policy's
    advantage from Q_opc only with use_Q_opc (the paper's continuous setting,
    chainerrl's option, off by default)."""
    d = 2
    space = ActionSpace(gym.spaces.Box(-2, 2, (d,)))

    def make_core():
        core = ActorCriticCore(OBS_SPACE, space, hidden_sizes=(8,), lstm_size=0,
                               advantage_hidden_sizes=(8,))
        core.create_variables()
        return core

    core = make_core()
    # A(x, a) = 0 makes Q = V exactly, whatever actions the SDN samples.
    for v in core.variables:
        if 'advantage_head' in v.name:
            v.assign(tf.zeros_like(v))
    config = configs.from_flat(ACERConfig, dict(
        lstm_size=0, hidden_sizes=(8,), unroll_length=T, batch_size=B,
        truncation_threshold=None, use_Q_opc=use_Q_opc, discounting=0.9))
    learner = ACERLearner(core, space, config, make_core)
    rng = np.random.default_rng(7)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), space.action_specs(),
                                space.param_specs())
    mean = rng.normal(scale=0.7, size=(T + 1, B, d))
    log_std = rng.uniform(-0.5, 0.3, (T + 1, B, d))
    params = np.concatenate([mean, log_std], -1)
    actions = mean + np.exp(log_std) * rng.normal(size=(T + 1, B, d))
    steps = trajectory.zeros(spec, (T + 1, B))._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        action=(actions.astype(np.float32),),
        reward=rng.uniform(-1, 1, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32),
        first=np.zeros((T + 1, B), bool),
        behaviour_params=(params.astype(np.float32),),
        behaviour_log_prob=_gaussian_log_prob(params, actions).astype(np.float32))
    steps.first[0] = True
    batch = Batch(trajectory.Sequence(steps, core.initial_state(B)), tf.constant([False] * B))
    out = _unroll(core, batch)

    def expected(**overrides):
        return chainerrl_continuous_sdn(
            out.policy_params[0], out.baseline, steps.behaviour_log_prob[:-1].astype(np.float64),
            steps.action[0][:-1].astype(np.float64), steps.reward[:-1].astype(np.float64),
            dataclasses.replace(config, **overrides))

    pi_loss, q_loss = expected()
    other_pi_loss, other_q_loss = expected(use_Q_opc=not use_Q_opc)
    assert abs(other_pi_loss - pi_loss) > 1e-2 * abs(pi_loss)
    np.testing.assert_allclose(other_q_loss, q_loss, rtol=1e-12)
    metrics = learner.step(batch)
    np.testing.assert_allclose(metrics['loss/q'].numpy(), q_loss, rtol=1e-4)
    np.testing.assert_allclose(metrics['loss/policy'].numpy(), pi_loss, rtol=1e-4)


class _PowerOfTwoDraws(ActionSpace):
    """A one-dimensional Box whose draw k (k = 0, 1, ...) is the action 2^(k - 6) in
    every row, so that 64 times a sum of distinct draws is the bit mask of them.
    `scored` collects the constant actions `log_prob` is asked about (run eagerly)."""

    def __init__(self):
        super().__init__(gym.spaces.Box(-2, 2, (1,)))
        self.draws = 0
        self.scored = set()

    def sample(self, params):
        value = 2.0 ** (self.draws - 6)
        self.draws += 1
        return (tf.fill([tf.shape(params[0])[0], 1], value),)

    def log_prob(self, params, actions):
        a = np.asarray(actions[0])
        if np.all(a == a.flat[0]):
            self.scored.add(float(a.flat[0]))
        return super().log_prob(params, actions)


def test_the_bias_correction_draws_its_own_sdn_samples(monkeypatch):
    """chainerrl's SDN draws n fresh u_i ~ pi at each evaluation, so Q(x, a') - V in
    the bias correction averages A over other draws than Q(x, a) does. With
    A(x, a) = a and draws 2^(k - 6), 64 n (A(a) - (Q(x, a) - V)) and
    64 n (A(a') - (Q(x, a') - V)) are the bit masks of the two sets of draws."""
    n = 3
    draws = _PowerOfTwoDraws()

    def make_core():
        core = ActorCriticCore(OBS_SPACE, ActionSpace(draws.space), hidden_sizes=(8,),
                               lstm_size=0, advantage_hidden_sizes=())
        core.create_variables()
        return core

    core = make_core()
    output_layer = core.parts.advantage_head.output_layer  # on [features, a]: A = a
    output_layer.w.assign(np.eye(core.features_size + 1, dtype=np.float32)[:, -1:])
    output_layer.b.assign(tf.zeros_like(output_layer.b))
    config = ACERConfig(lstm_size=0, hidden_sizes=(8,), unroll_length=T, batch_size=B,
                        sdn_samples=n, value_normalization='none')
    learner = ACERLearner(core, draws, config, make_core)
    rng = np.random.default_rng(0)
    spec = trajectory.step_spec(observation_spec(OBS_SPACE), draws.action_specs(),
                                draws.param_specs())
    params = np.zeros((T + 1, B, 2), np.float32)
    actions = rng.normal(size=(T + 1, B, 1)).astype(np.float32)
    steps = trajectory.zeros(spec, (T + 1, B))._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        action=(actions,), reward=rng.uniform(-1, 1, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32), first=np.zeros((T + 1, B), bool),
        behaviour_params=(params,),
        behaviour_log_prob=_gaussian_log_prob(params, actions).astype(np.float32))
    steps.first[0] = True
    steps = tf.nest.map_structure(tf.convert_to_tensor, steps)  # run eagerly below
    batch = Batch(trajectory.Sequence(steps, core.initial_state(B)), tf.constant([False] * B))
    recorded = {}
    retrace, correction = acer_losses.retrace_targets, acer_losses.continuous_bias_correction_loss

    def record_retrace(r, d, q, v, *args):
        recorded.setdefault('q_minus_v', (q - v).numpy())
        return retrace(r, d, q, v, *args)

    def record_correction(log_pi, rho, advantage, threshold):
        recorded['q_prime_minus_v'] = advantage.numpy()
        return correction(log_pi, rho, advantage, threshold)

    monkeypatch.setattr(acer_losses, 'retrace_targets', record_retrace)
    monkeypatch.setattr(acer_losses, 'continuous_bias_correction_loss', record_correction)
    tf.config.run_functions_eagerly(True)  # the recorders read values
    try:
        learner.step(batch)
    finally:
        tf.config.run_functions_eagerly(False)

    def bit_mask(x):
        masks = np.unique(np.round(64 * n * x))
        assert len(masks) == 1  # the same draws in every row
        return int(masks[0])

    (a_prime,) = draws.scored  # the only constant action scored: a'
    taken = bit_mask(actions[:-1, :, 0] - recorded['q_minus_v'])
    prime = bit_mask(a_prime - recorded['q_prime_minus_v'])
    assert bin(taken).count('1') == n and bin(prime).count('1') == n
    assert taken & prime == 0  # no draw serves both
    assert not int(64 * a_prime) & (taken | prime)
    assert draws.draws == 2 * n + 1


# --- rewards ---------------------------------------------------------------------

def test_rewards_default_to_unchanged():
    """chainerrl's ACER transforms no reward."""
    config = ACERConfig()
    assert (config.reward_clipping, config.reward_scaling) == ('none', 1.0)


def test_rewards_are_scaled_then_clipped(undiscounted):
    """`transform_rewards`' order: clip(r * scaling). With a zero Q head (Q = V = 0)
    and no discounting, Q_ret_t is the transformed r_t, so loss/q = mean(r'^2) / 2."""
    learner, core, space = undiscounted.fresh()
    config = learner.config
    assert (config.reward_clipping, config.reward_scaling, config.discounting) == (
        'abs_one', 0.5, 0.0)
    for v in core.trainable_variables:
        if 'q_head' in v.name:
            v.assign(tf.zeros_like(v))
    raw = np.array([4.0, 1.5, -3.0, 0.5], np.float32)  # one reward per sequence
    # By hand, scale then clip: 4 -> 1, 1.5 -> 0.75, -3 -> -1, 0.5 -> 0.25
    # (clip then scale would give 0.5, 0.5, -0.5, 0.25).
    transformed = np.array([1.0, 0.75, -1.0, 0.25])
    batch = make_batch(core, space)
    steps = batch.sequence.steps._replace(reward=np.tile(raw, (T + 1, 1)))
    batch = batch._replace(sequence=batch.sequence._replace(steps=steps))
    metrics = learner.step(batch)
    np.testing.assert_allclose(metrics['loss/q'].numpy(), np.mean(transformed ** 2) / 2,
                               rtol=1e-6)


# --- disable_online_update: the learner drains the queue but learns from replay only ---

def test_disable_online_update_is_in_the_data_plan():
    agent = ACER()
    assert agent.data_plan(ACERConfig()).mixing.learn_fresh
    plan = agent.data_plan(ACERConfig(disable_online_update=True))
    assert not plan.mixing.learn_fresh
    assert plan.tables == ('queue', 'replay')  # the actors still fill the queue
    with pytest.raises(ValueError, match='replay_ratio'):
        ACERConfig(disable_online_update=True, replay_ratio=0)


def test_policy_average_is_off_by_default_and_is_the_final_policy_when_set():
    learner, _, _ = make_learner()
    assert learner.policy_average is None and learner.final_policy() is None
    learner, core, action_space = make_learner(policy_average_tau=0.5)
    check_policy_average(learner, make_batch(core, action_space))
