"""Learner and replay checkpoints as a pair (`launch/runs/checkpoint_pairs.py`): a run killed
half-way through a save resumes the last whole pair, never a learner with a replay of
another moment.

A real SAC run (`--save_replay`) in a child process is SIGKILLed inside its third save:
either once Reverb's checkpoint is whole but not yet paired, or once the learner's
checkpoint is written but not the record that pairs it. Both leave a replay newer than
the second pair's on disk; the resumed run restores the second pair. A fast test holds
the saves themselves to the rule: one replay per commit, none after a save without one.
"""

import os
import shutil
import signal
import textwrap

import pytest
import reverb
import tensorflow as tf

from reverb_agents.agents import configs, registry
from reverb_agents.launch.runs import checkpoint_pairs, lockfile, rundir
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.replay import tables as tables_lib
from tests.conftest import SAC_FEED_FORWARD

SMALL_SAC = dict(hidden_sizes=(8,), critic_hidden_sizes=(8,), batch_size=8, learning_starts=16,
                 **SAC_FEED_FORWARD)
CONFIG = configs.from_flat(registry.get('sac').config_class, SMALL_SAC)
KILLED_SAVE = 3

CHILD = textwrap.dedent(f'''
    import os, signal, sys
    import tensorflow as tf
    from reverb_agents.agents import configs, registry
    from reverb_agents.launch.runs import checkpoint_pairs
    from reverb_agents.launch.runners import inprocess
    from reverb_agents.launch.runs.options import RunOptions

    logdir, point = sys.argv[1], sys.argv[2]
    saves = []

    def killing(original, before):
        def save(*args, **kwargs):
            saves.append(None)
            if before and len(saves) == {KILLED_SAVE}:
                os.kill(os.getpid(), signal.SIGKILL)
            result = original(*args, **kwargs)
            if not before and len(saves) == {KILLED_SAVE}:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        return save

    if point == 'replay_whole':  # Reverb's checkpoint is whole, not yet paired
        checkpoint_pairs.Checkpoints._save_pair = killing(
            checkpoint_pairs.Checkpoints._save_pair, before=True)
    else:  # 'learner_written': the learner's checkpoint, not the record
        tf.train.CheckpointManager.save = killing(tf.train.CheckpointManager.save, before=False)
    config = configs.from_flat(registry.get('sac').config_class, {SMALL_SAC!r})
    inprocess.train(RunOptions(agent='sac', env='Pendulum-v1', num_envs=4, num_steps=10**8,
                               logdir=logdir, eval_episodes=1, log_interval_s=1000.0,
                               checkpoint_interval_steps=40, save_replay=True, export=False),
                    config)
''')


def options(logdir: str, num_steps: int) -> RunOptions:
    return RunOptions(agent='sac', env='Pendulum-v1', num_envs=4, num_steps=num_steps,
                      logdir=logdir, eval_episodes=1, log_interval_s=1000.0,
                      checkpoint_interval_steps=40, save_replay=True, export=False)


def replay_items(setup: setup_lib.RunSetup, path: str, tmp_path) -> int:
    """Items of `replay` in the Reverb checkpoint `path`, loaded by a server of its own."""
    empty = tmp_path / f'empty_{os.path.basename(path)}'
    server = setup_lib.make_server(setup, checkpoint=(str(empty), path))
    try:
        return tables_lib.table_sizes(reverb.Client(f'localhost:{server.port}'))['replay']
    finally:
        server.stop()


def learner_env_steps(path: str) -> int:
    return int(tf.train.load_checkpoint(path).get_tensor('env_steps/.ATTRIBUTES/VARIABLE_VALUE'))


@pytest.mark.parametrize('point', ['replay_whole', 'learner_written'])
def test_a_save_killed_half_way_resumes_the_last_whole_pair(point, tmp_path, capsys,
                                                            forked_python):
    logdir = str(tmp_path / 'run')
    child = forked_python('library', [logdir, point], code=CHILD)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]

    pair = checkpoint_pairs.read_record(logdir)  # the second save's, whole
    checkpoints = os.path.join(logdir, rundir.CHECKPOINTS)
    pairs_dir = os.path.join(logdir, rundir.REPLAY_PAIRS)
    staging = os.path.join(pairs_dir, rundir.STAGING)
    if point == 'replay_whole':
        assert tf.train.latest_checkpoint(checkpoints) == pair['learner']
        (leftover,) = [os.path.join(staging, name) for name in os.listdir(staging)]
    else:
        newer = tf.train.latest_checkpoint(checkpoints)
        assert int(newer.rsplit('-', 1)[1]) > pair['step']  # the third save's, unpaired
        (leftover,) = [os.path.join(pairs_dir, n) for n in os.listdir(pairs_dir)
                       if n not in (rundir.PAIR_RECORD, rundir.STAGING)
                       and os.path.join(pairs_dir, n) != pair['replay']]
    assert checkpoint_pairs.complete(leftover)
    assert lockfile.check_free(logdir) is None  # the killed run's lock: stale

    env = setup_lib.make_envs(options(logdir, 1), CONFIG, 4, 0)
    setup = setup_lib.make_setup(options(logdir, 1), CONFIG, env)
    env.close()
    paired_items = replay_items(setup, pair['replay'], tmp_path)
    # The leftover holds more: a resume that loaded it would show.
    assert replay_items(setup, leftover, tmp_path) > paired_items >= SMALL_SAC['learning_starts']

    # On a copy: what a paired resume restores, and what it deletes before its server starts.
    copy = str(tmp_path / 'copy')
    shutil.copytree(logdir, copy)
    learner = setup_lib.make_learner(setup)
    counter = tf.Variable(0, dtype=tf.int64)
    pairs = checkpoint_pairs.Checkpoints(tf.train.Checkpoint(learner=learner, env_steps=counter),
                                         copy, paired=True)
    assert pairs.restore() == os.path.join(copy, rundir.CHECKPOINTS, f'ckpt-{pair["step"]}')
    assert int(learner.num_steps.numpy()) == pair['step']
    copied_replay = os.path.join(copy, rundir.REPLAY_PAIRS, os.path.basename(pair['replay']))
    assert pairs.prepare_replay() == (os.path.join(copy, rundir.REPLAY_PAIRS, rundir.STAGING),
                                      copied_replay)
    assert sorted(os.listdir(os.path.join(copy, rundir.REPLAY_PAIRS))) == sorted(
        [rundir.PAIR_RECORD, os.path.basename(pair['replay'])])
    assert tf.train.latest_checkpoint(os.path.join(copy, rundir.CHECKPOINTS)) == os.path.join(
        copy, rundir.CHECKPOINTS, f'ckpt-{pair["step"]}')

    # The resumed run itself (which takes the killed run's stale lock over).
    capsys.readouterr()
    start = learner_env_steps(pair['learner'])
    summary = inprocess.train(options(logdir, start + 100), CONFIG)
    err = capsys.readouterr().err
    assert f'Resumed from {pair["learner"]} at learner step {pair["step"]},' in err, err
    assert f'replay restored from {pair["replay"]}: replay {paired_items:,} items' in err, err
    assert summary['env_steps'] >= start + 100
    assert not os.path.exists(os.path.join(logdir, lockfile.LOCK_FILE))
    # It ends with one whole pair, its newest checkpoint, and nothing unpaired.
    last = checkpoint_pairs.read_record(logdir)
    assert last['learner'] == tf.train.latest_checkpoint(checkpoints)
    assert last['step'] == summary['learner_steps']
    assert sorted(os.listdir(pairs_dir)) == sorted(
        [rundir.PAIR_RECORD, rundir.STAGING, os.path.basename(last['replay'])])
    assert os.listdir(staging) == []


def test_pairs_are_committed_pruned_and_dropped_by_a_save_without_one(tmp_path):
    """Saves with a real Reverb server: each commit keeps one replay, a failed replay
    checkpoint or a save without pairs (a multi-process learner) drops the record."""
    logdir = str(tmp_path / 'run')
    variable = tf.Variable(0)
    pairs = checkpoint_pairs.Checkpoints(tf.train.Checkpoint(v=variable), logdir, paired=True)
    staging, restore_from = pairs.prepare_replay()
    assert restore_from is None  # nothing to restore
    server = reverb.Server([reverb.Table.queue('q', 100)],
                           checkpointer=reverb.checkpointers.DefaultCheckpointer(staging))
    client = reverb.Client(f'localhost:{server.port}')
    pairs_dir = os.path.join(logdir, rundir.REPLAY_PAIRS)
    try:
        pairs.write_replay = client.checkpoint
        kept = []
        for step, items in ((10, 3), (20, 2)):
            for _ in range(items):
                client.insert(tf.constant(step), {'q': 1.0})
            variable.assign(step)
            assert pairs.save(step).endswith(f'ckpt-{step}')
            record = checkpoint_pairs.read_record(logdir)
            assert record['step'] == step and record['learner'].endswith(f'ckpt-{step}')
            assert sorted(os.listdir(pairs_dir)) == sorted(
                [rundir.PAIR_RECORD, rundir.STAGING, os.path.basename(record['replay'])])
            kept.append(record['replay'])
        assert not os.path.exists(kept[0])  # the older pair's replay went with its commit
        assert checkpoint_pairs.paired_replay(logdir) == kept[1]  # a replay role's fallback
        assert pairs.save(20) is None  # saved already: nothing to add
        pairs.write_replay = lambda: None  # the replay checkpoint failed
        variable.assign(30)
        assert pairs.save(30).endswith('ckpt-30')
    finally:
        server.stop()
    assert checkpoint_pairs.read_record(logdir) is None
    assert sorted(os.listdir(pairs_dir)) == [rundir.STAGING]
    resumed = checkpoint_pairs.Checkpoints(tf.train.Checkpoint(v=variable), logdir, paired=True)
    variable.assign(0)
    assert resumed.restore().endswith('ckpt-30') and int(variable.numpy()) == 30

    # The record's replay restores; a save without pairs drops the record first.
    with open(os.path.join(pairs_dir, rundir.PAIR_RECORD), 'w') as f:
        f.write('{"step": 30, "learner": "ckpt-30"}')
    with pytest.raises(rundir.TrainingError, match='is not a checkpoint pair record'):
        checkpoint_pairs.Checkpoints(tf.train.Checkpoint(v=variable), logdir, paired=True)
    unpaired = checkpoint_pairs.Checkpoints(tf.train.Checkpoint(v=variable), logdir, paired=False)
    assert unpaired.save(40).endswith('ckpt-40')
    assert not os.path.exists(os.path.join(pairs_dir, rundir.PAIR_RECORD))
