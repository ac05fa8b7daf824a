"""Demonstrations in the learner (`agents.signals`): the buffer GAIL and behavioural
cloning sample from, and cloning's loss of a core unrolled over demonstration windows."""

from typing import Any, Dict, Tuple

import gymnasium as gym
import tensorflow as tf

from reverb_agents.agents.signals.losses import bc_loss, cloning_losses
from reverb_agents.networks.cores import CoreInputs
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import demos as demos_lib
from reverb_agents.replay import trajectory

class DemoBuffer(tf.Module):
    """Demonstration steps (`replay.demos.transitions`) as constants; uniform
    samples inside a traced step."""

    def __init__(self, path: str, action_space: ActionSpace, observation_dtype: tf.DType):
        super().__init__(name='demos')
        steps = demos_lib.transitions(demos_lib.load_demos(path))
        self.size = int(len(steps['first']))
        self._observation = tf.constant(steps['observation'], observation_dtype)
        self._action = tuple(tf.constant(a) for a in action_space.from_env(steps['action']))
        self._prev_action = tuple(tf.constant(a)
                                  for a in action_space.from_env(steps['prev_action']))
        self._prev_reward = tf.constant(steps['prev_reward'], tf.float32)
        self._first = tf.constant(steps['first'], tf.bool)

    def sample(self, n: int) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        """`n` uniformly drawn steps: (observation `[n, ...]`, per-leaf action `[n, ...]`)."""
        index = tf.random.uniform([n], 0, self.size, dtype=tf.int32)
        return (tf.gather(self._observation, index),
                tuple(tf.gather(a, index) for a in self._action))

    def sample_sequences(self, length: int, n: int) -> Dict[str, Any]:
        """`n` windows of `length` consecutive steps, time-major `[length, n, ...]`:
        observation, action, prev_action, prev_reward, first (true at each window's
        start too, so a recurrent core starts from its initial state there)."""
        length = min(length, self.size)
        start = tf.random.uniform([n], 0, self.size - length + 1, dtype=tf.int32)
        index = tf.range(length)[:, None] + start[None, :]  # [length, n]
        gather = lambda x: tf.gather(x, index)  # noqa: E731
        first = tf.logical_or(gather(self._first), tf.range(length)[:, None] == 0)
        return {'observation': gather(self._observation),
                'action': tuple(gather(a) for a in self._action),
                'prev_action': tuple(gather(a) for a in self._prev_action),
                'prev_reward': gather(self._prev_reward), 'first': first}


def zeros_like_specs(observation_space: gym.Space, action_space: ActionSpace
                     ) -> Tuple[Any, Tuple[tf.Tensor, ...]]:
    """A batch of one zero observation and action (to build models before a restore)."""
    return (trajectory.zeros(observation_spec(observation_space), (1,)),
            trajectory.zeros(action_space.action_specs(), (1,)))


def demo_cloning_loss(demos: DemoBuffer, core: Any, action_space: ActionSpace, length: int,
                      n: int) -> tf.Tensor:
    """Behavioural cloning `[]` on `n` windows of `length` demonstration steps: `core`
    (an `ActorCriticCore`) unrolled over them from its initial state, the mean
    `cloning_losses` of the demonstrated actions under its policy."""
    demo = demos.sample_sequences(length, n)
    inputs = CoreInputs(demo['observation'], demo['prev_action'], demo['prev_reward'],
                        demo['first'])
    outputs, _ = core.unroll(inputs, core.initial_state(n))
    return bc_loss(cloning_losses(action_space, outputs.policy_params, demo['action']))
