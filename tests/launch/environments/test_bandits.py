"""The meta-RL bandits (`launch/environments/bandits.py`) and their references
(`launch/tools/bandit_baselines.py`)."""

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch import environments
from reverb_agents.launch.environments import bandits, factory
from reverb_agents.launch.tools import bandit_baselines


def test_every_bandit_is_registered_with_its_conventions():
    assert set(factory.BANDITS) == set(bandits.IDS)
    for env_id, task in bandits.IDS.items():
        env = gym.make(env_id, horizon=5)
        observation, _ = env.reset(seed=0)
        assert env.observation_space == gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        assert env.action_space == gym.spaces.Discrete(bandits.num_arms(task))
        assert observation.dtype == np.float32 and observation.tolist() == [0.0]
        for t in range(1, 6):
            observation, _, terminated, truncated, info = env.step(0)
            assert observation.tolist() == [np.float32(t / 5)]  # pulls made so far / horizon
            assert terminated == (t == 5) and not truncated and info['regret'] >= 0


def test_rewards_are_bernoulli_with_the_arms_probabilities_and_regret_is_expected():
    envs = bandits.BanditVectorEnv(4000, task='independent', horizon=1000)
    envs.reset(seed=1)
    values = envs.tasks.values.copy()
    arms = np.arange(4000) % 2
    rewards = np.stack([envs.step(arms)[1] for _ in range(200)])  # [200, B]
    pulled = values[np.arange(4000), arms]
    # Each bandit's mean reward is its pulled arm's p (200 pulls: sd <= 0.036).
    assert np.abs(rewards.mean(0) - pulled).max() < 0.2
    np.testing.assert_allclose(rewards.mean(), pulled.mean(), atol=0.01)
    _, _, _, _, info = envs.step(arms)
    np.testing.assert_allclose(info['regret'], values.max(1) - pulled)
    assert info['_regret'].all()


@pytest.mark.parametrize('difficulty', ['uniform', 'easy', 'medium', 'hard'])
def test_dependent_arms_sum_to_one_at_each_difficulty(difficulty):
    tasks = bandits.BanditTasks(2000, 'dependent', 100, difficulty, 0.05)
    tasks.seed(0)
    tasks.draw(np.ones(2000, bool))
    np.testing.assert_allclose(tasks.values.sum(1), 1.0)
    choices = bandits.DIFFICULTIES[difficulty]
    if choices is None:
        assert 0.45 < tasks.values[:, 0].mean() < 0.55 and len(set(tasks.values[:, 0])) > 1000
    else:
        assert set(tasks.values[:, 0]) == set(choices)


def test_eleven_arms_informative_arm_names_the_target():
    tasks = bandits.BanditTasks(500, 'eleven_arms', 100, 'uniform', 0.05)
    tasks.seed(0)
    tasks.draw(np.ones(500, bool))
    target = np.argmax(tasks.values[:, :10], axis=1)
    rewards, regrets, _ = tasks.pull(np.full(500, 10))
    np.testing.assert_allclose(rewards, (target + 1) / 10)
    np.testing.assert_allclose(regrets, 5.0 - (target + 1) / 10)
    rewards, regrets, _ = tasks.pull(target)
    assert (rewards == 5.0).all() and (regrets == 0).all()


def test_restless_arms_move_and_stay_probabilities():
    tasks = bandits.BanditTasks(100, 'restless', 1000, 'uniform', 0.3)
    tasks.seed(0)
    tasks.draw(np.ones(100, bool))
    before = tasks.values.copy()
    for _ in range(50):
        tasks.pull(np.zeros(100))
        assert (tasks.values >= 0).all() and (tasks.values <= 1).all()
    assert np.abs(tasks.values - before).mean() > 0.1


def test_vector_bandits_reset_on_the_next_step():
    envs = bandits.BanditVectorEnv(2, task='dependent', horizon=2)
    envs.reset(seed=0)
    envs.step(np.array([0, 1]))
    observation, _, terminated, _, _ = envs.step(np.array([0, 1]))
    assert terminated.all() and observation.ravel().tolist() == [1.0, 1.0]
    observation, reward, terminated, _, info = envs.step(np.array([0, 1]))  # autoreset
    assert observation.ravel().tolist() == [0.0, 0.0] and (reward == 0).all()
    assert not terminated.any() and not info['_regret'].any()


@pytest.mark.parametrize('kwargs,message', [
    ({'difficulty': 'nope'}, 'difficulty must be one of'),
    ({'horizon': 0}, 'horizon must be an integer >= 1'),
    ({'colour': 'red'}, "unexpected keyword argument 'colour'"),
])
def test_bad_keywords_are_one_line(kwargs, message):
    with pytest.raises(environments.EnvironmentSetupError, match=message):
        factory.make_env('Bandit-Dependent-v0', kwargs)


def test_bayes_optimal_dp_at_horizon_one_is_the_analytic_value():
    # One pull: either arm earns 1/2 in expectation; the best arm's p averages 3/4
    # (dependent) or 2/3 (independent), so the regret is 1/4 or 1/6.
    value, _ = bandit_baselines.dependent_dp(1)
    assert bandit_baselines.expected_best('dependent', 'uniform', 1) - value == pytest.approx(0.25)
    value, _ = bandit_baselines.independent_dp(1)
    assert bandit_baselines.expected_best('independent', 'uniform', 1) - value == pytest.approx(
        1 / 6)


def test_references_order_and_the_dp_policy_plays_its_expected_regret():
    result = bandit_baselines.references('Bandit-Dependent-v0', 4000, 0, {'horizon': 20})
    mean = {name: r['regret_mean'] for name, r in result.items()}
    assert mean['bayes_optimal'] <= mean['thompson'] < mean['ucb1'] < mean['random']
    stderr = result['bayes_optimal']['regret_stderr']
    assert abs(mean['bayes_optimal'] - mean['bayes_optimal_expected']) < 4 * stderr
    with pytest.raises(ValueError, match='not a bandit'):
        bandit_baselines.references('CartPole-v1', 10, 0, {})


HAND_WRITTEN_BANDIT = '''
import json, sys
import numpy as np
import tensorflow as tf

# A two-arm dependent bandit written from the convention alone: p1 ~ U[0, 1], p2 = 1 - p1,
# Bernoulli rewards, observation [t / horizon], 100 pulls; greedy actions of the SavedModel.
path, episodes, horizon = sys.argv[1], int(sys.argv[2]), 100
model = tf.saved_model.load(path)
specs = json.loads(model.signatures['specs']()['specs'].numpy().decode())
step = model.signatures['step_deterministic']
rng = np.random.default_rng(12345)
# Every episode at once: one row of the batch each.
p = rng.uniform(size=episodes)
p = np.stack([p, 1.0 - p], axis=1)
rows = np.arange(episodes)
inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(episodes)))
inputs['prev_action'] = tf.constant([specs['first_prev_action']] * episodes, tf.int64)
inputs['prev_reward'] = tf.zeros([episodes], tf.float32)
regrets = np.zeros(episodes)
for t in range(horizon):
    inputs['observation'] = tf.fill([episodes, 1], t / horizon)
    out = step(first=tf.fill([episodes], t == 0), **inputs)
    action = out.pop('action')
    arm = action.numpy().astype(np.int64)
    reward = (rng.uniform(size=episodes) < p[rows, arm]).astype(np.float32)
    regrets += p.max(axis=1) - p[rows, arm]
    inputs.update(out)
    inputs['prev_action'] = action
    inputs['prev_reward'] = tf.constant(reward)
print(json.dumps({'regret_mean': float(np.mean(regrets)), 'regret_std': float(np.std(regrets)),
                  'library_modules': sorted(m for m in sys.modules
                                            if m.split('.')[0] == 'reverb_agents')}))
'''


def test_the_exported_policy_on_a_hand_written_bandit_has_the_librarys_regret(tmp_path,
                                                                              forked_python):
    """Train briefly (the policy's regret is beside the point), then compare the in-library greedy regret (summary.json) with the
    SavedModel's on a bandit written without the library, in a process without it."""
    import json

    from reverb_agents.agents import configs
    from reverb_agents.agents.clear.config import CLEARConfig
    from reverb_agents.launch.runners import inprocess
    from reverb_agents.launch.runs.options import RunOptions

    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=16, hidden_sizes=(16,), batch_size=16, unroll_length=20, replay_fraction=0.0,
        advantage='gae', discounting=0.9, reward_clipping='none', learning_rate=3e-3,
        entropy_cost=0.05))
    episodes = 300
    summary = inprocess.train(RunOptions(
        env='Bandit-Dependent-v0', num_envs=32, num_steps=30_000, seed=0, eval_episodes=episodes,
        logdir=str(tmp_path / 'run')), config)
    script = tmp_path / 'bandit.py'
    script.write_text(HAND_WRITTEN_BANDIT)
    result = forked_python('tensorflow', [summary['saved_model'], str(episodes)],
                           script=str(script), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    outside = json.loads(result.stdout.strip().splitlines()[-1])
    assert outside['library_modules'] == []
    # The same policy on two samples of tasks: equal means within 4 standard errors.
    stderr = np.hypot(summary['eval_regret_std'], outside['regret_std']) / np.sqrt(episodes)
    assert abs(summary['eval_regret_mean'] - outside['regret_mean']) < 4 * stderr, (
        summary['eval_regret_mean'], outside)
    assert 'eval_regret_sampled_mean' in summary
