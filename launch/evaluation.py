"""Evaluation: run whole episodes with a policy, no learning, no writing."""

from typing import Optional, Sequence, Tuple

import numpy as np

from launch import environments
from launch.actor import Policy
from networks.cores import ActorCriticCore
from networks.distributions import ActionSpace
from networks.observations import numpy_caster


def evaluate(core: ActorCriticCore, action_space: ActionSpace, env_id: str, episodes: int,
             seed: int, deterministic: bool = True, max_steps: int = 1_000_000,
             reward_weights: Optional[Sequence[float]] = None
             ) -> Tuple[float, float, np.ndarray]:
    """Runs `episodes` episodes in parallel (one per environment, seeds `seed + i`).

    Returns (mean return, std return, all returns); vector rewards count by
    `reward_weights` (see `launch.environments`).
    """
    envs = environments.make_vector_env(env_id, episodes, seed, reward_weights=reward_weights)
    policy = Policy(core, action_space, seed, deterministic)
    cast = numpy_caster(envs.single_observation_space)
    try:
        obs, _ = envs.reset(seed=seed)
        state = policy.initial_state(episodes)
        prev_action = tuple(np.zeros([episodes, *s.shape], s.dtype.as_numpy_dtype)
                            for s in action_space.action_specs())
        prev_reward = np.zeros([episodes], np.float32)
        first = np.ones([episodes], bool)
        returns = np.zeros([episodes])
        finished = np.zeros([episodes], bool)
        for _ in range(max_steps):
            action, _, _, _, state = policy(
                cast(obs), prev_action, prev_reward,
                first, state)
            obs, reward, terminated, truncated, _ = envs.step(action_space.to_env(action))
            returns += np.where(finished, 0.0, reward)
            finished |= terminated | truncated
            if finished.all():
                break
            prev_action, prev_reward = action, np.asarray(reward, np.float32)
            first = np.zeros([episodes], bool)
    finally:
        envs.close()
    return float(returns.mean()), float(returns.std()), returns
