"""Ctrl-C in an in-process run (`launch/run.py`) saves what was learned and exits 130:
a checkpoint at the last learner step, the exported SavedModel and `summary.json`
marked `interrupted`."""

import json
import os
import re
import signal
import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from reverb_agents.launch.policies import export
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.acting.policy import Policy
from tests import forked

FLAGS = ['--agent=clear', '--env=CartPole-v1', '--num_envs=4', '--lstm_size=8',
         '--hidden_sizes=16', '--batch_size=8', '--unroll_length=5', '--min_replay_size=8',
         '--queue_size=16', '--eval_episodes=2', '--num_steps=100000000', '--log_interval_s=0.5',
         '--checkpoint_interval_s=1000']
LEARNER_STEPS = re.compile(r'learner steps (\d+)')


def test_ctrl_c_checkpoints_exports_and_exits_130(tmp_path, start_script):
    logdir = str(tmp_path / 'run')
    process = start_script('run', ['--no_preset', f'--logdir={logdir}', *FLAGS])
    output = forked.Output(process.stdout)
    try:
        output.wait_for(r'learner steps [1-9]\d', timeout_s=120)  # 10 or more
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        returncode = process.wait(timeout=30)
        assert time.monotonic() - interrupted < 30
        output.wait_end()
    finally:
        if process.poll() is None:
            process.kill()
    text = output.text()
    assert returncode == 130, text[-3000:]
    assert 'Traceback' not in text, text[-3000:]

    with open(os.path.join(logdir, 'summary.json')) as f:
        summary = json.load(f)
    assert summary['interrupted'] is True
    assert summary['eval_episodes'] == 0 and summary['eval_return_mean'] is None  # skipped
    last = summary['learner_steps']
    printed = [int(m.group(1)) for m in map(LEARNER_STEPS.search, output.lines) if m]
    assert last >= max(printed) >= 10
    # The checkpoint is the learner's last step: named by it, and holding it.
    path = tf.train.latest_checkpoint(os.path.join(logdir, rundir.CHECKPOINTS))
    assert path.endswith(f'ckpt-{last}'), path
    reader = tf.train.load_checkpoint(path)
    assert reader.get_tensor('learner/num_steps/.ATTRIBUTES/VARIABLE_VALUE') == last
    assert reader.get_tensor('env_steps/.ATTRIBUTES/VARIABLE_VALUE') == summary['env_steps']
    saved = re.findall(r'interrupted at learner step (\d+), env step \d+: checkpoint (\S+), '
                       r'policy (\S+), summary', text)
    assert saved == [(str(last), path, summary['saved_model'])], text[-3000:]

    # The SavedModel loads and acts as the checkpoint's policy does.
    model = tf.saved_model.load(summary['saved_model'])
    observations = np.stack([gym.make('CartPole-v1').reset(seed=s)[0] for s in range(16)])
    inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(16)))
    outputs = model.signatures['step_deterministic'](
        observation=tf.constant(observations, tf.float32), prev_action=tf.zeros([16], tf.int64),
        prev_reward=tf.zeros([16]), first=tf.ones([16], tf.bool), **inputs)
    actions = outputs['action'].numpy()
    assert set(actions.tolist()) <= {0, 1}
    core, action_space, _, _ = export.restore_core(logdir)
    policy = Policy(core, action_space, seed=0, deterministic=True)
    expected, _, _, _, _ = policy(observations.astype(np.float32), (np.zeros([16], np.int32),),
                                  np.zeros([16], np.float32), np.ones([16], bool),
                                  policy.initial_state(16))
    np.testing.assert_array_equal(actions, action_space.to_env(expected))
