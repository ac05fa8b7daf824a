"""An exported policy, loaded: `load_policy(saved_model_dir)` (TensorFlow, gymnasium, numpy).

Imports nothing else of this library, so it serves a SavedModel wherever
TensorFlow runs (`launch/evaluate.py` is its command line).

    policy = load_policy('runs/clear-CartPole-v1-.../saved_model')
    state = policy.initial_state(batch_size=1)
    action, state = policy.step(observation[None], None, None, state)  # first step
    action, state = policy.step(next_observation[None], action, reward[None], state)
    total = policy.run_episode(gymnasium.make('CartPole-v1'), seed=0)

`prev_action` None means "no previous action" (the start of an episode,
the model's `first_prev_action`), `prev_reward` None means zeros. A policy
with a learned action repeat also returns how often to repeat the action
(`state['prev_step_mul']`); `run_episode` repeats it. A policy exported with an
action mask (docs/action-masks.md) takes the environment's `Dict` observation,
batched (`{'observation': [B, ...], 'action_mask': [B, n]}`), and never returns a
masked action.
"""

import json
from typing import Any, Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf


class PolicyError(ValueError):
    """Not a policy SavedModel, or an environment that does not fit it."""


class Policy:
    """A loaded SavedModel policy of `launch/export.py`; batch-major inputs `[B, ...]`."""

    def __init__(self, saved_model_dir: str):
        if not tf.saved_model.contains_saved_model(saved_model_dir or ''):
            raise PolicyError(f'{saved_model_dir!r} is not a SavedModel directory')
        self.model = tf.saved_model.load(saved_model_dir)
        if 'specs' not in self.model.signatures:
            raise PolicyError(f'{saved_model_dir!r} is a SavedModel without a policy '
                              f'`specs` signature')
        self.specs: Dict[str, Any] = json.loads(
            self.model.signatures['specs']()['specs'].numpy().decode())
        self._observation_dtype = tf.as_dtype(self.specs['observation']['dtype'])
        self._action_dtype = tf.as_dtype(self.specs['action']['dtype'])
        self._key = self.specs['observation'].get('key')  # a masked Dict's other member

    @property
    def env_id(self) -> str:
        """The environment the policy was trained on."""
        return self.specs['env']

    def initial_state(self, batch_size: int = 1) -> Dict[str, tf.Tensor]:
        """The core state at the start of `batch_size` episodes."""
        state = dict(self.model.signatures['initial_state'](batch_size=tf.constant(batch_size)))
        if 'step_mul' in self.specs:  # a learned action repeat: none before the first step
            state['prev_step_mul'] = tf.zeros([batch_size], tf.int32)
        return state

    def step(self, observation, prev_action, prev_reward, state: Dict[str, tf.Tensor],
             deterministic: bool = True) -> Tuple[np.ndarray, Dict[str, tf.Tensor]]:
        """(action `[B, ...]`, next state) for observations `[B, ...]`; `deterministic`:
        the greedy (or mean) action, else a sample. With an action mask, `observation`
        is the Dict of batched members."""
        inputs = {}
        if self._key:
            inputs['action_mask'] = tf.constant(observation['action_mask'], tf.float32)
            observation = observation[self._key]
        observation = np.asarray(observation)
        batch = observation.shape[0]
        if prev_action is None:
            prev_action = np.broadcast_to(self.specs.get('first_prev_action', 0),
                                          [batch, *self.specs['action']['shape']])
        if prev_reward is None:
            prev_reward = np.zeros([batch], np.float32)
        outputs = dict(self.model.signatures['step_deterministic' if deterministic else 'step'](
            observation=tf.constant(observation, self._observation_dtype),
            prev_action=tf.cast(prev_action, self._action_dtype),
            prev_reward=tf.constant(prev_reward, tf.float32), **inputs, **state))
        action = outputs.pop('action').numpy()
        repeats = outputs.pop('step_mul', None)
        if repeats is not None:
            outputs['prev_step_mul'] = repeats
        return action, outputs

    def check_env(self, env: gym.Env) -> None:
        """Raises `PolicyError` when `env`'s spaces are not the policy's."""
        observation = env.observation_space
        if self._key and isinstance(observation, gym.spaces.Dict):
            observation = observation.spaces.get(self._key)
        shape = list(getattr(observation, 'shape', None) or [])
        if shape != self.specs['observation']['shape']:
            raise PolicyError(
                f'the environment observes {observation} but the policy expects shape '
                f'{self.specs["observation"]["shape"]} (exported for {self.env_id})')
        if list(env.action_space.shape or []) != self.specs['action']['shape']:
            raise PolicyError(f'the environment acts in {env.action_space} but the policy '
                              f'outputs {self.specs["action"]["space"]}')

    def run_episode(self, env: gym.Env, seed: Optional[int] = None, deterministic: bool = True,
                    epsilon: float = 0.0, rng: Optional[np.random.Generator] = None,
                    reward_weights: Optional[Sequence[float]] = None) -> float:
        """Plays one episode of `env` (reset with `seed`) and returns its return (vector
        rewards weighted by `reward_weights`). With probability `epsilon` a step samples
        its action instead of taking the greedy one (ALF's epsilon-greedy, drawn from `rng`)."""
        return self.play(env, seed, deterministic, epsilon, rng, reward_weights)[0]

    def play(self, env: gym.Env, seed: Optional[int] = None, deterministic: bool = True,
             epsilon: float = 0.0, rng: Optional[np.random.Generator] = None,
             reward_weights: Optional[Sequence[float]] = None) -> Tuple[float, Optional[float]]:
        """`run_episode`'s return, and the sum of `info['regret']` when the environment
        reports it (the bandits of `launch/bandits.py`), else None."""
        self.check_env(env)
        rng = rng or np.random.default_rng(seed)
        observation, _ = env.reset(seed=seed)
        state = self.initial_state(1)
        prev_action, prev_reward = None, None
        total, regret, done = 0.0, None, False
        while not done:
            explore = bool(epsilon) and rng.random() < epsilon
            batched = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
            action, state = self.step(batched, prev_action, prev_reward,
                                      state, deterministic and not explore)
            repeats = state.get('prev_step_mul')
            reward = 0.0
            for _ in range(1 if repeats is None else int(repeats.numpy()[0])):
                observation, one, terminated, truncated, info = env.step(action[0])
                reward += scalar_reward(one, reward_weights)
                if 'regret' in info:
                    regret = (regret or 0.0) + float(info['regret'])
                done = terminated or truncated
                if done:
                    break
            total += reward
            prev_action, prev_reward = action, np.array([reward], np.float32)
        return total, regret


def scalar_reward(reward, weights: Optional[Sequence[float]]) -> float:
    """The reward, or the weighted sum of a vector one."""
    reward = np.asarray(reward, np.float64)
    if reward.ndim == 0:
        if weights is not None:
            raise PolicyError('--reward_weights given but the rewards are scalars')
        return float(reward)
    if weights is None or len(weights) != reward.size:
        raise PolicyError(f'the environment\'s rewards have {reward.size} components: pass '
                          f'--reward_weights with {reward.size} numbers')
    return float(reward.ravel() @ np.asarray(weights, np.float64))


def load_policy(saved_model_dir: str) -> Policy:
    """The policy exported to `saved_model_dir` (`<logdir>/saved_model`,
    `<logdir>/saved_model_best`, or `launch/export.py`'s output)."""
    return Policy(saved_model_dir)
