"""The one trajectory format every agent reads.

A Reverb item is a `Sequence`: `sequence_length` consecutive `Step`s of one
environment plus the core state before its first step. Actors write them with
a period of `sequence_length - 1`, so consecutive items overlap by one step
and the learner can bootstrap from the last one.

Grouped items (SAC): one item holds the same `L` steps of *all* `E`
environments of an actor (`[L, E, ...]`, core state `[E, ...]`), so a
learner batch of 256 transitions is 256 / E samples instead of 256. Reverb's
CPU cost per sampled item hardly depends on the item's size, so ungrouped
length-2 items capped a SAC learner's feed well below what its update could
take (measured: docs/benchmarks.md#replay-and-the-data-pipeline). The price:
the environments of one time step share a batch. The
dataset turns grouped items back into `[L, B]` batches.

Episode ends. Vector environments run in gymnasium's default autoreset mode
(`NEXT_STEP`): when an episode ends, the next step holds the episode's final
observation (whose value bootstraps a truncation), and the step after it is
the `first` step of the next episode. The step holding the final observation
is a placeholder transition: its action was never executed, its reward and
discount are 0. A step `t` is real experience exactly when `first[t + 1]` is
false; learners mask the rest (`valid_mask`). `discount[t]` is 0 where the
action of step `t` terminated the episode and 1 otherwise, including a
time-limit truncation, which therefore bootstraps from the final observation.
"""

from typing import Any, NamedTuple, Tuple

import numpy as np
import tensorflow as tf


class Step(NamedTuple):
    """One time step of one environment. Leading dims: none, `[B]` or `[T, B]`."""
    observation: Any  # nest of [*obs_shape]
    action: Tuple[Any, ...]  # per action leaf: [] int32 or [d] float32
    reward: Any  # [] float32, or [k] for k-component rewards (SAC's reward_weights)
    discount: Any  # [] float32: 0 where the action terminated the episode
    first: Any  # [] bool: a new episode starts at this step
    prev_action: Tuple[Any, ...]  # per action leaf, the action before this step
    prev_reward: Any  # [] float32
    behaviour_params: Tuple[Any, ...]  # per action leaf: [param_size]
    behaviour_log_prob: Any  # [] float32: log mu(action)
    behaviour_baseline: Any  # [] float32: the actor's value estimate
    task: Any  # [] int32: the task of a task sequence (`--tasks`); 0 otherwise


class Sequence(NamedTuple):
    """One Reverb item: `steps` with leading `[L]`, `core_state` before steps[0]."""
    steps: Step
    core_state: Any


def step_spec(observation_spec: Any, action_specs: Tuple[tf.TensorSpec, ...],
              param_specs: Tuple[tf.TensorSpec, ...], reward_size: int = 0) -> Step:
    """The `Step` of `tf.TensorSpec`s (no leading dims); `reward_size` k > 0
    stores rewards of k components (`prev_reward` stays their weighted sum)."""
    scalar = tf.TensorSpec([], tf.float32)
    return Step(
        observation=observation_spec,
        action=tuple(action_specs),
        reward=tf.TensorSpec([reward_size], tf.float32) if reward_size else scalar,
        discount=scalar,
        first=tf.TensorSpec([], tf.bool),
        prev_action=tuple(action_specs),
        prev_reward=scalar,
        behaviour_params=tuple(param_specs),
        behaviour_log_prob=scalar,
        behaviour_baseline=scalar,
        task=tf.TensorSpec([], tf.int32))


def sequence_signature(step: Step, core_state_spec: Any, sequence_length: int,
                       envs_per_item: int = 0) -> Sequence:
    """The Reverb table signature of one item (`envs_per_item > 0`: grouped items)."""
    group = [envs_per_item] if envs_per_item else []
    steps = tf.nest.map_structure(
        lambda s: tf.TensorSpec([sequence_length, *group, *s.shape], s.dtype), step)
    core_state = tf.nest.map_structure(
        lambda s: tf.TensorSpec([*group, *s.shape], s.dtype), core_state_spec)
    return Sequence(steps=steps, core_state=core_state)


def envs_per_item(signature: Sequence) -> int:
    """E of a grouped signature (`discount` is `[L, E]`), 0 for one environment per item."""
    shape = signature.steps.discount.shape
    return int(shape[1]) if shape.rank == 2 else 0


def zeros(spec: Any, leading: Tuple[int, ...] = ()) -> Any:
    """A nest of numpy zeros shaped `[*leading, *spec.shape]`."""
    return tf.nest.map_structure(
        lambda s: np.zeros(tuple(leading) + tuple(s.shape), s.dtype.as_numpy_dtype), spec)


def valid_mask(first: tf.Tensor) -> tf.Tensor:
    """`first` `[T + 1, B]` -> `[T, B]` float32, 1 where step t is real experience."""
    return 1.0 - tf.cast(first[1:], tf.float32)
