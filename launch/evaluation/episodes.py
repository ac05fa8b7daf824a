"""Evaluation: run whole episodes with a policy, no learning, no writing.

ε-greedy evaluation (ALF's `epsilon_greedy`): with probability `epsilon`,
drawn per step and per environment, the action is sampled from the policy
instead of being its greedy one (ALF's `dist_utils.epsilon_greedy_sample`).
"""

from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from reverb_agents.launch.environments import factory
from reverb_agents.launch.acting.policy import Policy
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import numpy_caster


def epsilon_greedy(greedy: Tuple[np.ndarray, ...], sampled: Tuple[np.ndarray, ...],
                   epsilon: float, rng: np.random.Generator) -> Tuple[np.ndarray, ...]:
    """Per row (batch `[B]` first), all leaves together: `sampled` with probability
    `epsilon`, else `greedy`."""
    if epsilon <= 0.0:
        return greedy
    explore = rng.random(len(greedy[0])) < epsilon
    return tuple(np.where(explore.reshape((-1,) + (1,) * (np.ndim(g) - 1)), s, g)
                 for g, s in zip(greedy, sampled))


class Episodes(NamedTuple):
    """What `run_episodes` played: one entry per episode."""
    returns: np.ndarray  # [episodes]
    regrets: Optional[np.ndarray]  # [episodes] summed info['regret'] (bandits), else None


def evaluate(core: ActorCriticCore, action_space: ActionSpace, env_id: str, episodes: int,
             seed: int, deterministic: bool = True, max_steps: int = 1_000_000,
             reward_weights: Optional[Sequence[float]] = None, epsilon: float = 0.0,
             make_envs: Optional[Callable[[int, int], gym.vector.VectorEnv]] = None
             ) -> Tuple[float, float, np.ndarray]:
    """(mean return, std return, all returns) of `run_episodes`."""
    returns = run_episodes(core, action_space, env_id, episodes, seed, deterministic,
                           max_steps, reward_weights, epsilon, make_envs).returns
    return float(returns.mean()), float(returns.std()), returns


def run_episodes(core: ActorCriticCore, action_space: ActionSpace, env_id: str, episodes: int,
                 seed: int, deterministic: bool = True, max_steps: int = 1_000_000,
                 reward_weights: Optional[Sequence[float]] = None, epsilon: float = 0.0,
                 make_envs: Optional[Callable[[int, int], gym.vector.VectorEnv]] = None
                 ) -> Episodes:
    """Runs `episodes` episodes in parallel (one per environment, seeds `seed + i`).

    Vector rewards count by `reward_weights` (see `launch.environments.factory`);
    `epsilon`: see the module docstring (the choices and samples are seeded by
    `seed` too); `make_envs(n, seed)`: the vector env to play in (a task of a
    sequence), instead of `env_id`'s. Environments that report
    `info['regret']` (`launch/environments/bandits.py`) get it summed per episode.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f'eval_epsilon must be in [0, 1], got {epsilon}')
    envs = (make_envs(episodes, seed) if make_envs is not None else
            factory.make_vector_env(env_id, episodes, seed, reward_weights=reward_weights))
    policy = Policy(core, action_space, seed, deterministic)
    # The sampling twin sees the same inputs and state; only its actions are used.
    sampler = Policy(core, action_space, seed, False) if deterministic and epsilon > 0 else None
    cast = numpy_caster(envs.single_observation_space)
    rng = np.random.default_rng(seed)
    try:
        obs, _ = envs.reset(seed=seed)
        state = policy.initial_state(episodes)
        prev_action = tuple(np.zeros([episodes, *s.shape], s.dtype.as_numpy_dtype)
                            for s in action_space.action_specs())
        prev_reward = np.zeros([episodes], np.float32)
        first = np.ones([episodes], bool)
        returns = np.zeros([episodes])
        regrets = None
        finished = np.zeros([episodes], bool)
        for _ in range(max_steps):
            observation = cast(obs)
            action, _, _, _, next_state = policy(observation, prev_action, prev_reward, first,
                                                 state)
            if sampler is not None:
                sampled = sampler(observation, prev_action, prev_reward, first, state)[0]
                action = epsilon_greedy(action, sampled, epsilon, rng)
            state = next_state
            obs, reward, terminated, truncated, info = envs.step(action_space.to_env(action))
            returns += np.where(finished, 0.0, reward)
            if 'regret' in info:
                regrets = np.zeros([episodes]) if regrets is None else regrets
                regrets += np.where(finished, 0.0, np.asarray(info['regret'], np.float64))
            finished |= terminated | truncated
            if finished.all():
                break
            prev_action, prev_reward = action, np.asarray(reward, np.float32)
            first = np.zeros([episodes], bool)
    finally:
        envs.close()
    return Episodes(returns, regrets)


def regret_summary(greedy: np.ndarray, sampled: np.ndarray) -> Dict[str, float]:
    """summary.json's bandit regrets (per episode, summed `info['regret']`) of a greedy
    and a sampling evaluation."""
    return {'eval_regret_mean': float(greedy.mean()), 'eval_regret_std': float(greedy.std()),
            'eval_regret_sampled_mean': float(sampled.mean()),
            'eval_regret_sampled_std': float(sampled.std())}


def final_evaluation(core: ActorCriticCore, action_space: ActionSpace, env_id: str,
                     episodes: int, seed: int, epsilon: float,
                     make_envs: Callable[[int, int], gym.vector.VectorEnv]
                     ) -> Tuple[float, float, Dict[str, float]]:
    """A run's last evaluation: (mean, std of `episodes` greedy returns, and for a
    bandit `regret_summary` of those and of as many sampled episodes, else {})."""
    played = run_episodes(core, action_space, env_id, episodes, seed=seed, epsilon=epsilon,
                          make_envs=make_envs)
    regret = {}
    if played.regrets is not None:
        regret = regret_summary(played.regrets, run_episodes(
            core, action_space, env_id, episodes, seed=seed, deterministic=False,
            make_envs=make_envs).regrets)
    return float(played.returns.mean()), float(played.returns.std()), regret
