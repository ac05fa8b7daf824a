"""Networks of the user's own from the command line (docs/networks.md): a Keras torso
of a user's module, in-process and multi-process, resumed, and exported to a
SavedModel that runs without the module; each bad input one `error:` line before
anything is written. (Learning with the other parts: test_user_networks_learning.py.)"""

import importlib.util
import json
import os
import shutil
import sys

import numpy as np
import pytest

from reverb_agents.launch.runs import rundir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, 'network_examples', 'my_networks.py')
USER_MODULE = 'my_keras_nets'  # the user's module: on the runs' path only


@pytest.fixture(scope='module')
def user_module(tmp_path_factory):
    """network_examples/my_networks.py as a module of the user's own, in a folder the runs get
    on their PYTHONPATH and a standalone Python does not; this process imports it by
    file (so it can restore the runs' cores), its path untouched."""
    folder = tmp_path_factory.mktemp('user_code')
    shutil.copy(EXAMPLES, folder / f'{USER_MODULE}.py')
    spec = importlib.util.spec_from_file_location(USER_MODULE, folder / f'{USER_MODULE}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[USER_MODULE] = module
    yield {'PYTHONPATH': os.pathsep.join([ROOT, str(folder)])}
    sys.modules.pop(USER_MODULE, None)


def summary_of(logdir) -> dict:
    with open(os.path.join(logdir, 'summary.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def keras_cartpole(user_module, tmp_path_factory, run_script):
    """CLEAR's defaults on CartPole (no preset) with a Keras Sequential torso named
    MODULE:FUNCTION on the command line, half the default budget, stopping once a
    greedy check scores 490; `--deterministic`, so that the result is the seed's, not
    the threads' timing."""
    logdir = str(tmp_path_factory.mktemp('keras_cartpole') / 'run')
    args = ['--agent=clear', '--env=CartPole-v1', f'--torso={USER_MODULE}:mlp',
            '--torso_kwargs=units=64,layers=2', '--deterministic']
    result = run_script('run', ['--no_preset', f'--logdir={logdir}', '--num_steps=150000',
                                '--target_return=490', *args], user_module, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, logdir, args


def test_a_keras_torso_from_the_command_line_solves_cartpole(keras_cartpole):
    result, logdir, _ = keras_cartpole
    assert summary_of(logdir)['eval_return_mean'] >= 475
    assert f'Sequential ({USER_MODULE}:mlp)' in result.stderr  # the network table
    assert 'actors act through TensorFlow' in result.stderr
    with open(os.path.join(logdir, rundir.RUN_CONFIG)) as f:
        assert f'{USER_MODULE}:mlp' in f.read()


def test_its_savedmodel_runs_without_the_users_module(keras_cartpole, tmp_path,
                                                      compare_exported):
    """The layers are traced into the graph: a Python with TensorFlow alone (the user's
    module not on its path) gets the library's greedy returns."""
    _, logdir, _ = keras_cartpole
    expected, standalone = compare_exported(logdir, os.path.join(logdir, 'saved_model'),
                                            tmp_path)
    np.testing.assert_allclose(standalone, expected, rtol=1e-6)
    assert min(expected) >= 400


def test_resume_continues_from_the_checkpoint(keras_cartpole, user_module, run_script):
    _, logdir, args = keras_cartpole
    args = [a for a in args if a != '--deterministic']  # a deterministic run does not resume
    before = summary_of(logdir)
    result = run_script('run', ['--no_preset', f'--logdir={logdir}', '--resume',
                                f'--num_steps={before["env_steps"] + 3000}', *args],
                        user_module, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f'env step {before["env_steps"]}' in result.stderr  # "Resumed from ..."
    after = summary_of(logdir)
    assert after['learner_steps'] > before['learner_steps']
    # Another network is another run: refused as any other changed flag.
    other = run_script('run', ['--no_preset', f'--logdir={logdir}', '--resume',
                               *args[:2], f'--torso={USER_MODULE}:sonnet_mlp'], user_module)
    assert other.returncode == 1 and 'other flags' in other.stderr


def test_multiprocess_runs_the_keras_torso_in_every_role(user_module, run_cli, tmp_path):
    """The same network and defaults as three processes (replay, learner, an actor),
    each importing the user's module; the default 300k env steps, stopping once a greedy
    check scores 490."""
    result = run_cli(['--agent=clear', '--env=CartPole-v1', f'--torso={USER_MODULE}:mlp',
                      '--launcher=multiprocess', '--num_actors=1', '--target_return=490'],
                     extra_env=user_module, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '[actor 0] actors act through TensorFlow' in result.stdout + result.stderr
    summary = summary_of(tmp_path / 'run')
    # Thread and process timing vary the result: 500 where measured; a random policy ~20.
    assert summary['eval_return_mean'] >= 400, summary


BAD = [
    (['--torso=no_such_user_module:f'], 'cannot import no_such_user_module'),
    (['--torso=tests.user_networks:NOT_A_FUNCTION'], 'not a function'),
    (['--torso=tests.user_networks:raises'], 'raised RuntimeError: no GPU for this torso'),
    (['--torso=tests.user_networks:not_a_layer'], 'returned a str'),
    (['--torso=tests.user_networks:flat_output'], 'a rank-2 float tensor'),
    (['--torso=tests.user_networks:no_variables'], 'creates no trainable variable'),
    (['--memory=tests.user_networks:no_state'], 'no state_size'),
    (['--torso=network_examples.my_networks:mlp', '--torso_kwargs=width=3'],
     "does not take --torso_kwargs=width=3"),
]


@pytest.mark.parametrize('args, message', BAD)
def test_a_bad_network_is_one_error_line_and_writes_nothing(args, message, run_cli, tmp_path):
    """In an existing (empty) logdir nothing is written, the lock file included; a
    multi-process run is refused before any role starts."""
    logdir = tmp_path / 'existing'
    logdir.mkdir()
    launchers = [[], ['--launcher=multiprocess']] if 'raises' in args[0] else [[]]
    for launcher in launchers:
        result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_steps=1000', *args,
                          *launcher], logdir=str(logdir))
        assert result.returncode == 1
        assert len(result.errors) == 1 and message in result.errors[0], result.stderr[-2000:]
        assert 'Traceback' not in result.stderr and 'starting' not in result.stdout
        assert os.listdir(logdir) == []
