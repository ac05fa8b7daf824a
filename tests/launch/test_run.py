"""launch/run.py end to end: bad input, summary.json, checkpoints that resume, learning."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agents.clear.config import CLEARConfig
from launch import training

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMMARY_KEYS = ['agent', 'env', 'env_steps', 'learner_steps', 'wall_time_s', 'env_steps_per_s',
                'learner_steps_per_s', 'eval_return_mean', 'eval_return_std', 'eval_episodes',
                'saved_model']


def run_cli(args, tmp_path, extra_env=None, timeout=120):
    env = dict(os.environ, **(extra_env or {}))
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, 'launch', 'run.py'), f'--logdir={tmp_path}/run', *args],
        capture_output=True, text=True, timeout=timeout, env=env)


def error_lines(stderr: str):
    """The lines of `stderr` that report an error (`error: ...`)."""
    return [l for l in stderr.splitlines() if l.startswith('error:')]


@pytest.fixture(scope='module')
def text_env_module(tmp_path_factory):
    """A module registering an environment with a `Text` observation space."""
    directory = tmp_path_factory.mktemp('textenv')
    (directory / 'text_env_mod.py').write_text(textwrap.dedent('''
        import gymnasium as gym

        class TextObs(gym.Env):
            observation_space = gym.spaces.Text(5)
            action_space = gym.spaces.Discrete(2)

            def reset(self, seed=None, options=None):
                return 'a', {}

            def step(self, action):
                return 'a', 0.0, True, False, {}

        gym.register('TextObs-v0', entry_point=TextObs)
    '''))
    return str(directory)


@pytest.mark.parametrize('args,message', [
    (['--agent=nope'], "unknown agent 'nope'"),
    (['--env=NoSuchEnv-v0'], "unknown environment 'NoSuchEnv-v0'"),
    (['--replay_fraction=1.5'], 'replay_fraction must be in [0, 1]'),
    (['--num_envs=0'], 'num_envs must be >= 1'),
    (['--env=text_env_mod:TextObs-v0'], 'observation space Text'),
])
def test_bad_input_gives_one_clear_line_and_nonzero_exit(args, message, tmp_path,
                                                         text_env_module):
    result = run_cli(args, tmp_path, {'PYTHONPATH': text_env_module})
    assert result.returncode == 1, result.stderr[-2000:]
    errors = error_lines(result.stderr)
    assert len(errors) == 1, result.stderr[-2000:]
    assert message in errors[0]
    assert 'Traceback' not in result.stderr


def small_options(tmp_path, **kwargs):
    defaults = dict(env='CartPole-v1', num_envs=4, seed=3, logdir=str(tmp_path / 'run'),
                    eval_episodes=2, log_interval_s=1000.0)
    defaults.update(kwargs)
    return training.RunOptions(**defaults)


SMALL_CONFIG = CLEARConfig(lstm_size=8, hidden_sizes=(16,), batch_size=8, unroll_length=5,
                           min_replay_size=8, queue_size=16)


def test_summary_and_resume_from_checkpoint(tmp_path):
    first = training.train(small_options(tmp_path, num_steps=1500), SMALL_CONFIG)
    for key in SUMMARY_KEYS:
        assert key in first, key
    with open(tmp_path / 'run' / 'summary.json') as f:
        assert json.load(f)['learner_steps'] == first['learner_steps']
    assert first['learner_steps'] > 0 and first['env_steps'] >= 1500
    # The same logdir resumes: counters continue from the checkpoint, not from zero.
    second = training.train(small_options(tmp_path, num_steps=3000), SMALL_CONFIG)
    assert second['learner_steps'] > first['learner_steps']
    assert second['env_steps'] >= 3000
    assert second['env_steps'] - first['env_steps'] < 3000  # did not start over


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    training.train(small_options(tmp_path, num_steps=500), SMALL_CONFIG)
    other = CLEARConfig(lstm_size=16, hidden_sizes=(16,), batch_size=8, unroll_length=5,
                        min_replay_size=8, queue_size=16)
    run_config = (tmp_path / 'run' / training.RUN_CONFIG).read_text()
    checkpoints = sorted(os.listdir(tmp_path / 'run' / 'checkpoints'))
    with pytest.raises(training.TrainingError, match='cannot restore checkpoint'):
        training.train(small_options(tmp_path, num_steps=1000), other)
    # Nothing already saved was changed.
    assert (tmp_path / 'run' / training.RUN_CONFIG).read_text() == run_config
    assert sorted(os.listdir(tmp_path / 'run' / 'checkpoints')) == checkpoints


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    training.train(small_options(tmp_path, num_steps=500), SMALL_CONFIG)
    checkpoints = sorted(os.listdir(tmp_path / 'run' / 'checkpoints'))

    from agents.clear.learning import CLEARLearner
    real_step = CLEARLearner.step

    def nan_step(self, batch):
        metrics = dict(real_step(self, batch))
        metrics['loss/total_loss'] = metrics['loss/total_loss'] * float('nan')
        return metrics

    monkeypatch.setattr(CLEARLearner, 'step', nan_step)
    with pytest.raises(training.TrainingError, match='non-finite loss'):
        training.train(small_options(tmp_path, num_steps=100_000), SMALL_CONFIG)
    assert sorted(os.listdir(tmp_path / 'run' / 'checkpoints')) == checkpoints
