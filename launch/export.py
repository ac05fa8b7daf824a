"""SavedModel export of a trained policy, loadable with TensorFlow alone.

`python launch/export.py --logdir=DIR [--checkpoint=PATH] --output=DIR`
exports from a run's checkpoint; every run exports its final policy to
`<logdir>/saved_model` (`launch/learner_loop.py`).

Signatures (all batched; names are the inputs' and outputs' keys):
- `initial_state(batch_size: int32 [])` -> `state_0 ... state_K`: the core's
  recurrent state (a feed-forward policy has one `[B, 0]` placeholder, so
  every signature has the same shape of interface);
- `step(observation, prev_action, prev_reward, state_0 ... state_K)` ->
  `action`, `state_0 ... state_K`: samples an action; a policy with a learned
  action repeat (`--step_mul`, `launch/action_repeat.py`) also takes
  `prev_step_mul` (int32 `[B]`, the previous decision's repeat count; 0 at an
  episode's first step) and outputs `step_mul` (int32 `[B]`, in 1..N): take
  `action` that many times;
- `step_deterministic(...)`: the same with the greedy / mean action;
- `policy_params(first, observation, prev_action, prev_reward, state_0 ... state_K)`
  -> `params_0 ... params_L`, `state_0 ... state_K`: the policy's distribution
  parameters, one tensor per action leaf in the library's format (the specs'
  `policy` lists each leaf's kind and width; `agents.prior` reads them for
  `--prior_actor`); `first` (bool `[B]`) marks an episode's first step, where
  the core resets its state and ignores `prev_action` and `prev_reward`;
- `specs()` -> `specs`: JSON (also the asset `assets/specs.json`): env id,
  observation, action and state shapes and dtypes, the policy's leaves.

Actions and `prev_action` are in the environment's format (`Discrete`: the
integer including `start`; `MultiDiscrete`: the integer array; `Box`: the
float array clipped to the bounds; a SAC policy's squashed action is rescaled
to them; SAC exports its actor only, or, with `--discrete_policy=critic`, the critics
and temperatures its softmax(Q / alpha) policy acts with). At an episode's first step pass the
initial state, `prev_reward` 0 and `prev_action` = the specs' `first_prev_action`
(`Discrete`: start - 1, `MultiDiscrete`: start - 1 per entry, `Box`: zeros), which
the core encodes as no previous action (an all-zero one-hot), exactly what the
library's core sees there; `prev_step_mul` 0 likewise. Observations must be one
tensor (a `Box` or `Discrete` space) and actions one `Discrete`, `MultiDiscrete` or `Box`.

Action masks (docs/action-masks.md): an observation `Dict` of one such tensor and
an `action_mask` (Discrete / MultiDiscrete actions) is exported with both as
inputs of `step` and `step_deterministic`: `observation` (the other member, whose
key the specs' `observation.key` names) and `action_mask` (float32 `[B, n]`, 1 =
allowed, branches concatenated; also an input of `policy_params`). Masked actions
have probability 0. The specs then also hold `action_mask` (shape, dtype).
"""

import json
import os
import shutil
import sys
import tempfile
from typing import Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf
from absl import logging

from reverb_agents.agents import configs, registry
from reverb_agents.launch import rundir
from reverb_agents.launch.action_repeat import ACTION, STEP_MUL
from reverb_agents.launch import setup as setup_lib
from reverb_agents.launch.options import RunOptions
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace, env_action_tensor, to_unit_interval
from reverb_agents.networks.observations import ACTION_MASK, exported_observation, observation_spec


class ExportError(ValueError):
    """A policy this exporter cannot write."""


def _check_exportable(observation_space: gym.Space, action_space: gym.Space
                      ) -> Tuple[gym.Space, Optional[str], int]:
    """`networks.observations.exported_observation`, or ExportError."""
    space, key, mask_size = exported_observation(observation_space)
    if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
        raise ExportError('export needs a Box or Discrete observation space (with an '
                          f'{ACTION_MASK!r} beside it, or not), got {observation_space}')
    if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                     gym.spaces.Box)):
        raise ExportError('export needs a Discrete, MultiDiscrete or Box action space, '
                          f'got {action_space}')
    return space, key, mask_size


def _first_prev_action(space: gym.Space):
    """The `prev_action` of an episode's first step: one below each categorical range,
    which encodes as an all-zero one-hot (`tf.one_hot` of an index out of range), as
    the library's core zeroes the previous action there; zeros for a `Box`."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start) - 1
    if isinstance(space, gym.spaces.MultiDiscrete):
        return (np.asarray(space.start) - 1).tolist()
    return np.zeros(space.shape).tolist()


def _concrete(fn, *args, **kwargs):
    return tf.function(fn, autograph=False).get_concrete_function(*args, **kwargs)


class ExportedPolicy(tf.Module):
    """The thin module that is saved: the core's variables and five functions."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace,
                 observation_space: gym.Space, env_id: str):
        super().__init__(name='policy')
        space = action_space.space
        # A learned action repeat (`launch.action_repeat`): the environment's action
        # plus a last categorical leaf, exported as its own `step_mul` output.
        self._max_step_mul = 0
        if isinstance(space, gym.spaces.Dict) and list(space.spaces) == [ACTION, STEP_MUL]:
            space, self._max_step_mul = space[ACTION], int(space[STEP_MUL].n)
        observation_space, self._key, mask_size = _check_exportable(observation_space, space)
        self._core = core
        self._actions = action_space
        self._num_leaves = len(action_space.leaves) - bool(self._max_step_mul)
        self._space = space
        obs = observation_spec(observation_space)
        self._state_structure = core.initial_state(1)
        flat_state = tf.nest.flatten(self._state_structure)
        self._state_specs = ([tf.TensorSpec([None, *s.shape[1:]], s.dtype) for s in flat_state]
                             or [tf.TensorSpec([None, 0], tf.float32)])
        env_dtype = tf.as_dtype(space.dtype)
        env_shape = () if isinstance(space, gym.spaces.Discrete) else tuple(space.shape)
        self.specs_json = json.dumps({
            'env': env_id,
            'observation': {'shape': list(obs.shape), 'dtype': obs.dtype.name,
                            **({'key': self._key} if self._key else {})},
            **({ACTION_MASK: {'shape': [mask_size], 'dtype': 'float32'}} if mask_size else {}),
            'action': {'space': repr(space), 'shape': list(env_shape), 'dtype': env_dtype.name},
            'state': [{'shape': list(s.shape[1:]), 'dtype': s.dtype.name}
                      for s in self._state_specs],
            'first_prev_action': _first_prev_action(space),
            'policy': action_space.policy_spec(),
            **({'step_mul': self._max_step_mul} if self._max_step_mul else {}),
        })
        inputs = {
            'observation': tf.TensorSpec([None, *obs.shape], obs.dtype, name='observation'),
            **({ACTION_MASK: tf.TensorSpec([None, mask_size], tf.float32, name=ACTION_MASK)}
               if mask_size else {}),
            'prev_action': tf.TensorSpec([None, *env_shape], env_dtype, name='prev_action'),
            'prev_reward': tf.TensorSpec([None], tf.float32, name='prev_reward'),
            **({'prev_step_mul': tf.TensorSpec([None], tf.int32, name='prev_step_mul')}
               if self._max_step_mul else {}),
            **{f'state_{i}': tf.TensorSpec(s.shape, s.dtype, name=f'state_{i}')
               for i, s in enumerate(self._state_specs)},
        }
        self.step = _concrete(lambda **kw: self._step(False, **kw), **inputs)
        self.step_deterministic = _concrete(lambda **kw: self._step(True, **kw), **inputs)
        self.policy_params = _concrete(
            self._policy_params, first=tf.TensorSpec([None], tf.bool, name='first'), **inputs)
        self.initial_state = _concrete(self._initial_state,
                                       tf.TensorSpec([], tf.int32, name='batch_size'))
        specs = self.specs_json
        self.specs = _concrete(lambda: {'specs': tf.constant(specs)})

    def _initial_state(self, batch_size: tf.Tensor) -> Dict[str, tf.Tensor]:
        flat = tf.nest.flatten(self._core.initial_state(batch_size))
        if not flat:
            flat = [tf.zeros([batch_size, 0], tf.float32)]
        return {f'state_{i}': s for i, s in enumerate(flat)}

    def _to_leaves(self, env_action: tf.Tensor):
        """Environment-format actions -> the library's per-leaf actions."""
        space = self._space
        if isinstance(space, gym.spaces.Discrete):
            return (tf.cast(env_action - int(space.start), tf.int32),)
        if isinstance(space, gym.spaces.MultiDiscrete):
            batch = tf.shape(env_action)[0]
            flat = tf.reshape(env_action, [batch, -1]) - np.asarray(space.start).ravel()
            return tuple(tf.cast(flat[:, i], tf.int32) for i in range(self._num_leaves))
        action = tf.reshape(tf.cast(env_action, tf.float32), [tf.shape(env_action)[0], -1])
        if self._actions.squash:  # the library's squashed actions live in [-1, 1]
            low, high = (np.asarray(b, np.float32).ravel() for b in (space.low, space.high))
            action = to_unit_interval(action, low, high)
        return (action,)

    def _unroll_step(self, first, observation, prev_action, prev_reward, prev_step_mul,
                     action_mask, state):
        """(per-leaf policy params, flat new state) of one core step."""
        flat_state = [state[f'state_{i}'] for i in range(len(self._state_specs))]
        structure = tf.nest.pack_sequence_as(
            self._state_structure, flat_state[:len(tf.nest.flatten(self._state_structure))])
        prev_leaves = self._to_leaves(prev_action)
        if self._max_step_mul:  # the head's value is the repeat count - 1 (-1: none)
            prev_leaves += (prev_step_mul - 1,)
        if self._key:  # the core splits the mask off again and masks its logits
            observation = {self._key: observation, ACTION_MASK: action_mask}
        outputs, new_state = self._core(
            CoreInputs(observation, prev_leaves, prev_reward, first), structure)
        new_flat = tf.nest.flatten(new_state) or flat_state
        return outputs.policy_params, {f'state_{i}': s for i, s in enumerate(new_flat)}

    def _step(self, deterministic: bool, observation, prev_action, prev_reward,
              prev_step_mul=None, action_mask=None, **state):
        first = tf.zeros(tf.shape(prev_reward), tf.bool)
        params, new_state = self._unroll_step(first, observation, prev_action, prev_reward,
                                              prev_step_mul, action_mask, state)
        leaves = self._actions.mode(params) if deterministic else self._actions.sample(params)
        repeat = {'step_mul': leaves[-1] + 1} if self._max_step_mul else {}
        return {'action': env_action_tensor(self._space, self._actions.squash,
                                            leaves[:self._num_leaves]), **repeat, **new_state}

    def _policy_params(self, first, observation, prev_action, prev_reward, prev_step_mul=None,
                       action_mask=None, **state):
        params, new_state = self._unroll_step(first, observation, prev_action, prev_reward,
                                              prev_step_mul, action_mask, state)
        return {**{f'params_{i}': p for i, p in enumerate(params)}, **new_state}


def export_policy(core: ActorCriticCore, action_space: ActionSpace,
                  observation_space: gym.Space, env_id: str, output_dir: str) -> str:
    """Writes the SavedModel to `output_dir` (replaced atomically); returns the path."""
    module = ExportedPolicy(core, action_space, observation_space, env_id)
    parent = os.path.dirname(os.path.abspath(output_dir)) or '.'
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix='.saved_model_', dir=parent)
    specs_path = os.path.join(staging, 'specs.json')
    with open(specs_path, 'w') as f:
        f.write(module.specs_json)
    module.specs_asset = tf.saved_model.Asset(specs_path)
    tf.saved_model.save(module, os.path.join(staging, 'model'), signatures={
        'initial_state': module.initial_state,
        'step': module.step,
        'step_deterministic': module.step_deterministic,
        'policy_params': module.policy_params,
        'specs': module.specs,
    })
    if os.path.exists(output_dir):
        shutil.rmtree(output_dir)
    os.replace(os.path.join(staging, 'model'), output_dir)
    shutil.rmtree(staging)
    return output_dir


def export_run_policy(core: ActorCriticCore, action_space: ActionSpace,
                      observation_space: gym.Space, env_id: str, logdir: str,
                      path: Optional[str] = None) -> Optional[str]:
    """A run's policy as `path` (default `<logdir>/saved_model`); None (with a warning) if
    unsupported."""
    try:
        return export_policy(core, action_space, observation_space, env_id,
                             path or os.path.join(logdir, 'saved_model'))
    except ExportError as e:
        logging.warning('no SavedModel: %s', e)
        return None


def restore_core(logdir: str, checkpoint_path: Optional[str] = None):
    """Rebuilds a run's learner from `<logdir>/run_config.json` and restores a checkpoint.

    Returns (core, action space, observation space, env id).
    """
    run = rundir.read_run_config(logdir)
    if run is None:
        raise ExportError(f'{logdir!r} has no {rundir.RUN_CONFIG}: not a run directory')
    agent = registry.get(run['agent'])
    config = configs.from_nested(agent.config_class, run['config'])
    options = RunOptions(agent=run['agent'], env=run['env'], num_envs=1, logdir=logdir,
                         **run['env_options'])
    envs = setup_lib.make_envs(options, config, 1, 0)
    setup = setup_lib.make_setup(options, config, envs)
    envs.close()
    learner = setup_lib.make_learner(setup)
    checkpoint_path = checkpoint_path or tf.train.latest_checkpoint(
        os.path.join(logdir, rundir.CHECKPOINTS))
    if not checkpoint_path:
        raise ExportError(f'no checkpoint in {logdir!r}/{rundir.CHECKPOINTS}')
    checkpoint = tf.train.Checkpoint(learner=learner)
    try:
        checkpoint.restore(checkpoint_path).expect_partial()
    except (tf.errors.OpError, ValueError, AssertionError) as e:
        raise ExportError(f'cannot restore {checkpoint_path}: {rundir.describe(e)}') from None
    return learner.core, setup.action_space, setup.observation_space, run['env']


def main(argv):
    del argv
    from absl import flags
    FLAGS = flags.FLAGS
    try:
        core, action_space, obs_space, env_id = restore_core(FLAGS.logdir, FLAGS.checkpoint)
        path = export_policy(core, action_space, obs_space, env_id, FLAGS.output)
    except (ValueError, rundir.TrainingError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(path)


if __name__ == '__main__':
    from absl import app, flags
    flags.DEFINE_string('logdir', None, 'a run directory (launch/run.py --logdir)', required=True)
    flags.DEFINE_string('checkpoint', None, 'checkpoint path (default: the latest in logdir)')
    flags.DEFINE_string('output', None, 'where to write the SavedModel', required=True)
    app.run(main)
