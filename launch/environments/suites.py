"""Environment suites that need an extra: MinAtar, Atari (ALE) and MuJoCo.

Each suite is one `Suite` entry (`add_suite`, at the end of this module): how its
ids are recognised, how they are registered with gymnasium on first use, and how
one environment is made with the wrappers that turn it into what the agents
expect; a new suite is a new entry, nothing else changes:

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

import dataclasses
import functools
import importlib
import logging
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

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


def _gym_make(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, disable_env_checker=True, **kwargs)


@dataclasses.dataclass(frozen=True)
class Suite:
    """One environment suite: which ids are its, how it registers them with gymnasium
    (importing its extra), and how it makes one environment with its wrappers."""
    name: str  # also the extra that installs it: pip install -e '.[name]'
    matches: Callable[[str], bool]  # an id (no `module:` prefix) of this suite?
    register: Callable[[str], None]  # registers the suite's ids with gymnasium (once)
    make: Callable[..., gym.Env] = _gym_make  # (id, **env_kwargs) -> one environment
    # `make` wraps the environment: a vector env is then built from `make`, not from
    # the environment's own vectorised version.
    wraps: bool = False


SUITES: Dict[str, Suite] = {}  # name -> suite, in the order ids are matched


def add_suite(suite: Suite) -> None:
    """Adds (or replaces) a suite: the one place a new suite is declared."""
    SUITES[suite.name] = suite


def _suite(env_id: str) -> Optional[Suite]:
    name = env_id.rpartition(':')[2]
    return next((suite for suite in SUITES.values() if suite.matches(name)), None)


def suite_of(env_id: str) -> Optional[str]:
    """The name of `env_id`'s suite (`MINATAR`, `ATARI`, `MUJOCO`, or one added) or None,
    from the id (`module:` prefix ignored)."""
    suite = _suite(env_id)
    return suite.name if suite else None


def import_extra(suite: str, module: str, env_id: str) -> Any:
    """`module`, or `MissingExtraError` naming the extra `suite` that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f'{env_id} needs the [{suite}] extra: pip install -e \'.[{suite}]\' '
            f'({e})') from None


def register(env_id: str) -> None:
    """Registers `env_id`'s suite with gymnasium (once); `MissingExtraError` when its
    extra is not installed. Ids of no suite are left alone."""
    suite = _suite(env_id)
    if suite is not None:
        suite.register(env_id)


def needs_wrapping(env_id: str) -> bool:
    """True when `make` wraps `env_id` (its vector env is then built from `make`)."""
    suite = _suite(env_id)
    return bool(suite and suite.wraps)


def make(env_id: str, **kwargs) -> gym.Env:
    """One environment of `env_id` (registered), with its suite's wrappers."""
    suite = _suite(env_id)
    return (suite.make if suite else _gym_make)(env_id, **kwargs)


def maker(env_id: str, kwargs: Dict[str, Any],
          wrap: Optional[Callable[[gym.Env], gym.Env]] = None) -> Callable[[], gym.Env]:
    """A picklable function making one `env_id` with `kwargs`, then `wrap`.

    It carries `env_id`'s registration, so a subprocess started fresh (an
    `AsyncVectorEnv`'s, spawned) makes ids registered only in this process: the
    API's `train(env=callable)`, a script's own `gym.register`. It imports this
    module only, no TensorFlow.
    """
    # A 'module:Name-v0' id registers itself: its module is imported where it is made.
    spec = None if ':' in env_id else gym.registry.get(env_id)
    return functools.partial(_make_registered, env_id, spec, dict(kwargs), wrap)


def _make_registered(env_id: str, spec: Any, kwargs: Dict[str, Any],
                     wrap: Optional[Callable[[gym.Env], gym.Env]]) -> gym.Env:
    if spec is not None:
        gym.registry.setdefault(spec.id, spec)
    env = make(env_id, **kwargs)
    return wrap(env) if wrap else env


# --- the suites ---------------------------------------------------------------------


def _registers_once(prefix: str, suite: str, module: str, register_module) -> Callable:
    def register_ids(env_id: str) -> None:
        if not any(k.startswith(prefix) for k in gym.registry):
            register_module(import_extra(suite, module, env_id))
    return register_ids


def _make_minatar(env_id: str, **kwargs) -> gym.Env:
    with warnings.catch_warnings():
        # gymnasium calls every -v0 out of date next to a -v1; MinAtar's v0 is the
        # full action set of the MinAtar paper, not an older version.
        warnings.simplefilter('ignore', DeprecationWarning)
        return BoolToUint8Image(_gym_make(env_id, **kwargs))


def _make_atari(env_id: str, **kwargs) -> gym.Env:
    options, kwargs = _atari_options(kwargs)
    return atari_wrappers(_gym_make(env_id, frameskip=1, **kwargs), **options)


def _is_mujoco(name: str) -> bool:
    try:
        entry_point = gym.spec(name).entry_point
    except gym.error.Error:
        return False
    return isinstance(entry_point, str) and entry_point.startswith('gymnasium.envs.mujoco')


def _register_mujoco(env_id: str) -> None:
    mujoco = import_extra(MUJOCO, 'mujoco', env_id)
    # MuJoCo's default warning handler prints to stderr and appends to MUJOCO_LOG.TXT
    # in the working directory; MuJoCo 3.17 warns on every make of gymnasium's v5
    # models (a deprecated 'settotalmass' attribute). Python's logging instead.
    mujoco.set_mju_user_warning(_log_mujoco_warning)


def _log_mujoco_warning(message: str) -> None:
    logging.getLogger('mujoco').debug(message)


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


add_suite(Suite(MINATAR, lambda name: name.startswith('MinAtar/'),
                _registers_once('MinAtar/', MINATAR, 'minatar.gym',
                                lambda module: module.register_envs()),
                _make_minatar, wraps=True))
add_suite(Suite(ATARI, lambda name: name.startswith('ALE/'),
                _registers_once('ALE/', ATARI, 'ale_py', gym.register_envs),
                _make_atari, wraps=True))
add_suite(Suite(MUJOCO, _is_mujoco, _register_mujoco))
