"""Reward signals and demonstrations through the wiring: runs in one process, the
pre-trained policy's first evaluation, TensorBoard/progress names, bad files, and
SAC's curiosity finding MountainCarContinuous's goal."""

import csv
import json
import os

import gymnasium as gym
import numpy as np
import tensorflow as tf

from reverb_agents.launch import api
from reverb_agents.launch.runs import preset_files


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_a_policy_pretrained_on_demonstrations_is_evaluated_before_any_actor(
        tmp_path, cartpole_rule_demos):
    result = api.train('clear', 'CartPole-v1', 1280, preset=False, logdir=str(tmp_path / 'bc'),
                       bc_demos=cartpole_rule_demos, bc_pretrain_steps=300, bc_strength=1.0,
                       bc_steps=50, lstm_size=0, hidden_sizes=(32,), learning_rate=3e-3,
                       num_envs=8, batch_size=8, min_replay_size=8, queue_size=8,
                       eval_every_steps=640, eval_episodes=3, export=False)
    assert result.policy is None  # export=False: nothing exported, nothing loaded
    rows = _rows(os.path.join(result.logdir, 'eval.csv'))
    assert int(rows[0]['env_steps']) == 0 and len(rows) >= 2
    # The hand rule's demonstrations hold ~5 x 200+ steps; an untrained policy lasts ~20.
    assert float(rows[0]['return_mean']) > 100, rows
    progress = _rows(os.path.join(result.logdir, 'progress.csv'))
    strengths = [float(r['bc/strength']) for r in progress if r.get('bc/strength')]
    assert strengths and strengths[-1] < 1.0  # annealed over bc_steps learner steps


def test_curiosity_and_gail_train_with_the_learner_and_are_not_exported(
        tmp_path, cartpole_rule_demos):
    result = api.train('clear', 'CartPole-v1', 1280, preset=False, logdir=str(tmp_path / 'sig'),
                       curiosity_strength=0.1, curiosity_normalize=True,
                       gail_strength=0.5, gail_demos=cartpole_rule_demos, gail_use_actions=True,
                       lstm_size=0, hidden_sizes=(32,), num_envs=8, batch_size=8,
                       min_replay_size=8, queue_size=8, eval_episodes=2)
    progress = _rows(os.path.join(result.logdir, 'progress.csv'))
    for name in ('curiosity/forward_loss', 'curiosity/reward', 'gail/loss', 'gail/reward'):
        values = [float(r[name]) for r in progress if r.get(name)]
        assert values and all(np.isfinite(values)), name
    assert result.summary['learner_steps'] >= 1
    # The exported policy is the core alone: its variables name no signal model.
    saved = os.path.join(result.summary['saved_model'], 'variables', 'variables')
    names = [name for name, _ in tf.train.list_variables(saved)]
    assert any('policy_head' in n for n in names), names
    assert not any('icm' in n or 'discriminator' in n or 'signal' in n for n in names), names


def test_demonstrations_that_do_not_fit_the_environment_are_one_error_line(
        tmp_path, run_cli, write_episode):
    pendulum = gym.make('Pendulum-v1')
    path = write_episode(tmp_path / 'pendulum.npz', np.zeros((3, 3), np.float32),
                         np.zeros((3, 1), np.float32), pendulum.observation_space,
                         pendulum.action_space)
    result = run_cli(['--agent=clear', '--env=CartPole-v1', f'--bc_demos={path}',
                      '--bc_strength=1', '--num_steps=100'])
    assert result.returncode != 0
    assert len(result.errors) == 1 and 'shape (3,)' in result.errors[0], result.stderr[-2000:]
    assert not os.path.exists(tmp_path / 'run' / 'checkpoints')


def test_sac_curiosity_finds_mountaincar_continuous_goal(tmp_path, run_script):
    """The documented command at half its budget: curiosity takes SAC to the hill top,
    where without it SAC learns to stand still (about 0: the action costs -0.1 a^2 per
    step; docs/benchmarks.md#curiosity-on-mountaincarcontinuous). At 15k env steps
    seeds 3, 6 and 7 evaluated 90.4-92.9; at 10k one run of seed 3 had not yet arrived
    on every episode (-18.0), so 15k leaves the margin."""
    flagfile = preset_files.preset_path('sac_mountaincar_continuous_curiosity')
    logdir = tmp_path / 'run'
    result = run_script('run', [f'--flagfile={flagfile}', '--num_steps=15000',
                                '--eval_every_steps=15000', '--noexport', f'--logdir={logdir}'],
                        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(logdir / 'summary.json') as f:
        summary = json.load(f)
    # The hill top pays +100 less the actions' cost: about 90-94 on every episode.
    assert summary['eval_return_mean'] >= 60, summary
