"""Task sequences (`launch/environments/shared_spaces.py`): shared spaces, switching at
the boundary."""

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch.environments import shared_spaces
from reverb_agents.launch.environments import EnvironmentSetupError
from reverb_agents.networks.observations import ACTION_MASK


class _ImageTask(gym.Env):
    """Constant `[size, size, channels]` uint8 images whose pixels are `fill`; ends after 3 steps."""

    def __init__(self, channels: int = 3, actions: int = 2, fill: int = 7, size: int = 8):
        self.observation_space = gym.spaces.Box(0, 255, (size, size, channels), np.uint8)
        self.action_space = gym.spaces.Discrete(actions)
        self._fill, self._t = fill, 0

    def _obs(self):
        return np.full(self.observation_space.shape, self._fill, np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self._t += 1
        return self._obs(), 1.0, self._t >= 3, False, {}


gym.register('TestImageTaskA-v0', entry_point=_ImageTask, kwargs=dict(channels=2, fill=5))
gym.register('TestImageTaskB-v0', entry_point=_ImageTask, kwargs=dict(channels=4, fill=9))
gym.register('TestImageTaskSmall-v0', entry_point=_ImageTask, kwargs=dict(size=4))


def test_vector_observations_take_disjoint_slots_and_actions_unify_with_a_mask():
    shared = shared_spaces.shared_spaces(['CartPole-v1', 'Acrobot-v1'])
    assert shared.masked
    assert shared.action_space == gym.spaces.Discrete(3)
    assert shared.observation_space.spaces['observation'].shape == (10,)
    assert [t.slot for t in shared.tasks] == [(0, 4), (4, 10)]
    assert [t.num_actions for t in shared.tasks] == [2, 3]

    env = shared_spaces.make_task_env('Acrobot-v1', shared)
    own = gym.make('Acrobot-v1')
    observation, _ = env.reset(seed=5)
    expected, _ = own.reset(seed=5)
    np.testing.assert_array_equal(observation['observation'][:4], 0.0)
    np.testing.assert_allclose(observation['observation'][4:], expected)
    np.testing.assert_array_equal(observation[ACTION_MASK], [1, 1, 1])

    cartpole = shared_spaces.make_task_env('CartPole-v1', shared)
    observation, _ = cartpole.reset(seed=5)
    np.testing.assert_array_equal(observation['observation'][4:], 0.0)
    np.testing.assert_array_equal(observation[ACTION_MASK], [1, 1, 0])
    with pytest.raises(ValueError, match='masked action 2'):
        cartpole.step(2)  # a forbidden action never reaches the environment


def test_equal_action_counts_need_no_mask():
    shared = shared_spaces.shared_spaces(['CartPole-v1', 'CartPole-v0'])
    assert not shared.masked
    assert shared.observation_space.shape == (8,)
    assert shared.action_space == gym.spaces.Discrete(2)


def test_image_channels_are_zero_padded_to_the_largest_count():
    shared = shared_spaces.shared_spaces(['TestImageTaskA-v0', 'TestImageTaskB-v0'])
    assert shared.observation_space == gym.spaces.Box(0, 255, (8, 8, 4), np.uint8)
    observation, _ = shared_spaces.make_task_env('TestImageTaskA-v0', shared).reset(seed=0)
    assert observation.dtype == np.uint8
    np.testing.assert_array_equal(observation[..., :2], 5)
    np.testing.assert_array_equal(observation[..., 2:], 0)


@pytest.mark.parametrize('tasks, message', [
    (['CartPole-v1', 'Pendulum-v1'], 'action spaces are incompatible'),
    (['CartPole-v1', 'TestImageTaskA-v0'], 'vectors, or images of one height and width'),
    (['TestImageTaskA-v0', 'TestImageTaskSmall-v0'], 'vectors, or images of one height'),
    (['CartPole-v1', 'NoSuchTask-v0'], "unknown environment 'NoSuchTask-v0'"),
    (['CartPole-v1', 'FrozenLake-v1'], 'vector .* or image .* observations'),
])
def test_spaces_that_cannot_be_shared_are_one_error(tasks, message):
    with pytest.raises(EnvironmentSetupError, match=message):
        shared_spaces.shared_spaces(tasks)
