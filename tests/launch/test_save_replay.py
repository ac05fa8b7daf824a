"""Replay kept across an in-process resume (`--save_replay`, on by default for SAC):
a run killed after a checkpoint leaves its Reverb tables beside the learner's
checkpoint, and the resumed run's first batch is sampled from the restored items."""

import os
import re
import signal
import time

import reverb
import tensorflow as tf

from reverb_agents.agents import configs, registry
from reverb_agents.launch.learning import data
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.replay import tables as tables_lib
from tests.conftest import SAC_FEED_FORWARD, SAC_FEED_FORWARD_FLAGS

SMALL_SAC = dict(hidden_sizes=(8,), critic_hidden_sizes=(8,), batch_size=8, learning_starts=16,
                 **SAC_FEED_FORWARD)
FLAGS = ['--agent=sac', '--env=Pendulum-v1', '--num_envs=4', '--hidden_sizes=8',
         '--critic_hidden_sizes=8', '--batch_size=8', '--learning_starts=16',
         '--num_steps=100000000', '--checkpoint_interval_s=1', '--log_interval_s=0.5',
         *SAC_FEED_FORWARD_FLAGS]
CHECKPOINT = re.compile(r'checkpoint at env step ([\d,]+)')


def _options(logdir: str, num_steps: int) -> RunOptions:
    return RunOptions(agent='sac', env='Pendulum-v1', num_envs=4, num_steps=num_steps,
                      logdir=logdir, eval_episodes=1, checkpoint_interval_s=1000,
                      save_replay=True, export=False)


def _kill_after_checkpoint(start_script, logdir: str, min_env_steps: int) -> None:
    """Runs SAC in a child process (`start_script`) and kills it (SIGKILL: nothing saved
    on the way out) once a checkpoint of at least `min_env_steps` is written."""
    process = start_script('run', ['--no_preset', f'--logdir={logdir}', *FLAGS])
    lines = []
    try:
        deadline = time.monotonic() + 180
        for line in process.stdout:  # the run never ends by itself: read until the kill
            lines.append(line)
            # Printed after the learner's checkpoint and the replay's beside it.
            saved = CHECKPOINT.search(line)
            if saved and int(saved.group(1).replace(',', '')) >= min_env_steps:
                break
            assert time.monotonic() < deadline, ''.join(lines[-30:])
        else:
            raise AssertionError('the run ended: ' + ''.join(lines[-30:]))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


def test_resumed_run_samples_its_restored_replay(tmp_path, monkeypatch, start_script):
    logdir = str(tmp_path / 'run')
    _kill_after_checkpoint(start_script, logdir, min_env_steps=800)
    checkpoint = tf.train.load_checkpoint(
        tf.train.latest_checkpoint(os.path.join(logdir, rundir.CHECKPOINTS)))
    env_steps = int(checkpoint.get_tensor('env_steps/.ATTRIBUTES/VARIABLE_VALUE'))

    config = configs.from_flat(registry.get('sac').config_class, SMALL_SAC)
    options = _options(logdir, num_steps=1)
    envs = setup_lib.make_envs(options, config, options.num_envs, 0)
    setup = setup_lib.make_setup(options, config, envs)
    envs.close()
    server = setup_lib.make_server(setup, checkpoint=True)
    try:
        restored = tables_lib.table_sizes(reverb.Client(f'localhost:{server.port}'))
    finally:
        server.stop()
    assert restored[tables_lib.REPLAY] >= SMALL_SAC['learning_starts'], restored

    first = []
    open_batches = data.open_batches

    def recording(*args, **kwargs):
        batches = open_batches(*args, **kwargs)

        def stream():
            for batch in batches:
                first.append(int(batch.table_size.numpy().min()))
                yield batch

        return stream()

    monkeypatch.setattr(data, 'open_batches', recording)
    summary = inprocess.train(_options(logdir, num_steps=env_steps + 200), config)
    assert summary['env_steps'] >= env_steps + 200
    # The resumed server starts with the restored items (an empty one would let the
    # learner sample once it held `learning_starts` new ones), so its first batch
    # is drawn from a table of at least that many.
    assert first and first[0] >= restored[tables_lib.REPLAY], (first[:3], restored)
