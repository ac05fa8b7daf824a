"""`--deterministic` (launch/runners/deterministic.py): the same seed gives the same run, bit for
bit; another seed another run; what it cannot reproduce is one error line.

The CLEAR runs are the default preset's (`clear_cartpole.flags`) on a short budget,
through `launch/run.py` one after the other (pytest-xdist may run another file's
training beside them); ACER's run in this process, small, one with another seed.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, registry
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.runs.options import RunOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLEAR_FLAGS = [f'--flagfile={os.path.join(ROOT, "launch", "presets", "clear_cartpole.flags")}',
               '--deterministic', '--num_steps=6400', '--log_interval_steps=5',
               '--noexport']
SAME = ('env_steps', 'learner_steps', 'train_return_last20', 'eval_return_mean',
        'eval_return_std', 'eval_episodes', 'deterministic')


def checkpoint_values(logdir) -> dict:
    """{name: value} of every variable in the run's latest checkpoint."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
        os.path.join(logdir, rundir.CHECKPOINTS)))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def differing_variables(a, b) -> list:
    """The variables two runs' latest checkpoints hold with other values (all must exist
    in both)."""
    first, second = checkpoint_values(a), checkpoint_values(b)
    assert first.keys() == second.keys()
    return [name for name in first if not np.array_equal(first[name], second[name])]


def read(logdir, name) -> bytes:
    with open(os.path.join(logdir, name), 'rb') as f:
        return f.read()


def summary(logdir) -> dict:
    return json.loads(read(logdir, 'summary.json'))


@pytest.fixture(scope='module')
def clear_runs(tmp_path_factory, run_script):
    """[logdir, logdir] of two short deterministic preset runs with seed 3."""
    root = tmp_path_factory.mktemp('clear')
    logdirs = [str(root / name) for name in ('first', 'second')]
    # Two interpreters with their own hash seeds, as two users' runs have: one forked from
    # the test's fork server (`tests/forked.py`), one fresh (a TensorFlow start-up less
    # than two fresh ones).
    for logdir, fresh in zip(logdirs, (False, True)):
        result = run_script('run', [*CLEAR_FLAGS, '--seed=3', f'--logdir={logdir}'],
                            timeout=120, fresh=fresh)
        assert result.returncode == 0, result.stderr[-3000:]
    return logdirs


def test_same_seed_same_progress_checkpoint_and_evaluation(clear_runs):
    first, second = clear_runs
    progress = read(first, 'progress.csv')
    assert progress == read(second, 'progress.csv')
    header, *rows = progress.decode().splitlines()
    assert 'wall_time_s' not in header.split(',')  # the one column that would differ
    assert len(rows) >= 3
    assert differing_variables(first, second) == []
    # The checkpoint's files themselves (its `checkpoint` index holds timestamps).
    prefix = os.path.basename(tf.train.latest_checkpoint(os.path.join(first, rundir.CHECKPOINTS)))
    for name in os.listdir(os.path.join(first, rundir.CHECKPOINTS)):
        if name.startswith(prefix + '.'):
            path = os.path.join(rundir.CHECKPOINTS, name)
            assert read(first, path) == read(second, path), name
    assert {k: summary(first)[k] for k in SAME} == {k: summary(second)[k] for k in SAME}
    assert summary(first)['deterministic'] is True
    # --noexport (what is compared here is the training): no SavedModel was written.
    assert summary(first)['saved_model'] is None
    assert not os.path.exists(os.path.join(first, 'saved_model'))


ACER = dict(lstm_size=8, hidden_sizes=(8,), advantage_hidden_sizes=(8,), batch_size=4,
            unroll_length=5, replay_start_size=20, queue_size=16, replay_ratio=2,
            replay_ratio_poisson=True)


@pytest.fixture(scope='module')
def acer_runs(tmp_path_factory):
    """{name: logdir} of small deterministic ACER runs in this process (its schedule: an
    on-policy batch, then a Poisson number of replayed ones): seed 3 twice, then 4. 500
    env steps are 68 learner steps with seed 3 (most of a run's time is its set-up)."""
    config = configs.from_flat(registry.get('acer').config_class, ACER)
    root = tmp_path_factory.mktemp('acer')
    logdirs = {}
    for name, seed in (('first', 3), ('second', 3), ('other_seed', 4)):
        logdirs[name] = str(root / name)
        inprocess.train(RunOptions(agent='acer', env='CartPole-v1', num_envs=4, seed=seed,
                                   logdir=logdirs[name], eval_episodes=2, num_steps=500,
                                   deterministic=True, log_interval_steps=20, export=False),
                        config)
    return logdirs


def test_acer_same_seed_same_run_in_one_process(acer_runs):
    """Nothing one run leaves behind in the process changes the next."""
    first, second = acer_runs['first'], acer_runs['second']
    assert read(first, 'progress.csv') == read(second, 'progress.csv')
    assert differing_variables(first, second) == []
    assert summary(first)['learner_steps'] > 50


def test_another_seed_another_run(acer_runs):
    first, other = acer_runs['first'], acer_runs['other_seed']
    assert read(first, 'progress.csv') != read(other, 'progress.csv')
    assert differing_variables(first, other)




@pytest.mark.parametrize('args,message', [
    (['--launcher=multiprocess'], '--deterministic runs in one process'),
    (['--launcher=ray'], '--deterministic runs in one process'),
    (['--role=learner', '--replay_address=localhost:1'], '--deterministic runs in one process'),
    (['--replay_sampler=prioritized'], 'prioritized replay'),
    (['--replay_eviction=reservoir'], '--replay_eviction=reservoir'),
])
def test_what_it_cannot_reproduce_is_one_error_line(args, message, tmp_path, run_main):
    code, errors = run_main(['--no_preset', '--deterministic', f'--logdir={tmp_path}/run',
                             '--num_envs=4', *args])
    assert code == 1
    assert len(errors) == 1 and message in errors[0], errors
    assert not os.path.exists(tmp_path / 'run')


def test_a_deterministic_run_does_not_resume(clear_runs, tmp_path, run_main):
    logdir = tmp_path / 'run'
    shutil.copytree(clear_runs[0], logdir)
    code, errors = run_main([*CLEAR_FLAGS, '--seed=3', '--resume', f'--logdir={logdir}'])
    assert code == 1
    assert len(errors) == 1 and 'do not resume' in errors[0], errors


def test_a_round_larger_than_the_queues_room_still_runs(tmp_path, run_main):
    """64 environments write a round of 64 sequences while a batch of 8 takes 7 fresh
    ones: with `--queue_size=64` the queue has no room for the next round before the
    learner runs out of fresh sequences. The deterministic schedule sizes its queue for
    that (`setup.sized_for_run`) instead of stopping."""
    logdir = tmp_path / 'run'
    code, errors = run_main(['--no_preset', '--deterministic', f'--logdir={logdir}',
                             '--num_envs=64', '--batch_size=8', '--replay_fraction=0.125',
                             '--queue_size=64', '--num_steps=4000', '--eval_episodes=1',
                             '--noexport'])
    assert code == 0 and not errors, errors
    assert summary(logdir)['learner_steps'] >= 20
