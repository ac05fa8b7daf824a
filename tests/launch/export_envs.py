"""Environments of nested spaces for the export tests; importing this module registers them.

Imports gymnasium and numpy only, so a Python with nothing but TensorFlow can make
them (`tests.launch.export_envs:ImageAndVector-v0`) to run an exported policy.
Rewards are continuous functions of the action and the observation, so two
policies whose actions differ anywhere almost surely differ in return.
"""

from typing import Any, Dict, Tuple

import gymnasium as gym
import numpy as np

IMAGE_AND_VECTOR = 'tests.launch.export_envs:ImageAndVector-v0'
TUPLE_ACTION = 'tests.launch.export_envs:TupleAction-v0'
LENGTH = 20  # steps per episode (truncated)


class ImageAndVector(gym.Env):
    """A `Dict` of an `[8, 8, 1]` uint8 image and a vector, three actions.

    The image is a random pattern of 0 and 255; the vector three values in
    [-1, 1]. The reward is the chosen action's vector entry plus the share of lit
    pixels in the chosen third of the image, so both members matter.
    """

    observation_space = gym.spaces.Dict({
        'image': gym.spaces.Box(0, 255, (8, 8, 1), np.uint8),
        'vector': gym.spaces.Box(-1.0, 1.0, (3,), np.float32)})
    action_space = gym.spaces.Discrete(3)

    def _observe(self) -> Dict[str, np.ndarray]:
        self._image = (self.np_random.random((8, 8, 1)) < 0.5).astype(np.uint8) * 255
        self._vector = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return {'image': self._image, 'vector': self._vector}

    def reset(self, *, seed=None, options=None) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        a = int(action)
        lit = float(self._image[:, a * 3:a * 3 + 3].mean()) / 255.0
        reward = float(self._vector[a]) + lit
        self._t += 1
        return self._observe(), reward, False, self._t >= LENGTH, {}


class TupleAction(gym.Env):
    """A vector observation and a `Tuple(Discrete(3), Box(-1, 3, (2,)))` action.

    The reward is the chosen entry of the observation's first three values minus
    the distance of the continuous part from the observation's last two. The Box's
    bounds are not [-1, 1], so an export must rescale the library's [-1, 1] units to
    them (and its previous-action inputs back) as the library does.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    action_space = gym.spaces.Tuple((gym.spaces.Discrete(3),
                                     gym.spaces.Box(-1.0, 3.0, (2,), np.float32)))

    def _observe(self) -> np.ndarray:
        self._obs = self.np_random.uniform(-1, 1, 5).astype(np.float32)
        return self._obs

    def reset(self, *, seed=None, options=None) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        choice, position = int(action[0]), np.asarray(action[1], np.float32)
        reward = float(self._obs[choice]) - float(np.abs(position - self._obs[3:]).sum())
        self._t += 1
        return self._observe(), reward, False, self._t >= LENGTH, {}


gym.register(id='ImageAndVector-v0', entry_point=ImageAndVector)
gym.register(id='TupleAction-v0', entry_point=TupleAction)
