"""Acting for a batch of environments: one policy call per step, numpy in and out.

`Policy` acts through `networks.numpy_core.NumpyCore` where the core allows it
(see that module for why), and otherwise through the TF core's step, called as
a concrete function of its flat inputs (`make_policy_step`). The actor loop
(`launch/acting/actor.py`) and the evaluation (`launch/evaluation/episodes.py`) act with it.
"""

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.numpy_core import NumpyCore


def make_policy_step(core: ActorCriticCore, action_space: ActionSpace,
                     deterministic: bool = False) -> Callable:
    """The batched acting function, numpy in and out: one core step and an action per
    environment. It calls a concrete function of the flat inputs (any batch size), traced
    once per input dtypes and trailing shapes: an image torso's step then costs half of
    what a `tf.function`'s own argument handling made it (docs/benchmarks.md#the-test-suite)."""

    def policy_step(observation, prev_action, prev_reward, first, state, task):
        outputs, new_state = core(
            CoreInputs(observation, prev_action, prev_reward, first, task), state)
        params = outputs.policy_params
        action = action_space.mode(params) if deterministic else action_space.sample(params)
        log_prob = action_space.log_prob(params, action)
        return action, params, log_prob, outputs.baseline, new_state

    compiled = {}  # (dtype, trailing shape) per input leaf -> (function, [outputs])

    def step(*inputs):
        flat = [np.asarray(x) for x in tf.nest.flatten(inputs)]
        key = tuple((x.dtype, x.shape[1:]) for x in flat)
        if key not in compiled:
            outputs = []

            def flat_step(*leaves):
                outputs.append(policy_step(*tf.nest.pack_sequence_as(inputs, list(leaves))))
                return tf.nest.flatten(outputs[0])

            specs = [tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in flat]
            # No tensor-dependent Python control flow; tracing is ~3x faster.
            compiled[key] = (tf.function(flat_step, autograph=False).get_concrete_function(
                *specs), outputs)
        function, outputs = compiled[key]
        return tf.nest.pack_sequence_as(outputs[0], [x.numpy() for x in function(*flat)])

    return step


class Policy:
    """Acting for a batch of environments, numpy in and out.

    Uses `NumpyCore` where the core allows it (see `networks.numpy_core` for
    why) and the TF core otherwise; `refresh()` after the weights change.
    """

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, seed: int,
                 deterministic: bool = False, use_numpy: bool = True):
        self._numpy = (NumpyCore(core, action_space, seed, deterministic)
                       if use_numpy and NumpyCore.supports(core) else None)
        self._tf_step = None if self._numpy else make_policy_step(core, action_space,
                                                                  deterministic)
        self._core = core

    @property
    def uses_numpy(self) -> bool:
        return self._numpy is not None

    def initial_state(self, batch_size: int) -> Any:
        if self._numpy:
            return self._numpy.initial_state(batch_size)
        return tf.nest.map_structure(lambda x: x.numpy(), self._core.initial_state(batch_size))

    def refresh(self) -> None:
        if self._numpy:
            self._numpy.refresh()

    def __call__(self, observation, prev_action, prev_reward, first, state, task=None):
        """-> (action per leaf, params per leaf, log_prob [B], baseline [B], new state);
        `task` `[B]` int32 picks each row's baseline output (None: task 0)."""
        if self._numpy:
            return self._numpy.step(observation, prev_action, prev_reward, first, state, task)
        return self._tf_step(observation, prev_action, prev_reward, first, state,
                             () if task is None else task)
