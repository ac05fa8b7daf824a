"""A2C, the fourth agent (agents/a2c/: a config, two losses, a learner, its contract,
one line in agents/registry.py), learning through the wiring that runs the others: its
defaults solve CartPole; behavioural cloning and critic pre-training come with it from
the `signals` and `critic_pretrain` sub-configs it declares (the prior's KL, from
`prior`: tests/agents/test_prior.py)."""

import csv
import os

import gymnasium as gym
import numpy as np
import tensorflow as tf

from reverb_agents import train
from reverb_agents.agents import configs
from reverb_agents.agents.a2c.config import A2CConfig
from reverb_agents.agents.a2c.learning import METRICS, A2CLearner
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch


def test_a2c_defaults_solve_cartpole(tmp_path):
    """No preset: A2C's defaults (16 environments, a batch of each one's latest 8 steps)
    at the RL Zoo's A2C CartPole budget, 500k, stopping once a greedy check scores 490
    (at about 400k); `deterministic`, so the result is the seed's (seeds 0, 1, 2: 500
    each at 500k, docs/benchmarks.md#a2c)."""
    result = train('a2c', 'CartPole-v1', 500_000, preset=False, deterministic=True, seed=0,
                   target_return=490, logdir=str(tmp_path / 'run'), export=False,
                   log_interval_s=1000.0)
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



def test_a2c_pretrains_its_critic_by_declaring_it():
    """`--critic_pretrain_steps` (the `critic_pretrain` sub-config, which A2C's learner
    never names): the first steps fit the baseline head alone to Monte-Carlo returns,
    the policy stays bit-identical, then A2C's own step learns."""
    T, B = 5, 4
    space, actions = gym.spaces.Box(-1, 1, (3,), np.float32), ActionSpace(gym.spaces.Discrete(3))
    config = configs.from_flat(A2CConfig, dict(hidden_sizes=(8,), unroll_length=T, batch_size=B,
                                               critic_pretrain_steps=20, learning_rate=0.05))
    core = ActorCriticCore(space, actions, hidden_sizes=(8,))
    core.create_variables()
    learner = A2CLearner(core, actions, config)
    rng = np.random.default_rng(0)
    steps = trajectory.zeros(trajectory.step_spec(observation_spec(space),
                                                  actions.action_specs(), actions.param_specs()),
                             (T + 1, B))._replace(
        observation=rng.uniform(-1, 1, (T + 1, B, 3)).astype(np.float32),
        reward=rng.uniform(0, 1, (T + 1, B)).astype(np.float32),
        discount=np.ones((T + 1, B), np.float32), first=np.zeros((T + 1, B), bool))
    steps.first[0] = True
    steps.discount[T - 1] = 0.0  # pure Monte-Carlo returns: a fixed regression target
    batch = Batch(trajectory.Sequence(steps, core.initial_state(B)), tf.zeros([B], tf.bool))
    head = core.parts.baseline_head.trainable_variables
    policy = [v for v in core.trainable_variables if all(v is not h for h in head)]
    before = [v.numpy().copy() for v in policy]
    losses = []
    for _ in range(20):
        assert learner.phase() == 'critic_pretrain'
        metrics = learner.step(batch)
        assert sorted(metrics) == sorted(config.critic_pretrain.metric_names())
        losses.append(float(metrics['critic_pretrain/baseline_loss']))
    assert losses[-1] < 0.5 * losses[0], losses
    for b, v in zip(before, policy):
        np.testing.assert_array_equal(b, v.numpy())
    assert learner.phase() == 'learn'
    assert set(METRICS) <= set(learner.step(batch))
