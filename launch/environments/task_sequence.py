"""Task sequences: one agent trained on several environments in turn, never told which.

`--tasks=A,B,C --steps_per_task=N --task_cycles=K` trains on A for N env steps,
then B, then C, K times over (Rolnick et al. 2019's setting for CLEAR). Every
task is seen through one pair of shared spaces (`shared_spaces`).

`TaskSequenceVectorEnv` is the actors' vector env: it counts real env steps
and, at a visit's boundary, ends every running episode by truncation (the
transition bootstraps as at a time limit) and resets each environment into the
next task, in gymnasium's `NEXT_STEP` autoreset convention. An episode that
had just reset keeps going in the old task until it ends at that step.

The agent's observations never name the task. The run's bookkeeping does:
`info[TASK]` `[B]` is the index (in `--tasks`) of the task each returned
observation comes from, which the actors store with each step so that a
learner can keep one set of value statistics per task (`networks.popart`).
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import EnvironmentSetupError
from reverb_agents.launch.environments.shared_spaces import (SharedSpaces, make_task_env,
                                                             shared_spaces)

# The info key of each environment's task index.
TASK = 'task'


def parse_tasks(tasks: str) -> Tuple[str, ...]:
    """'A,B,C' -> ('A', 'B', 'C'); raises EnvironmentSetupError for an empty id."""
    ids = tuple(t.strip() for t in tasks.split(','))
    if not all(ids):
        raise EnvironmentSetupError(f'--tasks={tasks!r} has an empty environment id')
    return ids


class TaskSequenceVectorEnv(gym.vector.VectorEnv):
    """B environments that go through `env_ids` together, `steps_per_task` env steps
    (summed over the B environments) per visit, `task_cycles` times; after the last
    visit they stay in the last task. `steps_per_task=0`: the first task only.

    Autoreset is gymnasium's `NEXT_STEP`: the step after an episode ends ignores
    its action and returns the first observation of the next episode, in the
    task of the visit the sequence is in by then. At a boundary every running
    episode is truncated at its next step (`truncated` true, `terminated`
    false). Only real steps count towards the boundaries (not the reset steps).
    """

    metadata = {'autoreset_mode': gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, env_ids: Sequence[str], num_envs: int, seed: int,
                 steps_per_task: int = 0, task_cycles: int = 1, start_env_steps: int = 0,
                 shared: Optional[SharedSpaces] = None):
        """`start_env_steps`: where in the sequence a resumed run starts."""
        if num_envs < 1:
            raise EnvironmentSetupError(f'num_envs must be >= 1, got {num_envs}')
        self.env_ids = tuple(env_ids)
        self.shared = shared or shared_spaces(self.env_ids)
        self.num_envs = num_envs
        self.steps_per_task = steps_per_task
        self.num_visits = len(self.env_ids) * task_cycles
        self.env_steps = start_env_steps
        self.single_observation_space = self.shared.observation_space
        self.single_action_space = self.shared.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.action_space.seed(seed)
        self._seed = seed
        self._envs: Dict[str, List[gym.Env]] = {}
        self._where = [self.current_task] * num_envs  # the task each environment is in
        self._autoreset = np.zeros([num_envs], bool)
        self._seeded = set()

    @property
    def visit(self) -> int:
        """The visit the sequence is in (0-based), from the env steps taken."""
        if not self.steps_per_task:
            return 0
        return min(self.env_steps // self.steps_per_task, self.num_visits - 1)

    @property
    def current_task(self) -> str:
        return self.env_ids[self.visit % len(self.env_ids)]

    def _env(self, env_id: str, i: int) -> gym.Env:
        if env_id not in self._envs:
            self._envs[env_id] = [make_task_env(env_id, self.shared)
                                  for _ in range(self.num_envs)]
        return self._envs[env_id][i]

    def _reset_one(self, i: int, seed: Optional[int] = None) -> Tuple[Any, dict]:
        env_id = self.current_task
        self._where[i] = env_id
        if seed is None and (env_id, i) not in self._seeded:
            # Each task's environments get their own seeds the first time they reset.
            seed = self._seed + 1000 * self.env_ids.index(env_id) + i
        self._seeded.add((env_id, i))
        return self._env(env_id, i).reset(seed=seed)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self._seed = seed
        observations, infos = [], {}
        for i in range(self.num_envs):
            observation, info = self._reset_one(i, None if seed is None else seed + i)
            observations.append(observation)
            infos = self._add_info(infos, info, i)
        self._autoreset[:] = False
        return self._stack(observations), self._with_tasks(infos)

    def step(self, actions):
        actions = np.asarray(actions)
        observations, infos = [], {}
        rewards = np.zeros([self.num_envs], np.float64)
        terminated = np.zeros([self.num_envs], bool)
        truncated = np.zeros([self.num_envs], bool)
        current = self.current_task
        for i in range(self.num_envs):
            if self._autoreset[i]:
                observation, info = self._reset_one(i)
            else:
                env_id = self._where[i]
                observation, reward, term, trunc, info = self._env(env_id, i).step(actions[i])
                rewards[i], terminated[i] = reward, term
                truncated[i] = trunc or (env_id != current and not term)
                self.env_steps += 1
            observations.append(observation)
            infos = self._add_info(infos, info, i)
        self._autoreset = terminated | truncated
        return (self._stack(observations), rewards, terminated, truncated,
                self._with_tasks(infos))

    def _with_tasks(self, infos: dict) -> dict:
        """`infos` with `TASK`: the index of the task each environment is in `[B]`."""
        return {**infos, TASK: np.array([self.env_ids.index(e) for e in self._where],
                                        np.int32)}

    def _stack(self, observations: List[Any]) -> Any:
        if self.shared.masked:
            return {key: np.stack([o[key] for o in observations])
                    for key in observations[0]}
        return np.stack(observations)

    def close_extras(self, **kwargs):
        for envs in self._envs.values():
            for env in envs:
                env.close()
