"""Exported policies take `first`, and every observation and action nest exports: a
consumer with TensorFlow alone that feeds `first` and zeros acts as the library does
(a CLEAR LSTM, a `Dict` image + vector observation, a `Tuple` action), and so does
`launch/evaluate.py`."""

import json
import os
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.launch import api
from reverb_agents.launch.policies import signatures
from tests.conftest import EXPORT_SEEDS
from tests.launch import export_envs

SMALL = dict(hidden_sizes=(16,), lstm_size=8, unroll_length=10, batch_size=8, num_envs=4,
             eval_episodes=2, preset=False, seed=0)


@pytest.fixture(scope='module')
def clear_lstm(tmp_path_factory):
    """A CLEAR LSTM policy on CartPole (the clear_cartpole preset with a 32-unit LSTM),
    stopped once its training episodes average 150 (about 100k env steps, 15 s)."""
    logdir = tmp_path_factory.mktemp('lstm') / 'run'
    return api.train('clear', 'CartPole-v1', seed=0, logdir=logdir, lstm_size=32,
                     hidden_sizes=(64,), eval_episodes=3,
                     callbacks=lambda p: p.recent_return is None or p.recent_return < 150)


def test_a_consumer_feeding_first_and_zeros_acts_as_the_library(clear_lstm, tmp_path,
                                                                 compare_exported):
    result = clear_lstm
    expected, standalone = compare_exported(result.logdir, result.summary['saved_model'],
                                            tmp_path)
    np.testing.assert_allclose(standalone, expected, rtol=1e-6)
    assert result.policy.specs['state'] == [{'shape': [32], 'dtype': 'float32'}] * 2
    assert np.mean(expected) > 60, expected  # it learned (a random policy: about 20)


def test_first_replaces_the_previous_step_and_state(clear_lstm):
    """At a first step the policy's output is the initial state's with no previous action
    or reward, whatever is fed; without `first` a zero action is an action (the one-hot
    of action 0), which is what changed returns for consumers that fed zeros alone."""
    model = tf.saved_model.load(clear_lstm.summary['saved_model'])
    params = model.signatures['policy_params']
    observation = tf.constant(gym.make('CartPole-v1').reset(seed=0)[0][None])
    initial = dict(model.signatures['initial_state'](batch_size=tf.constant(1)))

    def logits(first, prev_action, prev_reward, state):
        return params(observation=observation, first=tf.constant([first]),
                      prev_action=tf.constant([prev_action], tf.int64),
                      prev_reward=tf.constant([prev_reward]), **state)['params_0'].numpy()

    fresh = logits(True, 0, 0.0, initial)
    noise = {k: tf.random.normal(v.shape, seed=1) for k, v in initial.items()}
    np.testing.assert_array_equal(logits(True, 1, float('nan'), noise), fresh)
    specs = json.loads(model.signatures['specs']()['specs'].numpy())
    np.testing.assert_array_equal(logits(False, specs['first_prev_action'], 0.0, initial), fresh)
    assert np.abs(logits(False, 0, 0.0, initial) - fresh).max() > 1e-6


@pytest.mark.parametrize('env_id', [export_envs.IMAGE_AND_VECTOR, export_envs.TUPLE_ACTION])
def test_nested_spaces_export_and_run_without_the_library(env_id, tmp_path, compare_exported,
                                                          run_script):
    result = api.train('clear', env_id, 1_000, logdir=tmp_path / 'run', **SMALL)
    saved_model = result.summary['saved_model']
    assert saved_model, 'a nested space must export'
    specs = result.policy.specs
    if env_id == export_envs.IMAGE_AND_VECTOR:
        assert specs['observation_inputs'] == [
            {'name': 'observation_image', 'path': ['image'], 'shape': [8, 8, 1],
             'dtype': 'uint8'},
            {'name': 'observation_vector', 'path': ['vector'], 'shape': [3], 'dtype': 'float32'}]
    else:
        assert [(o['name'], o['path'], o['prev_name']) for o in specs['action_outputs']] == [
            ('action_0', [0], 'prev_action_0'), ('action_1', [1], 'prev_action_1')]
    with ThreadPoolExecutor(1) as pool:  # subprocesses: most of their time is imports
        evaluating = pool.submit(run_script, 'evaluate', [
            f'--saved_model={saved_model}', f'--env={env_id}',
            f'--episodes={len(EXPORT_SEEDS)}', f'--seed={EXPORT_SEEDS[0]}'])
        expected, standalone = compare_exported(result.logdir, saved_model, tmp_path)
        evaluated = evaluating.result()
    np.testing.assert_allclose(standalone, expected, rtol=1e-5)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    returns = json.loads(evaluated.stdout.strip().splitlines()[-1])['returns']
    np.testing.assert_allclose(returns, expected, rtol=1e-5)


def test_nests_flatten_to_named_inputs_and_outputs():
    box = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    observation = gym.spaces.Dict({'pos': box, 'cam': gym.spaces.Tuple((box, gym.spaces.Discrete(3))),
                                   'action_mask': gym.spaces.MultiBinary(4)})
    parts = signatures.observation_parts(observation)
    assert [(p.name, p.path) for p in parts] == [
        ('observation_cam_0', ('cam', 0)), ('observation_cam_1', ('cam', 1)),
        ('observation_pos', ('pos',)), ('action_mask', ('action_mask',))]
    assert signatures.pack(parts, [1, 2, 3, 4]) == {'cam': (1, 2), 'pos': 3, 'action_mask': 4}
    action = gym.spaces.Dict({'move': gym.spaces.MultiDiscrete([3, 3]), 'aim': box})
    assert [p.name for p in signatures.action_parts(action)] == ['action_aim', 'action_move']
    with pytest.raises(signatures.ExportError, match="two members of the nest export as "
                                                     "'observation_a_b'"):
        signatures.observation_parts(gym.spaces.Dict({'a_b': box, 'a': gym.spaces.Dict({'b': box})}))


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEGACY = os.path.join(TESTS, 'data', 'legacy_export_cartpole')  # CLEAR, CartPole, exported before `first`


def _legacy_returns(seeds) -> list:
    """The old protocol by hand: `first_prev_action` (-1) and reward 0 at an episode's
    first step, the greedy signature, the state carried."""
    model = tf.saved_model.load(LEGACY)
    step, returns = model.signatures['step_deterministic'], []
    for seed in seeds:
        env = gym.make('CartPole-v1')
        observation, _ = env.reset(seed=seed)
        state = dict(model.signatures['initial_state'](batch_size=tf.constant(1)))
        action, reward, total, done = -1, 0.0, 0.0, False
        while not done:
            out = dict(step(observation=tf.constant(observation[None], tf.float32),
                            prev_action=tf.constant([action], tf.int64),
                            prev_reward=tf.constant([reward], tf.float32), **state))
            action = int(out.pop('action').numpy()[0])
            state = out
            observation, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return returns


def test_exports_from_before_first_still_load_and_play(run_script):
    from reverb_agents.launch.policies.load import load_policy
    policy = load_policy(LEGACY)
    assert [policy.run_episode(gym.make('CartPole-v1'), seed=s) for s in EXPORT_SEEDS] == \
        _legacy_returns(EXPORT_SEEDS)
    result = run_script('evaluate', [f'--saved_model={LEGACY}', '--episodes=2'])
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])['episodes'] == 2
