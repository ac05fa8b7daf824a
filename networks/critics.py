"""An ensemble of Q networks evaluated as one: SAC's twin (or more) critics.

The replicas share the observation encoder (flatten / one-hot for vector
observations, the CNN for images, as in DrQ; for a Tuple / Dict, one image
torso per image member beside the flattened vector members: `ObservationTorso`)
and each has its own MLP. The MLPs are stored stacked (`[R, in, out]` per
layer) and run as batched matmuls, so R critics cost about one call's
overhead instead of R; on this library's small CPU machines that overhead,
not the arithmetic, bounds the learner's updates per second.

Inputs are the observation and the continuous part of the action (`[N, d]`,
`d = 0` for purely discrete actions); the output is `[R, N, num_outputs]`:
one value (continuous actions) or one value per discrete action of each
branch, concatenated.
"""

from typing import Any, Optional, Sequence

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from reverb_agents.networks.observations import ObservationTorso
from reverb_agents.networks.user import LSTMMemory, make_torso


class StackedMLP(snt.Module):
    """R independent MLPs run together: `[N, in]` (shared) or `[R, N, in]` -> `[R, N, out]`.

    ReLU between layers, none after the last. Weights start like `snt.Linear`'s
    (truncated normal, stddev 1/sqrt(fan_in)), biases at zero.
    """

    def __init__(self, num_replicas: int, output_sizes: Sequence[int],
                 name: Optional[str] = None):
        super().__init__(name=name)
        self._num_replicas = num_replicas
        self._output_sizes = tuple(output_sizes)
        self._weights = None
        self._biases = None

    @snt.once
    def _build(self, input_size: int) -> None:
        self._weights, self._biases = [], []
        fan_in = input_size
        for i, size in enumerate(self._output_sizes):
            init = tf.random.truncated_normal([self._num_replicas, fan_in, size],
                                              stddev=1.0 / np.sqrt(fan_in))
            self._weights.append(tf.Variable(init, name=f'w_{i}'))
            self._biases.append(tf.Variable(tf.zeros([self._num_replicas, 1, size]),
                                            name=f'b_{i}'))
            fan_in = size

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        self._build(int(x.shape[-1]))
        last = len(self._weights) - 1
        for i, (w, b) in enumerate(zip(self._weights, self._biases)):
            if x.shape.rank == 2:  # the shared input of the first layer
                # Broadcast + batched matmul measured a little faster than an einsum.
                shape = tf.concat([[self._num_replicas], tf.shape(x)], 0)
                x = tf.matmul(tf.broadcast_to(x[None], shape), w) + b
            else:
                x = tf.matmul(x, w) + b
            if i < last:
                x = tf.nn.relu(x)
        return x


class CriticEnsemble(snt.Module):
    """`num_replicas` critics Q(observation, continuous action) -> `[R, N, num_outputs]`."""

    def __init__(self, observation_space: gym.Space, num_replicas: int,
                 hidden_sizes: Sequence[int], num_outputs: int, torso: str = 'auto',
                 torso_kwargs: str = '', memory_size: int = 0, name: Optional[str] = None):
        """`memory_size` > 0: an LSTM of the replicas' own over the encoded observations
        (`remember`), whose output the caller passes back as `memory`."""
        super().__init__(name=name)
        self.num_replicas = num_replicas
        self._memory = LSTMMemory(memory_size, name='memory') if memory_size else None
        # hidden_sizes=() makes the vector torso a flatten (/ one-hot): the replicas'
        # own MLPs do the work. A torso of the user's own (`MODULE:FUNCTION`) is a copy
        # of its own per ensemble (the factory called again).
        self._encoder = make_torso(observation_space, torso, (), torso_kwargs)
        self._mlps = StackedMLP(num_replicas, list(hidden_sizes) + [num_outputs], name='mlps')

    def __call__(self, observation: Any, continuous_action: tf.Tensor,
                 memory: Optional[tf.Tensor] = None) -> tf.Tensor:
        """observation nest `[N, ...]`, continuous_action `[N, d]` -> `[R, N, num_outputs]`.

        `memory` `[N, H]`: extra input, e.g. a recurrent actor's LSTM output, so the
        critics of a partially observed task see the history too.
        """
        parts = [self._encoder(observation)]
        if memory is not None:
            parts.append(memory)
        return self._mlps(tf.concat(parts + [continuous_action], -1))

    def remember(self, observation: Any, first: tf.Tensor, burn_in: int) -> tf.Tensor:
        """The ensemble's own memory over sequences: observation nest `[S, B, ...]`,
        first `[S, B]` -> `[S - burn_in, B, H]`. The state starts at zero at step 0 and
        wherever `first` is true; no gradient reaches the first `burn_in` steps (R2D2)."""
        steps, batch = tf.shape(first)[0], tf.shape(first)[1]
        encoded = self._encoder(tf.nest.map_structure(
            lambda x: tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0)), observation))
        encoded = tf.reshape(encoded, tf.stack([steps, batch, encoded.shape[-1]]))

        state = self._memory.initial_state(batch)
        if burn_in:
            _, state = self._memory.unroll(encoded[:burn_in], first[:burn_in], state)
            state = tf.nest.map_structure(tf.stop_gradient, state)
        return self._memory.unroll(encoded[burn_in:], first[burn_in:], state)[0]

    @property
    def encoder(self) -> ObservationTorso:
        """The observation encoder the replicas share (a core may use it as its torso:
        `networks.cores.SoftQPolicyHead`)."""
        return self._encoder

    @property
    def input_size(self) -> int:
        """Width of the replicas' MLP input (encoding, memory, action); needs built variables."""
        return int(self._mlps._weights[0].shape[1])

    def from_encoding(self, encoded: tf.Tensor) -> tf.Tensor:
        """`[N, E]` (the encoder's output, no memory, no continuous action) ->
        `[R, N, num_outputs]`: the same values as `__call__` for purely discrete actions."""
        return self._mlps(encoded)
