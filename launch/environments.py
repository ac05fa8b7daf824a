"""Environment factory: gymnasium vector environments with clear errors.

`gym.make_vec` uses an environment's own vectorised implementation where it
has one (CartPole's steps 16 copies in numpy, ~2-3x faster than a
`SyncVectorEnv`), and a `SyncVectorEnv` otherwise. Both run in gymnasium's
default `NEXT_STEP` autoreset mode, which `replay.trajectory` documents.
"""

import importlib

import gymnasium as gym

from networks.distributions import ActionSpace, UnsupportedSpaceError
from networks.observations import observation_spec


class EnvironmentSetupError(ValueError):
    """An environment id that cannot be made, or spaces no agent handles."""


def check_env_id(env_id: str) -> None:
    """Raises `EnvironmentSetupError` unless `env_id` (or `module:env_id`) is registered."""
    module, _, name = env_id.rpartition(':')
    if module:  # gymnasium's `module:Env-v0` form: importing the module registers it
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise EnvironmentSetupError(f'cannot import {module!r} for environment {env_id!r}: {e}') from None
    try:
        gym.spec(name)
    except gym.error.Error as e:
        raise EnvironmentSetupError(f'unknown environment {env_id!r}: {e}') from None


def make_vector_env(env_id: str, num_envs: int, seed: int,
                    vectorization_mode: str = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of `env_id`, reset with seeds `seed, seed + 1, ...`."""
    if num_envs < 1:
        raise EnvironmentSetupError(f'num_envs must be >= 1, got {num_envs}')
    check_env_id(env_id)
    try:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode)
    except Exception as e:  # gymnasium raises many kinds (missing extras, bad kwargs).
        raise EnvironmentSetupError(f'cannot make environment {env_id!r}: {e}') from None
    mode = envs.metadata.get('autoreset_mode', gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        raise EnvironmentSetupError(f'{env_id}: vector env autoreset mode {mode} is not NEXT_STEP')
    envs.action_space.seed(seed)
    return envs


def check_spaces(env_id: str, envs: gym.vector.VectorEnv, squash: bool = False) -> ActionSpace:
    """Raises `EnvironmentSetupError` (one line) when the agent cannot handle the spaces."""
    try:
        observation_spec(envs.single_observation_space)
        return ActionSpace(envs.single_action_space, squash)
    except UnsupportedSpaceError as e:
        raise EnvironmentSetupError(f'{env_id}: {e}') from None
