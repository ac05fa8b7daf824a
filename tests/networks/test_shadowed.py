"""`networks.shadowed.ShadowedCore`: the core's own outputs, both states carried, the
shadow's variables published but not trained, and no numpy mirror."""

import gymnasium as gym
import numpy as np
import tensorflow as tf

from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.numpy_core import NumpyCore
from reverb_agents.networks.shadowed import ShadowedCore

OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)
T, B = 4, 2


def make(core_class=ShadowedCore):
    tf.random.set_seed(0)
    core = core_class(OBS_SPACE, ActionSpace(gym.spaces.Discrete(3)), hidden_sizes=(8,),
                      lstm_size=5, num_q_values=3, baseline=False)
    core.create_variables()
    return core


def inputs(rng):
    return CoreInputs(tf.constant(rng.uniform(-1, 1, (T, B, 3)), tf.float32),
                      (tf.constant(rng.integers(0, 3, (T, B)), tf.int32),),
                      tf.constant(rng.normal(size=(T, B)), tf.float32),
                      tf.constant([[True] * B] + [[False] * B] * (T - 1)))


def test_the_shadow_is_a_copy_with_variables_of_its_own_that_no_optimiser_trains():
    core = make()
    own, shadow = core.own_variables, core.shadow.variables
    assert len(own) == len(shadow) > 0 and len(core.variables) == 2 * len(own)
    # Paired in order: the same part, the same shape, distinct variables.
    for mine, its in zip(own, shadow):
        # 'core/part/w:0' and 'core/shadow/part/w:0'
        assert mine.name.split('/', 1)[1] == its.name.split('/', 2)[2], (mine.name, its.name)
        assert mine.shape == its.shape and mine is not its
    shadow_refs = {v.ref() for v in shadow}
    assert core.trainable_variables and not any(
        v.ref() in shadow_refs for v in core.trainable_variables)
    assert len(core.trainable_variables) == len([v for v in own if v.trainable])


def test_outputs_are_the_cores_own_and_each_state_is_its_networks():
    core, rng = make(), np.random.default_rng(0)
    for v in core.shadow.variables:  # a shadow that differs from the core
        v.assign(v + rng.normal(scale=0.3, size=v.shape).astype(np.float32))
    x = inputs(rng)
    state = tf.nest.map_structure(
        lambda s: tf.constant(rng.normal(size=s.shape), tf.float32), core.initial_state(B))
    out, (own, shadow) = core.unroll(x, state)
    alone, own_alone = core.unroll_own(x, state[0])
    _, shadow_alone = core.shadow.unroll(x, state[1])
    np.testing.assert_allclose(out.policy_params[0], alone.policy_params[0], rtol=1e-6)
    for a, b in zip(tf.nest.flatten((own, shadow)), tf.nest.flatten((own_alone, shadow_alone))):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(tf.nest.flatten(own)[0], tf.nest.flatten(shadow)[0])
    # Step by step, as the actors act, to the same place.
    step_state = state
    for t in range(T):
        step_out, step_state = core(tf.nest.map_structure(lambda y: y[t], x), step_state)
        np.testing.assert_allclose(step_out.policy_params[0], out.policy_params[0][t],
                                   rtol=1e-5, atol=1e-6)
    for a, b in zip(tf.nest.flatten(step_state), tf.nest.flatten((own, shadow))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_actors_step_it_through_tensorflow():
    assert NumpyCore.supports(make(ActorCriticCore))
    core = make()
    assert not NumpyCore.supports(core)
    assert 'ShadowedCore' in NumpyCore.unsupported(core)


def test_acers_actors_store_the_average_networks_state_and_its_learner_learns_from_it(
        wired_agent, tmp_path):
    """`--average_network_state=acted` wired as a run wires it, on real Reverb: the actors
    act through TensorFlow, the stored core state is (the network's, the average
    network's), the published weights are both's, and a learner step, a checkpoint round
    trip and the export take them."""
    from reverb_agents.launch.building import setup as setup_lib
    from reverb_agents.launch.learning import data
    from reverb_agents.launch.policies import export
    from reverb_agents.replay import tables

    wired = wired_agent('acer', 'CartPole-v1', average_network_state='acted')
    learner, setup = wired.learner, wired.setup
    assert isinstance(learner.core, ShadowedCore) and learner.average_core is learner.core.shadow
    own, shadow = setup.signature.core_state
    assert tf.nest.flatten(own) == tf.nest.flatten(shadow) and tf.nest.flatten(own)
    published = next(wired.client.sample(tables.VARIABLES, emit_timesteps=False)).data
    assert len(published) == len(learner.core.variables) == 2 * len(learner.core.own_variables)
    actor = setup_lib.make_actor(setup, wired.client, wired.envs, 1, None)
    assert not actor.policy.uses_numpy
    batches = data.open_batches(wired.address, setup.signature, setup.plan, wired.client,
                                timeout_ms=30_000)
    metrics = data.make_learn(learner)(batches)
    assert np.isfinite(metrics['average_kl'].numpy())
    path = tf.train.Checkpoint(learner=learner).save(str(tmp_path / 'checkpoint' / 'ckpt'))
    restored = setup_lib.make_learner(setup)
    tf.train.Checkpoint(learner=restored).restore(path).assert_existing_objects_matched()
    for a, b in zip(learner.average_core.variables, restored.average_core.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
    model = tf.saved_model.load(export.export_policy(
        restored.core, setup.action_space, setup.observation_space, 'CartPole-v1',
        str(tmp_path / 'saved_model')))
    state = dict(model.signatures['initial_state'](batch_size=tf.constant(2)))
    assert len(state) == 2 * len(tf.nest.flatten(own))  # both networks' states
