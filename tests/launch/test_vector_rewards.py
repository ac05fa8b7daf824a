"""Vector rewards (SAC's `reward_weights`): the vector env, the stored
trajectories, the errors, and a task whose weighting decides what is learned."""

import json
import os
import time

import gymnasium as gym
import numpy as np
import pytest
import reverb

from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.launch import environments
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.environments import factory
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.replay import dataset, tables
from tests.conftest import SAC_FEED_FORWARD

EPISODE_LENGTH = 10


class TwoGoals(gym.Env):
    """Reward components (-(a - 0.8)^2, -(a + 0.8)^2) for an action a in [-1, 1].

    Ten steps per episode, a constant observation. Weights (1, 0) make a = 0.8
    best (return 0) and a = -0.8 worst (-25.6); weights (0, 1) the reverse.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    reward_space = gym.spaces.Box(-np.inf, 0.0, (2,), np.float32)  # mo-gymnasium's convention

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        a = float(np.asarray(action).ravel()[0])
        self._t += 1
        reward = np.array([-(a - 0.8) ** 2, -(a + 0.8) ** 2], np.float32)
        return np.zeros(1, np.float32), reward, False, self._t >= EPISODE_LENGTH, {}


gym.register(id='TwoGoals-v0', entry_point=TwoGoals)


def test_vector_env_returns_the_weighted_reward_and_the_vector():
    envs = factory.make_vector_env('TwoGoals-v0', 3, 0, reward_weights=(0.25, 0.75))
    envs.reset(seed=0)
    _, reward, _, _, info = envs.step(np.array([[0.8], [-0.8], [0.0]], np.float32))
    assert factory.reward_size(envs) == 2
    np.testing.assert_allclose(info['reward_vector'],
                               [[0.0, -2.56], [-2.56, 0.0], [-0.64, -0.64]], atol=1e-6)
    np.testing.assert_allclose(reward, [0.75 * -2.56, 0.25 * -2.56, -0.64], atol=1e-6)
    envs.close()


@pytest.mark.parametrize('env_id,weights,message', [
    ('TwoGoals-v0', None, 'has rewards of 2 components: pass --reward_weights with 2 numbers'),
    ('TwoGoals-v0', (1.0, 0.0, 0.0), '--reward_weights has 3 numbers but TwoGoals-v0 has rewards of 2'),
    ('Pendulum-v1', (1.0, 0.0), 'but Pendulum-v1 has scalar rewards'),
])
def test_mismatched_reward_weights_are_one_clear_error(env_id, weights, message):
    with pytest.raises(environments.EnvironmentSetupError, match=message):
        factory.make_vector_env(env_id, 2, 0, reward_weights=weights)


def test_actor_stores_reward_vectors_in_replay(tmp_path):
    options = RunOptions(agent='sac', env='TwoGoals-v0', num_envs=4, num_steps=100, seed=0,
                         logdir=str(tmp_path))
    config = SACConfig(hidden_sizes=(8,), critic_hidden_sizes=(8,), reward_weights=(1.0, 0.0),
                       learning_starts=16, **SAC_FEED_FORWARD)
    envs = setup_lib.make_envs(options, config, options.num_envs, 0)
    setup = setup_lib.make_setup(options, config, envs)
    assert setup.signature.steps.reward.shape == (2, 4, 2)  # [n + 1, envs, components]
    server = reverb.Server(setup_lib.make_server_tables(setup))
    client = reverb.Client(f'localhost:{server.port}')
    try:
        actor = setup_lib.make_actor(setup, client, envs, 0, EpisodeStats())
        actor._fetcher = None  # no learner publishes here
        deadline = time.monotonic() + 60  # a bug here fails the test instead of hanging
        actor.run(lambda: time.monotonic() > deadline, max_env_steps=20)  # 5 items; 8 fit
        sample, _ = next(iter(dataset.table_dataset(f'localhost:{server.port}', tables.REPLAY,
                                                    setup.signature, 1)))
        reward = sample.steps.reward.numpy()[0]  # [n + 1, envs, components]
        assert reward.shape == (2, 4, 2)
        prev_reward = sample.steps.prev_reward.numpy()[0]
        # Uniform random warm-up actions: both components are at most 0 and
        # prev_reward (the core's input) is the first component, the weighted sum.
        assert (reward <= 0).all() and (reward < 0).any()
        np.testing.assert_allclose(prev_reward[1], reward[0, :, 0], rtol=1e-6)
    finally:
        server.stop()
        envs.close()


@pytest.mark.parametrize('weights,goal', [((1.0, 0.0), 0.8), ((0.0, 1.0), -0.8)])
def test_weights_decide_what_sac_learns(tmp_path, weights, goal, run_script, error_lines):
    options = RunOptions(agent='sac', env='TwoGoals-v0', num_envs=8, num_steps=1000, seed=0,
                         logdir=str(tmp_path), eval_episodes=4, log_interval_s=1000.0,
                         export=goal > 0)  # evaluate.py reads one weighting's SavedModel
    config = SACConfig(hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), batch_size=64,
                       reward_weights=weights, **SAC_FEED_FORWARD)
    summary = inprocess.train(options, config)
    # The weighted return of a deterministic policy: 0 at the goal, -9.7 for
    # uniform random actions, -25.6 at the other goal.
    assert summary['eval_return_mean'] > -1.0, summary
    if goal < 0:
        return  # evaluate.py is checked on one of the two weightings

    # The exported actor, run by evaluate.py (no library import; the environment's
    # module registers it), gives the same weighted return: the task is deterministic.
    here = os.path.dirname(os.path.abspath(__file__))
    importable = {'PYTHONPATH': os.pathsep.join([here, os.environ.get('PYTHONPATH', '')])}
    env_flag = f'--env={os.path.splitext(os.path.basename(__file__))[0]}:TwoGoals-v0'
    weights_flag = '--reward_weights=' + ','.join(str(w) for w in weights)
    result = run_script('evaluate', [f'--saved_model={summary["saved_model"]}', env_flag,
                                     weights_flag, '--episodes=2'], importable)
    assert result.returncode == 0, result.stderr[-2000:]
    returned = json.loads(result.stdout.strip().splitlines()[-1])
    assert returned['return_mean'] == pytest.approx(summary['eval_return_mean'], abs=1e-3)
    result = run_script('evaluate', [f'--saved_model={summary["saved_model"]}', env_flag,
                                     '--episodes=1'], importable)
    assert result.returncode == 1
    assert error_lines(result.stderr) == [
        'error: the environment\'s rewards have 2 components: pass --reward_weights with 2 '
        'numbers'], result.stderr[-2000:]


def test_cli_rejects_reward_weights_that_do_not_fit(run_main, tmp_path):
    # run.py's parser and main in this process: the exit status and `error:` lines of a
    # bad input in a real subprocess are tested with the CLI's other errors.
    for value, message in [('1,2', 'Pendulum-v1 has scalar rewards'),
                           ('1,x', '--reward_weights takes comma-separated floats')]:
        code, errors = run_main(['--no_preset', f'--logdir={tmp_path / value}', '--agent=sac',
                                 '--env=Pendulum-v1', f'--reward_weights={value}'])
        assert code == 1
        assert len(errors) == 1 and message in errors[0], errors


def test_unset_weights_learn_the_plain_sum_and_scalar_agents_refuse_vectors():
    # As ALF: no reward_weights on a vector-reward environment means weights of 1.
    options = RunOptions(agent='sac', env='TwoGoals-v0')
    assert setup_lib.resolve_config(options, SACConfig()).reward_weights == (1.0, 1.0)
    assert setup_lib.resolve_config(options, SACConfig(reward_weights=(0.5, -2.0))
                                    ).reward_weights == (0.5, -2.0)
    scalar = RunOptions(agent='sac', env='Pendulum-v1')
    assert setup_lib.resolve_config(scalar, SACConfig()).reward_weights is None
    with pytest.raises(environments.EnvironmentSetupError,
                       match='TwoGoals-v0: clear learns scalar rewards; this environment.s '
                             'rewards have 2 components'):
        setup_lib.resolve_config(RunOptions(agent='clear', env='TwoGoals-v0'), CLEARConfig())
