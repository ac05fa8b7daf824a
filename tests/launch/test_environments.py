"""`--env_kwargs` (typed keywords for gymnasium.make) and `--vector_env=sync|async`."""

import sys

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.command_line import run_flags as command_line
from reverb_agents.launch import environments
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.environments import factory
from reverb_agents.launch.runs.options import RunOptions


def test_env_kwargs_are_typed_from_their_literals():
    assert command_line.parse_env_kwargs('') == {}
    assert command_line.parse_env_kwargs(
        'difficulty=hard,horizon=50,g=9.5,flag=True,shape=(2, 3),name=None') == {
            'difficulty': 'hard', 'horizon': 50, 'g': 9.5, 'flag': True, 'shape': (2, 3),
            'name': None}
    assert command_line.parse_env_kwargs("label='a,b', n=1") == {'label': 'a,b', 'n': 1}
    for bad in ('x', '=3', '1x=2'):
        with pytest.raises(ValueError, match='key=value pairs'):
            command_line.parse_env_kwargs(bad)


@pytest.mark.parametrize('mode', [None, 'sync', 'async'])
def test_keywords_reach_every_environment(mode):
    envs = factory.make_vector_env('Pendulum-v1', 2, 0, mode, env_kwargs={'g': 3.5})
    try:
        assert list(envs.get_attr('g')) == [3.5, 3.5]
        assert (mode == 'async') == envs.__class__.__name__.startswith('Async')
    finally:
        envs.close()


def test_async_environments_are_spawned_with_ids_registered_here_and_no_tensorflow():
    # An id registered in this process only (as the API's `train(env=callable)`
    # registers one), made in fresh subprocesses: forking a process that runs
    # TensorFlow's threads can crash the child.
    def cartpole_noting_tensorflow(**kwargs):  # nested: pickled by value, not imported
        env = gym.make('CartPole-v1', **kwargs)
        env.unwrapped.tensorflow_loaded = 'tensorflow' in sys.modules
        return env

    gym.register('ProcessLocalCartPole-v0', entry_point=cartpole_noting_tensorflow)
    try:
        envs = factory.make_vector_env('ProcessLocalCartPole-v0', 2, 0, 'async')
        try:
            assert envs.context == 'spawn'
            assert list(envs.get_attr('tensorflow_loaded')) == [False, False]
            envs.reset(seed=0)
            envs.step(np.zeros(2, np.int64))
        finally:
            envs.close()
    finally:
        del gym.registry['ProcessLocalCartPole-v0']


def test_a_bad_keyword_is_one_line():
    with pytest.raises(environments.EnvironmentSetupError,
                       match="with --env_kwargs=nope=1: .*unexpected keyword argument 'nope'"):
        factory.make_env('Pendulum-v1', {'nope': 1})


def test_a_run_on_async_environments_with_keywords(tmp_path):
    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=8, hidden_sizes=(16,), batch_size=4, unroll_length=5, min_replay_size=4,
        queue_size=8))
    options = RunOptions(env='CartPole-v1', env_kwargs={'sutton_barto_reward': True},
                         vector_env='async', num_envs=2, num_steps=600, seed=0,
                         logdir=str(tmp_path / 'run'), eval_episodes=2, export=False)
    summary = inprocess.train(options, config)
    assert summary['env_steps'] >= 600 and summary['learner_steps'] > 0
    # Sutton and Barto's CartPole reward: 0 per step, -1 at the end.
    assert summary['eval_return_mean'] == -1.0 and summary['train_return_last20'] == -1.0
