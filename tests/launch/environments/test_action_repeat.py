"""Action repeat (`--step_mul`, `launch/environments/action_repeat.py`): frames against a
hand count, the learned head end to end, its export and `launch/evaluate.py`."""

import json

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.acting.actor import Actor, EpisodeStats
from reverb_agents.launch.environments import action_repeat
from tests.conftest import library_greedy_returns
from tests.launch.command_line.test_train import SMALL_CONFIG, small_options


class _Counter(gym.Env):
    """Episodes of `length` frames, reward 1 per frame; counts every frame stepped."""
    frames = 0  # over every instance: the hand count

    def __init__(self, length: int = 10):
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._length, self._t = length, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        _Counter.frames += 1
        self._t += 1
        return np.full(2, self._t / self._length, np.float32), 1.0, self._t >= self._length, \
            False, {}


gym.register('TestFrameCounter-v0', entry_point=_Counter)


def test_fixed_repeat_takes_each_action_n_times_and_stops_at_the_episode_end():
    env = action_repeat.ActionRepeat(_Counter(length=10), 3)
    env.reset(seed=0)
    frames, rewards, done = [], [], False
    while not done:
        _, reward, terminated, truncated, info = env.step(0)
        frames.append(info[action_repeat.FRAMES])
        rewards.append(reward)
        done = terminated or truncated
    assert frames == [3, 3, 3, 1] and rewards == [3.0, 3.0, 3.0, 1.0]


def test_learned_repeat_takes_the_chosen_count():
    env = action_repeat.LearnedActionRepeat(_Counter(length=10), 4)
    assert env.action_space == gym.spaces.Dict({'action': gym.spaces.Discrete(2),
                                                'step_mul': gym.spaces.Discrete(4)})
    env.reset(seed=0)
    frames = [env.step({'action': 1, 'step_mul': k})[4][action_repeat.FRAMES]
              for k in (0, 3, 1, 3)]
    assert frames == [1, 4, 2, 3]  # the last repeat stops at frame 10, the episode's end
    assert action_repeat.wrapper(1, False) is None
    with pytest.raises(ValueError, match='step_mul must be >= 1'):
        action_repeat.wrapper(0, True)


@pytest.mark.parametrize('fixed', [True, False])
def test_the_actor_counts_frames_and_decisions_as_stepped(fixed):
    options = small_options('/tmp/unused', env='TestFrameCounter-v0', num_envs=3, step_mul=3,
                            fixed_step_mul=fixed)
    envs = setup_lib.make_envs(options, SMALL_CONFIG, 3, seed=0)
    setup = setup_lib.make_setup(options, SMALL_CONFIG, envs)
    stats = EpisodeStats()
    actor = Actor(envs, setup_lib.make_core(setup), setup.action_space, writer=None, fetcher=None,
                  seed=0, stats=stats)
    _Counter.frames = 0
    actor.run(lambda: stats.agent_steps >= 60)
    assert stats.env_steps == _Counter.frames  # every frame the environments stepped
    assert stats.agent_steps >= 60  # decisions: reset steps are not counted
    if fixed:
        # The 3 environments go in lock step, and an episode of 10 frames is 4 decisions
        # (3 + 3 + 3 + 1 frames): a hand count.
        episodes, rest = divmod(stats.agent_steps // 3, 4)
        assert stats.env_steps == 3 * (10 * episodes + 3 * rest)
    else:
        assert stats.agent_steps < stats.env_steps <= 3 * stats.agent_steps
    envs.close()


def test_a_learned_step_mul_run_exports_and_evaluates_with_it(tmp_path, run_script):
    logdir = tmp_path / 'run'
    summary = inprocess.train(small_options(logdir, num_steps=800, step_mul=3), SMALL_CONFIG)
    assert summary['agent_steps'] < summary['env_steps']
    assert summary['saved_model']
    from reverb_agents.launch.policies import export
    core, action_space, _, env_id = export.restore_core(str(logdir))
    assert env_id == 'CartPole-v1' and len(action_space.leaves) == 2
    # In-library greedy returns, one environment, as launch/evaluate.py plays them.
    env = action_repeat.LearnedActionRepeat(gym.make('CartPole-v1'), 3)
    expected = library_greedy_returns(core, action_space, env_id, (100, 101), env=env)
    result = run_script('evaluate', [f'--saved_model={summary["saved_model"]}',
                                     '--episodes=2', '--seed=100'])
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])['returns'] == expected

