"""The spaces every task of a task sequence is seen through (`task_sequence`).

One network acts in every task, and nothing but the observations tells the
tasks apart:

- vector observations (rank-1 `Box`): each distinct task owns a disjoint slot
  of one shared vector, zeros elsewhere (as different games on one screen);
- image observations (rank-3 `Box` of one height and width): channels
  zero-padded to the largest count (uint8 when every task's images are);
- `Discrete` actions: one `Discrete(max n)`; when the tasks' `n` differ, the
  observation becomes a `Dict` with an `action_mask` (`networks.observations`)
  that forbids the actions the current task lacks, so the policy gives them
  probability 0 when acting and learning. Identical action spaces of any kind
  are shared as they are; any other combination is an error.
"""

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import EnvironmentSetupError
from reverb_agents.launch.environments.factory import env_reward_size, make_env
from reverb_agents.networks.observations import ACTION_MASK


@dataclasses.dataclass(frozen=True)
class TaskSpaces:
    """How one task's own spaces sit in the shared ones."""
    env_id: str
    observation_space: gym.Space  # the task's own
    action_space: gym.Space  # the task's own
    slot: Optional[Tuple[int, int]]  # vector observations: [start, stop) in the shared vector
    num_actions: Optional[int]  # Discrete actions: the task's n (the first n shared ones)


@dataclasses.dataclass(frozen=True)
class SharedSpaces:
    """The spaces every task of a sequence is seen through."""
    tasks: Tuple[TaskSpaces, ...]  # one per distinct env id, in first-visit order
    observation_space: gym.Space  # a Box, or a Dict with `ACTION_MASK` when `masked`
    action_space: gym.Space
    masked: bool

    def task(self, env_id: str) -> TaskSpaces:
        return next(t for t in self.tasks if t.env_id == env_id)

    @property
    def inner_observation_space(self) -> gym.Space:
        """The shared observation without the action mask."""
        if self.masked:
            return self.observation_space.spaces['observation']
        return self.observation_space


def _spaces_of(env_id: str) -> Tuple[gym.Space, gym.Space]:
    env = make_env(env_id)
    try:
        if env_reward_size(env):
            raise EnvironmentSetupError(f'{env_id}: task sequences need scalar rewards')
        return env.observation_space, env.action_space
    finally:
        env.close()


def _describe(env_ids: Sequence[str], spaces: Sequence[gym.Space]) -> str:
    return ', '.join(f'{e}: {s}' for e, s in zip(env_ids, spaces))


def shared_spaces(env_ids: Sequence[str]) -> SharedSpaces:
    """The shared spaces of `env_ids` (repeats allowed: the same task again).

    Raises `EnvironmentSetupError` (one line) for an unknown id or spaces that
    cannot be shared.
    """
    distinct = list(dict.fromkeys(env_ids))
    own = [_spaces_of(e) for e in distinct]
    observations, actions = [o for o, _ in own], [a for _, a in own]
    if not all(isinstance(o, gym.spaces.Box) and len(o.shape) in (1, 3) for o in observations):
        raise EnvironmentSetupError(
            'task sequences need vector (rank-1 Box) or image (rank-3 Box) observations, got '
            + _describe(distinct, observations))
    ranks = {len(o.shape) for o in observations}
    slots: List[Optional[Tuple[int, int]]] = [None] * len(distinct)
    if ranks == {1}:
        sizes = [int(o.shape[0]) for o in observations]
        starts = np.cumsum([0] + sizes)
        slots = [(int(starts[i]), int(starts[i + 1])) for i in range(len(sizes))]
        low = np.concatenate([np.asarray(o.low, np.float32) for o in observations])
        high = np.concatenate([np.asarray(o.high, np.float32) for o in observations])
        shared_observation = gym.spaces.Box(low, high, dtype=np.float32)
    elif ranks == {3} and len({tuple(o.shape[:2]) for o in observations}) == 1:
        height, width = observations[0].shape[:2]
        channels = max(int(o.shape[2]) for o in observations)
        if all(o.dtype == np.uint8 for o in observations):
            shared_observation = gym.spaces.Box(0, 255, (height, width, channels), np.uint8)
        else:
            shared_observation = gym.spaces.Box(-np.inf, np.inf, (height, width, channels),
                                                np.float32)
    else:
        raise EnvironmentSetupError(
            'task sequences need every task\'s observations to be vectors, or images of one '
            'height and width, got ' + _describe(distinct, observations))
    num_actions: List[Optional[int]] = [None] * len(distinct)
    masked = False
    if all(isinstance(a, gym.spaces.Discrete) for a in actions):
        num_actions = [int(a.n) for a in actions]
        shared_action = gym.spaces.Discrete(max(num_actions))
        masked = len(set(num_actions)) > 1
    elif all(a == actions[0] for a in actions):
        shared_action = actions[0]
    else:
        raise EnvironmentSetupError(
            'the tasks\' action spaces are incompatible (a sequence needs Discrete actions, '
            'any n, or one identical action space): ' + _describe(distinct, actions))
    if masked:
        shared_observation = gym.spaces.Dict({
            'observation': shared_observation,
            ACTION_MASK: gym.spaces.MultiBinary(int(shared_action.n))})
    return SharedSpaces(
        tasks=tuple(TaskSpaces(e, o, a, s, n) for e, (o, a), s, n
                    in zip(distinct, own, slots, num_actions)),
        observation_space=shared_observation, action_space=shared_action, masked=masked)


class SharedSpaceEnv(gym.Wrapper):
    """One task seen through the shared spaces; refuses an action its task lacks."""

    def __init__(self, env: gym.Env, shared: SharedSpaces, env_id: str):
        super().__init__(env)
        self._task = shared.task(env_id)
        self._shared = shared
        self.observation_space = shared.observation_space
        self.action_space = shared.action_space
        inner = shared.inner_observation_space
        self._zeros = np.zeros(inner.shape, inner.dtype)
        if shared.masked:
            self._mask = np.zeros([int(shared.action_space.n)], np.int8)
            self._mask[:self._task.num_actions] = 1

    def _observation(self, observation: Any) -> Any:
        shared = self._zeros.copy()
        if self._task.slot is not None:
            start, stop = self._task.slot
            shared[start:stop] = observation
        else:
            shared[..., :np.shape(observation)[-1]] = observation
        if self._shared.masked:
            return {'observation': shared, ACTION_MASK: self._mask.copy()}
        return shared

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        return self._observation(observation), info

    def step(self, action):
        if self._task.num_actions is not None:
            action = int(action)
            if not 0 <= action < self._task.num_actions:
                raise ValueError(f'{self._task.env_id} has {self._task.num_actions} actions; '
                                 f'it got the masked action {action}')
            action += int(self._task.action_space.start)
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self._observation(observation), reward, terminated, truncated, info


def make_task_env(env_id: str, shared: SharedSpaces) -> gym.Env:
    """One environment of task `env_id` in the shared spaces."""
    return SharedSpaceEnv(make_env(env_id), shared, env_id)


def make_task_vector_env(env_id: str, shared: SharedSpaces, num_envs: int,
                         seed: int) -> gym.vector.VectorEnv:
    """`num_envs` environments of one task in the shared spaces (evaluation)."""
    envs = gym.vector.SyncVectorEnv([lambda: make_task_env(env_id, shared)
                                     for _ in range(num_envs)])
    envs.action_space.seed(seed)
    return envs
