"""The prior-actor KL (`--prior_actor`, `agents.prior`): the KL against hand-computed
values, zero when the prior is the policy itself and pulling the policy towards
another prior (every agent, through a real SavedModel in the learner's compiled
step), and clear errors for priors a run cannot use."""

import dataclasses
import math
import types

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, prior, registry
from reverb_agents.launch.learning import data
from reverb_agents.launch.policies import export
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks.distributions import ActionSpace

# SAC's discrete leaves are categorical as CLEAR's: the hand computation covers their KL.
# Raw observations: a step updates the observation statistics before its losses, so a
# normalising policy is no longer exactly the prior exported before the step.
CASES = [('clear', 'CartPole-v1', {'lstm_size': 0, 'normalize': False}),
         ('acer', 'CartPole-v1', {'lstm_size': 0, 'normalize': False}),
         # A2C has the KL by declaring the `prior` sub-config alone (agents/a2c/config.py).
         ('a2c', 'CartPole-v1', {'lstm_size': 0, 'normalize': False}),
         ('sac', 'Pendulum-v1', {'normalize': False}),
         # A Dict observation: the export takes each leaf as its own input.
         ('clear', 'tests.launch.export_envs:ImageAndVector-v0', {'lstm_size': 0})]


def test_kl_matches_hand_computation():
    categorical = ActionSpace(gym.spaces.Discrete(3))
    p, q = np.log([[0.2, 0.3, 0.5]]), np.log([[0.6, 0.2, 0.2]])
    expected = sum(a * math.log(a / b) for a, b in zip([0.2, 0.3, 0.5], [0.6, 0.2, 0.2]))
    got = categorical.kl_divergence((tf.constant(p, tf.float32),), (tf.constant(q, tf.float32),))
    np.testing.assert_allclose(got.numpy(), [expected], rtol=1e-5)

    # Squashed Gaussians (SAC): the Gaussians' KL, here of N(0.5, 1) against N(0, 2^2).
    squashed = ActionSpace(gym.spaces.Box(-2.0, 2.0, (1,)), squash=True)
    p = tf.constant([[0.5, 0.0]])
    q = tf.constant([[0.0, math.log(2.0)]])
    expected = math.log(2.0) + (1.0 + 0.25) / 8.0 - 0.5
    np.testing.assert_allclose(squashed.kl_divergence((p,), (q,)).numpy(), [expected],
                               rtol=1e-5)
    # ... which a Monte-Carlo estimate of E_pi[log pi(a) - log prior(a)] on the squashed
    # actions agrees with.
    leaf = squashed.leaves[0]
    u = 0.5 + tf.random.stateless_normal([200_000, 1], seed=[1, 2])
    a = tf.tanh(u)
    estimate = tf.reduce_mean(leaf.log_prob(tf.tile(p, [200_000, 1]), a)
                              - leaf.log_prob(tf.tile(q, [200_000, 1]), a))
    np.testing.assert_allclose(estimate.numpy(), expected, atol=0.01)


def _learner_with_prior(wired, path, learning_rate=None, **config):
    config = dataclasses.replace(
        wired.config, prior=prior.PriorConfig(prior_actor=path, **config))
    if learning_rate:
        config = dataclasses.replace(config, optimizer=dataclasses.replace(
            config.optimizer, learning_rate=learning_rate))
    setup = dataclasses.replace(wired.setup, config=config)
    return setup_lib.make_learner(setup)


def _export(wired, core, path):
    setup = wired.setup
    return export.export_policy(core, setup.action_space, setup.observation_space,
                                setup.options.env, path)


def _other_policy(wired, core, path):
    """A SavedModel of another policy of the same spaces: `core` (a fresh one) with its
    weights moved far from the (near-uniform) initial policy."""
    for i, variable in enumerate(core.trainable_variables):
        variable.assign_add(tf.random.stateless_normal(variable.shape, seed=[i, 0]))
    return _export(wired, core, path)


def _batch(wired):
    setup = wired.setup
    batches = data.open_batches(wired.address, setup.signature, setup.plan, wired.client,
                                timeout_ms=30_000)
    return next(iter(batches))


@pytest.mark.parametrize('name,env_id,config', CASES)
def test_kl_is_zero_when_the_prior_is_the_policy_itself(name, env_id, config, wired_agent,
                                                         tmp_path):
    # One learner, its prior another policy: given that policy's weights, its KL is
    # zero; from its own, positive, and a heavy weight pulls the categorical policies
    # towards it in a few steps.
    wired = wired_agent(name, env_id, **config)
    other_core = setup_lib.make_core(wired.setup)
    other = _other_policy(wired, other_core, str(tmp_path / 'other'))
    learner = _learner_with_prior(wired, other, learning_rate=1e-2, prior_kl_weight=100.0)
    start = [(variable, variable.numpy()) for variable in learner.variables]
    for mine, theirs in zip(learner.core.variables, other_core.variables):
        mine.assign(theirs)
    batch = _batch(wired)
    metrics = learner.step(batch)
    assert abs(float(metrics['loss/prior_kl'])) < 1e-5, metrics['loss/prior_kl']

    for variable, value in start:  # the learner as built: its own policy
        variable.assign(value)
    kls = [float(learner.step(batch)['loss/prior_kl']) for _ in range(40)]
    assert kls[0] > 1e-2, kls
    if name != 'sac':  # SAC's far-moved squashed Gaussian is ~1e5 nats away
        assert kls[-1] < 0.5 * kls[0], kls


def _setup(small_settings, name, env_id):
    """A run's setup (the `wired_agent` settings, one environment), without tables, actors
    or a learner: enough to export its policy or build a learner that refuses a prior."""
    agent = registry.get(name)
    config = configs.from_flat(agent.config_class, small_settings.get(name, {}))
    options = RunOptions(agent=name, env=env_id, num_envs=1)
    envs = setup_lib.make_envs(options, config, 1, 0)
    try:
        return types.SimpleNamespace(config=config,
                                     setup=setup_lib.make_setup(options, config, envs))
    finally:
        envs.close()


@pytest.fixture(scope='module')
def pendulum_prior(tmp_path_factory, small_settings):
    """A SavedModel of a SAC policy for Pendulum-v1 (as built, untrained)."""
    pendulum = _setup(small_settings, 'sac', 'Pendulum-v1')
    return _export(pendulum, setup_lib.make_core(pendulum.setup),
                   str(tmp_path_factory.mktemp('prior') / 'pendulum'))


def test_a_recurrent_prior_runs_over_sequences(wired_agent, tmp_path):
    # CLEAR's LSTM core: the prior starts each sequence from its own initial state,
    # so the KL to itself is small but need not be 0; it must be finite.
    wired = wired_agent('clear', 'CartPole-v1')
    path = _export(wired, wired.learner.core, str(tmp_path / 'prior'))
    learner = _learner_with_prior(wired, path)
    kl = float(learner.step(_batch(wired))['loss/prior_kl'])
    assert np.isfinite(kl) and kl >= 0.0


def test_a_prior_of_other_specs_is_refused(pendulum_prior, small_settings, tmp_path):
    cartpole = _setup(small_settings, 'clear', 'CartPole-v1')
    with pytest.raises(prior.PriorError, match='does not match this run: its observation'):
        _learner_with_prior(cartpole, pendulum_prior)
    with pytest.raises(prior.PriorError, match='not a SavedModel directory'):
        _learner_with_prior(cartpole, str(tmp_path))


def test_run_reports_a_mismatched_prior_in_one_error_line(run_cli, pendulum_prior):
    result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_envs=2', '--num_steps=100',
                      f'--prior_actor={pendulum_prior}'])
    assert result.returncode != 0
    assert len(result.errors) == 1 and 'does not match this run' in result.errors[0], \
        result.stderr[-2000:]
