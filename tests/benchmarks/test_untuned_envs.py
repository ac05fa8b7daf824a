"""The untuned suite's environments (`benchmarks/untuned_envs.py`): spaces, rewards, and
that scripted optimal and random policies score the documented references
(`REFERENCES`, in the suite's score units). No training; a few seconds."""

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
