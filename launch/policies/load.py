"""An exported policy, loaded: `load_policy(saved_model_dir)` (TensorFlow, gymnasium, numpy).

Imports nothing else of this library, so it serves a SavedModel wherever
TensorFlow runs (`launch/evaluate.py` is its command line).

    policy = load_policy('runs/clear-CartPole-v1-.../saved_model')
    env = gymnasium.make('CartPole-v1')
    observation, _ = env.reset(seed=0)
    state, reward, done = None, None, False
    while not done:
        action, state = policy.predict(observation, state, reward=reward)
        observation, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated

`predict` (Stable-Baselines3's call) takes the environment's observation as it
is, one or a batch `[B, ...]`, and returns the action in the environment's format
(a tuple or dict for a `Tuple` or `Dict` action) and the state to pass with the
next observation. The state carries the policy's memory and the action it
returned; `state=None` starts new episodes, and `episode_start` (a bool, or `[B]`
bools) starts new ones where it is true, such as after `env.reset()`. `reward` is
the reward the previous action earned (a float, or `[B]`): the policies of CLEAR,
IMPALA and ACER read it, so it is required except at episode starts (SAC's
policies do not read it; `specs['conditions_on_previous']` says which).
`run_episode(env, seed)` plays one episode.

`step(observation, prev_action, prev_reward, state)` is the SavedModel's own call,
batch-major: `prev_action` None (or `first` true) marks an episode's first step.
A policy with a learned action repeat returns how often to repeat the action as
`state.repeat` (`predict`) or `state['prev_step_mul']` (`step`); `run_episode`
repeats it.
"""

import ast
import dataclasses
import json
from typing import Any, Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf


class PolicyError(ValueError):
    """Not a policy SavedModel, or an environment or input that does not fit it."""


@dataclasses.dataclass(frozen=True)
class PolicyState:
    """What `predict` returns to be passed in with the next observation (B rows)."""
    core: Dict[str, tf.Tensor]  # the SavedModel's `state_0 ... state_K` (and `prev_step_mul`)
    action: Any  # the actions `predict` returned, batched `[B, ...]`, environment's format
    batched: bool  # whether the caller passes batches

    @property
    def repeat(self) -> Any:
        """With a learned action repeat: how many times to take the action (`[B]` int,
        or an int for one observation); None otherwise."""
        repeats = self.core.get('prev_step_mul')
        if repeats is None:
            return None
        return np.asarray(repeats) if self.batched else int(np.asarray(repeats)[0])


def _at(nest: Any, path: Sequence[Any]) -> Any:
    for key in path:
        nest = nest[key]
    return nest


def pack(paths: Sequence[Sequence[Any]], values: Sequence[Any]) -> Any:
    """The nest `paths` describe (keys and indices into it, `specs.json`'s `path`s),
    holding `values` (one per path): the value itself for one empty path, else dicts for
    keys and tuples for indices. `launch/policies/signatures.py` packs the export's parts with it."""
    if len(paths) == 1 and not paths[0]:
        return values[0]
    root: Dict[Any, Any] = {}
    for path, value in zip(paths, values):
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return _containers(root)


def _containers(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    members = {k: _containers(v) for k, v in node.items()}
    if all(isinstance(k, int) for k in members):
        return tuple(members[i] for i in range(len(members)))
    return members


def _rows(value: Any, batch: int, dtype) -> np.ndarray:
    """A scalar or `[B]` value as `[B]` of `dtype`."""
    value = np.asarray(value, dtype).reshape(-1)
    if value.size not in (1, batch):
        raise PolicyError(f'expected one value or {batch} (one per observation), got '
                          f'{value.size}')
    return np.broadcast_to(value, [batch])


def _legacy_parts(specs: Dict[str, Any]) -> Tuple[list, list]:
    """`observation_inputs`, `action_outputs` of an export from before `first`: `observation`
    (a masked Dict's other member `key`), `action_mask`, one `action` (`prev_action`)."""
    observation = specs['observation']
    key = observation.get('key')
    inputs = [{'name': 'observation', 'path': [key] if key else [],
               'shape': observation['shape'], 'dtype': observation['dtype']}]
    if 'action_mask' in specs:
        inputs.append({'name': 'action_mask', 'path': ['action_mask'],
                       'shape': specs['action_mask']['shape'], 'dtype': 'float32'})
    action = specs['action']
    return inputs, [{'name': 'action', 'prev_name': 'prev_action', 'path': [],
                     'shape': action['shape'], 'dtype': action['dtype']}]


class Policy:
    """A loaded SavedModel policy of `launch/policies/export.py`."""

    def __init__(self, saved_model_dir: str):
        if not tf.saved_model.contains_saved_model(saved_model_dir or ''):
            raise PolicyError(f'{saved_model_dir!r} is not a SavedModel directory')
        self.model = tf.saved_model.load(saved_model_dir)
        if 'specs' not in self.model.signatures:
            raise PolicyError(f'{saved_model_dir!r} is a SavedModel without a policy '
                              f'`specs` signature')
        self.specs: Dict[str, Any] = json.loads(
            self.model.signatures['specs']()['specs'].numpy().decode())
        # Exports from before the `first` input: one observation (and its action mask),
        # one action, and `first_prev_action` fed at episodes' first steps instead.
        self._legacy_first = None if 'observation_inputs' in self.specs else (
            self.specs.get('first_prev_action', 0))
        if self._legacy_first is None:
            self._inputs = self.specs['observation_inputs']
            self._outputs = self.specs['action_outputs']
        else:
            self._inputs, self._outputs = _legacy_parts(self.specs)

    @property
    def env_id(self) -> str:
        """The environment the policy was trained on."""
        return self.specs['env']

    def environment(self, env_id: Optional[str] = None,
                    env_kwargs: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """(id, gymnasium.make's keywords) to play in: `env_id` or the recorded id; the given
        `env_kwargs`, else the run's recorded `--env_kwargs` for the recorded id only."""
        recorded = {k: ast.literal_eval(v) for k, v in self.specs.get('env_kwargs', {}).items()}
        env_id = env_id or self.env_id
        return env_id, dict(env_kwargs or (recorded if env_id == self.env_id else {}))

    def initial_state(self, batch_size: int = 1) -> Dict[str, tf.Tensor]:
        """The core state at the start of `batch_size` episodes (`step`'s state)."""
        state = dict(self.model.signatures['initial_state'](batch_size=tf.constant(batch_size)))
        if 'step_mul' in self.specs:  # a learned action repeat: none before the first step
            state['prev_step_mul'] = tf.zeros([batch_size], tf.int32)
        return state

    def step(self, observation: Any, prev_action: Any, prev_reward: Any,
             state: Dict[str, tf.Tensor], deterministic: bool = True,
             first: Any = None) -> Tuple[Any, Dict[str, tf.Tensor]]:
        """(action `[B, ...]`, next state) for a batch of observations `[B, ...]` (a nest
        of batched members for a `Tuple` / `Dict` observation). `prev_action`: the
        batched action taken before, or None at episodes' first steps; `prev_reward`
        `[B]` (None: zeros); `first` `[B]` bool (default: `prev_action is None`);
        `deterministic`: the greedy (or mean) action, else a sample."""
        inputs = {i['name']: tf.constant(np.asarray(_at(observation, i['path']), i['dtype']))
                  for i in self._inputs}
        batch = int(next(iter(inputs.values())).shape[0])
        for o in self._outputs:
            value = (np.zeros([batch, *o['shape']], o['dtype']) if prev_action is None
                     else np.asarray(_at(prev_action, o['path'])))
            inputs[o['prev_name']] = tf.cast(value, o['dtype'])
        if first is None:
            first = prev_action is None
        first = _rows(first, batch, bool)
        prev_reward = _rows(0.0 if prev_reward is None else prev_reward, batch, np.float32)
        if self._legacy_first is None:
            inputs['first'] = tf.constant(first)
        else:  # what the old signature took for an episode's start
            starts = first.reshape([batch] + [1] * (inputs['prev_action'].shape.rank - 1))
            inputs['prev_action'] = tf.where(
                starts, tf.cast(self._legacy_first, inputs['prev_action'].dtype),
                inputs['prev_action'])
            prev_reward = np.where(first, 0.0, prev_reward).astype(np.float32)
        inputs['prev_reward'] = tf.constant(prev_reward)
        if 'step_mul' in self.specs:
            inputs['prev_step_mul'] = state['prev_step_mul']
        inputs.update({k: v for k, v in state.items() if k != 'prev_step_mul'})
        signature = 'step_deterministic' if deterministic else 'step'
        outputs = dict(self.model.signatures[signature](**inputs))
        action = pack([o['path'] for o in self._outputs],
                      [outputs.pop(o['name']).numpy() for o in self._outputs])
        repeats = outputs.pop('step_mul', None)
        if repeats is not None:
            outputs['prev_step_mul'] = repeats
        return action, outputs

    def predict(self, observation: Any, state: Optional[PolicyState] = None,
                episode_start: Any = None, deterministic: bool = True,
                reward: Any = None) -> Tuple[Any, PolicyState]:
        """(action, state) for the environment's observation, one or a batch; see the
        module doc. `deterministic`: the greedy (or mean) action, else a sample."""
        leaf = np.asarray(_at(observation, self._inputs[0]['path']))
        rank = len(self._inputs[0]['shape'])
        if leaf.ndim not in (rank, rank + 1):
            raise PolicyError(f'the policy takes observations of shape {self._inputs[0]["shape"]} '
                              f'(or a batch of them), got shape {list(leaf.shape)}')
        batched = leaf.ndim == rank + 1
        if not batched:
            observation = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
        batch = leaf.shape[0] if batched else 1
        if state is None:
            core, prev_action, starts = self.initial_state(batch), None, np.ones(batch, bool)
        else:
            episodes = np.shape(tf.nest.flatten(state.action)[0])[0]
            if episodes != batch:
                raise PolicyError(f'the state is of {episodes} episodes, the observation of '
                                  f'{batch}')
            core, prev_action = state.core, state.action
            starts = _rows(False if episode_start is None else episode_start, batch, bool)
        if reward is None:
            if self.specs.get('conditions_on_previous', True) and not starts.all():
                raise PolicyError('this policy reads the previous reward: pass predict(..., '
                                  'reward=r) with the reward env.step returned (not needed '
                                  'where episode_start is true)')
            reward = 0.0
        action, core = self.step(observation, prev_action, _rows(reward, batch, np.float32),
                                 core, deterministic, first=starts)
        state = PolicyState(core, action, batched)
        return (action if batched else tf.nest.map_structure(lambda a: a[0], action)), state

    def check_env(self, env: gym.Env) -> None:
        """Raises `PolicyError` when `env`'s spaces are not the policy's."""
        for spaces, parts, what in ((env.observation_space, self._inputs, 'observes'),
                                    (env.action_space, self._outputs, 'acts in')):
            for part in parts:
                try:
                    shape = list(_at(spaces, part['path']).shape or [])
                except (KeyError, IndexError, TypeError):
                    shape = None
                if shape != part['shape']:
                    at = ''.join(f'[{k!r}]' for k in part['path'])
                    raise PolicyError(
                        f'the environment {what} {spaces} but the policy expects shape '
                        f'{part["shape"]}{f" at {at}" if at else ""} (exported for {self.env_id})')

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
        reports it (the bandits of `launch/environments/bandits.py`), else None."""
        self.check_env(env)
        rng = rng or np.random.default_rng(seed)
        observation, _ = env.reset(seed=seed)
        state, reward = None, None
        total, regret, done = 0.0, None, False
        while not done:
            explore = bool(epsilon) and rng.random() < epsilon
            action, state = self.predict(observation, state, None,
                                         deterministic and not explore, reward)
            reward = 0.0
            for _ in range(state.repeat or 1):
                observation, one, terminated, truncated, info = env.step(action)
                reward += scalar_reward(one, reward_weights)
                if 'regret' in info:
                    regret = (regret or 0.0) + float(info['regret'])
                done = terminated or truncated
                if done:
                    break
            total += reward
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
    `<logdir>/saved_model_best`, or `launch/policies/export.py`'s output)."""
    return Policy(saved_model_dir)
