"""CLEAR and ACER solve CartPole within bounded budgets; their SavedModels act
the same in a Python that never imports this library."""

import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

from agents.acer.config import ACERConfig
from agents.clear.config import CLEARConfig
from launch import export, training
from launch.actor import Policy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = [100, 101, 102]


# Budgets: CLEAR with the defaults of `python launch/run.py --agent=clear`;
# ACER with `--agent=acer --num_steps=150000`.
BUDGETS = {'clear': (CLEARConfig(), 300_000), 'acer': (ACERConfig(), 150_000)}


@pytest.fixture(scope='module', params=sorted(BUDGETS))
def trained(request, tmp_path_factory):
    agent = request.param
    config, num_steps = BUDGETS[agent]
    logdir = tmp_path_factory.mktemp(f'cartpole_{agent}')
    options = training.RunOptions(agent=agent, seed=1, logdir=str(logdir), num_steps=num_steps,
                                  log_interval_s=1000.0)
    summary = training.train(options, config)
    return summary, str(logdir)


def max_overshoot(config, num_envs: int) -> int:
    """Env steps past the budget: the actor stops once a round of sequences
    (`num_envs` x `unroll_length` steps) that reached it is written."""
    return num_envs * config.unroll_length


def test_solves_cartpole_within_budget(trained):
    summary, _ = trained
    assert summary['eval_return_mean'] >= 475.0, summary
    assert summary['eval_episodes'] == 20
    config, budget = BUDGETS[summary['agent']]
    assert budget <= summary['env_steps'] <= budget + max_overshoot(config, training.RunOptions().num_envs)


def library_greedy_returns(core, action_space, env_id, seeds):
    """In-library greedy returns, one environment, batch size 1, episode i on seeds[i]."""
    policy = Policy(core, action_space, seed=0, deterministic=True)
    env = gym.make(env_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        state = policy.initial_state(1)
        prev_action = tuple(np.zeros([1, *s.shape], s.dtype.as_numpy_dtype)
                            for s in action_space.action_specs())
        prev_reward, first, total, done = np.zeros([1], np.float32), np.ones([1], bool), 0.0, False
        while not done:
            action, _, _, _, state = policy(np.asarray(obs, np.float32)[None], prev_action,
                                            prev_reward, first, state)
            obs, reward, terminated, truncated, _ = env.step(action_space.to_env(action)[0])
            total += reward
            done = terminated or truncated
            prev_action, prev_reward = action, np.array([reward], np.float32)
            first = np.zeros([1], bool)
        returns.append(total)
    return returns


STANDALONE = textwrap.dedent('''
    import json, sys
    import gymnasium as gym
    import numpy as np
    import tensorflow as tf

    path, env_id, seeds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    model = tf.saved_model.load(path)
    specs = json.loads(model.signatures['specs']()['specs'].numpy().decode())
    action_shape, action_dtype = specs['action']['shape'], tf.as_dtype(specs['action']['dtype'])
    step = model.signatures['step_deterministic']
    env = gym.make(env_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(1)))
        inputs['prev_action'] = tf.zeros([1, *action_shape], action_dtype)
        inputs['prev_reward'] = tf.zeros([1], tf.float32)
        total, done = 0.0, False
        while not done:
            inputs['observation'] = tf.constant(np.asarray(obs, np.float32)[None])
            out = step(**inputs)
            action = out.pop('action')
            a = action.numpy()[0]
            obs, reward, terminated, truncated, _ = env.step(a if action_shape else int(a))
            total += reward
            done = terminated or truncated
            inputs.update(out)
            inputs['prev_action'] = action
            inputs['prev_reward'] = tf.constant([reward], tf.float32)
        returns.append(total)
    library = sorted(m for m in sys.modules if m.split('.')[0] in ('agents', 'networks', 'replay', 'launch'))
    print(json.dumps({'returns': returns, 'library_modules': library}))
''')


def run_standalone(saved_model, env_id, seeds, tmp_path):
    """Runs STANDALONE in a fresh Python; returns its JSON output."""
    script = tmp_path / 'standalone.py'
    script.write_text(STANDALONE)
    result = subprocess.run(
        [sys.executable, str(script), saved_model, env_id, json.dumps(seeds)],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output['library_modules'] == []
    return output


def test_saved_model_returns_equal_library_returns_without_the_library(trained, tmp_path):
    summary, logdir = trained
    assert summary['saved_model'] == os.path.join(logdir, 'saved_model')
    core, action_space, _, env_id = export.restore_core(logdir)
    expected = library_greedy_returns(core, action_space, env_id, SEEDS)
    output = run_standalone(summary['saved_model'], env_id, SEEDS, tmp_path)
    assert output['returns'] == expected
    assert np.mean(expected) >= 400  # the trained policy, not an untrained one


def test_export_cli_and_saved_model_cli(trained, tmp_path):
    _, logdir = trained
    out = tmp_path / 'exported'
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'launch', 'export.py'), f'--logdir={logdir}',
         f'--output={out}'], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # The console script installed next to this interpreter (the venv may not be activated).
    cli = os.path.join(os.path.dirname(sys.executable), 'saved_model_cli')
    shown = subprocess.run([cli, 'show', '--dir', str(out), '--all'],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    for name in ["signature_def['initial_state']", "signature_def['step']",
                 "signature_def['step_deterministic']", "inputs['observation']",
                 "inputs['prev_action']", "inputs['prev_reward']", "inputs['state_0']",
                 "outputs['action']", "inputs['batch_size']"]:
        assert name in shown.stdout, name


def run_evaluate(args, extra_env=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, 'launch', 'evaluate.py'), *args],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(extra_env or {})))


def test_evaluate_cli_runs_the_saved_model(trained):
    summary, _ = trained
    result = run_evaluate([f'--saved_model={summary["saved_model"]}', '--episodes=2'])
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])['return_mean'] >= 400


@pytest.mark.parametrize('make_args,message', [
    (lambda saved, tmp: [f'--saved_model={tmp}'], 'is not a SavedModel'),
    (lambda saved, tmp: [f'--saved_model={saved}', '--env=Acrobot-v1'], 'policy expects shape'),
])
def test_evaluate_bad_input(trained, tmp_path, make_args, message):
    summary, _ = trained
    result = run_evaluate(make_args(summary['saved_model'], tmp_path))
    assert result.returncode == 1
    errors = [l for l in result.stderr.splitlines() if l.startswith('error:')]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
