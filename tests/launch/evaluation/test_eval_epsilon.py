"""ε-greedy evaluation (`--eval_epsilon`, ALF's `epsilon_greedy`): with probability ε
per step and per environment, an action sampled from the policy replaces the greedy one."""

import json

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.evaluation import episodes as evaluation
from reverb_agents.launch.policies import export
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.policies.load import Policy

B = 4000  # rows of the unit tests: frequencies within ~0.02


def test_epsilon_zero_keeps_the_greedy_actions():
    greedy = (np.full([B], 3, np.int32),)
    sampled = (np.full([B], 1, np.int32),)
    assert evaluation.epsilon_greedy(greedy, sampled, 0.0, np.random.default_rng(0)) is greedy


@pytest.mark.parametrize('epsilon', [0.3, 1.0])
def test_epsilon_takes_that_share_of_rows_from_the_samples(epsilon):
    # Leaves of a Dict(aim: Box(3), move: Discrete(5)) action, greedy and sampled.
    greedy = (np.full([B, 3], 0.5, np.float32), np.full([B], 4, np.int32))
    sampled = (np.full([B, 3], -1.0, np.float32), np.full([B], 2, np.int32))
    aim, move = evaluation.epsilon_greedy(greedy, sampled, epsilon, np.random.default_rng(0))
    assert aim.dtype == np.float32 and move.dtype == np.int32
    explored = move == 2
    assert abs(explored.mean() - epsilon) < 0.03
    # A row takes every leaf from the same source.
    assert np.all(aim[explored] == -1.0) and np.all(aim[~explored] == 0.5)


def small_core(seed: int):
    """An untrained CLEAR core for CartPole (its greedy policy is deterministic)."""
    config = configs.from_flat(CLEARConfig, dict(lstm_size=8, hidden_sizes=(16,)))
    options = RunOptions(env='CartPole-v1', num_envs=1, logdir='/tmp/unused')
    envs = setup_lib.make_envs(options, config, 1, 0)
    setup = setup_lib.make_setup(options, config, envs)
    envs.close()
    tf.random.set_seed(seed)
    return setup_lib.make_core(setup), setup


def test_evaluate_with_epsilon_one_samples_from_the_policy():
    core, setup = small_core(1)
    space = setup.action_space

    def returns(**kwargs):
        return evaluation.evaluate(core, space, 'CartPole-v1', 30, seed=7, **kwargs)[2]

    # ε = 0 is the greedy evaluation; ε = 1 acts as the sampling policy, draw for draw.
    greedy = returns()
    np.testing.assert_array_equal(returns(epsilon=0.0), greedy)
    sampling = returns(deterministic=False)
    np.testing.assert_array_equal(returns(epsilon=1.0), sampling)
    assert not np.array_equal(sampling, greedy)
    mixed = returns(epsilon=0.5)
    assert not np.array_equal(mixed, greedy) and not np.array_equal(mixed, sampling)
    with pytest.raises(ValueError, match=r'eval_epsilon must be in \[0, 1\]'):
        evaluation.evaluate(core, space, 'CartPole-v1', 1, seed=7, epsilon=1.5)


def test_evaluate_script_takes_eval_epsilon(tmp_path, run_script):
    bad = run_script('evaluate', ['--saved_model=/nowhere', '--eval_epsilon=-0.5'])
    assert bad.returncode == 1 and len(bad.errors) == 1, bad.stderr[-2000:]
    assert '--eval_epsilon must be in [0, 1], got -0.5' in bad.errors[0]
    assert 'Traceback' not in bad.stderr

    core, setup = small_core(1)
    path = export.export_policy(core, setup.action_space, setup.observation_space,
                                'CartPole-v1', str(tmp_path / 'saved_model'))
    result = run_script('evaluate', [f'--saved_model={path}', '--episodes=30', '--seed=5',
                                     '--eval_epsilon=1'])
    assert result.returncode == 0, result.stderr[-2000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output['eval_epsilon'] == 1.0
    assert 10 < output['return_mean'] < 40  # an untrained core samples near uniformly


def test_evaluate_script_makes_the_environment_with_env_kwargs(tmp_path, run_script):
    """The model records its run's `env_kwargs` (here CartPole cut at 5 steps) and the
    script makes the environment with them; `--env_kwargs` replaces them; a bad one is
    one error line."""
    core, setup = small_core(1)
    path = export.export_policy(core, setup.action_space, setup.observation_space,
                                'CartPole-v1', str(tmp_path / 'saved_model'),
                                env_kwargs={'max_episode_steps': 5})
    policy = Policy(path)
    assert policy.environment() == ('CartPole-v1', {'max_episode_steps': 5})
    assert policy.environment('CartPole-v0') == ('CartPole-v0', {})  # not its environment
    given = {'max_episode_steps': 7}  # `--env_kwargs` replaces the recorded ones
    assert policy.environment(None, given) == ('CartPole-v1', given)
    result = run_script('evaluate', [f'--saved_model={path}', '--episodes=3'])
    assert result.returncode == 0, result.stderr[-2000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output['env_kwargs'] == {'max_episode_steps': 5} and output['returns'] == [5.0] * 3
    for bad, message in (('oops', 'key=value pairs'), ('no_such_keyword=1', 'no_such_keyword')):
        result = run_script('evaluate', [f'--saved_model={path}', f'--env_kwargs={bad}'])
        assert result.returncode == 1 and len(result.errors) == 1, result.stderr[-2000:]
        assert message in result.errors[0] and 'Traceback' not in result.stderr
