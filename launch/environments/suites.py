"""Environment suites that need an extra: MinAtar, Atari (ALE) and MuJoCo.

Each suite is recognised by its ids, registered with gymnasium on first use,
and made with the wrappers that turn it into what the agents expect:

- **MinAtar** (`pip install -e '.[minatar]'`, ids `MinAtar/<Game>-v0|v1`; v1
  has each game's minimal action set): the 10x10xC boolean grids become
  uint8 images of 0 and 255, so they are stored as bytes in Reverb and scaled
  to [0, 1] inside the network like any image; sticky actions (0.1) as the
  MinAtar paper.
- **Atari** (`pip install -e '.[atari]'`, ids `ALE/<Game>-v5`): ale-py with its
  bundled ROMs under gymnasium's `AtariPreprocessing` (noop starts, frame skip
  4 with max-pooling, 84x84 grey) and 4 stacked frames as the last axis,
  `[84, 84, 4]` uint8; sticky actions (0.25) as ALE v5. Life loss is not a
  terminal unless `--env_kwargs=terminal_on_life_loss=True`; FIRE is not
  pressed for the policy unless `fire_to_serve=True` (after each reset and
  each lost life: Breakout waits for it to serve, and a greedy policy that
  never picks it plays on to the frame cap); `frame_skip`,
  `screen_size`, `noop_max` and `frame_stack` can be set the same way (the
  other `--env_kwargs` go to `gym.make`). Each step reports in
  `info['frames']` the emulator frames it took, so `env_steps` counts frames
  (4 per decision, fewer where an episode ends inside the skip) as IMPALA
  and CLEAR count them.
- **MuJoCo** (`pip install -e '.[mujoco]'`, gymnasium's own ids such as
  `HalfCheetah-v5`): no wrapper; MuJoCo's warnings go to Python's logging
  (logger `mujoco`, debug) instead of stderr and a MUJOCO_LOG.TXT file.

An id of a suite whose extra is missing is one `EnvironmentSetupError` line
naming the extra to install.
"""

import importlib
import logging
import warnings
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import EnvironmentSetupError
from reverb_agents.launch.environments.action_repeat import FRAMES

MINATAR, ATARI, MUJOCO = 'minatar', 'atari', 'mujoco'

# Atari preprocessing options taken from `--env_kwargs` (`atari_wrappers`' arguments;
# the rest go to `gym.make`).
ATARI_OPTIONS = ('frame_skip', 'screen_size', 'noop_max', 'terminal_on_life_loss', 'frame_stack',
                 'fire_to_serve')


class MissingExtraError(ImportError):
    """A suite's package is not installed."""


def suite_of(env_id: str) -> Optional[str]:
    """`MINATAR`, `ATARI`, `MUJOCO` or None, from the id (`module:` prefix ignored)."""
    name = env_id.rpartition(':')[2]
    if name.startswith('MinAtar/'):
        return MINATAR
    if name.startswith('ALE/'):
        return ATARI
    try:
        entry_point = gym.spec(name).entry_point
    except gym.error.Error:
        return None
    if isinstance(entry_point, str) and entry_point.startswith('gymnasium.envs.mujoco'):
        return MUJOCO
    return None


def _import(suite: str, module: str, env_id: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f'{env_id} needs the [{suite}] extra: pip install -e \'.[{suite}]\' '
            f'({e})') from None


def register(env_id: str) -> None:
    """Registers `env_id`'s suite with gymnasium (once); `MissingExtraError` when its
    extra is not installed. Ids of no suite are left alone."""
    suite = suite_of(env_id)
    if suite == MINATAR:
        if not any(k.startswith('MinAtar/') for k in gym.registry):
            _import(MINATAR, 'minatar.gym', env_id).register_envs()
    elif suite == ATARI:
        if not any(k.startswith('ALE/') for k in gym.registry):
            gym.register_envs(_import(ATARI, 'ale_py', env_id))
    elif suite == MUJOCO:
        mujoco = _import(MUJOCO, 'mujoco', env_id)
        # MuJoCo's default warning handler prints to stderr and appends to MUJOCO_LOG.TXT
        # in the working directory; MuJoCo 3.17 warns on every make of gymnasium's v5
        # models (a deprecated 'settotalmass' attribute). Python's logging instead.
        mujoco.set_mju_user_warning(_log_mujoco_warning)


def _log_mujoco_warning(message: str) -> None:
    logging.getLogger('mujoco').debug(message)


def needs_wrapping(env_id: str) -> bool:
    """True when `make` wraps `env_id` (its vector env is then built from `make`)."""
    return suite_of(env_id) in (MINATAR, ATARI)


def make(env_id: str, **kwargs) -> gym.Env:
    """One environment of `env_id` (registered), with its suite's wrappers."""
    suite = suite_of(env_id)
    if suite == ATARI:
        options, kwargs = _atari_options(kwargs)
        env = gym.make(env_id, disable_env_checker=True, frameskip=1, **kwargs)
        return atari_wrappers(env, **options)
    if suite == MINATAR:
        with warnings.catch_warnings():
            # gymnasium calls every -v0 out of date next to a -v1; MinAtar's v0 is the
            # full action set of the MinAtar paper, not an older version.
            warnings.simplefilter('ignore', DeprecationWarning)
            return BoolToUint8Image(gym.make(env_id, disable_env_checker=True, **kwargs))
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def _atari_options(kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the `atari_wrappers` options among `kwargs`, the rest)."""
    options = {k: v for k, v in kwargs.items() if k in ATARI_OPTIONS}
    rest = {k: v for k, v in kwargs.items() if k not in ATARI_OPTIONS}
    return options, rest


class BoolToUint8Image(gym.ObservationWrapper):
    """Boolean `[H, W, C]` grids as uint8 images: False -> 0, True -> 255."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0, 255, env.observation_space.shape, np.uint8)

    def observation(self, observation):
        return np.asarray(observation, np.uint8) * np.uint8(255)


class _CountFrames(gym.Wrapper):
    """Counts the steps taken through it (the emulator frames under a frame skip)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.frames = 0

    def step(self, action):
        self.frames += 1
        return self.env.step(action)


class _ReportFrames(gym.Wrapper):
    """Puts the frames counted by `counter` during each step into `info['frames']`."""

    def __init__(self, env: gym.Env, counter: _CountFrames):
        super().__init__(env)
        self._counter = counter

    def step(self, action):
        self._counter.frames = 0
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, dict(info, **{FRAMES: self._counter.frames})


class FireToServe(gym.Wrapper):
    """Presses FIRE once after each reset and after each lost life that does not end the
    episode: its frames and reward belong to the reset or the step that lost the life."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if 'FIRE' not in meanings:
            raise EnvironmentSetupError(f'fire_to_serve: {env.spec.id if env.spec else env} '
                                        f'has no FIRE action (its actions: {meanings})')
        self._fire = meanings.index('FIRE')
        self._lives = 0

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:
            observation, info = self.env.reset()
        self._lives = self.env.unwrapped.ale.lives()
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if lives < self._lives and not (terminated or truncated):
            observation, served, terminated, truncated, info = self.env.step(self._fire)
            reward += served
        self._lives = lives
        return observation, reward, terminated, truncated, info


class StackLast(gym.ObservationWrapper):
    """`FrameStackObservation`'s `[k, H, W]` as `[H, W, k]`, the image torsos' layout."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(
            np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype)

    def observation(self, observation):
        return np.moveaxis(np.asarray(observation), 0, -1)


def atari_wrappers(env: gym.Env, frame_skip: int = 4, screen_size: int = 84,
                   noop_max: int = 30, terminal_on_life_loss: bool = False,
                   frame_stack: int = 4, fire_to_serve: bool = False) -> gym.Env:
    """An ALE env made with `frameskip=1` -> `[screen_size, screen_size, frame_stack]`
    uint8 grey frames, each step `frame_skip` emulator frames (max of the last two);
    `fire_to_serve`: FIRE pressed after each reset and lost life (`FireToServe`)."""
    counter = _CountFrames(env)
    env = gym.wrappers.AtariPreprocessing(
        counter, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size,
        terminal_on_life_loss=bool(terminal_on_life_loss), grayscale_obs=True,
        scale_obs=False)
    if fire_to_serve:
        env = FireToServe(env)
    env = _ReportFrames(env, counter)
    return StackLast(gym.wrappers.FrameStackObservation(env, int(frame_stack)))
