"""The ACER learner step on small hand-made batches."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from agents import configs
from agents.acer.config import ACERConfig
from agents.acer.learning import ACERLearner
from networks.cores import ActorCriticCore
from networks.distributions import ActionSpace
from networks.observations import observation_spec
from replay import trajectory
from replay.dataset import Batch

T, B, A = 5, 4, 3
OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
METRICS = ['loss/policy', 'loss/q', 'loss/total_loss', 'average_value', 'average_entropy',
           'average_kl', 'mean_rho', 'fraction_truncated', 'grad_norm', 'learning_rate']


def make_learner(lstm_size=8, **config):
    action_space = ActionSpace(gym.spaces.Discrete(A))

    def make_core():
        # As the agent builds it: Q head, no value head (V = sum_a pi(a) Q(a)).
        core = ActorCriticCore(OBS_SPACE, action_space, hidden_sizes=(8,), lstm_size=lstm_size,
                               num_q_values=A, baseline=False)
        core.create_variables()
        return core

    core = make_core()
    config = configs.from_flat(ACERConfig, dict(lstm_size=lstm_size, hidden_sizes=(8,),
                                                 unroll_length=T, batch_size=B, **config))
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
def shared():
    return make_learner()


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


def test_q_values_fit_rewards_without_discounting():
    learner, core, space = make_learner(0, learning_rate=1e-2, discounting=0.0, beta=0.0)
    batch = make_batch(core, space)
    first = float(learner.step(batch)['loss/q'].numpy())
    for _ in range(40):
        last = float(learner.step(batch)['loss/q'].numpy())
    assert last < 0.2 * first


def test_rejects_action_nests():
    space = ActionSpace(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))))
    core = ActorCriticCore(OBS_SPACE, space, hidden_sizes=(8,), lstm_size=0)
    with pytest.raises(ValueError, match='one Discrete or one Box action space'):
        ACERLearner(core, space, ACERConfig(), lambda: core)


@pytest.mark.parametrize('lstm_size', [8, 0])
def test_continuous_sdn_step(lstm_size):
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
