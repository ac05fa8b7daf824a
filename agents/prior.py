"""A prior policy the actor is kept close to (ALF's `prior_actor`).

With `--prior_actor=DIR` (any policy this library exported, `launch/policies/export.py`,
of the run's observation and action spaces) the actor's loss adds
`prior_kl_weight * KL(pi || pi_prior)` at every learned step, logged as
`loss/prior_kl`. The KL is exact for every action kind
(`ActionSpace.kl_divergence`; for SAC's tanh-squashed Gaussians, the KL of their
Gaussians, which the shared squashing bijection leaves unchanged).

The prior runs inside the learner's compiled step through its SavedModel's
`policy_params` signature, over the same `[T, B]` steps the learner unrolls.
A feed-forward prior sees each step on its own; a recurrent one starts each
sequence from its initial state (the actor's stored state belongs to the
learner's core, not to the prior) and resets at episode starts. The prior is
loaded by every learner that uses it, is never trained, checkpointed or
exported.
"""

import dataclasses
import json
import os
from typing import Any, Sequence, Tuple

import gymnasium as gym
import tensorflow as tf

from reverb_agents.agents.configs import field, require
from reverb_agents.networks.cores import merge_time, split_time
from reverb_agents.networks.distributions import ActionSpace, env_action_tensor
from reverb_agents.networks.observations import ACTION_MASK, exported_observation, observation_spec

PRIOR_METRICS = ('loss/prior_kl',)


@dataclasses.dataclass(frozen=True)
class PriorConfig:
    prior_actor: str = field('', 'SavedModel directory of an exported policy of the same '
                                 "spaces; the actor loss adds KL(pi || prior) ('': none)")
    prior_kl_weight: float = field(0.1, 'weight of KL(pi || prior) in the actor loss')

    def __post_init__(self):
        require(self.prior_kl_weight >= 0,
                f'prior_kl_weight must be >= 0, got {self.prior_kl_weight}')

    def metric_names(self) -> Tuple[str, ...]:
        return PRIOR_METRICS if self.prior_actor else ()


class PriorError(ValueError):
    """A prior policy this run cannot use: missing, or of other specs."""


def _check_specs(specs: dict, path: str, observation_space: gym.Space,
                 action_space: ActionSpace) -> None:
    """Raises `PriorError` unless the prior was exported for these spaces."""
    space, key, _ = exported_observation(observation_space)
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):  # exported leaf by leaf
        observation = {'space': repr(observation_space)}
    else:
        obs = observation_spec(space)
        observation = {'shape': list(obs.shape), 'dtype': obs.dtype.name,
                       **({'key': key} if key else {})}
    expected = {'observation': observation,
                'action space': repr(action_space.space),
                'policy': action_space.policy_spec()}
    found = {'observation': specs.get('observation'),
             'action space': specs.get('action', {}).get('space'),
             'policy': specs.get('policy')}
    if specs.get('step_mul'):
        found['action space'] += f' with a learned action repeat (--step_mul={specs["step_mul"]})'
    for what in expected:
        if found[what] != expected[what]:
            raise PriorError(f'--prior_actor {path!r} does not match this run: its {what} is '
                             f'{found[what]}, this run has {expected[what]}')


def _at(observation: Any, path: Sequence[Any]) -> Any:
    """The member of a (nested) observation at `path` (keys and indices); the twin of
    `launch.policies.load._at`, which imports nothing of the library."""
    for element in path:
        observation = observation[element]
    return observation


class PriorPolicy:
    """A loaded prior: `params(steps)` gives its distribution parameters per leaf.

    A plain object, not a `tf.Module`: a learner holding it keeps the prior's
    variables out of its checkpoints.
    """

    def __init__(self, path: str, observation_space: gym.Space, action_space: ActionSpace):
        if not os.path.isfile(os.path.join(path, 'saved_model.pb')):
            raise PriorError(f'--prior_actor {path!r} is not a SavedModel directory '
                             f'(no saved_model.pb); export one with launch/policies/export.py')
        model = tf.saved_model.load(path)
        if 'policy_params' not in model.signatures:
            raise PriorError(f'--prior_actor {path!r} has no policy_params signature (an '
                             f'older export); export it again with launch/policies/export.py')
        specs = json.loads(model.signatures['specs']()['specs'].numpy().decode())
        _check_specs(specs, path, observation_space, action_space)
        self._model = model
        self._params_fn = model.signatures['policy_params']
        self._initial_state_fn = model.signatures['initial_state']
        self._action_space = action_space
        self._num_leaves = len(specs['policy'])
        self._feed_forward = [s['shape'] for s in specs['state']] == [[0]]
        # Where each input of the export lives in the observation: an export from before
        # `observation_inputs` takes one `observation` (a masked Dict's member `key`),
        # beside its mask.
        self._inputs = specs.get('observation_inputs')
        if self._inputs is None:
            key = exported_observation(observation_space)[1]
            self._inputs = [{'name': 'observation', 'path': [key] if key else [],
                             'dtype': specs['observation']['dtype']}]
            if key:
                self._inputs.append({'name': ACTION_MASK, 'path': [ACTION_MASK],
                                     'dtype': 'float32'})

    def _step(self, first, observation, prev_action, prev_reward, state):
        env_prev = env_action_tensor(self._action_space.space,
                                     any(leaf.rescaled for leaf in self._action_space.leaves),
                                     prev_action)
        feeds = {part['name']: tf.cast(_at(observation, part['path']), part['dtype'])
                 for part in self._inputs}
        out = self._params_fn(first=first, prev_action=env_prev,
                              prev_reward=tf.cast(prev_reward, tf.float32), **feeds, **state)
        params = tuple(out[f'params_{i}'] for i in range(self._num_leaves))
        return params, {k: v for k, v in out.items() if k.startswith('state_')}

    def params(self, observation: Any, prev_action: Sequence[tf.Tensor],
               prev_reward: tf.Tensor, first: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        """The prior's per-leaf params `[T, B, p_i]` over `[T, B]` steps (the library's
        trajectory fields: observation `[T, B, ...]`, per-leaf `prev_action`,
        `prev_reward` and `first` `[T, B]`). Constants: no gradient reaches the prior."""
        shape = tf.shape(first)
        T, B = shape[0], shape[1]
        if self._feed_forward:  # every step on its own: one call over T * B rows
            state = self._initial_state_fn(batch_size=T * B)
            params, _ = self._step(merge_time(first),
                                   tf.nest.map_structure(merge_time, observation),
                                   tuple(merge_time(a) for a in prev_action),
                                   merge_time(prev_reward), state)
            return tuple(tf.stop_gradient(split_time(p, shape[:2])) for p in params)
        state = self._initial_state_fn(batch_size=B)
        steps = []
        for t in range(first.shape[0]):  # the sequence length is static in a learner step
            params, state = self._step(first[t], tf.nest.map_structure(lambda x: x[t], observation),
                                       tuple(a[t] for a in prev_action), prev_reward[t], state)
            steps.append(params)
        return tuple(tf.stop_gradient(tf.stack(leaf, 0)) for leaf in zip(*steps))


def load_prior(config: PriorConfig, observation_space: gym.Space,
               action_space: ActionSpace) -> Any:
    """The config's prior policy, or None without `prior_actor`."""
    if not config.prior_actor:
        return None
    return PriorPolicy(config.prior_actor, observation_space, action_space)


def kl_to_prior(prior: PriorPolicy, action_space: ActionSpace, steps: Any,
                params: Sequence[tf.Tensor]) -> tf.Tensor:
    """KL(pi || pi_prior) `[T, B]` at `steps` (trajectory fields `[T, B, ...]`), where the
    policy's per-leaf params are `params` `[T, B, p_i]`."""
    prior_params = prior.params(steps.observation, steps.prev_action, steps.prev_reward,
                                steps.first)
    return action_space.kl_divergence(params, prior_params)


def mean_kl(kl: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """`loss/prior_kl`: the KL's mean over the valid steps (`mask` 1), whatever way
    the agent sums its losses."""
    return tf.reduce_sum(mask * kl) / tf.maximum(tf.reduce_sum(mask), 1.0)
