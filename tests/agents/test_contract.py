"""The agent contract, held for every registered agent.

Each agent in `agents.registry` is wired exactly as a run wires it: its data
plan sizes real Reverb tables, a real actor fills them from real gymnasium
environments, and the learner takes one step on a batch the data plan's
stream draws. Then its checkpoint round trip and its export. Registering an
agent runs it through this file (small settings below where given, its
defaults otherwise).
"""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, contract, registry
from reverb_agents.launch.learning import data
from reverb_agents.launch.policies import export
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.networks.cores import CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from tests.conftest import SAC_CRITIC_POLICY

CASES = [(name, env) for name in sorted(registry.AGENTS)
         for env in ('CartPole-v1', 'Pendulum-v1')]


@pytest.mark.parametrize('name,env_id', CASES)
def test_agent_honours_the_contract(name, env_id, tmp_path, wired_agent):
    wired = wired_agent(name, env_id)
    agent, config, setup, learner = wired.agent, wired.config, wired.setup, wired.learner
    assert isinstance(agent, contract.Agent) and agent.name == name
    assert isinstance(learner, contract.Learner)
    assert learner.pretrain() is None  # no demonstrations: the wiring's call does nothing
    assert learner.phase() == contract.LEARN  # one phase unless the config asks for more
    plan = setup.plan
    assert plan == agent.data_plan(config)
    assert plan.transitions_per_batch == plan.batch_sequences * plan.learned_steps
    assert set(plan.tables) <= {'queue', 'replay'} and plan.tables

    learner.set_progress(0.0)
    batches = data.open_batches(wired.address, setup.signature, plan, wired.client,
                                timeout_ms=30_000)
    metrics = data.make_learn(learner)(batches)
    assert sorted(metrics) == sorted(agent.metric_names(config, setup.action_space))
    for key, value in metrics.items():
        assert value.shape == () and np.isfinite(value.numpy()), key
    assert int(learner.num_steps.numpy()) == 1

    # Checkpoint round trip: a fresh learner restores every variable.
    path = tf.train.Checkpoint(learner=learner).save(str(tmp_path / 'checkpoint' / 'ckpt'))
    restored = setup_lib.make_learner(setup)
    tf.train.Checkpoint(learner=restored).restore(path).assert_existing_objects_matched()
    for a, b in zip(learner.core.variables, restored.core.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
    assert int(restored.num_steps.numpy()) == 1

    # Export: the SavedModel steps a batch of 1 and of 3.
    saved = export.export_policy(restored.core, setup.action_space, setup.observation_space,
                                 env_id, str(tmp_path / 'saved_model'))
    model = tf.saved_model.load(saved)
    obs_shape = setup.observation_space.shape
    for batch in (1, 3):
        inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(batch)))
        action_space = setup.action_space.space
        inputs['prev_action'] = tf.zeros([batch, *action_space.shape],
                                         tf.as_dtype(action_space.dtype))
        inputs['prev_reward'] = tf.zeros([batch])
        inputs['first'] = tf.ones([batch], tf.bool)
        inputs['observation'] = tf.zeros([batch, *obs_shape])
        out = model.signatures['step_deterministic'](**inputs)
        assert out['action'].shape[0] == batch
        assert action_space.contains(out['action'].numpy()[0])


def test_data_plan_checks_say_why():
    plan = registry.get('clear').data_plan(registry.get('clear').config_class())
    with pytest.raises(ValueError, match='sequence_period must be in'):
        dataclasses.replace(plan, sequence_period=plan.sequence_length)
    with pytest.raises(ValueError, match='alternates whole batches'):
        dataclasses.replace(plan, replay_fraction=0.5,
                            mixing=contract.ReplaySchedule(1.0, False, 1))


def test_batch_size_means_what_each_agent_says():
    """CLEAR and ACER count sequences of unroll_length steps; SAC counts transitions."""
    clear = registry.get('clear')
    plan = clear.data_plan(configs.from_flat(clear.config_class, {'batch_size': 8,
                                                                  'unroll_length': 10}))
    assert (plan.batch_sequences, plan.transitions_per_batch) == (8, 80)
    sac = registry.get('sac')
    plan = sac.data_plan(configs.from_flat(sac.config_class, {
        'batch_size': 64, 'unroll_length': 8, 'lstm_size': 8, 'burn_in': 4, 'n_step': 3}))
    assert (plan.batch_sequences, plan.transitions_per_batch) == (8, 64)
    assert plan.sequence_length == 4 + 8 + 3


@pytest.mark.parametrize('name', sorted(
    name for name, config_class in registry.CONFIG_CLASSES.items()
    if 'prev_reward_input' in configs.flat_fields(config_class)))  # A2C's core sees it raw
def test_core_sees_the_previous_reward_as_the_learner_does(name, small_settings):
    # The seeds feed the core the transformed reward; `prev_reward_input=raw` the
    # environment's. Same weights, rewards 4 and -3: the transformed core given the
    # raw rewards equals the raw core given the hand-transformed ones.
    agent = registry.get(name)
    small = dict(small_settings[name], lstm_size=8, reward_scaling=0.5)
    clipping = {} if name == 'sac' else {'reward_clipping': 'abs_one'}
    expected_r = np.array([0.5 * 4.0, 0.5 * -3.0], np.float32)
    if clipping:
        expected_r = np.clip(expected_r, -1.0, 1.0)
    obs_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    action_space = ActionSpace(gym.spaces.Discrete(2), agent.squash_actions)
    cores = {}
    for mode in ('transformed', 'raw'):
        config = configs.from_flat(agent.config_class,
                                   dict(small, prev_reward_input=mode, **clipping))
        cores[mode] = agent.build_core(obs_space, action_space, config)
        cores[mode].create_variables()
    for a, b in zip(cores['raw'].variables, cores['transformed'].variables):
        a.assign(b)

    def step(core, reward):
        inputs = CoreInputs(np.ones((2, 3), np.float32), (np.array([1, 0], np.int32),),
                            np.asarray(reward, np.float32), np.zeros(2, bool))
        out, _ = core(inputs, core.initial_state(2))
        return out.policy_params[0].numpy()

    transformed = step(cores['transformed'], [4.0, -3.0])
    np.testing.assert_allclose(transformed, step(cores['raw'], expected_r), rtol=1e-5)
    assert not np.allclose(transformed, step(cores['raw'], [4.0, -3.0]))


@pytest.mark.parametrize('name', sorted(
    name for name, config_class in registry.CONFIG_CLASSES.items()
    if 'normalize' in configs.flat_fields(config_class)))
def test_normalize_maps_vector_observations_and_leaves_a_dict_as_it_is(name, small_settings):
    """`--normalize` on a `Dict` observation builds the core without a normaliser, as
    `network_config.normalizes` says, for every agent (SAC's discrete policy included)."""
    agent = registry.get(name)
    vector = gym.spaces.Box(-1, 1, (3,), np.float32)
    mapping = gym.spaces.Dict({'position': vector, 'goal': vector})
    action_space = ActionSpace(gym.spaces.Discrete(2), agent.squash_actions)
    settings = [dict(small_settings[name], normalize=True)]
    if name == 'sac':
        settings.append(dict(settings[0], **SAC_CRITIC_POLICY))
    for flat in settings:
        config = configs.from_flat(agent.config_class, flat)
        for space, normalized in ((vector, True), (mapping, False)):
            core = agent.build_core(space, action_space, config)
            assert (core._normalizer is not None) == normalized, (flat, space)
