"""`launch/tools/record.py` (`python launch/record.py`): an exported policy's episodes
written as demonstrations."""

import json
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.policies import export
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.policies.load import load_policy
from reverb_agents.replay.demos import episode_returns, load_demos, transitions

ENV = 'CartPole-v1'


@pytest.fixture(scope='module')
def saved_model(tmp_path_factory):
    """An untrained small CLEAR policy for CartPole, exported (no training)."""
    config = configs.from_flat(CLEARConfig, dict(lstm_size=8, hidden_sizes=(16,)))
    options = RunOptions(env=ENV, num_envs=1, logdir='/tmp/unused')
    envs = setup_lib.make_envs(options, config, 1, 0)
    setup = setup_lib.make_setup(options, config, envs)
    envs.close()
    tf.random.set_seed(3)
    core = setup_lib.make_core(setup)
    return export.export_policy(core, setup.action_space, setup.observation_space, ENV,
                                str(tmp_path_factory.mktemp('record') / 'saved_model'))


def test_records_episodes_that_load_back(tmp_path, run_script, saved_model):
    output = tmp_path / 'demos' / 'cartpole.npz'
    result = run_script('record', [f'--saved_model={saved_model}', '--episodes=2', '--seed=4',
                                   f'--output={output}'])
    assert result.returncode == 0, result.stderr[-2000:]
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    env = gym.make(ENV)
    demos = load_demos(str(output), env.observation_space, env.action_space)

    ends = np.flatnonzero(demos.terminated | demos.truncated)
    lengths = np.diff(np.concatenate([[-1], ends]))
    assert len(lengths) == printed['episodes'] == demos.spec['episodes'] == 2
    assert len(demos.reward) == lengths.sum() == printed['steps']
    assert demos.spec['env'] == ENV and printed['output'] == str(output)
    np.testing.assert_allclose(episode_returns(demos), printed['returns'])
    np.testing.assert_allclose(printed['returns'], lengths)  # CartPole: +1 per step
    assert printed['return_min'] == min(printed['returns'])
    assert printed['return_max'] == max(printed['returns'])
    np.testing.assert_allclose(printed['return_mean'], np.mean(printed['returns']))

    # Episode i starts from reset(seed + i), and the actions are the policy's greedy
    # ones given the recorded observations and the core's previous action and reward.
    np.testing.assert_array_equal(demos.observation[0], env.reset(seed=4)[0])
    np.testing.assert_array_equal(demos.observation[ends[0] + 1], env.reset(seed=5)[0])
    policy = load_policy(saved_model)
    steps = transitions(demos)
    for i in range(len(demos.reward)):
        if steps['first'][i]:
            state, prev_action, prev_reward = policy.initial_state(1), None, None
        action, state = policy.step(steps['observation'][i][None], prev_action, prev_reward,
                                    state)
        assert action[0] == demos.action[i], i
        prev_action, prev_reward = action, steps['reward'][i:i + 1]
        if not steps['first'][i]:
            assert steps['prev_action'][i] == demos.action[i - 1]

    # A second recording to the same file is refused, and the file is kept.
    again = run_script('record', [f'--saved_model={saved_model}', '--episodes=1',
                                  f'--output={output}'])
    assert again.returncode == 1 and len(again.errors) == 1, again.stderr[-2000:]
    assert f'{output}: the file exists' in again.errors[0]
    assert len(load_demos(str(output)).reward) == printed['steps']


def test_bad_input_gives_one_error_line(tmp_path, run_script, saved_model):
    output = str(tmp_path / 'out.npz')
    cases = {
        'no SavedModel': (['--saved_model=/nowhere', f'--output={output}'],
                          "'/nowhere' is not a SavedModel directory"),
        'unknown env': ([f'--saved_model={saved_model}', '--env=NoSuchEnv-v0',
                         f'--output={output}'], "unknown environment 'NoSuchEnv-v0'"),
        'spec mismatch': ([f'--saved_model={saved_model}', '--env=Pendulum-v1',
                           f'--output={output}'], 'but the policy expects shape [4]'),
        'no episodes': ([f'--saved_model={saved_model}', '--episodes=0',
                         f'--output={output}'], '--episodes must be >= 1, got 0'),
    }
    with ThreadPoolExecutor(2) as pool:  # subprocesses: most of their time is imports
        results = dict(zip(cases, pool.map(lambda args: run_script('record', args[0]),
                                           cases.values())))
    for name, (_, expected) in cases.items():
        result = results[name]
        assert result.returncode == 1, (name, result.stderr[-2000:])
        assert len(result.errors) == 1 and expected in result.errors[0], (name, result.errors)
        assert 'Traceback' not in result.stderr, name
    assert not (tmp_path / 'out.npz').exists()
