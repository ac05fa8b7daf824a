"""Meta-RL bandit tasks (Wang et al. 2016, "Learning to reinforcement learn").

Every episode is a fresh bandit drawn from a task distribution; the agent
meets it for `horizon` pulls (100 by default) and must explore and exploit
within the episode. Registered with gymnasium when this module is imported
(`factory` imports it):

| id | arms | task drawn at each reset |
| --- | --- | --- |
| `Bandit-Independent-v0` | 2 | p1, p2 ~ U[0, 1] independently |
| `Bandit-Dependent-v0` | 2 | p1 by `difficulty`, p2 = 1 - p1: `uniform` (default) p1 ~ U[0, 1]; `easy` p1 in {0.1, 0.9}; `medium` {0.25, 0.75}; `hard` {0.4, 0.6} |
| `Bandit-ElevenArms-v0` | 11 | the paper's structured task: one of arms 0-9 is the target (reward 5), the other nine give 1.1, arm 10 (informative) gives (target + 1) / 10; rewards are deterministic |
| `Bandit-Restless-v0` | 2 | p1, p2 ~ U[0, 1], each then moving after every pull by a Gaussian step (sd `volatility`, 0.05), reflected into [0, 1] |

Conventions shared by all (the exported policy relies on them, so a
bandit written elsewhere can drive it):
- action `Discrete(k)`; reward Bernoulli(p_arm) (ElevenArms: the arm's value);
- observation `[t / horizon]`, float32 of shape (1,), where t is the number
  of pulls made so far (0 at the first decision, 1.0 at the episode's end):
  the timestep input of the meta-RL core;
- the episode terminates after `horizon` pulls;
- `info['regret']`: the expected regret of the pull, the best arm's
  expected reward minus the pulled arm's (ElevenArms: 5 minus the value).

`BanditVectorEnv` steps B bandits at once in numpy (gymnasium's `NEXT_STEP`
autoreset: the step after an episode's last pull returns the next task's
first observation, reward 0, and ignores the action); `gym.make_vec` uses
it.
"""

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

TASKS = ('independent', 'dependent', 'eleven_arms', 'restless')
DIFFICULTIES = {'uniform': None, 'easy': (0.1, 0.9), 'medium': (0.25, 0.75),
                'hard': (0.4, 0.6)}
IDS = {'Bandit-Independent-v0': 'independent', 'Bandit-Dependent-v0': 'dependent',
       'Bandit-ElevenArms-v0': 'eleven_arms', 'Bandit-Restless-v0': 'restless'}
TARGET_REWARD, OTHER_REWARD = 5.0, 1.1  # ElevenArms


def num_arms(task: str) -> int:
    return 11 if task == 'eleven_arms' else 2


def check(task: str, horizon: int, difficulty: str, volatility: float) -> None:
    """Raises ValueError (one line) for a bad keyword value."""
    if task not in TASKS:
        raise ValueError(f'bandit task must be one of {list(TASKS)}, got {task!r}')
    if not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f'horizon must be an integer >= 1, got {horizon!r}')
    if difficulty not in DIFFICULTIES:
        raise ValueError(f'difficulty must be one of {list(DIFFICULTIES)}, got {difficulty!r}')
    if difficulty != 'uniform' and task != 'dependent':
        raise ValueError('difficulty applies to Bandit-Dependent-v0 only')
    if not volatility >= 0:
        raise ValueError(f'volatility must be >= 0, got {volatility!r}')


class BanditTasks:
    """B bandits' hidden state and their pulls, in numpy (the core of both env classes)."""

    def __init__(self, num: int, task: str, horizon: int, difficulty: str, volatility: float):
        check(task, horizon, difficulty, volatility)
        self.num, self.task, self.horizon = num, task, horizon
        self.difficulty, self.volatility = difficulty, volatility
        self.k = num_arms(task)
        self.values = np.zeros([num, self.k])  # expected reward of each arm
        self.t = np.zeros([num], np.int64)
        self.rng = np.random.default_rng()

    def seed(self, seed: Optional[int]) -> None:
        self.rng = np.random.default_rng(seed)

    def draw(self, rows: np.ndarray) -> None:
        """New tasks for the bandits `rows` (a boolean mask or indices)."""
        n = len(np.arange(self.num)[rows])
        rng = self.rng
        if self.task in ('independent', 'restless'):
            values = rng.uniform(size=[n, 2])
        elif self.task == 'dependent':
            choices = DIFFICULTIES[self.difficulty]
            p1 = rng.uniform(size=n) if choices is None else rng.choice(choices, size=n)
            values = np.stack([p1, 1.0 - p1], axis=1)
        else:
            target = rng.integers(10, size=n)
            values = np.full([n, 11], OTHER_REWARD)
            values[np.arange(n), target] = TARGET_REWARD
            values[:, 10] = (target + 1) / 10.0
        self.values[rows] = values
        self.t[rows] = 0

    def observation(self) -> np.ndarray:
        return (self.t / self.horizon).astype(np.float32)[:, None]

    def pull(self, actions: np.ndarray, rows: Optional[np.ndarray] = None
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rewards, regrets, terminated) `[n]` of pulling `actions` in bandits `rows`."""
        rows = np.arange(self.num) if rows is None else np.arange(self.num)[rows]
        actions = np.asarray(actions, np.int64).reshape(-1)
        values = self.values[rows]
        pulled = values[np.arange(len(rows)), actions]
        if self.task == 'eleven_arms':
            rewards = pulled.copy()
        else:
            rewards = (self.rng.uniform(size=len(rows)) < pulled).astype(np.float64)
        regrets = values.max(axis=1) - pulled
        if self.task == 'restless' and self.volatility > 0:
            moved = values + self.rng.normal(0.0, self.volatility, size=values.shape)
            moved = np.abs(moved)  # reflect at 0 ...
            self.values[rows] = np.where(moved > 1.0, 2.0 - moved, moved)  # ... and at 1
        self.t[rows] += 1
        return rewards, regrets, self.t[rows] >= self.horizon


class BanditEnv(gym.Env):
    """One bandit task per episode (see the module doc)."""

    metadata = {'render_modes': []}

    def __init__(self, task: str = 'dependent', horizon: int = 100, difficulty: str = 'uniform',
                 volatility: float = 0.05):
        self.tasks = BanditTasks(1, task, horizon, difficulty, volatility)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(self.tasks.k)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is not None:
            self.tasks.seed(seed)
        self.tasks.draw(np.array([True]))
        return self.tasks.observation()[0], {}

    def step(self, action):
        rewards, regrets, done = self.tasks.pull(np.asarray([action]))
        return (self.tasks.observation()[0], float(rewards[0]), bool(done[0]), False,
                {'regret': float(regrets[0])})


class BanditVectorEnv(gym.vector.VectorEnv):
    """`num_envs` bandits stepped together in numpy, `NEXT_STEP` autoreset."""

    metadata = {'autoreset_mode': gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, task: str = 'dependent', horizon: int = 100,
                 difficulty: str = 'uniform', volatility: float = 0.05, **unused: Any):
        self.num_envs = num_envs
        self.tasks = BanditTasks(num_envs, task, horizon, difficulty, volatility)
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(self.tasks.k)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._autoreset = np.zeros([num_envs], bool)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self.tasks.seed(seed)
        self.tasks.draw(np.ones([self.num_envs], bool))
        self._autoreset[:] = False
        return self.tasks.observation(), {}

    def step(self, actions):
        n = self.num_envs
        rewards, regrets = np.zeros([n]), np.zeros([n])
        terminated = np.zeros([n], bool)
        live = ~self._autoreset
        if live.any():
            rewards[live], regrets[live], terminated[live] = self.tasks.pull(
                np.asarray(actions).reshape(-1)[live], live)
        if self._autoreset.any():
            self.tasks.draw(self._autoreset)
        self._autoreset = terminated.copy()
        info: Dict[str, Any] = {'regret': regrets, '_regret': live}
        return self.tasks.observation(), rewards, terminated, np.zeros([n], bool), info


MODULE = 'reverb_agents.launch.environments.bandits'  # this module, as gymnasium imports it


def _register() -> None:
    for env_id, task in IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f'{MODULE}:BanditEnv',
                         vector_entry_point=f'{MODULE}:BanditVectorEnv',
                         kwargs={'task': task}, disable_env_checker=True)


_register()
