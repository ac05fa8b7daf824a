"""launch/run.py end to end: bad input, summary.json, checkpoints that resume.

Every bad input ends in one `error: ...` line, a non-zero exit and no
traceback within 60 s, and leaves what a logdir already held untouched. A few
cases run `run.py` as a process (exit status, no traceback on stderr); the
rest call the same `main` in this process, which saves a TensorFlow start-up
per case.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.runs.options import RunOptions

SUMMARY_KEYS = ['agent', 'env', 'env_steps', 'learner_steps', 'wall_time_s', 'env_steps_per_s',
                'learner_steps_per_s', 'eval_return_mean', 'eval_return_std', 'eval_episodes',
                'saved_model']
SMALL_CONFIG = configs.from_flat(CLEARConfig, dict(
    lstm_size=8, hidden_sizes=(16,), batch_size=8, unroll_length=5, min_replay_size=8,
    queue_size=16))
SMALL_FLAGS = ['--num_envs=4', '--lstm_size=8', '--hidden_sizes=16', '--batch_size=8',
               '--unroll_length=5', '--min_replay_size=8', '--queue_size=16', '--eval_episodes=2']


def small_options(logdir, **kwargs) -> RunOptions:
    defaults = dict(env='CartPole-v1', num_envs=4, seed=3, logdir=str(logdir), eval_episodes=2,
                    log_interval_s=1000.0)
    return RunOptions(**{**defaults, **kwargs})


def snapshot(directory) -> dict:
    """{relative path: content hash} of every file under `directory`."""
    out = {}
    for parent, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(parent, name)
            with open(path, 'rb') as f:
                out[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(scope='module')
def small_run(tmp_path_factory):
    """A finished small CLEAR run on CartPole: its logdir (copy it before changing it)."""
    logdir = tmp_path_factory.mktemp('small_run') / 'run'
    summary = inprocess.train(small_options(logdir, num_steps=1500), SMALL_CONFIG)
    return str(logdir), summary


@pytest.fixture
def run_copy(small_run, tmp_path):
    """A copy of `small_run`'s logdir, free to change."""
    logdir = tmp_path / 'run'
    shutil.copytree(small_run[0], logdir)
    return logdir


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


def assert_one_error(result, message, started):
    assert time.monotonic() - started < 60
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(result.errors) == 1, result.stderr[-2000:]
    assert message in result.errors[0], result.errors
    assert 'Traceback' not in result.stderr


@pytest.mark.parametrize('args,message', [
    (['--agent=nope'], "unknown agent 'nope'"),
    (['--env=text_env_mod:TextObs-v0'], 'observation space Text'),
])
def test_bad_input_gives_one_clear_line_and_nonzero_exit(args, message, run_cli,
                                                         text_env_module):
    started = time.monotonic()
    result = run_cli(args, {'PYTHONPATH': text_env_module})
    assert_one_error(result, message, started)


@pytest.mark.parametrize('args,message', [
    (['--agent=nope'], "unknown agent 'nope'"),
    (['--env=NoSuchEnv-v0'], "unknown environment 'NoSuchEnv-v0'"),
    (['--replay_fraction=1.5'], 'replay_fraction must be in [0, 1]'),
    (['--replay_fraction=1.0'], 'replay_fraction must be below 1'),
    (['--num_envs=0'], 'num_envs must be >= 1'),
    (['--num_steps=-5'], 'num_steps must be >= 1'),
    (['--agent=acer', '--env=Pendulum-v1', '--truncation_threshold=-1'],
     'truncation_threshold must be positive'),
    (['--agent=sac', '--policy_cloning_cost=0.3'],
     '--policy_cloning_cost is a flag of clear, not of sac'),
    (['--agent=clear', '--target_update_tau=0.1'], '--target_update_tau is a flag of sac'),
    (['--learning_rate=0'], 'learning_rate must be positive'),
    (['--replay_eviction=lifo'], 'replay_eviction must be one of'),
    (['--unroll_length=0'], 'unroll_length must be positive'),
    (['--agent=acer', '--trust_region_alpha=1.0'], 'trust_region_alpha must be in [0, 1)'),
    (['--agent=sac', '--batch_size=100', '--unroll_length=8'],
     'must be a multiple of unroll_length'),
    (['--launcher=slurm'], "unknown --launcher='slurm'"),
    (['--launcher=ray', '--num_actors=0'], '--num_actors must be >= 1, got 0'),
    (['--launcher=ray', '--ray_address=localhost'], "--ray_address must be 'auto' or host:port"),
    (['--eval_epsilon=1.5'], 'eval_epsilon must be in [0, 1], got 1.5'),
    (['--eval_epsilon=-0.1'], 'eval_epsilon must be in [0, 1], got -0.1'),
    (['--step_mul=0'], 'step_mul must be >= 1'),
    (['--tasks=CartPole-v1,Pendulum-v1', '--steps_per_task=100'], 'incompatible'),
    (['--tasks=CartPole-v1,Acrobot-v1', '--steps_per_task=0'], 'steps_per_task >= 1'),
    (['--tasks=CartPole-v1,Acrobot-v1', '--steps_per_task=100', '--env=CartPole-v1'],
     '--env or --tasks'),
    (['--tasks=CartPole-v1,Acrobot-v1', '--steps_per_task=100', '--num_steps=5'],
     'leave --num_steps out'),
    (['--env_kwargs=nope=1'], "unexpected keyword argument 'nope'"),
    (['--env_kwargs=x'], '--env_kwargs takes key=value pairs'),
    (['--env=Pendulum-v1', '--env_kwargs=g=2,g=3'], "--env_kwargs gives 'g' twice"),
    (['--vector_env=threads'], "vector_env must be one of ['sync', 'async', 'ale']"),
    (['--observation_map=whiten'], "observation_map must be one of ('rms', 'standardize')"),
    (['--resume'], 'holds no run to resume'),
    (['--agent=sac', '--env=Pendulum-v1', '--priority_exponent=-1'],
     'priority_exponent must be >= 0, got -1.0'),
    (['--prior_kl_weight=-1'], 'prior_kl_weight must be >= 0, got -1.0'),
    (['--intra_op_threads=-1'], 'intra_op_threads must be >= 0'),
])
def test_bad_values_are_one_error_line_from_main(args, message, tmp_path, run_main):
    """The same `main` the command line runs, in this process (no TF start-up per case)."""
    code, errors = run_main([f'--logdir={tmp_path}/run', *args])
    assert code == 1
    assert len(errors) == 1 and message in errors[0], errors
    assert not os.path.exists(tmp_path / 'run')




@pytest.mark.parametrize('args,message', [
    ([], 'already holds a run: add --resume to continue it, or leave --logdir out'),
    (['--resume', '--lstm_size=16'], '--lstm_size=8 (now 16)'),
    (['--resume', '--seed=4'], '--seed=3 (now 4)'),
    (['--resume', '--env=Acrobot-v1'], '--env=CartPole-v1 (now Acrobot-v1)'),
])
def test_a_run_directory_is_resumed_only_when_asked_with_its_flags(args, message, run_copy,
                                                                  run_main):
    before = snapshot(run_copy)
    defaults = [*SMALL_FLAGS, '--seed=3', '--no_preset', f'--logdir={run_copy}']
    code, errors = run_main([*defaults, *args])
    assert code == 1 and len(errors) == 1 and message in errors[0], errors
    assert snapshot(run_copy) == before


def assert_one_error_from_main(run_main, args, message):
    code, errors = run_main(args)
    assert code == 1 and len(errors) == 1 and message in errors[0], errors


def test_list_flags_of_the_wrong_type_are_one_error_line(run_main, tmp_path):
    assert_one_error_from_main(run_main, [f'--logdir={tmp_path}/run', '--hidden_sizes=64,x'],
                               '--hidden_sizes takes comma-separated ints')


def test_logdir_that_is_a_file_is_an_error_and_stays(run_main, tmp_path):
    path = tmp_path / 'a_file'
    path.write_text('keep me')
    assert_one_error_from_main(run_main, ['--no_preset', f'--logdir={path}', *SMALL_FLAGS],
                               'is not a directory')
    assert path.read_text() == 'keep me'


@pytest.mark.parametrize('damage,message', [
    ('index', 'cannot read the checkpoint index'),
    ('data', 'cannot restore checkpoint'),
    ('run_config', 'is not a run config'),
])
def test_corrupt_run_is_an_error_and_stays(damage, message, run_copy, run_main):
    checkpoints = run_copy / rundir.CHECKPOINTS
    if damage == 'index':
        (checkpoints / 'checkpoint').write_text('model_checkpoint_path: "x\n garbage {{')
    elif damage == 'data':
        for name in os.listdir(checkpoints):
            if '.data-' in name:
                (checkpoints / name).write_bytes(b'\0' * 64)
    else:
        (run_copy / rundir.RUN_CONFIG).write_text('{"agent": ')
    before = snapshot(run_copy)
    assert_one_error_from_main(run_main, ['--no_preset', f'--logdir={run_copy}', *SMALL_FLAGS,
                                          '--num_steps=3000', '--seed=3', '--resume'], message)
    assert snapshot(run_copy) == before


@pytest.mark.parametrize('keep_run_config,message', [
    (True, 'holds a run with other flags: --agent=clear (now acer)'),
    (False, 'cannot restore checkpoint'),
])
def test_another_agents_run_is_an_error_and_stays(keep_run_config, message, run_copy, run_main):
    if not keep_run_config:  # only the checkpoint tells
        os.remove(run_copy / rundir.RUN_CONFIG)
    before = snapshot(run_copy)
    assert_one_error_from_main(run_main, ['--no_preset', f'--logdir={run_copy}', '--agent=acer',
                                          '--num_envs=4', '--eval_episodes=2', '--resume'],
                               message)
    assert snapshot(run_copy) == before


def test_summary_and_resume_from_checkpoint(small_run, run_copy, run_main):
    _, first = small_run
    for key in SUMMARY_KEYS:
        assert key in first, key
    assert first['interrupted'] is False and first['eval_episodes'] == 2
    with open(run_copy / 'summary.json') as f:
        assert json.load(f)['learner_steps'] == first['learner_steps']
    assert first['learner_steps'] > 0
    # Past its budget the actor acts on only until the full queue holds a round back: at
    # most what fills the queue, the last batch's fresh sequences and the round being
    # written (`Actor.run`'s `soft_budget`).
    config = SMALL_CONFIG
    num_envs = small_options('').num_envs
    overshoot = (config.replay.queue_size + config.batch_size + num_envs) * config.unroll_length
    assert 1500 <= first['env_steps'] <= 1500 + overshoot, first
    # The same logdir resumes (--resume, the same flags): counters continue from the
    # checkpoint, not from zero.
    code, errors = run_main([*SMALL_FLAGS, '--seed=3', '--no_preset', '--resume',
                             '--num_steps=3000', f'--logdir={run_copy}'])
    assert code == 0 and not errors, errors
    with open(run_copy / 'summary.json') as f:
        second = json.load(f)
    assert second['learner_steps'] > first['learner_steps']
    assert second['env_steps'] >= 3000
    assert second['env_steps'] - first['env_steps'] < 3000  # did not start over


def test_another_network_is_a_clear_error(run_copy):
    other = configs.replace(SMALL_CONFIG, lstm_size=16)
    before = snapshot(run_copy)
    with pytest.raises(rundir.TrainingError, match='cannot restore checkpoint'):
        inprocess.train(small_options(run_copy, num_steps=3000), other)
    assert snapshot(run_copy) == before


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(run_copy, monkeypatch):
    checkpoints = sorted(os.listdir(run_copy / rundir.CHECKPOINTS))
    from reverb_agents.agents.clear.learning import CLEARLearner
    real_step = CLEARLearner.step

    def nan_step(self, batch):
        metrics = dict(real_step(self, batch))
        metrics['loss/total_loss'] = metrics['loss/total_loss'] * float('nan')
        return metrics

    monkeypatch.setattr(CLEARLearner, 'step', nan_step)
    with pytest.raises(rundir.TrainingError, match='non-finite loss'):
        inprocess.train(small_options(run_copy, num_steps=100_000), SMALL_CONFIG)
    assert sorted(os.listdir(run_copy / rundir.CHECKPOINTS)) == checkpoints


def test_intra_op_threads_apply_before_tensorflow_starts_and_warn_after(tmp_path):
    # A fresh interpreter: this test process's TensorFlow has long started.
    code = ('from reverb_agents.launch.building import setup\n'
            'import tensorflow as tf\n'
            'setup.set_intra_op_threads(1)\n'
            'assert tf.config.threading.get_intra_op_parallelism_threads() == 1\n'
            'tf.constant(1.0) + 1.0\n'
            'setup.set_intra_op_threads(2)\n'  # too late: a warning, not an error
            'assert tf.config.threading.get_intra_op_parallelism_threads() == 1\n')
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, '-c', code], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'intra_op_threads=2 not applied' in result.stderr
