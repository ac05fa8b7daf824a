"""The untuned suite's environments (`benchmarks/untuned_envs.py`): spaces, rewards, and
that scripted optimal and random policies score the documented references
(`REFERENCES`, in the suite's score units). No training; a few seconds."""

import os
from typing import Any, Callable, Dict

import gymnasium as gym
import numpy as np
import pytest

from benchmarks import untuned, untuned_envs as envs

Policy = Callable[[Any, Dict[str, Any], gym.Env, np.random.Generator], Any]


def mean_return(env_id: str, policy: Policy, episodes: int, seed: int = 0) -> float:
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    returns = []
    for i in range(episodes):
        observation, info = env.reset(seed=seed + i)
        assert env.observation_space.contains(observation)
        done, total = False, 0.0
        while not done:
            observation, reward, terminated, truncated, info = env.step(
                policy(observation, info, env.unwrapped, rng))
            total += reward
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def uniform(observation, info, env, rng):
    return int(rng.integers(env.action_space.n))


def test_every_suite_task_has_budgets_and_references():
    for task in untuned.TASKS:
        assert set(task.budgets) == set(untuned.FAMILIES.values())
        assert task.random < task.best
        assert untuned.fraction_of_best(task.best, task.random, task.best) == 1.0
        if task.env.startswith(envs.MODULE + ':'):
            assert task.env.rpartition(':')[2] in gym.registry


def test_masked_cue():
    env = gym.make(envs.MASKED_CUE)
    observation, _ = env.reset(seed=0)
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert env.observation_space['action_mask'] == gym.spaces.MultiBinary(4)
    for _ in range(50):
        mask, cue = observation['action_mask'], int(np.argmax(observation['observation']))
        assert mask.sum() == 3 and mask[cue] == 1  # one non-paying action forbidden
        observation, reward, *_ = env.step(cue)
        assert reward == 1.0
    reference = envs.REFERENCES[envs.MASKED_CUE]
    best = mean_return(envs.MASKED_CUE, lambda o, i, e, r: int(np.argmax(o['observation'])), 5)
    random = mean_return(envs.MASKED_CUE, lambda o, i, e, r: int(
        r.choice(np.flatnonzero(o['action_mask']))), 300)
    assert best == reference.best
    assert random == pytest.approx(reference.random, abs=0.3)


def test_cue_memory_pays_only_the_remembered_cue():
    env = gym.make(envs.CUE_MEMORY)
    observation, info = env.reset(seed=3)
    assert observation[info['cue']] == 1.0 and observation.sum() == 1.0
    for _ in range(env.unwrapped.delay):  # blank steps: nothing to see, nothing paid
        observation, reward, terminated, _, _ = env.step(0)
        assert observation.sum() == 0.0 and reward == 0.0 and not terminated
    observation, reward, terminated, _, _ = env.step(0)
    assert observation[-1] == 1.0 and reward == 0.0 and not terminated  # the query
    _, reward, terminated, _, _ = env.step(info['cue'])
    assert reward == 1.0 and terminated
    reference = envs.REFERENCES[envs.CUE_MEMORY]
    assert mean_return(envs.CUE_MEMORY, lambda o, i, e, r: i['cue'], 20) == reference.best
    assert mean_return(envs.CUE_MEMORY, uniform, 1000) == pytest.approx(reference.random,
                                                                        abs=0.05)


def _shortest_path(observation, info, env, rng):
    row, column = env.goal - env.position
    return 0 if row < 0 else 1 if row > 0 else 2 if column < 0 else 3


def test_dict_reach():
    env = gym.make(envs.DICT_REACH)
    observation, _ = env.reset(seed=0)
    assert set(observation) == {'position', 'goal'}
    assert not np.array_equal(observation['position'], observation['goal'])
    reference = envs.REFERENCES[envs.DICT_REACH]
    assert mean_return(envs.DICT_REACH, _shortest_path, 1000) == pytest.approx(
        reference.best, abs=0.01)
    assert mean_return(envs.DICT_REACH, uniform, 1000) == pytest.approx(reference.random,
                                                                        abs=0.08)


def test_corridor_needs_a_policy_per_cell():
    reference = envs.REFERENCES[envs.CORRIDOR]
    assert mean_return(envs.CORRIDOR, lambda o, i, e, r: int(e.forward[np.argmax(o)]),
                       2) == pytest.approx(reference.best)
    for action in (0, 1):  # a constant action gets stuck: the layout mixes both
        assert mean_return(envs.CORRIDOR, lambda o, i, e, r: action, 1) == pytest.approx(-1.0)
    assert mean_return(envs.CORRIDOR, uniform, 300) == pytest.approx(reference.random,
                                                                     abs=0.1)


@pytest.mark.parametrize('env_id,scale', [(envs.CARTPOLE_REWARD_SMALL, 0.01),
                                          (envs.CARTPOLE_REWARD_LARGE, 100.0)])
def test_scaled_cartpole_returns_divide_back_to_episode_lengths(env_id, scale):
    task = next(t for t in untuned.TASKS if t.env == envs.cli_id(env_id))
    assert task.reward_scale == scale
    env = gym.make(env_id)
    env.reset(seed=0)
    steps, total, done = 0, 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(steps % 2)
        steps, total, done = steps + 1, total + reward, terminated or truncated
    assert total / task.reward_scale == pytest.approx(steps)
    random = mean_return(env_id, uniform, 200) / scale
    assert random == pytest.approx(envs.REFERENCES[env_id].random, rel=0.15)


def test_cartpole_observations_scaled():
    plain, scaled = gym.make('CartPole-v1'), gym.make(envs.CARTPOLE_OBS_LARGE)
    np.testing.assert_allclose(scaled.reset(seed=1)[0], 1000 * plain.reset(seed=1)[0],
                               rtol=1e-6)
    assert scaled.observation_space.high[0] == pytest.approx(4.8 * 1000)


def _pump(observation, info, env, rng):
    return 2 if observation[1] >= 0 else 0  # push along the velocity


def test_shaped_mountain_car():
    gamma, scale = 0.99, 10.0
    env = gym.make(envs.SHAPED_MOUNTAIN_CAR)
    observation, _ = env.reset(seed=0)
    phi = scale * envs.mountain_car_energy(*observation)
    discounted, undiscounted, t, done = 0.0, 0.0, 0, False
    while not done:
        observation, reward, terminated, truncated, info = env.step(_pump(observation, {},
                                                                          None, None))
        assert info['unshaped_reward'] == -1.0
        discounted += gamma ** t * reward
        undiscounted += gamma ** t * info['unshaped_reward']
        t, done = t + 1, terminated or truncated
    assert terminated  # the scripted policy reaches the goal, from this start ...
    # ... and then the shaping telescopes: the discounted shaped return is the
    # original one minus phi(s0) (phi = 0 at the terminal state).
    assert discounted == pytest.approx(undiscounted - phi, abs=1e-6)
    assert envs.mountain_car_energy(envs.MC_GOAL, 0.0) == pytest.approx(1.0)
    reference = envs.REFERENCES[envs.SHAPED_MOUNTAIN_CAR]
    assert reference.random < mean_return('MountainCar-v0', _pump, 20) < reference.best


def test_a_run_of_the_suite_finds_its_own_environments(tmp_path):
    """`run_one` starts `launch/run.py` in a subprocess whose `--env` names a module of
    this checkout (`benchmarks.untuned_envs:...`): it must import it and score the run."""
    task = untuned.TASKS_BY_NAME['cartpole_obs_x1000']
    result = untuned.run_one(task, 'clear', seed=0, num_steps=500, logdir=str(tmp_path / 'run'),
                             extra_flags=['--num_envs=4', '--eval_episodes=1'], timeout_s=120)
    assert result['error'] is None, result['error']
    assert result['score'] is not None and result['score'] > 0, result


def test_cartpole_without_velocities_keeps_position_and_angle():
    plain, hidden = gym.make('CartPole-v1'), gym.make(envs.CARTPOLE_NO_VELOCITY)
    full, observation = plain.reset(seed=2)[0], hidden.reset(seed=2)[0]
    np.testing.assert_array_equal(observation, full[[0, 2]])
    assert hidden.observation_space.shape == (2,)
    # One observation cannot tell the pole's direction; two in a row can, and a
    # policy pushing the way the pole moves (from their difference) balances.
    def by_difference(observation, info, env, rng):
        angle, last = observation[1], getattr(env, '_last_angle', observation[1])
        env._last_angle = angle
        return int(angle + 2.0 * (angle - last) > 0)
    assert mean_return(envs.CARTPOLE_NO_VELOCITY, by_difference, 3) > 150
    assert mean_return(envs.CARTPOLE_NO_VELOCITY, uniform, 300) == pytest.approx(
        envs.REFERENCES[envs.CARTPOLE_NO_VELOCITY].random, rel=0.15)


def test_noisy_reward_cartpole_has_the_original_reward_in_expectation():
    env = gym.make(envs.CARTPOLE_NOISY_REWARD)
    env.reset(seed=0)
    rewards, noiseless = [], []
    for t in range(2000):
        _, reward, terminated, truncated, info = env.step(t % 2)
        rewards.append(reward)
        noiseless.append(info['noiseless_reward'])
        if terminated or truncated:
            env.reset()
    assert set(noiseless) == {1.0}
    assert np.mean(rewards) == pytest.approx(1.0, abs=0.1)
    assert np.std(rewards) == pytest.approx(1.0, abs=0.1)
    assert untuned.TASKS_BY_NAME['cartpole_noisy_reward'].score_env == 'CartPole-v1'


def test_shifted_pendulum_maps_its_bounds_onto_pendulums_torque():
    plain, shifted = gym.make('Pendulum-v1'), gym.make(envs.PENDULUM_SHIFTED)
    assert shifted.action_space.low[0] == -10.0 and shifted.action_space.high[0] == 30.0
    plain.reset(seed=4)
    shifted.reset(seed=4)
    for action in (-10.0, 10.0, 30.0, 0.0):  # torque -2, 0, 2, -1
        expected = plain.step(np.array([(action - 10.0) / 10.0], np.float32))
        got = shifted.step(np.array([action], np.float32))
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        assert got[1] == pytest.approx(expected[1])
    # A policy that takes the bounds for [-2, 2] (the middle, 0, is torque -1) swings
    # the pendulum one way only.
    reference = envs.REFERENCES[envs.PENDULUM_SHIFTED]
    assert mean_return(envs.PENDULUM_SHIFTED, lambda o, i, e, r: np.zeros(1, np.float32),
                       3) < reference.best - 500


def _chebyshev_path(observation, info, env, rng):
    return np.sign(env.goal - env.position) + 1


def test_grid_multidiscrete_needs_both_parts_of_its_action():
    env = gym.make(envs.GRID_MULTIDISCRETE)
    assert env.action_space == gym.spaces.MultiDiscrete([3, 3])
    reference = envs.REFERENCES[envs.GRID_MULTIDISCRETE]
    assert mean_return(envs.GRID_MULTIDISCRETE, _chebyshev_path, 2000) == pytest.approx(
        reference.best, abs=0.01)
    # Rows only: the column never moves, so most goals are out of reach.
    assert mean_return(envs.GRID_MULTIDISCRETE, lambda o, i, e, r: np.array(
        [np.sign(e.goal[0] - e.position[0]) + 1, 1]), 300) < 0
    assert mean_return(envs.GRID_MULTIDISCRETE, lambda o, i, e, r: r.integers(3, size=2),
                       1000) == pytest.approx(reference.random, abs=0.08)


def test_each_agent_runs_the_tasks_its_action_space_allows():
    tasks = untuned.TASKS_BY_NAME
    assert not untuned.takes('acer', tasks['grid_multidiscrete'])
    assert untuned.takes('clear', tasks['grid_multidiscrete'])
    assert untuned.takes('sb3_sac', tasks['pendulum_shifted'])
    assert not untuned.takes('sb3_sac', tasks['cartpole'])
    assert {t.name for t in untuned.TASKS if untuned.takes('sb3_recurrentppo', t)} == {
        'memory', 'cartpole_novelocity'}
    assert sum(t.held_out for t in untuned.TASKS) >= 6
    runs = untuned.plan(untuned.TASKS, ['acer'], [0], 1.0)
    assert 'grid_multidiscrete' not in {task.name for task, *_ in runs}


def test_the_table_marks_held_out_tasks_and_counts_them_apart():
    tasks = [untuned.TASKS_BY_NAME['cartpole'], untuned.TASKS_BY_NAME['grid_multidiscrete']]
    results = [dict(agent=a, task=t, seed=0, fraction=f, wall_s=10.0, error=None)
               for a, t, f in [('clear', 'cartpole', 1.0), ('clear', 'grid_multidiscrete', 0.5),
                               ('acer', 'cartpole', 0.9)]]
    table = untuned.table(results, tasks, ['clear', 'acer'])
    assert '| grid_multidiscrete (held out) | 0.50 (0.50), 10 s | n/a |' in table
    assert '| **decision tasks: >= 0.8, median** | 1/1, 1.00 | 1/1, 0.90 |' in table
    assert '| **held-out tasks: >= 0.8, median** | 0/1, 0.50 | - |' in table


def test_the_peer_needs_its_own_python(capsys):
    assert untuned.main(['--peer=sb3', '--peer_python=/nonexistent/python', '--seeds=0',
                         '--tasks=cartpole']) == 1
    assert capsys.readouterr().err.startswith('error: the peer (sb3_ppo, sb3_a2c')


def test_two_suites_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    first = untuned.suite_folder(str(tmp_path / 'runs'), '20261129-072900')
    second = untuned.suite_folder(str(tmp_path / 'runs'), '20261129-072900')
    assert first != second and os.path.isdir(first) and os.path.isdir(second)
    assert os.path.basename(first).startswith('20261129-072900-')


def test_the_suite_runs_the_library_of_its_own_checkout(monkeypatch, capsys):
    """An editable install of another checkout would run that checkout's code."""
    assert os.path.realpath(untuned.library_root()) == os.path.realpath(untuned.ROOT)
    monkeypatch.setattr(untuned, 'library_root', lambda: '/elsewhere')
    assert untuned.main(['--agents=clear', '--seeds=0', '--tasks=cartpole']) == 1
    err = capsys.readouterr().err
    assert err.startswith('error: this Python imports the library from /elsewhere')
    assert len(err.strip().splitlines()) == 1
    untuned.check_library_root(['sb3_ppo'])  # the peer runs in its own venv


def test_a_pair_within_a_run_gets_both_fractions():
    """A run that scores an average of the actor's weights also carries its learned
    weights' score (`learned_score`); both are taken against the same references."""
    results = [{'task': 'cartpole', 'score': 500.0, 'learned_score': 261.1},
               {'task': 'cartpole', 'score': None}]
    untuned.add_fractions(results, {'cartpole': (22.2, 500.0)})
    assert results[0]['fraction'] == pytest.approx(1.0)
    assert results[0]['learned_fraction'] == pytest.approx((261.1 - 22.2) / (500 - 22.2))
    assert 'fraction' not in results[1] and 'learned_fraction' not in results[1]
