"""A2C, the fourth agent (agents/a2c/: a config, two losses, a learner, its contract,
one line in agents/registry.py), learning through the wiring that runs the others: its
defaults solve CartPole, and behavioural cloning comes with it from the `signals`
sub-config it declares (the prior's KL, from `prior`: tests/agents/test_prior.py)."""

import csv
import os

from reverb_agents import train


def test_a2c_defaults_solve_cartpole(tmp_path):
    """No preset: A2C's defaults (16 environments, a batch of each one's latest 8 steps)
    at the RL Zoo's A2C CartPole budget, 500k; `deterministic`, so the result is the
    seed's (seeds 0, 1, 2: 500 each, docs/benchmarks.md#a2c)."""
    result = train('a2c', 'CartPole-v1', 500_000, preset=False, deterministic=True, seed=0,
                   logdir=str(tmp_path / 'run'), export=False, log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 475, result.summary


def test_a2c_clones_demonstrations_before_acting(tmp_path, cartpole_rule_demos):
    """`--bc_demos` and `--bc_pretrain_steps`, which A2C's learner never names: the
    policy pre-trained on a hand rule's episodes is evaluated before any actor acts."""
    result = train('a2c', 'CartPole-v1', 1024, preset=False, logdir=str(tmp_path / 'bc'),
                   bc_demos=cartpole_rule_demos, bc_pretrain_steps=300, bc_strength=1.0,
                   bc_steps=50, hidden_sizes=(32,), learning_rate=3e-3, num_envs=8,
                   batch_size=8, eval_every_steps=512, eval_episodes=3, export=False)
    with open(os.path.join(result.logdir, 'eval.csv'), newline='') as f:
        rows = list(csv.DictReader(f))
    assert int(rows[0]['env_steps']) == 0
    # The rule's episodes last 200+ steps; an untrained policy ~20.
    assert float(rows[0]['return_mean']) > 100, rows
    with open(os.path.join(result.logdir, 'progress.csv'), newline='') as f:
        progress = list(csv.DictReader(f))
    assert any(row.get('bc/loss') for row in progress), progress[-1]
