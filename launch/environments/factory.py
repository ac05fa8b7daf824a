"""Environment factory: gymnasium vector environments with clear errors.

`gym.make_vec` uses an environment's own vectorised implementation where it
has one (CartPole's steps 16 copies in numpy, ~2-3x faster than a
`SyncVectorEnv`), and a `SyncVectorEnv` otherwise. Both run in gymnasium's
default `NEXT_STEP` autoreset mode, which `replay.trajectory` documents.

Vector rewards: an environment whose `step` returns a reward vector `[k]`
declares it as mo-gymnasium does, with a `reward_space` Box of shape `(k,)` on
the unwrapped environment. It needs `reward_weights` (k floats, SAC's config):
its vector env then returns the weighted sum as *the* reward (episode returns,
evaluation, the core's previous-reward input all use it) and the vector itself
in `info['reward_vector']` `[B, k]`, which SAC's actors store and its critics
learn one value per component of.
"""

import importlib
from typing import Any, Callable, Mapping, Optional, Sequence

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import EnvironmentSetupError, bandits, suites
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError
from reverb_agents.networks.observations import observation_spec


BANDITS = tuple(bandits.IDS)  # the meta-RL bandits, registered by importing `bandits`


def check_env_id(env_id: str) -> None:
    """Raises `EnvironmentSetupError` unless `env_id` (or `module:env_id`) is registered."""
    module, _, name = env_id.rpartition(':')
    if module:  # gymnasium's `module:Env-v0` form: importing the module registers it
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise EnvironmentSetupError(f'cannot import {module!r} for environment {env_id!r}: {e}') from None
    try:
        suites.register(name)
        gym.spec(name)
    except suites.MissingExtraError as e:
        raise EnvironmentSetupError(str(e)) from None
    except gym.error.Error as e:
        raise EnvironmentSetupError(f'unknown environment {env_id!r}: {e}') from None


class VectorRewardSyncVectorEnv(gym.vector.SyncVectorEnv):
    """A `SyncVectorEnv` of vector-reward environments: the reward it returns is
    the weighted sum `[B]`, the vector is `info['reward_vector']` `[B, k]`."""

    def __init__(self, env_fns, reward_weights: Sequence[float]):
        super().__init__(env_fns)
        self.reward_weights = np.asarray(reward_weights, np.float64)
        # SyncVectorEnv writes each environment's reward into row i of this buffer
        # (and 0.0 on autoreset steps), so rows of k components work as they are.
        self._rewards = np.zeros((self.num_envs, len(self.reward_weights)), np.float64)

    @property
    def reward_size(self) -> int:
        return len(self.reward_weights)

    def step(self, actions):
        obs, rewards, terminated, truncated, info = super().step(actions)
        info = dict(info, reward_vector=rewards.astype(np.float32))
        return obs, rewards @ self.reward_weights, terminated, truncated, info


def reward_size(envs: gym.vector.VectorEnv) -> int:
    """k for a vector env of k-component rewards, 0 for scalar rewards."""
    return getattr(envs, 'reward_size', 0)


def env_reward_size(env: gym.Env) -> int:
    """k when `env` declares k-component vector rewards (a `reward_space`), else 0."""
    space = getattr(env.unwrapped, 'reward_space', None)
    shape = getattr(space, 'shape', None)
    return int(shape[0]) if shape and len(shape) == 1 else 0


def make_env(env_id: str, env_kwargs: Optional[Mapping[str, Any]] = None) -> gym.Env:
    """One environment of `env_id` (`module:Env-v0` too) made with `env_kwargs`, without
    gymnasium's checker and with its suite's wrappers (`suites`);
    `EnvironmentSetupError` (one line) when it cannot be made."""
    check_env_id(env_id)
    try:
        return suites.make(env_id, **(env_kwargs or {}))
    except Exception as e:  # gymnasium raises many kinds (missing extras, bad kwargs).
        raise EnvironmentSetupError(f'cannot make environment {env_id!r}'
                                    f'{_with(env_kwargs)}: {e}') from None


def _with(env_kwargs: Optional[Mapping[str, Any]]) -> str:
    return (' with --env_kwargs=' + ','.join(f'{k}={v!r}' for k, v in env_kwargs.items())
            if env_kwargs else '')


def declared_reward_size(env_id: str, env_kwargs: Optional[Mapping[str, Any]] = None) -> int:
    """k when `env_id`'s rewards are k-component vectors, 0 for scalar rewards."""
    env = make_env(env_id, env_kwargs)
    try:
        return env_reward_size(env)
    finally:
        env.close()


def make_vector_env(env_id: str, num_envs: int, seed: int,
                    vectorization_mode: Optional[str] = None,
                    reward_weights: Optional[Sequence[float]] = None,
                    wrap: Optional[Callable[[gym.Env], gym.Env]] = None,
                    env_kwargs: Optional[Mapping[str, Any]] = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of `env_id` made with `env_kwargs`, reset with seeds `seed, seed + 1, ...`.

    `vectorization_mode`: None (the environment's own vectorised version where
    it has one, else sync), 'sync', 'async' (an `AsyncVectorEnv`: one
    subprocess per copy, for environments slower than the network) or 'ale'
    (Atari ids: ALE's C++ vector env, `ale_vector`).
    `reward_weights`: for an environment with vector rewards (see the module
    docstring); an error for one without, and a vector-reward one needs them.
    `wrap`: applied to each copy (e.g. `action_repeat.wrapper`'s).
    """
    if num_envs < 1:
        raise EnvironmentSetupError(f'num_envs must be >= 1, got {num_envs}')
    check_env_id(env_id)
    kwargs = dict(env_kwargs or {})
    if vectorization_mode == 'ale':
        return _ale_vector_env(env_id, num_envs, seed, wrap is not None, kwargs)
    try:
        make_one = suites.maker(env_id, kwargs, wrap)
        if reward_weights:
            if vectorization_mode == 'async':
                raise EnvironmentSetupError('vector rewards (--reward_weights) step their '
                                            'environments in one process: --vector_env=sync')
            # gymnasium's checker warns on every non-scalar reward: these are by design.
            envs = VectorRewardSyncVectorEnv([make_one] * num_envs, reward_weights)
        elif vectorization_mode == 'async':
            # Spawned, not forked: a fork of a process running TensorFlow's and
            # Reverb's threads can crash in the child (a lock held mid-fork).
            envs = gym.vector.AsyncVectorEnv([make_one] * num_envs, context='spawn')
        elif wrap is not None or vectorization_mode == 'sync' or suites.needs_wrapping(env_id):
            envs = gym.vector.SyncVectorEnv([make_one] * num_envs)
        else:
            envs = gym.make_vec(env_id, num_envs=num_envs, **kwargs)
    except EnvironmentSetupError:
        raise
    except Exception as e:  # gymnasium raises many kinds (missing extras, bad kwargs).
        raise EnvironmentSetupError(f'cannot make environment {env_id!r}{_with(env_kwargs)}: '
                                    f'{e or type(e).__name__}') from None
    declared = env_reward_size(envs.envs[0]) if hasattr(envs, 'envs') else 0
    if declared != reward_size(envs):
        envs.close()
        if not reward_weights:
            raise EnvironmentSetupError(
                f'{env_id} has rewards of {declared} components: pass --reward_weights with '
                f'{declared} numbers (--agent=sac)')
        raise EnvironmentSetupError(
            f'--reward_weights has {len(reward_weights)} numbers but {env_id} has '
            + (f'rewards of {declared} components' if declared else 'scalar rewards'))
    mode = envs.metadata.get('autoreset_mode', gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        raise EnvironmentSetupError(f'{env_id}: vector env autoreset mode {mode} is not NEXT_STEP')
    envs.action_space.seed(seed)
    return envs


def _ale_vector_env(env_id: str, num_envs: int, seed: int, wrapped: bool,
                    env_kwargs: Mapping[str, Any]) -> gym.vector.VectorEnv:
    """`--vector_env=ale`: `ale_vector.ALEVectorEnv`, for Atari ids without a wrapper."""
    if suites.suite_of(env_id) != suites.ATARI:
        raise EnvironmentSetupError(f'--vector_env=ale steps Atari games (ALE/<Game>-v5), '
                                    f'not {env_id}')
    if wrapped:
        raise EnvironmentSetupError('--vector_env=ale takes no action repeat (--step_mul): '
                                    'ALE repeats each action frame_skip frames itself')
    from reverb_agents.launch.environments import ale_vector  # needs ale_py, registered above

    envs = ale_vector.ALEVectorEnv(env_id.rpartition(':')[2], num_envs, env_kwargs=env_kwargs)
    envs.action_space.seed(seed)
    return envs


def check_spaces(env_id: str, envs: gym.vector.VectorEnv, squash: bool = False,
                 rescale: bool = False) -> ActionSpace:
    """The run's `ActionSpace` (`squash`, `rescale`: as its arguments); raises
    `EnvironmentSetupError` (one line) when the agent cannot handle the spaces."""
    try:
        observation_spec(envs.single_observation_space)
        return ActionSpace(envs.single_action_space, squash, rescale)
    except UnsupportedSpaceError as e:
        raise EnvironmentSetupError(f'{env_id}: {e}') from None
