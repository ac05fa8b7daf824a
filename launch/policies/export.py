"""SavedModel export of a trained policy, loadable with TensorFlow alone.

`python launch/policies/export.py --logdir=DIR [--checkpoint=PATH] --output=DIR`
exports from a run's checkpoint; every run exports its final policy to
`<logdir>/saved_model` (`launch/learning/learner_loop.py`) unless given `--noexport`.

Signatures (all batched `[B, ...]`; names are the inputs' and outputs' keys):
- `initial_state(batch_size: int32 [])` -> `state_0 ... state_K`: the core's
  recurrent state (a feed-forward policy has one `[B, 0]` placeholder, so
  every signature has the same shape of interface);
- `step(observation..., first, prev_action..., prev_reward, state_0 ... state_K)` ->
  `action...`, `state_0 ... state_K`: samples an action. `first` (bool `[B]`) is
  true at an episode's first step: there the policy starts from its initial
  state and ignores `prev_action` and `prev_reward` (zeros will do), as the
  library's actors do; elsewhere `prev_action` is the action taken at the
  previous step and `prev_reward` (float32 `[B]`) the reward it earned. A policy
  with a learned action repeat (`--step_mul`, `launch/environments/action_repeat.py`) also
  takes `prev_step_mul` (int32 `[B]`, the previous decision's repeat count) and
  outputs `step_mul` (int32 `[B]`, in 1..N): take the action that many times;
- `step_deterministic(...)`: the same with the greedy / mean action;
- `policy_params(...)`: the same inputs -> `params_0 ... params_L`, `state_0 ...
  state_K`: the policy's distribution parameters, one tensor per action leaf in
  the library's format (the specs' `policy` lists each leaf's kind and width;
  `agents.prior` reads them for `--prior_actor`);
- `specs()` -> `specs`: JSON (also `assets/specs.json`): env id and the run's
  `env_kwargs`, observation inputs and action outputs (`observation_inputs`,
  `action_outputs`: name, path in the environment's nest, shape, dtype), state
  shapes and dtypes, the policy's leaves, `conditions_on_previous` (whether
  `prev_action` and `prev_reward` reach the policy at all).

Observations and actions of any nest (`Tuple` / `Dict`, an action mask) are one
tensor per leaf, named by `launch/policies/signatures.py` (`observation_image`, `action_0`,
`prev_action_0`; a single tensor is `observation`, `action`, `prev_action`).
Actions are in the environment's format (`Discrete`: the integer including
`start`; `MultiDiscrete`: the integer array; `Box`: the float array clipped to
the bounds; a SAC policy's squashed action is rescaled to them; SAC exports its
actor only, or, with `--discrete_policy=critic`, the critics and temperatures its
softmax(Q / alpha) policy acts with). For a single action tensor the specs keep
`first_prev_action`, the `prev_action` that encodes "none" without `first`.
"""

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, Mapping, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf
from absl import logging

from reverb_agents.agents import configs, registry
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.policies import signatures
from reverb_agents.launch.environments.action_repeat import ACTION, STEP_MUL
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.policies.signatures import ExportError
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import (
    ActionSpace, UnsupportedSpaceError, env_action_tensor, to_unit_interval)
from reverb_agents.networks import torsos
from reverb_agents.networks.observations import ACTION_MASK


def _first_prev_action(space: gym.Space):
    """The `prev_action` meaning "none" without `first`: one below each categorical range
    (an all-zero one-hot, `tf.one_hot` of an index out of range); zeros for a `Box`."""
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
                 observation_space: gym.Space, env: Dict[str, Any]):
        super().__init__(name='policy')
        space = action_space.space
        # A learned action repeat (`launch.environments.action_repeat`): the environment's action
        # plus a last categorical leaf, exported as its own `step_mul` output.
        self._max_step_mul = 0
        if isinstance(space, gym.spaces.Dict) and list(space.spaces) == [ACTION, STEP_MUL]:
            space, self._max_step_mul = space[ACTION], int(space[STEP_MUL].n)
        try:
            self._observations = signatures.observation_parts(observation_space)
            self._action_parts = signatures.action_parts(space)
        except UnsupportedSpaceError as e:
            raise ExportError(str(e)) from None
        self._core, self._actions = core, action_space
        # How many of the library's action leaves each component is (MultiDiscrete: one
        # per entry), in the order `networks.distributions` flattens them, and whether
        # its actions are in [-1, 1] units (rescaled to its bounds).
        self._leaf_counts = [len(ActionSpace(p.space).leaves) for p in self._action_parts]
        starts = np.cumsum([0] + self._leaf_counts[:-1])
        self._rescaled = [any(leaf.rescaled for leaf in action_space.leaves[s:s + n])
                          for s, n in zip(starts, self._leaf_counts)]
        self._state_structure = core.initial_state(1)
        flat_state = tf.nest.flatten(self._state_structure)
        self._state_specs = ([tf.TensorSpec([None, *s.shape[1:]], s.dtype) for s in flat_state]
                             or [tf.TensorSpec([None, 0], tf.float32)])
        inputs = {
            **{p.name: p.batched() for p in self._observations},
            'first': tf.TensorSpec([None], tf.bool, name='first'),
            **{p.prev_name: p.batched(p.prev_name) for p in self._action_parts},
            'prev_reward': tf.TensorSpec([None], tf.float32, name='prev_reward'),
            **({'prev_step_mul': tf.TensorSpec([None], tf.int32, name='prev_step_mul')}
               if self._max_step_mul else {}),
            **{f'state_{i}': tf.TensorSpec(s.shape, s.dtype, name=f'state_{i}')
               for i, s in enumerate(self._state_specs)},
        }
        self.specs_json = json.dumps(self._specs(env, observation_space, space))
        self._unroll = _concrete(lambda **kw: self._unroll_step(kw), **inputs)  # traced once
        self.step = _concrete(lambda **kw: self._step(False, **kw), **inputs)
        self.step_deterministic = _concrete(lambda **kw: self._step(True, **kw), **inputs)
        self.policy_params = _concrete(self._policy_params, **inputs)
        self.initial_state = _concrete(self._initial_state,
                                       tf.TensorSpec([], tf.int32, name='batch_size'))
        specs = self.specs_json
        self.specs = _concrete(lambda: {'specs': tf.constant(specs)})

    def _specs(self, env: Dict[str, Any], observation_space: gym.Space, space: gym.Space) -> dict:
        first = self._observations[0]
        if first.name == 'observation':  # one tensor (beside a mask): shape, dtype, its key
            observation = {'shape': first.spec.shape.as_list(), 'dtype': first.spec.dtype.name,
                           **({'key': first.path[0]} if first.path else {})}
        else:
            observation = {'space': repr(observation_space)}
        single = not self._action_parts[0].path  # one action tensor
        action = {'space': repr(space)}
        if single:
            spec = self._action_parts[0].spec
            action.update(shape=spec.shape.as_list(), dtype=spec.dtype.name)
        mask = [p for p in self._observations if p.name == ACTION_MASK]
        return {
            **env,  # `env` (the id) and `env_kwargs`
            'observation': observation,
            **({ACTION_MASK: {'shape': mask[0].spec.shape.as_list(), 'dtype': 'float32'}}
               if mask else {}),
            'action': action,
            'state': [{'shape': list(s.shape[1:]), 'dtype': s.dtype.name}
                      for s in self._state_specs],
            **({'first_prev_action': _first_prev_action(space)} if single else {}),
            'policy': self._actions.policy_spec(),
            'conditions_on_previous': bool(self._core.condition_on_previous),
            'observation_inputs': [p.describe() for p in self._observations],
            'action_outputs': [dict(p.describe(), prev_name=p.prev_name)
                               for p in self._action_parts],
            **({'step_mul': self._max_step_mul} if self._max_step_mul else {}),
        }

    def _initial_state(self, batch_size: tf.Tensor) -> Dict[str, tf.Tensor]:
        flat = tf.nest.flatten(self._core.initial_state(batch_size))
        if not flat:
            flat = [tf.zeros([batch_size, 0], tf.float32)]
        return {f'state_{i}': s for i, s in enumerate(flat)}

    def _component_leaves(self, space: gym.Space, rescaled: bool, env_action: tf.Tensor):
        """One action component in the environment's format -> its library leaves."""
        batch = tf.shape(env_action)[0]
        if isinstance(space, gym.spaces.Discrete):
            return (tf.cast(env_action - int(space.start), tf.int32),)
        if isinstance(space, gym.spaces.MultiDiscrete):
            flat = tf.reshape(env_action, [batch, -1]) - np.asarray(space.start).ravel()
            return tuple(tf.cast(flat[:, i], tf.int32) for i in range(flat.shape[1]))
        action = tf.reshape(tf.cast(env_action, tf.float32), [batch, -1])
        if rescaled:  # the library's actions live in [-1, 1]
            low, high = (np.asarray(b, np.float32).ravel() for b in (space.low, space.high))
            action = to_unit_interval(action, low, high)
        return (action,)

    def _unroll_step(self, inputs: Dict[str, tf.Tensor]):
        """(per-leaf policy params, flat new state) of one core step."""
        first = inputs['first']
        flat_state = [inputs[f'state_{i}'] for i in range(len(self._state_specs))]
        structure = tf.nest.pack_sequence_as(
            self._state_structure, flat_state[:len(tf.nest.flatten(self._state_structure))])
        prev_leaves = ()
        for part, rescaled in zip(self._action_parts, self._rescaled):
            prev_leaves += self._component_leaves(part.space, rescaled, inputs[part.prev_name])
        if self._max_step_mul:  # the head's value is the repeat count - 1
            prev_leaves += (inputs['prev_step_mul'] - 1,)
        # The core zeroes the previous action and reward where `first` is true and
        # restarts the state there; `where` also keeps a NaN fed at a first step out.
        prev_leaves = tuple(a if a.dtype.is_integer else tf.where(first[:, None], 0.0, a)
                            for a in prev_leaves)
        prev_reward = tf.where(first, 0.0, inputs['prev_reward'])
        observation = signatures.pack(self._observations,
                                      [inputs[p.name] for p in self._observations])
        outputs, new_state = self._core(
            CoreInputs(observation, prev_leaves, prev_reward, first), structure)
        new_flat = tf.nest.flatten(new_state) or flat_state
        return outputs.policy_params, {f'state_{i}': s for i, s in enumerate(new_flat)}

    def _step(self, deterministic: bool, **inputs) -> Dict[str, tf.Tensor]:
        params, new_state = self._unroll(**inputs)
        leaves = self._actions.mode(params) if deterministic else self._actions.sample(params)
        outputs, start = {}, 0
        for part, count, rescaled in zip(self._action_parts, self._leaf_counts, self._rescaled):
            outputs[part.name] = env_action_tensor(part.space, rescaled,
                                                   leaves[start:start + count])
            start += count
        if self._max_step_mul:
            outputs['step_mul'] = leaves[-1] + 1
        return {**outputs, **new_state}

    def _policy_params(self, **inputs) -> Dict[str, tf.Tensor]:
        params, new_state = self._unroll(**inputs)
        return {**{f'params_{i}': p for i, p in enumerate(params)}, **new_state}


def export_policy(core: ActorCriticCore, action_space: ActionSpace,
                  observation_space: gym.Space, env_id: str, output_dir: str,
                  env_kwargs: Optional[Mapping[str, Any]] = None) -> str:
    """Writes the SavedModel to `output_dir` (replaced atomically); returns the path. Its
    specs record `env_kwargs` (a run's `--env_kwargs`) as each value's repr (a literal).
    Traced in float32 whatever the run's `torso_precision`: any CPU runs the export."""
    env = {'env': env_id, **({'env_kwargs': {k: repr(v) for k, v in env_kwargs.items()}}
                             if env_kwargs else {})}
    with torsos.precision_scope('float32'):  # the signatures are traced here
        module = ExportedPolicy(core, action_space, observation_space, env)
    parent = os.path.dirname(os.path.abspath(output_dir)) or '.'
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix='.saved_model_', dir=parent)
    specs_path = os.path.join(staging, 'specs.json')
    with open(specs_path, 'w') as f:
        f.write(module.specs_json)
    module.specs_asset = tf.saved_model.Asset(specs_path)
    names = ('initial_state', 'step', 'step_deterministic', 'policy_params', 'specs')
    tf.saved_model.save(module, os.path.join(staging, 'model'),
                        signatures={name: getattr(module, name) for name in names})
    shutil.rmtree(output_dir, ignore_errors=True)
    os.replace(os.path.join(staging, 'model'), output_dir)
    shutil.rmtree(staging)
    return output_dir


def export_run_policy(core: ActorCriticCore, action_space: ActionSpace,
                      observation_space: gym.Space, options: RunOptions,
                      path: Optional[str] = None) -> Optional[str]:
    """A run's policy (its env and env_kwargs recorded) as `path` (default
    `<logdir>/saved_model`); None (with a warning) if unsupported."""
    try:
        return export_policy(core, action_space, observation_space, options.env,
                             path or os.path.join(options.logdir, 'saved_model'),
                             options.env_kwargs)
    except ExportError as e:
        logging.warning('no SavedModel: %s', e)
        return None


def restore_learner(logdir: str, checkpoint_path: Optional[str] = None):
    """Rebuilds a run's learner from `<logdir>/run_config.json` and restores a checkpoint
    (default: the latest): returns (learner, action space, observation space, env id)."""
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
    return learner, setup.action_space, setup.observation_space, run['env']


def restore_core(logdir: str, checkpoint_path: Optional[str] = None):
    """`restore_learner`'s, with the core holding the policy a run evaluates and exports
    (the learner's `final_policy`, an average of its weights, kept): returns (core,
    action space, observation space, env id)."""
    learner, *rest = restore_learner(logdir, checkpoint_path)
    final_policy = learner.final_policy()
    if final_policy is not None:
        variables = learner.core.variables
        with final_policy:
            values = [v.numpy() for v in variables]
        for variable, value in zip(variables, values):
            variable.assign(value)
    return (learner.core, *rest)


def main(argv):
    del argv
    from absl import flags
    FLAGS = flags.FLAGS
    try:
        core, action_space, obs_space, env_id = restore_core(FLAGS.logdir, FLAGS.checkpoint)
        env_kwargs = rundir.read_run_config(FLAGS.logdir)['env_options'].get('env_kwargs')
        path = export_policy(core, action_space, obs_space, env_id, FLAGS.output, env_kwargs)
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
