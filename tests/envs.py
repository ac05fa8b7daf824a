"""Environments the tests train on; importing this module registers them.

`MaskedChoice-v0` (`tests.envs:MaskedChoice-v0` from the command line) tests
action masks (`networks.observations.ACTION_MASK`, docs/action-masks.md).
"""

from typing import Any, Dict, Tuple

import gymnasium as gym
import numpy as np

MASKED_CHOICE = 'MaskedChoice-v0'
MASKED_CHOICE_CLI = f'tests.envs:{MASKED_CHOICE}'  # importable by launch/run.py's process


class MaskedActionError(RuntimeError):
    """An agent took an action the observation's mask forbade."""


class MaskedChoice(gym.Env):
    """Four actions, a mask that changes every step, and a forbidden action that is
    the best one whenever it is allowed.

    Each step the observation is a cue `c` in {0, 1, 2} (one-hot, `'observation'`)
    and a mask (`'action_mask'`, 1 = allowed): the cue's action is always allowed,
    the jackpot action 3 half the time, each other action half the time. The
    observation never says whether 3 is allowed (only the mask does). Rewards are
    scaled so the best allowed action earns 1: with 3 allowed, 3 earns 1 and the
    cue 0.5; with 3 masked, the cue earns 1; anything else 0. Taking a masked
    action raises `MaskedActionError`.

    So a policy that learns the task prefers 3 above all and the cue next, and
    only the mask keeps it off 3 when 3 is forbidden. Episodes are `length`
    steps (truncated). Returns: 10 for the best policy; ~8 for "3 when allowed,
    else at random"; 7.5 for "always the cue"; ~4.5 at random among the allowed.
    `wrong_mask_size` > 0 makes the mask that long instead (a bad environment
    for the error tests).
    """

    JACKPOT = 3

    def __init__(self, length: int = 10, wrong_mask_size: int = 0):
        self.length = length
        size = wrong_mask_size or 4
        self.observation_space = gym.spaces.Dict({
            'observation': gym.spaces.Box(0.0, 1.0, (3,), np.float32),
            'action_mask': gym.spaces.MultiBinary(size)})
        self.action_space = gym.spaces.Discrete(4)
        self._mask = np.ones(size, np.int8)
        self._cue, self._t = 0, 0

    def _observe(self) -> Dict[str, np.ndarray]:
        self._cue = int(self.np_random.integers(3))
        allowed = self.np_random.random(4) < 0.5
        allowed[self._cue] = True
        self._mask = np.zeros(self.observation_space['action_mask'].n, np.int8)
        self._mask[:4] = allowed
        return {'observation': np.eye(3, dtype=np.float32)[self._cue],
                'action_mask': self._mask.copy()}

    def reset(self, *, seed=None, options=None) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        action = int(action)
        if not self._mask[action]:
            raise MaskedActionError(f'action {action} taken under the mask {self._mask.tolist()}')
        if self._mask[self.JACKPOT]:
            reward = {self.JACKPOT: 1.0, self._cue: 0.5}.get(action, 0.0)
        else:
            reward = float(action == self._cue)
        self._t += 1
        return self._observe(), reward, False, self._t >= self.length, {}


gym.register(id=MASKED_CHOICE, entry_point=MaskedChoice)
gym.register(id='MaskedChoiceWrongMask-v0', entry_point=MaskedChoice,
             kwargs={'wrong_mask_size': 5})
