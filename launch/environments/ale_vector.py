"""ALE's own vector environment behind `--vector_env=ale` (Atari ids only).

`ale_py.vector_env.AtariVectorEnv` steps its games in C++ threads and does the
preprocessing there (noop starts, frame skip with max-pooling, 84x84 grey,
frame stacking), instead of gymnasium's `SyncVectorEnv` loop over Python
wrappers (`suites.atari_wrappers`). `ALEVectorEnv` makes it look like the
library's Atari vector env: the same options (`--env_kwargs` frame_skip,
screen_size, noop_max, frame_stack; sticky actions and the action set from
the id's registration, 0.25 and minimal for `-v5`), rewards unclipped, no
fire at reset, frames stacked on the last axis (`[84, 84, 4]` uint8), the
first frame of an episode repeated where the stack has no earlier ones yet
(ALE pads with zeros; gymnasium's `FrameStackObservation` repeats it), and
`info['frames']`: the emulator frames each step took, from ALE's episode
frame counter, so `env_steps` counts frames as with the gymnasium path.

What it does not do: a life loss as a terminal (`terminal_on_life_loss`: ALE
continues the game where gymnasium's wrapper resets it), FIRE after each lost
life (`fire_to_serve`), other `gym.make`
keywords, an action repeat (`--step_mul`). Those are one error line.
Evaluation environments stay gymnasium's (`setup.make_envs(evaluation=True)`).
`num_threads`: ALE's worker threads (0: its own choice).
"""

import inspect
from typing import Any, Dict, Mapping, Optional

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import EnvironmentSetupError, suites
from reverb_agents.launch.environments.action_repeat import FRAMES

# `--env_kwargs` this adapter takes: the library's Atari options, then ALE's own.
OPTIONS = suites.ATARI_OPTIONS + ('repeat_action_probability', 'full_action_space',
                                  'max_num_frames_per_episode')
# The library's Atari options ALE's vector env has no equivalent of: what it does not do.
SYNC_ONLY = {'terminal_on_life_loss': 'does not end episodes at a life loss',
             'fire_to_serve': 'does not press FIRE after a lost life'}


def _settings(env_id: str, env_kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """AtariVectorEnv's keyword arguments for `env_id` under `env_kwargs`."""
    unknown = sorted(set(env_kwargs) - set(OPTIONS))
    if unknown:
        raise EnvironmentSetupError(f'--vector_env=ale takes --env_kwargs {list(OPTIONS)}, '
                                    f'not {unknown}')
    for option, missing in SYNC_ONLY.items():
        if env_kwargs.get(option):
            raise EnvironmentSetupError(f'--vector_env=ale {missing} ({option}): '
                                        f'use --vector_env=sync')
    registered = gym.spec(env_id).kwargs
    # The library's own defaults for its options: those of the gymnasium path.
    options = {name: parameter.default for name, parameter
               in inspect.signature(suites.atari_wrappers).parameters.items()
               if name in suites.ATARI_OPTIONS}
    options.update((k, v) for k, v in env_kwargs.items() if k in suites.ATARI_OPTIONS)
    size = int(options['screen_size'])
    return dict(
        game=registered['game'],
        repeat_action_probability=float(env_kwargs.get(
            'repeat_action_probability', registered.get('repeat_action_probability', 0.25))),
        full_action_space=bool(env_kwargs.get(
            'full_action_space', registered.get('full_action_space', False))),
        max_num_frames_per_episode=int(env_kwargs.get(
            'max_num_frames_per_episode', registered.get('max_num_frames_per_episode', 108000))),
        img_height=size, img_width=size, grayscale=True, maxpool=True,
        stack_num=int(options['frame_stack']),
        frameskip=int(options['frame_skip']),
        noop_max=int(options['noop_max']),
        episodic_life=False, reward_clipping=False, use_fire_reset=False)


class ALEVectorEnv(gym.vector.VectorEnv):
    """`num_envs` games of `env_id` (`ALE/<Game>-v5`) in ALE's C++ vector env, with the
    library's observation layout and frame counts (see the module docstring).
    Gymnasium's `NEXT_STEP` autoreset, as every vector env here."""

    metadata = {'autoreset_mode': gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int, num_threads: int = 0,
                 env_kwargs: Optional[Mapping[str, Any]] = None):
        from ale_py.vector_env import AtariVectorEnv  # the [atari] extra, checked by the caller

        settings = _settings(env_id, dict(env_kwargs or {}))
        game = settings.pop('game')
        self._env = AtariVectorEnv(game, num_envs, num_threads=num_threads,
                                   autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP, **settings)
        self.num_envs = num_envs
        size, stack = settings['img_height'], settings['stack_num']
        self.single_observation_space = gym.spaces.Box(0, 255, (size, size, stack), np.uint8)
        self.single_action_space = self._env.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._frame = np.zeros([num_envs], np.int64)  # each game's episode frame counter
        self._autoreset = np.zeros([num_envs], bool)
        self._stacked = np.zeros([num_envs], np.int64)  # frames of the episode in the stack

    def _observation(self, stacked: np.ndarray, first: np.ndarray) -> np.ndarray:
        """`[B, k, H, W]` -> `[B, H, W, k]`, the zero padding of an episode's first
        steps (`first`: the games whose episode starts here) replaced by its first frame."""
        k = stacked.shape[1]
        self._stacked = np.where(first, 1, np.minimum(self._stacked + 1, k))
        padded = np.flatnonzero(self._stacked < k)
        if len(padded):
            stacked = np.array(stacked)  # never write into ALE's own buffer
            for b in padded:
                start = k - self._stacked[b]
                stacked[b, :start] = stacked[b, start]
        return np.ascontiguousarray(np.moveaxis(stacked, 1, -1))

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        observation, info = self._env.reset(seed=seed, options=options)
        info.pop('env_id', None)
        self._frame = np.asarray(info['episode_frame_number'], np.int64)
        self._autoreset[:] = False
        return self._observation(observation, np.ones([self.num_envs], bool)), info

    def step(self, actions):
        observation, reward, terminated, truncated, info = self._env.step(
            np.asarray(actions, np.int32))
        info.pop('env_id', None)  # each game's index: no quantity to average (env_info/*)
        frame = np.asarray(info['episode_frame_number'], np.int64)
        # A reset step (the one after an episode ended) took no frames of an episode.
        info[FRAMES] = np.where(self._autoreset, 0, frame - self._frame)
        observation = self._observation(observation, self._autoreset)
        self._frame = frame
        self._autoreset = np.logical_or(terminated, truncated)
        return observation, np.asarray(reward, np.float64), terminated, truncated, info

    def close_extras(self, **kwargs):
        self._env.close()
