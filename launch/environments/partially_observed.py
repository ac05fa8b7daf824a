"""Partially observed variants of gymnasium tasks, for recurrent agents.

`--env=reverb_agents.launch.environments.partially_observed:PendulumNoVelocity-v1`:
Pendulum-v1 whose observation keeps (cos theta, sin theta) and drops the angular
velocity, so a policy must infer it from the history (the classic POMDP benchmark
of recurrent SAC / TD3 papers). Importing this module registers the ids.
"""

import gymnasium as gym
import numpy as np


class DropVelocity(gym.ObservationWrapper):
    """Keeps the first `keep` entries of a vector observation."""

    def __init__(self, env: gym.Env, keep: int):
        super().__init__(env)
        space = env.observation_space
        self._keep = keep
        self.observation_space = gym.spaces.Box(space.low[:keep], space.high[:keep],
                                                dtype=np.float32)

    def observation(self, observation):
        return np.asarray(observation[:self._keep], np.float32)


def _pendulum_no_velocity(**kwargs) -> gym.Env:
    return DropVelocity(gym.make('Pendulum-v1', **kwargs), keep=2)


if 'PendulumNoVelocity-v1' not in gym.registry:
    gym.register(id='PendulumNoVelocity-v1', entry_point=_pendulum_no_velocity)
